//! `lro_testkit::parser` can fail: the engine's parser passes it, and a wrong answer, one field
//! or verdict at a time, is refused with a message that names what differs.

use lro_core::parse::{self, FlowHint, Parsed, Unparsed};
use lro_core::testing::{FrameSpec, TCP_ACK, TCP_PSH};
use lro_core::{PassReason, RxMeta};
use lro_testkit::check::catch;
use lro_testkit::frame::bytes_of;
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
