//! The `lro` tool on IP-over-InfiniBand captures (`LINKTYPE_IPOIB`, 242): `replay`, `explain`
//! and `bench` read them, and `replay -o` writes the same link type, each output record the
//! first frame's 40-byte GRH area followed by the coalesced IPoIB packet.
//!
//! `data/ipoib-tcp.pcap.xz` is real Linux TCP traffic (IPv4 and IPv6, from
//! `data/small.pcap.xz`) re-framed as IPoIB by drivers-ipoib's `to_ipoib_pcap` example; the
//! output is checked independently of the engine with etherparse (lengths, checksums, per-flow
//! payload) and, when installed, tshark. tcpdump's own IPoIB test capture is replayed too when
//! the project's shared data is beside the checkout.

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use etherparse::{EtherType, NetSlice, SlicedPacket, TransportSlice};
use pcap_file::pcap::PcapReader;
use pcap_file::DataLink;

use common::{capture_bytes, lro_json, lro_ok, root, temp_dir};

const IPOIB: &str = "data/ipoib-tcp.pcap.xz";

/// A capture's link type and records.
fn read_pcap(path: &Path) -> (DataLink, Vec<Vec<u8>>) {
    let data = capture_bytes(path);
    let mut r = PcapReader::new(&data[..]).expect("pcap");
    let link = r.header().datalink;
    let mut frames = Vec::new();
    while let Some(p) = r.next_packet() {
        frames.push(p.expect("record").data.into_owned());
    }
    (link, frames)
}

/// Per TCP flow (addresses and ports as text), the payload bytes in capture order, after
/// checking every IPoIB record: 40 bytes of GRH area, an encapsulation header whose type
/// matches the packet, an IP packet whose lengths and checksums are right.
fn payloads(frames: &[Vec<u8>]) -> HashMap<String, Vec<u8>> {
    let mut flows: HashMap<String, Vec<u8>> = HashMap::new();
    for f in frames {
        assert!(
            f.len() >= 44,
            "record shorter than the IPoIB capture header"
        );
        let et = EtherType(u16::from_be_bytes([f[40], f[41]]));
        assert_eq!(&f[42..44], &[0, 0], "reserved");
        let p = SlicedPacket::from_ether_type(et, &f[44..]).expect("IPoIB payload parses");
        let Some(TransportSlice::Tcp(tcp)) = p.transport else {
            continue;
        };
        let key = match p.net {
            Some(NetSlice::Ipv4(ip)) => {
                let h = ip.header();
                assert_eq!(et, EtherType::IPV4);
                assert_eq!(usize::from(h.total_len()), f.len() - 44);
                assert_eq!(h.to_header().calc_header_checksum(), h.header_checksum());
                let want = tcp
                    .to_header()
                    .calc_checksum_ipv4(&h.to_header(), tcp.payload())
                    .unwrap();
                assert_eq!(want, tcp.checksum(), "TCP checksum");
                format!("{:?}>{:?}", h.source_addr(), h.destination_addr())
            }
            Some(NetSlice::Ipv6(ip)) => {
                let h = ip.header();
                assert_eq!(et, EtherType::IPV6);
                assert_eq!(usize::from(h.payload_length()) + 40, f.len() - 44);
                let want = tcp
                    .to_header()
                    .calc_checksum_ipv6(&h.to_header(), tcp.payload())
                    .unwrap();
                assert_eq!(want, tcp.checksum(), "TCP checksum");
                format!("{:?}>{:?}", h.source_addr(), h.destination_addr())
            }
            _ => panic!("TCP over something else"),
        };
        let key = format!("{key}:{}>{}", tcp.source_port(), tcp.destination_port());
        flows
            .entry(key)
            .or_default()
            .extend_from_slice(tcp.payload());
    }
    flows
}

