//! Reading captures: pcap and pcapng, optionally xz-compressed, into memory.
//!
//! Every frame is classified once at load time: which link layer the engine should see it as
//! and how many bytes of link header (a Linux cooked header) to hide from it.

use std::borrow::Cow;
use std::fmt;
use std::io::{IsTerminal, Read};
use std::path::Path;

use lro_core::{LinkKind, RxMeta};
use pcap_file::pcap::PcapParser;
use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionOption;
use pcap_file::pcapng::{Block, PcapNgParser};
use pcap_file::PcapError;

/// The built-in default capture (see `scripts/make-capture.sh`).
const DEFAULT_CAPTURE: &[u8] = include_bytes!("../data/default.pcap.xz");

/// What to call the built-in capture in messages.
pub(crate) const DEFAULT_NAME: &str = "built-in default capture (data/default.pcap.xz)";

/// A problem with the input file: reported with the file's name, exit status 3.
#[derive(Debug)]
pub(crate) struct InputError {
    /// The file as the user named it.
    pub(crate) file: String,
    /// What is wrong with it.
    pub(crate) problem: String,
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.file, self.problem)
    }
}

impl std::error::Error for InputError {}

/// Link-layer types this tool reads (numbers from the tcpdump.org link-type registry).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Link {
    /// LINKTYPE_ETHERNET (1).
    Ethernet,
    /// Raw IPv4/IPv6: LINKTYPE_RAW (101), LINKTYPE_IPV4 (228), LINKTYPE_IPV6 (229), and the
    /// platform-dependent DLT_RAW values 12 and 14.
    RawIp,
    /// Linux cooked capture v1, LINKTYPE_LINUX_SLL (113): a 16-byte pseudo header.
    Sll,
    /// Linux cooked capture v2, LINKTYPE_LINUX_SLL2 (276): a 20-byte pseudo header.
    Sll2,
    /// IP over InfiniBand, LINKTYPE_IPOIB (242): a 40-byte GRH area, then the 4-byte IPoIB
    /// encapsulation header the engine parses (`drivers_ipoib::wire::capture` has the layout).
    Ipoib,
}

impl Link {
    /// The link type for a capture's link-type number, or `None` when unsupported.
    pub(crate) fn from_number(n: u32) -> Option<Link> {
        match n {
            1 => Some(Link::Ethernet),
            12 | 14 | 101 | 228 | 229 => Some(Link::RawIp),
            113 => Some(Link::Sll),
            276 => Some(Link::Sll2),
            242 => Some(Link::Ipoib),
            _ => None,
        }
    }

    /// A human name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Link::Ethernet => "Ethernet",
            Link::RawIp => "raw IP",
            Link::Sll => "Linux cooked (SLL)",
            Link::Sll2 => "Linux cooked v2 (SLL2)",
            Link::Ipoib => "IPoIB",
        }
    }

    /// How the engine should see a frame of this link type.
    pub(crate) fn classify(self, frame: &[u8]) -> FrameClass {
        let engine = |link, skip| FrameClass::Engine {
            link,
            skip,
            tag: None,
        };
        match self {
            Link::Ethernet => engine(LinkKind::Ethernet, 0),
            Link::RawIp => engine(LinkKind::RawIp, 0),
            Link::Sll => cooked(frame, 14, 16),
            Link::Sll2 => cooked(frame, 0, 20),
            // The GRH area is hidden; the engine sees the encapsulation header and what follows.
            Link::Ipoib if frame.get(40..42).is_some_and(is_ip) => engine(LinkKind::Ipoib, 40),
            Link::Ipoib => FrameClass::NotIp,
        }
    }
}

/// Whether an EtherType is IPv4's or IPv6's.
fn is_ip(ethertype: &[u8]) -> bool {
    matches!(ethertype, [0x08, 0x00] | [0x86, 0xdd])
}

