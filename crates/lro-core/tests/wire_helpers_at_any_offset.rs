//! The `wire` panic contract: "a read past the end of the slice gives zero, a write past the
//! end is skipped", for every offset, including those where `at + width` overflows `usize`.

use lro_core::wire::{be16, be32, write_be16, write_be32};

#[test]
fn offsets_near_usize_max_read_zero_and_write_nothing() {
    let mut b = [0xa5u8; 8];
    for at in [usize::MAX, usize::MAX - 1, usize::MAX - 2, usize::MAX - 3] {
        assert_eq!(be16(&b, at), 0);
        assert_eq!(be32(&b, at), 0);
        write_be16(&mut b, at, 0x1234);
        write_be32(&mut b, at, 0x1234_5678);
    }
    assert_eq!(b, [0xa5; 8]);
    // In bounds still works, and the last whole field is read.
    assert_eq!(be16(&b, 6), 0xa5a5);
    assert_eq!(be32(&b, 5), 0);
}
