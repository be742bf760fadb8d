//! When a speculative part of the engine pauses: after a burst in which it hardly paid off.
//!
//! A burst is the frames between two calls of [`Engine::flush_all`](super::Engine::flush_all)
//! or [`Engine::flush_idle`](super::Engine::flush_idle), a driver's polls. A [`Gate`] watches
//! each: when fewer than one in `POOR` of at least 16 frames paid off, the next bursts run
//! without the part, and it is tried again after them, 1 burst first, twice as many each time
//! the burst it is tried in is poor again (up to 16), back to 1 when one is not. Two gates:
//!
//! - **Header prediction** ([`Prediction`], one in eight frames predicted). Prediction pays
//!   for itself with the frames it takes (about 350 instructions per frame against the
//!   general path's 900 and more), and costs on every frame it misses: the failed read, and a
//!   template filled for each new segment's flow. Where flows outnumber the table and send one
//!   frame at a time (4096 flows, interleaved frame by frame), nearly every frame misses: 70 ns
//!   per frame with prediction against 55 without. What prediction takes it decides exactly as
//!   the general path does, so pausing it changes no verdict and no output byte, only the cost.
//! - **Coalescing itself** ([`Bypass`]: one in 32 of the frames that were held or merged
//!   must have merged; [`Config::adaptive_bypass`](super::Config::adaptive_bypass), off by
//!   default). Where no frame finds another of its flow, every frame is parsed, looked up,
//!   held and delivered on its own: all cost, no merge (the CPU cost of GRO on
//!   request-response traffic, for which users turn it off). Paused, frames pass through
//!   unparsed. This one changes output: merges it would have found in a paused burst are not
//!   made.

/// Frames (as the gate counts them) a burst needs before it is judged.
const MIN_FRAMES: u64 = 16;

/// The longest pause, in bursts.
const MAX_PAUSE: u16 = 16;

/// Header prediction's gate: a burst with fewer than one predicted frame in 8 is poor.
pub(crate) type Prediction = Gate<8>;

/// Coalescing's gate: a burst in which fewer than one in 32 of the frames held or merged
/// merged (appended to a segment or absorbed into one) is poor: none of up to 32 such frames,
/// at most one of 33 to 63.
pub(crate) type Bypass = Gate<32>;

/// The pause state, updated at the end of every burst: a burst with fewer than one frame in
/// `POOR` that paid off is poor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Gate<const POOR: u64> {
    /// Bursts still to run without the part.
    skip: u16,
    /// Length of the next pause.
    next: u16,
    /// The engine's counters of frames in and of frames that paid off at the last burst's end.
    mark: (u64, u64),
}

impl<const POOR: u64> Gate<POOR> {
    /// Open, nothing seen.
    pub(crate) const NEW: Self = Self {
        skip: 0,
        next: 1,
        mark: (0, 0),
    };

    /// Whether the current burst runs with the part.
    #[inline(always)]
    pub(crate) const fn open(&self) -> bool {
        self.skip == 0
    }

    /// The counters at the end of the last burst, or zero when they were reset since
    /// (`Engine::reset_stats`): the next burst is judged from zero.
    fn since(&self, frames_in: u64, paid: u64) -> (u64, u64) {
        if frames_in < self.mark.0 || paid < self.mark.1 {
            (0, 0)
        } else {
            self.mark
        }
    }

    /// Whether no frame arrived since the last burst's end (`frames_in`: the engine's
    /// counter): an empty poll, which is no burst.
    pub(crate) const fn idle(&self, frames_in: u64) -> bool {
        frames_in == self.mark.0
    }

    /// The end of a burst in which the part could not run at all (the frames bypassed the
    /// engine), or the start of watching (turned on by `Engine::set_config`): not judged, no
    /// pause counted down; the next burst is judged from here.
    pub(crate) fn pass(&mut self, frames_in: u64, paid: u64) {
        self.mark = (frames_in, paid);
    }

