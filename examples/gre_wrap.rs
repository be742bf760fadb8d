//! Wraps a capture's frames in GRE, as a GRE or gretap tunnel between 198.18.0.1 and
//! 198.18.0.2 would carry them: this machine's kernel has no GRE module, so GRE traffic for
//! `lro replay`, `explain` and `bench` is made from real kernel TCP captures.
//!
//! ```text
//! cargo run --release --example gre_wrap -- [OPTIONS] INPUT OUTPUT
//! cargo run --release --example gre_wrap -- --all INPUT DIR     # every variant below, one file each
//!
//!   --flags none|k|c|ck|s|cks|r|v1   GRE flags (default k): C checksum, K key, S sequence,
//!                                    r routing (RFC 1701), v1 version 1; s, cks, r and v1 are
//!                                    never merged
//!   --key N                          the key (default 42)
//!   --outer v4|v6                    outer IP version (default v4)
//!   --vlan TCI                       an outer 802.1Q tag (twice: QinQ, the first as 802.1ad)
//!   --raw                            no outer link header (a raw IP capture)
//!   --teb                            carry the inner Ethernet frame (gretap; with a key: NVGRE)
//!   --outer-id tunnel|inner|N        outer IPv4 IDs: one counter per tunnel direction as Linux
//!                                    numbers them (default), the inner header's (per flow), or
//!                                    fixed
//! ```
//!
//! INPUT is a pcap or pcapng with Ethernet frames, optionally xz-compressed (`data/*.pcap.xz`).
//! Frames that are not IP are copied as they are. Lengths and checksums (outer IPv4 header,
//! GRE) are computed by `lro_gre::testing`. Then, for example:
//!
//! ```text
//! cargo run --release --example gre_wrap -- data/default.pcap.xz /tmp/gre.pcap
//! cargo run --release -- replay /tmp/gre.pcap         # the same aggregation as data/default.pcap.xz
//! cargo run --release -- explain /tmp/gre.pcap        # each flow with its tunnel
//! scripts/bench-gre.sh                                # ns per frame, GRE vs plain, side by side
//! ```

use std::fs::File;
use std::io::{BufWriter, Read};
use std::path::{Path, PathBuf};

use lro_gre::testing::{GreSpec, InnerFrame, OuterId, Tunnel};
use lro_gre::wire::flags;
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapReader, PcapWriter};
use pcap_file::DataLink;

type Error = Box<dyn std::error::Error>;

/// One way to wrap.
#[derive(Debug, Clone)]
struct Options {
    flags: String,
    key: u32,
    v6: bool,
    vlans: Vec<u16>,
    raw: bool,
    teb: bool,
    outer_id: OuterId,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            flags: "k".into(),
            key: 42,
            v6: false,
            vlans: Vec::new(),
            raw: false,
            teb: false,
            outer_id: OuterId::Tunnel,
        }
    }
}

impl Options {
    fn spec(&self) -> Result<GreSpec, Error> {
        let mut g = if self.v6 {
            GreSpec::ipv6()
        } else {
            GreSpec::ipv4()
        };
        g = match self.flags.as_str() {
            "none" => g,
            "k" => g.key(self.key),
            "c" => g.checksum(),
            "ck" => g.checksum().key(self.key),
            "s" => g.sequence(0),
            "cks" => g.checksum().key(self.key).sequence(0),
            "r" => {
                g.flags_version = flags::R;
                g
            }
            "v1" => {
                let mut g = g.key(self.key);
                g.flags_version |= 1;
                g
            }
            other => return Err(format!("--flags {other}: none, k, c, ck, s, cks, r or v1").into()),
        };
        for (i, tci) in self.vlans.iter().enumerate() {
            let tpid = if i == 0 && self.vlans.len() == 2 {
                0x88a8
            } else {
                0x8100
            };
            g = g.vlan(tpid, *tci);
        }
        if self.raw {
            g = g.raw_ip();
        }
        if self.teb {
            g = g.teb();
        }
        Ok(g)
    }

    /// A file name for `--all`.
    fn name(&self) -> String {
        let mut n = format!("gre-{}-{}", self.flags, if self.v6 { "v6" } else { "v4" });
        if !self.vlans.is_empty() {
            n += &format!("-vlan{}", self.vlans.len());
        }
        if self.raw {
            n += "-raw";
        }
        if self.teb {
            n += "-teb";
        }
        n + ".pcap"
    }
}

/// The frames of a capture (pcap or pcapng, optionally xz) with their timestamps.
fn read(path: &Path) -> Result<Vec<(std::time::Duration, Vec<u8>)>, Error> {
    let mut raw = Vec::new();
    File::open(path)
        .map_err(|e| format!("{}: {e}", path.display()))?
        .read_to_end(&mut raw)?;
    if raw.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0]) {
        let mut plain = Vec::new();
        lzma_rs::xz_decompress(&mut &raw[..], &mut plain)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        raw = plain;
    }
    let mut out = Vec::new();
    if raw.starts_with(&[0x0a, 0x0d, 0x0d, 0x0a]) {
        let mut r = pcap_file::pcapng::PcapNgReader::new(&raw[..])?;
        while let Some(block) = r.next_block() {
            if let pcap_file::pcapng::Block::EnhancedPacket(p) = block? {
                out.push((p.timestamp, p.data.to_vec()));
            }
        }
    } else {
        let mut r = PcapReader::new(&raw[..])?;
        if r.header().datalink != DataLink::ETHERNET {
            return Err(format!("{}: not an Ethernet capture", path.display()).into());
        }
        while let Some(p) = r.next_packet() {
            let p = p?;
            out.push((p.timestamp, p.data.to_vec()));
        }
    }
    Ok(out)
}

