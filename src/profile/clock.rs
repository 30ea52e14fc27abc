//! Cheap timestamps for the profiler's hot path.
//!
//! `MPI_Wtime` costs about 30 ns here (a vDSO `clock_gettime`); a 1 KiB broadcast between two
//! ranks of one host takes about 450 ns, so two such reads alone would cost 13% of it. Where
//! the CPU has an invariant time-stamp counter (constant rate, running in every power state,
//! which Linux reports as `constant_tsc nonstop_tsc`), a read is one `rdtsc` (about 10 ns).
//! Elsewhere the ticks are nanoseconds of the monotonic clock.
//!
//! Ticks become seconds with a rate calibrated against `MPI_Wtime` (only when profiling is on).
//! A calibration pairs a tick read with a reference read, and on a busy machine the thread can
//! be descheduled between the two: a 2 ms window then gives a rate off by several times. So
//! every pairing is *bracketed* — reference, ticks, reference — and the tick read is known to
//! have happened within the bracket; the narrowest of several attempts is kept. The rate from
//! two such stamps `T` apart is then right to within `(w0 + w1) / 2 / T` (the brackets' widths),
//! a bound that holds however loaded the machine is, and is reported with the rate
//! ([`Clock::rate_error`]). Calibration repeats windows until that bound is below 1e-4 (or a
//! time limit passes, and the bound says how good it got). Absolute times, which must share
//! `MPI_Wtime`'s time base with other ranks' clocks, are converted when the profile is gathered
//! with a rate re-measured over the whole interval since calibration ([`Clock::to_wtime`]), whose
//! error bound shrinks with the job's length.

use std::sync::OnceLock;
use std::time::Instant;

/// Calibrated tick source.
#[derive(Debug)]
pub struct Clock {
    tsc: bool,
    /// A tick count and the `MPI_Wtime` read at the same moment (within `base.width_s`).
    base: Stamp,
    s_per_tick: f64,
    /// Bound on the relative error of `s_per_tick` (from the calibration stamps' brackets).
    rate_error: f64,
    /// What one read costs (measured), seconds.
    read_cost_s: f64,
    /// Reference clock (`MPI_Wtime`; a parameter so the conversion is testable without MPI).
    reference: fn() -> f64,
}

/// A tick count paired with the reference time at which it was read, to within `width_s`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stamp {
    pub ticks: u64,
    /// Midpoint of the bracketing reference reads.
    pub ref_s: f64,
    /// Width of the bracket: the tick read happened within `ref_s +- width_s / 2`.
    pub width_s: f64,
}

/// Bracketed attempts per stamp; the narrowest is kept. A preemption spoils one attempt, and
/// attempts take well under a microsecond each, so eight are cheap and rarely all disturbed.
const STAMP_ATTEMPTS: usize = 8;

/// Calibration stops once the rate is known to this relative error...
const TARGET_RATE_ERROR: f64 = 1e-4;
/// ...or after this many windows (the best one is kept, with its honest bound).
const MAX_WINDOWS: usize = 16;

fn stamp_with(tsc: bool, reference: fn() -> f64) -> Stamp {
    let (ticks, ref_s, width_s) = narrowest_bracket(reference, || read(tsc));
    Stamp { ticks, ref_s, width_s }
}

/// The narrowest of [`STAMP_ATTEMPTS`] brackets (outer, inner, outer): the inner read, the
/// outer reads' midpoint and their distance apart. A preemption between the reads widens a
/// bracket, so the one kept is the least disturbed, and its width bounds the pairing's error.
/// Also how `profile::offset` pairs `MPI_Wtime` with the kernel clock.
pub(crate) fn narrowest_bracket<T: Default>(outer: impl Fn() -> f64, inner: impl Fn() -> T) -> (T, f64, f64) {
    let mut best = (T::default(), 0.0, f64::INFINITY);
    for _ in 0..STAMP_ATTEMPTS {
        let a = outer();
        let k = inner();
        let b = outer();
        if b - a < best.2 {
            best = (k, 0.5 * (a + b), b - a);
        }
    }
    best
}

/// Rate (seconds per tick) between two stamps and the bound on its relative error.
fn rate_between(s0: &Stamp, s1: &Stamp) -> Option<(f64, f64)> {
    let ticks = s1.ticks.wrapping_sub(s0.ticks) as i64;
    let span = s1.ref_s - s0.ref_s;
    if ticks <= 0 || span <= 0.0 {
        return None;
    }
    // The tick counts are exact up to one tick each; the reference times up to half a bracket.
    let err = (0.5 * (s0.width_s + s1.width_s)) / span + 2.0 / ticks as f64;
    Some((span / ticks as f64, err))
}

