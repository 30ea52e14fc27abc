//! Running a [`Plan`] on the flow engine with the execution semantics of [`crate::schedule`].
//!
//! Every receive is pre-posted, so a send starts moving data the moment it is issued. A rank
//! walks its op list in order: receives are skipped (they are posted), and the next send is
//! issued once every segment it carries has fully arrived at the rank — store-and-forward per
//! message, so an unsegmented plan forwards only complete messages and a segmented plan
//! pipelines segment by segment. With blocking sends a rank also waits until its previous send
//! has been delivered. The k-th send from a to b lands in the k-th receive at b from a, so a
//! delivery just marks the segments present at the receiver.
//!
//! With a per-message overhead `o` ([`SimOptions::send_overhead_s`], LogP's `o`) a rank's CPU
//! spends `o` on every send it issues and on every message it receives, one thing at a time: a
//! send waits until the CPU is free (a timer wakes the rank), and a delivered message is usable
//! `o` after both its arrival and the end of the CPU's previous work.
//!
//! With a wake-up time ([`SimOptions::wake_s`]) a message that lands on an idle rank (its CPU
//! free since before the arrival) is usable `wake + o` after it arrived; one that lands while
//! the rank is still busy waits only for the CPU, so a pipeline's later segments do not pay it.
//!
//! With CPU pools ([`SimOptions::cpu_pools`]) the ranks of a pool do that work on the pool's
//! CPUs: a piece of work is booked when it becomes ready (a woken rank's only once it is
//! awake), starts once the rank's previous work is done and one of the CPUs is free, and takes
//! the CPU that leaves the smallest idle gap.
//!
//! With a rendezvous threshold ([`SimOptions::rendezvous_bytes`]) a longer message's data
//! leaves only after a request-to-send / clear-to-send handshake: twice its path's latency plus
//! twice the per-message overhead after the send was issued (MPI libraries send long messages
//! this way; Open MPI over TCP from 64 KiB).
//!
//! Cost: O(ops) bookkeeping plus the engine's; segment presence is a bitset per rank
//! (ranks x nsegs bits).

use super::flow::{Delivery, FlowSim};
use super::{finish, placement, FlatOps, SimError, SimOptions, SimResult, TransferRecord};
use crate::schedule::{range_bounds, Op, Plan};
use crate::topology::{Topology, VertexId};

struct Run<'a> {
    topo: &'a Topology,
    plan: &'a Plan,
    bytes: u64,
    verts: Vec<VertexId>,
    blocking: bool,
    words: usize,
    have: Vec<u64>,
    got: Vec<u32>,
    done: Vec<f64>,
    cursor: Vec<usize>,
    active: Vec<u32>,
    /// Flat op numbering (engine tags) and channels.
    flat: &'a FlatOps,
    /// Issue time of every flat op (only when recording).
    issued: Vec<f64>,
    /// Send overhead (s) and, per rank, when its next send may be issued and whether a timer
    /// for that is pending.
    overhead: f64,
    /// Wake-up time of an idle rank, and whether ranks' CPU time is tracked at all (an
    /// overhead, a wake-up time or entry times).
    wake: f64,
    cpu: bool,
    next_free: Vec<f64>,
    /// Per rank its CPU pool, if it shares CPUs; per pool, when each of its CPUs is free.
    pool_of: Vec<Option<u32>>,
    pool_free: Vec<Vec<f64>>,
    /// Per rank, when its latest wake-up ends (messages landing before then share it).
    awake_at: Vec<f64>,
    waiting: Vec<bool>,
    /// With an overhead and recording: (first byte left, last byte left) of each delivered
    /// message, kept until its receive overhead ends.
    arrived: Vec<(f64, f64)>,
    /// Messages longer than this (bytes) go by rendezvous.
    rendezvous: f64,
    /// Per rank, when it enters the call (all 0 unless [`SimOptions::enter_s`]). When any
    /// entry is later than 0, CPU time is tracked (`cpu`) even without an overhead: a delivery
    /// is then taken in through the receive timer, so a message that arrives early waits for
    /// its receiver.
    enter: Vec<f64>,
}

