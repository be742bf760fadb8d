//! The `gre` target: the `coalesce` target's scenario (frames raw or built, metadata, flushes,
//! clock steps, both policies, several table shapes), every frame then wrapped in GRE through
//! one of four tunnels (outer IPv4/IPv6, VLAN tags, raw IP; no flags, K, C, C+K, TEB, NVGRE;
//! near twins of each other) or left plain, with per-frame mischief (a wrong GRE checksum,
//! the S flag, another version, Reserved1, an outer fragment, another tunnel than its flow's),
//! then pushed through a `lro_gre::Gre` engine. The ground truth is re-read through GRE
//! ([`oracle::classify_gre`]) and the same invariants are checked ([`check::check`]); header
//! prediction on and off must agree; under `Gro` every merged segment whose frames carried
//! canonical checksums is split by `resegment_with::<Gre>` back into them byte for byte.

use arbitrary::Arbitrary;
use lro_core::testing::{IpSpec, Ipv6Fragment, TPID_8021AD, TPID_8021Q};
use lro_core::{Config, Engine, LinkKind, RxChecksum, RxMeta, Sizes};
use lro_gre::testing::{GreSpec, InnerFrame, OuterId, Tunnel};
use lro_gre::Gre;

use crate::built::{twin_byte, Built, Pushed};
use crate::check::{self, Run};
use crate::frame::Tagged;
use crate::oracle;
use crate::structured::{self as scenario, Input};

/// One tunnel's shape.
#[derive(Debug, Clone, Copy, Arbitrary)]
pub struct TunnelSetup {
    /// Outer IPv6.
    pub v6: bool,
    /// Outer link: 0 Ethernet, 1 one tag, 2 QinQ, 3 raw IP, 4 IPoIB.
    pub link: u8,
    /// GRE: 0 none, 1 K, 2 C, 3 C+K, 4 TEB, 5 TEB+K (NVGRE), 6 TEB+C, 7 S.
    pub gre: u8,
    /// The key.
    pub key: u32,
    /// Near twin of the previous tunnel: 0 none, 1 other key, 2 other outer source, 3 other
    /// outer destination, 4 C toggled, 5 other outer flow label.
    pub twin: u8,
    /// Outer IPv4 IDs: 0 per tunnel direction, 1 the inner header's, 2 fixed.
    pub ids: u8,
}

/// What happens to one frame.
#[derive(Debug, Clone, Copy, Arbitrary)]
pub struct Wrap {
    /// 0..=9 its flow's tunnel, 10..=12 another tunnel, 13 left plain.
    pub tunnel: u8,
    /// 0..=9 nothing, 10 a wrong GRE checksum (with C), 11 the S flag, 12 version 1,
    /// 13 Reserved1 set (with C), 14 outer TTL down by one, 15 outer TOS CE, 16 an outer
    /// fragment (IPv4 MF, an IPv6 Fragment header).
    pub mischief: u8,
}

/// The input of the `gre` target.
#[derive(Debug, Clone, Arbitrary)]
pub struct GreInput {
    /// The plain scenario.
    pub input: Input,
    /// Four tunnels.
    pub tunnels: [TunnelSetup; 4],
    /// Per frame (cycled).
    pub wraps: Vec<Wrap>,
}

fn spec_of(tunnels: &[TunnelSetup; 4]) -> [GreSpec; 4] {
    let mut out = [GreSpec::ipv4(); 4];
    for (i, t) in tunnels.iter().enumerate() {
        let twin = if i > 0 { t.twin % 6 } else { 0 };
        let mut g = if twin != 0 {
            out[i - 1]
        } else {
            let mut g = if t.v6 {
                GreSpec::ipv6()
            } else {
                GreSpec::ipv4()
            };
            g = match t.gre % 8 {
                0 => g,
                1 => g.key(t.key),
                2 => g.checksum(),
                3 => g.checksum().key(t.key),
                4 => g.teb(),
                5 => g.key(t.key).teb(),
                6 => g.checksum().teb(),
                _ => g.sequence(0),
            };
            match t.link % 5 {
                1 => g = g.vlan(TPID_8021Q, 3),
                2 => g = g.vlan(TPID_8021AD, 4).vlan(TPID_8021Q, 5),
                3 => g = g.raw_ip(),
                // The reserved field differs between tunnels of odd and even keys.
                4 => g = g.ipoib(u16::from(t.key & 1 == 1)),
                _ => {}
            }
            g
        };
        match twin {
            1 => g = g.key(g.key.wrapping_add(1)),
            2 | 3 => {
                // One bit of the outer source or destination (`twin_byte`).
                let at = usize::from(twin == 3);
                match &mut g.ip {
                    lro_core::testing::IpSpec::V4(v4) => {
                        [&mut v4.src, &mut v4.dst][at][twin_byte(i, 4)] ^= 0x20
                    }
                    lro_core::testing::IpSpec::V6(v6) => {
                        [&mut v6.src, &mut v6.dst][at][twin_byte(i, 16)] ^= 0x20
                    }
                }
            }
            4 => g.flags_version ^= lro_gre::wire::flags::C,
            5 => match &mut g.ip {
                lro_core::testing::IpSpec::V6(v6) => v6.flow_label ^= 0x77,
                lro_core::testing::IpSpec::V4(v4) => v4.dst[2] ^= 1,
            },
            _ => {}
        }
        out[i] = g;
    }
    out
}

