//! The flow-level engine: flows over tree paths, exact max-min sharing, per-hop latency.
//!
//! # Model (documented precisely because the planner trusts its numbers)
//!
//! A *flow* moves `B` bytes from one vertex to another along the unique tree path, links
//! `1..n` with one-way latencies `d_i` and bandwidths `b_i`. Let `o_i = d_1 + .. + d_{i-1}`
//! (the latency of the links *before* link i) and `D = d_1 + .. + d_n`.
//!
//! * The flow's **head** reaches link i at `t0 + o_i`; only from then on does the flow compete
//!   for link i's capacity (bytes enter link i after the latencies of the links before it).
//! * The flow has **one rate** `x(t)` along its whole path (switches are buffer-less cut-through
//!   crossbars, as in MFS). The rate is the flow's max-min fair share among the flows present on
//!   each link it has reached, and never more than `min_i b_i`: the sender paces at the path's
//!   bottleneck even before its head gets there, as TCP and RDMA senders do after the first RTT.
//! * The source emits bytes at `x(t)` until all `B` have left, at `T_src`. The flow then leaves
//!   every link at once, and the **receiver has the data at `T_src + D`**.
//!
//! Unshared, `x = min b_i` throughout, so the receiver completes at exactly
//! `t0 + D + B / min b_i`: the [Hourai2004] cost model. A link is charged from the moment the head
//! arrives until the source has sent everything, so no link ever carries more than its capacity
//! (the allocation is feasible at every instant). The approximation: a rate change is felt at
//! once along the whole path, rather than `o_i` later at link i; with microsecond latencies and
//! millisecond transfers the difference is far below anything MPI timing can resolve.
//!
//! A link direction can be *policed* by a token bucket ([`FlowSim::set_bucket`], for predictions
//! across the emulated cluster's `tc tbf` uplinks): its capacity is its peak while the bucket
//! holds tokens and its sustained rate once they are spent, and an `Empty` event marks the
//! switch. Flows are charged on the links up to their last policed one from their start, so
//! a bucket counts every byte that crosses it.
//!
//! Messages between the same pair on the same *channel* (the driver passes one per ordered rank
//! pair) are FIFO: the next starts when the previous has left the source, as on one TCP
//! connection or one MPI pair under the non-overtaking rule. Without that, a rank that posts all
//! its segments at once would share its link among them and lose the pipeline.
//!
//! Two honest caveats. (1) Bytes a flow streams before its head reaches a shared link are not
//! charged there (at most `o_i x min b_i` per flow and link): SMPI, which charges all latency
//! first, agrees within 0.5% on contended flows (`tests/simgrid_crossval.rs`), but plans with
//! very small segments under contention look slightly better than they are. (2) Timelines with
//! many near-simultaneous events (e.g. a randomly placed all-to-all with blocking sends) are
//! sensitive to floating-point rounding: which of two flows finishes "first" can flip, and
//! blocking sends amplify that into a different schedule. Runs are deterministic, and two
//! solvers that are equal in exact arithmetic (this one and a full re-solve) agree exactly on
//! regular patterns but only to about 2% on the random 256-node all-to-all.
//!
//! # Algorithm and cost
//!
//! Event driven: the next event is a flow finishing at its source (time from its current rate and
//! remaining bytes), a head reaching a link, or a delivery; there are no time steps. Events at
//! one instant are handled as a batch, then the rates are re-solved once.
//!
//! Re-solving is *local and exact*: only flows an event can affect (new flows, flows whose head
//! moved, flows bottlenecked where a flow left) are re-filled by progressive filling, with the
//! other flows' rates held fixed; the result is then checked against the max-min optimality
//! condition on every link the re-filled flows touch, and flows that violate it are added and
//! the fill repeated. Max-min allocations are unique, so this yields exactly what a full solve
//! would (tests compare against [`super::maxmin::reference`]). A re-solve costs
//! O(I_W log I_W + P) for I_W incidences of the re-filled flows and P flows present on the
//! *full* links they touch (links that are not full cannot hold a violation and are not
//! scanned); typically a handful. Two shortcuts keep most events away from the solver: a head
//! reaching a link with room for its current rate changes nothing, and a flow leaving a link
//! that was not full frees nobody. Source completions sit in an indexed heap updated in place
//! (O(log F) per rate change, no stale events). Memory is O(links + concurrent flows x path
//! length); flow slots, per-link lists and solver scratch are reused, so the steady state
//! allocates nothing.

mod solve;

use super::iheap::IndexedHeap;
use super::maxmin::Level;
use super::network::{Network, PathHop, NONE};
use crate::topology::{Topology, VertexId};
use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, VecDeque};

