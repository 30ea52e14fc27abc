//! Predictions of the calls as they happened: each call every rank timed, predicted from the
//! times its ranks actually entered.
//!
//! A size class's headline prediction assumes all ranks enter together. They rarely do: after a
//! barrier on an oversubscribed host they enter microseconds to milliseconds apart, and a rank
//! that arrives after its data spends only the copy-out in the call, so the median rank's
//! measured time can be shorter than any transfer (64 KiB between 4 ranks on 2 cores: 3.2 us
//! measured against 7.2 us predicted all-together). Neither number then says whether the
//! broadcast itself performed as modelled. Here every aligned call (the calls every rank timed,
//! on rank 0's clock) is run through the calibrated model with its own entry times, and the
//! predicted per-rank times in the call are set against the measured ones of the same calls:
//! an error here is the model's (or the network's), not the arrival pattern's.
//!
//! Pure arithmetic around a predictor, so it is tested without MPI.

use super::arrival::AlignedCall;
use super::report::GivenEntries;
use crate::estimate::bucket::CallTrain;
use crate::estimate::calibrate::{median, relative_error};
use std::collections::BTreeMap;

/// Measured against predicted per-rank times in the call over `calls` (those of one size
/// class). `predict(root, bytes, (enters, groupings))` gives, for each of the entry vectors of
/// calls of that root and size (one time per rank of the communicator) and the call's grouping
/// of the ranks by CPU (`super::placement::grouping`, `None` where not read), each rank's
/// predicted exit on the same clock, or `None`; it is asked once per (root, size), so the plan
/// is built once, not once per call. Calls that do not cover all `size` ranks, or that the predictor declines,
/// are left out; `None` when none is left.
pub fn given_entries<'a>(
    calls: impl IntoIterator<Item = &'a AlignedCall>,
    size: u32,
    mut predict: impl FnMut(u32, u64, (&[Vec<f64>], &[Option<Vec<u32>>])) -> Vec<Option<Vec<f64>>>,
) -> Option<GivenEntries> {
    let mut groups: BTreeMap<(u32, u64), Vec<&AlignedCall>> = BTreeMap::new();
    for c in calls {
        if c.has_every_rank(size) {
            groups.entry((c.root, c.bytes)).or_default().push(c);
        }
    }
    let (mut measured, mut predicted) = (Vec::new(), Vec::new());
    // Per rank (measured, predicted).
    let mut by_rank: Vec<(Vec<f64>, Vec<f64>)> = vec![(Vec::new(), Vec::new()); size as usize];
    let mut n = 0u64;
    let mut sizes = (u64::MAX, 0u64);
    for ((root, bytes), group) in groups {
        let enters: Vec<Vec<f64>> = group.iter().map(|c| c.ranks.iter().map(|r| r.1).collect()).collect();
        let groupings: Vec<Option<Vec<u32>>> = group.iter().map(|c| super::placement::call_grouping(c)).collect();
        for (c, exit) in group.iter().zip(predict(root, bytes, (&enters, &groupings))) {
            let Some(exit) = exit.filter(|x| x.len() == c.ranks.len()) else {
                continue;
            };
            n += 1;
            sizes = (sizes.0.min(bytes), sizes.1.max(bytes));
            if log::log_enabled!(log::Level::Trace) {
                let first = c.ranks.iter().map(|r| r.1).fold(f64::INFINITY, f64::min);
                let each: Vec<String> = c
                    .ranks
                    .iter()
                    .zip(&exit)
                    .map(|(&(r, e, d), x)| {
                        format!("{r} {:.1}/{:.1}/{:.1}", (e - first) * 1e6, (d - e) * 1e6, (x - e) * 1e6)
                    })
                    .collect();
                log::trace!(
                    "treecast: call {} ({bytes} B from {root}), each rank's entry after the first, measured/predicted time in the call (us): {}",
                    c.seq,
                    each.join(", ")
                );
            }
            for (&(r, e, d), x) in c.ranks.iter().zip(&exit) {
                measured.push(d - e);
                predicted.push(x - e);
                if let Some(slot) = by_rank.get_mut(r as usize) {
                    slot.0.push(d - e);
                    slot.1.push(x - e);
                }
            }
        }
    }
    if measured.is_empty() {
        return None;
    }
    if log::log_enabled!(log::Level::Debug) {
        log::debug!(
            "treecast: {} .. {} B, {n} calls given their entries, each rank's median time in the call, measured/predicted (us): {}",
            sizes.0,
            sizes.1,
            per_rank_line(&by_rank)
        );
    }
    let (measured_median_s, predicted_median_s) = (median(&measured), median(&predicted));
    Some(GivenEntries {
        calls: n,
        measured_median_s,
        predicted_median_s,
        error: relative_error(predicted_median_s, measured_median_s),
        worst_rank: worst_rank(&by_rank),
    })
}

