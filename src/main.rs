//! `lro`: the command-line tool of the lro TCP receive-coalescing engine.
//!
//! - `lro replay [INPUT] [-o OUTPUT]`: coalesce a capture as a receive path would, write what
//!   comes out, and summarise (frames in and out, aggregation ratio, why segments ended).
//! - `lro explain [INPUT]`: the same, per flow, worst aggregation first.
//! - `lro bench [INPUT]`: nanoseconds per input frame of parse + coalesce + header fix-up + emit.
//!
//! Without INPUT the built-in capture (`data/default.pcap.xz`, made by
//! `scripts/make-capture.sh` from real Linux TCP traffic) is used; `-` reads standard input.
//! Every failure is one line on standard error (a command line the parser refuses also gets
//! its usage hint) and an exit status of its kind ([`EXIT_STATUS`]).

mod alloc_count;
mod bench;
mod capture;
mod engine;
mod explain;
mod floor;
mod output;
mod plot;
mod progress;
mod replay;
mod report;
mod tunnel;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[global_allocator]
static ALLOCATOR: alloc_count::Counting = alloc_count::Counting;

/// The exit statuses, as `--help` prints them.
pub(crate) const EXIT_STATUS: &str = "\
Exit status:
  0  success
  1  internal error (a bug: please report it)
  2  usage error: an unknown option, a bad value, options that do not go together
  3  the input cannot be read or is not a capture this tool reads
  4  an output cannot be written (or is refused: the input file, a terminal)";

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
#[command(name = "lro", version, about, long_about = None, after_help = EXIT_STATUS)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Coalesce a capture in bursts, write the delivered frames (-o), print a summary.
    #[command(after_help = EXIT_STATUS)]
    Replay(replay::ReplayArgs),
    /// Per-flow aggregation and why segments ended, worst flows first; --plot draws it.
    #[command(after_help = EXIT_STATUS)]
    Explain(explain::ExplainArgs),
    /// Measure nanoseconds per input frame of the engine alone (parse + coalesce + header
    /// fix-up + emit).
    #[command(after_help = EXIT_STATUS)]
    Bench(bench::BenchArgs),
}

/// Stack of the thread that runs a command: engines are values of up to several megabytes
/// (1024 flows of 64 frames), which an unoptimised build moves through the stack when it boxes
/// them. Only the pages touched are ever committed.
const STACK: usize = 256 << 20;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let run = move || match &cli.command {
        Command::Replay(a) => replay::command(a),
        Command::Explain(a) => explain::command(a),
        Command::Bench(a) => bench::command(a),
    };
    let result = match std::thread::Builder::new().stack_size(STACK).spawn(run) {
        Ok(worker) => worker
            .join()
            .unwrap_or_else(|_| Err(anyhow::anyhow!("internal error: the command panicked"))),
        Err(e) => Err(anyhow::anyhow!("cannot start the command's thread: {e}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lro: error: {e:#}");
            ExitCode::from(exit_status(&e))
        }
    }
}

/// The exit status of an error, by its kind ([`EXIT_STATUS`]).
fn exit_status(e: &anyhow::Error) -> u8 {
    if e.chain().any(|c| c.is::<UsageError>()) {
        2
    } else if e.chain().any(|c| c.is::<capture::InputError>()) {
        3
    } else if e.chain().any(|c| c.is::<output::OutputError>()) {
        4
    } else {
        1
    }
}

/// Prints a report on standard output; a failure to write it is an output error.
pub(crate) fn print_out(text: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .map_err(|e| output::OutputError(format!("stdout: cannot write: {e}")).into())
}

/// Prints a report on standard error (when standard output carries a pcap).
pub(crate) fn print_err(text: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    std::io::stderr()
        .lock()
        .write_all(text.as_bytes())
        .map_err(|e| output::OutputError(format!("stderr: cannot write: {e}")).into())
}
