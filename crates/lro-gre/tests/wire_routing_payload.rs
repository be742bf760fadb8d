//! `Header::payload` says: "The bytes after the header (empty when the buffer is shorter than
//! the header)". With R, a header whose routing field cannot be measured (cut inside its
//! Source Route Entries, or without a null entry within `MAX_LEN`) is not whole, so nothing
//! after it can be located: no payload, not the routing bytes read as one.

use lro_gre::wire::{Header, MAX_LEN};

#[test]
fn no_payload_behind_an_unmeasurable_routing_field() {
    // R: checksum/offset word, one SRE announcing 8 bytes of routing information, of which
    // only 4 are there, and no null SRE.
    let mut cut = [0u8; 4 + 4 + 4 + 4];
    cut[0] = 0x40;
    cut[2..4].copy_from_slice(&[0x08, 0x00]);
    cut[8..12].copy_from_slice(&[0x08, 0x00, 0x00, 0x08]);
    cut[12..16].copy_from_slice(&[198, 18, 0, 9]);
    let h = Header::new_unchecked(&cut[..]);
    assert!(h.check_len().is_err());
    assert!(h.payload().is_empty(), "{:?}", h.payload());

    // An endless list of SREs: refused as a routing error, and no payload either.
    let mut long = [0u8; 4 + 4 + MAX_LEN];
    long[0] = 0x40;
    for sre in long[8..].chunks_exact_mut(4) {
        sre.copy_from_slice(&[0x08, 0x00, 0x00, 0x00]);
    }
    let h = Header::new_unchecked(&long[..]);
    assert!(h.check_len().is_err());
    assert!(h.payload().is_empty(), "{} bytes", h.payload().len());

    // The same header whole: its payload is what follows the null SRE.
    let mut whole = [0u8; 4 + 4 + 4 + 8 + 4 + 3];
    whole[..16].copy_from_slice(&cut);
    whole[16..20].copy_from_slice(&[198, 18, 0, 10]);
    whole[24..27].copy_from_slice(&[1, 2, 3]);
    let h = Header::new_checked(&whole[..]).unwrap();
    assert_eq!(h.header_len(), 24);
    assert_eq!(h.payload(), &[1, 2, 3]);
}
