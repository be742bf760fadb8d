//! Zero allocations on the hot path: a counting global allocator watches `push`, `flush_all`
//! and `flush_idle` over a realistic mixed stream (many flows, both policies, VLANs, IPv4 and
//! IPv6, pure and duplicate ACKs, PSH/FIN, gaps, bad checksums, padding, timers), with every
//! frame built before the measured region and a sink that only moves frames into a
//! pre-reserved vector.
//!
//! Its own test binary, because a `#[global_allocator]` is process-wide. Counting is per
//! thread, so the test harness's own threads do not disturb it.
#![cfg(feature = "test-utils")]

use lro_core::{Coalescer, Engine, Segment, Sink, Sizes};
use lro_testkit::built::Step as Op;
use lro_testkit::frame::Tagged;
use lro_testkit::scenario::{FlowSeed, Knobs, Scenario, Step};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    static MEASURING: Cell<bool> = const { Cell::new(false) };
    static EVENTS: Cell<u64> = const { Cell::new(0) };
}

fn note() {
    // `try_with`: during thread teardown the slots may be gone; nothing is measured then.
    let _ = MEASURING.try_with(|m| {
        if m.get() {
            let _ = EVENTS.try_with(|e| e.set(e.get() + 1));
        }
    });
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged; the
// bookkeeping touches only const-initialised thread-locals, which never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note();
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        note();
        // SAFETY: `ptr` was allocated by `System` through this allocator with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note();
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note();
        // SAFETY: same contract as our caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Counts what it sees and keeps every frame in a vector reserved up front, so neither
/// dropping nor storing a frame touches the allocator.
struct Keep {
    frames: Vec<Tagged>,
    scratch: Vec<u8>,
    segments: u64,
    bytes: u64,
}

impl Sink<Tagged> for Keep {
    fn segment(&mut self, seg: Segment<'_, Tagged>) {
        self.segments += 1;
        // Exercise the contiguous copy too (into a pre-sized buffer).
        if let Ok(n) = seg.copy_to(&mut self.scratch) {
            self.bytes += n as u64;
        }
        for f in seg.into_frames() {
            self.frames.push(f);
        }
    }

    fn release(&mut self, frame: Tagged) {
        self.frames.push(frame);
    }
}

/// A deterministic pseudo-random stream (SplitMix64), so the scenario is fixed.
fn steps(seed: u64, n: usize) -> Vec<Step> {
    let mut x = seed;
    let mut next = move || {
        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    (0..n)
        .map(|_| {
            let r = next();
            Step {
                flow: r as u8,
                // Mostly full-size data, so segments grow large.
                kind: if (r >> 8) % 3 == 0 {
                    (r >> 16) as u8
                } else {
                    0
                },
                a: (r >> 24) as u16,
                m: (r >> 40) as u8,
                // Flush points now and then, mostly nothing.
                t: if (r >> 48) % 64 == 0 {
                    (r >> 56) as u8 % 48
                } else {
                    0x31
                },
            }
        })
        .collect()
}

fn measure<C: Coalescer<Tagged>>(engine: &mut C, sc: &Scenario) -> (u64, Keep) {
    // Everything allocated before the measured region: frames, metadata, the sink's storage.
    let mut frames: Vec<Option<(Tagged, lro_core::RxMeta)>> = sc
        .built
        .frames
        .iter()
        .enumerate()
        .map(|(id, inp)| {
            Some((
                Tagged {
                    id,
                    buf: inp.bytes.clone(),
                },
                inp.meta,
            ))
        })
        .collect();
    let mut sink = Keep {
        frames: Vec::with_capacity(frames.len()),
        scratch: vec![0u8; 70_000],
        segments: 0,
        bytes: 0,
    };
    EVENTS.with(|e| e.set(0));
    MEASURING.with(|m| m.set(true));
    for op in &sc.built.steps {
        match *op {
            Op::Push(id) => {
                if let Some((frame, meta)) = frames[id].take() {
                    engine.push(frame, &meta, &mut sink);
                }
            }
            Op::FlushAll => engine.flush_all(&mut sink),
            Op::FlushIdle(now) => engine.flush_idle(now, &mut sink),
        }
    }
    MEASURING.with(|m| m.set(false));
    (EVENTS.with(Cell::get), sink)
}

#[test]
fn no_allocation_on_push_and_flush() {
    let seeds: Vec<FlowSeed> = (0..6u32)
        .map(|i| FlowSeed {
            shape: (i * 37) as u8,
            twin: if i == 3 { 0 } else { 1 },
            misc: i.wrapping_mul(0x2545_f491) | 4,
        })
        .collect();
    for gro in [false, true] {
        for small in [false, true] {
            let knobs = Knobs {
                gro,
                partial: small,
                verify: true,
                max_ip: 0,
                hash_mode: if small { 2 } else { 0 },
                timers: true,
                small,
                raw_twin: false,
                truncate: true,
                dup_mode: 0,
                verified: false,
            };
            let sc = Scenario::build(
                knobs,
                &seeds,
                &steps(u64::from(gro) * 2 + u64::from(small), 3000),
            );
            let (events, sink) = if small {
                let mut e: Box<Engine<Tagged, Sizes<4, 8>>> = Box::new(Engine::new(sc.config));
                let r = measure(&mut *e, &sc);
                assert!(e.stats().is_conserved());
                r
            } else {
                let mut e: Box<Engine<Tagged, Sizes<64, 64>>> = Box::new(Engine::new(sc.config));
                let r = measure(&mut *e, &sc);
                assert!(e.stats().is_conserved());
                r
            };
            assert_eq!(
                events, 0,
                "allocator called {events} times during push/flush (gro {gro}, small {small})"
            );
            // The run did real work: every frame came back, and segments were coalesced.
            assert_eq!(sink.frames.len(), sc.built.frames.len());
            assert!(sink.segments < sc.built.frames.len() as u64);
            assert!(sink.bytes > 0);
        }
    }
}

/// The counter itself works (so a zero above means something).
#[test]
fn the_counter_counts() {
    MEASURING.with(|m| m.set(true));
    EVENTS.with(|e| e.set(0));
    let v = std::hint::black_box(vec![1u8; 100]);
    drop(v);
    MEASURING.with(|m| m.set(false));
    assert_eq!(EVENTS.with(Cell::get), 2);
}