/// Epoch of the fallback ticks.
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// Whether the CPU counts time-stamp ticks at a constant rate in every state.
#[cfg(target_arch = "x86_64")]
#[allow(unused_unsafe)] // `__cpuid` is safe in newer Rust, unsafe in older.
fn invariant_tsc() -> bool {
    use std::arch::x86_64::__cpuid;
    // SAFETY: cpuid exists on every x86_64 CPU; leaf 0x80000000 reports the highest extended
    // leaf, and 0x80000007 EDX bit 8 is "invariant TSC".
    unsafe { __cpuid(0x8000_0000).eax >= 0x8000_0007 && __cpuid(0x8000_0007).edx & (1 << 8) != 0 }
}

#[cfg(not(target_arch = "x86_64"))]
fn invariant_tsc() -> bool {
    false
}

#[inline(always)]
fn read(tsc: bool) -> u64 {
    #[cfg(target_arch = "x86_64")]
    if tsc {
        // SAFETY: rdtsc has no preconditions.
        return unsafe { std::arch::x86_64::_rdtsc() };
    }
    let _ = tsc;
    epoch().elapsed().as_nanos() as u64
}

impl Clock {
    /// Calibrate against `reference` (seconds) over windows of `window_s`, each between two
    /// bracketed stamps, until the rate is known to [`TARGET_RATE_ERROR`] (keeping the best of
    /// at most [`MAX_WINDOWS`]). Falls back to monotonic nanoseconds when there is no invariant
    /// TSC or its rate is implausible (outside 10 MHz .. 100 GHz).
    pub fn calibrate(reference: fn() -> f64, window_s: f64) -> Clock {
        let measure = |tsc: bool| {
            let mut best: Option<(Stamp, f64, f64)> = None;
            for _ in 0..MAX_WINDOWS {
                let s0 = stamp_with(tsc, reference);
                while reference() - s0.ref_s < window_s {
                    std::hint::spin_loop();
                }
                let s1 = stamp_with(tsc, reference);
                if let Some((rate, err)) = rate_between(&s0, &s1) {
                    if best.is_none_or(|b| err < b.2) {
                        best = Some((s1, rate, err));
                    }
                }
                if best.is_some_and(|b| b.2 <= TARGET_RATE_ERROR) {
                    break;
                }
            }
            best
        };
        let mut tsc = invariant_tsc();
        let mut cal = measure(tsc);
        if tsc && !cal.is_some_and(|(_, rate, _)| (1e-11..=1e-7).contains(&rate)) {
            tsc = false;
            cal = measure(false);
        }
        // The monotonic fallback counts nanoseconds; with a broken reference, say so in the bound.
        let (base, s_per_tick, rate_error) = cal.unwrap_or_else(|| (stamp_with(false, reference), 1e-9, f64::INFINITY));
        let n = 1000;
        let t = Instant::now();
        let mut sink = 0u64;
        for _ in 0..n {
            sink = sink.wrapping_add(read(tsc));
        }
        std::hint::black_box(sink);
        let read_cost_s = t.elapsed().as_secs_f64() / n as f64;
        Clock {
            tsc,
            base,
            s_per_tick,
            rate_error,
            read_cost_s,
            reference,
        }
    }

    /// The process's profiling clock, calibrated against `MPI_Wtime` on first use.
    pub fn global() -> &'static Clock {
        static CLOCK: OnceLock<Clock> = OnceLock::new();
        CLOCK.get_or_init(|| {
            let c = Clock::calibrate(crate::exec::raw::wtime, 2e-3);
            log::debug!(
                "profiling clock: {} at {:.4} ns/tick (+-{:.1e} relative), {:.1} ns per read",
                if c.tsc { "time-stamp counter" } else { "monotonic clock" },
                c.s_per_tick * 1e9,
                c.rate_error,
                c.read_cost_s * 1e9
            );
            c
        })
    }

    /// Now, in ticks.
    #[inline(always)]
    pub fn now(&self) -> u64 {
        read(self.tsc)
    }

    /// Now, as a bracketed stamp against the reference clock.
    pub fn stamp(&self) -> Stamp {
        stamp_with(self.tsc, self.reference)
    }

    /// Seconds from `t0` to `t1` (negative if `t1` is earlier: a thread moved between cores
    /// whose counters differ slightly).
    #[inline]
    pub fn seconds(&self, t0: u64, t1: u64) -> f64 {
        t1.wrapping_sub(t0) as i64 as f64 * self.s_per_tick
    }

    /// Seconds per tick, as calibrated.
    pub fn s_per_tick(&self) -> f64 {
        self.s_per_tick
    }

    /// Bound on the relative error of durations from [`Clock::seconds`] (the calibration's).
    pub fn rate_error(&self) -> f64 {
        self.rate_error
    }

    /// What one [`Clock::now`] costs, seconds.
    pub fn read_cost_s(&self) -> f64 {
        self.read_cost_s
    }

    /// Whether the ticks are the CPU's time-stamp counter.
    pub fn is_tsc(&self) -> bool {
        self.tsc
    }

    /// The rate over the whole interval since calibration and its error bound, from a fresh
    /// stamp (the re-check at the end of a job); the calibration's own while that interval is
    /// not longer than the calibration's error bound makes worthwhile.
    pub fn long_rate(&self) -> (f64, f64) {
        let now = self.stamp();
        match rate_between(&self.base, &now) {
            Some((rate, err)) if err < self.rate_error => (rate, err),
            _ => (self.s_per_tick, self.rate_error),
        }
    }

    /// Ticks `t` as a time of the reference clock, through the base stamp and the best rate
    /// known now ([`Clock::long_rate`]).
    pub fn to_wtime(&self, t: u64) -> f64 {
        self.line().at(t)
    }

    /// The map from ticks to the reference clock that [`Clock::to_wtime`] applies: the base
    /// stamp and the best rate known now (one `long_rate` for many conversions).
    pub fn line(&self) -> Line {
        Line {
            ticks: self.base.ticks,
            ref_s: self.base.ref_s,
            s_per_tick: self.long_rate().0,
        }
    }
}

