//! Re-frames an Ethernet or raw-IP capture of real traffic as IP over InfiniBand: every IPv4 or
//! IPv6 packet becomes a `LINKTYPE_IPOIB` (242) record (the 40-byte GRH area with the
//! destination's IPoIB hardware address, the 4-byte encapsulation header, the packet);
//! anything else is left out. The packets themselves are not touched.
//!
//! ```sh
//! cargo run -p drivers-ipoib --features std --example to_ipoib_pcap -- \
//!     data/small.pcap.xz /tmp/ipoib.pcap [--per-flow N] [--mtu 2044]
//! ```
//!
//! `--per-flow N` keeps the first N packets of each TCP connection (both directions) and the
//! non-TCP packets, for a small capture; packets longer than `--mtu` (default 2044, the
//! datagram-mode MTU over a 2K InfiniBand MTU) are left out and counted. The destination
//! hardware address is made up from the destination IP address: flags 0x80 (connected mode
//! accepted), QPN 0x48, a link-local GID whose interface ID carries the address.
//! `data/ipoib-tcp.pcap.xz` was made so from `data/small.pcap.xz` with `--per-flow 24`.

use std::collections::HashMap;
use std::path::Path;
use std::process::ExitCode;

use drivers_ipoib::wire::capture::{self, write_record};
use drivers_ipoib::wire::encap;
use drivers_ipoib::wire::{Gid, HwAddr, Qpn};
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapReader, PcapWriter};
use pcap_file::DataLink;

fn read(path: &Path) -> Result<Vec<u8>, String> {
    let raw = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if raw.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0]) {
        let mut out = Vec::new();
        lzma_rs::xz_decompress(&mut &raw[..], &mut out)
            .map_err(|e| format!("{}: xz: {e}", path.display()))?;
        Ok(out)
    } else {
        Ok(raw)
    }
}

/// The IP packet of a captured frame, by link type.
fn ip_packet(link: DataLink, frame: &[u8]) -> Option<&[u8]> {
    match link {
        DataLink::ETHERNET => {
            let mut off = 12;
            let mut et = u16::from_be_bytes([*frame.get(12)?, *frame.get(13)?]);
            while et == 0x8100 || et == 0x88a8 {
                off += 4;
                et = u16::from_be_bytes([*frame.get(off)?, *frame.get(off + 1)?]);
            }
            matches!(et, 0x0800 | 0x86dd).then(|| &frame[off + 2..])
        }
        DataLink::RAW | DataLink::IPV4 | DataLink::IPV6 => Some(frame),
        _ => None,
    }
}

/// The IP datagram without trailing link padding.
fn trim(ip: &[u8]) -> Option<&[u8]> {
    let len = match ip.first()? >> 4 {
        // A total length shorter than the IPv4 header: not a packet (`dest_and_flow` reads
        // the whole header).
        4 => Some(usize::from(u16::from_be_bytes([*ip.get(2)?, *ip.get(3)?])))
            .filter(|&len| len >= 20)?,
        6 => 40 + usize::from(u16::from_be_bytes([*ip.get(4)?, *ip.get(5)?])),
        _ => return None,
    };
    ip.get(..len)
}

/// The destination's made-up IPoIB address, and the connection a TCP packet belongs to.
fn dest_and_flow(ip: &[u8]) -> (HwAddr, Option<Vec<u8>>) {
    let (dst, mut a, mut b, l4, proto) = if ip[0] >> 4 == 4 {
        let ihl = usize::from(ip[0] & 0xf) * 4;
        (
            u64::from(u32::from_be_bytes([ip[16], ip[17], ip[18], ip[19]])),
            ip[12..16].to_vec(),
            ip[16..20].to_vec(),
            ihl,
            ip[9],
        )
    } else {
        let mut lo = [0u8; 8];
        lo.copy_from_slice(&ip[32..40]);
        (
            u64::from_be_bytes(lo),
            ip[8..24].to_vec(),
            ip[24..40].to_vec(),
            40,
            ip[6],
        )
    };
    let dest = HwAddr {
        flags: 0x80,
        qpn: Qpn::try_new(0x48).unwrap_or_default(),
        gid: Gid::link_local(0x0002_c903_0000_0000 ^ dst),
    };
    let flow = (proto == 6 && ip.len() >= l4 + 4).then(|| {
        let (mut pa, mut pb) = (ip[l4..l4 + 2].to_vec(), ip[l4 + 2..l4 + 4].to_vec());
        if (&a, &pa) > (&b, &pb) {
            std::mem::swap(&mut a, &mut b);
            std::mem::swap(&mut pa, &mut pb);
        }
        [a, pa, b, pb].concat()
    });
    (dest, flow)
}

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: to_ipoib_pcap INPUT OUTPUT [--per-flow N] [--mtu BYTES]";
    let mut files = Vec::new();
    let (mut per_flow, mut mtu) = (usize::MAX, 2044usize);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut num = || -> Result<usize, String> {
            it.next()
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| format!("{a} needs a number\n{usage}"))
        };
        match a.as_str() {
            "--per-flow" => per_flow = num()?,
            "--mtu" => mtu = num()?,
            _ if a.starts_with('-') => return Err(format!("unknown option {a}\n{usage}")),
            _ => files.push(a.clone()),
        }
    }
    let [input, output] = <[String; 2]>::try_from(files).map_err(|_| usage.to_string())?;
    let data = read(Path::new(&input))?;
    let mut reader = PcapReader::new(&data[..]).map_err(|e| format!("{input}: {e}"))?;
    let header = reader.header();
    let link = header.datalink;
    let out = std::fs::File::create(&output).map_err(|e| format!("{output}: {e}"))?;
    let mut writer = PcapWriter::with_header(
        out,
        PcapHeader {
            datalink: DataLink::from(capture::LINKTYPE),
            ..header
        },
    )
    .map_err(|e| format!("{output}: {e}"))?;
    let mut seen: HashMap<Vec<u8>, usize> = HashMap::new();
    let (mut written, mut not_ip, mut too_long, mut cut) = (0, 0, 0, 0);
    let mut record = vec![0u8; capture::PSEUDO_LEN + encap::HEADER_LEN + 65535];
    let mut ipoib = vec![0u8; encap::HEADER_LEN + 65535];
    while let Some(p) = reader.next_packet() {
        let p = p.map_err(|e| format!("{input}: {e}"))?;
        let Some(ip) = ip_packet(link, &p.data).and_then(trim) else {
            not_ip += 1;
            continue;
        };
        if ip.len() > mtu {
            too_long += 1;
            continue;
        }
        let (dest, flow) = dest_and_flow(ip);
        if let Some(f) = flow {
            let n = seen.entry(f).or_default();
            *n += 1;
            if *n > per_flow {
                cut += 1;
                continue;
            }
        }
        let n = encap::frame_ip(ip, &mut ipoib).map_err(|e| e.to_string())?;
        let len = write_record(&dest, &ipoib[..n], &mut record).map_err(|e| e.to_string())?;
        writer
            .write_packet(&PcapPacket::new(p.timestamp, len as u32, &record[..len]))
            .map_err(|e| format!("{output}: {e}"))?;
        written += 1;
    }
    println!(
        "{output}: {written} IPoIB records (LINKTYPE_IPOIB); left out: {not_ip} not IP, {too_long} over the {mtu}-byte MTU, {cut} beyond --per-flow"
    );
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("to_ipoib_pcap: {e}");
            ExitCode::from(2)
        }
    }
}