    /// The end of a burst, with the engine's counters of frames in and of frames that paid
    /// off (both running totals).
    pub(crate) fn burst_end(&mut self, frames_in: u64, paid: u64) {
        let (in0, p0) = self.since(frames_in, paid);
        let (frames, taken) = (frames_in - in0, paid - p0);
        self.mark = (frames_in, paid);
        if self.skip > 0 {
            self.skip -= 1;
        } else if frames >= MIN_FRAMES {
            if taken * POOR < frames {
                self.skip = self.next;
                self.next = (self.next * 2).min(MAX_PAUSE);
            } else {
                self.next = 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs bursts of `frames` frames with `taken` of them predicted when the gate is open
    /// (none when closed); returns whether each burst ran open.
    fn run(gate: &mut Prediction, bursts: &[(u64, u64)]) -> [bool; 64] {
        let (mut frames_in, mut predicted) = (0, 0);
        let mut open = [false; 64];
        for (i, &(frames, taken)) in bursts.iter().enumerate() {
            open[i] = gate.open();
            frames_in += frames;
            if gate.open() {
                predicted += taken;
            }
            gate.burst_end(frames_in, predicted);
        }
        open
    }

    #[test]
    fn good_bursts_keep_it_open() {
        let mut g = Prediction::NEW;
        let open = run(&mut g, &[(32, 4); 64]);
        assert!(open.iter().all(|&o| o), "4 of 32 is one in eight: not poor");
        assert_eq!(g.skip, 0);
    }

    #[test]
    fn poor_bursts_pause_it_longer_each_time_up_to_the_limit() {
        let mut g = Prediction::NEW;
        let open = run(&mut g, &[(32, 3); 64]);
        // Open, pause 1, open, pause 2, open, pause 4, open, pause 8, open, pause 16, ...
        let mut want = [false; 64];
        let mut at = 0;
        let mut pause = 1;
        while at < 64 {
            want[at] = true;
            at += 1 + pause;
            pause = (pause * 2).min(usize::from(MAX_PAUSE));
        }
        assert_eq!(open, want);
    }

    #[test]
    fn a_good_burst_after_a_pause_resets_the_pause() {
        let mut g = Prediction::NEW;
        let mut bursts = [(32, 0); 64];
        // Poor, paused 1, poor, paused 2 (bursts 3 and 4), then good from burst 5 on.
        for b in &mut bursts[5..] {
            *b = (32, 32);
        }
        let open = run(&mut g, &bursts);
        assert_eq!(open[..6], [true, false, true, false, false, true]);
        assert!(open[5..].iter().all(|&o| o));
        assert_eq!((g.skip, g.next), (0, 1));
    }

    #[test]
    fn small_bursts_and_reset_counters_are_not_judged() {
        let mut g = Prediction::NEW;
        let open = run(&mut g, &[(15, 0); 64]);
        assert!(open.iter().all(|&o| o), "15 frames are too few to judge");
        let mut g = Prediction::NEW;
        g.burst_end(16, 1);
        assert!(!g.open(), "16 frames are judged: 1 of 16 is poor");
        // Counters below the mark (reset): judged from zero, no underflow.
        let mut g = Prediction::NEW;
        g.burst_end(1000, 900);
        g.burst_end(20, 0);
        assert!(!g.open(), "20 frames, none predicted, since the reset");
        // A reset soon after the start: within one burst the frames counter passes its mark
        // again, the other does not. Judged from zero too.
        let mut g = Prediction::NEW;
        g.burst_end(20, 10);
        g.burst_end(40, 2);
        assert!(!g.open(), "2 of 40 since the reset: poor");
        // Only the frames counter below its mark (no frame had paid off before the reset).
        let mut g = Prediction::NEW;
        g.burst_end(1000, 0);
        g.burst_end(20, 0);
        assert!(g.open(), "the one-burst pause ran out");
        g.burst_end(40, 20);
        assert!(
            g.open(),
            "all 20 of the frames since the reset's burst predicted"
        );
    }

    #[test]
    fn an_empty_poll_is_not_judged() {
        let mut g = Prediction::NEW;
        g.burst_end(10, 0);
        g.burst_end(20, 0);
        assert!(g.open(), "two bursts of 10 frames: too few to judge either");
        g.burst_end(20, 0);
        assert!(g.open(), "no frame since the last burst: none to judge");
    }

    #[test]
    fn the_bypass_gate_pauses_only_where_nothing_merged() {
        // One merge in 32 frames is enough to keep coalescing on; none is not.
        let mut g = Bypass::NEW;
        g.burst_end(32, 1);
        assert!(g.open(), "1 of 32 merged");
        g.burst_end(64, 1);
        assert!(!g.open(), "none of 32 merged");
        // Up to 63 frames, one merge is poor.
        let mut g = Bypass::NEW;
        g.burst_end(63, 1);
        assert!(!g.open(), "1 of 63 merged");
    }

    #[test]
    fn a_burst_passed_through_is_not_judged_and_shortens_no_pause() {
        let mut g = Prediction::NEW;
        g.burst_end(32, 0);
        assert!(!g.open(), "paused for one burst");
        // Bypassed bursts: the mark moves, the pause stays.
        g.pass(64, 0);
        g.pass(96, 0);
        assert!(!g.open(), "a bypassed burst is not a burst it paused for");
        assert!(g.idle(96) && !g.idle(97));
        g.burst_end(128, 0);
        assert!(
            g.open(),
            "the pause ran out: frames 96 to 128 were its burst"
        );
        g.burst_end(160, 32);
        assert!(g.open(), "all 32 of the frames since 128 predicted");
    }
}