/// A Linux cooked frame whose protocol field is at `proto` and whose packet starts at `len`.
///
/// When the kernel hands a frame with its VLAN tag in metadata (the NIC or the stack took it
/// out), libpcap puts the tag back: the protocol field becomes 802.1Q and the packet starts
/// with the tag's TCI and the inner EtherType (pcap-linux.c, `vlan_offset`). Such a frame is
/// IP with a stripped tag, as a NIC would hand it: the engine keys its flow by the tag and the
/// four bytes stay in the hidden header, to be written back with it.
fn cooked(frame: &[u8], proto: usize, len: usize) -> FrameClass {
    let field = |at: usize| frame.get(at..at + 2);
    match field(proto) {
        Some(p) if is_ip(p) && frame.len() >= len => FrameClass::Engine {
            link: LinkKind::RawIp,
            skip: len as u8,
            tag: None,
        },
        Some([0x81, 0x00]) if field(len + 2).is_some_and(is_ip) => FrameClass::Engine {
            link: LinkKind::RawIp,
            skip: (len + 4) as u8,
            tag: field(len).map(|t| u16::from_be_bytes([t[0], t[1]])),
        },
        // Not IP, tagged twice, or tagged 802.1ad (a stripped tag is keyed as 802.1Q's):
        // passed without the engine.
        _ => FrameClass::NotIp,
    }
}

/// How one captured frame is handed to the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum FrameClass {
    /// Offered to the engine as `link`, after hiding `skip` bytes of pseudo header.
    Engine {
        /// What the engine parses.
        link: LinkKind,
        /// Bytes of cooked header (and a VLAN tag put back in it) before the IP header.
        skip: u8,
        /// A VLAN tag taken out of the frame (a cooked capture's tag): the engine gets it as
        /// the NIC-stripped tag.
        tag: Option<u16>,
    },
    /// A cooked-capture or IPoIB frame that is not IPv4/IPv6 (ARP): passed through without the
    /// engine.
    #[default]
    NotIp,
}

impl FrameClass {
    /// The metadata a frame of this class arrives with at `ts_ns`, nothing verified (`None`:
    /// not for the engine).
    pub(crate) fn meta(self, ts_ns: u64) -> Option<RxMeta> {
        match self {
            FrameClass::Engine { link, tag, .. } => {
                let meta = RxMeta::new(link, ts_ns);
                Some(match tag {
                    Some(tci) => meta.with_vlan_stripped(tci),
                    None => meta,
                })
            }
            FrameClass::NotIp => None,
        }
    }

    /// Bytes of the frame hidden from the engine.
    pub(crate) fn skip(self) -> usize {
        match self {
            FrameClass::Engine { skip, .. } => usize::from(skip),
            FrameClass::NotIp => 0,
        }
    }
}

/// One captured frame: where its bytes are in [`Capture::bytes`] and when it arrived.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Record {
    /// Capture timestamp in nanoseconds.
    pub(crate) ts_ns: u64,
    /// Offset of the frame in [`Capture::bytes`].
    pub(crate) offset: usize,
    /// Captured length.
    pub(crate) len: usize,
    /// Bytes of the frame on the wire that the capture left out (it cut the frame at its snap
    /// length: the record's original length less `len`).
    pub(crate) cut: usize,
    /// How the engine sees it.
    pub(crate) class: FrameClass,
}

/// A whole capture in memory.
#[derive(Debug)]
pub(crate) struct Capture {
    /// The file as the user named it (or [`DEFAULT_NAME`]).
    pub(crate) name: String,
    /// Link type of every frame.
    pub(crate) link: Link,
    /// The link-type number to write in an output pcap.
    pub(crate) link_number: u32,
    /// The frames, in capture order.
    pub(crate) records: Vec<Record>,
    /// All frame bytes, back to back.
    pub(crate) bytes: Vec<u8>,
    /// Longest captured frame.
    pub(crate) max_len: usize,
    /// The input file's identity (device and inode), to refuse writing over it.
    pub(crate) id: Option<crate::output::FileId>,
}

impl Capture {
    /// The bytes of one captured frame.
    pub(crate) fn frame(&self, r: &Record) -> &[u8] {
        &self.bytes[r.offset..r.offset + r.len]
    }

    /// Reads `path` (`-`: standard input, read whole), or the built-in default capture when
    /// `None`.
    pub(crate) fn load(path: Option<&Path>) -> Result<Capture, InputError> {
        match path {
            Some(p) if crate::output::is_dash(p) => {
                let fail = |problem: String| InputError {
                    file: "stdin".to_string(),
                    problem,
                };
                let mut stdin = std::io::stdin().lock();
                if stdin.is_terminal() {
                    return Err(fail(
                        "is a terminal: pipe or redirect a capture into it (INPUT - reads standard input)"
                            .to_string(),
                    ));
                }
                let mut raw = Vec::new();
                stdin
                    .read_to_end(&mut raw)
                    .map_err(|e| fail(format!("cannot read: {e}")))?;
                let mut cap = Capture::parse("stdin".to_string(), &raw)?;
                cap.id = crate::output::FileId::of_stdin();
                Ok(cap)
            }
            Some(p) => {
                let name = p.display().to_string();
                let raw = std::fs::read(p).map_err(|e| InputError {
                    file: name.clone(),
                    problem: match e.kind() {
                        std::io::ErrorKind::NotFound => "no such file".to_string(),
                        _ => format!("cannot read: {e}"),
                    },
                })?;
                let mut cap = Capture::parse(name, &raw)?;
                cap.id = crate::output::FileId::of_path(p);
                Ok(cap)
            }
            None => Capture::parse(DEFAULT_NAME.to_string(), DEFAULT_CAPTURE),
        }
    }