/// A straight map from ticks to seconds of a reference clock: at `ticks` the reference read
/// `ref_s`, and it advances `s_per_tick` per tick.
///
/// Why it is a value of its own: ranks that read one counter (the time-stamp counter of one
/// kernel's CPUs) can all convert with one line, rank 0's, and their times then compare
/// exactly, whatever their own references did in between (`super::gather`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Line {
    pub ticks: u64,
    pub ref_s: f64,
    pub s_per_tick: f64,
}

impl Line {
    /// Ticks `t` on the reference clock.
    pub fn at(&self, t: u64) -> f64 {
        self.ref_s + t.wrapping_sub(self.ticks) as i64 as f64 * self.s_per_tick
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn monotonic_s() -> f64 {
        epoch().elapsed().as_secs_f64()
    }

    /// The durations and absolute times the clock gives agree with the reference to within the
    /// error the clock states plus the test's own bracket widths. Both sides are bracketed, so
    /// the verdict does not depend on how loaded the machine is: a preemption widens a bracket,
    /// and with it the allowed error, instead of corrupting the comparison.
    #[test]
    fn durations_and_absolute_times_match_the_reference_within_the_stated_bound() {
        let c = Clock::calibrate(monotonic_s, 2e-3);
        assert!(c.s_per_tick > 0.0 && c.read_cost_s < 1e-5, "{c:?}");
        assert!(c.rate_error.is_finite() && c.rate_error < 0.05, "{c:?}");
        let s0 = c.stamp();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let s1 = c.stamp();
        let d = c.seconds(s0.ticks, s1.ticks);
        let reference = s1.ref_s - s0.ref_s;
        let slack = 0.5 * (s0.width_s + s1.width_s);
        assert!(
            (d - reference).abs() <= c.rate_error() * reference + slack + 1e-9,
            "tick duration {d} vs reference {reference} (rate error {:e}, slack {slack:e})",
            c.rate_error()
        );
        let (_, long_err) = c.long_rate();
        let base_slack = 0.5 * (c.base.width_s + s0.width_s);
        let span = s0.ref_s - c.base.ref_s;
        assert!(
            (c.to_wtime(s0.ticks) - s0.ref_s).abs() <= long_err * span + base_slack + 1e-9,
            "{} vs {}",
            c.to_wtime(s0.ticks),
            s0.ref_s
        );
        assert!(
            c.seconds(s1.ticks, s0.ticks) < 0.0,
            "earlier end gives a negative duration"
        );
    }

    /// A reference that jumps ahead between the two reads of one attempt (a preemption) gives a
    /// wide bracket; the stamp keeps the narrow attempt, and the rate's bound covers the error.
    #[test]
    fn a_stall_inside_a_stamp_is_bracketed_not_believed() {
        use std::sync::atomic::{AtomicU64, Ordering};
        static CALLS: AtomicU64 = AtomicU64::new(0);
        // Fake reference: 1 us per call, except a 5 ms stall on every 3rd call.
        fn stalling() -> f64 {
            let n = CALLS.fetch_add(1, Ordering::Relaxed);
            let stalls = (n + 1) / 3;
            n as f64 * 1e-6 + stalls as f64 * 5e-3
        }
        let s = stamp_with(false, stalling);
        assert!(s.width_s < 2.5e-6, "the narrowest attempt is kept: {s:?}");
        let (a, b) = (stamp_with(false, stalling), stamp_with(false, stalling));
        let (_, err) = rate_between(&a, &b).expect("increasing stamps");
        assert!(err.is_finite() && err > 0.0);
    }

    #[test]
    fn rate_between_refuses_backwards_or_empty_intervals() {
        let s = |ticks, ref_s| Stamp {
            ticks,
            ref_s,
            width_s: 1e-7,
        };
        assert!(rate_between(&s(10, 1.0), &s(10, 2.0)).is_none());
        assert!(rate_between(&s(10, 2.0), &s(20, 1.0)).is_none());
        let (rate, err) = rate_between(&s(0, 0.0), &s(1_000_000, 1e-3)).unwrap();
        assert!((rate - 1e-9).abs() < 1e-15);
        assert!((err - (1e-7 / 1e-3 + 2e-6)).abs() < 1e-12, "{err}");
    }
}
