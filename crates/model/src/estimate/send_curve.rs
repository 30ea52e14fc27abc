//! What one message between two ranks of one host costs, per message size, as the job measured
//! it at set-up; and the prediction of a plan on one host from those costs.
//!
//! A latency-plus-bandwidth line through an 8 B and a 1 MiB ping-pong misses what shared-memory
//! MPI transports do in between. Measured on the 2-core VM (Open MPI 4.1, 4 ranks): an 8 B
//! send keeps its sender 0.06 us, a 1 KiB send 1-2.5 us (it leaves the small-message box for
//! the fragment path), and from 16 KiB the sender waits for its receiver (rendezvous). So,
//! as in PLogP (Kielmann et al., 2000), every cost is a function of the message size, measured
//! at a few sizes and interpolated between them:
//! - `sender_s`: how long a blocking send keeps its sender (the next send starts no earlier);
//! - `one_way_s`: half a ping-pong's round trip, or from 256 KiB one way to a 0-byte
//!   acknowledgement less that acknowledgement (when the receiver can use the data);
//! - `late_recv_s`: how long a receive takes when the message is already there (a rank that
//!   enters after its data pays only this);
//! - `waits_for_receiver`: whether a send of that size made while the receiver is not yet in
//!   the call waits for it (rendezvous) instead of leaving eagerly.
//!
//! The runtime measures powers of 2 from 8 B to 16 MiB (`runtime::calibrate`); sizes between
//! are interpolated, and beyond the largest the curve goes on along its last slope.

use super::plan_dag::PlanDag;
use super::rank_times::{checked_entries, CalibratedTimes};
use super::EstimateError;
use crate::plan::Plan;

/// The costs of one message size (seconds).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SendCost {
    pub bytes: u64,
    pub sender_s: f64,
    pub one_way_s: f64,
    pub late_recv_s: f64,
    pub waits_for_receiver: bool,
}

/// Most two neighbouring sizes' costs per byte may differ for them to count as agreeing on it
/// ([`lower_lone_bumps`]).
pub const NEIGHBOURS_AGREE: f64 = 1.2;

/// Lowers each time of `points` (sorted by size) that costs more per byte than both sizes
/// beside it, where those two agree on the cost per byte (within [`NEIGHBOURS_AGREE`]) and all
/// three wait for their receiver alike, to the higher of the two at its own size: the reading
/// was disturbed. On the same rule as the cap by larger sizes in [`SendCurve::new`], only
/// down, since a reading can be slowed, not sped up.
///
/// Why: each size is measured on its own, a few milliseconds apart, and a disturbed reading
/// set its size's prediction alone. One job of two ranks on the VM read the late receive of
/// 256 KiB at 33.7 us, between 10.6 us at 128 KiB and 40.7 us at 512 KiB, and its 256 KiB
/// broadcasts (19.5 us) were predicted 73% slow. Over 132 two-rank set-ups this rule lowers a
/// reading by more than 10% at 256 KiB in 10 and at 512 KiB in 10; in the 9 of them, made
/// without it, whose jobs timed that size, every prediction moves towards the calls (+73% to
/// +9%, +81% to -2%, +70% to +40%, ...). A protocol switch is a step, not a bump: the late receive
/// 0.08 us at 2 KiB, 2.31 at 4 KiB, 2.57 at 8 KiB disagree by far more per byte, and the
/// first size whose send waits for its receiver differs in that from the one below.
fn lower_lone_bumps(points: &mut [SendCost]) {
    let fields: [fn(&mut SendCost) -> &mut f64; 3] =
        [|p| &mut p.sender_s, |p| &mut p.one_way_s, |p| &mut p.late_recv_s];
    for field in fields {
        let times: Vec<f64> = points.iter_mut().map(|p| *field(p)).collect();
        for i in 1..points.len().saturating_sub(1) {
            let per_byte = |j: usize| times[j] / points[j].bytes as f64;
            let (left, own, right) = (per_byte(i - 1), per_byte(i), per_byte(i + 1));
            let alike = (i - 1..=i + 1).all(|j| points[j].waits_for_receiver == points[i].waits_for_receiver);
            let agree = alike && left > 0.0 && right > 0.0 && left.max(right) <= NEIGHBOURS_AGREE * left.min(right);
            if agree && own > left.max(right) {
                *field(&mut points[i]) = left.max(right) * points[i].bytes as f64;
            }
        }
    }
}

