//! The engine's parser against the reference reader ([`oracle::classify`], and through GRE
//! [`oracle::classify_gre_in`]): every field of a [`Parsed`] that the reference can read, the
//! verdict and flow hint of every frame it refuses.
//!
//! [`agrees`] is what the `parse` fuzz target checks on each input, what its committed corpus
//! replays (`fuzz/tests/corpus.rs`), what lro-core's robustness tests check on the tcpdump
//! captures, the committed frames, every truncation and the property test's near misses, and
//! what lro-gre's `tests/parser.rs` checks on tunnelled near misses. [`judge`] and
//! [`judge_gre`] are its second half on their own, so `tests/parser.rs` can hand them wrong
//! answers.

use crate::oracle::{self, Barrier, Class, Ends};
use lro_core::encap::NoEncap;
use lro_core::parse::{self, FlowHint, Parsed, Tunnel, Unparsed};
use lro_core::wire::tcp::TcpOptions;
use lro_core::{LinkKind, PassReason, RxMeta};
use lro_gre::wire::Protocol;
use lro_gre::{Gre, TunnelId};

/// Every reading of `frame` the engine offers (`parse`, `parse_into` with its fast paths,
/// `flow_key`; and through GRE, `parse_with::<Gre>` and `parse_into::<Gre>`) agrees with the
/// others and with the reference reader ([`judge`], [`judge_gre`]). A frame that is TCP
/// without a tunnel reads the same either way. Panics with a description when one does not.
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
    let gre = parse::parse_with::<Gre>(frame, meta);
    let mut into = Parsed::EMPTY;
    let fast = parse::parse_into::<Gre>(frame, meta, &mut into).map(|()| into);
    assert_eq!(
        fast, gre,
        "parse_into::<Gre> differs from parse_with ({meta:?})"
    );
    if parsed.is_ok() || gre.is_ok_and(|p| p.tunnel.is_none()) {
        assert_eq!(gre, parsed, "untunnelled TCP read otherwise through GRE");
    }
    judge_gre(frame, meta, &gre);
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

/// `parsed`, an answer of the engine's parser for `frame` (without an encapsulation), against
/// the reference reader ([`oracle::classify`]): acceptance, offsets, header fields, options
/// and flow key of a TCP segment; the reason and flow hint of a refusal. Panics with a
/// description on a difference.
pub fn judge(frame: &[u8], meta: &RxMeta, parsed: &Result<Parsed, Unparsed>) {
    judge_class(frame, parsed, oracle::classify(frame, meta), None, false);
}

/// As [`judge`], for an answer of `parse_with::<Gre>` against [`oracle::classify_gre_in`]:
/// also every field of the tunnel layer (outer offsets and facts, the GRE identity, checksum
/// place and mergeability, the bridged link header), and a refusal past the GRE header must
/// name its tunnel.
pub fn judge_gre(frame: &[u8], meta: &RxMeta, parsed: &Result<Parsed, Unparsed>) {
    let (class, ends) = oracle::classify_gre_in(frame, meta);
    judge_class(frame, parsed, class, ends, true);
}

fn judge_class(
    frame: &[u8],
    parsed: &Result<Parsed, Unparsed>,
    class: Class,
    ends: Option<Ends>,
    gre: bool,
) {
    match (parsed, class) {
        (Ok(p), Class::Tcp(t)) => judge_tcp(frame, p, &t),
        (Ok(p), r) => panic!("accepted a frame the reference reads as {r:?}: {p:?}"),
        (Err(u), r) => {
            let want = match &r {
                Class::Tcp(t) => panic!("refused ({:?}) a TCP frame: {t:?}", u.reason),
                Class::Fragment(_) => PassReason::Fragment,
                Class::Routed => PassReason::Routed,
                Class::NotTcp => PassReason::NotTcp,
                Class::NotIp => PassReason::NotIp,
                Class::Malformed => PassReason::Malformed,
                Class::Encap => PassReason::Encap,
            };
            assert_eq!(u.reason, want, "the reference reads {r:?}");
            judge_hint(&u.hint, &r, ends, gre);
        }
    }
}

