//! Hostile input: every frame of the tcpdump test captures (odd and malformed packets), a
//! committed handful of the nastiest frames (`tests/fixtures/`), and adversarial traffic
//! (hash collisions, eviction storms, sequence wrap, the 64 KB limit, zero windows, duplicate
//! ACK floods, truncation at every byte). Each run checks that nothing panics and that the
//! output keeps DESIGN.md's invariants, with the harness's runner and checker
//! (`lro_testkit::check`, the one the property tests and fuzz targets use): every frame back
//! exactly once, verdicts that say what the sink saw, flows kept apart, per-flow payload in
//! order, the never-merged list and the policy rules, and rewritten segments valid (lengths and
//! checksums, computed with the harness's reference sum, not the engine's).
//!
//! Flows, payloads and the output's offsets are read with the reference reader
//! (`lro_testkit::oracle`), written from the protocol rules and not from the engine's parser,
//! so a parser that left a field out of the flow key could not hide behind its own answer.
//!
//! The capture replay reads `../shared/corpus/tcpdump-tests` (or `$LRO_TCPDUMP_TESTS`) with
//! `lro_testkit::capture`'s tolerant reader, and is skipped with a message when the folder is
//! absent.

use lro_core::flow::FlowHasher;
use lro_core::rss::RssSorted;
use lro_core::testing::{self, FrameSpec, IpSpec, TCP_ACK, TCP_PSH, TPID_8021Q};
use lro_core::{parse, FlowKey};
use lro_core::{
    Coalescer, Config, Engine, FlushReason, LinkKind, OutChecksum, PassReason, RssHash, RssType,
    RxChecksum, RxMeta, Sizes, Verdict,
};
use lro_testkit::built::{Built, Pushed, Step};
use lro_testkit::check::{self, Order};
use lro_testkit::frame::{bytes_of, Out, Recorder, Tagged};
use std::path::{Path, PathBuf};

/// A frame that carries its input index; not `Clone`, so whatever comes back was pushed.
/// Pushes every input, in order.
fn pushes(n: usize) -> Vec<Step> {
    (0..n).map(Step::Push).collect()
}

/// The flow key the engine's own parser gives a frame.
fn engine_key(f: &Pushed) -> Option<FlowKey> {
    parse::flow_key(&f.bytes, &f.meta)
}

/// Runs `steps` on the plain engine `engine` with the harness's runner (then a teardown
/// `flush_all`), and checks DESIGN.md's invariants on the output with the harness's checker
/// (`lro_testkit::check`); the runner also holds every verdict to what the sink saw.
fn run<C: Coalescer<Tagged>>(
    engine: &mut C,
    inputs: &[Pushed],
    steps: &[Step],
    config: &Config,
    frames_max: usize,
) -> Recorder {
    checked(engine, inputs, steps, config, frames_max, true)
}

/// [`run`] for the RSS wrapper, which queues (no verdicts to check). Frames of one flow share
/// its hash here, so the order of every flow holds; frames the wrapper cannot read as TCP
/// (fragments among them) may move.
fn run_sorted<C: Coalescer<Tagged>>(
    sorted: &mut C,
    inputs: &[Pushed],
    steps: &[Step],
    config: &Config,
    frames_max: usize,
) -> Recorder {
    checked(sorted, inputs, steps, config, frames_max, false)
}

fn checked<C: Coalescer<Tagged>>(
    engine: &mut C,
    inputs: &[Pushed],
    steps: &[Step],
    config: &Config,
    frames_max: usize,
    verdicts: bool,
) -> Recorder {
    let built = Built {
        frames: inputs.to_vec(),
        steps: steps.to_vec(),
        truth: None,
    };
    let run = check::run(engine, &built, verdicts);
    let order = if verdicts {
        Order::Arrival
    } else {
        Order::Flows(&|_| true)
    };
    check::check(&built, config, frames_max, &run, order);
    run.rec
}

/// Both policies, two table shapes, and the RSS wrapper.
fn run_all(inputs: &[Pushed], steps: &[Step]) {
    for config in [
        Config::gro(),
        Config::lro(),
        Config::lro().with_checksum_out(OutChecksum::Partial),
    ] {
        let mut small: Box<Engine<Tagged, Sizes<4, 8>>> = Box::new(Engine::new(config));
        run(&mut *small, inputs, steps, &config, 8);
        let mut large: Box<Engine<Tagged, Sizes<64, 64>>> = Box::new(Engine::new(config));
        run(&mut *large, inputs, steps, &config, 64);
    }
    let config = Config::lro();
    let inner: Engine<Tagged, Sizes<4, 16>> = Engine::new(config);
    let mut sorted: Box<RssSorted<_, Tagged, 64>> = Box::new(RssSorted::new(inner));
    run_sorted(&mut *sorted, inputs, steps, &config, 16);
}

/// The metadata variants a frame is offered with: unverified, and CHECKSUM_COMPLETE with the
/// true sum (a NIC that lies is out of scope).
fn metas(bytes: &[u8], link: LinkKind) -> [RxMeta; 2] {
    let base = RxMeta::new(link, 0);
    let complete = testing::complete_checksum(bytes, link);
    [base, base.with_checksum(RxChecksum::Complete(complete))]
}