/// Costs at increasing message sizes (at least two).
#[derive(Clone, Debug, PartialEq)]
pub struct SendCurve {
    points: Vec<SendCost>,
}

impl SendCurve {
    /// A curve through `points`: sorted by size, repeated sizes and points with a time that is
    /// not finite and non-negative (or a one-way time of 0) dropped; then each time capped by
    /// the smallest time of any larger size. A larger message never costs less, and on a
    /// loaded machine a reading can only be slowed, never sped up, so a size that read more
    /// than a larger one was disturbed (one disturbed late receive of 8 B read 4.4 us; raising
    /// the larger sizes to it instead would have spread the disturbance to all of them).
    /// `None` with fewer than two usable points.
    pub fn new(mut points: Vec<SendCost>) -> Option<SendCurve> {
        let ok = |t: f64| t.is_finite() && t >= 0.0;
        points.retain(|p| ok(p.sender_s) && ok(p.late_recv_s) && ok(p.one_way_s) && p.one_way_s > 0.0);
        points.sort_by_key(|p| p.bytes);
        points.dedup_by_key(|p| p.bytes);
        lower_lone_bumps(&mut points);
        for i in (0..points.len().saturating_sub(1)).rev() {
            let next = points[i + 1];
            let p = &mut points[i];
            p.sender_s = p.sender_s.min(next.sender_s);
            p.one_way_s = p.one_way_s.min(next.one_way_s);
            p.late_recv_s = p.late_recv_s.min(next.late_recv_s);
        }
        (points.len() >= 2).then_some(SendCurve { points })
    }

    pub fn points(&self) -> &[SendCost] {
        &self.points
    }

    /// The curve with each point's times multiplied by `factor(bytes)` (a factor that is not
    /// finite and positive leaves the point as it is).
    pub fn scaled(&self, factor: impl Fn(u64) -> f64) -> SendCurve {
        let points = self.points.iter().map(|&p| scale_cost(p, factor(p.bytes))).collect();
        SendCurve { points }
    }

    /// The curve at its own sizes and at `more`, each point's times multiplied by
    /// `factor(bytes)` (a factor that is not finite and positive leaves the point as it is).
    /// Points added at the last byte of each size class let a message take its own class's
    /// factor up to the class's end, instead of a line towards the next class's
    /// (`super::curve_fit::CurveScale::apply`).
    pub fn scaled_at(&self, more: &[u64], factor: impl Fn(u64) -> f64) -> SendCurve {
        let mut sizes: Vec<u64> = self
            .points
            .iter()
            .map(|p| p.bytes)
            .chain(more.iter().copied())
            .collect();
        sizes.sort_unstable();
        sizes.dedup();
        let points = sizes
            .into_iter()
            .filter(|&b| b > 0)
            .map(|b| scale_cost(self.at(b), factor(b)))
            .collect();
        SendCurve { points }
    }

    /// The costs of a message of `bytes`: linear between the two measured sizes around it,
    /// the first point's below the smallest, and beyond the largest extended along the last
    /// segment's per-byte slope (bandwidth-bound there). A size waits for its receiver when
    /// the measured size at or above it does (so a threshold between two measured sizes is
    /// assumed at the lower one: predictions err towards waiting). Where the library switches
    /// protocol between the two ([`protocol_step`]: a late receiver finds the smaller size
    /// buffered and copies the larger), the smaller size's protocol is taken to hold up to the
    /// larger: extended along the segment that ends at the smaller (library limits are powers
    /// of two that count the message's header, so a payload of the larger size is the first
    /// past them).
    pub fn at(&self, bytes: u64) -> SendCost {
        let p = &self.points;
        let i = p.partition_point(|q| q.bytes < bytes);
        if i == 0 {
            return SendCost { bytes, ..p[0] };
        }
        // Beyond the last size, and below a protocol switch (where the smaller size's
        // protocol holds), along the segment that ends at the size below; elsewhere between
        // the two around it.
        let (a, b) = if i == p.len() || (i >= 2 && p[i].bytes > bytes && protocol_step(&p[i - 1], &p[i])) {
            (p[i - 2], p[i - 1])
        } else {
            (p[i - 1], p[i])
        };
        let f = (bytes as f64 - a.bytes as f64) / (b.bytes as f64 - a.bytes as f64);
        let lerp = |x: f64, y: f64| (x + f * (y - x)).max(0.0);
        SendCost {
            bytes,
            sender_s: lerp(a.sender_s, b.sender_s),
            one_way_s: lerp(a.one_way_s, b.one_way_s),
            late_recv_s: lerp(a.late_recv_s, b.late_recv_s),
            waits_for_receiver: b.waits_for_receiver,
        }
    }
}

