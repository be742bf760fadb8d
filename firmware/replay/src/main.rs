//! Replay firmware: pushes real frames (a slice of the built-in capture, embedded by the build
//! step) through lro-core on a bare-metal Cortex-M and prints the engine's counters over
//! semihosting, for `scripts/firmware-qemu.sh` to compare with `lro replay` of the same frames
//! on the host.
//!
//! The frames are copied from flash into a pool of RAM buffers (the engine rewrites headers in
//! place, as a driver's receive buffers would be), offered in bursts, and the end of each burst
//! flushes everything held, as `lro replay` does. Every buffer comes back to the pool through
//! the sink, so a pool of one burst's frames is enough.
#![no_std]
#![no_main]

mod board;
mod sys;

use core::fmt::Write as _;

use cortex_m_rt::entry;
use heapless::{String, Vec};
use lro_core::{Engine, RxMeta, Segment, Sink, Sizes, Stats};

use board::{Board, BOARD};

/// Bytes of one frame buffer (a frame of the capture fits, checked by the build step).
const BUF: usize = (parse_usize(env!("FW_MAX_FRAME")) + 3) & !3;

/// The capture slice: `len: u16, time_ns: u64, bytes` per frame.
static FRAMES: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/frames.bin"));

/// A received frame in one of the pool's buffers.
struct Frame {
    buf: &'static mut [u8; BUF],
    len: u16,
}

impl AsRef<[u8]> for Frame {
    fn as_ref(&self) -> &[u8] {
        &self.buf[..usize::from(self.len)]
    }
}

impl AsMut<[u8]> for Frame {
    fn as_mut(&mut self) -> &mut [u8] {
        &mut self.buf[..usize::from(self.len)]
    }
}

/// The free buffers.
type Pool = Vec<&'static mut [u8; BUF], { board::BURST }>;

/// The stack above the engine: counts what it receives and gives every buffer back.
struct Stack<'p> {
    pool: &'p mut Pool,
    segments: u64,
    bytes: u64,
}

impl Sink<Frame> for Stack<'_> {
    fn segment(&mut self, segment: Segment<'_, Frame>) {
        self.segments += 1;
        self.bytes += segment.len() as u64;
        for frame in segment.into_frames() {
            // The pool holds every buffer, so giving one back never overflows it.
            let _ = self.pool.push(frame.buf);
        }
    }

    fn release(&mut self, frame: Frame) {
        let _ = self.pool.push(frame.buf);
    }
}

/// The engine of this board (sizes in `board.rs`).
type BoardEngine =
    Engine<Frame, Sizes<{ board::FLOWS }, { board::FRAMES_PER_SEGMENT }, { board::ACK_MEMORY }>>;

#[entry]
fn main() -> ! {
    // `static mut` in the entry function: cortex-m-rt turns each into a unique `&'static mut`.
    // The engine's empty state is not all zeros (free lists, "no entry" links), so it lives in
    // .data and its initial image in flash: built at run time instead, it would be built on
    // the stack first (measured: 180 KB of stack for the 100 KB default engine).
    static mut ENGINE: BoardEngine = BoardEngine::new(board::CONFIG);
    static mut BUFFERS: [[u8; BUF]; board::BURST] = [[0; BUF]; board::BURST];

    let engine: &'static mut BoardEngine = ENGINE;
    let mut pool = Pool::new();
    for b in BUFFERS.iter_mut() {
        let _ = pool.push(b);
    }
    let mut stack = Stack {
        pool: &mut pool,
        segments: 0,
        bytes: 0,
    };

    let mut frames = 0u64;
    let mut at = 0;
    while at < FRAMES.len() {
        for _ in 0..board::BURST {
            let Some((len, time, bytes)) = next_frame(FRAMES, &mut at) else {
                break;
            };
            let Some(buf) = stack.pool.pop() else {
                fail("frame pool empty inside a burst");
            };
            buf[..bytes.len()].copy_from_slice(bytes);
            let meta = if BOARD.trust_checksums {
                RxMeta::ethernet(time).with_checksum(lro_core::RxChecksum::Verified)
            } else {
                RxMeta::ethernet(time)
            };
            engine.push(Frame { buf, len }, &meta, &mut stack);
            frames += 1;
        }
        engine.flush_all(&mut stack);
    }
    engine.flush_all(&mut stack);

    let stats = engine.stats();
    if !stats.is_conserved() || stats.segments != stack.segments || stack.pool.len() != board::BURST
    {
        fail("frames lost: the counters do not add up or a buffer did not come back");
    }
    let Some(used_stack) = sys::stack_high_water() else {
        fail("the stack reached the end of .bss: it may have overwritten the frame buffers");
    };
    report(&BOARD, frames, stats, &stack, used_stack);
    semihosting::process::exit(0)
}