/// The rank whose median time in the call is predicted worst (`by_rank[r]`: rank `r`'s measured
/// and predicted samples), with that error (`predicted / measured - 1` of its medians).
fn worst_rank(by_rank: &[(Vec<f64>, Vec<f64>)]) -> Option<(u32, f64)> {
    rank_medians(by_rank)
        .filter_map(|(r, m, p)| relative_error(p, m).map(|e| (r, e)))
        .max_by(|a, b| a.1.abs().total_cmp(&b.1.abs()))
}

/// Each rank with samples of both, and its measured and predicted median.
fn rank_medians(by_rank: &[(Vec<f64>, Vec<f64>)]) -> impl Iterator<Item = (u32, f64, f64)> + '_ {
    by_rank
        .iter()
        .enumerate()
        .filter(|(_, (m, p))| !m.is_empty() && !p.is_empty())
        .map(|(r, (m, p))| (r as u32, median(m), median(p)))
}

/// Each rank's median time in the call, measured and predicted (`by_rank[r]`: rank `r`'s
/// samples of both), as `rank measured/predicted` in microseconds: which rank the model gets
/// wrong, where the median over every rank can land on any of them (4 Open MPI ranks on 2
/// cores, 1 KiB: the root measured 4.6-5.5 us against 3.4-4.4 predicted, and the median over
/// all ranks was the root's).
fn per_rank_line(by_rank: &[(Vec<f64>, Vec<f64>)]) -> String {
    rank_medians(by_rank)
        .map(|(r, m, p)| format!("{r} {:.2}/{:.2}", m * 1e6, p * 1e6))
        .collect::<Vec<String>>()
        .join(", ")
}