// ---------------------------------------------------------------------------------------------
// Captures (read with `lro_testkit::capture`): how their frames are offered.

/// How a capture's link type is offered to the engine: Ethernet and raw IP as themselves,
/// Linux cooked captures as raw IP after their header, anything else as both (hostile bytes).
fn frames_for(link: u32, frame: &[u8]) -> Vec<(LinkKind, Vec<u8>)> {
    match link {
        1 => vec![(LinkKind::Ethernet, frame.to_vec())],
        12 | 14 | 101 | 228 | 229 => vec![(LinkKind::RawIp, frame.to_vec())],
        113 => vec![(LinkKind::RawIp, frame.get(16..).unwrap_or(&[]).to_vec())],
        276 => vec![(LinkKind::RawIp, frame.get(20..).unwrap_or(&[]).to_vec())],
        _ => vec![
            (LinkKind::Ethernet, frame.to_vec()),
            (LinkKind::RawIp, frame.to_vec()),
        ],
    }
}

fn tcpdump_tests() -> PathBuf {
    std::env::var_os("LRO_TCPDUMP_TESTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus/tcpdump-tests")
        })
}

#[test]
fn every_frame_of_the_tcpdump_test_captures() {
    let dir = tcpdump_tests();
    let Ok(entries) = std::fs::read_dir(&dir) else {
        println!(
            "skipped: {} is absent (set LRO_TCPDUMP_TESTS to the tcpdump test captures)",
            dir.display()
        );
        return;
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    let (mut files, mut frames) = (0, 0);
    for path in &paths {
        let Ok(data) = std::fs::read(path) else {
            continue;
        };
        let Some(packets) = lro_testkit::capture::read(&data) else {
            println!("not a capture, skipped: {}", path.display());
            continue;
        };
        files += 1;
        // Each capture is one poll's worth of traffic: its frames in order, every offered
        // with both checksum metadata variants.
        let mut inputs = Vec::new();
        for (link, frame) in &packets {
            for (kind, bytes) in frames_for(*link, frame) {
                assert_parsers_agree(&bytes);
                for meta in metas(&bytes, kind) {
                    inputs.push(Pushed::new(bytes.clone(), meta));
                }
            }
        }
        frames += inputs.len();
        let ops = pushes(inputs.len());
        run_all(&inputs, &ops);
    }
    println!("{files} captures, {frames} frames offered");
    assert!(files > 0, "no capture in {}", dir.display());
}

#[test]
fn committed_nasty_frames() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut names: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/fixtures")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "bin"))
        .collect();
    names.sort();
    assert!(names.len() >= 10, "fixtures missing");
    for path in &names {
        let bytes = std::fs::read(path).expect("fixture");
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let kind = if name.starts_with("raw-") {
            LinkKind::RawIp
        } else {
            LinkKind::Ethernet
        };
        // The frame, twice (a flow of itself), then every prefix of it.
        let mut inputs = Vec::new();
        for meta in metas(&bytes, kind) {
            inputs.push(Pushed::new(bytes.clone(), meta));
            inputs.push(Pushed::new(bytes.clone(), meta));
        }
        for cut in 0..bytes.len().min(200) {
            inputs.push(Pushed::new(bytes[..cut].to_vec(), metas(&bytes, kind)[0]));
        }
        let ops = pushes(inputs.len());
        run_all(&inputs, &ops);
    }
}

// ---------------------------------------------------------------------------------------------
// Adversarial traffic.

fn spec(port: u16) -> FrameSpec<'static> {
    FrameSpec::ipv4_tcp(port, 5201)
}

const PAYLOAD: [u8; 1448] = {
    let mut p = [0u8; 1448];
    let mut i = 0;
    while i < p.len() {
        p[i] = (i * 7 + 3) as u8;
        i += 1;
    }
    p
};

/// `frames` segments of `flows` interleaved flows made by `make(flow) -> spec`.
fn interleaved(
    flows: usize,
    frames: usize,
    make: &dyn Fn(usize) -> FrameSpec<'static>,
    rss: Option<u32>,
) -> Vec<Pushed> {
    in_runs(flows, frames, 1, make, rss)
}

/// [`interleaved`] in runs of `run` frames of one flow. The metadata names the spec's link.
fn in_runs(
    flows: usize,
    frames: usize,
    run: usize,
    make: &dyn Fn(usize) -> FrameSpec<'static>,
    rss: Option<u32>,
) -> Vec<Pushed> {
    let mut seq = vec![1u32; flows];
    (0..frames)
        .map(|i| {
            let f = i / run % flows;
            let s = make(f).seq(seq[f]).payload(&PAYLOAD[..1000]);
            seq[f] = seq[f].wrapping_add(1000);
            let mut meta = RxMeta::new(s.link.kind(), i as u64).with_checksum(RxChecksum::Verified);
            if let Some(value) = rss {
                meta = meta.with_rss(RssHash {
                    value,
                    kind: RssType::TcpIpv4,
                });
            }
            Pushed::new(bytes_of(&s), meta)
        })
        .collect()
}

