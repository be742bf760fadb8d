//! What the `lro` binary's integration tests share: running the binary from the repository
//! root, reading its JSON reports, a fresh directory per test (removed when the test ends, also
//! when it fails), and writing pcaps.
#![allow(dead_code)] // Each test file uses its own part.

use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::DataLink;
use serde_json::Value;

/// The repository root, where the committed captures are.
pub(crate) fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A fresh directory for one test's files, `<temp>/lro-<suite>-<test>-<random>`, removed with
/// everything in it when the guard is dropped: at the end of the test, and also when the test
/// fails, since a panic drops it while unwinding. Bind it to a named variable (not `_`) so that
/// it lives until the test ends; it reads as the directory's [`Path`] (`dir.join(..)`).
#[derive(Debug)]
pub(crate) struct TempDir(tempfile::TempDir);

impl Deref for TempDir {
    type Target = Path;

    fn deref(&self) -> &Path {
        self.0.path()
    }
}

impl AsRef<Path> for TempDir {
    fn as_ref(&self) -> &Path {
        self.0.path()
    }
}

/// A fresh directory for the test `test` of the suite `suite`; see [`TempDir`].
pub(crate) fn temp_dir(suite: &str, test: &str) -> TempDir {
    let d = tempfile::Builder::new()
        .prefix(&format!("lro-{suite}-{test}-"))
        .tempdir()
        .expect("create temp dir");
    TempDir(d)
}

/// Runs `lro` with `args` in the repository root.
pub(crate) fn lro(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lro"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("run lro")
}

/// Runs `lro` expecting success; returns stdout.
pub(crate) fn lro_ok(args: &[&str]) -> String {
    let out = lro(args);
    assert!(
        out.status.success(),
        "lro {args:?} failed ({:?}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

/// Runs `lro` with `--json` added, expecting success; returns the report.
pub(crate) fn lro_json(args: &[&str]) -> Value {
    let mut a = args.to_vec();
    a.push("--json");
    let s = lro_ok(&a);
    serde_json::from_str(s.trim()).unwrap_or_else(|e| panic!("bad JSON from {args:?}: {e}: {s}"))
}

/// A report's unsigned field; panics naming it when it is missing.
pub(crate) fn u(v: &Value, field: &str) -> u64 {
    v[field]
        .as_u64()
        .unwrap_or_else(|| panic!("field {field} missing or not a number in {v}"))
}

/// The frame a spec describes (`lro_core::testing` writes into a buffer; tests want it owned).
pub(crate) fn frame_of(spec: &lro_core::testing::FrameSpec<'_>) -> Vec<u8> {
    let mut f = vec![0u8; spec.len()];
    spec.write(&mut f).unwrap();
    f
}

/// Writes `frames` (timestamp, bytes) as a pcap of link type `link`, each frame whole.
pub(crate) fn write_pcap(path: &Path, link: u32, frames: &[(Duration, Vec<u8>)]) {
    let header = PcapHeader {
        datalink: DataLink::from(link),
        snaplen: 262_144,
        ..PcapHeader::default()
    };
    let file = std::fs::File::create(path).expect("create pcap");
    let mut w = PcapWriter::with_header(file, header).expect("pcap writer");
    for (ts, data) in frames {
        w.write_packet(&PcapPacket::new(*ts, data.len() as u32, data))
            .expect("write packet");
    }
}

/// A capture file's bytes, xz-decompressed when the file is xz (the committed captures are).
pub(crate) fn capture_bytes(path: &Path) -> Vec<u8> {
    let raw = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    if raw.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0]) {
        let mut out = Vec::new();
        lzma_rs::xz_decompress(&mut &raw[..], &mut out).expect("xz");
        out
    } else {
        raw
    }
}

/// A minimal Ethernet frame that is not IP: an ARP request, padded to 60 bytes (the engine
/// passes it alone).
pub(crate) fn arp_frame() -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&[2, 0, 0, 0, 0, 1, 0x08, 0x06]);
    f.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
    f.resize(60, 0);
    f
}
