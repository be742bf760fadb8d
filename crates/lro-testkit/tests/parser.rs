//! `lro_testkit::parser` can fail: the engine's parser passes it, and a wrong answer, one field
//! or verdict at a time, is refused with a message that names what differs.

use lro_core::parse::{self, FlowHint, Parsed, Tunnel, Unparsed};
use lro_core::testing::{FrameSpec, TCP_ACK, TCP_PSH};
use lro_core::{PassReason, RxMeta};
use lro_gre::testing::{GreSpec, InnerFrame};
use lro_gre::Gre;
use lro_testkit::check::catch;
use lro_testkit::frame::{bytes_of, wrapped};
use lro_testkit::parser;

fn frame(v6: bool) -> Vec<u8> {
    let spec = if v6 {
        FrameSpec::ipv6_tcp(40000, 5201)
    } else {
        FrameSpec::ipv4_tcp(40000, 5201)
    };
    bytes_of(
        &spec
            .seq(1000)
            .ack(77)
            .flags(TCP_ACK | TCP_PSH)
            .timestamps(5, 6)
            .vlan(0x8100, 12)
            .payload(&[0x5a; 100]),
    )
}

/// What the judge says of `answer` for `frame`.
fn judged(frame: &[u8], meta: &RxMeta, answer: Result<Parsed, Unparsed>) -> Result<(), String> {
    catch(|| parser::judge(frame, meta, &answer))
}

#[track_caller]
fn assert_refused(r: Result<(), String>, want: &str) {
    match r {
        Err(msg) => assert!(msg.contains(want), "want {want:?}, got {msg:?}"),
        Ok(()) => panic!("want {want:?}, but the judge passed"),
    }
}

#[test]
fn the_engines_answers_pass() {
    for v6 in [false, true] {
        let f = frame(v6);
        for meta in [
            RxMeta::ethernet(0),
            RxMeta::ethernet(0).with_vlan_stripped(0),
            RxMeta::raw_ip(0),
        ] {
            parser::agrees(&f, &meta);
            for cut in 0..f.len() {
                parser::agrees(&f[..cut], &meta);
            }
        }
        parser::every_link(&f);
    }
}

#[test]
fn a_wrong_field_is_refused() {
    let meta = RxMeta::ethernet(0);
    for v6 in [false, true] {
        let f = frame(v6);
        let good = parse::parse(&f, &meta).expect("TCP");
        assert_eq!(judged(&f, &meta, Ok(good)), Ok(()));
        let lie = |edit: fn(&mut Parsed), want: &str| {
            let mut p = good;
            edit(&mut p);
            assert_refused(judged(&f, &meta, Ok(p)), want);
        };
        lie(|p| p.seq += 1, "(seq, ack, window, flags)");
        lie(|p| p.flags ^= 0x08, "(seq, ack, window, flags)");
        lie(|p| p.flags_word ^= 0x0800_0000, "flags_word");
        lie(|p| p.payload_len -= 1, "payload_len");
        lie(|p| p.ip_end -= 1, "payload_len");
        lie(|p| p.link_len = 14, "link_len");
        lie(|p| p.ip.ttl ^= 1, "IP (ttl, tos, df, id)");
        lie(|p| p.ip.options = true, "IP options");
        lie(|p| p.ip.v6 = !p.ip.v6, "IP version");
        lie(
            |p| p.options = lro_core::wire::tcp::TcpOptions::Other,
            "options Other",
        );
        lie(
            |p| p.options = lro_core::wire::tcp::TcpOptions::None,
            "options None",
        );
    }
}

#[test]
fn a_wrong_flow_key_is_refused() {
    let f = frame(false);
    // The same frame read as if the NIC had stripped no tag, judged as if it had stripped a
    // priority tag (TCI 0): the key must still say there was one.
    let untagged = parse::parse(&f, &RxMeta::ethernet(0)).expect("TCP");
    let stripped = RxMeta::ethernet(0).with_vlan_stripped(0);
    assert_refused(judged(&f, &stripped, Ok(untagged)), "key: the stripped tag");
    // Another frame's key: ports, addresses, MACs, the in-line tag.
    let other = |spec: FrameSpec<'_>, want: &str| {
        let b = bytes_of(&spec.vlan(0x8100, 12).payload(&[1; 10]));
        let mut p = parse::parse(&f, &RxMeta::ethernet(0)).expect("TCP");
        p.key = parse::flow_key(&b, &RxMeta::ethernet(0)).expect("TCP");
        assert_refused(judged(&f, &RxMeta::ethernet(0), Ok(p)), want);
    };
    other(FrameSpec::ipv4_tcp(40001, 5201), "key: ports");
    let b = bytes_of(&FrameSpec::ipv4_tcp(40000, 5201).payload(&[1; 10]));
    let mut p = parse::parse(&f, &RxMeta::ethernet(0)).expect("TCP");
    p.key = parse::flow_key(&b, &RxMeta::ethernet(0)).expect("TCP");
    assert_refused(
        judged(&f, &RxMeta::ethernet(0), Ok(p)),
        "key: in-line tag 0",
    );
}

