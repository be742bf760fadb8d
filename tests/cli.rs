//! Integration tests of the `lro` binary on the small committed captures (data/).
//!
//! Outputs are re-read and checked independently of the engine with etherparse: every frame
//! parses, lengths and checksums are right, and per flow the TCP payload out equals the payload
//! in. Derived captures (raw IP, Linux cooked SLL/SLL2, pcapng, frames the engine cannot
//! coalesce) are written by the helpers below into a per-test temporary directory.

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use etherparse::{NetSlice, SlicedPacket, TransportSlice};
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapReader, PcapWriter};
use pcap_file::DataLink;
use serde_json::Value;

use common::{
    arp_frame, capture_bytes, frame_of, lro, lro_json, lro_ok, root, temp_dir, u, write_pcap,
};

const SMALL: &str = "data/small.pcap.xz";
const DEFAULT: &str = "data/default.pcap.xz";

/// A decoded pcap: link type and (timestamp, bytes) of every frame.
struct Pcap {
    link: u32,
    frames: Vec<(Duration, Vec<u8>)>,
}

fn read_pcap_bytes(bytes: &[u8]) -> Pcap {
    let mut r = PcapReader::new(bytes).expect("pcap header");
    let link = u32::from(r.header().datalink);
    let mut frames = Vec::new();
    while let Some(p) = r.next_packet() {
        let p = p.expect("pcap packet");
        frames.push((p.timestamp, p.data.into_owned()));
    }
    Pcap { link, frames }
}

fn read_capture(path: &Path) -> Pcap {
    read_pcap_bytes(&capture_bytes(path))
}

/// Ethernet frames to raw IP (link type 101).
fn to_raw_ip(eth: &Pcap) -> Vec<(Duration, Vec<u8>)> {
    eth.frames
        .iter()
        .map(|(t, f)| (*t, f[14..].to_vec()))
        .collect()
}

/// Ethernet frames to Linux cooked capture v1 (link type 113): packet type, ARPHRD_ETHER,
/// address length and address (the source MAC), protocol.
fn to_sll(eth: &Pcap) -> Vec<(Duration, Vec<u8>)> {
    eth.frames
        .iter()
        .map(|(t, f)| {
            let mut v = vec![0, 0, 0, 1, 0, 6];
            v.extend_from_slice(&f[6..12]);
            v.extend_from_slice(&[0, 0]);
            v.extend_from_slice(&f[12..14]);
            v.extend_from_slice(&f[14..]);
            (*t, v)
        })
        .collect()
}

/// Ethernet frames to Linux cooked capture v2 (link type 276).
fn to_sll2(eth: &Pcap) -> Vec<(Duration, Vec<u8>)> {
    eth.frames
        .iter()
        .map(|(t, f)| {
            let mut v = f[12..14].to_vec(); // protocol
            v.extend_from_slice(&[0, 0, 0, 0, 0, 2, 0, 1, 0, 6]); // reserved, ifindex, ARPHRD, type, len
            v.extend_from_slice(&f[6..12]);
            v.extend_from_slice(&[0, 0]);
            v.extend_from_slice(&f[14..]);
            (*t, v)
        })
        .collect()
}

/// Parses a frame of `link` type; for cooked captures, a non-IP protocol gives `None`.
fn parse(link: u32, frame: &[u8]) -> Result<SlicedPacket<'_>, String> {
    let r = match link {
        1 => SlicedPacket::from_ethernet(frame),
        113 => SlicedPacket::from_linux_sll(frame),
        276 => SlicedPacket::from_ether_type(
            etherparse::EtherType(u16::from_be_bytes([frame[0], frame[1]])),
            &frame[20..],
        ),
        _ => SlicedPacket::from_ip(frame),
    };
    r.map_err(|e| format!("{e:?}"))
}

/// A flow direction: addresses and ports.
type FlowId = (Vec<u8>, Vec<u8>, u16, u16);

/// Per flow: the TCP payload of every frame, concatenated in order.
fn payload_streams(p: &Pcap) -> HashMap<FlowId, Vec<u8>> {
    let mut m: HashMap<FlowId, Vec<u8>> = HashMap::new();
    for (_, f) in &p.frames {
        let Ok(s) = parse(p.link, f) else { continue };
        let (src, dst) = match &s.net {
            Some(NetSlice::Ipv4(ip)) => (
                ip.header().source().to_vec(),
                ip.header().destination().to_vec(),
            ),
            Some(NetSlice::Ipv6(ip)) => (
                ip.header().source().to_vec(),
                ip.header().destination().to_vec(),
            ),
            _ => continue,
        };
        if let Some(TransportSlice::Tcp(tcp)) = &s.transport {
            m.entry((src, dst, tcp.source_port(), tcp.destination_port()))
                .or_default()
                .extend_from_slice(tcp.payload());
        }
    }
    m
}

/// Every frame parses; IPv4 header checksums, TCP checksums and lengths are right; IP lengths
/// cover the frame exactly (these captures have no link padding). Returns the TCP frame count.
fn check_valid(p: &Pcap) -> usize {
    checked(p).unwrap_or_else(|e| panic!("{e}"))
}

/// [`check_valid`], saying what is wrong instead of panicking.
fn checked(p: &Pcap) -> Result<usize, String> {
    let mut tcp_frames = 0;
    for (i, (_, f)) in p.frames.iter().enumerate() {
        let s = parse(p.link, f).map_err(|e| format!("output frame {i} does not parse: {e}"))?;
        let fail = |what: &str| Err(format!("frame {i}: {what}"));
        let (ip_at, ip_len) = match &s.net {
            Some(NetSlice::Ipv4(ip)) => {
                let h = ip.header();
                if h.header_checksum() != h.to_header().calc_header_checksum() {
                    return fail("IPv4 header checksum");
                }
                (h.slice().as_ptr(), usize::from(h.total_len()))
            }
            Some(NetSlice::Ipv6(ip)) => (
                ip.header().slice().as_ptr(),
                40 + usize::from(ip.header().payload_length()),
            ),
            other => return fail(&format!("not IP: {other:?}")),
        };
        // Link header, tags included: where the IP header starts.
        let l2_len = ip_at as usize - f.as_ptr() as usize;
        if l2_len + ip_len != f.len() {
            return fail("IP length vs frame length");
        }
        if let Some(TransportSlice::Tcp(tcp)) = &s.transport {
            tcp_frames += 1;
            let want = match &s.net {
                Some(NetSlice::Ipv4(ip)) => {
                    tcp.calc_checksum_ipv4(ip.header().source(), ip.header().destination())
                }
                Some(NetSlice::Ipv6(ip)) => {
                    tcp.calc_checksum_ipv6(ip.header().source(), ip.header().destination())
                }
                _ => unreachable!("checked above"),
            }
            .map_err(|e| format!("frame {i}: {e:?}"))?;
            if tcp.checksum() != want {
                return fail("TCP checksum");
            }
        }
    }
    Ok(tcp_frames)
}

/// `check_valid` can fail: the committed capture passes, and one of its IPv4 data frames,
/// broken in each way the checker looks for (the IPv4 header checksum made right again where
/// another field was changed), is refused for that reason.
#[test]
fn check_valid_refuses_a_broken_frame() {
    let small = read_capture(&root().join(SMALL));
    assert_eq!(small.link, 1, "Ethernet");
    let n = checked(&small).expect("the capture is valid");
    assert!(n > 0);
    let (t, good) = small
        .frames
        .iter()
        .find(|(_, f)| f.len() > 100 && f[12..14] == [0x08, 0x00] && f[23] == 6)
        .expect("an IPv4 TCP data frame")
        .clone();
    let one = |f: Vec<u8>| Pcap {
        link: 1,
        frames: vec![(t, f)],
    };
    assert_eq!(checked(&one(good.clone())), Ok(1));
    let tcp_at = 14 + usize::from(good[14] & 0x0f) * 4;
    let mut cases: Vec<(Vec<u8>, &str)> = Vec::new();
    let mut f = good.clone();
    f[24] ^= 1;
    cases.push((f, "frame 0: IPv4 header checksum"));
    let mut f = good.clone();
    let len = u16::from_be_bytes([f[16], f[17]]) - 1;
    f[16..18].copy_from_slice(&len.to_be_bytes());
    lro_core::testing::seal_ipv4_header(&mut f, 14);
    cases.push((f, "frame 0: IP length vs frame length"));
    let mut f = good.clone();
    f.push(0);
    cases.push((f, "frame 0: IP length vs frame length"));
    let mut f = good.clone();
    f[tcp_at + 16] ^= 1;
    cases.push((f, "frame 0: TCP checksum"));
    let mut f = good.clone();
    *f.last_mut().unwrap() ^= 0x80;
    cases.push((f, "frame 0: TCP checksum"));
    for (f, want) in cases {
        assert_eq!(checked(&one(f)), Err(want.to_string()));
    }
    // Cut inside the TCP header: the IP length no longer fits the frame.
    let cut = one(good[..tcp_at + 10].to_vec());
    assert!(checked(&cut)
        .unwrap_err()
        .starts_with("output frame 0 does not parse"));
}