/// Source ports whose flow keys land in one bucket chain of every table up to 256 entries
/// under the hash seed `seed`: what an attacker who knows the seed can find by trying ports
/// (about 256 tries per flow). A caller who gives the engine a random seed
/// ([`Config::hash_seed`]) leaves nothing to find.
fn colliding_ports(seed: u64, n: usize) -> Vec<u16> {
    let hasher = FlowHasher::new(seed);
    let key = |port: u16| build_key(&spec(port));
    let target = hasher.hash(&key(1024)) & 0xff;
    (1024..=u16::MAX)
        .filter(|&p| hasher.hash(&key(p)) & 0xff == target)
        .take(n)
        .collect()
}

fn build_key(s: &FrameSpec<'_>) -> FlowKey {
    parse::flow_key(&bytes_of(&s.payload(&PAYLOAD[..10])), &RxMeta::ethernet(0)).expect("TCP")
}

#[test]
fn flows_crafted_to_collide_in_the_key_hash_stay_apart() {
    let ports = colliding_ports(Config::DEFAULT_HASH_SEED, 64);
    assert_eq!(ports.len(), 64, "enough colliding ports");
    let inputs = interleaved(64, 64 * 8, &|k| spec(ports[k]), None);
    let hasher = FlowHasher::new(Config::DEFAULT_HASH_SEED);
    let buckets: std::collections::HashSet<u32> = inputs
        .iter()
        .map(|f| hasher.hash(&engine_key(f).expect("TCP")) & 0xff)
        .collect();
    let keys: std::collections::HashSet<FlowKey> =
        inputs.iter().map(|f| engine_key(f).expect("TCP")).collect();
    assert_eq!(
        (buckets.len(), keys.len()),
        (1, 64),
        "the crafted flows share one bucket"
    );
    run_all(&inputs, &pushes(inputs.len()));
    // Colliding flows still aggregate: a table of 64 holds all of them.
    let config = Config::lro();
    let mut e: Box<Engine<Tagged, Sizes<64, 64>>> = Box::new(Engine::new(config));
    run(&mut *e, &inputs, &pushes(inputs.len()), &config, 64);
    assert_eq!(e.stats().segments, 64, "one segment per flow");
    // Under another seed the same flows spread over the buckets.
    let other = FlowHasher::new(0x0123_4567_89ab_cdef);
    let spread: std::collections::HashSet<u32> =
        keys.iter().map(|k| other.hash(k) & 0xff).collect();
    assert!(spread.len() > 40, "{} buckets", spread.len());
}

/// Two frames `make(i)`, `make(j)` (`i != j`) whose flow keys have the same 32-bit hash under
/// the default seed: a birthday search, about 2^16 tries.
fn full_collision(make: &dyn Fn(u32) -> FrameSpec<'static>) -> (u32, u32) {
    let hasher = FlowHasher::new(Config::DEFAULT_HASH_SEED);
    let mut seen = std::collections::HashMap::new();
    for i in 0..1 << 20 {
        if let Some(j) = seen.insert(hasher.hash(&build_key(&make(i))), i) {
            return (j, i);
        }
    }
    panic!("no two of 2^20 keys share a hash")
}

/// Flows whose keys have the same full 32-bit hash (what an attacker who knows the seed can
/// find by trying about 2^16 addresses) are told apart by comparing the whole key: flows that
/// differ in the source address only (two clients behind one router that picked the same
/// port), and flows whose source and destination addresses differ by the same bits (a
/// comparison that let the two differences cancel would take them for one).
#[test]
fn flows_whose_hashes_collide_fully_stay_apart() {
    let v4 = |src: u32, dst: u32| {
        let mut s = spec(40000);
        if let IpSpec::V4(ip) = &mut s.ip {
            (ip.src, ip.dst) = (src.to_be_bytes(), dst.to_be_bytes());
        }
        s
    };
    let (a, b) = (
        u32::from_be_bytes([198, 18, 0, 1]),
        u32::from_be_bytes([198, 18, 0, 2]),
    );
    let source: &dyn Fn(u32) -> FrameSpec<'static> = &|i| v4(a ^ i << 8, b);
    let both: &dyn Fn(u32) -> FrameSpec<'static> = &|i| v4(a ^ i << 8, b ^ i << 8);
    for (what, make) in [("source address", source), ("both addresses", both)] {
        let (i, j) = full_collision(make);
        let (one, other) = (make(i), make(j));
        let hasher = FlowHasher::new(Config::DEFAULT_HASH_SEED);
        let (k1, k2) = (build_key(&one), build_key(&other));
        // Told apart by their addresses (not by `FlowKey`'s `==`, which the engine uses).
        assert_ne!(k1.src_bytes(), k2.src_bytes(), "{what}");
        assert_eq!(hasher.hash(&k1), hasher.hash(&k2), "{what}");
        let inputs = interleaved(2, 16, &|k| if k == 0 { one } else { other }, None);
        run_all(&inputs, &pushes(inputs.len()));
        let config = Config::lro();
        let mut e: Box<Engine<Tagged, Sizes<64, 64>>> = Box::new(Engine::new(config));
        run(&mut *e, &inputs, &pushes(inputs.len()), &config, 64);
        assert_eq!(e.stats().segments, 2, "{what}: one segment per flow");
    }
}