#[test]
fn replay_writes_ipoib_and_keeps_every_byte() {
    let dir = temp_dir("ipoib", "replay");
    for policy in ["lro", "gro"] {
        let out = dir.join(format!("{policy}.pcap"));
        let stats = lro_json(&[
            "replay",
            IPOIB,
            "-o",
            out.to_str().unwrap(),
            "--policy",
            policy,
        ]);
        assert_eq!(stats["link"], "IPoIB");
        let (in_link, input) = read_pcap(&root().join(IPOIB));
        let (out_link, output) = read_pcap(&out);
        assert_eq!(u32::from(in_link), 242);
        assert_eq!(out_link, in_link, "output in the input's link type");
        assert_eq!(stats["frames_in"], input.len() as u64);
        assert!(
            output.len() < input.len(),
            "{policy}: {} -> {} frames",
            input.len(),
            output.len()
        );
        assert!(stats["frames_merged"].as_u64().unwrap() > 0);
        // Every output record's GRH area is one an input record of that packet carried (the
        // head's), and per flow the payload is the input's, in order.
        for o in &output {
            assert!(
                input.iter().any(|i| i[..44] == o[..44]),
                "an output header no input frame had"
            );
        }
        assert_eq!(payloads(&output), payloads(&input), "{policy}");
    }
}

#[test]
fn explain_and_bench_read_ipoib() {
    let explain = lro_ok(&["explain", IPOIB]);
    assert!(explain.contains("frames in"), "{explain}");
    assert!(explain.contains("198.18.0.1:"), "{explain}");
    let bench = lro_json(&["bench", IPOIB, "--rounds", "2"]);
    assert_eq!(bench["frames_in"].as_u64(), Some(120), "{bench}");
}

#[test]
fn tshark_reads_the_output_without_complaint() {
    if Command::new("tshark").arg("--version").output().is_err() {
        println!("skipped: tshark not found (apt-get install -y tshark)");
        return;
    }
    let dir = temp_dir("ipoib", "tshark");
    let out = dir.join("out.pcap");
    lro_ok(&["replay", IPOIB, "-o", out.to_str().unwrap()]);
    let r = Command::new("tshark")
        .args(["-r", out.to_str().unwrap(), "-q", "-z", "expert,warn"])
        .args([
            "-o",
            "tcp.check_checksum:TRUE",
            "-o",
            "ip.check_checksum:TRUE",
        ])
        .output()
        .expect("tshark");
    let text = String::from_utf8_lossy(&r.stdout);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert!(
        !text.contains("Warning") && !text.contains("Error"),
        "tshark found problems:\n{text}"
    );
    // tshark decodes every record as IPoIB carrying TCP.
    let r = Command::new("tshark")
        .args([
            "-r",
            out.to_str().unwrap(),
            "-T",
            "fields",
            "-e",
            "frame.protocols",
        ])
        .output()
        .expect("tshark");
    let protocols = String::from_utf8_lossy(&r.stdout);
    assert!(protocols.lines().count() > 10);
    for line in protocols.lines() {
        assert!(
            line.starts_with("ipoib:ip") && line.contains(":tcp"),
            "{line}"
        );
    }
}

/// tcpdump's IPoIB test capture (ICMP, ARP, an SSH session, SYNs to closed ports): replayed
/// frame for frame when present beside the checkout.
#[test]
fn tcpdump_ipoib_capture_when_present() {
    let path = root().join("../shared/corpus/tcpdump-tests/ipoib.pcap");
    if !path.exists() {
        println!(
            "skipped: {} not present (the project's shared data, beside the checkout)",
            path.display()
        );
        return;
    }
    let dir = temp_dir("ipoib", "tcpdump");
    let out = dir.join("out.pcap");
    let p = path.to_str().unwrap();
    let stats = lro_json(&["replay", p, "-o", out.to_str().unwrap()]);
    assert_eq!(stats["link"], "IPoIB");
    let (link, input) = read_pcap(&path);
    let (out_link, output) = read_pcap(&out);
    assert_eq!(out_link, link);
    assert_eq!(stats["frames_in"], 30);
    // Nothing in it can merge (one short interactive session): every frame comes out as it
    // went in, ARP included.
    assert_eq!(output, input);
    let lines = lro_ok(&["explain", p]);
    assert!(
        lines.contains("192.168.56.10:34170 > 192.168.56.24:22"),
        "{lines}"
    );
    let bench = lro_json(&["bench", p, "--rounds", "2"]);
    // The four ARP frames are not IP: bench times the other 26.
    assert_eq!(bench["frames_in"].as_u64(), Some(26), "{bench}");
}
