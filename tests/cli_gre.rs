//! The `lro` binary on GRE-tunnelled traffic (the default `gre` feature): the committed kernel
//! captures wrapped in GRE (`lro_gre::testing::Tunnel`, as `examples/gre_wrap.rs` does) are
//! coalesced by `replay`, `explain` and `bench` exactly as the plain captures are, the reports
//! count the tunnel, `explain` names each flow's tunnel, and every frame of the output pcap
//! is valid (outer IPv4 length and checksum, GRE checksum, inner lengths and checksums, read
//! back with etherparse and `lro_gre::wire`).
#![cfg(feature = "gre")]

mod common;

use std::path::Path;

use etherparse::{NetSlice, SlicedPacket, TransportSlice};
use lro_gre::testing::{GreSpec, InnerFrame, OuterId, Tunnel};
use lro_gre::wire::Header;
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapReader, PcapWriter};
use pcap_file::DataLink;
use serde_json::Value;

use common::{lro_json, lro_ok, root, temp_dir, u};

fn frames_of(bytes: &[u8]) -> Vec<(std::time::Duration, Vec<u8>)> {
    let mut r = PcapReader::new(bytes).expect("pcap");
    let mut out = Vec::new();
    while let Some(p) = r.next_packet() {
        let p = p.expect("packet");
        out.push((p.timestamp, p.data.into_owned()));
    }
    out
}

fn committed(name: &str) -> Vec<(std::time::Duration, Vec<u8>)> {
    let xz = std::fs::read(root().join("data").join(name)).expect("capture");
    let mut raw = Vec::new();
    lzma_rs::xz_decompress(&mut &xz[..], &mut raw).expect("xz");
    frames_of(&raw)
}

/// Writes the capture wrapped by `spec` (outer IDs following the inner ones).
fn wrap(name: &str, spec: GreSpec, path: &Path) {
    let mut tunnel = Tunnel::new(spec, OuterId::Inner);
    let header = PcapHeader {
        datalink: DataLink::ETHERNET,
        ..PcapHeader::default()
    };
    let mut w = PcapWriter::with_header(std::fs::File::create(path).expect("create"), header)
        .expect("pcap");
    let mut buf = vec![0u8; 70_000];
    for (ts, f) in committed(name) {
        let n = tunnel.wrap(InnerFrame::Ethernet(&f), &mut buf).expect("IP");
        w.write_packet(&PcapPacket::new(ts, n as u32, &buf[..n]))
            .expect("write");
    }
}

#[test]
fn replay_coalesces_gre_as_the_plain_capture() {
    let dir = temp_dir("cli-gre", "replay");
    for (spec, what) in [
        (GreSpec::ipv4().key(42), "K"),
        (GreSpec::ipv6().checksum().key(7), "C+K over IPv6"),
        (GreSpec::ipv4().checksum().teb(), "TEB with C"),
    ] {
        let path = dir.join("gre.pcap");
        wrap("small.pcap.xz", spec, &path);
        let p = path.to_str().unwrap();
        for policy in ["gro", "lro"] {
            let plain = lro_json(&["replay", "data/small.pcap.xz", "--policy", policy]);
            let gre = lro_json(&["replay", p, "--policy", policy]);
            assert_eq!(u(&gre, "frames_in"), u(&plain, "frames_in"));
            if policy == "gro" {
                for k in ["frames_out", "frames_merged"] {
                    assert_eq!(u(&gre, k), u(&plain, k), "{what} {policy}: {k}");
                }
            } else {
                // The ACK memory is direct-mapped by the flow hash, which the tunnel changes:
                // a collision may make a pure ACK unknown (passed alone) in one run and not in
                // the other. Nothing else may differ.
                let unknown = |v: &Value| u(&v["passed"], "unknown_ack") as i64;
                let slack = (unknown(&gre) - unknown(&plain)).abs();
                let out = u(&gre, "frames_out") as i64 - u(&plain, "frames_out") as i64;
                assert!(out.abs() <= slack, "{what} {policy}: {gre} vs {plain}");
            }
            let t = &gre["tunnel"];
            assert_eq!(t["encap"], "gre");
            assert_eq!(u(t, "frames_in"), u(&gre, "frames_in"), "{what}");
            assert_eq!(u(t, "frames_merged"), u(&gre, "frames_merged"), "{what}");
            assert_eq!(u(t, "acks_merged"), u(&gre, "acks_merged"), "{what}");
            assert_eq!(u(&plain["tunnel"], "frames_in"), 0);
        }
        let text = lro_ok(&["replay", p]);
        assert!(
            text.lines()
                .any(|l| l.starts_with("tunnelled    gre: ") && l.contains("merged into segments")),
            "{text}"
        );
    }
    // Sequence numbers: every frame alone, counted.
    let path = dir.join("seq.pcap");
    wrap("small.pcap.xz", GreSpec::ipv4().key(1).sequence(0), &path);
    let v = lro_json(&["replay", path.to_str().unwrap()]);
    assert_eq!(u(&v, "frames_out"), u(&v, "frames_in"));
    assert_eq!(u(&v["tunnel"]["passed"], "encap"), u(&v, "frames_in"));
}