/// Relative tolerance for "saturated" and rate comparisons in the optimality check.
const EPS: f64 = 1e-9;
/// Events closer than this (relative) to the batch time are handled in the same batch.
const BATCH_TOL: f64 = 1e-12;
/// Bottleneck marker: the flow runs at its own rate cap (the path's slowest link).
const BN_CAP: u32 = u32::MAX - 1;
/// After this many local expansions, re-solve everything (rare; bounds the worst case).
const MAX_EXPANSIONS: usize = 6;
/// Tokens an empty bucket must have gained before its link passes its peak again (bytes):
/// one packet. Without a floor a link saturated at the sustained rate would flip between the
/// two rates at every event.
const MIN_TOKENS: f64 = 1500.0;

/// A message that has fully arrived.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Delivery {
    /// The driver's handle for the message.
    pub tag: u64,
    /// When the first byte left the source (after waiting for its channel).
    pub start: f64,
    /// When the last byte left the source.
    pub src_done: f64,
    /// When the receiver had every byte.
    pub time: f64,
}

#[derive(Clone, Copy, Debug)]
struct Hop {
    res: u32,
    /// Head arrival offset from the flow's start (sum of latencies of earlier links).
    offset: f64,
    /// Index in the resource's `present` list, or `NONE` before the head arrived.
    pos: u32,
}

#[derive(Clone, Debug, Default)]
struct Flow {
    hops: Vec<Hop>,
    /// `hops[..arrived]` are present (their head has arrived).
    arrived: u32,
    start: f64,
    latency: f64,
    /// Bytes still at the source at time `t_upd`.
    left: f64,
    t_upd: f64,
    rate: f64,
    cap: f64,
    /// Resource the flow is bottlenecked at (`BN_CAP`, or `NONE` when unbounded).
    bn: u32,
    /// Bumped on slot reuse: invalidates stale `Head` events.
    occ: u32,
    tag: u64,
    channel: u32,
    live: bool,
    // Solver scratch.
    mark: u64,
    x_new: f64,
    bn_new: u32,
    frozen: bool,
    /// Position in `w` during a fill.
    wpos: u32,
}

#[derive(Clone, Debug, Default)]
struct Resource {
    cap: f64,
    load: f64,
    /// Flows whose head has reached this resource: (flow, hop index).
    present: Vec<(u32, u32)>,
    /// Time `carried` was last brought up to date.
    t_load: f64,
    /// Integral of load over time: bytes carried.
    carried: f64,
    /// Largest settled load ever allocated.
    peak: f64,
    /// The load is a transient (a flow arrived without fitting) awaiting the re-solve.
    unsettled: bool,
    /// A token bucket policing this resource ([`FlowSim::set_bucket`]).
    bucket: Option<Bucket>,
    // Solver scratch.
    lmark: u64,
    local: u32,
    /// `gen + 1` of the re-solve it is queued for in `loosened`.
    loose: u64,
}

/// A token bucket on a resource: the resource's capacity is `peak` while it holds tokens and
/// `sustained` once they are spent; tokens accrue at `sustained` less the load, up to `depth`.
#[derive(Clone, Copy, Debug, Default)]
struct Bucket {
    tokens: f64,
    depth: f64,
    peak: f64,
    sustained: f64,
    /// Bumped whenever the bucket's emptying is rescheduled: invalidates stale `Empty` events.
    occ: u32,
    /// When its scheduled `Empty` event falls (infinite: none).
    empty_at: f64,
}

impl Resource {
    fn account(&mut self, now: f64) {
        if now > self.t_load {
            let dt = now - self.t_load;
            self.carried += self.load * dt;
            if let Some(b) = &mut self.bucket {
                b.tokens = (b.tokens + (b.sustained - self.load) * dt).clamp(0.0, b.depth);
            }
            self.t_load = now;
        }
    }
    /// Set the allocated load at `now`. Transient values between a presence change and the
    /// re-solve at the same instant are not recorded as peaks; only settled ones are. A link
    /// left transient stays so until the re-solve sets it ([`settle`](Self::settle)): a flow
    /// leaving it meanwhile (at the same instant) lowers a load that is itself not settled.
    /// The re-solve's allocation: settled by definition.
    fn settle(&mut self, now: f64, load: f64) {
        self.unsettled = false;
        self.set_load(now, load, true);
    }

