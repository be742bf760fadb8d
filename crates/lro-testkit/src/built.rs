//! The input every driver builds and the runner and checker take: concrete frames with the
//! ground truth about them ([`Pushed`]) and the steps to run ([`Built`], [`Step`]).

use crate::oracle::{self, Tcp};
use lro_core::testing::{FrameSpec, IpSpec, Ipv6Ext, Ipv6ExtKind, TPID_8021AD, TPID_8021Q};
use lro_core::{RxChecksum, RxMeta};

/// A pushed frame and the ground truth about it.
#[derive(Debug, Clone)]
pub struct Pushed {
    /// The bytes pushed.
    pub bytes: Vec<u8>,
    /// Its metadata.
    pub meta: RxMeta,
    /// The reference's TCP view.
    pub tcp: Option<Tcp>,
    /// Checksums right, and either the metadata vouches for them or it says nothing
    /// (`RxChecksum::None`) and software verification is on.
    pub trusted: bool,
}

impl Pushed {
    /// A frame as pushed with `meta`: read by the reference reader (through GRE when it is
    /// tunnelled, [`oracle::tcp_of_gre`]) and trusted when its checksums are right and the
    /// metadata vouches for them correctly, or reports nothing and software verification is
    /// on (as in `Config::lro()` and `Config::gro()`).
    pub fn new(bytes: Vec<u8>, meta: RxMeta) -> Self {
        let tcp = oracle::tcp_of_gre(&bytes, &meta);
        Self::judged(bytes, meta, tcp, true)
    }

    /// A frame with the reference reader's view `tcp`, trusted as in [`Pushed::new`] with
    /// software verification `verify`.
    pub fn judged(bytes: Vec<u8>, meta: RxMeta, tcp: Option<Tcp>, verify: bool) -> Self {
        let good = oracle::checksums_ok(&bytes, tcp.as_ref());
        let trusted = good
            && match meta.checksum {
                RxChecksum::None => verify,
                RxChecksum::Complete(c) => {
                    c == lro_core::testing::complete_checksum(&bytes, meta.link)
                }
                _ => true,
            };
        Pushed {
            bytes,
            meta,
            tcp,
            trusted,
        }
    }
}

/// A concrete step.
#[derive(Debug, Clone)]
pub enum Step {
    /// Push input number `n`.
    Push(usize),
    /// `flush_all`.
    FlushAll,
    /// `flush_idle(now)`.
    FlushIdle(u64),
}

/// Concrete frames and steps.
#[derive(Debug, Default, Clone)]
pub struct Built {
    /// Frames by id.
    pub frames: Vec<Pushed>,
    /// Steps.
    pub steps: Vec<Step>,
    /// The scenario generator's own ground truth about every frame ([`crate::scenario`]),
    /// checked on top of the reference reader's view; `None` for other drivers.
    pub truth: Option<crate::scenario::Truth>,
}

impl Built {
    /// The same frames and steps with every frame whose checksums are right marked
    /// hardware-verified (`RxChecksum::Verified`): the case header prediction covers. The
    /// ground truth follows: a frame is trusted exactly when its checksums are right, so the
    /// checks judge this run too (where frames the original run leaves unverified merge).
    pub fn all_verified(&self) -> Built {
        let mut b = self.clone();
        for f in &mut b.frames {
            let ok = oracle::checksums_ok(&f.bytes, f.tcp.as_ref());
            if ok {
                f.meta.checksum = lro_core::RxChecksum::Verified;
            }
            f.trusted = ok;
        }
        b
    }
}

/// A flow's link layer, one of the six shapes both input builders draw from (`which` modulo
/// 6): untagged Ethernet, one in-line 802.1Q tag with `tci`, 802.1ad over 802.1Q, raw IP, a
/// tag the NIC stripped, IPoIB. Returns the spec and the metadata that goes with it.
pub fn link_shape(spec: FrameSpec<'_>, which: u8, tci: u16) -> (FrameSpec<'_>, RxMeta) {
    let meta = RxMeta::ethernet(0);
    match which % 6 {
        0 => (spec, meta),
        1 => (spec.vlan(TPID_8021Q, tci), meta),
        2 => (spec.vlan(TPID_8021AD, 20).vlan(TPID_8021Q, 30), meta),
        3 => (spec.raw_ip(), RxMeta::raw_ip(0)),
        4 => (spec, meta.with_vlan_stripped(40)),
        _ => (spec.ipoib(0), RxMeta::ipoib(0)),
    }
}

/// The byte of a `len`-byte address in which twin `i` (of a flow or a tunnel) differs: it moves
/// from twin to twin, so that a fast path comparing only some of an address's bytes would
/// merge some pair of twins.
pub fn twin_byte(i: usize, len: usize) -> usize {
    i % len
}

/// [`twin_byte`] of a MAC address: never byte 0, whose low bit means multicast.
pub fn twin_mac_byte(i: usize) -> usize {
    1 + twin_byte(i, 5)
}

/// For an IPv6 spec: a Hop-by-Hop and (or) a Destination Options header, each with a PadN
/// option, and the flow label. Nothing for IPv4.
pub fn ipv6_shape(spec: &mut FrameSpec<'_>, hop_by_hop: bool, destination: bool, flow_label: u32) {
    if let IpSpec::V6(ip) = &mut spec.ip {
        let pad = &[1, 4, 0, 0, 0, 0];
        let exts = [
            (hop_by_hop, Ipv6ExtKind::HopByHop),
            (destination, Ipv6ExtKind::DestinationOptions),
        ];
        for (slot, (_, kind)) in ip.ext.iter_mut().zip(exts.iter().filter(|(on, _)| *on)) {
            *slot = Some(Ipv6Ext::new(*kind, pad));
        }
        ip.flow_label = flow_label;
    }
}
