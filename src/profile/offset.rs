//! Putting one rank's times on rank 0's time base.
//!
//! Every rank's `MPI_Wtime` runs at its own host's clock: between hosts the clocks differ by an
//! offset, and the offset drifts (tens of microseconds per second is common between
//! unsynchronised hosts), so one offset measured at finalize puts calls made long before it out
//! of place by the drift times the time since. The offset is therefore measured twice, when a
//! communicator's profiling starts and when it is gathered (Cristian's algorithm: the fastest of
//! a few ping-pongs with rank 0), and a time in between is mapped with the straight line
//! through both. Within the two measurements the error of that line is at most the larger of
//! their error bounds (half their round trips), given a constant drift; that bound is reported.
//!
//! Ranks on rank 0's own kernel (one host, or hosts emulated as network namespaces of one
//! machine) need no round trips: both read the same kernel clock, so each pairs its
//! `MPI_Wtime` with `CLOCK_MONOTONIC` ([`KernelStamp`]) and the difference of the two pairings
//! is their offset, to the width of the reads' brackets (tens of nanoseconds). A ping-pong's
//! bound is half its fastest round trip, and with more ranks than cores that round trip can
//! wait for scheduler slices: on the emulated 3x3 cluster (9 ranks, 2 cores) one rank's
//! finalize offset came out 275 us off its set-up one with a bound of 457 us, and that rank
//! then seemed to enter 74% of the calls last. The kernel's offset is used only where it lies
//! within the ping-pong's bound ([`same_kernel`]), so a kernel clock that is not shared after
//! all (a time namespace) cannot replace a right offset with a wrong one.
//!
//! Pure arithmetic (and one clock read), tested without MPI.

use serde::{Deserialize, Serialize};

/// One offset measurement: at local time `at_s`, `offset_s` added to this rank's clock gives
/// rank 0's, to within `error_s`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Offset {
    pub at_s: f64,
    pub offset_s: f64,
    pub error_s: f64,
    /// This rank's `MPI_Wtime` against its kernel's clock, read with the measurement.
    pub kernel: Option<KernelStamp>,
}

/// One ping-pong with rank 0: sent at local time `sent_s`, rank 0's clock read `reference_s`
/// in between, the reply received at local `received_s`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RoundTrip {
    pub sent_s: f64,
    pub reference_s: f64,
    pub received_s: f64,
}

/// Cristian's algorithm over several round trips, by intersecting what each proves: rank 0
/// read its clock while this rank's clock stood between sending and receiving, so each round
/// trip puts the offset in `[reference - received, reference - sent]`, and the offset (constant
/// over a few milliseconds to within nanoseconds of drift) lies in every such interval at
/// once. The intersection is never wider than the fastest round trip's own interval (the
/// classic estimate), and narrower wherever a slow round's delay fell on the other side; the
/// offset is its middle and the bound half its width. Should the intervals not meet (a clock
/// stepped during the measurement), the fastest round trip alone. `None` without rounds.
pub fn from_round_trips(rounds: &[RoundTrip]) -> Option<Offset> {
    let first = rounds.first()?;
    let last = rounds.last()?;
    let lo = rounds
        .iter()
        .map(|r| r.reference_s - r.received_s)
        .fold(f64::NEG_INFINITY, f64::max);
    let hi = rounds
        .iter()
        .map(|r| r.reference_s - r.sent_s)
        .fold(f64::INFINITY, f64::min);
    if lo <= hi {
        return Some(Offset {
            at_s: 0.5 * (first.sent_s + last.received_s),
            offset_s: 0.5 * (lo + hi),
            error_s: 0.5 * (hi - lo),
            kernel: None,
        });
    }
    let fastest = rounds
        .iter()
        .min_by(|a, b| (a.received_s - a.sent_s).total_cmp(&(b.received_s - b.sent_s)))?;
    let mid = 0.5 * (fastest.sent_s + fastest.received_s);
    Some(Offset {
        at_s: mid,
        offset_s: fastest.reference_s - mid,
        error_s: 0.5 * (fastest.received_s - fastest.sent_s),
        kernel: None,
    })
}

/// `CLOCK_MONOTONIC` minus the local clock at one moment, known to within `width_s / 2`: two
/// ranks of one kernel read the same monotonic clock, so the difference of their stamps is the
/// offset between their local clocks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct KernelStamp {
    pub kernel_minus_local_s: f64,
    pub width_s: f64,
}

/// A [`KernelStamp`] of the clock `local` (`MPI_Wtime` in the runtime): the narrowest of a few
/// bracketed pairings, so a preemption between the reads cannot spoil it unnoticed.
pub fn kernel_stamp(local: fn() -> f64) -> KernelStamp {
    stamp_with(local, crate::host::monotonic_s)
}