    fn set_load(&mut self, now: f64, load: f64, settled: bool) {
        self.account(now);
        self.load = if self.present.is_empty() { 0.0 } else { load.max(0.0) };
        if !settled {
            self.unsettled = true;
        }
        if settled && !self.unsettled && self.load > self.peak {
            self.peak = self.load;
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Ev {
    Head {
        flow: u32,
        occ: u32,
    },
    /// Index into `FlowSim::deliveries` (kept out of the heap to keep events small).
    Deliver {
        slot: u32,
    },
    /// A resource's token bucket runs out of tokens (if `occ` is still its bucket's).
    Empty {
        res: u32,
        occ: u32,
    },
}

#[derive(Clone, Copy, Debug)]
struct Event {
    t: f64,
    seq: u64,
    ev: Ev,
}
impl PartialEq for Event {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Event {}
impl PartialOrd for Event {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Event {
    // Min-heap on (time, sequence): ties resolve in the order events were created.
    fn cmp(&self, o: &Self) -> Ordering {
        o.t.total_cmp(&self.t).then(o.seq.cmp(&self.seq))
    }
}

#[derive(Clone, Copy, Debug)]
struct Pending {
    src: VertexId,
    dst: VertexId,
    bytes: f64,
    tag: u64,
}

#[derive(Clone, Debug, Default)]
struct Channel {
    busy: bool,
    queue: VecDeque<Pending>,
}

/// Per-link scratch of one local solve.
#[derive(Clone, Copy, Debug, Default)]
struct LocalLink {
    res: u32,
    cnt: u32,
    unfrozen: u32,
    avail: f64,
    frozen_sum: f64,
    fixed: f64,
    cap: f64,
    /// Filling round that last changed this link's level.
    touch: u32,
    load_new: f64,
    max_w: f64,
    min_w_bn: f64,
}

/// Counters describing the work an engine did (for benchmarks and reports).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct EngineStats {
    pub flows: u64,
    pub events: u64,
    pub resolves: u64,
    /// Sum over re-solves of the number of flows re-filled.
    pub refilled: u64,
    pub full_resolves: u64,
    /// Progressive fillings run (a re-solve runs one per expansion of its flow set).
    pub fills: u64,
    /// Flow-link incidences those fillings processed.
    pub fill_incidences: u64,
    pub max_concurrent_flows: usize,
    /// Approximate heap bytes of the engine's structures at their peak (they never shrink).
    pub memory_bytes: usize,
}

/// Usage of one capacity resource over a run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ResourceUsage {
    /// Link index in the topology.
    pub link: usize,
    /// `Some(true)` for the a->b direction, `Some(false)` for b->a, `None` when both directions
    /// share the link (half duplex).
    pub forward: Option<bool>,
    pub capacity_bps: f64,
    /// Bytes carried (integral of the allocated rate).
    pub bytes: f64,
    /// Largest allocated rate (B/s); never above `capacity_bps` (up to rounding).
    pub peak_bps: f64,
}

/// The event-driven flow simulator. Drivers call [`FlowSim::send`] at the current time and
/// [`FlowSim::advance`] to run until the next deliveries.
pub struct FlowSim {
    net: Network,
    flows: Vec<Flow>,
    free: Vec<u32>,
    res: Vec<Resource>,
    channels: Vec<Channel>,
    events: BinaryHeap<Event>,
    /// Predicted source-completion time of every sending flow with a positive rate.
    done: IndexedHeap,
    deliveries: Vec<Delivery>,
    free_deliveries: Vec<u32>,
    seq: u64,
    now: f64,
    dirty: bool,
    live: usize,
    seeds: Vec<u32>,
    /// Full links a flow left since the last re-solve.
    loosened: Vec<u32>,
    // Solver scratch, reused across re-solves.
    gen: u64,
    lgen: u64,
    w: Vec<u32>,
    locals: Vec<LocalLink>,
    adj_off: Vec<u32>,
    adj: Vec<u32>,
    heap_buf: Vec<Reverse<(Level, u32)>>,
    inc: Vec<u32>,
    w_off: Vec<u32>,
    caps: Vec<(Level, u32)>,
    touched: Vec<u32>,
    path: Vec<PathHop>,
    path_scratch: Vec<PathHop>,
    stats: EngineStats,
    audit: bool,
    full: bool,
    /// Resources with a token bucket.
    bucketed: Vec<u32>,
}

impl FlowSim {
    pub fn new(topo: &Topology) -> FlowSim {
        let net = Network::new(topo);
        let res = net
            .res_cap
            .iter()
            .map(|&cap| Resource {
                cap,
                ..Resource::default()
            })
            .collect();
        FlowSim {
            net,
            flows: Vec::new(),
            free: Vec::new(),
            res,
            channels: Vec::new(),
            events: BinaryHeap::new(),
            done: IndexedHeap::default(),
            deliveries: Vec::new(),
            free_deliveries: Vec::new(),
            seq: 0,
            now: 0.0,
            dirty: false,
            live: 0,
            seeds: Vec::new(),
            loosened: Vec::new(),
            gen: 0,
            lgen: 0,
            w: Vec::new(),
            locals: Vec::new(),
            adj_off: Vec::new(),
            adj: Vec::new(),
            heap_buf: Vec::new(),
            inc: Vec::new(),
            w_off: Vec::new(),
            caps: Vec::new(),
            touched: Vec::new(),
            path: Vec::new(),
            path_scratch: Vec::new(),
            stats: EngineStats::default(),
            audit: false,
            full: false,
            bucketed: Vec::new(),
        }
    }

    /// Police one direction of topology link `link` (`forward`: from its `a` to its `b`; a
    /// half-duplex link's one resource either way) with a token bucket, before anything is
    /// sent: it passes `peak_bps` while it holds tokens, `level_bytes` of them to start with,
    /// and `sustained_bps` once they are spent, accruing tokens at `sustained_bps` less what it
    /// carries, up to `depth_bytes`. Why in the engine: a policed link passes a call's first
    /// bytes at its peak and the rest at its sustained rate, so the first messages of a call
    /// arrive sooner than any one rate for the call's bytes says (on the emulated 2x4 cluster,
    /// the library's 4 KiB binary tree sends four messages over one policed uplink, and one
    /// rate for all four made the first wait on the bytes of all four: +36 .. +62% where the
    /// bucket was below full). `false` when the link has no such direction.
    pub fn set_bucket(
        &mut self,
        link: usize,
        forward: bool,
        depth_bytes: f64,
        level_bytes: f64,
        peak_bps: f64,
        sustained_bps: f64,
    ) -> bool {
        let Some(r) = (0..self.res.len()).find(|&i| match self.net.res_link[i] {
            (l, Some(f)) => l == link && f == forward,
            (l, None) => l == link,
        }) else {
            return false;
        };
        let tokens = level_bytes.clamp(0.0, depth_bytes.max(0.0));
        let res = &mut self.res[r];
        res.bucket = Some(Bucket {
            tokens,
            depth: depth_bytes.max(0.0),
            peak: peak_bps,
            sustained: sustained_bps,
            occ: 0,
            empty_at: f64::INFINITY,
        });
        res.cap = if tokens >= MIN_TOKENS { peak_bps } else { sustained_bps };
        self.net.set_res_bandwidth(r as u32, peak_bps);
        if !self.bucketed.contains(&(r as u32)) {
            self.bucketed.push(r as u32);
        }
        true
    }

    /// Bring every bucket up to now: an empty one that has gained [`MIN_TOKENS`] while its
    /// load stayed under the sustained rate passes its peak again (its flows re-solved), and
    /// one passing more than its sustained rate has its emptying scheduled. `true` when a
    /// capacity changed (a re-solve is due).
    fn pace_buckets(&mut self) -> bool {
        let now = self.now;
        let mut changed = false;
        for i in 0..self.bucketed.len() {
            let r = self.bucketed[i];
            let res = &mut self.res[r as usize];
            res.account(now);
            let Some(mut b) = res.bucket else { continue };
            if res.cap < b.peak && b.tokens >= MIN_TOKENS {
                res.cap = b.peak;
                if res.loose != self.gen + 1 {
                    res.loose = self.gen + 1;
                    self.loosened.push(r);
                }
                self.dirty = true;
                changed = true;
            }
            let drain = res.load - b.sustained;
            let at = if res.cap >= b.peak && drain > b.sustained * EPS {
                now + b.tokens / drain
            } else {
                f64::INFINITY
            };
            // The same load drains the same tokens by the same time: reschedule only on a change.
            let moved = if at.is_finite() && b.empty_at.is_finite() {
                (at - b.empty_at).abs() > BATCH_TOL * at.abs().max(1e-9)
            } else {
                at.is_finite() != b.empty_at.is_finite()
            };
            if !moved {
                continue;
            }
            b.occ = b.occ.wrapping_add(1);
            b.empty_at = at;
            res.bucket = Some(b);
            if at.is_finite() {
                self.push(at, Ev::Empty { res: r, occ: b.occ });
            }
        }
        changed
    }

    /// An `Empty` event its bucket has since rescheduled.
    fn stale(&self, ev: Ev) -> bool {
        match ev {
            Ev::Empty { res, occ } => self.res[res as usize].bucket.is_none_or(|b| b.occ != occ),
            _ => false,
        }
    }

    /// A bucket's tokens are spent: its resource passes the sustained rate; every flow on it
    /// is re-solved.
    fn empty_bucket(&mut self, r: u32, occ: u32) {
        let now = self.now;
        if self.stale(Ev::Empty { res: r, occ }) {
            return;
        }
        let res = &mut self.res[r as usize];
        res.account(now);
        let Some(b) = res.bucket.as_mut() else { return };
        b.tokens = 0.0;
        b.empty_at = f64::INFINITY;
        res.cap = b.sustained;
        for &(g, _) in &res.present {
            self.seeds.push(g);
        }
        self.dirty = true;
    }

    /// Check feasibility and max-min optimality against the reference solver after every
    /// re-solve (slow; for tests). Panics on a violation.
    pub fn set_audit(&mut self, on: bool) {
        self.audit = on;
    }

    /// Solve the rates of everything sent so far without advancing time.
    pub fn settle(&mut self) {
        if self.dirty {
            self.resolve();
        }
    }

    /// Current rate (B/s) of every flow that is sending, with its tag.
    pub fn rates(&self) -> Vec<(u64, f64)> {
        self.flows.iter().filter(|f| f.live).map(|f| (f.tag, f.rate)).collect()
    }

    /// Re-fill every sending flow at every re-solve instead of only those an event can affect
    /// (same results; the baseline the incremental solver is benchmarked against).
    pub fn set_full_resolve(&mut self, on: bool) {
        self.full = on;
    }

    /// Current simulated time (seconds).
    pub fn now(&self) -> f64 {
        self.now
    }

    pub fn stats(&self) -> EngineStats {
        EngineStats {
            memory_bytes: self.memory_bytes(),
            ..self.stats
        }
    }

    /// Per-resource usage so far.
    pub fn usage(&mut self) -> Vec<ResourceUsage> {
        let now = self.now;
        self.res
            .iter_mut()
            .enumerate()
            .map(|(i, r)| {
                r.account(now);
                let (link, forward) = self.net.res_link[i];
                ResourceUsage {
                    link,
                    forward,
                    capacity_bps: r.cap,
                    bytes: r.carried,
                    peak_bps: r.peak,
                }
            })
            .collect()
    }

    /// Approximate heap bytes held by the engine (flow slots, per-link lists, queues, scratch).
    pub fn memory_bytes(&self) -> usize {
        use std::mem::size_of;
        let flows: usize = self
            .flows
            .iter()
            .map(|f| size_of::<Flow>() + f.hops.capacity() * size_of::<Hop>())
            .sum();
        let res: usize = self
            .res
            .iter()
            .map(|r| size_of::<Resource>() + r.present.capacity() * size_of::<(u32, u32)>())
            .sum();
        let chans: usize = self
            .channels
            .iter()
            .map(|c| size_of::<Channel>() + c.queue.capacity() * size_of::<Pending>())
            .sum();
        flows
            + res
            + chans
            + self.events.capacity() * size_of::<Event>()
            + self.done.capacity_bytes()
            + self.locals.capacity() * size_of::<LocalLink>()
            + (self.adj.capacity() + self.adj_off.capacity() + self.w.capacity() + self.seeds.capacity()) * 4
            + self.heap_buf.capacity() * size_of::<Reverse<(Level, u32)>>()
            + (self.inc.capacity() + self.w_off.capacity()) * 4
            + self.caps.capacity() * size_of::<(Level, u32)>()
            + self.touched.capacity() * 4
            + self.deliveries.capacity() * size_of::<Delivery>()
            + self.free_deliveries.capacity() * 4
            + self.net.num_resources() * 40
    }

    fn push_delivery(&mut self, d: Delivery) {
        let slot = match self.free_deliveries.pop() {
            Some(i) => {
                self.deliveries[i as usize] = d;
                i
            }
            None => {
                self.deliveries.push(d);
                (self.deliveries.len() - 1) as u32
            }
        };
        self.push(d.time, Ev::Deliver { slot });
    }

    fn push(&mut self, t: f64, ev: Ev) {
        self.seq += 1;
        self.events.push(Event { t, seq: self.seq, ev });
    }

    /// A wake-up: `advance` returns a [`Delivery`] with `tag` at time `t` (>= now), carrying no
    /// data (drivers use it to resume work they deferred, e.g. a send overhead).
    pub fn timer(&mut self, t: f64, tag: u64) {
        let t = t.max(self.now);
        self.push_delivery(Delivery {
            tag,
            start: t,
            src_done: t,
            time: t,
        });
    }

    /// Send `bytes` from vertex `src` to vertex `dst` now. `channel` (dense ids chosen by the
    /// driver) makes messages FIFO: one waits until the previous one on its channel has left
    /// the source. `tag` comes back in the [`Delivery`].
    pub fn send(&mut self, src: VertexId, dst: VertexId, bytes: f64, tag: u64, channel: Option<u32>) {
        let p = Pending { src, dst, bytes, tag };
        match channel {
            Some(c) => {
                let c = c as usize;
                if c >= self.channels.len() {
                    self.channels.resize_with(c + 1, Channel::default);
                }
                if self.channels[c].busy {
                    self.channels[c].queue.push_back(p);
                } else {
                    self.start_flow(p, c as u32);
                }
            }
            None => self.start_flow(p, NONE),
        }
    }

    fn start_flow(&mut self, p: Pending, channel: u32) {
        self.stats.flows += 1;
        let now = self.now;
        self.net.path_into(p.src, p.dst, &mut self.path, &mut self.path_scratch);
        let latency: f64 = self.path.iter().map(|h| h.latency).sum();
        if p.bytes <= 0.0 || self.path.is_empty() {
            // Nothing to stream: only the latency, and the channel is never held.
            let d = Delivery {
                tag: p.tag,
                start: now,
                src_done: now,
                time: now + latency,
            };
            self.push_delivery(d);
            return;
        }
        let f = match self.free.pop() {
            Some(f) => f,
            None => {
                self.flows.push(Flow::default());
                (self.flows.len() - 1) as u32
            }
        };
        if channel != NONE {
            self.channels[channel as usize].busy = true;
        }
        // A token bucket counts every byte that passes it: a flow is charged on the links up to
        // its last policed one from its start, not from when its head gets there (a 4 KiB
        // message at a policer's peak leaves its source before its head crosses a few
        // microseconds of links, and would otherwise spend no tokens at all).
        let policed = match self.bucketed.is_empty() {
            true => None,
            false => self
                .path
                .iter()
                .rposition(|h| self.res[h.res as usize].bucket.is_some()),
        };
        let fl = &mut self.flows[f as usize];
        fl.hops.clear();
        let mut offset = 0.0;
        let mut cap = f64::INFINITY;
        for (i, h) in self.path.iter().enumerate() {
            fl.hops.push(Hop {
                res: h.res,
                offset: if policed.is_some_and(|k| i <= k) { 0.0 } else { offset },
                pos: NONE,
            });
            offset += h.latency;
            cap = cap.min(h.bandwidth);
        }
        fl.arrived = 0;
        fl.start = now;
        fl.latency = latency;
        fl.left = p.bytes;
        fl.t_upd = now;
        fl.rate = 0.0;
        fl.cap = cap;
        fl.bn = NONE;
        fl.occ = fl.occ.wrapping_add(1);
        fl.tag = p.tag;
        fl.channel = channel;
        fl.live = true;
        self.live += 1;
        self.stats.max_concurrent_flows = self.stats.max_concurrent_flows.max(self.live);
        self.arrive(f, false);
    }

    /// Mark present every hop whose head has arrived by now (at least the next one when
    /// `forced`: its `Head` event fired); schedule the next arrival.
    ///
    /// Fast path: a sending flow whose head reaches a link with spare capacity for its current
    /// rate changes nothing — that link was nobody's bottleneck (it was not full) and the flow
    /// keeps its own — so no re-solve is needed. Most arrivals in a broadcast are of this kind.
    fn arrive(&mut self, f: u32, forced: bool) {
        let fi = f as usize;
        let now = self.now;
        let mut reached = now - self.flows[fi].start;
        let mut force = forced;
        let mut needs_solve = !forced;
        loop {
            let a = self.flows[fi].arrived as usize;
            if a >= self.flows[fi].hops.len() {
                break;
            }
            let off = self.flows[fi].hops[a].offset;
            if force || a == 0 {
                reached = reached.max(off);
                force = false;
            } else if off > reached {
                let (t, occ) = (self.flows[fi].start + off, self.flows[fi].occ);
                self.push(t, Ev::Head { flow: f, occ });
                break;
            }
            let rate = self.flows[fi].rate;
            let r = self.flows[fi].hops[a].res as usize;
            let res = &mut self.res[r];
            let fits = rate > 0.0 && rate.is_finite() && res.cap - res.load >= rate * (1.0 - EPS);
            needs_solve |= !fits;
            self.flows[fi].hops[a].pos = res.present.len() as u32;
            res.present.push((f, a as u32));
            let load = res.load + if rate.is_finite() { rate } else { 0.0 };
            res.set_load(now, load, fits);
            self.flows[fi].arrived += 1;
        }
        if needs_solve {
            self.seeds.push(f);
            self.dirty = true;
        }
    }

    /// The source has sent the last byte: leave every link, schedule the delivery, free the
    /// channel.
    fn finish_source(&mut self, f: u32) {
        self.done.remove(f);
        let fi = f as usize;
        let now = self.now;
        let rate = self.flows[fi].rate;
        for h in 0..self.flows[fi].arrived as usize {
            let Hop { res, pos, .. } = self.flows[fi].hops[h];
            let r = &mut self.res[res as usize];
            r.present.swap_remove(pos as usize);
            if let Some(&(g, gh)) = r.present.get(pos as usize) {
                self.flows[g as usize].hops[gh as usize].pos = pos;
            }
            // If the link was full, flows bottlenecked on it may now speed up: look at it once
            // per re-solve, however many flows leave it in this batch.
            let full = r.cap.is_finite() && r.load >= r.cap * (1.0 - EPS);
            if full && r.loose != self.gen + 1 {
                r.loose = self.gen + 1;
                self.loosened.push(res);
            }
            let load = if rate.is_finite() { r.load - rate } else { r.load };
            r.set_load(now, load, true);
            self.flows[fi].hops[h].pos = NONE;
        }
        let fl = &mut self.flows[fi];
        fl.live = false;
        fl.occ = fl.occ.wrapping_add(1);
        let d = Delivery {
            tag: fl.tag,
            start: fl.start,
            src_done: now,
            time: now + fl.latency,
        };
        let channel = fl.channel;
        self.live -= 1;
        self.free.push(f);
        self.push_delivery(d);
        self.dirty = true;
        if channel != NONE {
            let ch = &mut self.channels[channel as usize];
            ch.busy = false;
            if let Some(p) = ch.queue.pop_front() {
                self.start_flow(p, channel);
            }
        }
    }

    /// Run until the next instant at which messages are delivered; append them to `out` and
    /// return that time. `None` when nothing is in flight.
    pub fn advance(&mut self, out: &mut Vec<Delivery>) -> Option<f64> {
        loop {
            if self.dirty {
                self.resolve();
            }
            if !self.bucketed.is_empty() {
                if self.pace_buckets() {
                    continue;
                }
                // A bucket's emptying that was rescheduled must not move the clock.
                while self.events.peek().is_some_and(|e| self.stale(e.ev)) {
                    self.events.pop();
                }
            }
            let te = self.events.peek().map(|e| e.t);
            let td = self.done.peek().map(|d| d.0);
            let t0 = match (te, td) {
                (None, None) => return None,
                (Some(a), Some(b)) => a.min(b),
                (Some(a), None) | (None, Some(a)) => a,
            };
            if t0 > self.now {
                self.now = t0;
            }
            let limit = t0 + BATCH_TOL * t0.abs();
            loop {
                let te = self.events.peek().map_or(f64::INFINITY, |e| e.t);
                let (td, flow) = self.done.peek().unwrap_or((f64::INFINITY, 0));
                if te.min(td) > limit {
                    break;
                }
                self.stats.events += 1;
                if td < te {
                    self.finish_source(flow);
                    continue;
                }
                let e = self.events.pop().expect("peeked");
                match e.ev {
                    Ev::Head { flow, occ } => {
                        let fl = &self.flows[flow as usize];
                        if fl.live && fl.occ == occ {
                            self.arrive(flow, true);
                        }
                    }
                    Ev::Deliver { slot } => {
                        out.push(self.deliveries[slot as usize]);
                        self.free_deliveries.push(slot);
                    }
                    Ev::Empty { res, occ } => self.empty_bucket(res, occ),
                }
            }
            if !out.is_empty() {
                return Some(self.now);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::tests::star;
    use crate::topology::{Duplex, LinkDir, TopologyBuilder, VertexKind};

    fn run(sim: &mut FlowSim) -> Vec<Delivery> {
        let mut all = Vec::new();
        let mut out = Vec::new();
        while sim.advance(&mut out).is_some() {
            all.append(&mut out);
        }
        all
    }

    #[test]
    fn single_flow_is_latency_plus_bytes_over_bottleneck() {
        let t = star(&[(1e-6, 1e9), (2e-6, 5e8)]);
        let mut sim = FlowSim::new(&t);
        sim.set_audit(true);
        sim.send(t.rank_vertex(0), t.rank_vertex(1), 1e6, 7, None);
        let d = run(&mut sim);
        assert_eq!(d.len(), 1);
        let want = 3e-6 + 1e6 / 5e8;
        assert!((d[0].time - want).abs() <= 1e-15 * want, "{} vs {want}", d[0].time);
        assert_eq!(d[0].tag, 7);
    }

    #[test]
    fn a_policed_link_passes_its_peak_until_its_tokens_run_out() {
        // Rank 0 -> switch policed: 4 kB/s while tokens last, 1 kB/s after; 30 of 100 kB.
        let t = star(&[(0.0, 100e3), (0.0, 100e3)]);
        let mut sim = FlowSim::new(&t);
        sim.set_audit(true);
        assert!(sim.set_bucket(0, true, 100e3, 30e3, 4e3, 1e3));
        assert!(!sim.set_bucket(7, true, 100e3, 30e3, 4e3, 1e3));
        sim.send(t.rank_vertex(0), t.rank_vertex(1), 300e3, 1, None);
        let d = run(&mut sim);
        // Tokens drain at 4 - 1 kB/s: empty at 10 s with 40 kB sent, the other 260 kB at 1 kB/s.
        assert!((d[0].src_done - 270.0).abs() < 1e-9, "{d:?}");
        // Idle for 100 s the bucket refills to its depth, and 100 kB pass whole at the peak
        // in 25 s (the tokens would last 100 / 3 s), leaving 25 kB of tokens.
        sim.timer(370.0, 2);
        let d = run(&mut sim);
        assert_eq!(d[0].tag, 2);
        sim.send(t.rank_vertex(0), t.rank_vertex(1), 100e3, 3, None);
        let d = run(&mut sim);
        assert!((d[0].src_done - 395.0).abs() < 1e-9, "{d:?}");
        // Two messages at once share the peak: 20 kB in 5 s, within the 25 kB / 3 s left.
        sim.send(t.rank_vertex(0), t.rank_vertex(1), 10e3, 4, None);
        sim.send(t.rank_vertex(0), t.rank_vertex(1), 10e3, 5, None);
        let d = run(&mut sim);
        assert_eq!(d.len(), 2);
        for x in &d {
            assert!((x.src_done - 400.0).abs() < 1e-9, "{d:?}");
        }
        // 20 kB more at once: 10 kB of tokens last 10 / 3 s at the peak (13.3 kB), the other
        // 6.7 kB at 1 kB/s.
        sim.send(t.rank_vertex(0), t.rank_vertex(1), 10e3, 6, None);
        sim.send(t.rank_vertex(0), t.rank_vertex(1), 10e3, 7, None);
        let d = run(&mut sim);
        let want = 400.0 + 10.0 / 3.0 + (20e3 - 4e3 * 10.0 / 3.0) / 1e3;
        for x in &d {
            assert!((x.src_done - want).abs() < 1e-9, "{d:?} {want}");
        }
        // The other direction is not policed.
        let now = d[0].src_done;
        sim.send(t.rank_vertex(1), t.rank_vertex(0), 100e3, 8, None);
        let d = run(&mut sim);
        assert!((d[0].src_done - (now + 1.0)).abs() < 1e-9, "{d:?}");
    }

    #[test]
    fn fifo_channel_serialises_messages() {
        let t = star(&[(0.0, 1.0), (0.0, 1.0)]);
        let mut sim = FlowSim::new(&t);
        let (a, b) = (t.rank_vertex(0), t.rank_vertex(1));
        sim.send(a, b, 1.0, 1, Some(0));
        sim.send(a, b, 1.0, 2, Some(0));
        let d = run(&mut sim);
        assert_eq!((d[0].tag, d[0].time), (1, 1.0));
        assert_eq!((d[1].tag, d[1].start, d[1].time), (2, 1.0, 2.0));
        // Without a channel they share the link and both finish at 2.
        let mut sim = FlowSim::new(&t);
        sim.send(a, b, 1.0, 1, None);
        sim.send(a, b, 1.0, 2, None);
        let d = run(&mut sim);
        assert_eq!((d[0].time, d[1].time), (2.0, 2.0));
    }

    #[test]
    fn half_duplex_shares_both_directions() {
        let mut b = TopologyBuilder::new();
        let sw = b.vertex("sw", VertexKind::Switch);
        let r0 = b.rank(0);
        let r1 = b.rank(1);
        let d = LinkDir::new(0.0, 2.0);
        b.link_full(r0, sw, d, d, Duplex::Half);
        b.link(r1, sw, 0.0, 100.0);
        let t = b.build().unwrap();
        let mut sim = FlowSim::new(&t);
        sim.set_audit(true);
        sim.send(t.rank_vertex(0), t.rank_vertex(1), 2.0, 1, None);
        sim.send(t.rank_vertex(1), t.rank_vertex(0), 2.0, 2, None);
        let d = run(&mut sim);
        // Each gets 1 B/s of the shared 2 B/s: 2 s (full duplex would take 1 s).
        assert_eq!((d[0].time, d[1].time), (2.0, 2.0));
    }
}