/// Flows whose frames differ in one address byte only (each byte of either address, IPv4
/// and IPv6, with and without timestamps) stay apart, interleaved: header prediction
/// compares every byte its template's mask keeps, and the mask keeps the addresses.
#[test]
fn flows_one_address_byte_apart_stay_apart() {
    for (v6, ts) in [(false, false), (false, true), (true, false), (true, true)] {
        let len = if v6 { 16 } else { 4 };
        for (dst, byte) in (0..2).flat_map(|d| (0..len).map(move |b| (d == 1, b))) {
            let make = |f: usize| {
                let mut s = if v6 {
                    FrameSpec::ipv6_tcp(40000, 5201)
                } else {
                    spec(40000)
                };
                if ts {
                    s = s.timestamps(7, 9);
                }
                let flip = if f == 0 { 0 } else { 0x40 };
                match &mut s.ip {
                    IpSpec::V4(ip) if dst => ip.dst[byte] ^= flip,
                    IpSpec::V4(ip) => ip.src[byte] ^= flip,
                    IpSpec::V6(ip) if dst => ip.dst[byte] ^= flip,
                    IpSpec::V6(ip) => ip.src[byte] ^= flip,
                }
                s
            };
            // Frame by frame, and in runs of three: an IPv6 probe hashes the ports and the
            // low half of the destination address only, so two flows apart elsewhere replace
            // each other in one candidate slot, and only runs are predicted.
            let inputs = interleaved(2, 12, &make, None);
            run_all(&inputs, &pushes(inputs.len()));
            let inputs = in_runs(2, 12, 3, &make, None);
            run_all(&inputs, &pushes(inputs.len()));
            let config = Config::lro();
            let mut e: Box<Engine<Tagged, Sizes<64, 64>>> = Box::new(Engine::new(config));
            run(&mut *e, &inputs, &pushes(inputs.len()), &config, 64);
            let what = format!("v6 {v6} ts {ts} dst {dst} byte {byte}");
            assert_eq!(e.stats().segments, 2, "{what}: one segment per flow");
            assert!(e.stats().predicted > 0, "{what}: prediction not exercised");
        }
    }
}

/// The longest headers a prediction template holds (160 bytes: raw IPv6 with 88 bytes of
/// Hop-by-Hop and Destination Options headers, and the timestamps; compared out of line past
/// 128 bytes) are predicted, and two flows of them one address byte apart stay apart;
/// longer ones (behind Ethernet with 96 bytes of them: 182 bytes) are merged by the general
/// path alone.
#[test]
fn long_headers_are_predicted_up_to_a_templates_size_and_told_apart() {
    use testing::{Ipv6Ext, Ipv6ExtKind};
    // An extension header of `len` bytes: one PadN option after its next-header and length
    // bytes.
    let ext = |kind, len: usize| {
        let mut body = vec![1, (len - 4) as u8];
        body.resize(len - 2, 0);
        Ipv6Ext::new(kind, &body)
    };
    // Two flows one address byte apart (`flip`: a byte of the source address, or of the
    // destination's high half), in runs of three frames: an IPv6 probe hashes the ports and
    // the destination's low half only, so both flows' probes land on one candidate slot, and
    // each run's first frame is compared with the other flow's template. No flip: one flow.
    let flips = (0..24).map(Some).chain([None]);
    for ((raw, dst_len, header, predicted), flip) in
        [(true, 40, 160, true), (false, 48, 182, false)]
            .into_iter()
            .flat_map(|c| flips.clone().map(move |f| (c, f)))
    {
        let flows = if flip.is_some() { 2 } else { 1 };
        let make = |flow: usize| {
            let mut s = FrameSpec::ipv6_tcp(40000, 5201).timestamps(7, 9);
            if raw {
                s = s.raw_ip();
            }
            if let IpSpec::V6(v6) = &mut s.ip {
                v6.ext[0] = Some(ext(Ipv6ExtKind::HopByHop, 48));
                v6.ext[1] = Some(ext(Ipv6ExtKind::DestinationOptions, dst_len));
                match (flip, flow) {
                    (Some(b @ 0..16), 1) => v6.src[b] ^= 0x10,
                    (Some(b), 1) => v6.dst[b - 16] ^= 0x10,
                    _ => {}
                }
            }
            s
        };
        let inputs = in_runs(flows, 6 * flows, 3, &make, None);
        for p in &inputs {
            assert_eq!(p.bytes.len() - 1000, header);
        }
        run_all(&inputs, &pushes(inputs.len()));
        let config = Config::lro();
        let mut e: Box<Engine<Tagged, Sizes<8, 16>>> = Box::new(Engine::new(config));
        run(&mut *e, &inputs, &pushes(inputs.len()), &config, 8);
        let what =
            format!("{header}-byte headers, address byte {flip:?} flipped (16 on: destination)");
        assert_eq!(
            e.stats().segments,
            flows as u64,
            "{what}: one segment per flow"
        );
        assert_eq!(e.stats().predicted > 0, predicted, "{what}");
    }
}

