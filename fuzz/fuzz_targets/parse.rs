//! The wire parser never panics and agrees with an independent reference reading of the frame
//! (acceptance, offsets, header fields, flow key), for both link kinds, with and without a
//! NIC-stripped VLAN tag.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lro_core::encap::NoEncap;
use lro_core::parse::{self, FlowHint};
use lro_core::wire::tcp::TcpOptions;
use lro_core::{LinkKind, PassReason, RxMeta};
use lro_fuzz::oracle::{self, Class};

fn check(frame: &[u8], meta: &RxMeta) {
    let parsed = parse::parse(frame, meta);
    // The engine's parser (fast path for plain Ethernet/IPv4/TCP) says exactly the same.
    let mut into = parse::Parsed::EMPTY;
    let fast = parse::parse_into::<NoEncap>(frame, meta, &mut into).map(|()| into);
    assert_eq!(fast, parsed, "parse_into differs from parse");
    let reference = oracle::classify(frame, meta);
    let key = parse::flow_key(frame, meta);
    match (&parsed, &reference) {
        (Ok(p), Class::Tcp(t)) => {
            let (l3, l4, payload, ip_end) = (
                p.l3 as usize,
                p.l4 as usize,
                p.payload as usize,
                p.ip_end as usize,
            );
            // Bounds.
            assert!(l3 < l4 && l4 + 20 <= payload && payload <= ip_end && ip_end <= frame.len());
            assert_eq!(p.payload_len as usize, ip_end - payload);
            assert_eq!(p.tcp_header_len() as usize, payload - l4);
            assert_eq!(p.padding(frame.len()) as usize, frame.len() - ip_end);
            // Agreement with the reference.
            assert_eq!((l3, l4, payload, ip_end), (t.l3, t.l4, t.payload, t.ip_end));
            assert_eq!(
                (p.seq, p.ack, p.window, p.flags),
                (t.seq, t.ack, t.window, t.flags)
            );
            assert_eq!(p.flags_word >> 24, u32::from(t.doff_byte));
            assert_eq!(p.flags_word & 0xffff, u32::from(t.window));
            assert_eq!(
                (p.ip.ttl, p.ip.tos, p.ip.df, p.ip.id),
                (t.ttl, t.tos, t.df, t.ip_id)
            );
            assert_eq!(p.ip.options, t.ip_opts);
            assert_eq!(p.tunnel, None);
            assert_eq!(p.link_len, p.l3);
            assert_eq!(p.is_v6(), t.v6);
            let k = &p.key;
            let id = &t.id;
            assert_eq!(k.version(), id.version);
            assert_eq!((k.src_port(), k.dst_port()), (id.sport, id.dport));
            assert_eq!((k.src_bytes(), k.dst_bytes()), (id.src, id.dst));
            assert_eq!(k.flow_label(), id.label);
            let mut macs = [0u8; 12];
            macs[..6].copy_from_slice(&k.dst_mac());
            macs[6..].copy_from_slice(&k.src_mac());
            assert_eq!(macs, id.macs);
            let vl = k.vlans();
            assert_eq!(vl[0], id.stripped.map(|tci| 0x8100_0000 | u32::from(tci)));
            for n in 0..2 {
                assert_eq!(
                    vl[n + 1],
                    id.tags[n].map(|(tpid, tci)| u32::from(tpid) << 16 | u32::from(tci))
                );
            }
            let want = match t.tsval(frame) {
                Some(v) => Some(v),
                None if payload - l4 == 20 => None,
                None => {
                    assert_eq!(p.options, TcpOptions::Other);
                    None
                }
            };
            match p.options {
                TcpOptions::Timestamp { val, .. } => assert_eq!(Some(val), want),
                TcpOptions::None => assert_eq!(payload - l4, 20),
                TcpOptions::Other => assert!(want.is_none()),
            }
            assert_eq!(key, Some(p.key));
        }
        (Err(u), r) => {
            match r {
                Class::Tcp(t) => panic!("engine refused ({:?}) a TCP frame: {t:?}", u.reason),
                Class::Fragment(_) => assert_eq!(u.reason, PassReason::Fragment),
                Class::Routed => assert_eq!(u.reason, PassReason::Routed),
                Class::NotTcp => assert_eq!(u.reason, PassReason::NotTcp),
                Class::NotIp => assert_eq!(u.reason, PassReason::NotIp),
                Class::Malformed => assert_eq!(u.reason, PassReason::Malformed),
            }
            match u.hint {
                FlowHint::Tunnel(k) => panic!("a tunnel hint without an encapsulation: {k:?}"),
                FlowHint::Addresses(k) => {
                    assert_eq!(key, None);
                    assert_eq!((k.src_port(), k.dst_port()), (0, 0));
                }
                FlowHint::None => assert_eq!(key, None),
            }
        }
        (Ok(p), r) => panic!("engine accepted a frame the reference reads as {r:?}: {p:?}"),
    }
}

fuzz_target!(|data: &[u8]| {
    // The first byte picks a stripped VLAN tag; the rest is the frame.
    let (sel, frame) = match data.split_first() {
        Some((s, f)) => (*s, f),
        None => (0, data),
    };
    for link in [LinkKind::Ethernet, LinkKind::RawIp, LinkKind::Ipoib] {
        let mut meta = RxMeta::new(link, 0);
        if sel & 1 == 1 {
            meta = meta.with_vlan_stripped(u16::from(sel) << 4);
        }
        check(frame, &meta);
    }
});
