//! Replay's schedule with --hold: the same traffic gives the same result whatever
//! link layer the capture records it with.

mod common;

use std::path::Path;
use std::time::Duration;

use pcap_file::pcap::PcapReader;

use common::{arp_frame, capture_bytes, lro_json, root, temp_dir, write_pcap};

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
