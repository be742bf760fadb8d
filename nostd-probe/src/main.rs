//! Link probe: proves lro-core links with no `std` and no allocator.
//!
//! Built and run by `scripts/nostd-probe.sh` (`cargo build --release --manifest-path
//! nostd-probe/Cargo.toml`): a `#![no_std]` binary with no `#[global_allocator]`, so any use
//! of `alloc` in lro-core (or a dependency) fails the link with "no global memory allocator
//! found". It also runs: it coalesces two segments and exits 0
//! only when the engine merged them, when drivers-myri's ring (descriptors and page-frag
//! buffers on the stack, filled by its simulated MAC) fed the engine and got every buffer back,
//! when lro-gre's engine merged two GRE-tunnelled segments, and when drivers-ipoib's receive
//! queue (copybreak, buffers on the stack, filled by its simulated HCA) fed the engine IPoIB
//! frames and got every buffer back, and its receiver model ran.
#![no_std]
#![no_main]

use drivers_myri::sim::SimMac;
use drivers_myri::{BufferLayout, RxFrame, RxRing, RxRingStorage};
use lro_core::{Config, Engine, RxChecksum, RxMeta, Segment, Sink, Sizes};

#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    // Not `loop {}`: a panic must end the probe (SIGABRT, a non-zero status for the script),
    // not hang it.
    // SAFETY: abort(3) takes no arguments, may be called in any state and never returns.
    unsafe { abort() }
}

/// The host's libcore is built with unwind tables and references this symbol.
// SAFETY (of the unmangled symbol): nothing else in the link defines it, and the probe is built
// with `panic = "abort"`: nothing unwinds, so the personality routine is never called and its
// signature, not the real one, is never relied on.
#[no_mangle]
pub extern "C" fn rust_eh_personality() {}

// crt1 -> __libc_start_main -> main
#[link(name = "c")]
extern "C" {
    fn abort() -> !;
}

struct Count {
    segments: usize,
    bytes: usize,
}

impl<F: AsRef<[u8]>> Sink<F> for Count {
    fn segment(&mut self, segment: Segment<'_, F>) {
        self.segments += 1;
        self.bytes += segment.len();
    }
}

/// A minimal Ethernet + IPv4 + TCP frame with `len` payload bytes at sequence `seq`.
fn frame(buf: &mut [u8; 128], seq: u32, id: u16, len: usize) -> &mut [u8] {
    let ip_len = 20 + 20 + len;
    buf[12] = 0x08;
    buf[14] = 0x45;
    buf[16..18].copy_from_slice(&(ip_len as u16).to_be_bytes());
    buf[18..20].copy_from_slice(&id.to_be_bytes());
    buf[20] = 0x40; // DF
    buf[22] = 64;
    buf[23] = 6;
    buf[26..30].copy_from_slice(&[198, 18, 0, 1]);
    buf[30..34].copy_from_slice(&[198, 18, 0, 2]);
    buf[34..36].copy_from_slice(&40000u16.to_be_bytes());
    buf[36..38].copy_from_slice(&5201u16.to_be_bytes());
    buf[38..42].copy_from_slice(&seq.to_be_bytes());
    buf[46] = 0x50;
    buf[47] = 0x10; // ACK
    buf[48..50].copy_from_slice(&512u16.to_be_bytes());
    let ip_csum = !lro_core::csum::sum(&buf[14..34]);
    buf[24..26].copy_from_slice(&ip_csum.to_be_bytes());
    let end = 14 + ip_len;
    for b in &mut buf[54..end] {
        *b = 0xab;
    }
    &mut buf[..end]
}

// SAFETY (of the unmangled symbol): the C runtime's entry calls `main(argc, argv)` with this
// signature, and nothing else in the link defines it.
#[no_mangle]
pub extern "C" fn main(_argc: i32, _argv: *const *const u8) -> i32 {
    let mut a = [0u8; 128];
    let mut b = [0u8; 128];
    let mut engine: Engine<&mut [u8], Sizes<8, 8>> = Engine::new(Config::lro());
    let mut sink = Count {
        segments: 0,
        bytes: 0,
    };
    // Hardware-verified frames: the probe does not need valid TCP checksums.
    let meta = RxMeta::ethernet(0).with_checksum(RxChecksum::Verified);
    engine.push(frame(&mut a, 1, 1, 40), &meta, &mut sink);
    engine.push(frame(&mut b, 41, 2, 40), &meta, &mut sink);
    engine.flush_all(&mut sink);
    let merged = sink.segments == 1 && sink.bytes == 14 + 20 + 20 + 80;
    if !(merged && engine.stats().is_conserved()) {
        return 1;
    }
    if !ring_probe() {
        return 2;
    }
    if !gre_probe() {
        return 3;
    }
    if ipoib_probe() {
        0
    } else {
        4
    }
}

