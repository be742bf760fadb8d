//! A progress bar on stderr for long inputs, only when stderr is a terminal.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Inputs with at least this many frames get a progress bar.
const LONG_INPUT_FRAMES: u64 = 200_000;

/// A bar counting `frames`, hidden unless the input is long and stderr is a terminal.
pub(crate) fn bar(frames: u64) -> ProgressBar {
    if frames < LONG_INPUT_FRAMES || !std::io::stderr().is_terminal() {
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