/// A new hash seed re-buckets the held flows: every one is still found and its next frame
/// merges, even when all of them share one bucket chain under the new seed.
#[test]
fn a_new_hash_seed_keeps_every_held_flow_found() {
    let seed = 0x0123_4567_89ab_cdef;
    let ports = colliding_ports(seed, 32);
    assert_eq!(ports.len(), 32, "enough colliding ports");
    let frame = |id: usize, port: u16, seq: u32| Tagged {
        id,
        buf: bytes_of(&spec(port).seq(seq).payload(&PAYLOAD[..1000])),
    };
    let meta = RxMeta::ethernet(0).with_checksum(RxChecksum::Verified);
    for config in [Config::lro(), Config::gro()] {
        let mut out = Recorder::default();
        let mut e: Box<Engine<Tagged, Sizes<64, 64>>> = Box::new(Engine::new(config));
        for (k, &p) in ports.iter().enumerate() {
            assert_eq!(e.push(frame(k, p, 1), &meta, &mut out), Verdict::Held);
        }
        e.set_config(config.with_hash_seed(seed));
        for (k, &p) in ports.iter().enumerate() {
            let v = e.push(frame(32 + k, p, 1001), &meta, &mut out);
            assert_eq!(
                v,
                Verdict::Merged,
                "port {p}: its held segment was not found"
            );
        }
        e.flush_all(&mut out);
        let pairs = out
            .out
            .iter()
            .filter(|o| matches!(o, Out::Seg { ids, .. } if ids.len() == 2))
            .count();
        assert_eq!(
            (out.out.len(), pairs),
            (32, 32),
            "{:?}: one segment of two frames per flow",
            config.policy
        );
    }
}

#[test]
fn many_flows_sharing_one_rss_hash() {
    let inputs = interleaved(200, 200 * 4, &|f| spec(2000 + f as u16), Some(0x1234_5678));
    run_all(&inputs, &pushes(inputs.len()));
    // The RSS wrapper groups by hash: one group of 200 flows through 4 entries still only
    // merges frames of one flow (checked by `run_all`), and loses nothing.
    let inner: Engine<Tagged, Sizes<4, 16>> = Engine::new(Config::lro());
    let mut sorted: Box<RssSorted<_, Tagged, 1024>> = Box::new(RssSorted::new(inner));
    let config = Config::lro();
    run_sorted(&mut *sorted, &inputs, &pushes(inputs.len()), &config, 16);
    assert_eq!(sorted.rss_stats().runs, 1, "one hash, one run");
}

#[test]
fn eviction_storm() {
    // 1000 flows round-robin through 4 entries: every push past the fourth evicts.
    let inputs = interleaved(1000, 3000, &|f| spec(f as u16), None);
    let config = Config::gro();
    let mut e: Box<Engine<Tagged, Sizes<4, 8>>> = Box::new(Engine::new(config));
    run(&mut *e, &inputs, &pushes(inputs.len()), &config, 8);
    assert_eq!(e.stats().evictions, 3000 - 4);
    assert_eq!(e.stats().forgotten, 3000 - 4);
    assert_eq!(e.stats().frames_merged, 0);
    assert_eq!(e.stats().flushed(FlushReason::Evicted), 3000 - 4);
}

#[test]
fn pure_ack_flows_beyond_the_table_are_counted_as_forgotten() {
    // 100 flows' pure ACKs round-robin through 4 entries (each delivered alone, its flow's
    // entry kept idle for header prediction): entries go from one ACK flow to another,
    // which evicts nothing.
    let inputs: Vec<Pushed> = (0..1000)
        .map(|i| {
            let s = spec(2000 + (i % 100) as u16)
                .ack(1 + i as u32)
                .flags(TCP_ACK);
            Pushed::new(
                bytes_of(&s),
                RxMeta::ethernet(i as u64).with_checksum(RxChecksum::Verified),
            )
        })
        .collect();
    let config = Config::gro();
    let mut e: Box<Engine<Tagged, Sizes<4, 8>>> = Box::new(Engine::new(config));
    run(&mut *e, &inputs, &pushes(inputs.len()), &config, 8);
    let s = e.stats();
    assert_eq!((s.evictions, s.frames_merged), (0, 0));
    assert!(
        s.forgotten > 50 && s.forgotten < 1000,
        "{} flows forgotten",
        s.forgotten
    );
}

#[test]
fn sequence_numbers_wrapping_at_2_32() {
    for start in [
        u32::MAX - 999,
        u32::MAX - 1000,
        u32::MAX,
        0u32.wrapping_sub(2500),
    ] {
        let inputs: Vec<Pushed> = (0..8u32)
            .map(|k| {
                let s = spec(7)
                    .seq(start.wrapping_add(k * 1000))
                    .payload(&PAYLOAD[..1000]);
                Pushed::new(bytes_of(&s), RxMeta::ethernet(0))
            })
            .collect();
        for config in [Config::gro(), Config::lro()] {
            let mut e: Box<Engine<Tagged, Sizes<4, 8>>> = Box::new(Engine::new(config));
            let rec = run(&mut *e, &inputs, &pushes(8), &config, 8);
            let Out::Seg { ids, bytes, .. } = &rec.out[0] else {
                panic!("a segment");
            };
            assert_eq!(ids.len(), 8, "merged across the wrap ({start:#x})");
            let seq = u32::from_be_bytes(bytes[38..42].try_into().unwrap());
            assert_eq!(seq, start);
        }
    }
}