/// lro-gre: two GRE frames (checksum and key) of one tunnelled flow merge, the segment's GRE
/// checksum computed afresh, with no allocator.
fn gre_probe() -> bool {
    let mut bufs = [[0u8; 160]; 2];
    let mut lens = [0usize; 2];
    for (i, (buf, len)) in bufs.iter_mut().zip(&mut lens).enumerate() {
        let mut inner = [0u8; 128];
        let f = with_tcp_checksum(frame(&mut inner, 1 + 40 * i as u32, 1 + i as u16, 40));
        let spec = lro_gre::testing::GreSpec::ipv4().checksum().key(7);
        match spec.write(lro_gre::testing::InnerFrame::Ethernet(f), buf) {
            Ok(n) => *len = n,
            Err(_) => return false,
        }
    }
    let [a, b] = &mut bufs;
    let mut engine: lro_gre::GreEngine<&mut [u8], Sizes<4, 4>> =
        lro_gre::GreEngine::new(Config::gro());
    let mut sink = Count {
        segments: 0,
        bytes: 0,
    };
    let meta = RxMeta::ethernet(0);
    engine.push(&mut a[..lens[0]], &meta, &mut sink);
    engine.push(&mut b[..lens[1]], &meta, &mut sink);
    engine.flush_all(&mut sink);
    sink.segments == 1
        && sink.bytes == 14 + 20 + 12 + 20 + 20 + 80
        && engine.stats().tunnel.frames_merged == 1
}

/// Fills in the TCP checksum of a frame built by [`frame`].
fn with_tcp_checksum(f: &mut [u8]) -> &[u8] {
    use lro_core::csum;
    let tcp_len = f.len() - 34;
    let pseudo = csum::PseudoHeader::new(&[198, 18, 0, 1], &[198, 18, 0, 2], 6).sum(tcp_len as u32);
    f[50..52].copy_from_slice(&[0, 0]);
    let c = !csum::add(pseudo, csum::sum(&f[34..]));
    f[50..52].copy_from_slice(&c.to_be_bytes());
    f
}

/// drivers-myri: the simulated MAC writes two segments into the DMA ring, the frames go into
/// the coalescer straight from their ring buffers and come back to the ring once consumed.
fn ring_probe() -> bool {
    let mut storage: RxRingStorage<4, 2> = RxRingStorage::new();
    let mut memory = [0u8; 2 * 1024];
    let Ok(ring) = RxRing::new(
        &mut storage,
        &mut memory,
        BufferLayout::page_frags(1024, 256),
    ) else {
        return false;
    };
    let mut mac = SimMac::new(&ring);
    let mut a = [0u8; 128];
    let mut b = [0u8; 128];
    let fa = with_tcp_checksum(frame(&mut a, 1, 1, 40));
    let fb = with_tcp_checksum(frame(&mut b, 41, 2, 40));
    if mac.deliver(fa).is_err() || mac.deliver(fb).is_err() {
        return false;
    }
    let mut engine: Engine<RxFrame<'_>, Sizes<4, 4>> = Engine::new(Config::lro());
    let mut sink = Count {
        segments: 0,
        bytes: 0,
    };
    while let Some(f) = ring.receive() {
        // The simulated MAC reports CHECKSUM_COMPLETE; the engine checks the TCP checksum with it.
        let meta = f.meta(0);
        engine.push(f, &meta, &mut sink);
    }
    engine.flush_all(&mut sink);
    sink.segments == 1
        && sink.bytes == 14 + 20 + 20 + 80
        && ring.outstanding() == 0
        && ring.armed() == 4
        && ring.stats().frames == 2
}

/// drivers-ipoib: the simulated HCA receives two IPoIB segments and a small packet into the
/// queue (connected mode); the small one is copied (copybreak), the others go up in their
/// buffers into the coalescer; everything comes back. Then the receiver model runs briefly.
fn ipoib_probe() -> bool {
    use drivers_ipoib::hca::SimHca;
    use drivers_ipoib::sim::{self, Costs, SimConfig};
    use drivers_ipoib::{Mode, QueueConfig, RxQueue, RxQueueStorage};

    let Ok(mode) = Mode::connected(256) else {
        return false;
    };
    let storage: RxQueueStorage<'_, 4, 2> = RxQueueStorage::new();
    let mut large = [0u8; 4 * 260];
    let mut small = [0u8; 2 * 64];
    let config = QueueConfig::new(mode, 3).with_copybreak(Some(64));
    let Ok(queue) = RxQueue::new(&storage, &mut large, &mut small, config) else {
        return false;
    };
    let mut hca = SimHca::new(&queue);
    let mut a = [0u8; 128];
    let mut b = [0u8; 128];
    // The Ethernet frames of `frame`, from the IP header on, sent over IPoIB.
    let fa = with_tcp_checksum(frame(&mut a, 1, 1, 40));
    let fb = with_tcp_checksum(frame(&mut b, 41, 2, 40));
    let tiny = [
        0x45u8, 0, 0, 20, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
    ];
    if hca.deliver_ip(&fa[14..]).is_err()
        || hca.deliver_ip(&fb[14..]).is_err()
        || hca.deliver_ip(&tiny).is_err()
    {
        return false;
    }
    let mut engine: Engine<drivers_ipoib::RxBuf<'_, '_>, Sizes<4, 4>> = Engine::new(Config::lro());
    let mut sink = Count {
        segments: 0,
        bytes: 0,
    };
    let meta = RxMeta::ipoib(0);
    let done = drivers_ipoib::poll(&queue, &mut engine, &mut sink, &meta, 64);
    let acc = queue.accounting();
    let stats = queue.stats();
    let queue_ok = done.frames == 3
        && sink.segments == 2
        && sink.bytes == (4 + 20 + 20 + 80) + (4 + 20)
        && stats.copied == 1
        && stats.handed_up == 2
        && acc.is_consistent()
        && acc.large_up == 0
        && acc.small_up == 0
        && queue.posted() == 3;
    let mut c = SimConfig::seed_udp(Costs::SEED_ERA);
    c.duration_ns = 1_000_000;
    let model_ok = matches!(sim::run(&c), Ok(r) if r.delivered > 0);
    queue_ok && model_ok
}
