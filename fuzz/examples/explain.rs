//! Prints what a `coalesce` / `rss_sorted` fuzz input turns into (frames, ground truth, steps)
//! and what the engine outputs, to read a crash: `cargo run --example explain -- FILE [sorted]`.

use arbitrary::{Arbitrary, Unstructured};
use lro_core::rss::RssSorted;
use lro_core::{Coalescer, Engine, Sizes, Verdict};
use lro_fuzz::frame::{Out, Recorder, Tagged};
use lro_fuzz::scenario::{self, Input, Step};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let data = std::fs::read(&args[1]).expect("read input");
    let sorted = args.get(2).is_some_and(|a| a == "sorted");
    let input = Input::arbitrary_take_rest(Unstructured::new(&data)).expect("input");
    let config = input.setup.config();
    if std::env::var_os("EXPLAIN_OPS").is_some() {
        for op in &input.ops {
            match op {
                scenario::Op::Raw(r) => println!(
                    "raw {} bytes raw_ip {} {:?}",
                    r.bytes.len(),
                    r.raw_ip,
                    r.csum
                ),
                other => println!("{other:?}"),
            }
        }
    }
    println!("config: {config:?} table {}", input.setup.table % 4);
    let built = scenario::build(&input, &config);
    for (i, f) in built.frames.iter().enumerate() {
        match &f.tcp {
            Some(t) => println!(
                "frame {i}: len {} {:?} rss {:?} trusted {} flow {:x?}:{}->{} seq {} ack {} win {} flags {:#x} payload {} pad {}",
                f.bytes.len(), f.meta.checksum, f.meta.rss.map(|r| r.value), f.trusted,
                &t.id.src[..4], t.id.sport, t.id.dport, t.seq, t.ack, t.window, t.flags,
                t.payload_len(), f.bytes.len() - t.ip_end
            ),
            None => println!("frame {i}: len {} not TCP ({:?})", f.bytes.len(), lro_fuzz::oracle::classify(&f.bytes, &f.meta)),
        }
    }
    if std::env::var_os("EXPLAIN_HEX").is_some() {
        for (i, f) in built.frames.iter().enumerate() {
            let hex: String = f.bytes.iter().map(|b| format!("{b:02x}")).collect();
            println!("hex {i} {:?} {hex}", f.meta);
        }
    }
    let mut rec = Recorder::default();
    let mut push = |n: usize, v: Verdict| println!("push {n}: {v:?}");
    if sorted {
        let inner: Engine<Tagged, Sizes<8, 64>> = Engine::new(config);
        let mut e: Box<RssSorted<_, Tagged, 256>> = Box::new(RssSorted::new(inner));
        drive(&mut *e, &built, &mut rec, &mut push);
    } else {
        let mut e: Box<Engine<Tagged, Sizes<8, 64>>> = Box::new(Engine::new(config));
        drive(&mut *e, &built, &mut rec, &mut push);
    }
    for o in &rec.out {
        match o {
            Out::Seg { ids, info, .. } => {
                println!("segment {ids:?} {:?} {:?}", info.cause, info.checksum)
            }
            Out::Rel(i) => println!("released {i}"),
        }
    }
}

fn drive<C: Coalescer<Tagged>>(
    e: &mut C,
    built: &scenario::Built,
    rec: &mut Recorder,
    push: &mut dyn FnMut(usize, Verdict),
) {
    for s in &built.steps {
        match s {
            Step::Push(n) => {
                let f = &built.frames[*n];
                let v = e.push(
                    Tagged {
                        id: *n,
                        buf: f.bytes.clone(),
                    },
                    &f.meta,
                    rec,
                );
                push(*n, v);
            }
            Step::FlushAll => {
                println!("flush_all");
                e.flush_all(rec)
            }
            Step::FlushIdle(t) => {
                println!("flush_idle({t})");
                e.flush_idle(*t, rec)
            }
        }
    }
    e.flush_all(rec);
}