    /// Parses a capture file's contents (pcap, pcapng, either xz-compressed).
    pub(crate) fn parse(name: String, raw: &[u8]) -> Result<Capture, InputError> {
        let fail = |problem: String| InputError {
            file: name.clone(),
            problem,
        };
        let data: Cow<'_, [u8]> = if raw.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0]) {
            let mut out = Vec::new();
            lzma_rs::xz_decompress(&mut &raw[..], &mut out).map_err(|e| {
                fail(format!(
                    "xz decompression failed ({e}): truncated or corrupt .xz file"
                ))
            })?;
            Cow::Owned(out)
        } else {
            Cow::Borrowed(raw)
        };
        let mut cap = Capture {
            name: name.clone(),
            link: Link::Ethernet,
            link_number: 1,
            records: Vec::new(),
            bytes: Vec::with_capacity(data.len()),
            max_len: 0,
            id: None,
        };
        if data.is_empty() {
            return Err(fail("empty file: not a pcap or pcapng capture".to_string()));
        }
        if data.len() >= 4 {
            match u32::from_be_bytes([data[0], data[1], data[2], data[3]]) {
                0xa1b2_c3d4 | 0xd4c3_b2a1 | 0xa1b2_3c4d | 0x4d3c_b2a1 => {
                    cap.read_pcap(&data).map_err(fail)?;
                    return Ok(cap);
                }
                0x0a0d_0d0a => {
                    cap.read_pcapng(&data).map_err(fail)?;
                    return Ok(cap);
                }
                _ => {}
            }
        }
        let shown: Vec<String> = data.iter().take(4).map(|b| format!("{b:02x}")).collect();
        Err(fail(format!(
            "not a pcap or pcapng capture (it starts with bytes {}; .xz-compressed captures are also read)",
            shown.join(" ")
        )))
    }

    fn set_link(&mut self, number: u32) -> Result<(), String> {
        self.link_number = number;
        self.link = Link::from_number(number).ok_or_else(|| {
            format!(
                "unsupported link type {number}{}: supported are Ethernet (1), raw IP (101, 228, 229, 12, 14), Linux cooked SLL (113) and SLL2 (276), IPoIB (242)",
                match number {
                    0 => " (BSD loopback)",
                    105 => " (IEEE 802.11)",
                    127 => " (802.11 radiotap)",
                    _ => "",
                }
            )
        })?;
        Ok(())
    }

    /// A frame of `wire_len` bytes on the wire, of which `frame` was captured.
    fn add(&mut self, ts_ns: u64, frame: &[u8], wire_len: u32, link: Link) {
        self.records.push(Record {
            ts_ns,
            offset: self.bytes.len(),
            len: frame.len(),
            cut: (wire_len as usize).saturating_sub(frame.len()),
            class: link.classify(frame),
        });
        self.max_len = self.max_len.max(frame.len());
        self.bytes.extend_from_slice(frame);
    }

    fn read_pcap(&mut self, data: &[u8]) -> Result<(), String> {
        let (mut rest, parser) =
            PcapParser::new(data).map_err(|e| format!("bad pcap header: {}", describe(&e)))?;
        self.set_link(u32::from(parser.header().datalink))?;
        while !rest.is_empty() {
            let at = data.len() - rest.len();
            // Raw records: the snap length in the header is advisory, some writers exceed it.
            let (next, packet) = parser.next_raw_packet(rest).map_err(|e| match e {
                PcapError::IncompleteBuffer => format!(
                    "truncated: packet record {} at byte {at} is cut short ({} bytes left)",
                    self.records.len() + 1,
                    rest.len()
                ),
                e => format!(
                    "corrupt packet record {} at byte {at}: {}",
                    self.records.len() + 1,
                    describe(&e)
                ),
            })?;
            let sub = u64::from(packet.ts_frac);
            let sub_ns = match parser.header().ts_resolution {
                pcap_file::TsResolution::MicroSecond => sub * 1000,
                pcap_file::TsResolution::NanoSecond => sub,
            };
            let ts = u64::from(packet.ts_sec) * 1_000_000_000 + sub_ns;
            let link = self.link;
            self.add(ts, &packet.data, packet.orig_len, link);
            rest = next;
        }
        Ok(())
    }

    fn read_pcapng(&mut self, data: &[u8]) -> Result<(), String> {
        let (mut rest, mut parser) = PcapNgParser::new(data)
            .map_err(|e| format!("bad pcapng section header: {}", describe(&e)))?;
        // Per interface: link type, its number, timestamp unit, `if_tsoffset` in seconds (signed)
        // and snap length.
        let mut ifaces: Vec<(Link, u32, TsUnit, i64, u32)> = Vec::new();
        let mut link_number: Option<u32> = None;
        while !rest.is_empty() {
            let at = data.len() - rest.len();
            let (next, block) = parser.next_block(rest).map_err(|e| match e {
                PcapError::IncompleteBuffer => {
                    format!(
                        "truncated: the pcapng block at byte {at} is cut short ({} bytes left)",
                        rest.len()
                    )
                }
                e => format!("corrupt pcapng block at byte {at}: {}", describe(&e)),
            })?;
            match block {
                Block::SectionHeader(_) => ifaces.clear(),
                Block::InterfaceDescription(idb) => {
                    let number = u32::from(idb.linktype);
                    let mut unit = TsUnit::Pow10(6);
                    let mut offset = 0;
                    for opt in &idb.options {
                        match opt {
                            InterfaceDescriptionOption::IfTsResol(r) => {
                                unit = if r & 0x80 != 0 {
                                    TsUnit::Pow2(r & 0x7f)
                                } else {
                                    TsUnit::Pow10(*r)
                                };
                            }
                            // A signed 64-bit number of seconds (pcapng specification).
                            InterfaceDescriptionOption::IfTsOffset(o) => offset = *o as i64,
                            _ => {}
                        }
                    }
                    // An unsupported link type is reported when a packet of it shows up.
                    let link = Link::from_number(number).unwrap_or(Link::Ethernet);
                    ifaces.push((link, number, unit, offset, idb.snaplen));
                }
                Block::EnhancedPacket(epb) => {
                    let ticks = epb.timestamp.as_nanos() as u64;
                    self.add_packet(
                        &ifaces,
                        &mut link_number,
                        epb.interface_id,
                        ticks,
                        &epb.data,
                        epb.original_len,
                    )?;
                }
                // The obsolete Packet Block carries packets as the Enhanced Packet Block does.
                Block::Packet(pb) => {
                    // Its timestamp is a high then a low 32-bit word, which pcap-file reads as
                    // one 64-bit number: the words come out swapped in a little-endian section.
                    let ticks = match parser.section().endianness {
                        pcap_file::Endianness::Big => pb.timestamp,
                        pcap_file::Endianness::Little => pb.timestamp.rotate_left(32),
                    };
                    let interface = u32::from(pb.interface_id);
                    self.add_packet(
                        &ifaces,
                        &mut link_number,
                        interface,
                        ticks,
                        &pb.data,
                        pb.original_len,
                    )?;
                }
                Block::SimplePacket(spb) => {
                    let Some(&(link, number, _, _, snaplen)) = ifaces.first() else {
                        return Err(
                            "corrupt: a packet before any interface description".to_string()
                        );
                    };
                    self.check_link(&mut link_number, number)?;
                    // The block's data is padded to 32 bits: the packet is its original length,
                    // cut at the interface's snap length (0: none).
                    let mut len = spb.data.len().min(spb.original_len as usize);
                    if snaplen != 0 {
                        len = len.min(snaplen as usize);
                    }
                    // No timestamp in a Simple Packet Block: the record before's, so time never
                    // goes backwards (0 for the first).
                    let ts = self.records.last().map_or(0, |r| r.ts_ns);
                    self.add(ts, &spb.data[..len], spb.original_len, link);
                }
                _ => {}
            }
            rest = next;
        }
        if let Some(n) = link_number {
            self.set_link(n)?;
        }
        Ok(())
    }

    /// A packet of pcapng interface `interface` with its timestamp in the interface's units
    /// and its length on the wire.
    fn add_packet(
        &mut self,
        ifaces: &[(Link, u32, TsUnit, i64, u32)],
        link_number: &mut Option<u32>,
        interface: u32,
        ticks: u64,
        data: &[u8],
        wire_len: u32,
    ) -> Result<(), String> {
        let Some(&(link, number, unit, offset, _)) = ifaces.get(interface as usize) else {
            return Err(format!(
                "corrupt: packet {} refers to interface {interface} that was never described",
                self.records.len() + 1,
            ));
        };
        self.check_link(link_number, number)?;
        // The offset may be negative: a time before 1970 reads as 0.
        let ts = i128::from(unit.to_ns(ticks)) + i128::from(offset) * 1_000_000_000;
        // A pcap (what `replay -o` writes) holds seconds in 32 bits: a later time is refused
        // here, as the input's fault, not when the output is written.
        if ts >= (i128::from(u32::MAX) + 1) * 1_000_000_000 {
            return Err(format!(
                "corrupt: packet {} has a timestamp after 2106, beyond what a pcap can hold",
                self.records.len() + 1,
            ));
        }
        self.add(
            u64::try_from(ts.max(0)).unwrap_or(u64::MAX),
            data,
            wire_len,
            link,
        );
        Ok(())
    }

    /// All packets of a pcapng file must share one supported link type.
    fn check_link(&mut self, seen: &mut Option<u32>, number: u32) -> Result<(), String> {
        match *seen {
            None => {
                self.set_link(number)?;
                *seen = Some(number);
                Ok(())
            }
            Some(n) if n == number => Ok(()),
            Some(n) => Err(format!(
                "mixed link types {n} and {number} in one pcapng file are not supported"
            )),
        }
    }
}

