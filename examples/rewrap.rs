//! Rewrites a capture of Ethernet/IPv4/TCP frames into another frame shape, for measuring what
//! a shape costs the engine against the same traffic in its plain form:
//!
//! - `vlan`: an 802.1Q tag (VLAN 100) after the MAC addresses of every Ethernet frame;
//! - `qinq`: two tags (802.1ad 200, then 802.1Q 100);
//! - `ipv6`: every IPv4 header replaced by an IPv6 one (addresses `fd00::a.b.c.d`, the TOS as
//!   traffic class, the TTL as hop limit, no flow label), TCP checksums recomputed.
//!
//! Frames that are not Ethernet/IPv4/TCP are copied as they are. Input: pcap, optionally xz.
//!
//! ```sh
//! xz -dkc ../shared/captures/tcp4_4flows_wire.pcap.xz > /tmp/4flows.pcap
//! cargo run --release --example rewrap -- vlan /tmp/4flows.pcap /tmp/4flows-vlan.pcap
//! cargo run --release --example rewrap -- ipv6 /tmp/4flows.pcap /tmp/4flows-v6.pcap
//! cargo run --release -- bench /tmp/4flows-vlan.pcap --burst 32 --csum trust
//! ```

use std::fs::File;
use std::io::{BufReader, Read};
use std::process::ExitCode;

use pcap_file::pcap::{PcapPacket, PcapReader, PcapWriter};

/// Ones'-complement sum, folded (as `lro_core::csum::sum`, kept independent here).
fn sum(data: &[u8]) -> u16 {
    let mut acc: u64 = 0;
    let mut it = data.chunks_exact(2);
    for w in &mut it {
        acc += u64::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [b] = it.remainder() {
        acc += u64::from(*b) << 8;
    }
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

fn add(a: u16, b: u16) -> u16 {
    let s = u32::from(a) + u32::from(b);
    ((s & 0xffff) + (s >> 16)) as u16
}

/// The frame with `tags` (TPID, TCI) inserted after the MAC addresses.
fn tagged(f: &[u8], tags: &[(u16, u16)]) -> Vec<u8> {
    if f.len() < 14 {
        return f.to_vec();
    }
    let mut out = f[..12].to_vec();
    for (tpid, tci) in tags {
        out.extend_from_slice(&tpid.to_be_bytes());
        out.extend_from_slice(&tci.to_be_bytes());
    }
    out.extend_from_slice(&f[12..]);
    out
}

/// The Ethernet/IPv4/TCP frame `f` as Ethernet/IPv6/TCP, or `None` if it is not one.
fn to_ipv6(f: &[u8]) -> Option<Vec<u8>> {
    let ip = f.get(14..)?;
    if u16::from_be_bytes([f[12], f[13]]) != 0x0800 || ip.len() < 20 || ip[0] >> 4 != 4 {
        return None;
    }
    let ihl = usize::from(ip[0] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    // A whole IPv4 header and a whole TCP header (the checksum is at 16..18).
    if ip[9] != 6
        || ihl < 20
        || total < ihl + 20
        || total > ip.len()
        || u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff != 0
    {
        return None;
    }
    let tcp = &ip[ihl..total];
    let addr = |a: &[u8]| {
        let mut v = [0u8; 16];
        v[0] = 0xfd;
        v[12..].copy_from_slice(a);
        v
    };
    let (src, dst) = (addr(&ip[12..16]), addr(&ip[16..20]));
    let mut out = Vec::with_capacity(f.len() + 20);
    out.extend_from_slice(&f[..12]);
    out.extend_from_slice(&0x86ddu16.to_be_bytes());
    let first = 6u32 << 28 | u32::from(ip[1]) << 20;
    out.extend_from_slice(&first.to_be_bytes());
    out.extend_from_slice(&(tcp.len() as u16).to_be_bytes());
    out.push(6);
    out.push(ip[8]);
    out.extend_from_slice(&src);
    out.extend_from_slice(&dst);
    let at = out.len();
    out.extend_from_slice(tcp);
    out.extend_from_slice(&f[14 + total..]); // padding, if any
                                             // TCP checksum over the IPv6 pseudo header (RFC 8200 section 8.1).
    out[at + 16..at + 18].fill(0);
    let pseudo = add(
        add(sum(&src), sum(&dst)),
        add(6, sum(&(tcp.len() as u32).to_be_bytes())),
    );
    let c = !add(pseudo, sum(&out[at..at + tcp.len()]));
    out[at + 16..at + 18].copy_from_slice(&c.to_be_bytes());
    Some(out)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let [_, mode, input, output] = &args[..] else {
        eprintln!("usage: rewrap vlan|qinq|ipv6 INPUT.pcap[.xz] OUTPUT.pcap");
        return ExitCode::from(2);
    };
    // Before anything is read or the output created: a mistyped mode must not truncate OUTPUT.
    if !matches!(mode.as_str(), "vlan" | "qinq" | "ipv6") {
        eprintln!("rewrap: unknown mode {mode}: vlan, qinq or ipv6");
        return ExitCode::from(2);
    }
    let mut raw = Vec::new();
    if let Err(e) = File::open(input).and_then(|f| BufReader::new(f).read_to_end(&mut raw)) {
        eprintln!("rewrap: {input}: {e}");
        return ExitCode::from(3);
    }
    if raw.starts_with(&[0xfd, b'7', b'z', b'X', b'Z']) {
        let mut out = Vec::new();
        if let Err(e) = lzma_rs::xz_decompress(&mut &raw[..], &mut out) {
            eprintln!("rewrap: {input}: not a valid xz stream: {e}");
            return ExitCode::from(3);
        }
        raw = out;
    }
    let mut reader = match PcapReader::new(&raw[..]) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("rewrap: {input}: not a pcap: {e}");
            return ExitCode::from(3);
        }
    };
    let header = reader.header();
    if header.datalink != pcap_file::DataLink::ETHERNET {
        eprintln!(
            "rewrap: {input}: link type {:?}, not Ethernet",
            header.datalink
        );
        return ExitCode::from(3);
    }
    let file = match File::create(output) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("rewrap: {output}: {e}");
            return ExitCode::from(4);
        }
    };
    let mut writer = match PcapWriter::with_header(file, header) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("rewrap: {output}: {e}");
            return ExitCode::from(4);
        }
    };
    let (mut n, mut changed) = (0u64, 0u64);
    while let Some(packet) = reader.next_packet() {
        let p = match packet {
            Ok(p) => p,
            Err(e) => {
                eprintln!("rewrap: {input}: {e}");
                return ExitCode::from(3);
            }
        };
        let data = p.data.as_ref();
        let new = match mode.as_str() {
            "vlan" => Some(tagged(data, &[(0x8100, 100)])),
            "qinq" => Some(tagged(data, &[(0x88a8, 200), (0x8100, 100)])),
            _ => to_ipv6(data), // "ipv6", the only other mode checked above
        };
        n += 1;
        let bytes = match new {
            Some(b) => {
                changed += 1;
                b
            }
            None => data.to_vec(),
        };
        let out = PcapPacket::new(p.timestamp, bytes.len() as u32, &bytes);
        if let Err(e) = writer.write_packet(&out) {
            eprintln!("rewrap: {output}: {e}");
            return ExitCode::from(4);
        }
    }
    println!("rewrap {mode}: {n} frames, {changed} rewritten, into {output}");
    ExitCode::SUCCESS
}
