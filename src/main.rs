//! `lro`: the command-line tool of the lro TCP receive-coalescing engine.
//!
//! - `lro replay [INPUT] [-o OUTPUT]`: coalesce a capture as a receive path would, write what
//!   comes out, and summarise (frames in and out, aggregation ratio, why segments ended).
//! - `lro explain [INPUT]`: the same, per flow, worst aggregation first.
//! - `lro bench [INPUT]`: nanoseconds per input frame of parse + coalesce + header fix-up + emit.
//!
//! Without INPUT the built-in capture (`data/default.pcap.xz`, made by
//! `scripts/make-capture.sh` from real Linux TCP traffic) is used. Bad input (a missing,
//! truncated, garbage or unsupported file) gives one message naming the file and exit status 2.

mod alloc_count;
mod bench;
mod capture;
mod engine;
mod explain;
mod progress;
mod replay;
mod report;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[global_allocator]
static ALLOCATOR: alloc_count::Counting = alloc_count::Counting;

/// A usage problem clap cannot detect (exit status 2).
#[derive(Debug)]
pub(crate) struct UsageError(pub(crate) String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// TCP receive coalescing (LRO/GRO) on packet captures.
#[derive(Debug, Parser)]
#[command(name = "lro", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Coalescer a capture in bursts, write the emitted frames (-o), print a summary.
    Replay(replay::ReplayArgs),
    /// Per-flow aggregation and why segments ended, worst flows first.
    Explain(explain::ExplainArgs),
    /// Measure nanoseconds per input frame (parse + coalesce + header fix-up + emit).
    Bench(bench::BenchArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Replay(a) => replay::command(a),
        Command::Explain(a) => explain::command(a),
        Command::Bench(a) => bench::command(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lro: error: {e:#}");
            // Bad input and bad usage: 2, like clap's own usage errors. Anything else (the
            // output file cannot be written, an internal inconsistency): 1.
            if e.chain()
                .any(|c| c.is::<capture::InputError>() || c.is::<UsageError>())
            {
                ExitCode::from(2)
            } else {
                ExitCode::from(1)
            }
        }
    }
}