/// `p` with its times multiplied by `f` (a factor that is not finite and positive leaves it).
fn scale_cost(p: SendCost, f: f64) -> SendCost {
    let f = if f.is_finite() && f > 0.0 { f } else { 1.0 };
    SendCost {
        sender_s: p.sender_s * f,
        one_way_s: p.one_way_s * f,
        late_recv_s: p.late_recv_s * f,
        ..p
    }
}

/// Whether the library switches protocol between the measured sizes `a` and the next, `b`:
/// a late receiver found the data buffered at `a` (its receive far shorter than the message's
/// one-way time) and copies it at `b` (a receive more than 4 times longer per byte). Open MPI
/// on the VM: 0.08 us at 2 KiB, 2.31 us at 4 KiB (its eager limit, 4 KiB with the header, lies
/// between), and the one-way time 2.02 against 4.35 us; the line between the two put a 3000 B
/// message at 3.1 us, one the eager 2 KiB segment puts at 2.1.
fn protocol_step(a: &SendCost, b: &SendCost) -> bool {
    let ratio = b.bytes as f64 / a.bytes as f64;
    a.late_recv_s < 0.5 * a.one_way_s && b.late_recv_s > 4.0 * ratio * a.late_recv_s
}

/// `plan`'s times for `bytes` when every rank is on one host and each message costs what
/// `curve` says, with `issue_s` of CPU per send issued (the send burst's overhead). MPI
/// libraries issue a collective's sends without blocking and wait for them at the end, so:
/// - a rank issues its sends in order, each once its data is in and `issue_s` after the
///   previous one (not the previous one's bytes later: shared-memory transports past their
///   eager size let the receiver copy, so a root's messages to several host-mates move at
///   once; a flat 3 x 64 KiB broadcast on 4 ranks was done in 7-13 us, not the 24 us of
///   three copies in a row);
/// - the data is usable at the receiver `one_way_s` after issue, or `late_recv_s` after the
///   receiver enters when it was not there yet (for a rendezvous size the late receive is the
///   whole transfer);
/// - a rank leaves when its data is in and its sends are complete: an eager send `sender_s`
///   after issue, a send that waits for its receiver once the receiver's acknowledgement of
///   the data is back ([`acknowledgement`]).
///
/// `enter`: each rank's entry time, `None` for all at 0.
///
/// `shared`: which ranks ran on one CPU in the call, when known ([`SharedCpus`]).
pub fn evaluate_on_one_host(
    plan: &Plan,
    bytes: u64,
    curve: &SendCurve,
    issue_s: f64,
    enter: Option<&[f64]>,
    shared: Option<SharedCpus<'_>>,
) -> Result<CalibratedTimes, EstimateError> {
    let dag = PlanDag::build(plan, bytes)?;
    evaluate_dag_on_one_host(&dag, plan.nranks as usize, curve, issue_s, enter, shared)
}

/// Which ranks of a call ran on one CPU, and the costs the receivers' copies run at where
/// every receiver shares its CPU with another receiver of the call.
///
/// Why: a receiver copies its message itself (from the rendezvous sizes on, the shared-memory
/// transports' single copy), so two receivers on one CPU copy one after the other. Three Open
/// MPI ranks on the 2-core VM (binary tree 0 -> 1, 2), each class's median over the pair's
/// one-way time at its size: 1.61-2.22 from 64 KiB with the two leaves on one CPU (2 jobs,
/// 2026-11-28; 1.65-2.15 in 12 jobs the day before), as two copies in a row at the pair's own
/// speed take; 0.93-1.88 with the root sharing a CPU with a leaf (18 jobs), where the
/// set-up's scale is what tells the host's state. So receivers sharing a CPU copy one after
/// the other, each after the copies already queued on its CPU; where every receiver shares
/// its CPU with another, at `pair`'s costs, unscaled (no copy of the call runs alone to tell a
/// scale); where some receiver copies alone, at the scaled curve's costs, the scale fitted at
/// set-up with the same queueing. Why queue those too: 4 Open MPI ranks on 2 cores, root 0
/// after a barrier, enter so that the two receivers sharing a CPU rarely copy at once, while
/// from root 2 they did in most calls, and the second finished 4-6 us after the 6.3-6.7 us
/// predicted without queueing (16 KiB); the set-up (root 0) cannot fold that into its scale.
/// (Queueing them at the pair's costs, unscaled, put 126 of 160 sizes within 25% against 156,
/// 20 jobs alternating, 2026-11-28.)
#[derive(Clone, Copy, Debug)]
pub struct SharedCpus<'a> {
    /// For each rank, the lowest rank that ran on its CPU (`profile::placement::grouping`).
    /// One that does not name a rank of the call for each rank is ignored.
    pub grouping: &'a [u32],
    /// The pair's costs as measured, unscaled.
    pub pair: &'a SendCurve,
}