/// The plain scenario with its frames wrapped; ground truth re-read through GRE.
pub fn build(input: &GreInput, config: &Config) -> Built {
    let plain = scenario::build(&input.input, config);
    let specs = spec_of(&input.tunnels);
    let mut tunnels: Vec<Tunnel> = specs
        .iter()
        .zip(&input.tunnels)
        .map(|(s, t)| {
            let ids = match t.ids % 3 {
                0 => OuterId::Tunnel,
                1 => OuterId::Inner,
                _ => OuterId::Fixed(t.key as u16),
            };
            Tunnel::new(*s, ids)
        })
        .collect();
    let mut built = Built {
        frames: Vec::with_capacity(plain.frames.len()),
        steps: plain.steps.clone(),
        truth: None,
    };
    let mut buf = vec![0u8; 70_000];
    for (n, f) in plain.frames.iter().enumerate() {
        let w = input
            .wraps
            .get(n % input.wraps.len().max(1))
            .copied()
            .unwrap_or(Wrap {
                tunnel: 0,
                mischief: 0,
            });
        // A flow's own tunnel: by its source port (frames of one flow share it).
        let own = f.tcp.as_ref().map_or(0, |t| usize::from(t.id.sport) % 4);
        let ti = match w.tunnel % 14 {
            0..=9 => Some(own),
            10..=12 => Some((own + usize::from(w.tunnel % 3) + 1) % 4),
            _ => None,
        };
        let inner = match f.meta.link {
            LinkKind::Ethernet => InnerFrame::Ethernet(&f.bytes),
            // The IP packet, without an IPoIB encapsulation header.
            link => InnerFrame::Ip(f.bytes.get(link.header_len()..).unwrap_or_default()),
        };
        let wrapped = ti.and_then(|ti| {
            let t = &mut tunnels[ti];
            let saved = t.spec;
            let mischief = w.mischief % 17;
            match mischief {
                10 => t.spec.corrupt_checksum = true,
                11 => t.spec = t.spec.sequence(0),
                12 => t.spec.flags_version |= 1,
                13 => t.spec.reserved1 = 1,
                14 | 15 => match &mut t.spec.ip {
                    IpSpec::V4(v4) if mischief == 14 => v4.ttl -= 1,
                    IpSpec::V4(v4) => v4.tos |= 3,
                    IpSpec::V6(v6) if mischief == 14 => v6.hop_limit -= 1,
                    IpSpec::V6(v6) => v6.traffic_class |= 3,
                },
                16 => match &mut t.spec.ip {
                    IpSpec::V4(v4) => v4.mf = true,
                    IpSpec::V6(v6) => {
                        v6.fragment = Some(Ipv6Fragment {
                            offset: 0,
                            more: true,
                            ident: 1,
                        })
                    }
                },
                _ => {}
            }
            let r = t.wrap(inner, &mut buf).ok().map(|len| {
                (
                    buf[..len].to_vec(),
                    RxMeta::new(t.spec.link.kind(), f.meta.time),
                )
            });
            t.spec = saved;
            r
        });
        let (bytes, mut meta) = match wrapped {
            Some((b, mut m)) => {
                m.rss = f.meta.rss;
                m.vlan_stripped = f.meta.vlan_stripped;
                (b, m)
            }
            None => (f.bytes.clone(), f.meta),
        };
        // The checksum report of the plain frame, carried over: none, verified (only when
        // right), CHECKSUM_COMPLETE right, or off by the same amount.
        let tcp = oracle::tcp_of_gre(&bytes, &meta);
        let good = oracle::checksums_ok(&bytes, tcp.as_ref());
        let complete = lro_core::testing::complete_checksum(&bytes, meta.link);
        let plain_complete = lro_core::testing::complete_checksum(&f.bytes, f.meta.link);
        meta.checksum = match f.meta.checksum {
            RxChecksum::Verified if good => RxChecksum::Verified,
            RxChecksum::Complete(c) if c == plain_complete => RxChecksum::Complete(complete),
            RxChecksum::Complete(_) => RxChecksum::Complete(oracle::add(complete, 0x1234)),
            _ => RxChecksum::None,
        };
        let trusted = good
            && match meta.checksum {
                RxChecksum::None => config.verify_checksums,
                RxChecksum::Complete(c) => c == complete,
                _ => true,
            };
        built.frames.push(Pushed {
            bytes,
            meta,
            tcp,
            trusted,
        });
    }
    built
}

fn run<const N: usize, const S: usize>(built: &Built, config: Config) -> (Run, lro_core::Stats) {
    let mut engine: Box<Engine<Tagged, Sizes<N, S>, Gre>> = Box::new(Engine::new(config));
    let rec = check::run(&mut *engine, built, true);
    let stats = engine.stats().clone();
    (rec, stats)
}

fn same(on: &(Run, lro_core::Stats), off: &(Run, lro_core::Stats)) {
    check::same_with_prediction(&on.0, &on.1, &off.0, &off.1);
}

fn run_all<const N: usize, const S: usize>(built: &Built, config: Config) {
    let on = run::<N, S>(built, config);
    // Under `Gro` the check includes reversibility (`resegment_with::<Gre>`).
    scenario::check_all(built, &config, S, &on.0, check::Order::Arrival);
    let off = run::<N, S>(built, config.with_header_prediction(false));
    same(&on, &off);
    // The run with every frame whose checksums are right marked verified is judged too.
    let verified = built.all_verified();
    let on = run::<N, S>(&verified, config);
    scenario::check_all(&verified, &config, S, &on.0, check::Order::Arrival);
    same(
        &on,
        &run::<N, S>(&verified, config.with_header_prediction(false)),
    );
}

/// The `gre` target.
pub fn gre(input: &GreInput) {
    let config = input.input.setup.config();
    let built = build(input, &config);
    match input.input.setup.table % 4 {
        0 => run_all::<1, 1>(&built, config),
        1 => run_all::<4, 8>(&built, config),
        2 => run_all::<8, 64>(&built, config),
        _ => run_all::<64, 64>(&built, config),
    }
}
