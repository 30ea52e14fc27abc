//! Cheap timestamps for the profiler's hot path.
//!
//! `MPI_Wtime` costs about 30 ns here (a vDSO `clock_gettime`); a 1 KiB broadcast between two
//! ranks of one host takes about 450 ns, so two such reads alone would cost 13% of it. Where
//! the CPU has an invariant time-stamp counter (constant rate, running in every power state,
//! which Linux reports as `constant_tsc nonstop_tsc`), a read is one `rdtsc` (about 10 ns).
//! Elsewhere the ticks are nanoseconds of the monotonic clock.
//!
//! Ticks become seconds with a rate calibrated against `MPI_Wtime` once per process (a 2 ms
//! spin, only when profiling is on). Durations use that rate (relative error about 1e-5).
//! Absolute times, which must share `MPI_Wtime`'s time base with other ranks' clocks, are
//! converted when the profile is gathered with a rate measured over the whole interval since
//! calibration ([`Clock::to_wtime`]), so a long job does not accumulate the calibration error.

use std::sync::OnceLock;
use std::time::Instant;

/// Calibrated tick source.
#[derive(Debug)]
pub struct Clock {
    tsc: bool,
    /// A tick count and the `MPI_Wtime` read at the same moment.
    base_ticks: u64,
    base_s: f64,
    s_per_tick: f64,
    /// What one read costs (measured), seconds.
    read_cost_s: f64,
    /// Reference clock (`MPI_Wtime`; a parameter so the conversion is testable without MPI).
    reference: fn() -> f64,
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
    /// Calibrate against `reference` (seconds): spin `window_s`, compare tick and reference
    /// differences. Falls back to monotonic nanoseconds when there is no invariant TSC or its
    /// rate is implausible (outside 10 MHz .. 100 GHz).
    pub fn calibrate(reference: fn() -> f64, window_s: f64) -> Clock {
        let measure = |tsc: bool| {
            let (t0, k0) = (reference(), read(tsc));
            let (mut t1, mut k1) = (t0, k0);
            while t1 - t0 < window_s {
                k1 = read(tsc);
                t1 = reference();
            }
            (t0, k0, (t1 - t0) / k1.wrapping_sub(k0).max(1) as f64)
        };
        let mut tsc = invariant_tsc();
        let (mut base_s, mut base_ticks, mut s_per_tick) = measure(tsc);
        if tsc && !(1e-11..=1e-7).contains(&s_per_tick) {
            tsc = false;
            (base_s, base_ticks, s_per_tick) = measure(false);
        }
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
            base_ticks,
            base_s,
            s_per_tick,
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
                "profiling clock: {} at {:.3} ns/tick, {:.1} ns per read",
                if c.tsc { "time-stamp counter" } else { "monotonic clock" },
                c.s_per_tick * 1e9,
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

    /// Seconds from `t0` to `t1` (negative if `t1` is earlier: a thread moved between cores
    /// whose counters differ slightly).
    #[inline]
    pub fn seconds(&self, t0: u64, t1: u64) -> f64 {
        t1.wrapping_sub(t0) as i64 as f64 * self.s_per_tick
    }

    /// What one [`Clock::now`] costs, seconds.
    pub fn read_cost_s(&self) -> f64 {
        self.read_cost_s
    }

    /// Whether the ticks are the CPU's time-stamp counter.
    pub fn is_tsc(&self) -> bool {
        self.tsc
    }

    /// Ticks `t` as a time of the reference clock, using the mean rate since calibration
    /// once more than a second has passed (the short calibration's rate otherwise).
    pub fn to_wtime(&self, t: u64) -> f64 {
        let (now_s, now_t) = ((self.reference)(), self.now());
        let span = now_t.wrapping_sub(self.base_ticks) as i64;
        let rate = if now_s - self.base_s > 1.0 && span > 0 {
            (now_s - self.base_s) / span as f64
        } else {
            self.s_per_tick
        };
        now_s - now_t.wrapping_sub(t) as i64 as f64 * rate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn monotonic_s() -> f64 {
        epoch().elapsed().as_secs_f64()
    }

    #[test]
    fn durations_and_absolute_times_match_the_reference() {
        let c = Clock::calibrate(monotonic_s, 2e-3);
        assert!(c.s_per_tick > 0.0 && c.read_cost_s < 1e-5, "{c:?}");
        let (r0, k0) = (monotonic_s(), c.now());
        std::thread::sleep(std::time::Duration::from_millis(20));
        let (r1, k1) = (monotonic_s(), c.now());
        let d = c.seconds(k0, k1);
        assert!(
            (d - (r1 - r0)).abs() < 1e-3,
            "tick duration {d} vs reference {}",
            r1 - r0
        );
        assert!((c.to_wtime(k0) - r0).abs() < 1e-3, "{} vs {r0}", c.to_wtime(k0));
        assert!(c.seconds(k1, k0) < 0.0, "earlier end gives a negative duration");
    }
}