impl SharedCpus<'_> {
    /// Whether every receiver in `dag` (of `n` ranks) shares its CPU with another receiver, so
    /// that each copy queues behind another; false where the grouping is not one of `n` ranks
    /// (it is then ignored).
    pub(crate) fn all_queued(&self, dag: &PlanDag, n: usize) -> bool {
        let g = self.grouping;
        if !self.names_ranks(n) {
            return false;
        }
        let receives = |r: usize| !dag.deliveries[r].is_empty();
        (0..n)
            .filter(|&r| receives(r))
            .all(|r| (0..n).any(|q| q != r && receives(q) && g[q] == g[r]))
    }

    /// Whether the grouping names a rank of a call of `n` ranks for each of them (else it is
    /// ignored).
    fn names_ranks(&self, n: usize) -> bool {
        self.grouping.len() == n && self.grouping.iter().all(|&x| (x as usize) < n)
    }
}

/// How long after its receiver has the data a send that waits for the receiver completes: the
/// blocking send's time beyond the one-way time (both measured with the receiver in the call),
/// the acknowledgement's way back. Open MPI's sends of 512 B .. 2 KiB between the ranks of the
/// VM wait for their receiver and complete a round trip after they start (3 ranks on 2 cores:
/// send 3.39 us, one way 1.74 us), so a root whose receivers were in the call left 1.7 us
/// after they had the data; completing it when they had it predicted the root 10-40% short
/// at 1 KiB (`TREECAST_LOG=debug` per-rank medians, 8 jobs each of 2-4 ranks). From the
/// rendezvous sizes on the two times are equal and this is 0.
fn acknowledgement(c: &SendCost) -> f64 {
    (c.sender_s - c.one_way_s).max(0.0)
}

/// [`evaluate_on_one_host`] on a plan's graph already built for the message size (`n` ranks):
/// a fit evaluates one plan and size many times.
pub(crate) fn evaluate_dag_on_one_host(
    dag: &PlanDag,
    n: usize,
    curve: &SendCurve,
    issue_s: f64,
    enter: Option<&[f64]>,
    shared: Option<SharedCpus<'_>>,
) -> Result<CalibratedTimes, EstimateError> {
    let enter = checked_entries(enter, n)?;
    let entered = |r: u32| enter.map_or(0.0, |e| e[r as usize]);
    let issue_s = if issue_s.is_finite() { issue_s.max(0.0) } else { 0.0 };
    let shared = shared.filter(|s| s.names_ranks(n));
    // Where every receiver queues behind another, the pair's own costs.
    let costs = match shared.filter(|s| s.all_queued(dag, n)) {
        Some(sh) => sh.pair,
        None => curve,
    };
    // Per CPU (by its lowest rank), the copies placed on it: (start, end), by start.
    let mut busy: Vec<Vec<(f64, f64)>> = vec![Vec::new(); n];
    let mut free: Vec<f64> = Vec::with_capacity(dag.sends.len());
    let mut done: Vec<f64> = Vec::with_capacity(dag.sends.len());
    let mut rank_done: Vec<f64> = (0..n as u32).map(entered).collect();
    for s in &dag.sends {
        let on_cpu = shared.map(|sh| sh.grouping[s.to as usize] as usize);
        let c = costs.at(s.bytes);
        let mut t: f64 = s.prev.map_or(entered(s.from), |p| free[p]);
        for &d in &s.deps {
            t = t.max(done[d]);
        }
        free.push(t + issue_s);
        // The copy: from issue for one way, or from a late receiver's entry for its late
        // receive, whichever ends later; on a shared CPU, in its first gap from then on.
        let (start, copy) = if t + c.one_way_s >= entered(s.to) + c.late_recv_s {
            (t, c.one_way_s)
        } else {
            (entered(s.to), c.late_recv_s)
        };
        let usable = match on_cpu {
            Some(cpu) => first_gap(&mut busy[cpu], start, copy) + copy,
            None => start + copy,
        };
        done.push(usable);
        let complete = if c.waits_for_receiver {
            usable + acknowledgement(&c)
        } else {
            t + c.sender_s
        };
        let from = s.from as usize;
        rank_done[from] = rank_done[from].max(complete);
    }
    Ok(CalibratedTimes::from_deliveries(dag, &done, rank_done))
}