/// The `counters` object holds every counter of the engine's `Stats`, by its own name, and
/// agrees with the keys that report them under other names.
fn check_all_counters(v: &Value) {
    let all = v["counters"].as_object().expect("counters");
    let names: Vec<String> = lro_core::Stats::new()
        .counters()
        .map(|c| c.key().to_string())
        .collect();
    let mut keys: Vec<&String> = all.keys().collect();
    keys.sort();
    let mut want: Vec<&String> = names.iter().collect();
    want.sort();
    assert_eq!(keys, want, "counters: every Stats counter, nothing else");
    let c = |k: &str| all[k].as_u64().unwrap();
    for (top, own) in [
        ("frames_in", "frames_in"),
        ("frames_out", "segments"),
        ("data_frames_in", "data_in"),
        ("data_frames_out", "data_out"),
        ("frames_merged", "frames_merged"),
        ("absorbed", "absorbed"),
        ("forgotten", "forgotten"),
    ] {
        assert_eq!(u(v, top), c(own), "{top} and counters.{own}");
    }
    for group in ["passed", "flushes"] {
        for (reason, n) in v[group].as_object().expect(group) {
            assert_eq!(
                n.as_u64(),
                Some(c(&format!("{group}.{reason}"))),
                "{group}.{reason}"
            );
        }
    }
    for (k, n) in v["tunnel"]["passed"].as_object().expect("tunnel.passed") {
        assert_eq!(
            n.as_u64(),
            Some(c(&format!("tunnel.passed.{k}"))),
            "tunnel.passed.{k}"
        );
    }
}

/// JSON counters agree with each other and with the input and output files.
fn check_counts(v: &Value, input_frames: usize, output: Option<&Pcap>) {
    let frames_in = u(v, "frames_in");
    let frames_out = u(v, "frames_out");
    assert_eq!(
        frames_in, input_frames as u64,
        "frames_in = frames in the file"
    );
    assert_eq!(
        frames_out,
        u(v, "segments"),
        "frames_out = segments delivered"
    );
    assert_eq!(
        frames_in,
        frames_out + u(v, "frames_merged") + u(v, "absorbed"),
        "every input frame is delivered, merged into a segment, or absorbed: {v}"
    );
    let passed: u64 = v["passed"]
        .as_object()
        .expect("passed")
        .values()
        .map(|n| n.as_u64().unwrap())
        .sum();
    let flushes: u64 = v["flushes"]
        .as_object()
        .expect("flushes")
        .values()
        .map(|n| n.as_u64().unwrap())
        .sum();
    assert_eq!(
        passed + flushes,
        frames_out,
        "every delivered frame has one reason"
    );
    assert!(u(v, "coalesced") <= frames_out);
    for f in ["acks_merged", "trimmed", "evictions", "forgotten"] {
        let _ = u(v, f);
    }
    let (data_in, data_out) = (u(v, "data_frames_in"), u(v, "data_frames_out"));
    assert!(data_in <= frames_in && data_out <= frames_out && data_out <= data_in);
    check_all_counters(v);
    if let Some(out) = output {
        assert_eq!(
            out.frames.len() as u64,
            frames_out,
            "output file frames = frames_out"
        );
        // Data segments out, counted independently in the output file.
        let with_payload = out
            .frames
            .iter()
            .filter(|(_, f)| {
                etherparse::SlicedPacket::from_ethernet(f)
                    .ok()
                    .and_then(|s| match s.transport {
                        Some(etherparse::TransportSlice::Tcp(t)) => Some(!t.payload().is_empty()),
                        _ => None,
                    })
                    .unwrap_or(false)
            })
            .count() as u64;
        // Frames the adaptive bypass passed through were not parsed: not counted.
        let bypassed = v["passed"]["bypassed"].as_u64().unwrap_or(0);
        if out.link == 1 {
            assert!(
                data_out <= with_payload && with_payload <= data_out + bypassed,
                "data_frames_out {data_out} = output frames with TCP payload {with_payload}, \
                 up to {bypassed} bypassed"
            );
        }
    }
}

/// Replays `input` with `opts`, writes the output, and checks it against the input.
fn replay_and_check(dir: &Path, input: &Path, opts: &[&str]) -> Value {
    let out_path = dir.join(format!("out{}.pcap", opts.join("_").replace('-', "")));
    let mut args = vec![
        "replay",
        input.to_str().unwrap(),
        "-o",
        out_path.to_str().unwrap(),
    ];
    args.extend_from_slice(opts);
    let v = lro_json(&args);
    let inp = read_capture(input);
    let out = read_capture(&out_path);
    assert_eq!(out.link, inp.link, "output keeps the input's link type");
    check_counts(&v, inp.frames.len(), Some(&out));
    check_valid(&out);
    let (a, b) = (payload_streams(&inp), payload_streams(&out));
    assert_eq!(a.len(), b.len(), "same flows");
    for (k, bytes) in &a {
        assert!(
            b.get(k) == Some(bytes),
            "flow {k:?}: payload differs ({opts:?})"
        );
    }
    v
}

#[test]
fn replay_small_capture_all_modes_keeps_bytes_and_checksums() {
    let dir = temp_dir("cli", "modes");
    let input = root().join(SMALL);
    for opts in [
        &[][..],
        &["--policy", "gro"],
        &["--csum", "trust"],
        &["--burst", "1"],
        &["--burst", "7", "--flows", "8"],
        &["--hold"],
        &["--hold", "--timeout-us", "5000", "--policy", "gro"],
        &["--burst", "256", "--flows", "1024"],
        &["--rss-sort", "--flows", "8", "--burst", "128"],
        &["--rss-sort", "--policy", "gro", "--csum", "trust"],
    ] {
        let v = replay_and_check(&dir, &input, opts);
        if opts == ["--burst", "1"] {
            // Everything is flushed after every frame: nothing can be merged.
            assert_eq!(u(&v, "coalesced"), 0);
            assert_eq!(u(&v, "frames_merged"), 0);
        }
    }
    // Default options coalesce something on real bulk TCP.
    let v = replay_and_check(&dir, &input, &[]);
    assert!(
        u(&v, "coalesced") > 0 && u(&v, "frames_out") < u(&v, "frames_in"),
        "{v}"
    );
}

