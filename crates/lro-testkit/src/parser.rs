//! The engine's parser against the reference reader ([`oracle::classify`]): every field of a
//! [`Parsed`] that the reference can read, the verdict and flow hint of every frame it refuses.
//!
//! [`agrees`] is what the `parse` fuzz target checks on each input, what its committed corpus
//! replays (`fuzz/tests/corpus.rs`), and what lro-core's robustness tests check on the tcpdump
//! captures, the committed frames, every truncation and the property test's near misses.
//! [`judge`] is its second half on its own, so `tests/checker.rs` can hand it a wrong answer.

use crate::oracle::{self, Class};
use lro_core::encap::NoEncap;
use lro_core::parse::{self, FlowHint, Parsed, Unparsed};
use lro_core::wire::tcp::TcpOptions;
use lro_core::{LinkKind, PassReason, RxMeta};

/// Every reading of `frame` the engine offers (`parse`, `parse_into` with its fast paths,
/// `flow_key`) agrees with the others and with the reference reader. Panics with a
/// description when one does not.
pub fn agrees(frame: &[u8], meta: &RxMeta) {
    let parsed = parse::parse(frame, meta);
    let mut into = Parsed::EMPTY;
    let fast = parse::parse_into::<NoEncap>(frame, meta, &mut into).map(|()| into);
    assert_eq!(fast, parsed, "parse_into differs from parse ({meta:?})");
    let key = parse::flow_key(frame, meta);
    assert_eq!(
        key,
        parsed.ok().map(|p| p.key),
        "flow_key differs from parse"
    );
    judge(frame, meta, &parsed);
}

/// The fuzz input's reading: the first byte picks a stripped VLAN tag (odd: the tag, from the
/// byte), the rest is a frame, checked with [`agrees`] as Ethernet, raw IP and IPoIB.
pub fn every_link(data: &[u8]) {
    let (sel, frame) = match data.split_first() {
        Some((s, f)) => (*s, f),
        None => (0, data),
    };
    for link in [LinkKind::Ethernet, LinkKind::RawIp, LinkKind::Ipoib] {
        let mut meta = RxMeta::new(link, 0);
        if sel & 1 == 1 {
            meta = meta.with_vlan_stripped(u16::from(sel) << 4);
        }
        agrees(frame, &meta);
    }
}

/// `parsed`, an answer of the engine's parser for `frame`, against the reference reader:
/// acceptance, offsets, header fields, options and flow key of a TCP segment; the reason and
/// flow hint of a refusal. Panics with a description on a difference.
pub fn judge(frame: &[u8], meta: &RxMeta, parsed: &Result<Parsed, Unparsed>) {
    match (parsed, oracle::classify(frame, meta)) {
        (Ok(p), Class::Tcp(t)) => judge_tcp(frame, p, &t),
        (Ok(p), r) => panic!("accepted a frame the reference reads as {r:?}: {p:?}"),
        (Err(u), r) => {
            let want = match r {
                Class::Tcp(t) => panic!("refused ({:?}) a TCP frame: {t:?}", u.reason),
                Class::Fragment(_) => PassReason::Fragment,
                Class::Routed => PassReason::Routed,
                Class::NotTcp => PassReason::NotTcp,
                Class::NotIp => PassReason::NotIp,
                Class::Malformed => PassReason::Malformed,
            };
            assert_eq!(u.reason, want, "the reference reads {r:?}");
            match u.hint {
                FlowHint::Tunnel(k) => panic!("a tunnel hint without an encapsulation: {k:?}"),
                FlowHint::Addresses(k) => {
                    assert_eq!((k.src_port(), k.dst_port()), (0, 0), "ports in a hint")
                }
                FlowHint::None => {}
            }
        }
    }
}

/// A TCP segment both readers accept: every field the reference reads.
fn judge_tcp(frame: &[u8], p: &Parsed, t: &oracle::Tcp) {
    let (l3, l4, payload, ip_end) = (
        p.l3 as usize,
        p.l4 as usize,
        p.payload as usize,
        p.ip_end as usize,
    );
    assert!(
        l3 < l4 && l4 + 20 <= payload && payload <= ip_end && ip_end <= frame.len(),
        "offsets out of order: {p:?}"
    );
    assert_eq!(p.payload_len as usize, ip_end - payload, "payload_len");
    assert_eq!(p.tcp_header_len() as usize, payload - l4, "tcp_header_len");
    assert_eq!(
        p.padding(frame.len()) as usize,
        frame.len() - ip_end,
        "padding"
    );
    assert_eq!(
        (l3, l4, payload, ip_end),
        (t.l3, t.l4, t.payload, t.ip_end),
        "offsets (l3, l4, payload, ip_end)"
    );
    assert_eq!(
        (p.seq, p.ack, p.window, p.flags),
        (t.seq, t.ack, t.window, t.flags),
        "(seq, ack, window, flags)"
    );
    assert_eq!(
        p.flags_word,
        u32::from_be_bytes([t.doff_byte, t.flags, (t.window >> 8) as u8, t.window as u8]),
        "flags_word"
    );
    assert_eq!(
        (p.ip.ttl, p.ip.tos, p.ip.df, p.ip.id),
        (t.ttl, t.tos, t.df, t.ip_id),
        "IP (ttl, tos, df, id)"
    );
    assert_eq!(p.ip.options, t.ip_opts, "IP options");
    assert_eq!(p.tunnel, None, "a tunnel without an encapsulation");
    assert_eq!(p.link_len, p.l3, "link_len");
    assert_eq!(p.is_v6(), t.v6, "IP version");
    assert_eq!(p.ip.v6, t.v6, "IP version");
    let (k, id) = (&p.key, &t.id);
    assert_eq!(k.version(), id.version, "key: version");
    assert_eq!(
        (k.src_port(), k.dst_port()),
        (id.sport, id.dport),
        "key: ports"
    );
    assert_eq!(
        (k.src_bytes(), k.dst_bytes()),
        (id.src, id.dst),
        "key: addresses"
    );
    assert_eq!(k.flow_label(), id.label, "key: flow label");
    let mut macs = [0u8; 12];
    macs[..6].copy_from_slice(&k.dst_mac());
    macs[6..].copy_from_slice(&k.src_mac());
    assert_eq!(macs, id.macs, "key: MAC addresses");
    let vl = k.vlans();
    assert_eq!(
        vl[0],
        id.stripped.map(|tci| 0x8100_0000 | u32::from(tci)),
        "key: the stripped tag"
    );
    for n in 0..2 {
        assert_eq!(
            vl[n + 1],
            id.tags[n].map(|(tpid, tci)| u32::from(tpid) << 16 | u32::from(tci)),
            "key: in-line tag {n}"
        );
    }
    let tsval = t.tsval(frame);
    match p.options {
        TcpOptions::Timestamp { val, .. } => assert_eq!(Some(val), tsval, "TSval"),
        TcpOptions::None => assert_eq!(payload - l4, 20, "options None with an option area"),
        TcpOptions::Other => {
            assert!(
                payload - l4 > 20 && tsval.is_none(),
                "options Other: {tsval:?}"
            )
        }
    }
}
