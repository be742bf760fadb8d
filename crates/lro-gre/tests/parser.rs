//! The engine's parser through GRE (`parse_with::<Gre>`): what it says of the headers inside
//! a tunnel.

use lro_core::parse::{self, FlowHint};
use lro_core::testing::{FrameSpec, TCP_ACK};
use lro_core::{LinkKind, PassReason, RxMeta};
use lro_gre::testing::{GreSpec, InnerFrame};
use lro_gre::Gre;
use lro_testkit::frame::bytes_of;

const PAYLOAD: [u8; 64] = [0x3c; 64];

/// A TCP frame (`v6` inside, timestamps, `payload` bytes, with a tag when bridged and
/// `inner_tag`) wrapped in `gre`.
fn tunnelled(gre: &GreSpec, v6: bool, inner_tag: bool, payload: usize) -> Vec<u8> {
    let mut inner = if v6 {
        FrameSpec::ipv6_tcp(40000, 5201)
    } else {
        FrameSpec::ipv4_tcp(40000, 5201)
    };
    inner = inner
        .seq(7)
        .ack(8)
        .flags(TCP_ACK)
        .timestamps(1, 2)
        .payload(&PAYLOAD[..payload]);
    if gre.teb && inner_tag {
        inner = inner.vlan(0x8100, 12);
    }
    let b = bytes_of(&inner);
    let frame = InnerFrame::Ethernet(&b);
    let mut out = vec![0; gre.wrapped_len(frame).expect("wraps")];
    gre.write(frame, &mut out).expect("wraps");
    out
}

/// The metadata of `gre`'s link, with a stripped tag or not.
fn meta(gre: &GreSpec, stripped: Option<u16>) -> RxMeta {
    let m = RxMeta::new(gre.link.kind(), 0);
    match stripped {
        Some(tci) if gre.link.kind() == LinkKind::Ethernet => m.with_vlan_stripped(tci),
        _ => m,
    }
}

/// The bytes after the outer datagram are padding, not the bridged frame's header: an
/// Ethernet header (or its tag) cut by the datagram's end is malformed, whatever the padding
/// holds.
#[test]
fn a_bridged_header_cut_by_the_outer_datagrams_end_is_malformed() {
    for inner_tag in [false, true] {
        let g = GreSpec::ipv4().teb();
        let full = tunnelled(&g, false, inner_tag, 10);
        let m = meta(&g, None);
        let gre_end = g.header_len();
        // End the outer datagram inside the inner Ethernet header (and inside the tag), and
        // pad the frame to its old length with zeros, as a NIC pads a short frame.
        for keep in [6, 13, 15, 17] {
            let mut f = full[..gre_end + keep].to_vec();
            let total = u16::try_from(f.len() - 14).expect("short");
            f[16..18].copy_from_slice(&total.to_be_bytes());
            f.resize(full.len(), 0);
            let u = parse::parse_with::<Gre>(&f, &m).expect_err("cut");
            assert_eq!(u.reason, PassReason::Malformed, "{keep} bytes kept");
            assert!(matches!(u.hint, FlowHint::Tunnel(_)), "{u:?}");
        }
    }
}

/// An IPv4 fragment inside the tunnel is a fragment of the protocol it names: a TCP fragment
/// is `Fragment`, another protocol's is that protocol's frame (`NotTcp`; a GRE tunnel in the
/// tunnel, `Encap`), as without a tunnel.
#[test]
fn an_inner_ipv4_fragment_is_a_fragment_of_its_protocol() {
    let g = GreSpec::ipv6();
    let m = meta(&g, None);
    let inner_l3 = g.header_len();
    for (protocol, want) in [
        (6, PassReason::Fragment),
        (17, PassReason::NotTcp),
        (47, PassReason::Encap),
    ] {
        let mut f = tunnelled(&g, false, false, 10);
        f[inner_l3 + 6] |= 0x20; // MF
        f[inner_l3 + 9] = protocol;
        let u = parse::parse_with::<Gre>(&f, &m).expect_err("a fragment");
        assert_eq!(u.reason, want, "protocol {protocol}");
        assert!(matches!(u.hint, FlowHint::Tunnel(_)), "{u:?}");
        // The same datagram without a tunnel.
        let plain = &f[inner_l3 - 14..];
        let mut plain = plain.to_vec();
        plain[12..14].copy_from_slice(&[0x08, 0x00]);
        let u = parse::parse(&plain, &RxMeta::ethernet(0)).expect_err("a fragment");
        let plain_want = if protocol == 6 {
            PassReason::Fragment
        } else {
            PassReason::NotTcp
        };
        assert_eq!(u.reason, plain_want, "protocol {protocol} without a tunnel");
    }
}
