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
//! Pure arithmetic, tested without MPI.

use serde::{Deserialize, Serialize};

/// One offset measurement: at local time `at_s`, `offset_s` added to this rank's clock gives
/// rank 0's, to within `error_s`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Offset {
    pub at_s: f64,
    pub offset_s: f64,
    pub error_s: f64,
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
            }),
            Offset {
                at_s: 20.0,
                offset_s: 1.5e-3,
                error_s: 3e-6,
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
        };
        for start in [
            None,
            // Too close to the end to give a drift.
            Some(Offset {
                at_s: 4.999,
                offset_s: 0.0,
                error_s: 1e-6,
            }),
            // 2 ms in 1 s: no clock drifts that much; a disturbed measurement.
            Some(Offset {
                at_s: 4.0,
                offset_s: 0.0,
                error_s: 1e-6,
            }),
        ] {
            let m = ClockMap::new(start, end);
            assert_eq!(m.drift(), 0.0, "{start:?}");
            assert!((m.to_rank0(1.0) - (1.0 + 2e-3)).abs() < 1e-15);
        }
        assert_eq!(ClockMap::constant(0.5).to_rank0(1.0), 1.5);
    }
}