fn stamp_with(local: impl Fn() -> f64, kernel: impl Fn() -> f64) -> KernelStamp {
    let (k, mid, width_s) = super::clock::narrowest_bracket(local, kernel);
    KernelStamp {
        kernel_minus_local_s: k - mid,
        width_s,
    }
}

/// `measured` (a ping-pong with rank 0, carrying this rank's kernel stamp) replaced by the
/// offset the two kernel stamps give, for a rank on rank 0's kernel (`rank0`: rank 0's stamp
/// of the same measurement). `None` when either stamp is missing or the kernel's offset lies
/// outside the ping-pong's bound (plus its own): then the two ranks' monotonic clocks are not
/// one clock, and the ping-pong stands.
pub fn same_kernel(measured: Offset, rank0: Option<KernelStamp>) -> Option<Offset> {
    let (mine, theirs) = (measured.kernel?, rank0?);
    // Rank 0's clock = kernel - theirs, this rank's = kernel - mine: their difference.
    let offset_s = mine.kernel_minus_local_s - theirs.kernel_minus_local_s;
    let error_s = 0.5 * (mine.width_s + theirs.width_s);
    // A nanosecond of slack for rounding in the sums.
    let agrees = (offset_s - measured.offset_s).abs() <= measured.error_s + error_s + 1e-9;
    (error_s.is_finite() && agrees).then_some(Offset {
        offset_s,
        error_s,
        ..measured
    })
}

/// Shortest interval between the two measurements over which a drift is taken from them: over
/// less, the offsets' errors (microseconds) would make the drift meaningless.
pub const MIN_DRIFT_INTERVAL_S: f64 = 0.01;

/// Largest plausible drift (seconds per second): quartz clocks are off by well under 1e-4; a
/// larger value says one of the two measurements was disturbed, and the later offset alone is
/// used.
pub const MAX_DRIFT: f64 = 1e-3;

/// A rank's map from its own clock to rank 0's.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClockMap {
    end: Offset,
    drift: f64,
    error_s: f64,
}

impl ClockMap {
    /// From the offset measured at set-up (`None` when it was not) and at the gather.
    pub fn new(start: Option<Offset>, end: Offset) -> ClockMap {
        let drift = match start {
            Some(s) if end.at_s - s.at_s >= MIN_DRIFT_INTERVAL_S => {
                let d = (end.offset_s - s.offset_s) / (end.at_s - s.at_s);
                if d.is_finite() && d.abs() <= MAX_DRIFT {
                    d
                } else {
                    0.0
                }
            }
            _ => 0.0,
        };
        let error_s = start.map_or(end.error_s, |s| s.error_s.max(end.error_s));
        ClockMap { end, drift, error_s }
    }

    /// A map by a constant offset (a rank measured once, or rank 0 itself with 0).
    pub fn constant(offset_s: f64) -> ClockMap {
        ClockMap::new(
            None,
            Offset {
                at_s: 0.0,
                offset_s,
                error_s: 0.0,
                kernel: None,
            },
        )
    }

    /// Local time `t` (seconds of this rank's clock) on rank 0's clock.
    pub fn to_rank0(&self, t: f64) -> f64 {
        t + self.end.offset_s + self.drift * (t - self.end.at_s)
    }

    /// The drift used, seconds per second (0 when not measured or implausible).
    pub fn drift(&self) -> f64 {
        self.drift
    }

