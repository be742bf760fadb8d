//! Replay's schedule with --hold: the same traffic gives the same result whatever
//! link layer the capture records it with.

mod common;

use std::path::Path;
use std::time::Duration;

use pcap_file::pcap::PcapReader;

use common::{arp_frame, capture_bytes, frame_of, lro_json, root, temp_dir, write_pcap};

fn read_frames(path: &Path) -> Vec<(Duration, Vec<u8>)> {
    let raw = capture_bytes(path);
    let mut r = PcapReader::new(&raw[..]).expect("pcap header");
    let mut v = Vec::new();
    while let Some(p) = r.next_packet() {
        let p = p.expect("pcap packet");
        v.push((p.timestamp, p.data.into_owned()));
    }
    v
}

/// An Ethernet frame as Linux cooked capture (SLL): packet type, ARPHRD_ETHER, the source
/// address, the EtherType, the payload.
fn to_sll(eth: &[u8]) -> Vec<u8> {
    let mut f = vec![0, 0, 0, 1, 0, 6];
    f.extend_from_slice(&eth[6..12]);
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(&eth[12..]);
    f
}

/// Under --hold a flow idle longer than --timeout-us is flushed before the next frame: an ARP
/// frame of a cooked capture (passed by the tool without the engine) is such a frame as much
/// as the same ARP frame of an Ethernet capture (passed by the engine as not_ip). Before the
/// fix only the Ethernet one flushed idle flows: the cooked capture's held segments waited for
/// the next IP frame (here the end of the capture), counted as flush_all and delivered after
/// the ARP frame.
#[test]
fn hold_flushes_idle_flows_before_a_cooked_non_ip_frame_as_before_an_ethernet_one() {
    let dir = temp_dir("review", "hold-not-ip");
    let small = read_frames(&root().join("data/small.pcap.xz"));
    let mut eth: Vec<(Duration, Vec<u8>)> = small[..30].to_vec();
    let arp = arp_frame();
    // One second after the last frame: every held flow is idle by then.
    eth.push((eth[eth.len() - 1].0 + Duration::from_secs(1), arp));
    let sll: Vec<(Duration, Vec<u8>)> = eth.iter().map(|(t, f)| (*t, to_sll(f))).collect();
    let (eth_in, sll_in) = (dir.join("eth.pcap"), dir.join("sll.pcap"));
    write_pcap(&eth_in, 1, &eth);
    write_pcap(&sll_in, 113, &sll);
    let run = |input: &Path, link_header: usize| {
        let out = dir.join("out.pcap");
        let v = lro_json(&[
            "replay",
            input.to_str().unwrap(),
            "--hold",
            "-o",
            out.to_str().unwrap(),
            "--order",
            "delivery",
        ]);
        let frames: Vec<(Duration, Vec<u8>)> = read_frames(&out)
            .into_iter()
            .map(|(t, f)| (t, f[link_header..].to_vec()))
            .collect();
        (v, frames)
    };
    let (e, e_out) = run(&eth_in, 14);
    let (s, s_out) = run(&sll_in, 16);
    assert!(
        e["flushes"]["idle"].as_u64().unwrap() > 0,
        "the Ethernet ARP flushes idle flows: {}",
        e["flushes"]
    );
    assert_eq!(
        s["flushes"], e["flushes"],
        "flush reasons, cooked against Ethernet"
    );
    assert_eq!(s["passed"], e["passed"]);
    assert_eq!(s["frames_out"], e["frames_out"]);
    assert!(
        s_out == e_out,
        "the cooked capture's output differs from the Ethernet one's (order or timestamps)"
    );
}

/// --timeout-us counts microseconds of capture time: two frames of one flow 150 µs apart
/// merge under --timeout-us 200, and under 100 the first is flushed idle before the second.
#[test]
fn timeout_us_counts_microseconds_of_capture_time() {
    use lro_core::testing::{FrameSpec, TCP_ACK};
    let dir = temp_dir("hold", "timeout-units");
    let payload = [7u8; 1000];
    let frame = |seq: u32| {
        frame_of(
            &FrameSpec::ipv4_tcp(40000, 5201)
                .seq(seq)
                .ack(1)
                .flags(TCP_ACK)
                .payload(&payload),
        )
    };
    let input = dir.join("two.pcap");
    let frames = [
        (Duration::from_micros(0), frame(1)),
        (Duration::from_micros(150), frame(1001)),
    ];
    write_pcap(&input, 1, &frames);
    for (timeout, idle, merged) in [("200", 0, 1), ("100", 1, 0)] {
        let v = lro_json(&[
            "replay",
            input.to_str().unwrap(),
            "--hold",
            "--timeout-us",
            timeout,
        ]);
        let ctx = format!("--timeout-us {timeout}: {}", v["flushes"]);
        assert_eq!(v["flushes"]["idle"].as_u64(), Some(idle), "{ctx}");
        assert_eq!(v["frames_merged"].as_u64(), Some(merged), "{ctx}");
    }
}
