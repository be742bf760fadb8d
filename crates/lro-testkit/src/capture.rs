//! A tolerant pcap / pcapng reader for tests that replay captures, the hostile ones of the
//! tcpdump test corpus among them: it never panics and stops at the first record that does not
//! fit the file. The CLI has its own strict reader (`src/capture.rs`), which reports errors;
//! this one only collects what is there. And [`committed`], the workspace's committed captures
//! read so, and [`pcap`], the writer of what tests dump.

/// `(link type, frame)` of every record of a pcap (either byte order, micro- or nanosecond) or
/// pcapng file; `None` for a file that is neither. A truncated or corrupt file yields the
/// records before the damage.
pub fn read(data: &[u8]) -> Option<Vec<(u32, Vec<u8>)>> {
    let magic = data.get(..4)?;
    if magic == [0x0a, 0x0d, 0x0d, 0x0a] {
        return Some(read_pcapng(data));
    }
    let le = match magic {
        [0xd4, 0xc3, 0xb2, 0xa1] | [0x4d, 0x3c, 0xb2, 0xa1] => true,
        [0xa1, 0xb2, 0xc3, 0xd4] | [0xa1, 0xb2, 0x3c, 0x4d] => false,
        _ => return None,
    };
    let link = word(data, le, 20)? & 0x0fff_ffff;
    let mut out = Vec::new();
    let mut at = 24usize;
    while let Some(len) = word(data, le, at + 8) {
        let start = at + 16;
        let Some(frame) = data.get(start..start.saturating_add(len as usize)) else {
            break;
        };
        out.push((link, frame.to_vec()));
        at = start + len as usize;
    }
    Some(out)
}

/// The 32-bit word at `at` in the file's byte order.
fn word(data: &[u8], le: bool, at: usize) -> Option<u32> {
    let b: [u8; 4] = data.get(at..at.checked_add(4)?)?.try_into().ok()?;
    Some(if le {
        u32::from_le_bytes(b)
    } else {
        u32::from_be_bytes(b)
    })
}

/// The packets of a pcapng file: enhanced (6) and simple (3) packet blocks, with the link type
/// of their interface description (1); a section header (0x0a0d0d0a) starts a new section.
fn read_pcapng(data: &[u8]) -> Vec<(u32, Vec<u8>)> {
    let mut out = Vec::new();
    let mut links = Vec::new();
    let mut le = true;
    let mut at = 0usize;
    loop {
        if data.get(at..at + 4) == Some(&[0x0a, 0x0d, 0x0d, 0x0a][..]) {
            le = data.get(at + 8..at + 12) == Some(&[0x4d, 0x3c, 0x2b, 0x1a][..]);
            links.clear();
        }
        let (Some(kind), Some(len)) = (word(data, le, at), word(data, le, at + 4)) else {
            break;
        };
        let len = len as usize;
        if len < 12 || at.saturating_add(len) > data.len() {
            break;
        }
        let body = &data[at + 8..at + len - 4];
        match kind {
            1 if body.len() >= 2 => {
                let b = [body[0], body[1]];
                links.push(u32::from(if le {
                    u16::from_le_bytes(b)
                } else {
                    u16::from_be_bytes(b)
                }));
            }
            6 if body.len() >= 20 => {
                let iface = word(data, le, at + 8).unwrap_or(0) as usize;
                let cap = word(data, le, at + 20).unwrap_or(0) as usize;
                let link = links.get(iface).copied().unwrap_or(1);
                out.push((link, body[20..20 + cap.min(body.len() - 20)].to_vec()));
            }
            3 if body.len() >= 4 => {
                out.push((links.first().copied().unwrap_or(1), body[4..].to_vec()));
            }
            _ => {}
        }
        at += len;
    }
    out
}

/// `(link type, frame)` of every record of `data/<name>`, one of the workspace's committed
/// xz-compressed captures (`default.pcap.xz`, `bench/lossy.pcap.xz`, ...). Panics when it
/// cannot be read: the tests that call it cannot run without it.
pub fn committed(name: &str) -> Vec<(u32, Vec<u8>)> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../data")
        .join(name);
    let xz = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut raw = Vec::new();
    lzma_rs::xz_decompress(&mut &xz[..], &mut raw)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    read(&raw).unwrap_or_else(|| panic!("{}: not a pcap", path.display()))
}