    /// Bound on the error of a mapped time between the two measurements.
    pub fn error_s(&self) -> f64 {
        self.error_s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_between_the_measurements_follow_the_drift() {
        // This clock is 1 ms behind rank 0 at t = 10 s and 1.5 ms behind at t = 20 s: 50 us/s.
        let m = ClockMap::new(
            Some(Offset {
                at_s: 10.0,
                offset_s: 1e-3,
                error_s: 2e-6,
                ..Default::default()
            }),
            Offset {
                at_s: 20.0,
                offset_s: 1.5e-3,
                error_s: 3e-6,
                ..Default::default()
            },
        );
        assert!((m.drift() - 5e-5).abs() < 1e-12);
        assert!((m.to_rank0(10.0) - (10.0 + 1e-3)).abs() < 1e-12);
        assert!((m.to_rank0(15.0) - (15.0 + 1.25e-3)).abs() < 1e-12);
        assert!((m.to_rank0(20.0) - (20.0 + 1.5e-3)).abs() < 1e-12);
        assert_eq!(m.error_s(), 3e-6);
    }

    #[test]
    fn without_a_usable_start_the_end_offset_alone_is_used() {
        let end = Offset {
            at_s: 5.0,
            offset_s: 2e-3,
            error_s: 1e-6,
            ..Default::default()
        };
        for start in [
            None,
            // Too close to the end to give a drift.
            Some(Offset {
                at_s: 4.999,
                offset_s: 0.0,
                error_s: 1e-6,
                ..Default::default()
            }),
            // 2 ms in 1 s: no clock drifts that much; a disturbed measurement.
            Some(Offset {
                at_s: 4.0,
                offset_s: 0.0,
                error_s: 1e-6,
                ..Default::default()
            }),
        ] {
            let m = ClockMap::new(start, end);
            assert_eq!(m.drift(), 0.0, "{start:?}");
            assert!((m.to_rank0(1.0) - (1.0 + 2e-3)).abs() < 1e-15);
        }
        assert_eq!(ClockMap::constant(0.5).to_rank0(1.0), 1.5);
    }

    /// Two ranks of one kernel: the stamps' difference is their offset, to the brackets'
    /// widths, and it replaces a ping-pong whose bound contains it.
    #[test]
    fn a_shared_kernel_gives_the_offset_to_the_stamps_width() {
        // Rank 0's local clock is the kernel's minus 5 s, this rank's minus 5.0003 s: adding
        // 0.3 ms to this rank's gives rank 0's.
        let rank0 = stamp_with(|| 95.0, || 100.0);
        let mine = stamp_with(|| 94.9997, || 100.0);
        assert_eq!(rank0.width_s, 0.0);
        let pingpong = Offset {
            at_s: 1.0,
            offset_s: 0.29e-3,
            error_s: 0.2e-3,
            kernel: Some(mine),
        };
        let got = same_kernel(pingpong, Some(rank0)).expect("within the ping-pong's bound");
        assert!((got.offset_s - 0.3e-3).abs() < 1e-9, "{got:?}");
        assert_eq!((got.at_s, got.error_s), (1.0, 0.0));
        // Outside the ping-pong's bound: not one clock after all; the ping-pong stands.
        let tight = Offset {
            error_s: 5e-6,
            ..pingpong
        };
        assert_eq!(same_kernel(tight, Some(rank0)), None);
        // A stamp missing on either side (a profile of an older rank, say): nothing to use.
        assert_eq!(
            same_kernel(
                Offset {
                    kernel: None,
                    ..pingpong
                },
                Some(rank0)
            ),
            None
        );
        assert_eq!(same_kernel(pingpong, None), None);
    }

    /// A preempted pairing is never the one kept: the narrowest bracket wins, and its width
    /// is the stated error.
    #[test]
    fn kernel_stamps_keep_the_narrowest_bracket() {
        let reads = std::cell::Cell::new(0u32);
        // Local reads 0, 1, 2, ... us apart, except the first bracket, which spans 50 us.
        let local = || {
            let n = reads.get();
            reads.set(n + 1);
            if n == 1 {
                50e-6
            } else {
                n as f64 * 1e-6
            }
        };
        let s = stamp_with(local, || 1.0);
        assert!(s.width_s > 0.0 && s.width_s <= 1e-6 + 1e-12, "{s:?}");
        // A real clock pair: a finite, small bracket.
        let real = kernel_stamp(|| {
            let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
            unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
            ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
        });
        assert!(real.width_s.is_finite() && real.width_s < 0.1, "{real:?}");
    }

    /// Each round trip bounds the offset on both sides; their intersection is the bound, and
    /// it beats the fastest round trip when slow rounds were delayed on opposite legs.
    #[test]
    fn round_trips_are_intersected() {
        // True offset 100 us: rank 0's clock = local + 100e-6.
        let off = 100e-6;
        let trip = |sent: f64, out: f64, back: f64| RoundTrip {
            sent_s: sent,
            reference_s: sent + out + off,
            received_s: sent + out + back,
        };
        // Fastest: 10 us each way (bound 10 us). One round delayed 30 us on the way out, one
        // 30 us on the way back: together they pin the offset to within 1 us.
        let rounds = [
            trip(0.0, 10e-6, 10e-6),
            trip(1e-3, 1e-6, 30e-6),
            trip(2e-3, 30e-6, 1e-6),
        ];
        let o = from_round_trips(&rounds).unwrap();
        assert!((o.offset_s - off).abs() <= o.error_s + 1e-12, "{o:?}");
        assert!(o.error_s < 1.01e-6, "{o:?}");
        assert!((o.at_s - 0.5 * (0.0 + 2e-3 + 31e-6)).abs() < 1e-12, "{o:?}");
        // One round trip: its own interval, the classic estimate.
        let one = from_round_trips(&rounds[..1]).unwrap();
        assert!(
            (one.offset_s - off).abs() < 1e-12 && (one.error_s - 10e-6).abs() < 1e-12,
            "{one:?}"
        );
        // Intervals that do not meet (the clock stepped by 1 ms between rounds): the fastest.
        let mut stepped = rounds;
        stepped[2].reference_s += 1e-3;
        let s = from_round_trips(&stepped).unwrap();
        assert!(
            (s.offset_s - one.offset_s).abs() < 1e-12 && (s.error_s - one.error_s).abs() < 1e-12,
            "{s:?}"
        );
        assert_eq!(from_round_trips(&[]), None);
    }
}