/// The pseudo-header sum (not complemented) of an IPv4 or IPv6 TCP frame, as
/// `--out-csum partial` leaves it in a coalesced segment (Linux CHECKSUM_PARTIAL).
fn pseudo_header_sum(link: u32, frame: &[u8]) -> u16 {
    let s = parse(link, frame).expect("parses");
    let Some(TransportSlice::Tcp(tcp)) = &s.transport else {
        panic!("not TCP");
    };
    let addrs: Vec<u8> = match &s.net {
        Some(NetSlice::Ipv4(ip)) => [ip.header().source(), ip.header().destination()].concat(),
        Some(NetSlice::Ipv6(ip)) => [ip.header().source(), ip.header().destination()].concat(),
        other => panic!("not IP: {other:?}"),
    };
    let words = addrs
        .chunks(2)
        .map(|w| u64::from(u16::from_be_bytes([w[0], w[1]])));
    let mut acc: u64 = words.sum::<u64>() + 6 + tcp.slice().len() as u64;
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

#[test]
fn out_csum_partial_leaves_the_pseudo_header_sum_in_coalesced_segments() {
    let dir = temp_dir("cli", "partial");
    let input = root().join(SMALL);
    for csum in ["verify", "trust"] {
        let full = dir.join(format!("full-{csum}.pcap"));
        let partial = dir.join(format!("partial-{csum}.pcap"));
        for (path, out) in [(&full, "full"), (&partial, "partial")] {
            let args = [
                "replay",
                input.to_str().unwrap(),
                "-o",
                path.to_str().unwrap(),
            ];
            let v = lro_json(&[&args[..], &["--csum", csum, "--out-csum", out]].concat());
            assert_eq!(v["out_csum"], out, "{v}");
        }
        let (full, partial) = (read_capture(&full), read_capture(&partial));
        assert_eq!(full.frames.len(), partial.frames.len());
        let mut rewritten = 0;
        for (i, ((_, f), (_, p))) in full.frames.iter().zip(&partial.frames).enumerate() {
            if f == p {
                continue;
            }
            rewritten += 1;
            let s = parse(full.link, f).expect("parses");
            let Some(TransportSlice::Tcp(tcp)) = &s.transport else {
                panic!("frame {i}: only TCP segments are rewritten");
            };
            let at = tcp.slice().as_ptr() as usize - f.as_ptr() as usize + 16;
            assert_eq!(
                f[..at],
                p[..at],
                "frame {i}: differs before the TCP checksum"
            );
            assert_eq!(
                f[at + 2..],
                p[at + 2..],
                "frame {i}: differs after the TCP checksum"
            );
            let field = u16::from_be_bytes([p[at], p[at + 1]]);
            assert_eq!(field, pseudo_header_sum(full.link, p), "frame {i}: {csum}");
        }
        assert!(rewritten > 0, "{csum}: no coalesced segment to compare");
    }
}

/// Header prediction changes the cost, never the output: with trusted checksums (where it
/// applies) both policies write byte-identical captures and the same counters with it on and
/// off, and it does take most data frames of the committed captures.
#[test]
fn header_prediction_changes_nothing_but_the_path() {
    let dir = temp_dir("cli", "prediction");
    for input in [root().join(SMALL), root().join(DEFAULT)] {
        for policy in ["lro", "gro"] {
            for out in ["full", "partial"] {
                let on = dir.join(format!("on-{policy}-{out}.pcap"));
                let off = dir.join(format!("off-{policy}-{out}.pcap"));
                let run = |path: &Path, extra: &[&str]| {
                    let args = [
                        "replay",
                        input.to_str().unwrap(),
                        "-o",
                        path.to_str().unwrap(),
                        "--csum",
                        "trust",
                        "--policy",
                        policy,
                        "--out-csum",
                        out,
                    ];
                    lro_json(&[&args[..], extra].concat())
                };
                let mut v_on = run(&on, &[]);
                let mut v_off = run(&off, &["--no-prediction"]);
                let what = format!("{} {policy} {out}", input.display());
                assert_eq!(u(&v_off, "predicted"), 0, "{what}");
                assert!(
                    u(&v_on, "predicted") * 2 > u(&v_on, "data_frames_in"),
                    "{what}: only {} of {} data frames predicted",
                    u(&v_on, "predicted"),
                    u(&v_on, "data_frames_in")
                );
                for v in [&mut v_on, &mut v_off] {
                    let o = v.as_object_mut().unwrap();
                    for k in ["predicted", "load_ms", "run_ms", "output"] {
                        o.remove(k);
                    }
                    let all = o.get_mut("counters").and_then(Value::as_object_mut);
                    all.expect("counters").remove("predicted");
                }
                assert_eq!(v_on, v_off, "{what}: counters differ");
                assert!(
                    std::fs::read(&on).unwrap() == std::fs::read(&off).unwrap(),
                    "{what}: output captures differ"
                );
            }
        }
    }
}

#[test]
fn replay_default_capture_without_input() {
    let v = lro_json(&["replay"]);
    let default = read_capture(&root().join(DEFAULT));
    check_counts(&v, default.frames.len(), None);
    assert!(v["input"].as_str().unwrap().contains("built-in"));
    // The readable summary names the same numbers.
    let text = lro_ok(&["replay"]);
    assert!(
        text.contains(&format!(
            "{} in, {} out",
            u(&v, "frames_in"),
            u(&v, "frames_out")
        )),
        "{text}"
    );
    assert!(text.contains("ratio"));
}

/// The report's counts that say what merged: equal in two runs, the same merges happened.
const MERGE_COUNTS: [&str; 5] = [
    "frames_in",
    "frames_out",
    "frames_merged",
    "absorbed",
    "coalesced",
];

#[test]
fn raw_ip_and_cooked_captures_replay_like_ethernet() {
    let dir = temp_dir("cli", "links");
    let eth = read_capture(&root().join(SMALL));
    let base = lro_json(&["replay", SMALL]);
    for (link, name, frames) in [
        (101, "raw.pcap", to_raw_ip(&eth)),
        (12, "dlt12.pcap", to_raw_ip(&eth)),
        (113, "sll.pcap", to_sll(&eth)),
        (276, "sll2.pcap", to_sll2(&eth)),
    ] {
        let path = dir.join(name);
        write_pcap(&path, link, &frames);
        let v = replay_and_check(&dir, &path, &[]);
        // Without MAC addresses the flows are the same: the same merges happen.
        for f in MERGE_COUNTS {
            assert_eq!(v[f], base[f], "{name}: {f}");
        }
    }
}

/// Ethernet frames with an 802.1Q tag inserted after the addresses: VLAN `vlan(i)` for frame i.
fn tagged(eth: &Pcap, vlan: impl Fn(usize) -> u16) -> Pcap {
    let frames = eth
        .frames
        .iter()
        .enumerate()
        .map(|(i, (t, f))| {
            let mut v = f[..12].to_vec();
            v.extend_from_slice(&[0x81, 0x00]);
            v.extend_from_slice(&vlan(i).to_be_bytes());
            v.extend_from_slice(&f[12..]);
            (*t, v)
        })
        .collect();
    Pcap { link: 1, frames }
}

#[test]
fn cooked_captures_of_tagged_frames_coalesce_per_vlan_like_ethernet() {
    // libpcap writes a frame whose tag the kernel holds in metadata with the tag put back:
    // protocol 802.1Q, then TCI and EtherType before the IP header, as `to_sll` and `to_sll2`
    // make of a tagged Ethernet frame. The tool takes it as IP with a stripped tag.
    let dir = temp_dir("cli", "cooked-vlan");
    let eth = read_capture(&root().join(SMALL));
    // Which flows share a record of the ACK memory depends on the flow hash, and an Ethernet
    // flow's key holds its MAC addresses: a table with room for every flow leaves that out.
    let opts = ["--flows", "1024"];
    let base = lro_json(&["replay", SMALL, opts[0], opts[1]]);
    let half = eth.frames.len() / 2;
    // One VLAN throughout: the same merges as untagged. The first half on VLAN 5 and the
    // rest on VLAN 6: every flow is two flows, split where the VLAN changes.
    for (name, split) in [("one", eth.frames.len()), ("two", half)] {
        let tagged = tagged(&eth, |i| if i < split { 5 } else { 6 });
        let eth_path = dir.join(format!("{name}-eth.pcap"));
        write_pcap(&eth_path, 1, &tagged.frames);
        let want = replay_and_check(&dir, &eth_path, &opts);
        assert_eq!(want["passed"]["not_ip"], 0, "{name}: {want}");
        let tcp_flows = |v: &Value| {
            v["flows_shown"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|r| r["flow"] != "(not TCP/IP)")
                .map(|r| r["flow"].as_str().unwrap().to_string())
                .collect::<Vec<_>>()
        };
        let explain_eth = lro_json(&["explain", eth_path.to_str().unwrap(), "--top", "0"]);
        for (link, file, frames) in [
            (113, "sll.pcap", to_sll(&tagged)),
            (276, "sll2.pcap", to_sll2(&tagged)),
        ] {
            let path = dir.join(format!("{name}-{file}"));
            write_pcap(&path, link, &frames);
            let v = replay_and_check(&dir, &path, &opts);
            for f in MERGE_COUNTS.into_iter().chain(["passed"]) {
                assert_eq!(v[f], want[f], "{name} {file}: {f}");
                if name == "one" {
                    assert_eq!(v[f], base[f], "{name} {file}: {f}, untagged");
                }
            }
            // The output keeps every frame's tag where libpcap put it.
            let out = read_capture(&dir.join("outflows_1024.pcap"));
            let proto = if link == 113 { 14 } else { 0 };
            assert!(
                out.frames
                    .iter()
                    .all(|(_, f)| f[proto..proto + 2] == [0x81, 0x00]),
                "{name} {file}: a frame lost its tag"
            );
            // Flows are named by their VLAN, as the Ethernet capture's are.
            let explain = lro_json(&["explain", path.to_str().unwrap(), "--top", "0"]);
            let flows = tcp_flows(&explain);
            assert_eq!(flows, tcp_flows(&explain_eth), "{name} {file}");
            assert!(flows
                .iter()
                .all(|f| f.ends_with(" vlan 5") || f.ends_with(" vlan 6")));
        }
        if name == "two" {
            let flows = tcp_flows(&explain_eth);
            // A connection alive in both halves is two flows, one per VLAN.
            let mut conns: Vec<&str> = flows.iter().map(|f| &f[..f.len() - 7]).collect();
            conns.sort_unstable();
            conns.dedup();
            assert!(conns.len() < flows.len(), "{flows:?}");
        }
    }
}

#[test]
fn pcapng_input_with_nanosecond_timestamps_matches_pcap() {
    use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
    use pcap_file::pcapng::blocks::interface_description::{
        InterfaceDescriptionBlock, InterfaceDescriptionOption,
    };
    use pcap_file::pcapng::PcapNgWriter;
    let dir = temp_dir("cli", "pcapng");
    let eth = read_capture(&root().join(SMALL));
    let path = dir.join("small.pcapng");
    let mut w = PcapNgWriter::new(std::fs::File::create(&path).unwrap()).unwrap();
    let mut idb = InterfaceDescriptionBlock::new(DataLink::ETHERNET, 262_144);
    idb.options.push(InterfaceDescriptionOption::IfTsResol(9));
    w.write_pcapng_block(idb).unwrap();
    for (ts, data) in &eth.frames {
        // pcap-file writes the timestamp's nanoseconds as the raw tick count.
        let epb = EnhancedPacketBlock {
            interface_id: 0,
            timestamp: *ts,
            original_len: data.len() as u32,
            data: data.as_slice().into(),
            options: vec![],
        };
        w.write_pcapng_block(epb).unwrap();
    }
    drop(w);
    // With --hold the result depends on timestamps: equal counters mean equal clocks.
    for opts in [&["--hold"][..], &["--hold", "--timeout-us", "20"]] {
        let mut a = vec!["replay", SMALL];
        a.extend_from_slice(opts);
        let mut b = vec!["replay", path.to_str().unwrap()];
        b.extend_from_slice(opts);
        let (x, y) = (lro_json(&a), lro_json(&b));
        for f in [
            "frames_in",
            "frames_out",
            "frames_merged",
            "absorbed",
            "flushes",
            "passed",
        ] {
            assert_eq!(x[f], y[f], "{f} with {opts:?}");
        }
    }
}

/// Builds an IPv4 frame: Ethernet + IPv4 (correct header checksum) + `l4`.
fn ipv4_frame(proto: u8, l4: &[u8]) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
    let total = (20 + l4.len()) as u16;
    let mut ip = vec![
        0x45, 0, 0, 0, 0, 1, 0x40, 0, 64, proto, 0, 0, 198, 18, 0, 1, 198, 18, 0, 2,
    ];
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    let h = etherparse::Ipv4HeaderSlice::from_slice(&ip)
        .unwrap()
        .to_header();
    ip[10..12].copy_from_slice(&h.calc_header_checksum().to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(l4);
    f
}

#[test]
fn frames_the_engine_cannot_coalesce_pass_through_byte_identical() {
    let dir = temp_dir("cli", "odd");
    let small = read_capture(&root().join(SMALL));
    let t = small.frames[10].0;
    let arp = arp_frame();
    let udp = ipv4_frame(17, &[0x30, 0x39, 0x00, 0x35, 0, 12, 0, 0, 1, 2, 3, 4]);
    // TCP header claims a 20-byte header but the datagram ends after 8 bytes of it.
    let truncated_tcp = ipv4_frame(6, &[0x30, 0x39, 0x14, 0x51, 0, 0, 0, 1]);
    // A data segment of a real flow with one payload byte flipped: bad TCP checksum.
    let (i, bad) = small
        .frames
        .iter()
        .enumerate()
        .find(|(_, (_, f))| f.len() > 1000)
        .map(|(i, (_, f))| (i, f.clone()))
        .expect("a data frame");
    let mut bad = bad;
    let last = bad.len() - 1;
    bad[last] ^= 0x5a;
    let odd = [arp, udp, truncated_tcp, bad];
    let mut frames = small.frames.clone();
    frames[i].1 = odd[3].clone();
    for (k, f) in odd[..3].iter().enumerate() {
        frames.insert(20 + 7 * k, (t, f.clone()));
    }
    let path = dir.join("odd.pcap");
    write_pcap(&path, 1, &frames);
    let out_path = dir.join("odd-out.pcap");
    let v = lro_json(&[
        "replay",
        path.to_str().unwrap(),
        "-o",
        out_path.to_str().unwrap(),
    ]);
    let out = read_capture(&out_path);
    check_counts(&v, frames.len(), Some(&out));
    for (k, f) in odd.iter().enumerate() {
        assert!(
            out.frames.iter().any(|(_, o)| o == f),
            "odd frame {k} not passed through unchanged"
        );
    }
    for reason in ["not_ip", "not_tcp", "malformed", "bad_tcp_checksum"] {
        assert!(
            v["passed"][reason].as_u64().unwrap() >= 1,
            "{reason} counted: {v}"
        );
    }
}

/// Runs `lro` expecting exit status 3 (bad input) and a message naming `name`.
fn expect_bad_input(args: &[&str], name: &str, what: &str) {
    let out = lro(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{args:?}: exit status (stderr: {err})"
    );
    assert!(err.contains(name), "{args:?}: message names {name}: {err}");
    assert!(
        err.to_lowercase().contains(what),
        "{args:?}: message says {what}: {err}"
    );
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
}

#[test]
fn bad_inputs_exit_3_naming_the_file() {
    let dir = temp_dir("cli", "bad");
    let empty = dir.join("empty.pcap");
    std::fs::write(&empty, b"").unwrap();
    let cut_xz = dir.join("cut.pcap.xz");
    let xz = std::fs::read(root().join(SMALL)).unwrap();
    std::fs::write(&cut_xz, &xz[..xz.len() / 2]).unwrap();
    let cases: [(&str, &str); 6] = [
        ("data/bad/does-not-exist.pcap", "no such file"),
        ("data/bad/garbage.pcap", "not a pcap"),
        ("data/bad/truncated.pcap", "truncated"),
        ("data/bad/linktype-802-11.pcap", "unsupported link type 105"),
        (empty.to_str().unwrap(), "empty"),
        (cut_xz.to_str().unwrap(), "xz"),
    ];
    for (file, what) in cases {
        for cmd in ["replay", "explain", "bench"] {
            expect_bad_input(&[cmd, file], file, what);
        }
    }
}

#[test]
fn bad_options_exit_2() {
    let out = lro(&["replay", "--flows", "100"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--flows"));
    let out = lro(&["replay", "--policy", "fast"]);
    assert_eq!(out.status.code(), Some(2));
    let out = lro(&["replay", "--burst", "0"]);
    assert_eq!(out.status.code(), Some(2));
    let out = lro(&["replay", "--rss-sort", "--hold"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--rss-sort"));
    // --rss-sort sorts bursts of at most 1024 frames: the limit itself runs.
    let out = lro(&["replay", "--rss-sort", "--burst", "1025"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--burst 1025"));
    lro_ok(&["replay", "--rss-sort", "--burst", "1024"]);
    // Pairs refused by the commands that have both options, each error naming both. (--hold
    // flushes idle flows before every frame: each frame is a burst, which --bypass, judging
    // bursts of 16 or more, could never act on.)
    let pairs: [(&[&str], [&str; 2]); 2] = [
        (&["replay", "explain"], ["--bypass", "--hold"]),
        (&["replay", "explain", "bench"], ["--rss-sort", "--bypass"]),
    ];
    for (cmds, [a, b]) in pairs {
        for &cmd in cmds {
            let out = lro(&[cmd, a, b]);
            assert_eq!(out.status.code(), Some(2), "{cmd}");
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains(a) && err.contains(b), "{cmd}: {err}");
        }
    }
}

/// Frames that are not TCP/IP have a row of their own in `explain`, which is not a flow.
#[test]
fn explain_counts_flows_not_the_row_of_other_frames() {
    use lro_core::testing::{FrameSpec, TCP_ACK};
    let dir = temp_dir("explain", "other-row");
    // Priority 1 on VLAN 5: the name shows the VLAN id alone.
    let spec = FrameSpec::ipv4_tcp(40000, 5201)
        .flags(TCP_ACK)
        .payload(&[1; 100])
        .vlan(0x8100, 0x2005);
    let tcp = frame_of(&spec);
    let arp = arp_frame();
    let path = dir.join("tcp-and-arp.pcap");
    write_pcap(
        &path,
        1,
        &[(Duration::from_secs(1), tcp), (Duration::from_secs(2), arp)],
    );
    let p = path.to_str().unwrap();
    let v = lro_json(&["explain", p, "--top", "0", "--min-frames", "0"]);
    assert_eq!(u(&v, "flow_count"), 1, "{v}");
    assert_eq!(
        v["flows_shown"].as_array().unwrap().len(),
        2,
        "the flow and the other row"
    );
    assert_eq!(
        v["flows_shown"][0]["flow"],
        "10.0.0.1:40000 > 10.0.0.2:5201 vlan 5"
    );
    let text = lro_ok(&["explain", p]);
    assert!(
        text.lines().next().unwrap().contains("; 1 flows,"),
        "{text}"
    );
    // A cooked capture's ARP frame never reaches the engine; its row counts it all the same.
    // Its tagged TCP frame (the tag put back after the cooked header) is the flow's.
    let cooked = dir.join("tcp-and-arp-sll.pcap");
    write_pcap(&cooked, 113, &to_sll(&read_capture(&path)));
    for input in [&path, &cooked] {
        let v = lro_json(&["explain", input.to_str().unwrap(), "--top", "0"]);
        let rows = v["flows_shown"].as_array().unwrap();
        let other = rows.iter().find(|r| r["flow"] == "(not TCP/IP)").unwrap();
        assert_eq!((u(other, "frames_in"), u(other, "frames_out")), (1, 1));
        let out: u64 = rows.iter().map(|r| u(r, "frames_out")).sum();
        assert_eq!(out, u(&v, "frames_out"), "{}", input.display());
    }
}

#[test]
fn explain_lists_every_flow_and_accounts_for_every_frame() {
    let v = lro_json(&["explain", SMALL, "--top", "0", "--min-frames", "0"]);
    let flows = v["flows_shown"].as_array().expect("flows");
    // Every flow, and the row of frames that are not TCP/IP (not a flow) when there are any.
    let tcp = flows.iter().filter(|r| r["flow"] != "(not TCP/IP)").count();
    assert_eq!(tcp as u64, u(&v, "flow_count"));
    let sum = |f: &str| flows.iter().map(|r| r[f].as_u64().unwrap()).sum::<u64>();
    assert_eq!(sum("frames_in"), u(&v, "frames_in"));
    assert_eq!(sum("frames_out"), u(&v, "frames_out"));
    assert_eq!(sum("acks_merged"), u(&v, "absorbed"));
    assert_eq!(sum("coalesced"), u(&v, "coalesced"));
    // The mean segment is over the segments that carry payload: none, no mean; else the
    // payload over it gives back the row's share of the engine's data segments.
    let data_segments: u64 = flows
        .iter()
        .map(|r| {
            let bytes = r["payload_bytes"].as_u64().unwrap();
            match r["mean_segment"].as_f64() {
                None => {
                    assert_eq!(bytes, 0, "{r}");
                    0
                }
                Some(mean) => (bytes as f64 / mean).round() as u64,
            }
        })
        .sum();
    assert_eq!(data_segments, u(&v, "data_frames_out"));
    // Flows with fewer frames than --min-frames come after the others.
    let most = flows
        .iter()
        .filter(|r| r["flow"] != "(not TCP/IP)")
        .map(|r| r["frames_in"].as_u64().unwrap())
        .max()
        .unwrap()
        .to_string();
    let w = lro_json(&["explain", SMALL, "--top", "0", "--min-frames", &most]);
    let small: Vec<bool> = w["flows_shown"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["flow"] != "(not TCP/IP)")
        .map(|r| r["small"].as_bool().unwrap())
        .collect();
    assert!(small.contains(&true) && small.contains(&false), "{small:?}");
    assert!(
        small.windows(2).all(|p| p[0] <= p[1]),
        "small flows last: {small:?}"
    );
    // Worst first: ratios never decrease down the table.
    let ratios: Vec<f64> = flows
        .iter()
        .filter(|r| r["flow"] != "(not TCP/IP)")
        .map(|r| r["ratio"].as_f64().unwrap())
        .collect();
    assert!(ratios.windows(2).all(|w| w[0] <= w[1]), "{ratios:?}");
    // The flows of the capture, as etherparse sees them, all appear.
    let names: Vec<&str> = flows.iter().map(|r| r["flow"].as_str().unwrap()).collect();
    for (src, dst, sp, dp) in payload_streams(&read_capture(&root().join(SMALL))).keys() {
        let fmt = |a: &[u8], p: u16| {
            if a.len() == 4 {
                format!("{}.{}.{}.{}:{p}", a[0], a[1], a[2], a[3])
            } else {
                let b: [u8; 16] = a.try_into().unwrap();
                format!("[{}]:{p}", std::net::Ipv6Addr::from(b))
            }
        };
        let name = format!("{} > {}", fmt(src, *sp), fmt(dst, *dp));
        assert!(
            names.contains(&name.as_str()),
            "{name} missing from {names:?}"
        );
    }
    let text = lro_ok(&["explain", SMALL]);
    assert!(
        text.contains("198.18.0.1:") && text.contains("ratio"),
        "{text}"
    );
    // Each flow's row ends with its most frequent causes, most frequent first.
    for line in text.lines().filter(|l| l.contains(" > ")) {
        let (_, why) = line.rsplit_once("  ").unwrap();
        let counts: Vec<u64> = why
            .split(", ")
            .map(|c| c.rsplit_once(' ').unwrap().1.parse().unwrap())
            .collect();
        assert!(counts.windows(2).all(|p| p[0] >= p[1]), "{line}");
    }
}

#[test]
fn replay_text_lists_reasons_largest_first_and_labels_each_kind() {
    let text = lro_ok(&["replay", SMALL]);
    let list = |prefix: &str| -> Vec<(String, u64)> {
        let line = text
            .lines()
            .find_map(|l| l.strip_prefix(prefix))
            .unwrap_or_else(|| panic!("no `{prefix}` line: {text}"));
        line.trim()
            .split(", ")
            .map(|item| {
                let (name, n) = item.rsplit_once(' ').unwrap();
                (name.to_string(), n.parse().unwrap())
            })
            .collect()
    };
    let (passed, flushed) = (list("passed alone"), list("flushed by"));
    for l in [&passed, &flushed] {
        assert!(l.len() > 1, "{l:?}");
        assert!(
            l.windows(2).all(|p| p[0].1 >= p[1].1),
            "largest first: {l:?}"
        );
    }
    // The legend names each reason once, labelled by its kind.
    let (mut alone, mut flush) = (Vec::new(), Vec::new());
    let legend = text
        .lines()
        .skip_while(|l| !l.starts_with("reasons"))
        .skip(1)
        .take_while(|l| l.starts_with("  "));
    for line in legend {
        let (name, meaning) = line.trim().split_once(' ').unwrap();
        match meaning.trim_start().split_once(' ').unwrap().0 {
            "alone:" => alone.push(name.to_string()),
            "flush:" => flush.push(name.to_string()),
            other => panic!("{other}: {line}"),
        }
    }
    let names = |l: &[(String, u64)]| {
        let mut v: Vec<String> = l.iter().map(|p| p.0.clone()).collect();
        v.sort();
        v
    };
    alone.sort();
    flush.sort();
    assert_eq!((alone, flush), (names(&passed), names(&flushed)), "{text}");
}

#[test]
fn bench_reports_the_replay_numbers_without_allocating() {
    for opts in [
        &["--burst", "32"][..],
        &["--policy", "gro", "--csum", "trust"],
    ] {
        let mut b = vec!["bench", SMALL, "--rounds", "2"];
        b.extend_from_slice(opts);
        let v = lro_json(&b);
        let mut r = vec!["replay", SMALL];
        r.extend_from_slice(opts);
        let rep = lro_json(&r);
        assert_eq!(v["frames_in"], rep["frames_in"]);
        assert_eq!(v["frames_out"], rep["frames_out"], "{opts:?}");
        assert!(v["ns_per_frame_best"].as_f64().unwrap() > 0.0);
        assert!(
            v["ns_per_frame_median"].as_f64().unwrap() >= v["ns_per_frame_best"].as_f64().unwrap()
        );
        assert_eq!(
            u(&v, "allocations_timed"),
            0,
            "the timed region allocates nothing"
        );
    }
}

#[test]
fn bench_floor_times_the_reference_and_needs_trusted_checksums() {
    let v = lro_json(&[
        "bench", DEFAULT, "--rounds", "1", "--csum", "trust", "--floor",
    ]);
    assert_eq!(v["policy"], "floor");
    let engine = lro_json(&["bench", DEFAULT, "--rounds", "1", "--csum", "trust"]);
    assert_eq!(v["frames_in"], engine["frames_in"]);
    // It coalesces the built-in capture's IPv4 bulk flows (its IPv6 flow passes alone).
    let floor_out = u(&v, "frames_out");
    assert!(
        floor_out * 4 < u(&v, "frames_in"),
        "floor: {floor_out} frames out of {}",
        u(&v, "frames_in")
    );
    assert_eq!(u(&v, "allocations_timed"), 0);
    // The engine's settings do not apply to the floor: its report says what ran instead.
    let other = lro_json(&[
        "bench",
        DEFAULT,
        "--rounds",
        "1",
        "--csum",
        "trust",
        "--floor",
        "--flows",
        "256",
        "--rss-sort",
        "--out-csum",
        "partial",
    ]);
    assert_eq!(
        (&other["flows"], &other["rss_sort"], &other["out_csum"]),
        (
            &v["flows"],
            &serde_json::json!(false),
            &serde_json::json!("full")
        ),
        "{other}"
    );
    assert_eq!(u(&other, "flows"), 64);
    let out = lro(&["bench", DEFAULT, "--rounds", "1", "--floor"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--csum trust"));
}

/// The real captures of the project's shared data (`../shared/captures` beside the checkout,
/// or `$LRO_SHARED_CAPTURES`), when present; skipped with a note otherwise.
fn shared_captures() -> Option<PathBuf> {
    let dir = std::env::var_os("LRO_SHARED_CAPTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("../shared/captures"));
    if dir.is_dir() {
        Some(dir)
    } else {
        println!(
            "skipped: {} not present (the project's shared captures, beside the checkout)",
            dir.display()
        );
        None
    }
}

#[test]
fn shared_real_captures_when_present() {
    let Some(shared) = shared_captures() else {
        return;
    };
    let files = ["tcp4_4flows_wire.pcap.xz", "tcp6_2flows_wire.pcap.xz"];
    let dir = temp_dir("cli", "shared");
    let mut replayed = 0;
    for f in files {
        let path = shared.join(f);
        if path.exists() {
            replay_and_check(&dir, &path, &["--burst", "32", "--csum", "trust"]);
            replay_and_check(&dir, &path, &["--hold", "--policy", "gro"]);
            replayed += 1;
        }
    }
    if replayed == 0 {
        println!("skipped: none of {files:?} in {}", shared.display());
    }
}

// ---------------------------------------------------------------------------------------------
// Output order and timestamps.

/// One direction of a TCP connection: source address and port, destination address and port.
type Direction = (Vec<u8>, u16, Vec<u8>, u16);

/// A TCP frame's facts for the order checks.
struct Tcp {
    flow: Direction,
    seq: u32,
    /// Sequence space the frame takes: payload, plus one for SYN and one for FIN.
    len: u32,
    ack: Option<u32>,
    syn: bool,
}

fn tcp_of(link: u32, frame: &[u8]) -> Option<Tcp> {
    let s = parse(link, frame).ok()?;
    let (src, dst) = match &s.net {
        Some(NetSlice::Ipv4(ip)) => (
            ip.header().source().to_vec(),
            ip.header().destination().to_vec(),
        ),
        Some(NetSlice::Ipv6(ip)) => (
            ip.header().source().to_vec(),
            ip.header().destination().to_vec(),
        ),
        _ => return None,
    };
    let Some(TransportSlice::Tcp(t)) = &s.transport else {
        return None;
    };
    Some(Tcp {
        flow: (src, t.source_port(), dst, t.destination_port()),
        seq: t.sequence_number(),
        len: t.payload().len() as u32 + u32::from(t.syn()) + u32::from(t.fin()),
        ack: t.ack().then(|| t.acknowledgment_number()),
        syn: t.syn(),
    })
}

/// ACKs of data the file has not shown yet (what tshark marks "ACKed unseen segment"): per
/// direction of a connection, the highest sequence number seen so far; an ACK of the other
/// direction beyond it acknowledges bytes written later in the file.
fn acks_of_unseen_data(p: &Pcap) -> usize {
    // Per flow: the first sequence number seen (to compare without wrap-around) and the
    // highest end seen, as offsets from it.
    let mut seen: HashMap<Direction, (u32, u32)> = HashMap::new();
    let mut unseen = 0;
    for (_, f) in &p.frames {
        let Some(t) = tcp_of(p.link, f) else { continue };
        let base = seen.entry(t.flow.clone()).or_insert((t.seq, 0));
        if t.syn {
            *base = (t.seq, t.len);
        } else {
            let end = t.seq.wrapping_add(t.len).wrapping_sub(base.0);
            if end < 1 << 31 {
                base.1 = base.1.max(end);
            }
        }
        if let Some(ack) = t.ack {
            let (a, ap, b, bp) = t.flow;
            if let Some(&(isn, high)) = seen.get(&(b, bp, a, ap)) {
                let acked = ack.wrapping_sub(isn);
                if acked < 1 << 31 && acked > high {
                    unseen += 1;
                }
            }
        }
    }
    unseen
}

/// Timestamps never go backwards.
fn timestamps_non_decreasing(p: &Pcap) -> Result<(), String> {
    match p.frames.windows(2).position(|w| w[1].0 < w[0].0) {
        None => Ok(()),
        Some(i) => Err(format!(
            "frame {} at {:?} after frame {} at {:?}",
            i + 1,
            p.frames[i + 1].0,
            i,
            p.frames[i].0
        )),
    }
}

/// Replays `input` with `opts` into `dir` and reads the output back.
fn replay_to(dir: &Path, input: &Path, opts: &[&str]) -> Pcap {
    let out = dir.join("order.pcap");
    let mut args = vec![
        "replay",
        input.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(opts);
    lro_ok(&args);
    read_capture(&out)
}

const ORDER_MODES: [&[&str]; 5] = [
    &[],
    &["--hold"],
    &["--policy", "gro"],
    &["--rss-sort", "--flows", "8", "--burst", "128"],
    &["--hold", "--policy", "gro", "--timeout-us", "1000"],
];

#[test]
fn output_timestamps_never_go_backwards() {
    let dir = temp_dir("cli", "timestamps");
    for input in [root().join(SMALL), root().join(DEFAULT)] {
        timestamps_non_decreasing(&read_capture(&input)).expect("the input's are in order");
        for opts in ORDER_MODES {
            for order in ["arrival", "delivery"] {
                let out = replay_to(&dir, &input, &[opts, &["--order", order]].concat());
                if let Err(e) = timestamps_non_decreasing(&out) {
                    panic!("{} {opts:?} --order {order}: {e}", input.display());
                }
            }
        }
    }
}

/// `--order arrival` keeps the input's order across flows: an output frame that is an input
/// frame unchanged appears in input order, no ACK comes before the data it acknowledges, and
/// the frames are those of `--order delivery` (which keeps each flow's order too), rearranged.
#[test]
fn arrival_order_keeps_the_input_order_across_flows() {
    let dir = temp_dir("cli", "arrival");
    let mut delivery_unseen = 0;
    for input in [root().join(SMALL), root().join(DEFAULT)] {
        let inp = read_capture(&input);
        assert_eq!(acks_of_unseen_data(&inp), 0, "{}", input.display());
        let mut index: HashMap<&[u8], Option<usize>> = HashMap::new();
        for (i, (_, f)) in inp.frames.iter().enumerate() {
            index
                .entry(f.as_slice())
                .and_modify(|e| *e = None)
                .or_insert(Some(i));
        }
        for opts in ORDER_MODES {
            let what = format!("{} {opts:?}", input.display());
            let arrival = replay_to(&dir, &input, &[opts, &["--order", "arrival"]].concat());
            let delivery = replay_to(&dir, &input, &[opts, &["--order", "delivery"]].concat());
            assert_eq!(acks_of_unseen_data(&arrival), 0, "{what}");
            delivery_unseen += acks_of_unseen_data(&delivery);
            let unchanged: Vec<usize> = arrival
                .frames
                .iter()
                .filter_map(|(_, f)| index.get(f.as_slice()).copied().flatten())
                .collect();
            assert!(unchanged.len() > 10, "{what}: frames passed unchanged");
            assert!(
                unchanged.windows(2).all(|w| w[0] < w[1]),
                "{what}: unchanged frames out of input order: {unchanged:?}"
            );
            let sorted = |p: &Pcap| {
                let mut v: Vec<Vec<u8>> = p.frames.iter().map(|(_, f)| f.clone()).collect();
                v.sort();
                v
            };
            assert!(
                sorted(&arrival) == sorted(&delivery),
                "{what}: other frames"
            );
            let per_flow = |p: &Pcap| {
                let mut m: HashMap<_, Vec<Vec<u8>>> = HashMap::new();
                for (_, f) in &p.frames {
                    m.entry(tcp_of(p.link, f).map(|t| t.flow))
                        .or_default()
                        .push(f.clone());
                }
                m
            };
            assert!(
                per_flow(&arrival) == per_flow(&delivery),
                "{what}: a flow's order differs between the two orders"
            );
        }
    }
    // What arrival order is for: in delivery order another flow's ACK overtakes the held
    // segment it acknowledges (as in Linux GRO), which the check above sees.
    assert!(delivery_unseen > 0, "the ACK check never fires");
}

/// tshark, an independent reader, finds nothing in arrival-order output that it does not find
/// in the input: no "ACKed unseen segment", no spurious retransmission, no retransmission, no
/// out-of-order segment. Skipped without tshark.
#[test]
fn tshark_finds_no_new_problems_in_replay_output() {
    let tshark = Command::new("tshark").arg("--version").output();
    if !tshark.is_ok_and(|o| o.status.success()) {
        println!("skipped: tshark not found (apt-get install -y tshark)");
        return;
    }
    let dir = temp_dir("cli", "tshark");
    let flags = |path: &Path| -> usize {
        let out = Command::new("tshark")
            .args(["-n", "-r"])
            .arg(path)
            .args([
                "-Y",
                "tcp.analysis.ack_lost_segment || tcp.analysis.spurious_retransmission || tcp.analysis.retransmission || tcp.analysis.out_of_order",
                "-T",
                "fields",
                "-e",
                "frame.number",
            ])
            .output()
            .expect("run tshark");
        assert!(
            out.status.success(),
            "tshark on {}: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).lines().count()
    };
    let mut delivery = 0;
    for input in [root().join(SMALL), root().join(DEFAULT)] {
        let plain = dir.join("input.pcap");
        let inp = read_capture(&input);
        write_pcap(&plain, inp.link, &inp.frames);
        let before = flags(&plain);
        for opts in ORDER_MODES {
            // Delivery order once, to see that tshark does flag what arrival order avoids.
            let delivery_too = opts == ["--policy", "gro"] && input.ends_with(SMALL);
            let orders: &[&str] = if delivery_too {
                &["arrival", "delivery"]
            } else {
                &["arrival"]
            };
            for &order in orders {
                let out = dir.join(format!("{order}.pcap"));
                let mut args = vec![
                    "replay",
                    input.to_str().unwrap(),
                    "-o",
                    out.to_str().unwrap(),
                    "--order",
                    order,
                ];
                args.extend_from_slice(opts);
                lro_ok(&args);
                let n = flags(&out);
                if order == "arrival" {
                    assert!(
                        n <= before,
                        "{} {opts:?}: tshark flags {n} frames, {before} in the input",
                        input.display()
                    );
                } else {
                    delivery += n;
                }
            }
        }
    }
    assert!(
        delivery > 0,
        "tshark never flags delivery order: the check cannot fail"
    );
}

// ---------------------------------------------------------------------------------------------
// Output safety, standard input and output, exit statuses.

/// Runs `lro` with `stdin` as standard input.
fn lro_stdin(args: &[&str], stdin: &[u8]) -> Output {
    use std::io::Write as _;
    let mut child = Command::new(env!("CARGO_BIN_EXE_lro"))
        .args(args)
        .current_dir(root())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run lro");
    let mut pipe = child.stdin.take().expect("stdin");
    let data = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = pipe.write_all(&data);
    });
    let out = child.wait_with_output().expect("lro output");
    writer.join().expect("stdin writer");
    out
}

#[test]
fn an_output_that_is_the_input_is_refused_by_any_name() {
    let dir = temp_dir("cli", "same-file");
    let input = dir.join("in.pcap.xz");
    std::fs::copy(root().join(SMALL), &input).unwrap();
    let before = std::fs::read(&input).unwrap();
    let hard = dir.join("hard.pcap");
    std::fs::hard_link(&input, &hard).unwrap();
    let soft = dir.join("soft.pcap");
    std::os::unix::fs::symlink(&input, &soft).unwrap();
    let dotted = dir.join(".").join("in.pcap.xz");
    for out in [&input, &hard, &soft, &dotted] {
        let r = lro(&[
            "replay",
            input.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ]);
        let err = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(4), "{}: {err}", out.display());
        assert!(err.contains("is the input file"), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
    // Through standard input too, when it is the file.
    let r = Command::new(env!("CARGO_BIN_EXE_lro"))
        .args(["replay", "-", "-o", input.to_str().unwrap()])
        .stdin(std::fs::File::open(&input).unwrap())
        .output()
        .unwrap();
    assert_eq!(r.status.code(), Some(4), "{r:?}");
    // And standard output, when it is the file (`-o - >> in.pcap`: appending, the shell
    // does not truncate it first).
    let r = Command::new(env!("CARGO_BIN_EXE_lro"))
        .args(["replay", input.to_str().unwrap(), "-o", "-"])
        .stdout(std::fs::File::options().append(true).open(&input).unwrap())
        .output()
        .unwrap();
    assert_eq!(r.status.code(), Some(4), "{r:?}");
    assert!(
        String::from_utf8_lossy(&r.stderr).contains("standard output is the input file"),
        "{r:?}"
    );
    assert_eq!(
        std::fs::read(&input).unwrap(),
        before,
        "the input is intact"
    );
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        3,
        "no temporary file left"
    );
}

#[test]
fn output_replaces_the_file_whole_and_leaves_no_temporary() {
    let dir = temp_dir("cli", "replace");
    let out = dir.join("out.pcap");
    std::fs::write(&out, b"an old file").unwrap();
    let link = dir.join("link.pcap");
    std::os::unix::fs::symlink(&out, &link).unwrap();
    let v = lro_json(&["replay", SMALL, "-o", link.to_str().unwrap()]);
    let written = read_capture(&out);
    assert_eq!(written.frames.len() as u64, u(&v, "frames_out"));
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink(),
        "the link is kept, its target replaced"
    );
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 2, "no temporary file left: {names:?}");
    // A run that fails (here: options that do not go together) leaves the file alone.
    let before = std::fs::read(&out).unwrap();
    let r = lro(&[
        "replay",
        SMALL,
        "-o",
        out.to_str().unwrap(),
        "--rss-sort",
        "--hold",
    ]);
    assert_eq!(r.status.code(), Some(2));
    assert_eq!(std::fs::read(&out).unwrap(), before);
}

#[test]
fn dash_reads_standard_input_and_writes_standard_output() {
    let xz = std::fs::read(root().join(SMALL)).unwrap();
    // Input from stdin (xz-compressed, read whole), pcap to stdout, summary to stderr.
    let r = lro_stdin(&["replay", "-", "-o", "-", "--json"], &xz);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let summary: Value = serde_json::from_slice(&r.stderr).expect("JSON summary on stderr");
    assert_eq!(summary["input"], "stdin");
    assert_eq!(summary["output"], "stdout");
    let p = read_pcap_bytes(&r.stdout);
    assert_eq!(p.frames.len() as u64, u(&summary, "frames_out"));
    let file = lro_json(&["replay", SMALL]);
    assert_eq!(file["frames_out"], summary["frames_out"]);
    // /dev/stdout is standard output too: the summary moves to stderr.
    let r = lro(&["replay", SMALL, "-o", "/dev/stdout"]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert_eq!(read_pcap_bytes(&r.stdout).frames.len(), p.frames.len());
    assert!(String::from_utf8_lossy(&r.stderr).contains("aggregation ratio"));
    // explain reads stdin as well.
    let r = lro_stdin(&["explain", "-", "--json"], &xz);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let v: Value = serde_json::from_slice(&r.stdout).expect("explain JSON");
    assert_eq!(v["frames_in"], file["frames_in"]);
    // Garbage on stdin is a bad input named "stdin".
    let r = lro_stdin(&["replay", "-"], b"not a capture");
    assert_eq!(r.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&r.stderr).contains("stdin: not a pcap"));
}

/// A bare file name is written in the working directory (its parent is the empty path).
#[test]
fn a_bare_output_name_is_written_in_the_working_directory() {
    let dir = temp_dir("cli", "bare-name");
    let r = Command::new(env!("CARGO_BIN_EXE_lro"))
        .args([
            "replay",
            root().join(SMALL).to_str().unwrap(),
            "-o",
            "out.pcap",
            "--json",
        ])
        .current_dir(&dir)
        .output()
        .expect("run lro");
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let v: Value = serde_json::from_slice(&r.stdout).expect("JSON summary");
    let written = read_capture(&dir.join("out.pcap"));
    assert_eq!(written.frames.len() as u64, u(&v, "frames_out"));
}

/// Whether `script` (util-linux), which runs a command on a terminal of its own, is here.
fn has_script() -> bool {
    Command::new("script")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Runs `lro` with the shell words `args` (redirections allowed) under `script`, in the
/// repository root, with a terminal for its standard input, output and error; returns what the
/// terminal showed, which ends with `status=N`, lro's exit status. `timeout` makes a program
/// that reads the terminal fail the test instead of hanging it.
fn lro_on_terminal(args: &str) -> String {
    let cmd = format!(
        "timeout --foreground 30 {} {args}; echo \"status=$?\"",
        env!("CARGO_BIN_EXE_lro")
    );
    let out = Command::new("script")
        .args(["-qfec", &cmd, "/dev/null"])
        .current_dir(root())
        .output()
        .expect("run script");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A terminal is neither read as a capture nor written a binary pcap: run under `script`
/// (util-linux), which gives the program a terminal for both streams.
#[test]
fn a_terminal_on_standard_input_or_output_is_refused() {
    if !has_script() {
        println!("skipped: `script` (util-linux) not found");
        return;
    }
    let tty = lro_on_terminal(&format!("replay {SMALL} -o -"));
    assert!(tty.contains("status=4"), "{tty:?}");
    assert!(
        tty.contains("stdout: refusing to write a binary pcap to a terminal"),
        "{tty:?}"
    );
    let tty = lro_on_terminal("replay -");
    assert!(tty.contains("status=3"), "{tty:?}");
    assert!(tty.contains("stdin: is a terminal"), "{tty:?}");
}

#[test]
fn exit_statuses_tell_usage_input_and_output_apart() {
    let status = |args: &[&str]| {
        let r = lro(args);
        let err = String::from_utf8_lossy(&r.stderr).into_owned();
        (r.status.code(), err)
    };
    assert_eq!(status(&["replay", SMALL]).0, Some(0));
    assert_eq!(status(&["replay", "--policy", "fast"]).0, Some(2));
    assert_eq!(
        status(&["replay", "--order", "arrival"]).0,
        Some(2),
        "--order needs -o"
    );
    assert_eq!(status(&["replay", "data/bad/garbage.pcap"]).0, Some(3));
    let (code, err) = status(&["replay", SMALL, "-o", "/nonexistent-dir/out.pcap"]);
    assert_eq!(code, Some(4), "{err}");
    assert!(err.contains("does not exist"), "{err}");
    // A name ending in a slash is a directory: one that does not exist is an error, not a
    // file created under the name without the slash.
    let dir = temp_dir("cli", "exit_statuses");
    let missing = dir.join("newdir/");
    let missing = missing.to_str().expect("UTF-8 path");
    let (code, err) = status(&["replay", SMALL, "-o", missing]);
    assert_eq!(code, Some(4), "{err}");
    assert!(err.contains("a directory that does not exist"), "{err}");
    assert!(
        !dir.join("newdir").exists(),
        "no file named after the directory"
    );
    // A write failure names the system's reason (not pcap-file's "Error reading bytes").
    if Path::new("/dev/full").exists() {
        let (code, err) = status(&["replay", SMALL, "-o", "/dev/full"]);
        assert_eq!(code, Some(4), "{err}");
        assert!(
            err.contains("/dev/full: cannot write: No space left on device"),
            "{err}"
        );
    } else {
        eprintln!("part skipped: no /dev/full on this system to make a write fail");
    }
    let (code, err) = status(&["explain", SMALL, "--plot", "/nonexistent-dir/p.svg"]);
    assert_eq!(code, Some(4), "{err}");
    for cmd in [
        &["--help"][..],
        &["replay", "--help"],
        &["explain", "--help"],
    ] {
        let help = lro_ok(cmd);
        for line in [
            "Exit status:",
            "2  usage error",
            "3  the input",
            "4  an output",
        ] {
            assert!(help.contains(line), "{cmd:?} --help lacks {line:?}");
        }
    }
}

#[test]
fn bench_report_that_cannot_be_written_is_an_output_error() {
    if !Path::new("/dev/full").exists() {
        eprintln!("skipped: no /dev/full on this system to make stdout fail");
        return;
    }
    let r = Command::new(env!("CARGO_BIN_EXE_lro"))
        .args(["bench", SMALL, "--rounds", "1"])
        .current_dir(root())
        .stdout(
            std::fs::File::options()
                .write(true)
                .open("/dev/full")
                .unwrap(),
        )
        .output()
        .expect("run lro");
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(4), "{err}");
    assert!(err.contains("stdout: cannot write"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

#[test]
fn a_frame_longer_than_the_default_snap_length_is_written_whole() {
    let dir = temp_dir("cli", "long-frame");
    let small = read_capture(&root().join(SMALL));
    // A 300 000-byte frame of a local experimental EtherType: not IP, passed through as it is.
    let mut long = vec![0xff; 6];
    long.extend_from_slice(&[2, 0, 0, 0, 0, 1, 0x88, 0xb5]);
    long.resize(300_000, 0x5a);
    let mut frames = small.frames[..20].to_vec();
    frames.insert(10, (frames[10].0, long.clone()));
    let path = dir.join("long.pcap");
    let header = PcapHeader {
        datalink: DataLink::ETHERNET,
        snaplen: 400_000,
        ..PcapHeader::default()
    };
    let mut w = PcapWriter::with_header(std::fs::File::create(&path).unwrap(), header).unwrap();
    for (ts, data) in &frames {
        w.write_packet(&PcapPacket::new(*ts, data.len() as u32, data))
            .unwrap();
    }
    drop(w);
    let out_path = dir.join("out.pcap");
    let v = lro_json(&[
        "replay",
        path.to_str().unwrap(),
        "-o",
        out_path.to_str().unwrap(),
    ]);
    let out = read_capture(&out_path);
    check_counts(&v, frames.len(), Some(&out));
    assert!(out.frames.iter().any(|(_, f)| *f == long), "the long frame");
}

// ---------------------------------------------------------------------------------------------
// The picture and the progress bar.

#[test]
fn explain_plot_writes_a_well_formed_svg_of_every_shown_flow() {
    let dir = temp_dir("cli", "plot");
    let svg_path = dir.join("flows.svg");
    let v = lro_json(&[
        "explain",
        DEFAULT,
        "--plot",
        svg_path.to_str().unwrap(),
        "--top",
        "0",
    ]);
    let text = std::fs::read_to_string(&svg_path).expect("the SVG is written");
    let doc = roxmltree::Document::parse(&text).expect("well-formed XML");
    let svg = doc.root_element();
    assert_eq!(svg.tag_name().name(), "svg");
    for attr in ["width", "height"] {
        let n: u32 = svg
            .attribute(attr)
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("svg {attr}"));
        assert!(n >= 400, "{attr} {n}");
    }
    let texts: Vec<String> = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .map(|n| n.text().unwrap_or("").trim().to_string())
        .collect();
    assert!(
        texts
            .iter()
            .any(|t| t.contains("lro explain") && t.contains("built-in") || t.contains(DEFAULT)),
        "title: {texts:?}"
    );
    // A panel per flow, captioned with its name and counts.
    let flows = v["flows_shown"].as_array().expect("flows");
    assert!(flows.len() >= 2);
    for f in flows {
        let caption = format!(
            "{}: {} frames in, {} out",
            f["flow"].as_str().unwrap(),
            f["frames_in"],
            f["frames_out"]
        );
        assert!(
            texts.iter().any(|t| t.starts_with(&caption)),
            "no panel {caption:?} in {texts:?}"
        );
    }
    // The legend: one "cause (count)" entry per delivery cause, adding up to every delivery.
    let mut causes: HashMap<String, u64> = HashMap::new();
    for f in flows {
        for (k, n) in f["causes"].as_object().unwrap() {
            *causes.entry(k.clone()).or_default() += n.as_u64().unwrap();
        }
    }
    let legend: Vec<(String, u64)> = texts
        .iter()
        .filter_map(|t| {
            let (name, n) = t.strip_suffix(')')?.rsplit_once(" (")?;
            Some((name.to_string(), n.parse().ok()?))
        })
        .collect();
    let listed: HashMap<String, u64> = legend.iter().cloned().collect();
    assert_eq!(listed.len(), legend.len(), "each cause once: {legend:?}");
    assert_eq!(listed, causes, "the legend counts every delivery by cause");
    assert_eq!(
        listed.values().sum::<u64>(),
        u(&v, "frames_out"),
        "every delivered frame is drawn"
    );
    // Markers: the most frequent cause is drawn as blue circles, one per delivery plus its
    // legend entry.
    let first = legend.iter().max_by_key(|l| l.1).expect("a cause");
    let blue_circles = doc
        .descendants()
        .filter(|n| n.has_tag_name("circle") && n.attribute("fill") == Some("#0072B2"))
        .count() as u64;
    assert_eq!(blue_circles, first.1 + 1, "markers of {}", first.0);
}

/// Writes a capture of `n` minimal Ethernet frames (ARP: each passes the engine alone).
fn long_capture(path: &Path, n: usize) {
    let arp = arp_frame();
    let frames: Vec<(Duration, Vec<u8>)> = (0..n)
        .map(|i| (Duration::from_micros(i as u64), arp.clone()))
        .collect();
    write_pcap(path, 1, &frames);
}

/// A progress bar on a long replay only when standard error is a terminal and not with --json:
/// run under `script` (util-linux), which gives the program a terminal, and with pipes.
#[test]
fn progress_bar_only_on_a_terminal_and_never_with_json() {
    let dir = temp_dir("cli", "progress");
    let input = dir.join("long.pcap");
    long_capture(&input, 200_000);
    let input = input.to_str().unwrap();
    // Not a terminal: nothing on stderr.
    let r = lro(&["replay", input]);
    assert!(r.status.success());
    assert!(
        r.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    if !has_script() {
        println!("skipped the terminal half: `script` (util-linux) not found");
        return;
    }
    let replay_on_terminal = |extra: &str| {
        let tty = lro_on_terminal(&format!("replay {input} {extra} >/dev/null"));
        assert!(tty.contains("status=0"), "{tty:?}");
        tty
    };
    let tty = replay_on_terminal("");
    assert!(
        tty.contains("coalescing") && tty.contains("frames"),
        "no bar on a terminal: {tty:?}"
    );
    let tty = replay_on_terminal("--json");
    assert!(!tty.contains("coalescing"), "a bar with --json: {tty:?}");
}

/// `flows` TCP flows interleaved frame by frame for `rounds` rounds (each flow's next data
/// frame of 100 bytes per round), with the timestamp option or without, as pcap records.
fn interleaved_flows(flows: u16, rounds: u32, timestamps: bool) -> Vec<(Duration, Vec<u8>)> {
    use lro_core::testing::{FrameSpec, TCP_ACK};
    let payload = [0x42u8; 100];
    let mut frames = Vec::new();
    for round in 0..rounds {
        for flow in 0..flows {
            let mut spec = FrameSpec::ipv4_tcp(10_000 + flow, 80)
                .seq(1 + round * 100)
                .ack(1)
                .flags(TCP_ACK)
                .payload(&payload);
            if timestamps {
                spec = spec.timestamps(1 + round, 1);
            }
            let f = frame_of(&spec);
            let at = u64::from(round) * u64::from(flows) + u64::from(flow);
            frames.push((Duration::from_micros(at), f));
        }
    }
    frames
}

/// More flows than table entries: 128 flows of two frames each, every flow's first frame and
/// then every flow's second, through 64 entries. `replay` and `bench` say how many flows lost
/// their entry (and that `--flows` sets the table's size); through 256 entries, none.
#[test]
fn a_table_smaller_than_the_flows_is_reported_as_forgotten_flows() {
    let dir = temp_dir("cli", "forgotten");
    let frames = interleaved_flows(128, 2, false);
    let path = dir.join("flows128.pcap");
    write_pcap(&path, 1, &frames);
    let p = path.to_str().unwrap();
    // The first 64 flows take the 64 fresh entries; each later flow takes an idle one.
    let replay = lro_json(&["replay", p, "--burst", "32"]);
    assert_eq!(u(&replay, "forgotten"), 256 - 64);
    let big = lro_json(&["replay", p, "--burst", "32", "--flows", "256"]);
    assert_eq!(u(&big, "forgotten"), 0);
    let text = lro_ok(&["replay", p, "--burst", "32"]);
    let line = text
        .lines()
        .find(|l| l.starts_with("forgotten "))
        .unwrap_or_else(|| panic!("no forgotten line in:\n{text}"));
    assert!(
        line.contains("192 flows") && line.contains("--flows"),
        "{line}"
    );
    // `bench`: per pass, once the table is full from the pass before.
    let bench = lro_json(&["bench", p, "--burst", "32", "--rounds", "2"]);
    assert_eq!(u(&bench, "forgotten_per_pass"), 256);
    let big = lro_json(&[
        "bench", p, "--burst", "32", "--rounds", "2", "--flows", "256",
    ]);
    assert_eq!(u(&big, "forgotten_per_pass"), 0);
    let text = lro_ok(&["bench", p, "--burst", "32", "--rounds", "1"]);
    assert!(
        text.lines()
            .any(|l| l.starts_with("forgotten: 256 flows per pass") && l.contains("--flows")),
        "{text}"
    );
    let text = lro_ok(&["bench", p, "--rounds", "1", "--flows", "256"]);
    assert!(!text.lines().any(|l| l.starts_with("forgotten")), "{text}");
}

/// `--bypass` on traffic in which nothing can merge (128 flows interleaved frame by frame,
/// bursts of 32): after the first burst, bursts pass through without coalescing, the report
/// says so, and the output is the input, frame for frame; without it, the same output and no
/// bypass. `bench` says which it timed.
#[test]
fn bypass_passes_traffic_that_never_merges_through() {
    let dir = temp_dir("cli", "bypass");
    let frames = interleaved_flows(128, 4, true);
    let path = dir.join("singles.pcap");
    write_pcap(&path, 1, &frames);
    let run = |extra: &[&str]| {
        let out = dir.join("out.pcap");
        let args = [
            &["replay", path.to_str().unwrap(), "--burst", "32", "-o"][..],
            &[out.to_str().unwrap()],
        ];
        let v = lro_json(&[&args.concat()[..], extra].concat());
        let out = read_capture(&out);
        check_counts(&v, frames.len(), Some(&out));
        assert_eq!(out.frames.len(), frames.len());
        for ((_, a), (_, b)) in out.frames.iter().zip(&frames) {
            assert_eq!(a, b, "output frame differs from the input");
        }
        v
    };
    let on = run(&["--bypass"]);
    let off = run(&[]);
    assert_eq!(on["bypass"], true);
    assert_eq!(off["bypass"], false);
    let bypassed = u(&on, "bypassed_bursts");
    // 16 bursts: judged poor after the first, then tried again after 1, 2 and 4 paused bursts.
    assert!(bypassed >= 10, "{bypassed} of 16 bursts bypassed: {on}");
    assert_eq!(on["passed"]["bypassed"].as_u64(), Some(32 * bypassed));
    assert_eq!(u(&off, "bypassed_bursts"), 0);
    assert_eq!(off["passed"]["bypassed"].as_u64(), Some(0));
    let text = lro_ok(&[
        "replay",
        path.to_str().unwrap(),
        "--burst",
        "32",
        "--bypass",
    ]);
    let line = text
        .lines()
        .find(|l| l.starts_with("bypassed "))
        .unwrap_or_else(|| panic!("no bypassed line in:\n{text}"));
    assert!(
        line.contains(&format!("{} frames in {bypassed} bursts", 32 * bypassed)),
        "{line}"
    );
    assert!(text.contains("adaptive bypass"), "{text}");
    // explain parses what the engine passed through: every frame in its flow's row.
    let flows = |extra: &[&str]| {
        let args = [
            "explain",
            path.to_str().unwrap(),
            "--burst",
            "32",
            "--top",
            "1000",
        ];
        let v = lro_json(&[&args[..], extra].concat());
        let mut rows: Vec<(String, u64, u64)> = v["flows_shown"]
            .as_array()
            .expect("flows_shown")
            .iter()
            .map(|f| {
                (
                    f["flow"].to_string(),
                    u(f, "frames_in"),
                    u(f, "payload_bytes"),
                )
            })
            .collect();
        rows.sort();
        (u(&v, "flow_count"), rows)
    };
    let (count, rows) = flows(&["--bypass"]);
    assert_eq!(count, 128, "flows");
    assert_eq!(
        (count, rows),
        flows(&[]),
        "the same rows with and without the bypass"
    );
    let bench = lro_json(&["bench", path.to_str().unwrap(), "--rounds", "1", "--bypass"]);
    assert_eq!(bench["bypass"], true);
    assert_eq!(u(&bench, "frames_out"), frames.len() as u64);
}