/// A little-endian pcap (microseconds, snap length 262,144, every timestamp zero) of `frames`
/// with link type `link`: what a test writes out for a person to open in Wireshark, and what
/// [`read`] reads back.
pub fn pcap(link: u32, frames: &[impl AsRef<[u8]>]) -> Vec<u8> {
    let mut f = vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0];
    f.extend_from_slice(&[0; 8]);
    f.extend_from_slice(&262_144u32.to_le_bytes());
    f.extend_from_slice(&link.to_le_bytes());
    for fr in frames {
        let fr = fr.as_ref();
        let len = (fr.len() as u32).to_le_bytes();
        f.extend_from_slice(&[0; 8]);
        f.extend_from_slice(&len);
        f.extend_from_slice(&len);
        f.extend_from_slice(fr);
    }
    f
}

#[cfg(test)]
mod tests {
    use super::{pcap, read};

    /// A little-endian pcapng: a section header, one interface of `link`, `frames` as
    /// enhanced packet blocks.
    fn pcapng(link: u16, frames: &[&[u8]]) -> Vec<u8> {
        let block = |kind: u32, body: &[u8]| {
            let len = (12 + body.len()) as u32;
            let mut b = kind.to_le_bytes().to_vec();
            b.extend_from_slice(&len.to_le_bytes());
            b.extend_from_slice(body);
            b.extend_from_slice(&len.to_le_bytes());
            b
        };
        let mut shb = vec![0x4d, 0x3c, 0x2b, 0x1a, 1, 0, 0, 0];
        shb.extend_from_slice(&[0xff; 8]);
        let mut f = block(0x0a0d_0d0a, &shb);
        let mut idb = link.to_le_bytes().to_vec();
        idb.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
        f.extend(block(1, &idb));
        for fr in frames {
            let mut epb = vec![0; 12];
            epb.extend_from_slice(&(fr.len() as u32).to_le_bytes());
            epb.extend_from_slice(&(fr.len() as u32).to_le_bytes());
            epb.extend_from_slice(fr);
            epb.resize(epb.len().next_multiple_of(4), 0);
            f.extend(block(6, &epb));
        }
        f
    }

    #[test]
    fn reads_both_formats() {
        let frames: [&[u8]; 2] = [b"first frame", b"second"];
        let want: Vec<(u32, Vec<u8>)> = frames.iter().map(|f| (1, f.to_vec())).collect();
        assert_eq!(read(&pcap(1, &frames)), Some(want.clone()));
        assert_eq!(read(&pcapng(1, &frames)), Some(want));
        assert_eq!(read(&pcap(101, &frames[..1])).unwrap()[0].0, 101);
        assert_eq!(read(b"not a capture"), None);
    }

    #[test]
    fn a_cut_file_yields_the_records_before_the_cut() {
        let frames: [&[u8]; 2] = [b"aaaa", b"bbbbbbbb"];
        // Each writer, and how many bytes a file needs before it reads as that format at all
        // (pcap: the global header up to the link type; pcapng: the magic).
        type Write = fn(&[&[u8]]) -> Vec<u8>;
        let writers: [(Write, usize); 2] = [(|f| pcap(1, f), 24), (|f| pcapng(1, f), 4)];
        for (write, readable) in writers {
            let file = write(&frames);
            let whole = read(&file).unwrap();
            assert_eq!(whole.len(), frames.len());
            for cut in 0..=file.len() {
                // The records that end within the cut: every one of them, and nothing else.
                let complete = (1..=frames.len())
                    .filter(|&k| write(&frames[..k]).len() <= cut)
                    .count();
                match read(&file[..cut]) {
                    Some(part) => {
                        assert!(cut >= readable, "cut at {cut}: read as a capture");
                        assert_eq!(part[..], whole[..complete], "cut at {cut}");
                    }
                    None => assert!(cut < readable, "cut at {cut}: not read"),
                }
            }
        }
    }
}