/// Writes the frames wrapped as `o` says; returns how many were wrapped.
fn write(
    frames: &[(std::time::Duration, Vec<u8>)],
    o: &Options,
    path: &Path,
) -> Result<usize, Error> {
    let mut tunnel = Tunnel::new(o.spec()?, o.outer_id);
    let header = PcapHeader {
        datalink: if o.raw {
            DataLink::RAW
        } else {
            DataLink::ETHERNET
        },
        snaplen: 262_144,
        ..PcapHeader::default()
    };
    let file = File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut out = PcapWriter::with_header(BufWriter::new(file), header)?;
    let mut buf = vec![0u8; 70_000];
    let mut wrapped = 0;
    for (ts, f) in frames {
        match tunnel.wrap(InnerFrame::Ethernet(f), &mut buf) {
            Ok(n) => {
                out.write_packet(&PcapPacket::new(*ts, n as u32, &buf[..n]))?;
                wrapped += 1;
            }
            // Not IP (ARP...): as it came, unless the output has no link header for it.
            Err(_) if !o.raw => {
                out.write_packet(&PcapPacket::new(*ts, f.len() as u32, f))?;
            }
            Err(_) => {}
        }
    }
    Ok(wrapped)
}

fn main() -> Result<(), Error> {
    let mut o = Options::default();
    let mut all = false;
    let mut pos: Vec<PathBuf> = Vec::new();
    let mut args = std::env::args().skip(1);
    let usage = "usage: gre_wrap [--flags F] [--key N] [--outer v4|v6] [--vlan TCI]... [--raw] [--teb] [--outer-id tunnel|inner|N] INPUT OUTPUT\n       gre_wrap --all INPUT DIR";
    while let Some(a) = args.next() {
        let mut value = || {
            args.next()
                .ok_or_else(|| format!("{a}: a value is missing\n{usage}"))
        };
        match a.as_str() {
            "--flags" => o.flags = value()?,
            "--key" => {
                let v = value()?;
                o.key = v.parse().map_err(|e| format!("--key {v}: {e}"))?;
            }
            "--outer" => {
                o.v6 = match value()?.as_str() {
                    "v4" => false,
                    "v6" => true,
                    other => return Err(format!("--outer {other}: v4 or v6").into()),
                }
            }
            "--vlan" => {
                let v = value()?;
                o.vlans
                    .push(v.parse().map_err(|e| format!("--vlan {v}: {e}"))?);
            }
            "--raw" => o.raw = true,
            "--teb" => o.teb = true,
            "--outer-id" => {
                o.outer_id =
                    match value()?.as_str() {
                        "tunnel" => OuterId::Tunnel,
                        "inner" => OuterId::Inner,
                        n => OuterId::Fixed(n.parse().map_err(|e| {
                            format!("--outer-id {n}: tunnel, inner or a number: {e}")
                        })?),
                    }
            }
            "--all" => all = true,
            "-h" | "--help" => {
                println!("{usage}");
                return Ok(());
            }
            _ if a.starts_with("--") => return Err(format!("{a}: unknown option\n{usage}").into()),
            _ => pos.push(a.into()),
        }
    }
    let [input, output] = &pos[..] else {
        return Err(usage.into());
    };
    if o.vlans.len() > 2 {
        return Err("--vlan: at most two tags".into());
    }
    let frames = read(input)?;
    if !all {
        let n = write(&frames, &o, output)?;
        eprintln!(
            "{}: {n} of {} frames wrapped",
            output.display(),
            frames.len()
        );
        return Ok(());
    }
    std::fs::create_dir_all(output)?;
    let mut variants = Vec::new();
    for flags in ["none", "k", "c", "ck", "s", "cks", "r", "v1"] {
        for v6 in [false, true] {
            variants.push(Options {
                flags: flags.into(),
                v6,
                ..Options::default()
            });
        }
    }
    for (vlans, raw, teb, flags) in [
        (vec![7], false, false, "ck"),
        (vec![100, 200], false, false, "k"),
        (vec![], true, false, "ck"),
        (vec![], false, true, "none"),
        (vec![], false, true, "k"),
        (vec![], false, true, "c"),
    ] {
        variants.push(Options {
            flags: flags.into(),
            vlans,
            raw,
            teb,
            ..Options::default()
        });
    }
    for v in &variants {
        let path = output.join(v.name());
        let n = write(&frames, v, &path)?;
        eprintln!("{}: {n} of {} frames wrapped", path.display(), frames.len());
    }
    Ok(())
}