/// The flow hint of a refusal the reference reads as `class`: the tunnel's addresses past
/// its GRE header (`ends`) and for a fragment of a tunnel; a fragment's own addresses; for
/// anything else no tunnel, and never ports.
fn judge_hint(hint: &FlowHint, class: &Class, ends: Option<Ends>, gre: bool) {
    let addresses = |k: &lro_core::FlowKey, (src, dst): Ends, what: &str| {
        assert_eq!(
            (k.src_bytes(), k.dst_bytes(), k.src_port(), k.dst_port()),
            (src, dst, 0, 0),
            "{what} hint: addresses, no ports"
        );
    };
    // What the hint must name, if the reference knows: a tunnel, or a fragment's addresses.
    enum Want {
        Tunnel(Ends),
        Addresses(Ends),
    }
    let want = ends.map(Want::Tunnel).or(match class {
        Class::Fragment(b) => Some(match **b {
            Barrier::Tunnel { src, dst } if gre => Want::Tunnel((src, dst)),
            Barrier::Tunnel { src, dst } => Want::Addresses((src, dst)),
            Barrier::Addresses(id) | Barrier::Either(id) | Barrier::Connection(id) => {
                Want::Addresses((id.src, id.dst))
            }
        }),
        _ => None,
    });
    match (want, hint) {
        (Some(Want::Tunnel(e)), FlowHint::Tunnel(k)) => addresses(k, e, "tunnel"),
        (Some(Want::Addresses(e)), FlowHint::Addresses(k)) => addresses(k, e, "address"),
        (Some(Want::Tunnel(e)), h) => panic!("hint {h:?}, want the tunnel {e:02x?}"),
        (Some(Want::Addresses(e)), h) => panic!("hint {h:?}, want the addresses {e:02x?}"),
        (None, FlowHint::Tunnel(k)) => panic!("a tunnel hint for {class:?}: {k:?}"),
        (None, FlowHint::Addresses(k)) => {
            assert_eq!((k.src_port(), k.dst_port()), (0, 0), "ports in a hint")
        }
        (None, FlowHint::None) => {}
    }
}

/// The tunnel layer of a frame both readers read through GRE.
fn judge_tunnel(p: &Parsed, tn: &Tunnel, t: &oracle::Tcp, o: &oracle::Outer) {
    let id = t.id.tunnel.expect("the reference's tunnel identity");
    let n = |v: usize| u32::try_from(v).expect("an offset within a frame");
    assert_eq!(
        (p.link_len, tn.outer_l3, tn.encap, tn.inner),
        (n(o.l3), n(o.l3), n(o.gre), n(o.gre + o.gre_len)),
        "tunnel offsets (link_len, outer_l3, encap, inner)"
    );
    let f = &tn.outer;
    assert_eq!(
        (f.ttl, f.tos, f.df, f.id, f.options, f.v6),
        (o.ttl, o.tos, o.df, o.ip_id, o.opts, o.v6),
        "outer IP (ttl, tos, df, id, options, v6)"
    );
    assert_eq!(p.ip.options || o.opts, t.ip_opts, "IP options");
    let k = &tn.key;
    assert_eq!(
        (k.outer_src, k.outer_dst, k.outer_tags),
        (
            u128::from_be_bytes(id.outer_src),
            u128::from_be_bytes(id.outer_dst),
            u32::from(id.outer_version) << 28 | id.outer_label
        ),
        "tunnel key: outer addresses, version and flow label"
    );
    let gre = TunnelId {
        flags_version: id.flags,
        protocol: Protocol(id.protocol),
        key: id.key,
    };
    assert_eq!(TunnelId::of(k), gre, "tunnel key: GRE flags, protocol, key");
    assert_eq!(
        k.inner_link,
        u128::from_be_bytes(id.inner_link),
        "tunnel key: inner link"
    );
    assert_eq!(
        tn.checksum.map(|c| o.gre + usize::from(c)),
        o.checksum_at(t),
        "GRE checksum place"
    );
    let mergeable = if id.mergeable() {
        Ok(())
    } else {
        Err(PassReason::Encap)
    };
    assert_eq!(tn.mergeable, mergeable, "tunnel mergeable");
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
    match (&p.tunnel, &t.outer) {
        (None, None) => {
            assert_eq!(p.ip.options, t.ip_opts, "IP options");
            assert_eq!(p.link_len, p.l3, "link_len");
        }
        (Some(tn), Some(o)) => judge_tunnel(p, tn, t, o),
        (tn, o) => panic!("tunnel {tn:?}, the reference reads {o:?}"),
    }
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
