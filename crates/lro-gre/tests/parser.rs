//! The engine's parser through GRE (`parse_with::<Gre>`, `parse_into::<Gre>`) against the
//! reference reader, field by field (`lro_testkit::parser`): tunnelled frames of every shape
//! (outer IPv4/IPv6 over Ethernet, a tag, raw IP or IPoIB; GRE with C, K, S and an RFC 1701
//! routing field; IPv4, IPv6 or a bridged, maybe tagged, Ethernet frame inside) and their near
//! misses: header bytes changed, the frame cut short or padded.

use lro_core::parse::{self, FlowHint};
use lro_core::testing::{Bytes, FrameSpec, TCP_ACK};
use lro_core::{LinkKind, PassReason, RxMeta};
use lro_gre::testing::{GreSpec, InnerFrame};
use lro_gre::wire::flags;
use lro_gre::Gre;
use lro_testkit::check::catch;
use lro_testkit::frame::{bytes_of, wrapped};
use proptest::prelude::*;

const PAYLOAD: [u8; 64] = [0x3c; 64];

/// The outer layers of shape `outer` (0: Ethernet and IPv4, 1: Ethernet and IPv6, 2: raw
/// IPv4, 3: IPoIB and IPv6), tagged or not, with the GRE `flags` (C, K, S, R; routing: these
/// Source Route Entries and the null one), bridging or not.
fn outer(outer: u8, tag: bool, gre_flags: u16, routing: &[u8], teb: bool) -> GreSpec {
    let mut g = match outer % 4 {
        0 => GreSpec::ipv4(),
        1 => GreSpec::ipv6(),
        2 => GreSpec::ipv4().raw_ip(),
        _ => GreSpec::ipv6().ipoib(0),
    };
    if tag && outer % 4 < 2 {
        g = g.vlan(0x8100, 7);
    }
    g.flags_version = gre_flags & (flags::C | flags::R | flags::K | flags::S);
    g.key = 0x0102_0304;
    g.sequence = 99;
    let mut r = Bytes::from_slice(&routing[..routing.len().min(28)]);
    r.extend(&[0, 0, 0, 0]);
    g.routing = r;
    g.teb = teb;
    g
}

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
    wrapped(gre, InnerFrame::Ethernet(&bytes_of(&inner)))
}

/// The metadata of `gre`'s link, with a stripped tag or not.
fn meta(gre: &GreSpec, stripped: Option<u16>) -> RxMeta {
    let m = RxMeta::new(gre.link.kind(), 0);
    match stripped {
        Some(tci) if gre.link.kind() == LinkKind::Ethernet => m.with_vlan_stripped(tci),
        _ => m,
    }
}

#[track_caller]
fn assert_agrees(frame: &[u8], meta: &RxMeta) {
    if let Err(e) = catch(|| lro_testkit::parser::agrees(frame, meta)) {
        panic!("{e}\n{meta:?} {frame:02x?}");
    }
}

/// Every shape, unedited, is read through its tunnel: the property below is not vacuous.
#[test]
fn every_shape_is_tunnelled_tcp() {
    let sre = [0x08, 0x00, 0x00, 0x04, 198, 18, 0, 9];
    for shape in 0..4 {
        for gre_flags in [
            0,
            flags::C,
            flags::K,
            flags::C | flags::K,
            flags::S,
            flags::R,
        ] {
            for teb in [false, true] {
                for v6 in [false, true] {
                    let g = outer(shape, shape == 0, gre_flags, &sre, teb);
                    let f = tunnelled(&g, v6, teb, 10);
                    let m = meta(&g, None);
                    assert_agrees(&f, &m);
                    let p = parse::parse_with::<Gre>(&f, &m).expect("tunnelled TCP");
                    let t = p.tunnel.expect("a tunnel");
                    let merges = gre_flags & !flags::MERGEABLE == 0;
                    assert_eq!(t.mergeable.is_ok(), merges, "{g:?}");
                    assert_eq!(p.payload_len, 10);
                }
            }
        }
    }
}

/// Every flags-and-version word, over the same inner frame: read as the reference reads it
/// (RFC 2890's C, K and S merge or not by their bits, R's routing field walked, any other
/// version passed unread).
#[test]
fn every_flags_word_is_read_as_the_reference_reads_it() {
    let mut read = 0;
    for f in 0..=u16::MAX {
        let mut g = GreSpec::ipv4();
        g.flags_version = f;
        let frame = tunnelled(&g, false, false, 4);
        let m = meta(&g, None);
        assert_agrees(&frame, &m);
        let p = parse::parse_with::<Gre>(&frame, &m);
        match (f & flags::VERSION, p) {
            (0, Ok(p)) => {
                read += 1;
                let merges = f & !flags::MERGEABLE == 0;
                assert_eq!(p.tunnel.map(|t| t.mergeable.is_ok()), Some(merges));
            }
            (0, Err(u)) => panic!("{f:#06x}: {u:?}"),
            (_, p) => assert_eq!(p.map_err(|u| u.reason), Err(PassReason::Encap), "{f:#06x}"),
        }
    }
    assert_eq!(read, 1 << 13);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    /// Tunnelled frames of every shape, and their near misses: up to four bytes changed
    /// anywhere in the first 160 (link, outer IP, GRE, the inner headers), cut short, padded.
    #[test]
    fn the_parsers_agree_through_gre(
        shape in 0u8..4,
        tag in any::<bool>(),
        stripped in proptest::option::of(0u16..3),
        gre_flags in any::<u16>(),
        routing in proptest::collection::vec(any::<u8>(), 0..12),
        teb in any::<bool>(),
        v6 in any::<bool>(),
        inner_tag in any::<bool>(),
        payload in 0usize..40,
        edits in proptest::collection::vec((0usize..160, any::<u8>()), 0..4),
        cut in proptest::option::of(0usize..200),
        pad in 0usize..12,
    ) {
        let g = outer(shape, tag, gre_flags, &routing, teb);
        let mut f = tunnelled(&g, v6, inner_tag, payload);
        f.extend(std::iter::repeat_n(0u8, pad));
        for (at, v) in edits {
            if let Some(b) = f.get_mut(at) {
                *b = v;
            }
        }
        if let Some(cut) = cut {
            f.truncate(cut);
        }
        assert_agrees(&f, &meta(&g, stripped));
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
            assert_agrees(&f, &m);
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
        assert_agrees(&f, &m);
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
