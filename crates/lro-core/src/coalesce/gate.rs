//! When header prediction pauses: after a burst in which it took almost no frame.
//!
//! Prediction pays for itself with the frames it takes (about 350 instructions per frame
//! against the general path's 900 and more), and costs on every frame it misses: the failed
//! read, and a template filled for each new segment's flow. Where flows outnumber the table and
//! send one frame at a time (4096 flows, interleaved frame by frame), nearly every frame misses:
//! 70 ns per frame with prediction against 55 without. So the engine watches each burst (the
//! frames between two calls of [`Engine::flush_all`](super::Engine::flush_all) or
//! [`Engine::flush_idle`](super::Engine::flush_idle), a driver's polls): when fewer than one
//! in eight of at least 16 frames were predicted, it runs the next bursts without prediction,
//! and tries it again after them, 1 burst first, twice as many each time the burst it tries is
//! poor again (up to 16), back to 1 when a burst it tries is not. What prediction takes it
//! decides exactly as the general path does, so pausing changes no verdict and no output byte,
//! only the cost.

/// Frames a burst needs before its share of predicted frames is judged.
const MIN_FRAMES: u64 = 16;

/// A burst with fewer than one predicted frame in this many is poor.
const POOR: u64 = 8;

/// The longest pause, in bursts.
const MAX_PAUSE: u16 = 16;

/// The pause state, updated at the end of every burst.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Gate {
    /// Bursts still to run without prediction.
    skip: u16,
    /// Length of the next pause.
    next: u16,
    /// The engine's `frames_in` and `predicted` counters at the last burst's end.
    mark: (u64, u64),
}

impl Gate {
    /// Prediction on, nothing seen.
    pub(crate) const NEW: Gate = Gate {
        skip: 0,
        next: 1,
        mark: (0, 0),
    };

    /// Whether the current burst runs with prediction.
    #[inline(always)]
    pub(crate) const fn open(&self) -> bool {
        self.skip == 0
    }

    /// The end of a burst, with the engine's `frames_in` and `predicted` counters.
    pub(crate) fn burst_end(&mut self, frames_in: u64, predicted: u64) {
        // Counters reset since the last burst (`Engine::reset_stats`): judge from zero.
        let (in0, p0) = if frames_in < self.mark.0 || predicted < self.mark.1 {
            (0, 0)
        } else {
            self.mark
        };
        let (frames, taken) = (frames_in - in0, predicted - p0);
        self.mark = (frames_in, predicted);
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
    fn run(gate: &mut Gate, bursts: &[(u64, u64)]) -> [bool; 64] {
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
        let mut g = Gate::NEW;
        let open = run(&mut g, &[(32, 4); 64]);
        assert!(open.iter().all(|&o| o), "4 of 32 is one in eight: not poor");
        assert_eq!(g.skip, 0);
    }

    #[test]
    fn poor_bursts_pause_it_longer_each_time_up_to_the_limit() {
        let mut g = Gate::NEW;
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
        let mut g = Gate::NEW;
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
        let mut g = Gate::NEW;
        let open = run(&mut g, &[(15, 0); 64]);
        assert!(open.iter().all(|&o| o), "15 frames are too few to judge");
        // Counters below the mark (reset): judged from zero, no underflow.
        let mut g = Gate::NEW;
        g.burst_end(1000, 900);
        g.burst_end(20, 0);
        assert!(!g.open(), "20 frames, none predicted, since the reset");
    }
}