/// Engine tags at or above this are timers; the low bits name the rank.
const TIMER: u64 = 1 << 63;
/// Engine tags with this bit (below [`TIMER`]) mark the end of a receive's overhead; the low
/// bits are the flat op of the send.
const RECEIVED: u64 = 1 << 62;
/// Engine tags with this bit mark the end of a rendezvous handshake: the send (low bits) may
/// put its data on the wire.
const DEFERRED: u64 = 1 << 61;
/// Engine tags with this bit mark a receiver awake after its wake-up: it takes in the message
/// of the send in the low bits.
const WOKEN: u64 = 1 << 60;

impl Run<'_> {
    /// When work of rank `r` that is ready at `ready` can start: after the rank's previous
    /// work and, in a pool, once one of the pool's CPUs is free.
    fn cpu_start(&self, r: usize, ready: f64) -> f64 {
        let own = ready.max(self.next_free[r]);
        match self.pool_of[r] {
            Some(p) => own.max(self.pool_free[p as usize].iter().copied().fold(f64::INFINITY, f64::min)),
            None => own,
        }
    }

    /// Book rank `r`'s CPU from `start` (from [`Self::cpu_start`]) for `busy` seconds: in a
    /// pool, the CPU that became free last by `start`, which leaves the smallest idle gap.
    fn book(&mut self, r: usize, start: f64, busy: f64) {
        self.next_free[r] = start + busy;
        if let Some(p) = self.pool_of[r] {
            let cpus = &mut self.pool_free[p as usize];
            let fit = cpus.iter_mut().filter(|c| **c <= start).max_by(|a, b| a.total_cmp(b));
            if let Some(c) = fit {
                *c = start + busy;
            }
        }
    }

    /// Receiver of flat send `f`, awake at `now`, takes its message in: `o` on its CPU, then
    /// the message is usable (a `RECEIVED` timer). A message that lands before its receiver
    /// has entered the call is taken up again at the entry (a `WOKEN` timer), not booked
    /// ahead: a pool books a CPU to the end of its work, so a booking at a late rank's entry
    /// held that CPU idle until then. On the emulated 3x3 (9 ranks on 2 CPUs) that made a root
    /// that entered early wait, in the model, for the entries of the ranks it sent to: 38-155
    /// us predicted against 42-47 us measured. Work behind the receiver's own is booked in
    /// the order it became ready.
    fn take_in(&mut self, sim: &mut FlowSim, f: usize, now: f64) {
        let src = self.flat.owner[f] as usize;
        let Op::Send { peer, .. } = self.plan.ops[src][f - self.flat.base[src]] else {
            unreachable!("only sends become flows")
        };
        let p = peer as usize;
        if now < self.enter[p] * (1.0 - 1e-12) {
            sim.timer(self.enter[p], WOKEN | f as u64);
            return;
        }
        let start = self.cpu_start(p, now);
        self.book(p, start, self.overhead);
        sim.timer(start + self.overhead, RECEIVED | f as u64);
    }

    fn has_all(&self, r: usize, start: u32, end: u32) -> bool {
        let row = &self.have[r * self.words..(r + 1) * self.words];
        (start..end).all(|s| row[(s / 64) as usize] >> (s % 64) & 1 == 1)
    }

    /// Put the data of flat send `f` on the wire.
    fn start(&self, sim: &mut FlowSim, f: usize) {
        let r = self.flat.owner[f] as usize;
        let Op::Send { peer, segs } = self.plan.ops[r][f - self.flat.base[r]] else {
            unreachable!("flat ops with channels are sends")
        };
        let (lo, hi) = range_bounds(self.bytes, self.plan.nsegs, segs);
        sim.send(
            self.verts[r],
            self.verts[peer as usize],
            (hi - lo) as f64,
            f as u64,
            Some(self.flat.channel[f]),
        );
    }

    /// Issue every send of rank `r` that is ready, in list order.
    fn advance_rank(&mut self, r: usize, sim: &mut FlowSim) {
        let ops = &self.plan.ops[r];
        while self.cursor[r] < ops.len() {
            match ops[self.cursor[r]] {
                Op::Recv { .. } => self.cursor[r] += 1,
                Op::Send { peer, segs } => {
                    if (self.blocking && self.active[r] > 0) || !self.has_all(r, segs.start, segs.end) {
                        return;
                    }
                    if self.cpu {
                        let now = sim.now();
                        let start = self.cpu_start(r, now);
                        if now < start * (1.0 - 1e-12) {
                            if !self.waiting[r] {
                                self.waiting[r] = true;
                                sim.timer(start, TIMER | r as u64);
                            }
                            return;
                        }
                        self.book(r, now, self.overhead);
                    }
                    let f = self.flat.base[r] + self.cursor[r];
                    let (lo, hi) = range_bounds(self.bytes, self.plan.nsegs, segs);
                    if !self.issued.is_empty() {
                        self.issued[f] = sim.now();
                    }
                    if (hi - lo) as f64 > self.rendezvous {
                        // The data waits for the receiver's answer to a request to send.
                        let (a, b) = (self.verts[r], self.verts[peer as usize]);
                        let latency: f64 = self
                            .topo
                            .path(a, b)
                            .iter()
                            .map(|d| self.topo.dir_params(*d).latency_s)
                            .sum();
                        // The answer leaves once the request is in and the receiver has entered.
                        let answer = (sim.now() + latency + self.overhead).max(self.enter[peer as usize]);
                        sim.timer(answer + latency + self.overhead, DEFERRED | f as u64);
                    } else {
                        self.start(sim, f);
                    }
                    self.active[r] += 1;
                    self.cursor[r] += 1;
                }
            }
        }
    }
}

