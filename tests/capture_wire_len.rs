//! How captures are read and written back: a frame's length on the wire through `replay -o`,
//! and what every command's help says of reading standard input.

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapReader, PcapWriter};
use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionBlock;
use pcap_file::pcapng::PcapNgWriter;
use pcap_file::DataLink;

use common::{capture_bytes, frame_of, lro_json, root, temp_dir, u};

/// A frame: timestamp, captured bytes, length on the wire.
type Record = (Duration, Vec<u8>, u32);

fn read_records(path: &Path) -> (u32, Vec<Record>) {
    let raw = capture_bytes(path);
    let mut r = PcapReader::new(&raw[..]).expect("pcap header");
    let link = u32::from(r.header().datalink);
    let mut v = Vec::new();
    while let Some(p) = r.next_packet() {
        let p = p.expect("pcap packet");
        v.push((p.timestamp, p.data.into_owned(), p.orig_len));
    }
    (link, v)
}

fn write_pcap(path: &Path, link: u32, snaplen: u32, frames: &[Record]) {
    let header = PcapHeader {
        datalink: DataLink::from(link),
        snaplen,
        ..PcapHeader::default()
    };
    let file = std::fs::File::create(path).expect("create pcap");
    let mut w = PcapWriter::with_header(file, header).expect("pcap writer");
    for (ts, data, orig) in frames {
        w.write_packet(&PcapPacket::new(*ts, *orig, data))
            .expect("write packet");
    }
}

fn write_pcapng(path: &Path, link: u32, snaplen: u32, frames: &[Record]) {
    let file = std::fs::File::create(path).expect("create pcapng");
    let mut w = PcapNgWriter::new(file).expect("pcapng writer");
    w.write_pcapng_block(InterfaceDescriptionBlock::new(
        DataLink::from(link),
        snaplen,
    ))
    .expect("idb");
    for (ts, data, orig) in frames {
        // Microseconds: the interface's default unit.
        let epb = EnhancedPacketBlock {
            interface_id: 0,
            timestamp: Duration::from_nanos(ts.as_micros() as u64),
            original_len: *orig,
            data: data.as_slice().into(),
            options: vec![],
        };
        w.write_pcapng_block(epb).expect("epb");
    }
}

/// A frame captured with a short snap length and passed through by the engine keeps its length
/// on the wire in the output pcap: the output says the frame was cut by the capture, as the
/// input did, instead of claiming the frame was only as long as what was captured.
#[test]
fn frames_cut_by_the_snap_length_keep_their_wire_length() {
    let dir = temp_dir("review", "snaplen");
    let (link, small) = read_records(&root().join("data/small.pcap.xz"));
    const SNAP: usize = 96;
    let cut: Vec<Record> = small
        .iter()
        .map(|(ts, f, _)| (*ts, f[..f.len().min(SNAP)].to_vec(), f.len() as u32))
        .collect();
    assert!(
        cut.iter().filter(|r| r.1.len() < r.2 as usize).count() > 100,
        "frames longer than the snap length"
    );
    // A cooked capture (Linux SLL) with an ARP frame cut short: bypassed without the engine.
    let sll_arp = {
        let mut f = vec![0, 0, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0, 0x08, 0x06];
        f.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
        f.extend_from_slice(&[0u8; 20]);
        f
    };
    let sll_frames: Vec<Record> = vec![(Duration::from_secs(1), sll_arp[..30].to_vec(), 44)];
    let cases = [
        ("cut.pcap", link, &cut, false),
        ("cut.pcapng", link, &cut, true),
        ("sll-arp.pcap", 113, &sll_frames, false),
    ];
    for (name, link, frames, ng) in cases {
        let input = dir.join(name);
        if ng {
            write_pcapng(&input, link, SNAP as u32, frames);
        } else {
            write_pcap(&input, link, SNAP as u32, frames);
        }
        let output = dir.join(format!("{name}.out.pcap"));
        let v = lro_json(&[
            "replay",
            input.to_str().unwrap(),
            "-o",
            output.to_str().unwrap(),
        ]);
        let (_, out) = read_records(&output);
        assert_eq!(out.len() as u64, u(&v, "frames_out"), "{name}");
        let wire: HashMap<&[u8], u32> = frames.iter().map(|r| (&r.1[..], r.2)).collect();
        let mut passed_cut = 0;
        for (_, bytes, orig) in &out {
            if let Some(&want) = wire.get(&bytes[..]) {
                assert_eq!(
                    *orig,
                    want,
                    "{name}: a frame passed through unchanged ({} bytes captured) changed its wire length",
                    bytes.len()
                );
                if want as usize > bytes.len() {
                    passed_cut += 1;
                }
            } else {
                assert!(*orig as usize >= bytes.len(), "{name}");
            }
        }
        assert!(passed_cut > 0, "{name}: no cut frame passed through");
    }
}

/// Every subcommand reads `-` as standard input (README: "`-` reads a capture ... from standard
/// input"), and each one's --help says so, not only replay's.
#[test]
fn every_help_says_dash_reads_standard_input() {
    for cmd in ["replay", "explain", "bench"] {
        let help = common::lro_ok(&[cmd, "--help"]);
        assert!(
            help.contains("`-` reads standard input"),
            "lro {cmd} --help does not say that - reads standard input:\n{help}"
        );
    }
}

/// A frame whose Ethernet padding the engine trimmed is written as the engine delivered it,
/// whole: its length on the wire is its length, even when the capture had cut the padding
/// short (the bytes the capture left out were padding, and the padding is gone).
#[test]
fn a_frame_whose_cut_padding_was_trimmed_is_written_whole() {
    use lro_core::testing::{FrameSpec, TCP_ACK};
    let dir = temp_dir("review", "trimmed-cut");
    // Pure ACKs of one flow (ACK numbers advancing, so the engine holds and absorbs them),
    // each padded to the 60-byte minimum with zeros and captured at 58 bytes.
    let frames: Vec<Record> = (0..4u32)
        .map(|i| {
            let spec = FrameSpec::ipv4_tcp(40000, 5201)
                .seq(7)
                .ack(1000 + 100 * i)
                .flags(TCP_ACK);
            let mut f = frame_of(&spec);
            assert_eq!(f.len(), 54);
            f.resize(58, 0);
            (Duration::from_millis(u64::from(i)), f, 60)
        })
        .collect();
    let input = dir.join("padded.pcap");
    write_pcap(&input, 1, 58, &frames);
    let output = dir.join("padded.out.pcap");
    let v = lro_json(&[
        "replay",
        input.to_str().unwrap(),
        "-o",
        output.to_str().unwrap(),
    ]);
    assert!(u(&v, "trimmed") > 0, "the engine trimmed padding: {v}");
    let (_, out) = read_records(&output);
    assert!(!out.is_empty());
    for (_, bytes, orig) in &out {
        match bytes.len() {
            // Trimmed: whole, nothing left out.
            54 => assert_eq!(*orig, 54, "a trimmed frame claims a longer wire length"),
            // As captured: the wire length the capture said.
            58 => assert_eq!(*orig, 60),
            n => panic!("unexpected output frame of {n} bytes"),
        }
    }
}
