//! The parser's verdicts at the limits it sets itself: how many VLAN tags and IPv6 extension
//! headers it walks, an IPv4 datagram shorter than its own header and an IPv6 payload length
//! of zero. Each limit is checked on both sides (the last accepted shape and the first refused
//! one) through `parse` and `parse_into`, which must agree with each other and with the
//! reference reader.
//!
//! A datagram whose IP header contradicts itself gets no flow hint: the engine passes it
//! without flushing anything first. The receiving stack drops such a datagram (Linux
//! `ip_rcv_core`, `ipv6_rcv`), so it has no place in its flow's order to keep.
#![cfg(feature = "test-utils")]

use lro_core::parse::{self, FlowHint, Parsed, Unparsed};
use lro_core::testing::{FrameSpec, IpSpec, Ipv6Ext, Ipv6ExtKind, TCP_ACK};
use lro_core::wire::{ethernet, ipv6};
use lro_core::{PassReason, RxMeta};
use lro_testkit::frame::bytes_of;

const QINQ: u16 = 0x88a8;
const VLAN: u16 = 0x8100;

/// What the parser says of `frame` (Ethernet, no checksum state); `parse_into`, `flow_key`
/// and the reference reader must agree (`lro_testkit::parser`).
fn verdict(frame: &[u8]) -> Result<Parsed, Unparsed> {
    let meta = RxMeta::ethernet(0);
    lro_testkit::parser::agrees(frame, &meta);
    parse::parse(frame, &meta)
}

/// A data frame with `tags` in-line VLAN tags: the builder writes up to two, more are
/// inserted after them.
fn tagged(tags: usize) -> Vec<u8> {
    let payload = [0x5a; 100];
    let mut spec = FrameSpec::ipv4_tcp(40000, 5201)
        .seq(1)
        .flags(TCP_ACK)
        .payload(&payload);
    for i in 0..tags.min(2) {
        spec = spec.vlan(if i == 0 { QINQ } else { VLAN }, 10 + i as u16);
    }
    let mut f = bytes_of(&spec);
    for i in 2..tags {
        // Inserted where the last tag names the IP EtherType: that field becomes this tag's
        // TPID, and the IP EtherType follows its TCI.
        let at = 12 + 4 * i;
        let [t0, t1] = VLAN.to_be_bytes();
        f.splice(at..at, [t0, t1, 0, 10 + i as u8]);
    }
    f
}

#[test]
fn two_vlan_tags_are_walked_and_a_third_is_not_ip() {
    assert_eq!(ethernet::MAX_TAGS, 2);
    for tags in 0..=ethernet::MAX_TAGS {
        let p = verdict(&tagged(tags)).unwrap_or_else(|u| panic!("{tags} tags: {u:?}"));
        assert_eq!(p.l3 as usize, 14 + 4 * tags);
        assert_eq!(p.payload_len, 100);
        let vlans = p.key.vlans();
        assert_eq!(
            vlans.iter().flatten().count(),
            tags,
            "{tags} tags: {vlans:?}"
        );
    }
    let three = tagged(ethernet::MAX_TAGS + 1);
    assert_eq!(
        verdict(&three),
        Err(Unparsed {
            reason: PassReason::NotIp,
            hint: FlowHint::None
        })
    );
}

/// An IPv6 data frame with `n` Destination-options headers (8 bytes each: a PadN option).
fn with_dstopts(n: usize) -> Vec<u8> {
    let payload = [0xa5; 64];
    let spec = FrameSpec::ipv6_tcp(40000, 5201)
        .seq(1)
        .flags(TCP_ACK)
        .payload(&payload);
    let mut f = bytes_of(&spec);
    let l3 = 14;
    let next = l3 + ipv6::field::NXT_HDR;
    for _ in 0..n {
        // Each header is put first: it names what used to follow the fixed header.
        let h = [f[next], 0, 1, 4, 0, 0, 0, 0];
        f.splice(l3 + ipv6::HEADER_LEN..l3 + ipv6::HEADER_LEN, h);
        f[next] = 60;
    }
    let plen = (f.len() - l3 - ipv6::HEADER_LEN) as u16;
    f[l3 + 4..l3 + 6].copy_from_slice(&plen.to_be_bytes());
    f
}

#[test]
fn eight_ipv6_extension_headers_are_walked_and_a_ninth_is_malformed() {
    for n in [0, 1, ipv6::MAX_EXT] {
        let p = verdict(&with_dstopts(n)).unwrap_or_else(|u| panic!("{n} headers: {u:?}"));
        assert_eq!(p.l4 as usize, 14 + 40 + 8 * n);
        assert_eq!(p.payload_len, 64);
    }
    assert_eq!(
        verdict(&with_dstopts(ipv6::MAX_EXT + 1)).map_err(|u| u.reason),
        Err(PassReason::Malformed)
    );
}

