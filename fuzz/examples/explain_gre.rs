//! Prints what `gre` fuzz inputs turn into: with one file, its frames (ground truth read
//! through GRE) and the engine's output; with several (a corpus), only the totals: frames,
//! tunnelled frames, merged tunnelled frames, bad GRE checksums caught, never-merged GRE
//! frames. `cargo run --example explain_gre -- FILE...`
//! (the `gre` target's coverage, in numbers).

use arbitrary::{Arbitrary, Unstructured};
use lro_core::{Engine, Sizes};
use lro_fuzz::frame::{Out, Tagged};
use lro_fuzz::gre::{self, GreInput};

fn main() {
    let files: Vec<String> = std::env::args().skip(1).collect();
    let one = files.len() == 1;
    let mut totals = [0u64; 5];
    for path in &files {
        let data = std::fs::read(path).expect("read input");
        let Ok(input) = GreInput::arbitrary_take_rest(Unstructured::new(&data)) else {
            continue;
        };
        let config = input.input.setup.config();
        let built = gre::build(&input, &config);
        let mut e: Box<Engine<Tagged, Sizes<8, 64>, lro_gre::Gre>> = Box::new(Engine::new(config));
        let rec = lro_fuzz::check::run(&mut *e, &built, false).rec;
        let s = e.stats();
        totals[0] += s.frames_in;
        totals[1] += s.tunnel.frames_in;
        totals[2] += s.tunnel.frames_merged + s.tunnel.acks_merged;
        totals[3] += s.tunnel.passed[lro_core::PassReason::BadEncapChecksum.index()];
        totals[4] += s.tunnel.passed[lro_core::PassReason::Encap.index()];
        if one {
            println!("config: {config:?}");
            for (i, f) in built.frames.iter().enumerate() {
                match &f.tcp {
                    Some(t) => println!(
                        "frame {i}: len {} {:?} trusted {} tunnel {:x?} {}->{} seq {} payload {}",
                        f.bytes.len(),
                        f.meta.checksum,
                        f.trusted,
                        t.id.tunnel
                            .map(|x| (x.flags, x.protocol, x.key, x.outer_src[3])),
                        t.id.sport,
                        t.id.dport,
                        t.seq,
                        t.payload_len()
                    ),
                    None => println!("frame {i}: len {} not TCP", f.bytes.len()),
                }
            }
            for o in &rec.out {
                if let Out::Seg { ids, info, .. } = o {
                    println!("segment {ids:?} {:?}", info.cause);
                }
            }
        }
    }
    println!(
        "{} inputs: {} frames, {} through GRE, {} of those merged, {} bad GRE checksums caught, {} never-merged GRE headers",
        files.len(),
        totals[0],
        totals[1],
        totals[2],
        totals[3],
        totals[4]
    );
}