/// A pcapng interface's timestamp unit (`if_tsresol`).
#[derive(Debug, Clone, Copy)]
enum TsUnit {
    /// 10^-n seconds.
    Pow10(u8),
    /// 2^-n seconds.
    Pow2(u8),
}

impl TsUnit {
    fn to_ns(self, ticks: u64) -> u64 {
        let ns: u128 = match self {
            TsUnit::Pow10(n) if n <= 9 => u128::from(ticks) * 10u128.pow(u32::from(9 - n)),
            TsUnit::Pow10(n) => u128::from(ticks) / 10u128.pow(u32::from(n.min(38) - 9)),
            TsUnit::Pow2(n) => (u128::from(ticks) * 1_000_000_000) >> n.min(127),
        };
        u64::try_from(ns).unwrap_or(u64::MAX)
    }
}

/// A pcap-file error in words.
fn describe(e: &PcapError) -> String {
    match e {
        PcapError::IncompleteBuffer => "cut short".to_string(),
        PcapError::IoError(e) => e.to_string(),
        PcapError::InvalidField(f) => format!("invalid field ({f})"),
        PcapError::Utf8Error(e) => e.to_string(),
        PcapError::FromUtf8Error(e) => e.to_string(),
        PcapError::InvalidInterfaceId(id) => format!("unknown interface id {id}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn default_pcap() -> Vec<u8> {
        let mut out = Vec::new();
        lzma_rs::xz_decompress(&mut &DEFAULT_CAPTURE[..], &mut out)
            .expect("built-in capture decompresses");
        out
    }

    #[test]
    fn default_capture_loads() {
        let cap = Capture::load(None).expect("loads");
        assert_eq!(cap.link, Link::Ethernet);
        assert!(!cap.records.is_empty());
        let raw = Capture::parse("x".into(), &default_pcap()).expect("uncompressed loads");
        assert_eq!(raw.records.len(), cap.records.len());
        assert_eq!(raw.bytes, cap.bytes);
    }

    #[test]
    fn every_truncation_is_an_error_not_a_panic() {
        let pcap = default_pcap();
        let full = Capture::parse("x".into(), &pcap).unwrap();
        // Where each record ends, walked here from the file's own length fields (the built-in
        // capture is little-endian pcap: a 24-byte file header, then per record a 16-byte
        // header whose third word is the captured length).
        let mut ends = vec![24];
        while let Some(h) = pcap.get(*ends.last().unwrap()..).filter(|h| h.len() >= 16) {
            let len = u32::from_le_bytes(h[8..12].try_into().unwrap()) as usize;
            ends.push(ends.last().unwrap() + 16 + len);
        }
        assert_eq!(
            *ends.last().unwrap(),
            pcap.len(),
            "the walk ends at the file's end"
        );
        assert_eq!(ends.len() - 1, full.records.len());
        let frame = |c: &Capture, i: usize| {
            let r = &c.records[i];
            c.bytes[r.offset..r.offset + r.len].to_vec()
        };
        for cut in (0..4000)
            .chain((4000..pcap.len()).step_by(997))
            .chain(ends.iter().copied())
        {
            match (
                Capture::parse("cut".into(), &pcap[..cut]),
                ends.binary_search(&cut),
            ) {
                // Cut at a record boundary: a valid capture of the records before it, whole.
                (Ok(c), Ok(n)) => {
                    assert_eq!(c.records.len(), n, "cut at {cut}");
                    for i in 0..n {
                        assert_eq!(frame(&c, i), frame(&full, i), "cut at {cut}, record {i}");
                    }
                }
                (Err(_), Err(_)) => {}
                (Ok(c), Err(_)) => {
                    panic!(
                        "cut at {cut}, inside a record or header, read as {} records",
                        c.records.len()
                    )
                }
                (Err(e), Ok(n)) => panic!("cut at {cut}, after record {n}, refused: {e}"),
            }
        }
    }

    /// A pcapng file of an interface (microsecond units) and the given blocks.
    fn pcapng(blocks: &[pcap_file::pcapng::Block<'_>]) -> Vec<u8> {
        use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionBlock;
        let mut w = pcap_file::pcapng::PcapNgWriter::new(Vec::new()).unwrap();
        w.write_pcapng_block(InterfaceDescriptionBlock::new(
            pcap_file::DataLink::ETHERNET,
            0,
        ))
        .unwrap();
        for b in blocks {
            w.write_block(b).unwrap();
        }
        w.into_inner()
    }

    fn epb(ts: std::time::Duration) -> pcap_file::pcapng::Block<'static> {
        use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
        pcap_file::pcapng::Block::EnhancedPacket(EnhancedPacketBlock {
            interface_id: 0,
            // pcap-file writes the duration's nanoseconds as ticks; the interface counts
            // microseconds (its default unit).
            timestamp: std::time::Duration::from_nanos(ts.as_micros() as u64),
            original_len: 60,
            data: vec![0u8; 60].into(),
            options: vec![],
        })
    }

    /// A Simple Packet Block has no timestamp: it takes the record before's, so time does not
    /// jump back to 1970 in the middle of a capture.
    #[test]
    fn a_simple_packet_block_keeps_the_time_of_the_record_before() {
        use pcap_file::pcapng::blocks::simple_packet::SimplePacketBlock;
        let spb = pcap_file::pcapng::Block::SimplePacket(SimplePacketBlock {
            original_len: 60,
            data: vec![0u8; 60].into(),
        });
        let bytes = pcapng(&[epb(std::time::Duration::from_secs(5)), spb]);
        let c = Capture::parse("x".into(), &bytes).unwrap();
        let ts: Vec<u64> = c.records.iter().map(|r| r.ts_ns).collect();
        assert_eq!(ts, [5_000_000_000, 5_000_000_000]);
    }

    /// A time a pcap cannot hold (seconds past 32 bits) is the input's fault, found when
    /// reading: not an error writing the output later.
    #[test]
    fn a_timestamp_after_2106_is_refused_when_read() {
        let late = std::time::Duration::from_secs(1 << 33);
        let err = Capture::parse("x".into(), &pcapng(&[epb(late)])).unwrap_err();
        assert!(err.to_string().contains("2106"), "{err}");
        let last = std::time::Duration::from_secs(u64::from(u32::MAX));
        assert!(Capture::parse("x".into(), &pcapng(&[epb(last)])).is_ok());
    }

    #[test]
    fn corrupted_bytes_never_panic() {
        let pcap = default_pcap();
        let mut x: u32 = 12345;
        for _ in 0..300 {
            let mut bad = pcap[..6000].to_vec();
            for _ in 0..8 {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                let i = (x as usize >> 8) % bad.len();
                bad[i] = (x >> 3) as u8;
            }
            let _ = Capture::parse("bad".into(), &bad);
        }
    }

    #[test]
    fn corrupted_or_cut_pcapng_never_panics() {
        use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
        use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionBlock;
        use pcap_file::pcapng::PcapNgWriter;
        let cap = Capture::load(None).expect("loads");
        let mut w = PcapNgWriter::new(Vec::new()).expect("writer");
        w.write_pcapng_block(InterfaceDescriptionBlock::new(
            pcap_file::DataLink::ETHERNET,
            0,
        ))
        .expect("idb");
        for r in &cap.records[..40] {
            let epb = EnhancedPacketBlock {
                interface_id: 0,
                timestamp: std::time::Duration::from_nanos(r.ts_ns / 1000),
                original_len: r.len as u32,
                data: cap.frame(r).into(),
                options: vec![],
            };
            w.write_pcapng_block(epb).expect("epb");
        }
        let ng = w.into_inner();
        let whole = Capture::parse("ng".into(), &ng).expect("pcapng parses");
        assert_eq!(whole.records.len(), 40);
        assert_eq!(whole.records[5].ts_ns, cap.records[5].ts_ns / 1000 * 1000);
        for cut in 0..ng.len().min(3000) {
            let _ = Capture::parse("cut".into(), &ng[..cut]);
        }
        let mut x: u32 = 99;
        for _ in 0..300 {
            let mut bad = ng.clone();
            for _ in 0..6 {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                let i = (x as usize >> 8) % bad.len().min(2000);
                bad[i] = (x >> 3) as u8;
            }
            let _ = Capture::parse("bad".into(), &bad);
        }
    }

    /// A pcapng file of one Ethernet interface (`options` on it) and the blocks `blocks`.
    fn pcapng_of(
        snaplen: u32,
        options: Vec<InterfaceDescriptionOption<'static>>,
        blocks: Vec<Block<'_>>,
    ) -> Vec<u8> {
        use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionBlock;
        use pcap_file::pcapng::PcapNgWriter;
        let mut w = PcapNgWriter::new(Vec::new()).expect("writer");
        w.write_pcapng_block(InterfaceDescriptionBlock {
            linktype: pcap_file::DataLink::ETHERNET,
            snaplen,
            options,
        })
        .expect("idb");
        for b in &blocks {
            w.write_block(b).expect("block");
        }
        w.into_inner()
    }

    #[test]
    fn pcapng_simple_packets_keep_their_length_not_the_block_padding() {
        use pcap_file::pcapng::blocks::simple_packet::SimplePacketBlock;
        let frame: Vec<u8> = (0..61u8).collect();
        let spb = |data: &[u8]| {
            Block::SimplePacket(SimplePacketBlock {
                original_len: 61,
                data: data.to_vec().into(),
            })
        };
        let ng = pcapng_of(0, vec![], vec![spb(&frame)]);
        let cap = Capture::parse("spb".into(), &ng).expect("parses");
        assert_eq!(cap.records.len(), 1);
        assert_eq!(cap.frame(&cap.records[0]), &frame[..], "no padding bytes");
        // Cut by the interface's snap length: the packet data is the first 40 bytes.
        let ng = pcapng_of(40, vec![], vec![spb(&frame[..40])]);
        let cap = Capture::parse("spb".into(), &ng).expect("parses");
        assert_eq!(cap.frame(&cap.records[0]), &frame[..40]);
    }

    #[test]
    fn pcapng_obsolete_packet_blocks_are_read_not_dropped() {
        let frame: Vec<u8> = (0..60u8).collect();
        // 2023-11-14 22:13:20.000001 UTC in microseconds: the timestamp's high word is not 0.
        let us: u64 = 1_700_000_000_000_001;
        for big in [false, true] {
            let (w16, w32) = (
                |v: u16| {
                    if big {
                        v.to_be_bytes()
                    } else {
                        v.to_le_bytes()
                    }
                },
                |v: u32| {
                    if big {
                        v.to_be_bytes()
                    } else {
                        v.to_le_bytes()
                    }
                },
            );
            let block = |kind: u32, body: &[u8]| {
                let len = 12 + body.len() as u32;
                [&w32(kind)[..], &w32(len), body, &w32(len)].concat()
            };
            let shb = [&w32(0x1a2b_3c4d)[..], &w16(1), &w16(0), &[0xff; 8]].concat();
            let idb = [&w16(1)[..], &w16(0), &w32(0)].concat();
            // Packet Block: interface, drops, timestamp high and low words, lengths, data.
            let pb = [
                &w16(0)[..],
                &w16(0),
                &w32((us >> 32) as u32),
                &w32(us as u32),
                &w32(60),
                &w32(60),
                &frame,
            ]
            .concat();
            let ng = [
                block(0x0a0d_0d0a, &shb),
                block(1, &idb),
                block(2, &pb),
                block(2, &pb),
            ]
            .concat();
            let cap = Capture::parse("pb".into(), &ng).expect("parses");
            assert_eq!(
                cap.records.len(),
                2,
                "every packet is read (big endian: {big})"
            );
            assert_eq!(cap.records[1].ts_ns, us * 1000, "big endian: {big}");
            assert_eq!(cap.frame(&cap.records[0]), &frame[..]);
        }
    }

    #[test]
    fn pcapng_if_tsoffset_is_signed() {
        use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
        let epb = |us: u64| {
            Block::EnhancedPacket(EnhancedPacketBlock {
                interface_id: 0,
                timestamp: std::time::Duration::from_nanos(us),
                original_len: 60,
                data: vec![0u8; 60].into(),
                options: vec![],
            })
        };
        // -10 seconds: 25 s of capture time is 15 s; 5 s would be before 1970 and reads as 0.
        let offset = InterfaceDescriptionOption::IfTsOffset((-10i64) as u64);
        let ng = pcapng_of(0, vec![offset], vec![epb(25_000_000), epb(5_000_000)]);
        let cap = Capture::parse("off".into(), &ng).expect("parses");
        assert_eq!(cap.records[0].ts_ns, 15_000_000_000);
        assert_eq!(cap.records[1].ts_ns, 0);
        let offset = InterfaceDescriptionOption::IfTsOffset(10);
        let ng = pcapng_of(0, vec![offset], vec![epb(25_000_000)]);
        let cap = Capture::parse("off".into(), &ng).expect("parses");
        assert_eq!(cap.records[0].ts_ns, 35_000_000_000);
    }

    #[test]
    fn timestamp_units() {
        assert_eq!(TsUnit::Pow10(6).to_ns(5), 5000);
        assert_eq!(TsUnit::Pow10(9).to_ns(5), 5);
        assert_eq!(TsUnit::Pow10(12).to_ns(5000), 5);
        assert_eq!(TsUnit::Pow2(10).to_ns(1024), 1_000_000_000);
    }

    #[test]
    fn cooked_frames_are_classified() {
        let raw = |skip, tag| FrameClass::Engine {
            link: LinkKind::RawIp,
            skip,
            tag,
        };
        let mut sll = vec![0u8; 16];
        sll[14..16].copy_from_slice(&[0x08, 0x00]);
        assert_eq!(Link::Sll.classify(&sll), raw(16, None));
        sll[14..16].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(Link::Sll.classify(&sll), FrameClass::NotIp);
        assert_eq!(Link::Sll2.classify(&[0x86, 0xdd]), FrameClass::NotIp);
        // A tag libpcap put back: 802.1Q in the protocol field, then TCI and EtherType.
        let mut tagged = vec![0u8; 20];
        tagged[14..20].copy_from_slice(&[0x81, 0x00, 0x20, 0x05, 0x86, 0xdd]);
        assert_eq!(Link::Sll.classify(&tagged), raw(20, Some(0x2005)));
        assert_eq!(
            raw(20, Some(0x2005)).meta(7),
            Some(RxMeta::new(LinkKind::RawIp, 7).with_vlan_stripped(0x2005))
        );
        assert_eq!(Link::Sll.classify(&tagged[..19]), FrameClass::NotIp);
        let mut sll2 = vec![0u8; 24];
        sll2[..2].copy_from_slice(&[0x81, 0x00]);
        sll2[20..24].copy_from_slice(&[0x00, 0x07, 0x08, 0x00]);
        assert_eq!(Link::Sll2.classify(&sll2), raw(24, Some(7)));
        // Not IP under the tag, a second tag, or an 802.1ad tag: not for the engine.
        for (at, bytes) in [(22, [0x08, 0x06]), (22, [0x81, 0x00]), (0, [0x88, 0xa8])] {
            let mut f = sll2.clone();
            f[at..at + 2].copy_from_slice(&bytes);
            assert_eq!(
                Link::Sll2.classify(&f),
                FrameClass::NotIp,
                "{bytes:x?} at {at}"
            );
        }
        assert_eq!(FrameClass::NotIp.meta(7), None);
        assert_eq!(FrameClass::NotIp.skip(), 0);
    }

    #[test]
    fn ipoib_frames_are_classified() {
        assert_eq!(Link::from_number(242), Some(Link::Ipoib));
        let mut f = vec![0u8; 64];
        f[40..42].copy_from_slice(&[0x86, 0xdd]);
        assert_eq!(
            Link::Ipoib.classify(&f),
            FrameClass::Engine {
                link: LinkKind::Ipoib,
                skip: 40,
                tag: None
            }
        );
        f[40..42].copy_from_slice(&[0x08, 0x06]); // ARP
        assert_eq!(Link::Ipoib.classify(&f), FrameClass::NotIp);
        assert_eq!(Link::Ipoib.classify(&f[..43]), FrameClass::NotIp);
    }
}
