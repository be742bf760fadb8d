//! The seed's experiment, reproduced: a connected-mode IPoIB receiver with and without
//! copybreak, for 128-byte UDP messages and for bulk TCP through the coalescer. Prints a table
//! (messages delivered per second, RNR NAKs, connection resets, messages lost) and writes an
//! SVG plot of the same against the sender's rate.
//!
//! ```sh
//! cargo bench -p drivers-ipoib --bench rx_path          # measure this crate's per-frame costs
//! cargo run --release -p drivers-ipoib --features std --example copybreak_sim -- \
//!     --costs target/criterion [--write-costs FILE] [--svg FILE]
//! ```
//!
//! Without `--costs` the costs recorded in `crates/drivers-ipoib/data/measured-costs.txt`
//! are used. `--costs` takes criterion's output directory or such a file; `--copy-ns`,
//! `--handup-ns`, `--coalesce-ns` override single values. The model and its parameters:
//! `drivers_ipoib::sim`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use drivers_ipoib::report;
use drivers_ipoib::sim::{Costs, SimConfig};

const RECORDED: &str = include_str!("../data/measured-costs.txt");

struct Args {
    costs: Option<PathBuf>,
    write_costs: Option<PathBuf>,
    svg: PathBuf,
    overrides: [Option<f64>; 3],
    duration_ms: u64,
    sweep_ms: u64,
}

fn usage() -> &'static str {
    "usage: copybreak_sim [--costs DIR|FILE] [--write-costs FILE] [--copy-ns N] [--handup-ns N] \
     [--coalesce-ns N] [--svg FILE] [--duration-ms N] [--sweep-ms N]"
}

fn parse_args() -> Result<Args, String> {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
            crate_dir
                .ancestors()
                .nth(2)
                .unwrap_or(crate_dir)
                .join("target")
        });
    let mut a = Args {
        costs: None,
        write_costs: None,
        svg: target.join("copybreak_sim.svg"),
        overrides: [None; 3],
        duration_ms: 1000,
        sweep_ms: 100,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "-h" || flag == "--help" {
            return Err(usage().to_string());
        }
        let value = it
            .next()
            .ok_or_else(|| format!("{flag} needs a value\n{}", usage()))?;
        let num = |v: &str| {
            v.parse::<f64>()
                .ok()
                .filter(|x| x.is_finite() && *x >= 0.0)
                .ok_or_else(|| format!("{flag} {v}: a non-negative number expected"))
        };
        // Kept in nanoseconds below: a value whose nanoseconds do not fit a u64 is refused
        // here (the model refuses what its picosecond clock cannot hold).
        let ms = |v: &str| {
            v.parse::<u64>()
                .ok()
                .filter(|&x| x > 0 && x.checked_mul(1_000_000).is_some())
                .ok_or_else(|| {
                    format!(
                        "{flag} {v}: a positive number of milliseconds (at most 2^64 ns) expected"
                    )
                })
        };
        match flag.as_str() {
            "--costs" => a.costs = Some(value.into()),
            "--write-costs" => a.write_costs = Some(value.into()),
            "--svg" => a.svg = value.into(),
            "--copy-ns" => a.overrides[0] = Some(num(&value)?),
            "--handup-ns" => a.overrides[1] = Some(num(&value)?),
            "--coalesce-ns" => a.overrides[2] = Some(num(&value)?),
            "--duration-ms" => a.duration_ms = ms(&value)?,
            "--sweep-ms" => a.sweep_ms = ms(&value)?,
            _ => return Err(format!("unknown option {flag}\n{}", usage())),
        }
    }
    Ok(a)
}

fn costs(a: &Args) -> Result<(Costs, String), String> {
    let (mut c, mut source) = match &a.costs {
        None => (
            report::parse_costs(RECORDED)?,
            "recorded in crates/drivers-ipoib/data/measured-costs.txt".to_string(),
        ),
        Some(p) if p.is_dir() => (
            report::read_criterion(p)?,
            format!("criterion medians under {}", p.display()),
        ),
        Some(p) => {
            let text = std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
            (
                report::parse_costs(&text).map_err(|e| format!("{}: {e}", p.display()))?,
                format!("read from {}", p.display()),
            )
        }
    };
    let fields = [&mut c.copy_ps, &mut c.handup_ps, &mut c.coalesce_ps];
    for (field, v) in fields.into_iter().zip(a.overrides) {
        if let Some(ns) = v {
            *field = (ns * 1000.0).round() as u64;
            source.push_str(" (with overrides)");
        }
    }
    Ok((c, source))
}

fn run() -> Result<(), String> {
    let a = parse_args()?;
    let (measured, source) = costs(&a)?;
    if let Some(p) = &a.write_costs {
        let note = format!(
            "Per-frame costs of drivers-ipoib's receive path, nanoseconds: {source}\n\
             cargo bench -p drivers-ipoib --bench rx_path; then copybreak_sim --costs target/criterion --write-costs FILE"
        );
        std::fs::write(p, report::format_costs(&measured, &note))
            .map_err(|e| format!("{}: {e}", p.display()))?;
        println!("wrote {}", p.display());
    }
    let ns = |p: u64| p as f64 / 1000.0;
    println!(
        "per-frame driver costs, measured ({source}): copybreak copy + repost {:.1} ns, hand-up + replacement {:.1} ns, coalescer {:.1} ns per TCP frame",
        ns(measured.copy_ps),
        ns(measured.handup_ps),
        ns(measured.coalesce_ps)
    );
    let seed = Costs::SEED_ERA;
    println!(
        "per-frame driver costs, seed-era (derived from the seed's 116 and 315 Mb/s): copy {:.0} ns, hand-up {:.0} ns",
        ns(seed.copy_ps),
        ns(seed.handup_ps)
    );
    let u = SimConfig::seed_udp(measured);
    println!(
        "model: connected mode, RQ {} deep, {} large and {} small buffers, copybreak <= 256 B, RNR retries {} \
         (reset on the first RNR NAK, as Linux), reconnect {} us, {} Gb/s, sender {} msg/s connected / {} msg/s \
         while down, application {} us per message, socket {} messages; TCP: 1992-byte segments, window 512, \
         application 2 us + 0.1 us/KiB per delivered unit; {} ms simulated per row",
        u.rq_depth,
        u.large_pool,
        u.small_pool,
        u.rnr_retry,
        u.reconnect_ns / 1000,
        u.link_gbps,
        u.offered_rate,
        u.down_rate,
        u.app_ns / 1000,
        u.socket_queue,
        a.duration_ms
    );
    println!();
    let rows = report::rows(measured, a.duration_ms * 1_000_000).map_err(|e| e.to_string())?;
    print!("{}", report::table(&rows));
    let panels = report::panels(measured, a.sweep_ms * 1_000_000).map_err(|e| e.to_string())?;
    report::write_svg(
        &a.svg,
        "IPoIB connected mode: copybreak and RNR NAKs (drivers-ipoib simulation)",
        &panels,
    )?;
    println!();
    println!("plot: {}", a.svg.display());
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("copybreak_sim: {e}");
            ExitCode::from(2)
        }
    }
}