/// How calls like `calls` (those of one size class, any order) follow each other: over each
/// two of them with no other of them between, the first entries' distance divided by the
/// calls between them by sequence number (a call of another class or site in between counts
/// as one of the train), and, where the two are consecutive calls, the time from the last
/// rank leaving the first to the first rank entering the second (0 when they overlap); and
/// over every call whose root timed it, from its first rank entering to its root entering;
/// the medians. What a link's token bucket refills in (`estimate::bucket`). `None` with fewer than
/// two calls; the gap is 0 without two consecutive ones.
pub fn call_train<'a>(calls: impl IntoIterator<Item = &'a AlignedCall>) -> Option<CallTrain> {
    let mut v: Vec<&AlignedCall> = calls.into_iter().collect();
    v.sort_by_key(|c| c.seq);
    let (mut periods, mut gaps) = (Vec::new(), Vec::new());
    let leads: Vec<f64> = v
        .iter()
        .filter_map(|c| {
            let root = c.ranks.iter().find(|r| r.0 == c.root)?.1 - c.first_enter();
            root.is_finite().then_some(root.max(0.0))
        })
        .collect();
    for w in v.windows(2) {
        let (a, b) = (w[0], w[1]);
        if b.seq <= a.seq {
            continue;
        }
        let p = (b.first_enter() - a.first_enter()) / (b.seq - a.seq) as f64;
        if p.is_finite() && p > 0.0 {
            periods.push(p);
        }
        let g = b.first_enter() - a.last_done();
        if b.seq == a.seq + 1 && g.is_finite() {
            gaps.push(g.max(0.0));
        }
    }
    if periods.is_empty() {
        return None;
    }
    Some(CallTrain {
        period_s: median(&periods),
        gap_s: if gaps.is_empty() { 0.0 } else { median(&gaps) },
        lead_s: if leads.is_empty() { 0.0 } else { median(&leads) },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_per_rank_line_names_each_rank_with_its_medians() {
        let by_rank = vec![
            (vec![4.8e-6, 5.0e-6, 4.6e-6], vec![3.4e-6, 3.4e-6, 3.4e-6]),
            (vec![], vec![]),
            (vec![0.1e-6], vec![1.0e-6]),
        ];
        assert_eq!(per_rank_line(&by_rank), "0 4.80/3.40, 2 0.10/1.00");
    }

    fn call(seq: u64, ranks: Vec<(u32, f64, f64)>) -> AlignedCall {
        AlignedCall {
            seq,
            root: 0,
            bytes: 4096,
            by_mpi: false,
            ranks,
            cpus: vec![],
        }
    }

    /// A two-rank model: rank 1 leaves 10 us after the later of the root's entry and its own,
    /// minus what it missed (it takes the data in 1 us when it arrives after it).
    fn model_one(enter: &[f64]) -> Option<Vec<f64>> {
        let arrival = enter[0] + 10e-6;
        let done1 = if enter[1] >= arrival { enter[1] + 1e-6 } else { arrival };
        Some(vec![enter[0] + 2e-6, done1])
    }

    fn model(_root: u32, _bytes: u64, (enters, _): (&[Vec<f64>], &[Option<Vec<u32>>])) -> Vec<Option<Vec<f64>>> {
        enters.iter().map(|e| model_one(e)).collect()
    }

    #[test]
    fn calls_are_predicted_from_their_own_entries() {
        // Call 1: together, rank 1 waits 10 us. Call 2: rank 1 arrives 50 us late, its data
        // is there, it spends 1 us. Call 3 lacks rank 1 and is left out.
        let calls = [
            call(1, vec![(0, 0.0, 2e-6), (1, 0.0, 10e-6)]),
            call(2, vec![(0, 1.0, 1.0 + 2e-6), (1, 1.0 + 50e-6, 1.0 + 51e-6)]),
            call(3, vec![(0, 2.0, 2.0 + 2e-6)]),
        ];
        let g = given_entries(&calls, 2, model).unwrap();
        assert_eq!(g.calls, 2);
        // Per-rank times: predicted {2, 10, 2, 1} us, measured the same: median 2 us each.
        assert!((g.predicted_median_s - 2e-6).abs() < 1e-12, "{g:?}");
        assert!((g.measured_median_s - 2e-6).abs() < 1e-12, "{g:?}");
        assert!(g.error.unwrap().abs() < 1e-9);
        // An all-together prediction of the same calls would have said rank 1 takes 10 us
        // each time: the entries are what moves the prediction.
        let late = [call(2, vec![(0, 1.0, 1.0 + 2e-6), (1, 1.0 + 50e-6, 1.0 + 60e-6)])];
        let g = given_entries(&late, 2, model).unwrap();
        // Measured {2, 10} us against predicted {2, 1}: median 6 against 1.5 us.
        assert!((g.error.unwrap() - (1.5 / 6.0 - 1.0)).abs() < 1e-9, "{g:?}");
        // Rank 1 (10 us against 1) is the rank predicted worst.
        let (rank, e) = g.worst_rank.unwrap();
        assert_eq!(rank, 1);
        assert!((e - (1.0 / 10.0 - 1.0)).abs() < 1e-9, "{g:?}");
    }

    #[test]
    fn the_train_is_the_median_distance_and_gap_per_call() {
        // Each call spans 5 us, its ranks entering 1 us apart.
        let at = |seq: u64, t: f64| call(seq, vec![(0, t + 1e-6, t + 5e-6), (1, t, t + 5e-6)]);
        // Calls 1 ms apart, one stretch with two calls of other classes between (3 ms over 3
        // calls), one long pause (a phase of the program elsewhere): the median ignores it.
        let calls = [
            at(1, 0.0),
            at(2, 1e-3),
            at(5, 4e-3),
            at(6, 5e-3),
            at(7, 6e-3),
            at(8, 1.0),
        ];
        let t = call_train(calls.iter().rev()).unwrap();
        assert!((t.period_s - 1e-3).abs() < 1e-12, "{t:?}");
        // Gaps of consecutive calls only: 1 ms less the 5 us a call lasts (three of four).
        assert!((t.gap_s - (1e-3 - 5e-6)).abs() < 1e-12, "{t:?}");
        assert_eq!(call_train(&calls[..1]), None);
        assert_eq!(call_train([at(3, 0.0), at(3, 0.0)].iter()), None);
        // The root (rank 0) enters 1 us after rank 1 in each.
        assert!((t.lead_s - 1e-6).abs() < 1e-12, "{t:?}");
        // Overlapping calls: no gap.
        let overlap = [at(1, 0.0), at(2, 2e-6)];
        assert_eq!(call_train(&overlap).unwrap().gap_s, 0.0);
    }

    #[test]
    fn nothing_to_compare_gives_none() {
        let calls = [call(1, vec![(0, 0.0, 1e-6), (1, 0.0, 2e-6)])];
        assert!(given_entries(&calls, 2, |_, _, e| vec![None; e.0.len()]).is_none());
        assert!(given_entries(&calls, 3, model).is_none());
        assert!(given_entries(&[], 2, model).is_none());
        // A predictor answering for the wrong number of ranks is not trusted.
        assert!(given_entries(&calls, 2, |_, _, e| vec![Some(vec![1.0]); e.0.len()]).is_none());
        // The predictor is asked once per (root, size), with every call of it and each call's
        // grouping by CPU where every rank's CPU was read.
        let mut shared = call(1, vec![(0, 0.0, 1e-6), (1, 0.0, 2e-6)]);
        shared.cpus = vec![Some((7, 1)), Some((7, 1))];
        let mut half = call(3, vec![(0, 2.0, 2.0 + 1e-6), (1, 2.0, 2.0 + 2e-6)]);
        half.cpus = vec![Some((7, 1)), None];
        let same = [shared, call(2, vec![(0, 1.0, 1.0 + 1e-6), (1, 1.0, 1.0 + 2e-6)]), half];
        let mut asked = Vec::new();
        given_entries(&same, 2, |r, b, e| {
            asked.push((r, b, e.0.len(), e.1.to_vec()));
            model(r, b, e)
        });
        assert_eq!(asked, vec![(0, 4096, 3, vec![Some(vec![0, 0]), None, None])]);
    }
}