#[test]
fn the_64_kb_limit() {
    // 9000-byte jumbo segments: a segment stops below 65535 bytes of IP datagram.
    let big = vec![0xa5u8; 9000];
    let inputs: Vec<Pushed> = (0..40u32)
        .map(|k| {
            let s = spec(9).seq(1 + k * 9000).payload(&big);
            Pushed::new(bytes_of(&s), RxMeta::ethernet(0))
        })
        .collect();
    for config in [Config::gro(), Config::lro()] {
        let mut e: Box<Engine<Tagged, Sizes<4, 64>>> = Box::new(Engine::new(config));
        let rec = run(&mut *e, &inputs, &pushes(40), &config, 64);
        assert!(e.stats().flushed(FlushReason::SizeLimit) > 0);
        let sizes: Vec<usize> = rec
            .out
            .iter()
            .map(|o| match o {
                Out::Seg { bytes, ids, .. } => {
                    assert!(bytes.len() - 14 <= 65535);
                    ids.len()
                }
                Out::Rel(_) => panic!("no pure ACKs here"),
            })
            .collect();
        // 7 x 9000 bytes fit in one datagram, 8 do not.
        assert_eq!(sizes, [7, 7, 7, 7, 7, 5]);
    }
    // A single IPv4 datagram of exactly 65535 bytes, and the largest IPv6 payload.
    let p4 = vec![1u8; 65535 - 40];
    let p6 = vec![2u8; 65535 - 20];
    let frames = [
        bytes_of(&spec(1).payload(&p4)),
        bytes_of(&FrameSpec::ipv6_tcp(1, 2).payload(&p6)),
        bytes_of(&spec(1).seq(65495).payload(&PAYLOAD[..100])),
    ];
    let inputs: Vec<Pushed> = frames
        .iter()
        .map(|b| Pushed::new(b.clone(), RxMeta::ethernet(0)))
        .collect();
    run_all(&inputs, &pushes(3));
}

#[test]
fn zero_window() {
    // The receiver's window closes (zero-window ACKs), a probe arrives, the window reopens.
    let mut frames = Vec::new();
    let mut ack = 100u32;
    for k in 0..6 {
        frames.push(spec(3).ack(ack).window(0));
        if k % 2 == 1 {
            ack += 1;
        }
    }
    frames.push(spec(3).ack(ack).window(0).payload(&PAYLOAD[..1])); // a probe
    frames.push(spec(3).ack(ack).window(0));
    frames.push(spec(3).ack(ack).window(4096)); // window update
    frames.push(spec(3).ack(ack).window(65535)); // another
    let inputs: Vec<Pushed> = frames
        .iter()
        .map(|s| Pushed::new(bytes_of(s), RxMeta::ethernet(0)))
        .collect();
    run_all(&inputs, &pushes(inputs.len()));
    let config = Config::lro();
    let mut e: Box<Engine<Tagged, Sizes<4, 8>>> = Box::new(Engine::new(config));
    let rec = run(&mut *e, &inputs, &pushes(inputs.len()), &config, 8);
    // Identical zero-window ACKs are duplicates: never superseded.
    let released: Vec<usize> = rec
        .out
        .iter()
        .filter_map(|o| match o {
            Out::Rel(i) => Some(*i),
            Out::Seg { .. } => None,
        })
        .collect();
    for pair in [(0, 1), (2, 3), (4, 5)] {
        assert!(
            !released.contains(&pair.1),
            "duplicate zero-window ACK {} released",
            pair.1
        );
    }
}

#[test]
fn a_flood_of_duplicate_acks() {
    let n = 5000;
    let inputs: Vec<Pushed> = (0..n)
        .map(|_| {
            Pushed::new(
                bytes_of(&spec(4).ack(777).window(1000)),
                RxMeta::ethernet(0),
            )
        })
        .collect();
    run_all(&inputs, &pushes(n));
    let config = Config::lro();
    let mut e: Box<Engine<Tagged, Sizes<4, 8>>> = Box::new(Engine::new(config));
    let rec = run(&mut *e, &inputs, &pushes(n), &config, 8);
    // None is superseded: every duplicate reaches the stack (RFC 5681 fast retransmit).
    assert_eq!(e.stats().absorbed, 0);
    assert_eq!(rec.out.len(), n);
    assert!(e.stats().passed(PassReason::DupAck) >= n as u64 - 2);
}