#[test]
fn explain_names_each_flows_tunnel() {
    let dir = temp_dir("cli-gre", "explain");
    let path = dir.join("gre.pcap");
    wrap("small.pcap.xz", GreSpec::ipv4().checksum().key(42), &path);
    let p = path.to_str().unwrap();
    let text = lro_ok(&["explain", p, "--top", "0", "--min-frames", "0"]);
    let flows: Vec<&str> = text
        .lines()
        .filter(|l| l.contains(" > ") && l.contains(':'))
        .collect();
    assert!(flows.len() >= 4, "{text}");
    for l in &flows {
        assert!(
            l.contains(" in gre csum key 42 198.18.0.1 > 198.18.0.2")
                || l.contains(" in gre csum key 42 198.18.0.2 > 198.18.0.1"),
            "{l}"
        );
    }
    assert!(text.contains("tunnelled (gre): "), "{text}");
    let v = lro_json(&["explain", p, "--top", "0", "--min-frames", "0"]);
    let shown = v["flows_shown"].as_array().expect("flows");
    // `--top 0`: every flow is shown, so the checks below run on each of them.
    let tcp = shown.iter().filter(|r| r["flow"] != "(not TCP/IP)").count();
    assert_eq!(tcp as u64, u(&v, "flow_count"), "{v}");
    for f in shown {
        let t = &f["tunnel"];
        assert_eq!(t["key"], 42, "{f}");
        assert_eq!(t["encap"], "gre csum key 42");
        let ends = [
            t["outer_src"].as_str().unwrap(),
            t["outer_dst"].as_str().unwrap(),
        ];
        assert!(ends == ["198.18.0.1", "198.18.0.2"] || ends == ["198.18.0.2", "198.18.0.1"]);
    }
    // The same flows as the plain capture, each once.
    let plain = lro_json(&[
        "explain",
        "data/small.pcap.xz",
        "--top",
        "0",
        "--min-frames",
        "0",
    ]);
    assert_eq!(v["flow_count"], plain["flow_count"]);
}

#[test]
fn replay_output_is_valid_gre() {
    let dir = temp_dir("cli-gre", "output");
    let path = dir.join("gre.pcap");
    let out = dir.join("out.pcap");
    wrap("small.pcap.xz", GreSpec::ipv4().checksum().key(9), &path);
    lro_ok(&[
        "replay",
        path.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--policy",
        "gro",
    ]);
    let frames = frames_of(&std::fs::read(&out).expect("output"));
    let mut merged = 0;
    for (i, (_, f)) in frames.iter().enumerate() {
        let p = SlicedPacket::from_ethernet(f).unwrap_or_else(|e| panic!("frame {i}: {e}"));
        let Some(NetSlice::Ipv4(o)) = p.net else {
            panic!("frame {i}: outer not IPv4")
        };
        let oh = o.header().to_header();
        assert_eq!(oh.header_checksum, oh.calc_header_checksum(), "frame {i}");
        assert_eq!(
            usize::from(oh.total_len),
            f.len() - 14,
            "frame {i}: outer length"
        );
        let gre = Header::new_checked(o.payload().payload).expect("GRE");
        assert_eq!(
            gre.verify_checksum(gre.payload()),
            Some(true),
            "frame {i}: GRE checksum"
        );
        assert_eq!(gre.key(), Some(9));
        let inner = SlicedPacket::from_ip(gre.payload()).expect("inner");
        let Some(TransportSlice::Tcp(t)) = inner.transport else {
            panic!("frame {i}: not TCP")
        };
        let sum = match inner.net {
            Some(NetSlice::Ipv4(v4)) => {
                let h = v4.header().to_header();
                assert_eq!(h.header_checksum, h.calc_header_checksum(), "frame {i}");
                t.to_header().calc_checksum_ipv4(&h, t.payload()).unwrap()
            }
            Some(NetSlice::Ipv6(v6)) => t
                .to_header()
                .calc_checksum_ipv6(&v6.header().to_header(), t.payload())
                .unwrap(),
            _ => panic!("frame {i}: inner not IP"),
        };
        assert_eq!(t.checksum(), sum, "frame {i}: TCP checksum");
        merged += usize::from(t.payload().len() > 1500);
    }
    assert!(merged > 0, "no merged segment in the output");
}

#[test]
fn bench_measures_gre_with_the_plain_aggregation() {
    let dir = temp_dir("cli-gre", "bench");
    let path = dir.join("gre.pcap");
    wrap("default.pcap.xz", GreSpec::ipv4().key(42), &path);
    let gre = lro_json(&[
        "bench",
        path.to_str().unwrap(),
        "--rounds",
        "2",
        "--policy",
        "gro",
    ]);
    let plain = lro_json(&[
        "bench",
        "data/default.pcap.xz",
        "--rounds",
        "2",
        "--policy",
        "gro",
    ]);
    assert_eq!(gre["frames_in"], plain["frames_in"]);
    assert_eq!(gre["frames_out"], plain["frames_out"]);
    assert_eq!(gre["allocations_timed"], 0);
}
