//! Build step of the replay firmware: the board's memory map, and a slice of the built-in
//! capture (`data/default.pcap.xz`) as a small blob the firmware embeds with `include_bytes!`,
//! plus the same slice as a pcap (`slice.pcap` in OUT_DIR) for `lro replay` on the host.
//!
//! Blob format: for each frame, its length (u16, little-endian), its capture time in
//! nanoseconds (u64, little-endian), then its bytes.

use std::env;
use std::fs;
use std::path::PathBuf;

/// A board: its memory map and how much of the capture fits its flash.
struct Board {
    name: &'static str,
    memory_x: &'static str,
    /// Frames taken from the start of the capture, at most.
    max_frames: usize,
    /// Bytes of frames at most (the blob shares the flash with the code).
    max_bytes: usize,
}

const MPS2_AN386: Board = Board {
    name: "mps2-an386",
    // ZBT SSRAM1 (code, 4 MB) and SSRAM2/3 (data, 4 MB) as QEMU's mps2 machine maps them.
    memory_x: "MEMORY\n{\n  FLASH : ORIGIN = 0x00000000, LENGTH = 4M\n  RAM : ORIGIN = 0x20000000, LENGTH = 4M\n}\n",
    max_frames: usize::MAX,
    max_bytes: 3 << 20,
};

const MICROBIT: Board = Board {
    name: "microbit",
    // nRF51822 (QFAA): 256 KB flash, 16 KB RAM.
    memory_x: "MEMORY\n{\n  FLASH : ORIGIN = 0x00000000, LENGTH = 256K\n  RAM : ORIGIN = 0x20000000, LENGTH = 16K\n}\n",
    max_frames: usize::MAX,
    max_bytes: 160 << 10,
};

/// The largest frame the firmware's buffers hold (Ethernet, two VLAN tags, 1500 bytes of IP).
const MAX_FRAME: usize = 1522;

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets it"));
    let boards = [
        (
            env::var_os("CARGO_FEATURE_MPS2_AN386").is_some(),
            MPS2_AN386,
        ),
        (env::var_os("CARGO_FEATURE_MICROBIT").is_some(), MICROBIT),
    ];
    let mut chosen = boards.into_iter().filter(|(on, _)| *on).map(|(_, b)| b);
    let board = match (chosen.next(), chosen.next()) {
        (Some(b), None) => b,
        _ => fail("select exactly one board feature: mps2-an386 or microbit"),
    };

    fs::write(out.join("memory.x"), board.memory_x).expect("write memory.x");
    println!("cargo:rustc-link-search={}", out.display());
    println!("cargo:rustc-link-arg-bins=-Tlink.x");
    println!("cargo:rerun-if-changed=build.rs");

    let capture = manifest.join("../../data/default.pcap.xz");
    println!("cargo:rerun-if-changed={}", capture.display());
    let xz = fs::read(&capture)
        .unwrap_or_else(|e| fail(&format!("{}: cannot read: {e}", capture.display())));
    let mut pcap = Vec::new();
    lzma_rs::xz_decompress(&mut &xz[..], &mut pcap)
        .unwrap_or_else(|e| fail(&format!("{}: bad xz: {e}", capture.display())));
    let (link, frames) =
        parse_pcap(&pcap).unwrap_or_else(|e| fail(&format!("{}: {e}", capture.display())));
    if link != 1 {
        fail(&format!(
            "{}: link type {link}, the firmware takes Ethernet (1)",
            capture.display()
        ));
    }

    let mut blob = Vec::new();
    let mut slice = pcap_header(link);
    let mut bytes = 0;
    let mut n = 0;
    for (ts_ns, frame) in frames.into_iter().take(board.max_frames) {
        if bytes + frame.len() > board.max_bytes {
            break;
        }
        if frame.len() > MAX_FRAME {
            fail(&format!(
                "a {}-byte frame is larger than the firmware's buffers",
                frame.len()
            ));
        }
        bytes += frame.len();
        n += 1;
        blob.extend_from_slice(&(frame.len() as u16).to_le_bytes());
        blob.extend_from_slice(&ts_ns.to_le_bytes());
        blob.extend_from_slice(frame);
        slice.extend_from_slice(&((ts_ns / 1_000_000_000) as u32).to_le_bytes());
        slice.extend_from_slice(&((ts_ns % 1_000_000_000) as u32).to_le_bytes());
        slice.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        slice.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        slice.extend_from_slice(frame);
    }
    fs::write(out.join("frames.bin"), &blob).expect("write frames.bin");
    fs::write(out.join("slice.pcap"), &slice).expect("write slice.pcap");
    println!("cargo:rustc-env=FW_BOARD={}", board.name);
    println!("cargo:rustc-env=FW_SLICE_FRAMES={n}");
    println!("cargo:rustc-env=FW_MAX_FRAME={MAX_FRAME}");
}

fn fail(msg: &str) -> ! {
    eprintln!("fw-replay build: {msg}");
    std::process::exit(1)
}

/// A classic pcap header: nanosecond timestamps, little-endian, snap length 65535.
fn pcap_header(link: u32) -> Vec<u8> {
    let mut h = Vec::with_capacity(24);
    h.extend_from_slice(&0xa1b2_3c4du32.to_le_bytes());
    h.extend_from_slice(&2u16.to_le_bytes());
    h.extend_from_slice(&4u16.to_le_bytes());
    h.extend_from_slice(&[0; 8]);
    h.extend_from_slice(&65535u32.to_le_bytes());
    h.extend_from_slice(&link.to_le_bytes());
    h
}

/// A capture record: time in nanoseconds and the frame's bytes.
type Record<'a> = (u64, &'a [u8]);

/// The link type and the records of a classic pcap file.
fn parse_pcap(d: &[u8]) -> Result<(u32, Vec<Record<'_>>), String> {
    let magic = d.get(..4).ok_or("shorter than a pcap header")?;
    let (le, nanos) = match magic {
        [0xd4, 0xc3, 0xb2, 0xa1] => (true, false),
        [0x4d, 0x3c, 0xb2, 0xa1] => (true, true),
        [0xa1, 0xb2, 0xc3, 0xd4] => (false, false),
        [0xa1, 0xb2, 0x3c, 0x4d] => (false, true),
        _ => return Err("not a classic pcap file".into()),
    };
    let u32_at = |at: usize| -> Result<u32, String> {
        let b: [u8; 4] = d
            .get(at..at + 4)
            .and_then(|s| s.try_into().ok())
            .ok_or("truncated")?;
        Ok(if le {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        })
    };
    let link = u32_at(20)?;
    let mut frames = Vec::new();
    let mut at = 24;
    while at < d.len() {
        let (sec, frac, caplen) = (u32_at(at)?, u32_at(at + 4)?, u32_at(at + 8)? as usize);
        let ts = u64::from(sec) * 1_000_000_000 + u64::from(frac) * if nanos { 1 } else { 1000 };
        let frame = d.get(at + 16..at + 16 + caplen).ok_or("truncated record")?;
        frames.push((ts, frame));
        at += 16 + caplen;
    }
    Ok((link, frames))
}
