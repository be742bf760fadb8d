//! The model's promise: parameters it cannot run are refused with a `SimError`, and any other
//! configuration runs without panicking, every buffer accounted for at every step. Delays in
//! nanoseconds are kept in picoseconds, so long delays (or per-frame costs) used to overflow.

use drivers_ipoib::sim::{Costs, SimConfig, Simulation};

/// A delay far beyond what fits in picoseconds.
const HUGE: u64 = u64::MAX / 100;

/// A named change to a configuration.
type Case = (&'static str, fn(&mut SimConfig));

fn configs() -> Vec<(&'static str, SimConfig)> {
    let base = |tcp: bool| {
        let mut c = if tcp {
            SimConfig::bulk_tcp(Costs::SEED_ERA)
        } else {
            SimConfig::seed_udp(Costs::SEED_ERA)
        };
        c.duration_ns = 2_000_000;
        c.copybreak = None; // RNR NAKs and resets, so every delay is taken
        c
    };
    let cases: [Case; 7] = [
        ("latency_ns", |c| c.latency_ns = HUGE),
        ("irq_delay_ns", |c| c.irq_delay_ns = HUGE),
        ("app_ns", |c| c.app_ns = HUGE),
        ("app_ns_per_kib", |c| c.app_ns_per_kib = HUGE),
        ("rnr_timer_ns", |c| {
            c.rnr_retry = 1;
            c.rnr_timer_ns = HUGE;
        }),
        ("reconnect_ns, tcp_rto_ns", |c| {
            c.reconnect_ns = HUGE;
            c.tcp_rto_ns = HUGE;
        }),
        ("costs", |c| {
            c.costs.handup_ps = u64::MAX;
            c.costs.fixed_ps = u64::MAX;
        }),
    ];
    let mut out = Vec::new();
    for tcp in [false, true] {
        for (what, set) in cases {
            let mut c = base(tcp);
            set(&mut c);
            out.push((what, c));
        }
    }
    out
}

#[test]
fn long_delays_and_costs_run_without_overflow() {
    for (what, c) in configs() {
        let run = std::panic::catch_unwind(|| {
            let mut s = Simulation::new(&c).expect("a valid configuration");
            let mut steps = 0u32;
            while s.step() {
                assert!(s.is_consistent(), "{what}: {:?}", s.accounting());
                steps += 1;
                assert!(steps < 10_000_000, "{what}: runaway");
            }
            assert!(s.is_consistent(), "{what}: {:?}", s.accounting());
            s.run()
        });
        assert!(run.is_ok(), "{what}: the model panicked");
    }
}

#[test]
fn a_simulated_time_beyond_picoseconds_is_refused() {
    // u64::MAX nanoseconds do not fit the model's picosecond clock: refused, not run for ever
    // at a saturated end time.
    let mut c = SimConfig::seed_udp(Costs::SEED_ERA);
    c.duration_ns = u64::MAX;
    assert!(Simulation::new(&c).is_err());
    c.duration_ns = u64::MAX / 1000 / 2;
    assert!(Simulation::new(&c).is_ok());
}