#[test]
fn truncated_headers_at_every_byte_offset() {
    let mut six = FrameSpec::ipv6_tcp(5, 6).payload(&PAYLOAD[..64]);
    if let IpSpec::V6(ip) = &mut six.ip {
        ip.ext[0] = Some(testing::Ipv6Ext::new(
            testing::Ipv6ExtKind::HopByHop,
            &[1, 4, 0, 0, 0, 0],
        ));
    }
    let shapes = [
        spec(5).payload(&PAYLOAD[..64]).timestamps(1, 2),
        spec(5)
            .vlan(TPID_8021Q, 3)
            .vlan(TPID_8021Q, 4)
            .payload(&PAYLOAD[..64]),
        six,
        spec(5).raw_ip().payload(&PAYLOAD[..64]),
    ];
    for s in &shapes {
        let full = bytes_of(s);
        let kind = if s.link_len() == 0 {
            LinkKind::RawIp
        } else {
            LinkKind::Ethernet
        };
        // A valid frame of the flow, every truncation of the next one, then the next one.
        let next = bytes_of(&s.seq(64).flags(TCP_ACK | TCP_PSH));
        let mut inputs = vec![Pushed::new(full.clone(), metas(&full, kind)[0])];
        for cut in 0..next.len() {
            for meta in metas(&next[..cut], kind) {
                inputs.push(Pushed::new(next[..cut].to_vec(), meta));
            }
        }
        inputs.push(Pushed::new(next.clone(), metas(&next, kind)[0]));
        run_all(&inputs, &pushes(inputs.len()));
        let config = Config::lro();
        let mut e: Box<Engine<Tagged, Sizes<4, 8>>> = Box::new(Engine::new(config));
        let mut rec = Recorder::default();
        for (i, f) in inputs.iter().enumerate().skip(1).take(inputs.len() - 2) {
            let v = e.push(
                Tagged {
                    id: i,
                    buf: f.bytes.clone(),
                },
                &f.meta,
                &mut rec,
            );
            assert!(
                matches!(v, Verdict::Passed(_)),
                "a truncated frame ({} bytes) was {v:?}",
                f.bytes.len()
            );
        }
    }
}

#[test]
fn reordered_old_ack_and_its_repeat_are_not_superseded_wrongly() {
    // From the coalesce fuzz target: a pure ACK, an older data+PSH segment (reordered), then a
    // pure ACK repeating the older one's ACK and window. The repeat is not a duplicate in RFC
    // 5681's sense (its ACK is not the greatest seen), so it may be held; whatever the engine
    // does, everything must come back and nothing merge across the PSH.
    let a = spec(35342)
        .ack(0x784c_89ef)
        .window(63)
        .timestamps(0x4786_e138, 1);
    let b = spec(35342)
        .ack(0x784c_89ee)
        .window(63)
        .timestamps(0x4786_e137, 1)
        .flags(TCP_ACK | TCP_PSH)
        .seq(0x23a9_c20c)
        .payload(&PAYLOAD[..37]);
    let c = spec(35342)
        .ack(0x784c_89ee)
        .window(63)
        .timestamps(0x4786_e137, 1)
        .seq(0x23a9_c231);
    let inputs: Vec<Pushed> = [a, b, c]
        .iter()
        .map(|s| Pushed::new(bytes_of(s), RxMeta::ethernet(0)))
        .collect();
    run_all(&inputs, &pushes(3));
    // And with the same ACK state repeated once more, it is a duplicate: never released.
    let mut more = inputs.clone();
    more.push(inputs[2].clone());
    let config = Config::lro();
    let mut e: Box<Engine<Tagged, Sizes<4, 8>>> = Box::new(Engine::new(config));
    let rec = run(&mut *e, &more, &pushes(4), &config, 8);
    assert!(
        !rec.out.iter().any(|o| matches!(o, Out::Rel(3))),
        "a duplicate of the held ACK was superseded"
    );
    let mut flushed = more.clone();
    flushed.push(inputs[0].clone());
    let ops = [
        Step::Push(0),
        Step::Push(1),
        Step::Push(2),
        Step::FlushAll,
        Step::Push(3),
    ];
    run(&mut *e, &flushed, &ops, &config, 8);
}

// ---------------------------------------------------------------------------------------------
// The engine's parser (`parse_into` with its fast paths, `parse`, `flow_key`) against itself
// and the reference reader.

/// Every metadata variant the parser branches on: each link kind, and a stripped tag (TCI 0,
/// a priority tag, must still tell the frame from an untagged one).
fn parse_metas() -> [RxMeta; 5] {
    [
        RxMeta::ethernet(0),
        RxMeta::ethernet(0).with_vlan_stripped(7),
        RxMeta::ethernet(0).with_vlan_stripped(0),
        RxMeta::raw_ip(0),
        RxMeta::new(LinkKind::Ipoib, 0),
    ]
}

/// `parse_into` says exactly what `parse` says (the same `Parsed` on success, the same
/// `Unparsed` on failure), `flow_key` agrees, and all of it agrees with the reference reader
/// field by field (`lro_testkit::parser`).
fn assert_parsers_agree(bytes: &[u8]) {
    for meta in parse_metas() {
        if let Err(e) = check::catch(|| lro_testkit::parser::agrees(bytes, &meta)) {
            panic!("{e}\n{meta:?} {bytes:02x?}");
        }
    }
}