/// The next frame of the blob, advancing `at`; `None` at the end (or on a truncated record,
/// which the build step never writes).
fn next_frame(blob: &'static [u8], at: &mut usize) -> Option<(u16, u64, &'static [u8])> {
    let len = u16::from_le_bytes(blob.get(*at..*at + 2)?.try_into().ok()?);
    let time = u64::from_le_bytes(blob.get(*at + 2..*at + 10)?.try_into().ok()?);
    let bytes = blob.get(*at + 10..*at + 10 + usize::from(len))?;
    *at += 10 + usize::from(len);
    Some((len, time, bytes))
}

/// Prints the run as `key=value` lines the script parses.
fn report(board: &Board, frames: u64, s: &Stats, stack: &Stack<'_>, used_stack: usize) {
    let mut line: String<1024> = String::new();
    let _ = write!(
        line,
        "fw: board={} core={} frames={frames} burst={} flows={} frames_per_segment={} ack_memory={} policy={} csum={}",
        board.machine,
        board.core,
        board::BURST,
        board::FLOWS,
        board::FRAMES_PER_SEGMENT,
        board::ACK_MEMORY,
        match board::CONFIG.policy {
            lro_core::Policy::Gro => "gro",
            _ => "lro",
        },
        if board.trust_checksums { "trust" } else { "verify" },
    );
    semihosting::println!("{line}");

    // Every counter of the engine (`Stats::counters`, by the names `lro replay --json` gives
    // them under `counters`), on as many lines as they take.
    line.clear();
    for c in s.counters() {
        if line.len() > 900 {
            semihosting::println!("{line}");
            line.clear();
        }
        if line.is_empty() {
            let _ = write!(line, "fw: stats");
        }
        let _ = write!(line, " {c}");
    }
    semihosting::println!("{line}");

    line.clear();
    let _ = write!(
        line,
        "fw: memory engine={} buffers={} stack={} bytes_out={}",
        core::mem::size_of::<BoardEngine>(),
        BUF * board::BURST,
        used_stack,
        stack.bytes,
    );
    semihosting::println!("{line}");

    line.clear();
    let s = sizing();
    let _ = write!(
        line,
        "fw: sizing frame_handle={} per_flow={} per_frame_slot={} per_ack_record={} fixed={}",
        core::mem::size_of::<Frame>(),
        s.per_flow,
        s.per_slot,
        s.per_ack,
        s.fixed,
    );
    semihosting::println!("{line}");
}

/// What each const generic of the engine costs on this target, from the sizes of engines that
/// differ in one parameter: `size = fixed + N * (per_flow + S * per_slot) + M * per_ack`.
struct Sizing {
    per_flow: usize,
    per_slot: usize,
    per_ack: usize,
    fixed: usize,
}

fn sizing() -> Sizing {
    use core::mem::size_of;
    let base = size_of::<Engine<Frame, Sizes<8, 8, 16>>>();
    let flows = size_of::<Engine<Frame, Sizes<16, 8, 16>>>() - base; // 8 more flows of 8 slots
    let slots = size_of::<Engine<Frame, Sizes<8, 16, 16>>>() - base; // 8 more slots in 8 flows
    let acks = size_of::<Engine<Frame, Sizes<8, 8, 32>>>() - base; // 16 more ACK records
    let per_slot = slots / 64;
    let per_flow = (flows - 8 * 8 * per_slot) / 8;
    let per_ack = acks / 16;
    Sizing {
        per_flow,
        per_slot,
        per_ack,
        fixed: base - 8 * (per_flow + 8 * per_slot) - 16 * per_ack,
    }
}

/// Reports a broken run and exits non-zero.
fn fail(msg: &str) -> ! {
    semihosting::eprintln!("fw: FAILED: {msg}");
    semihosting::process::exit(1)
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    semihosting::eprintln!("fw: PANIC: {info}");
    semihosting::process::exit(101)
}

/// `usize::from_str` in a const context, for the build step's numbers.
const fn parse_usize(s: &str) -> usize {
    let b = s.as_bytes();
    let mut n = 0;
    let mut i = 0;
    while i < b.len() {
        n = n * 10 + (b[i] - b'0') as usize;
        i += 1;
    }
    n
}
