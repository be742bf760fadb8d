//! `Layout::from_parsed` takes a `Parsed`, a public struct any caller can fill in. A `Parsed`
//! whose offsets are not a header stack (the TCP header past the payload offset, shorter than
//! 20 bytes, or overlapping the IP header) must be refused as `GsoError::Invalid`, never turned
//! into a layout that makes `gso::segment` index out of bounds.

use lro_core::gso::{self, GsoError, Layout};
use lro_core::parse::Parsed;
use proptest::prelude::*;

/// Runs `segment` on a layout from `p` (if accepted) with a header of the layout's length.
fn segment_with(p: &Parsed, frame: &[u8]) -> Result<usize, GsoError> {
    let layout = Layout::from_parsed(p, frame)?;
    let hdr = layout.header_len();
    let mut out = vec![0u8; hdr + 64];
    let body = [7u8; 30];
    gso::segment(&layout, &frame[..hdr], [&body[..]], 10, &mut out, |_| ())
}

/// Both a layout from `p` and segmenting with it are refused as `Invalid`.
fn assert_refused(p: &Parsed, frame: &[u8], case: &str) {
    assert_eq!(
        Layout::from_parsed(p, frame).err(),
        Some(GsoError::Invalid),
        "{case}"
    );
    assert_eq!(segment_with(p, frame), Err(GsoError::Invalid), "{case}");
}

#[test]
fn offsets_that_are_not_a_header_stack_are_refused_not_a_panic() {
    // (TCP offset, payload offset) in a 40-byte frame: the TCP header "at" 60, past the
    // payload; 10 bytes between them, no room for a TCP header.
    for (l4, payload) in [(60, 40), (30, 40)] {
        let p = Parsed {
            l3: 0,
            l4,
            payload,
            ..Parsed::EMPTY
        };
        assert_refused(&p, &[0u8; 40], &format!("l4 {l4}"));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Whatever offsets a `Parsed` claims, building a layout and segmenting with it never
    /// panics.
    #[test]
    fn any_offsets_never_panic(
        l3 in 0u32..100,
        l4 in 0u32..100,
        payload in 0u32..100,
        v6 in any::<bool>(),
        frame_len in 0usize..120,
    ) {
        let mut p = Parsed::EMPTY;
        p.l3 = l3;
        p.l4 = l4;
        p.payload = payload;
        p.ip.v6 = v6;
        let frame = vec![0u8; frame_len];
        let _ = segment_with(&p, &frame);
    }
}

#[test]
fn an_ip_header_overlapping_the_tcp_header_is_refused() {
    // The TCP header starts inside the IPv4 (20 bytes) or IPv6 (40 bytes) header, with room
    // for itself before the payload.
    for (v6, l4) in [(false, 10), (true, 20)] {
        let mut p = Parsed {
            l3: 0,
            l4,
            payload: l4 + 20,
            ..Parsed::EMPTY
        };
        p.ip.v6 = v6;
        assert_refused(&p, &[0u8; 60], &format!("v6 {v6}"));
    }
}