/// The frame of `s`, padded with `pad` zero bytes, with the bytes at `edits` changed (those
/// past the end ignored), then cut to `cut` bytes.
fn near_miss(s: &FrameSpec<'_>, pad: usize, edits: &[(usize, u8)], cut: Option<usize>) -> Vec<u8> {
    let mut b = bytes_of(s);
    b.extend(std::iter::repeat_n(0u8, pad));
    for &(at, v) in edits {
        if let Some(x) = b.get_mut(at) {
            *x = v;
        }
    }
    if let Some(cut) = cut {
        b.truncate(cut);
    }
    b
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4096))]

    /// Frames of the fast path's shape and near misses: any header byte changed, cut short or
    /// padded, with and without options.
    #[test]
    fn the_parsers_agree_with_each_other_and_the_reference(
        options in 0u8..4,
        payload_len in 0usize..64,
        edits in proptest::collection::vec((0usize..80, proptest::num::u8::ANY), 0..4),
        cut in proptest::option::of(0usize..140),
        pad in 0usize..8,
        vlan in proptest::bool::ANY,
    ) {
        let payload = &PAYLOAD[..payload_len];
        let mut s = spec(40000).seq(1).ack(2).payload(payload);
        s = match options {
            0 => s,
            1 => s.timestamps(3, 4),
            2 => s.sack(&[(5, 6)]),
            _ => s.timestamps(3, 4).sack(&[(7, 8)]),
        };
        if vlan {
            s = s.vlan(TPID_8021Q, 5);
        }
        assert_parsers_agree(&near_miss(&s, pad, &edits, cut));
    }
}

/// An IPv6 extension header of kind `kind % 3` whose body (after the next-header and length
/// bytes) has the shape `shape % 3`: for a Routing header segments left 0, not 0, or any bytes;
/// for Destination options a Home Address option, padding, or any bytes; for Hop-by-Hop
/// padding or any bytes.
fn extension(kind: u8, shape: u8, bytes: &[u8]) -> testing::Ipv6Ext {
    use testing::{Ipv6Ext, Ipv6ExtKind};
    let bytes = &bytes[..bytes.len().min(20)];
    let mut body = Vec::new();
    let kind = match kind % 3 {
        0 => Ipv6ExtKind::HopByHop,
        1 => Ipv6ExtKind::Routing,
        _ => Ipv6ExtKind::DestinationOptions,
    };
    match (kind, shape % 3) {
        // Routing type, segments left, then the rest of the header.
        (Ipv6ExtKind::Routing, 0) => body.extend([bytes.first().copied().unwrap_or(0), 0]),
        (Ipv6ExtKind::Routing, 1) => body.extend([0, bytes.first().copied().unwrap_or(0) | 1]),
        // A Home Address option (RFC 6275 section 6.3): type 0xc9, 16 bytes of address.
        (Ipv6ExtKind::DestinationOptions, 0) => {
            body.extend([0xc9, 16]);
            body.extend((0..16).map(|i| bytes.get(i).copied().unwrap_or(i as u8)));
        }
        // PadN over the whole body.
        (_, 1) => body.extend([1, 4, 0, 0, 0, 0]),
        _ => {}
    }
    body.extend(bytes);
    Ipv6Ext::new(kind, &body[..body.len().min(46)])
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2048))]

    /// The headers the fast paths leave to the general parser: IPv6 extension headers
    /// (Hop-by-Hop, Routing with and without segments left, Destination options with and
    /// without a Home Address option, up to three, and a Fragment header) and IPv4 options and
    /// fragments, with bytes changed, cut short or padded.
    #[test]
    fn the_parsers_agree_on_extension_headers_options_and_fragments(
        v6 in proptest::bool::ANY,
        exts in proptest::collection::vec(
            (0u8..3, 0u8..3, proptest::collection::vec(proptest::num::u8::ANY, 0..20)),
            0..4,
        ),
        fragment in proptest::option::of((0u16..3, proptest::bool::ANY)),
        v4_options in proptest::collection::vec(proptest::num::u8::ANY, 0..41),
        edits in proptest::collection::vec((14usize..200, proptest::num::u8::ANY), 0..3),
        cut in proptest::option::of(0usize..240),
        pad in 0usize..8,
    ) {
        let mut s = spec(40000).seq(1).ack(2).timestamps(3, 4).payload(&PAYLOAD[..24]);
        if v6 {
            let mut ip = testing::Ipv6Spec::default();
            for (slot, (kind, shape, bytes)) in ip.ext.iter_mut().zip(&exts) {
                *slot = Some(extension(*kind, *shape, bytes));
            }
            ip.fragment = fragment.map(|(offset, more)| testing::Ipv6Fragment {
                offset,
                more,
                ident: 9,
            });
            s.ip = IpSpec::V6(ip);
        } else if let IpSpec::V4(ip) = &mut s.ip {
            ip.options = testing::Bytes::from_slice(&v4_options[..v4_options.len().min(40)]);
            if let Some((offset, more)) = fragment {
                ip.frag_offset = offset;
                ip.mf = more;
            }
        }
        assert_parsers_agree(&near_miss(&s, pad, &edits, cut));
    }
}

#[test]
fn the_parsers_agree_on_every_truncation_and_the_committed_frames() {
    let full = bytes_of(&spec(40000).timestamps(1, 2).payload(&PAYLOAD[..100]));
    for len in 0..=full.len() {
        assert_parsers_agree(&full[..len]);
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).expect("fixtures") {
        let bytes = std::fs::read(entry.expect("entry").path()).expect("fixture");
        assert_parsers_agree(&bytes);
        n += 1;
    }
    assert!(n > 0, "no fixture in {}", dir.display());
}
