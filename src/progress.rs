//! A progress bar on standard error for long inputs: only when standard error is a terminal,
//! and never with `--json` (a program reading the output wants nothing but the output).

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Inputs with at least this many frames (offered to the engine, over all rounds) get a bar:
/// about a tenth of a second of replay on a fast machine, when a bar starts to be useful.
pub(crate) const LONG_INPUT_FRAMES: u64 = 200_000;

/// Whether a bar is drawn: a long input, asked for (not `--json`), onto a terminal.
fn shown(frames: u64, wanted: bool, terminal: bool) -> bool {
    wanted && terminal && frames >= LONG_INPUT_FRAMES
}

/// A bar counting `frames` on standard error; hidden (drawing nothing) unless the input is
/// long, `wanted` (not `--json`) and standard error is a terminal.
pub(crate) fn bar(frames: u64, wanted: bool) -> ProgressBar {
    if !shown(frames, wanted, std::io::stderr().is_terminal()) {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(frames), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template(
        "{spinner} {msg} [{bar:40}] {pos}/{len} frames ({per_sec}, {eta})",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message("coalescing");
    bar
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bar_only_for_long_inputs_on_a_terminal_without_json() {
        assert!(shown(LONG_INPUT_FRAMES, true, true));
        assert!(!shown(LONG_INPUT_FRAMES - 1, true, true), "short input");
        assert!(!shown(LONG_INPUT_FRAMES, true, false), "not a terminal");
        assert!(!shown(LONG_INPUT_FRAMES, false, true), "--json");
    }
}