pub(crate) fn run(topo: &Topology, plan: &Plan, bytes: u64, opts: &SimOptions) -> Result<SimResult, SimError> {
    if !opts.trusted_plan {
        plan.validate().map_err(SimError::InvalidPlan)?;
    } else if plan.ops.len() != plan.nranks as usize || plan.root >= plan.nranks || plan.nsegs == 0 {
        return Err(SimError::MalformedPlan);
    }
    let verts = placement::resolve(topo, plan.nranks, opts.placement.as_deref())?;
    let n = plan.nranks as usize;
    let words = (plan.nsegs as usize).div_ceil(64);
    if let Some((r, p)) = plan
        .ops
        .iter()
        .enumerate()
        .find_map(|(r, ops)| ops.iter().find(|o| o.peer() as usize >= n).map(|o| (r, o.peer())))
    {
        return Err(SimError::UnknownPeer { rank: r, peer: p });
    }
    let flat = FlatOps::new(&plan.ops, |op| op.is_send().then(|| op.peer()));
    let total = flat.owner.len();
    let root = plan.root as usize;
    let mut have = vec![0u64; n * words];
    for s in 0..plan.nsegs as usize {
        have[root * words + s / 64] |= 1 << (s % 64);
    }
    let mut got = vec![0u32; n];
    got[root] = plan.nsegs;
    let enter = match &opts.enter_s {
        Some(e) if e.len() == n && e.iter().all(|t| t.is_finite() && *t >= 0.0) => e.clone(),
        Some(_) => return Err(SimError::BadEntries { ranks: n }),
        None => vec![0.0; n],
    };
    let gated = enter.iter().any(|&t| t > 0.0);
    let (pool_of, pool_free) = match &opts.cpu_pools {
        None => (vec![None; n], Vec::new()),
        Some(p) => {
            let named = p
                .pool_of
                .iter()
                .flatten()
                .all(|&q| p.cpus.get(q as usize).is_some_and(|&c| c > 0));
            if p.pool_of.len() != n || !named {
                return Err(SimError::BadCpuPools { ranks: n });
            }
            (
                p.pool_of.clone(),
                p.cpus.iter().map(|&c| vec![0.0; c as usize]).collect(),
            )
        }
    };
    let mut done = vec![f64::NAN; n];
    done[root] = enter[root];
    let mut run = Run {
        topo,
        plan,
        bytes,
        verts,
        blocking: opts.blocking_sends,
        words,
        have,
        got,
        done,
        cursor: vec![0; n],
        active: vec![0; n],
        flat: &flat,
        issued: if opts.record { vec![0.0; total] } else { Vec::new() },
        overhead: opts.send_overhead_s.max(0.0),
        wake: opts.wake_s.max(0.0),
        cpu: opts.send_overhead_s > 0.0 || opts.wake_s > 0.0 || gated,
        next_free: enter.clone(),
        pool_of,
        pool_free,
        awake_at: vec![f64::NEG_INFINITY; n],
        waiting: vec![false; n],
        arrived: if opts.record && (opts.send_overhead_s > 0.0 || opts.wake_s > 0.0 || gated) {
            vec![(0.0, 0.0); total]
        } else {
            Vec::new()
        },
        rendezvous: opts.rendezvous_bytes.unwrap_or(f64::INFINITY),
        enter,
    };
    let mut sim = FlowSim::new(topo);
    sim.set_audit(opts.audit);
    sim.set_full_resolve(opts.full_resolve);
    for b in &opts.buckets {
        sim.set_bucket(
            b.link,
            b.forward,
            b.depth_bytes,
            b.level_bytes,
            b.peak_bps,
            b.sustained_bps,
        );
    }
    for r in 0..n {
        run.advance_rank(r, &mut sim);
    }
    let mut transfers = Vec::new();
    let mut out: Vec<Delivery> = Vec::new();
    while sim.advance(&mut out).is_some() {
        for d in out.drain(..) {
            if d.tag >= TIMER {
                let r = (d.tag - TIMER) as usize;
                run.waiting[r] = false;
                run.advance_rank(r, &mut sim);
                continue;
            }
            if d.tag & DEFERRED != 0 {
                run.start(&mut sim, (d.tag & !DEFERRED) as usize);
                continue;
            }
            if d.tag & WOKEN != 0 {
                let f = (d.tag & !WOKEN) as usize;
                run.take_in(&mut sim, f, d.time);
                continue;
            }
            let received = d.tag & RECEIVED != 0;
            let f = (d.tag & !RECEIVED) as usize;
            let src = flat.owner[f] as usize;
            let Op::Send { peer, segs } = plan.ops[src][f - flat.base[src]] else {
                unreachable!("only sends become flows")
            };
            let p = peer as usize;
            if run.cpu && !received {
                // The data is here; the receiver's CPU takes `o` once it is free, after waking
                // up if it had nothing to do (messages that land while it wakes wait for the
                // same wake-up). The CPU is booked only once the rank is awake, so a pool's
                // CPUs serve others meanwhile.
                let ready = if d.time > run.next_free[p] && run.wake > 0.0 {
                    if run.awake_at[p] <= d.time {
                        run.awake_at[p] = d.time + run.wake;
                    }
                    run.awake_at[p]
                } else {
                    d.time
                };
                if ready > d.time {
                    sim.timer(ready, WOKEN | f as u64);
                } else {
                    run.take_in(&mut sim, f, d.time);
                }
                run.active[src] -= 1;
                if opts.record {
                    run.arrived[f] = (d.start, d.src_done);
                }
                if run.blocking {
                    run.advance_rank(src, &mut sim);
                }
                continue;
            }
            for s in segs.range() {
                let w = &mut run.have[p * words + (s / 64) as usize];
                if *w >> (s % 64) & 1 == 0 {
                    *w |= 1 << (s % 64);
                    run.got[p] += 1;
                }
            }
            if run.got[p] == plan.nsegs && run.done[p].is_nan() {
                run.done[p] = d.time;
            }
            if !received {
                run.active[src] -= 1;
            }
            if opts.record {
                let (lo, hi) = range_bounds(bytes, plan.nsegs, segs);
                let (start_s, src_done_s) = if received {
                    run.arrived[f]
                } else {
                    (d.start, d.src_done)
                };
                transfers.push(TransferRecord {
                    src: src as u32,
                    dst: peer,
                    segs: Some(segs),
                    bytes: hi - lo,
                    issued_s: run.issued[f],
                    start_s,
                    src_done_s,
                    end_s: d.time,
                });
            }
            run.advance_rank(p, &mut sim);
            if run.blocking && !received {
                run.advance_rank(src, &mut sim);
            }
        }
    }
    for r in 0..n {
        if run.cursor[r] < plan.ops[r].len() {
            return Err(SimError::Deadlock {
                rank: r,
                op: run.cursor[r],
            });
        }
        if run.got[r] < plan.nsegs {
            return Err(SimError::MissingData { rank: r });
        }
    }
    Ok(finish(sim, run.done, transfers, opts.record))
}