#[test]
fn a_wrong_verdict_is_refused() {
    let meta = RxMeta::ethernet(0);
    let f = frame(false);
    let good = parse::parse(&f, &meta).expect("TCP");
    let refusal = |reason, hint| Err(Unparsed { reason, hint });
    // A TCP frame refused.
    assert_refused(
        judged(&f, &meta, refusal(PassReason::Malformed, FlowHint::None)),
        "refused (Malformed) a TCP frame",
    );
    // A truncated frame accepted.
    let cut = &f[..f.len() - 1];
    assert_refused(judged(cut, &meta, Ok(good)), "accepted a frame");
    // The right refusal, the wrong reason.
    assert_refused(
        judged(cut, &meta, refusal(PassReason::NotTcp, FlowHint::None)),
        "the reference reads Malformed",
    );
    // A hint with ports, and a tunnel hint without an encapsulation.
    assert_refused(
        judged(
            cut,
            &meta,
            refusal(PassReason::Malformed, FlowHint::Addresses(good.key)),
        ),
        "ports in a hint",
    );
    assert_refused(
        judged(
            cut,
            &meta,
            refusal(PassReason::Malformed, FlowHint::Tunnel(good.key)),
        ),
        "a tunnel hint",
    );
}

/// A TCP frame in a GRE tunnel with a checksum and a key, bridged with a tag inside.
fn tunnelled() -> (Vec<u8>, RxMeta) {
    let gre = GreSpec::ipv6().checksum().key(5).teb();
    let inner = bytes_of(
        &FrameSpec::ipv4_tcp(40000, 5201)
            .seq(3)
            .ack(4)
            .vlan(0x8100, 12)
            .payload(&[0x5a; 30]),
    );
    (
        wrapped(&gre, InnerFrame::Ethernet(&inner)),
        RxMeta::ethernet(0),
    )
}

fn judged_gre(frame: &[u8], meta: &RxMeta, answer: Result<Parsed, Unparsed>) -> Result<(), String> {
    catch(|| parser::judge_gre(frame, meta, &answer))
}

#[test]
fn a_wrong_tunnel_field_is_refused() {
    let (f, meta) = tunnelled();
    parser::agrees(&f, &meta);
    let good = parse::parse_with::<Gre>(&f, &meta).expect("tunnelled TCP");
    assert_eq!(judged_gre(&f, &meta, Ok(good)), Ok(()));
    // Read without GRE, the frame is not TCP.
    assert_refused(judged(&f, &meta, Ok(good)), "accepted a frame");
    let lie = |edit: fn(&mut Parsed), want: &str| {
        let mut p = good;
        edit(&mut p);
        assert_refused(judged_gre(&f, &meta, Ok(p)), want);
    };
    fn tunnel(p: &mut Parsed) -> &mut Tunnel {
        p.tunnel.as_mut().expect("a tunnel")
    }
    lie(|p| p.tunnel = None, "tunnel None");
    lie(|p| p.link_len += 4, "tunnel offsets");
    lie(|p| tunnel(p).encap -= 2, "tunnel offsets");
    lie(|p| tunnel(p).inner += 4, "tunnel offsets");
    lie(|p| tunnel(p).outer.ttl ^= 1, "outer IP");
    lie(|p| tunnel(p).outer.v6 = false, "outer IP");
    lie(|p| tunnel(p).outer.options = true, "outer IP");
    lie(|p| p.ip.options = true, "IP options");
    lie(|p| tunnel(p).key.outer_dst ^= 1, "outer addresses");
    lie(|p| tunnel(p).key.outer_tags ^= 1, "outer addresses");
    lie(|p| tunnel(p).key.encap_id ^= 1, "GRE flags, protocol, key");
    lie(
        |p| tunnel(p).key.encap_id ^= 1 << 48,
        "GRE flags, protocol, key",
    );
    lie(|p| tunnel(p).key.inner_link ^= 1, "inner link");
    lie(|p| tunnel(p).checksum = None, "GRE checksum place");
    lie(
        |p| tunnel(p).mergeable = Err(PassReason::Encap),
        "tunnel mergeable",
    );
    // The inner layers are judged as without a tunnel.
    lie(|p| p.seq += 1, "(seq, ack, window, flags)");
    lie(|p| p.key = p.key.with_flow_label(1), "key: flow label");
}

#[test]
fn a_wrong_tunnel_verdict_or_hint_is_refused() {
    let (f, meta) = tunnelled();
    let good = parse::parse_with::<Gre>(&f, &meta).expect("tunnelled TCP");
    let refusal = |reason, hint| Err(Unparsed { reason, hint });
    // Cut inside the inner TCP header: refused, naming the tunnel.
    let cut = {
        let mut b = f[..good.l4 as usize + 10].to_vec();
        let plen = u16::try_from(b.len() - 14 - 40).expect("short");
        b[18..20].copy_from_slice(&plen.to_be_bytes());
        b
    };
    let u = parse::parse_with::<Gre>(&cut, &meta).expect_err("cut");
    assert_eq!(u.reason, PassReason::Malformed);
    assert_eq!(judged_gre(&cut, &meta, Err(u)), Ok(()));
    let FlowHint::Tunnel(outer) = u.hint else {
        panic!("{u:?}")
    };
    assert_refused(
        judged_gre(&cut, &meta, refusal(PassReason::Malformed, FlowHint::None)),
        "want the tunnel",
    );
    assert_refused(
        judged_gre(
            &cut,
            &meta,
            refusal(PassReason::Malformed, FlowHint::Addresses(outer)),
        ),
        "want the tunnel",
    );
    // The inner addresses in a tunnel hint.
    assert_refused(
        judged_gre(
            &cut,
            &meta,
            refusal(PassReason::Malformed, FlowHint::Tunnel(good.key)),
        ),
        "tunnel hint: addresses",
    );
    // Another GRE version: the frame is never read past its GRE header.
    let mut v1 = f.clone();
    v1[14 + 40 + 1] |= 1;
    let u = parse::parse_with::<Gre>(&v1, &meta).expect_err("version 1");
    assert_eq!(judged_gre(&v1, &meta, Err(u)), Ok(()));
    assert_refused(
        judged_gre(&v1, &meta, refusal(PassReason::NotTcp, u.hint)),
        "the reference reads Encap",
    );
}