#[test]
fn an_extension_header_cut_short_by_the_datagrams_end_is_malformed() {
    // One whole Destination-options header that names a second one, of which only `rest`
    // bytes are in the datagram (a next-header byte and a length of 0 when there is room).
    // The frame ends with the datagram, or is padded past it: the walk must judge the second
    // header by the datagram's end, and read no byte past it.
    let l3 = 14;
    let first = l3 + ipv6::HEADER_LEN;
    let mut head = with_dstopts(1);
    head.truncate(first + 8);
    head[first] = 60;
    for rest in 0..=8 {
        for pad in [0, 8] {
            let mut f = head.clone();
            f.extend((0..rest).map(|i| if i == 0 { 6 } else { 0 }));
            let plen = (f.len() - first) as u16;
            f[l3 + 4..l3 + 6].copy_from_slice(&plen.to_be_bytes());
            f.extend(std::iter::repeat_n(0x11, pad));
            let u = verdict(&f).expect_err("no TCP header");
            assert_eq!(
                u.reason,
                PassReason::Malformed,
                "{rest} bytes, padding {pad}"
            );
            match u.hint {
                FlowHint::None if rest < 8 => {}
                // The second header whole, naming TCP, and the datagram ends: the IP layer is
                // whole, the TCP header is not, so the addresses name the flow.
                FlowHint::Addresses(_) if rest == 8 => {}
                other => panic!("{rest} bytes, padding {pad}: {other:?}"),
            }
        }
    }
}

#[test]
fn an_ipv6_payload_length_of_zero_is_malformed_and_names_no_flow() {
    // Zero announces a jumbogram (RFC 2675), whose length is in a Hop-by-Hop option; Linux's
    // GRO flushes these too.
    let good = with_dstopts(0);
    assert!(verdict(&good).is_ok());
    let mut f = good;
    f[14 + 4..14 + 6].fill(0);
    assert_eq!(
        verdict(&f),
        Err(Unparsed {
            reason: PassReason::Malformed,
            hint: FlowHint::None
        })
    );
}

#[test]
fn an_ipv4_total_length_shorter_than_its_header_names_no_flow() {
    // IHL 6 (one word of options, a NOP and three End-of-list bytes): the header is 24 bytes.
    let payload = [1u8; 10];
    let mut spec = FrameSpec::ipv4_tcp(40000, 5201)
        .seq(1)
        .flags(TCP_ACK)
        .payload(&payload);
    if let lro_core::testing::IpSpec::V4(v4) = &mut spec.ip {
        v4.options = lro_core::testing::Bytes::from_slice(&[1]);
    }
    let good = bytes_of(&spec);
    let p = verdict(&good).expect("a well-formed frame with an IPv4 option");
    assert!(p.ip.options);
    // Total lengths from the header's own length down to the fixed header's: never a flow.
    for total in [24u16, 23, 22, 20] {
        let mut f = good.clone();
        f[16..18].copy_from_slice(&total.to_be_bytes());
        let u = verdict(&f).expect_err("no room for TCP");
        assert_eq!(u.reason, PassReason::Malformed, "total length {total}");
        match u.hint {
            // The IP header is whole, the TCP header is not: the addresses name the flow.
            FlowHint::Addresses(k) if total == 24 => assert!(k.same_addresses(&p.key)),
            FlowHint::None if total < 24 => {}
            other => panic!("total length {total}: {other:?}"),
        }
    }
}

/// An IPv6 data frame with the extension headers `exts` (kind, body after the next-header
/// and length bytes).
fn with_extensions(exts: &[(Ipv6ExtKind, &[u8])]) -> Vec<u8> {
    let payload = [0x3c; 32];
    let mut spec = FrameSpec::ipv6_tcp(40000, 5201)
        .seq(1)
        .flags(TCP_ACK)
        .payload(&payload);
    if let IpSpec::V6(v6) = &mut spec.ip {
        for (slot, (kind, body)) in v6.ext.iter_mut().zip(exts) {
            *slot = Some(Ipv6Ext::new(*kind, body));
        }
    }
    bytes_of(&spec)
}

#[test]
fn a_route_a_home_address_or_a_second_hop_by_hop_header_is_not_merged() {
    use Ipv6ExtKind::{DestinationOptions as Dst, HopByHop as Hop, Routing};
    let mut home = vec![0xc9, 16];
    home.extend([0xfd; 16]);
    let reason =
        |exts: &[(Ipv6ExtKind, &[u8])]| verdict(&with_extensions(exts)).err().map(|u| u.reason);
    // Read through: the checksum covers the header's addresses.
    assert_eq!(reason(&[(Hop, &[])]), None);
    assert_eq!(reason(&[(Hop, &[]), (Dst, &[])]), None);
    assert_eq!(reason(&[(Routing, &[0, 0])]), None, "no segments left");
    assert_eq!(reason(&[(Dst, &[1, 4, 0, 0, 0, 0])]), None, "PadN");
    // The pseudo-header holds another address: the route's final destination or the
    // sender's home address.
    assert_eq!(reason(&[(Routing, &[0, 1])]), Some(PassReason::Routed));
    assert_eq!(
        reason(&[(Hop, &[]), (Dst, &home)]),
        Some(PassReason::Routed)
    );
    // Hop-by-Hop is walked only first (RFC 8200 section 4.1; Linux `ipv6_gro_pull_exthdrs`).
    assert_eq!(reason(&[(Hop, &[]), (Hop, &[])]), Some(PassReason::NotTcp));
    assert_eq!(reason(&[(Dst, &[]), (Hop, &[])]), Some(PassReason::NotTcp));
}