/// The earliest time from `start` at which a copy of `length` fits between those already on a
/// CPU (`busy`: (start, end) pairs, by start), which it is then added to. The sends are
/// evaluated in the plan's order, not in time: a receiver that enters late must not hold up
/// a CPU-mate's copy that ran before it entered.
fn first_gap(busy: &mut Vec<(f64, f64)>, start: f64, length: f64) -> f64 {
    let mut at = start;
    let mut i = 0;
    while i < busy.len() {
        let (a, b) = busy[i];
        if at + length <= a {
            break;
        }
        at = at.max(b);
        i += 1;
    }
    busy.insert(i, (at, at + length));
    at
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::trees;

    fn cost(bytes: u64, sender_us: f64, one_way_us: f64, late_us: f64, waits: bool) -> SendCost {
        SendCost {
            bytes,
            sender_s: sender_us * 1e-6,
            one_way_s: one_way_us * 1e-6,
            late_recv_s: late_us * 1e-6,
            waits_for_receiver: waits,
        }
    }

    fn curve() -> SendCurve {
        SendCurve::new(vec![
            cost(8, 0.1, 1.0, 0.1, false),
            cost(4096, 2.0, 3.0, 1.0, false),
            cost(32768, 6.0, 8.0, 6.0, true),
        ])
        .unwrap()
    }

    #[test]
    fn costs_are_interpolated_between_measured_sizes() {
        let c = curve();
        assert_eq!(
            c.at(1),
            SendCost {
                bytes: 1,
                ..c.points()[0]
            }
        );
        let mid = c.at(2052);
        assert!((mid.sender_s - 1.05e-6).abs() < 1e-12, "{mid:?}");
        assert!(!mid.waits_for_receiver);
        // Between an eager and a waiting size: assumed to wait.
        assert!(c.at(8192).waits_for_receiver);
        // Below a protocol switch (the late receive 0.08 us at 2 KiB, 2.31 at 4 KiB, Open MPI
        // on the VM) the 2 KiB protocol holds, along the 1-2 KiB segment: 3000 B at 2.09 us
        // one way, not the 3.1 of the line to 4 KiB.
        let c2 = SendCurve::new(vec![
            cost(1024, 3.81, 1.94, 0.07, true),
            cost(2048, 3.94, 2.02, 0.08, true),
            cost(4096, 6.42, 4.35, 2.31, true),
            cost(8192, 6.75, 4.66, 2.57, true),
        ])
        .unwrap();
        let below = c2.at(3000);
        let f = (3000.0 - 2048.0) / 1024.0;
        assert!((below.one_way_s - (2.02 + f * 0.08) * 1e-6).abs() < 1e-12, "{below:?}");
        assert!(
            (below.late_recv_s - (0.08 + f * 0.01) * 1e-6).abs() < 1e-12,
            "{below:?}"
        );
        assert_eq!(c2.at(4096), c2.points()[2]);
        // Past the switch, the line as before.
        let above = c2.at(6144);
        assert!((above.one_way_s - 4.505e-6).abs() < 1e-12, "{above:?}");
        // Beyond the last size, along the last slope: 4 us per 28 KiB of sender time.
        let far = c.at(32768 + 28672);
        assert!((far.sender_s - 10e-6).abs() < 1e-12, "{far:?}");
        // A size that read more than a larger one was disturbed: capped by the larger one.
        // Unusable points are dropped.
        let c = SendCurve::new(vec![
            cost(8, 1.0, 1.0, 0.1, false),
            cost(512, 0.5, 2.0, 0.1, false),
            cost(4096, f64::NAN, 2.0, 0.1, false),
        ])
        .unwrap();
        assert_eq!(c.points().len(), 2);
        assert_eq!(c.points()[0].sender_s, 0.5e-6);
        assert_eq!(c.points()[1].sender_s, 0.5e-6);
        assert!(SendCurve::new(vec![cost(8, 1.0, 1.0, 0.1, false)]).is_none());
    }

    #[test]
    fn a_lone_bump_is_lowered_but_steps_are_kept() {
        // The late receive of 256 KiB read 33.7 us between 10.6 at 128 KiB and 40.65 at 512
        // KiB (a job of 2026-11-29): lowered to 128 KiB's cost per byte, 21.2 us.
        let c = SendCurve::new(vec![
            cost(131072, 11.0, 11.1, 10.6, true),
            cost(262144, 21.0, 21.1, 33.7, true),
            cost(524288, 40.3, 40.45, 40.65, true),
        ])
        .unwrap();
        let p = c.points()[1];
        assert!((p.late_recv_s - 21.2e-6).abs() < 1e-12, "{p:?}");
        // Its other times cost no more per byte than both neighbours: kept.
        assert_eq!((p.sender_s, p.one_way_s), (21.0e-6, 21.1e-6));
        // A cache step (the cost per byte rises and stays) and a protocol switch (a jump, then
        // the new level) are kept.
        let steps = vec![
            cost(1024, 3.81, 1.94, 0.07, true),
            cost(2048, 3.94, 2.02, 0.08, true),
            cost(4096, 6.42, 4.35, 2.31, true),
            cost(8192, 6.75, 4.66, 2.57, true),
            cost(1 << 20, 80.0, 80.0, 80.0, true),
            cost(2 << 20, 160.0, 160.0, 160.0, true),
            cost(4 << 20, 480.0, 480.0, 480.0, true),
            cost(8 << 20, 960.0, 960.0, 960.0, true),
        ];
        assert_eq!(SendCurve::new(steps.clone()).unwrap().points(), &steps[..]);
        // The first size that waits for its receiver (its send 0.32 us against 0.08 at 256 B
        // and 0.33 at 1 KiB) is a step even where the costs per byte on either side agree.
        let switch = vec![
            cost(256, 0.08, 0.2, 0.07, false),
            cost(512, 0.32, 0.24, 0.07, true),
            cost(1024, 0.33, 0.28, 0.07, true),
        ];
        assert_eq!(SendCurve::new(switch.clone()).unwrap().points(), &switch[..]);
    }

    #[test]
    fn late_ranks_pay_only_what_is_left_when_they_enter() {
        // Root 0 sends 4 KiB to 1, then to 2 (a flat tree), issuing one send per 0.5 us.
        let plan = Plan::from_tree(0, &trees::flat(3, 0), 1, "flat");
        let c = curve();
        let us = |v: &[f64]| v.iter().map(|t| (t * 1e9).round() / 1e3).collect::<Vec<f64>>();
        let together = evaluate_on_one_host(&plan, 4096, &c, 0.5e-6, None, None).unwrap();
        // Eager: the root is done 2 us after its second send's issue; data 3 us after issue.
        assert_eq!(us(&together.rank_done_s), vec![2.5, 3.0, 3.5]);
        // Rank 2 enters 20 us late: its data is long there; it pays the late receive, 1 us.
        let late = evaluate_on_one_host(&plan, 4096, &c, 0.5e-6, Some(&[0.0, 0.0, 20e-6]), None).unwrap();
        assert_eq!(us(&late.rank_done_s), vec![2.5, 3.0, 21.0]);
        // A size whose send waits for its receiver holds the root until rank 2 has the data.
        let late = evaluate_on_one_host(&plan, 32768, &c, 0.5e-6, Some(&[0.0, 0.0, 20e-6]), None).unwrap();
        assert_eq!(us(&late.rank_done_s), vec![26.0, 8.0, 26.0]);
        assert!(evaluate_on_one_host(&plan, 8, &c, 0.5e-6, Some(&[0.0]), None).is_err());
    }

    #[test]
    fn a_send_that_waits_completes_when_the_acknowledgement_is_back() {
        // Open MPI's 1 KiB on the VM: the blocking send takes a round trip (3.4 us), twice the
        // one-way time, and waits for a late receiver.
        let c = SendCurve::new(vec![cost(8, 0.1, 1.0, 0.1, false), cost(1024, 3.4, 1.7, 0.1, true)]).unwrap();
        let plan = Plan::from_tree(0, &trees::flat(3, 0), 1, "flat");
        let us = |v: &[f64]| v.iter().map(|t| (t * 1e9).round() / 1e3).collect::<Vec<f64>>();
        // Receivers in the call: each send completes its blocking time after issue (the
        // second is issued 0.5 us after the first); the receivers leave one way after issue.
        let together = evaluate_on_one_host(&plan, 1024, &c, 0.5e-6, None, None).unwrap();
        assert_eq!(us(&together.rank_done_s), vec![3.9, 1.7, 2.2]);
        // Rank 2 enters 20 us late: it has the data after its late receive, and the root the
        // acknowledgement 1.7 us after that.
        let late = evaluate_on_one_host(&plan, 1024, &c, 0.5e-6, Some(&[0.0, 0.0, 20e-6]), None).unwrap();
        assert_eq!(us(&late.rank_done_s), vec![21.8, 1.7, 20.1]);
        // A rendezvous size whose blocking send reads no longer than one way adds nothing.
        assert_eq!(acknowledgement(&curve().at(32768)), 0.0);
    }

    #[test]
    fn receivers_on_one_cpu_copy_one_after_the_other_at_the_pairs_speed() {
        // 32 KiB from root 0 to 1 and 2 (a flat tree); the scaled curve costs twice the pair's.
        let pair = curve();
        let scaled = pair.scaled(|_| 2.0);
        let plan = Plan::from_tree(0, &trees::flat(3, 0), 1, "flat");
        let us = |v: &[f64]| v.iter().map(|t| (t * 1e9).round() / 1e3).collect::<Vec<f64>>();
        let run = |grouping: Option<&[u32]>, enter: Option<&[f64]>| {
            let shared = grouping.map(|grouping| SharedCpus { grouping, pair: &pair });
            us(&evaluate_on_one_host(&plan, 32768, &scaled, 0.5e-6, enter, shared)
                .unwrap()
                .rank_done_s)
        };
        // The root with leaf 1: no two receivers share a CPU, both copies at once, scaled
        // (16 us one way); the same without a grouping.
        assert_eq!(run(Some(&[0, 0, 2]), None), vec![16.5, 16.0, 16.5]);
        assert_eq!(run(None, None), vec![16.5, 16.0, 16.5]);
        // Leaves 1 and 2 on one CPU: 1 copies at the pair's 8 us, then 2 (the root waits for
        // both).
        assert_eq!(run(Some(&[0, 1, 1]), None), vec![16.0, 8.0, 16.0]);
        // Leaf 1 enters 20 us late: 2 copies first (issued 0.5 us after), then 1, its late
        // receive (6 us) after it entered.
        assert_eq!(run(Some(&[0, 1, 1]), Some(&[0.0, 20e-6, 0.0])), vec![26.0, 26.0, 8.5]);
        // A grouping that is not one of the call's ranks is ignored.
        assert_eq!(run(Some(&[0, 1, 7]), None), vec![16.5, 16.0, 16.5]);
        assert_eq!(run(Some(&[0, 1]), None), vec![16.5, 16.0, 16.5]);
        // 4 ranks, leaves 1 and 2 on one CPU and leaf 3 alone: a copy runs at once, so the
        // costs are the scaled curve's, and 1 and 2 still copy one after the other (2 from 16
        // to 32 us; without a grouping, both at once, as 3).
        let four = Plan::from_tree(0, &trees::flat(4, 0), 1, "flat");
        let times = |grouping: Option<&[u32]>, enter: Option<&[f64]>| {
            let shared = grouping.map(|grouping| SharedCpus { grouping, pair: &pair });
            us(&evaluate_on_one_host(&four, 32768, &scaled, 0.5e-6, enter, shared)
                .unwrap()
                .rank_done_s)
        };
        assert_eq!(times(Some(&[0, 1, 1, 3]), None), vec![32.0, 16.0, 32.0, 17.0]);
        assert_eq!(times(None, None), vec![17.0, 16.0, 16.5, 17.0]);
        // Leaf 2 entering after leaf 1's copy: nothing to queue behind, as without a grouping.
        let staggered = [0.0, 0.0, 20e-6, 0.0];
        assert_eq!(
            times(Some(&[0, 1, 1, 3]), Some(&staggered)),
            times(None, Some(&staggered))
        );
        assert_eq!(times(Some(&[0, 1, 1, 1]), None), vec![24.0, 8.0, 16.0, 24.0]);
    }
}
