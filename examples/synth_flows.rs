//! Writes a synthetic capture of many TCP flows interleaved frame by frame: the worst case for a
//! small flow table, and the case FreeBSD's RSS sorting was made for (seed 001).
//!
//! Every round, each flow sends one 1448-byte segment and, every second round, its receiver
//! sends one pure ACK; rounds are 1 µs apart. NIC RSS hashes are not recorded in pcap, so
//! `lro replay --rss-sort` computes them in software (Toeplitz, Microsoft key).
//!
//! 256 flows send 384 frames per round, so a burst of 64 frames holds one frame of each flow it
//! touches and nothing can merge; a burst of 1024 holds two or three frames of every flow, if
//! the flow table can keep them apart:
//!
//! ```text
//! cargo run --release --example synth_flows -- 256 64 /tmp/flows256.pcap
//! cargo run --release -- replay /tmp/flows256.pcap                                    # ratio 1.00
//! cargo run --release -- replay /tmp/flows256.pcap --burst 1024 --flows 8             # 1.00, 8 flows for 512: evictions
//! cargo run --release -- replay /tmp/flows256.pcap --burst 1024 --flows 8 --rss-sort  # 1.74 with the same 8 flows
//! cargo run --release -- replay /tmp/flows256.pcap --burst 1024 --flows 1024          # 1.95 with a table 128 times larger
//! cargo run --release -- replay /tmp/flows256.pcap --hold --flows 512                 # 10.22: flows held across bursts
//! ```
//!
//! Sorting each burst by RSS hash gets from 8 table entries nearly what unsorted needs an entry
//! per flow for (the larger table's engine also remembers the ACK state of more flows, so more
//! of their pure ACKs merge: `lro` gives an engine four ACK records per table entry); holding
//! flows across bursts (as Linux GRO does within a NAPI poll of many packets) needs that table
//! but merges whole windows.

use std::fs::File;
use std::io::BufWriter;
use std::time::Duration;

use lro_core::testing::{FrameSpec, IpSpec, Ipv4Spec, TCP_ACK};
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::DataLink;

const MSS: usize = 1448;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: synth_flows [FLOWS=256] [ROUNDS=64] [OUTPUT=flows.pcap]";
    let flows: u16 = args
        .first()
        .map_or(Ok(256), |a| a.parse())
        .map_err(|e| format!("{usage}: {e}"))?;
    let rounds: u32 = args
        .get(1)
        .map_or(Ok(64), |a| a.parse())
        .map_err(|e| format!("{usage}: {e}"))?;
    let path = args.get(2).map_or("flows.pcap", String::as_str);
    if flows == 0 || rounds == 0 {
        return Err(usage.into());
    }
    // Flow n sends from port 10000 + n.
    if flows > u16::MAX - 10_000 + 1 {
        return Err(format!("{usage}: at most 55536 flows (source ports 10000 to 65535)").into());
    }
    let header = PcapHeader {
        datalink: DataLink::ETHERNET,
        ..PcapHeader::default()
    };
    let mut out = PcapWriter::with_header(BufWriter::new(File::create(path)?), header)?;
    let payload: Vec<u8> = (0..MSS).map(|i| (i % 251) as u8).collect();
    let mut buf = vec![0u8; 2048];
    let mut frames = 0u64;
    for round in 0..rounds {
        let time = Duration::from_micros(u64::from(round));
        for flow in 0..flows {
            let data_ip = Ipv4Spec {
                src: [198, 18, 0, 1],
                dst: [198, 18, 0, 2],
                id: round as u16,
                ..Ipv4Spec::default()
            };
            let seq = 1 + round * MSS as u32;
            let data = FrameSpec {
                ip: IpSpec::V4(data_ip),
                ..FrameSpec::ipv4_tcp(10_000 + flow, 5201)
            }
            .seq(seq)
            .ack(1)
            .flags(TCP_ACK)
            .timestamps(1000 + round, 500)
            .payload(&payload);
            let len = data.write(&mut buf)?;
            out.write_packet(&PcapPacket::new(time, len as u32, &buf[..len]))?;
            frames += 1;
            if round % 2 == 1 {
                let ack_ip = Ipv4Spec {
                    src: [198, 18, 0, 2],
                    dst: [198, 18, 0, 1],
                    id: round as u16,
                    ..Ipv4Spec::default()
                };
                let ack = FrameSpec {
                    ip: IpSpec::V4(ack_ip),
                    ..FrameSpec::ipv4_tcp(5201, 10_000 + flow)
                }
                .seq(1)
                .ack(seq + MSS as u32)
                .flags(TCP_ACK)
                .timestamps(500 + round, 1000 + round);
                let len = ack.write(&mut buf)?;
                out.write_packet(&PcapPacket::new(time, len as u32, &buf[..len]))?;
                frames += 1;
            }
        }
    }
    eprintln!("{path}: {frames} frames, {flows} flows interleaved frame by frame, {rounds} rounds");
    eprintln!(
        "try: cargo run --release -- replay {path} --burst 1024 --flows 8 [--rss-sort] (see the example's documentation)"
    );
    Ok(())
}
