//! Mechanism tests with hand-derived answers, and property tests of the whole simulator.

use super::alltoall::{simulate_alltoall, AlltoallAlgo};
use super::placement::Placement;
use super::*;
use crate::plan::baselines::Baseline;
use crate::plan::{trees, Plan, SegRange};
use crate::topology::{Duplex, LinkDir, Topology, TopologyBuilder, VertexKind};
use proptest::prelude::*;

/// Star: rank i hangs off one switch by a link with (latency, bandwidth).
pub(crate) fn star(links: &[(f64, f64)]) -> Topology {
    let mut b = TopologyBuilder::new();
    let sw = b.vertex("sw", VertexKind::Switch);
    for (i, &(lat, bw)) in links.iter().enumerate() {
        let r = b.rank(i as u32);
        b.link(r, sw, lat, bw);
    }
    b.build().unwrap()
}

/// Two-level tree: `leaves` leaf switches of `k` ranks each (unit links, no latency), each leaf
/// switch joined to one core switch by an uplink of `up_bw`.
pub(crate) fn two_level(leaves: u32, k: u32, up_bw: f64) -> Topology {
    let mut b = TopologyBuilder::new();
    let core = b.vertex("core", VertexKind::Switch);
    for s in 0..leaves {
        let sw = b.vertex(format!("leaf{s}"), VertexKind::Switch);
        b.link(sw, core, 0.0, up_bw);
        for i in 0..k {
            let r = b.rank(s * k + i);
            b.link(r, sw, 0.0, 1.0);
        }
    }
    b.build().unwrap()
}

fn audited() -> SimOptions {
    SimOptions {
        audit: true,
        record: true,
        ..SimOptions::default()
    }
}

#[test]
fn single_transfer_is_latency_plus_bytes_over_min_bandwidth_exactly() {
    // Binary-exact numbers: path r0 -> n0 -> sw -> r1 with latencies 0.25, 0.5, 0.125 and
    // bandwidths 8, 2, 4: 0.875 + 6 / 2 = 3.875.
    let mut b = TopologyBuilder::new();
    let sw = b.vertex("sw", VertexKind::Switch);
    let n0 = b.vertex("n0", VertexKind::Node);
    let r0 = b.rank(0);
    let r1 = b.rank(1);
    b.link(r0, n0, 0.25, 8.0);
    b.link(n0, sw, 0.5, 2.0);
    b.link(r1, sw, 0.125, 4.0);
    let t = b.build().unwrap();
    let plan = Plan::from_tree(0, &trees::flat(2, 0), 1, "flat");
    let r = simulate_plan(&t, &plan, 6, &audited()).unwrap();
    assert_eq!(r.time_s, 3.875);
    assert_eq!(r.time_s, t.transfer_time(t.rank_vertex(0), t.rank_vertex(1), 6.0));
    // Realistic units: 1 MB over 10 Gbit/s, 40 Gbit/s and 250 Mbit/s links with 60 us in total.
    let mut b = TopologyBuilder::new();
    let s0 = b.vertex("s0", VertexKind::Switch);
    let s1 = b.vertex("s1", VertexKind::Switch);
    let a = b.rank(0);
    let c = b.rank(1);
    b.link(a, s0, 10e-6, 10e9 / 8.0);
    b.link(s0, s1, 30e-6, 40e9 / 8.0);
    b.link(c, s1, 20e-6, 250e6 / 8.0);
    let t = b.build().unwrap();
    let r = simulate_plan(&t, &plan, 1_000_000, &audited()).unwrap();
    let want = 60e-6 + 1e6 / (250e6 / 8.0);
    assert!((r.time_s - want).abs() <= 1e-12 * want, "{} vs {want}", r.time_s);
    assert!((r.time_s - 32.06e-3).abs() < 1e-9);
}

#[test]
fn max_min_not_equal_split_mfs_example() {
    // Rank 1's downlink (unit) is shared by A = 0->1 and B = 2->1. Rank 2's uplink (unit) is
    // shared by B and two more flows 2->3, 2->4, which holds B to 1/3; max-min gives A the
    // remaining 2/3 (MFS mode F, the equal split, would give it 1/2).
    let t = star(&[(0.0, 1e9), (0.0, 1.0), (0.0, 1.0), (0.0, 1e9), (0.0, 1e9)]);
    let mut sim = FlowSim::new(&t);
    sim.set_audit(true);
    let v = |r: u32| t.rank_vertex(r);
    sim.send(v(0), v(1), 2.0, 0, None); // A: 2 bytes at 2/3 -> 3 s (equal split: 4 s)
    sim.send(v(2), v(1), 1.0, 1, None); // B: 1 byte at 1/3 -> 3 s
    sim.send(v(2), v(3), 1.0, 2, None);
    sim.send(v(2), v(4), 1.0, 3, None);
    let mut out = Vec::new();
    let mut times = [0.0; 4];
    while sim.advance(&mut out).is_some() {
        for d in out.drain(..) {
            times[d.tag as usize] = d.time;
        }
    }
    for (i, &t) in times.iter().enumerate() {
        assert!((t - 3.0).abs() < 1e-12, "flow {i} finished at {t}");
    }
}

#[test]
fn per_hop_latency_bytes_enter_a_link_after_earlier_latencies() {
    // A: r0 -> r1 over r0-s0 (latency 1), s0-s1, s1-r1 (bandwidth 1). B: r2 -> r1 shares only
    // s1-r1. A's head reaches s1-r1 at t = 1; until then B has it alone (1 byte done) while A
    // already streams at its path bottleneck 1 (1 byte). Then 1/2 each: B's last byte by t = 3;
    // A then alone: its 3rd byte leaves at t = 4 and arrives at 4 + 1 = 5.
    let mut b = TopologyBuilder::new();
    let s0 = b.vertex("s0", VertexKind::Switch);
    let s1 = b.vertex("s1", VertexKind::Switch);
    let r0 = b.rank(0);
    let r1 = b.rank(1);
    let r2 = b.rank(2);
    b.link(r0, s0, 1.0, 10.0);
    b.link(s0, s1, 0.0, 10.0);
    b.link(r1, s1, 0.0, 1.0);
    b.link(r2, s1, 0.0, 10.0);
    let t = b.build().unwrap();
    let mut sim = FlowSim::new(&t);
    sim.set_audit(true);
    sim.send(t.rank_vertex(0), t.rank_vertex(1), 3.0, 0, None);
    sim.send(t.rank_vertex(2), t.rank_vertex(1), 2.0, 1, None);
    let mut out = Vec::new();
    let mut got = Vec::new();
    while sim.advance(&mut out).is_some() {
        got.append(&mut out);
    }
    got.sort_by_key(|d| d.tag);
    assert_eq!(got[1].time, 3.0);
    assert_eq!(got[0].src_done, 4.0);
    assert_eq!(got[0].time, 5.0);
    // A zero-byte message costs exactly the path latency.
    let mut sim = FlowSim::new(&t);
    sim.send(t.rank_vertex(0), t.rank_vertex(1), 0.0, 9, None);
    assert_eq!(sim.advance(&mut out), Some(1.0));
}

#[test]
fn sharing_and_redistribution() {
    // Three senders into one unit downlink, 1, 2 and 3 bytes: 1/3 each until the first is done
    // at 3; the remaining two get 1/2 (redistribution): the second's last byte at 5; the third
    // then runs alone at 1 and finishes at 6.
    let t = star(&[(0.0, 1.0), (0.0, 5.0), (0.0, 5.0), (0.0, 5.0)]);
    let mut sim = FlowSim::new(&t);
    sim.set_audit(true);
    for (i, bytes) in [1.0, 2.0, 3.0].into_iter().enumerate() {
        sim.send(t.rank_vertex(i as u32 + 1), t.rank_vertex(0), bytes, i as u64, None);
    }
    let mut out = Vec::new();
    let mut times = vec![];
    while let Some(now) = sim.advance(&mut out) {
        for d in out.drain(..) {
            times.push((d.tag, d.time, now));
        }
    }
    assert_eq!(times.iter().map(|x| x.0).collect::<Vec<_>>(), vec![0, 1, 2]);
    let expect = [3.0, 5.0, 6.0];
    for (x, e) in times.iter().zip(expect) {
        assert!((x.1 - e).abs() < 1e-12, "{times:?}");
    }
}

#[test]
fn store_and_forward_versus_segment_pipelining() {
    // Chain 0 -> 1 -> 2 on a star; every rank link has latency l and bandwidth b, so a hop
    // (two links) costs D = 2l + B/b for B bytes.
    let (l, b, bytes) = (0.5, 4.0, 64u64);
    let t = star(&[(l, b), (l, b), (l, b)]);
    let chain = trees::rank_chain(3, 0);
    // Unsegmented: rank 1 forwards only after its whole receive: 2 * (2l + B/b) = 34.
    let p = Plan::from_tree(0, &chain, 1, "chain");
    let r = simulate_plan(&t, &p, bytes, &audited()).unwrap();
    assert_eq!(r.rank_done_s, vec![0.0, 17.0, 34.0]);
    // S segments of c = B/(S b): rank 1 holds segment k at (k+1)c + 2l and forwards it at once
    // (its uplink is free: the previous segment left at the same instant), so rank 2 holds the
    // last one at (S+1)c + 4l. S = 8: c = 2, 18 + 2 = 20.
    let p = Plan::from_tree(0, &chain, 8, "pipeline");
    let r = simulate_plan(&t, &p, bytes, &audited()).unwrap();
    assert_eq!(r.rank_done_s[1], 8.0 * 2.0 + 1.0);
    assert_eq!(r.time_s, 9.0 * 2.0 + 2.0);
    // The recorded transfers show rank 1 forwarding segment k the moment it arrived.
    for s in 0..8 {
        let inn = r
            .transfers
            .iter()
            .find(|x| x.dst == 1 && x.segs == Some(SegRange::one(s)))
            .unwrap();
        let out = r
            .transfers
            .iter()
            .find(|x| x.src == 1 && x.segs == Some(SegRange::one(s)))
            .unwrap();
        assert_eq!(out.issued_s, inn.end_s);
    }
}

#[test]
fn half_duplex_link_carries_one_direction_at_a_time_worth() {
    // Ranks 0 and 1 swap 4 bytes each over a star whose rank-0 link is half duplex (bandwidth
    // 2). Full duplex: each direction gets 2 -> 2 s. Half duplex: the two flows split 2 -> 4 s.
    let build = |duplex| {
        let mut b = TopologyBuilder::new();
        let sw = b.vertex("sw", VertexKind::Switch);
        let r0 = b.rank(0);
        let r1 = b.rank(1);
        let d = LinkDir::new(0.0, 2.0);
        b.link_full(r0, sw, d, d, duplex);
        b.link(r1, sw, 0.0, 100.0);
        b.build().unwrap()
    };
    // Two independent sends at once, 0 -> 1 and 1 -> 0, 4 bytes each.
    for (duplex, want) in [(Duplex::Full, 2.0), (Duplex::Half, 4.0)] {
        let t = build(duplex);
        let sends = vec![vec![(1u32, 4u64)], vec![(0u32, 4u64)]];
        let r = alltoall::simulate_messages(&t, &sends, &audited()).unwrap();
        assert_eq!(r.time_s, want, "{duplex:?}");
    }
}

#[test]
fn blocking_sends_serialise_a_ranks_sends() {
    // Flat tree, unit star, 2 bytes: non-blocking shares the root's link three ways (all done
    // at 6); blocking delivers one child at a time (2, 4, 6).
    let t = star(&[(0.0, 1.0); 4]);
    let p = Plan::from_tree(0, &trees::flat(4, 0), 1, "flat");
    let nb = simulate_plan(&t, &p, 2, &audited()).unwrap();
    assert_eq!(nb.rank_done_s, vec![0.0, 6.0, 6.0, 6.0]);
    let opts = SimOptions {
        blocking_sends: true,
        ..audited()
    };
    let b = simulate_plan(&t, &p, 2, &opts).unwrap();
    assert_eq!(b.rank_done_s, vec![0.0, 2.0, 4.0, 6.0]);
}

#[test]
fn pairwise_alltoall_full_bisection_takes_exactly_n_minus_1() {
    for (leaves, k) in [(4, 4), (8, 8)] {
        let n = leaves * k;
        let t = two_level(leaves, k, k as f64);
        for blocking in [true, false] {
            let opts = SimOptions {
                blocking_sends: blocking,
                ..SimOptions::default()
            };
            let r = simulate_alltoall(&t, AlltoallAlgo::Pairwise, n, 1, &opts).unwrap();
            if blocking {
                // One message per rank per step, every step at rate 1: exact in floating point.
                assert_eq!(r.time_s, (n - 1) as f64, "n={n}");
            } else {
                // All N - 1 messages at once at rate 1/(N-1): exact up to the rounding of 1/(N-1).
                assert!(
                    (r.time_s - (n - 1) as f64).abs() < 1e-12 * n as f64,
                    "n={n}: {}",
                    r.time_s
                );
            }
        }
    }
}

#[test]
fn oversubscribed_alltoall_matches_the_bisection_bound() {
    // 4:1 uplinks (capacity k/4). Every leaf switch must push k (N - k) units through its
    // uplink: time >= 4 (N - k) against N - 1 at full bisection.
    for (leaves, k) in [(4u32, 4u32), (8, 8)] {
        let n = leaves * k;
        let full = two_level(leaves, k, k as f64);
        let over = two_level(leaves, k, k as f64 / 4.0);
        let predicted = (4.0 * (n - k) as f64).max((n - 1) as f64) / (n - 1) as f64;
        for blocking in [true, false] {
            let opts = SimOptions {
                blocking_sends: blocking,
                ..SimOptions::default()
            };
            let a = simulate_alltoall(&full, AlltoallAlgo::Pairwise, n, 1, &opts)
                .unwrap()
                .time_s;
            let b = simulate_alltoall(&over, AlltoallAlgo::Pairwise, n, 1, &opts)
                .unwrap()
                .time_s;
            let factor = b / a;
            assert!(
                (factor / predicted - 1.0).abs() <= 0.10,
                "n={n} blocking={blocking}: slowdown {factor:.3} vs bisection bound {predicted:.3}"
            );
        }
    }
}

#[test]
fn any_placement_is_conflict_free_on_a_full_bisection_two_level_tree() {
    // With one core switch and uplinks as fat as the ranks below them, each step of a pairwise
    // or simple-spread exchange sends at most k flows out of (and into) a leaf switch, so every
    // flow runs at 1 whatever the placement: still exactly N - 1. (MFS's random-placement
    // slowdown comes from static routing over several core switches, which a tree does not
    // have.) With 4:1 uplinks a random placement is slower than the block one, whose first
    // k - 1 steps stay inside the leaf switches.
    let full = two_level(4, 4, 4.0);
    let over = two_level(4, 4, 1.0);
    for algo in [AlltoallAlgo::Pairwise, AlltoallAlgo::SimpleSpread] {
        for seed in 0..5 {
            let opts = SimOptions {
                blocking_sends: true,
                placement: Some(Placement::Random(seed).map(16, 16).unwrap()),
                ..SimOptions::default()
            };
            let r = simulate_alltoall(&full, algo, 16, 1, &opts).unwrap();
            assert_eq!(r.time_s, 15.0, "{algo} seed {seed}");
        }
    }
    let block = SimOptions {
        blocking_sends: true,
        ..SimOptions::default()
    };
    let random = SimOptions {
        placement: Some(Placement::Random(1).map(16, 16).unwrap()),
        ..block.clone()
    };
    let b = simulate_alltoall(&over, AlltoallAlgo::Pairwise, 16, 1, &block)
        .unwrap()
        .time_s;
    let r = simulate_alltoall(&over, AlltoallAlgo::Pairwise, 16, 1, &random)
        .unwrap()
        .time_s;
    // Block: 3 local steps of 1 + 12 steps through 1/4 uplinks = 51.
    assert_eq!(b, 51.0);
    assert!(r > b, "random {r} vs block {b}");
}

// ---------------------------------------------------------------- property tests

/// A random tree: switches in a random tree, nodes under switches, ranks under nodes or
/// switches; random latencies, bandwidths and duplex modes.
fn random_topology(seed: u64, nranks: u32) -> Topology {
    let mut rng = crate::util::rng::Rng::new(seed);
    let mut b = TopologyBuilder::new();
    let nsw = 1 + rng.below(4) as usize;
    let mut switches = vec![b.vertex("s0", VertexKind::Switch)];
    let link = |b: &mut TopologyBuilder, rng: &mut crate::util::rng::Rng, x, y| {
        let bw = [1.0, 2.0, 3.0, 10.0][rng.below(4) as usize];
        let lat = [0.0, 0.01, 0.1][rng.below(3) as usize];
        let d = LinkDir::new(lat, bw);
        let duplex = if rng.below(5) == 0 { Duplex::Half } else { Duplex::Full };
        b.link_full(x, y, d, d, duplex);
    };
    for i in 1..nsw {
        let s = b.vertex(format!("s{i}"), VertexKind::Switch);
        let p = switches[rng.below(switches.len() as u64) as usize];
        link(&mut b, &mut rng, s, p);
        switches.push(s);
    }
    let mut r = 0;
    let mut node = 0;
    while r < nranks {
        let s = switches[rng.below(switches.len() as u64) as usize];
        if rng.below(2) == 0 {
            let nd = b.vertex(format!("n{node}"), VertexKind::Node);
            node += 1;
            link(&mut b, &mut rng, nd, s);
            for _ in 0..(1 + rng.below(3)) {
                if r < nranks {
                    let rv = b.rank(r);
                    link(&mut b, &mut rng, rv, nd);
                    r += 1;
                }
            }
        } else {
            let rv = b.rank(r);
            link(&mut b, &mut rng, rv, s);
            r += 1;
        }
    }
    b.build().unwrap()
}

const TREE_BASELINES: &[&str] = &[
    "flat",
    "binomial",
    "binomial:seg=1000",
    "ompi-binomial",
    "binary",
    "knomial:k=3",
    "chain",
    "pipeline:seg=700",
    "split-binary",
    "scatter-ring",
    "scatter-rd",
    "ompi",
    "han:seg=1500",
    "topo-wave",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Every re-solve equals the reference max-min allocation and no link ever carries more
    /// than its capacity (the audit checks both at every event), for random trees, baselines,
    /// roots, sizes and send modes.
    #[test]
    fn allocation_is_max_min_and_within_capacity(
        seed in 0u64..1000, n in 2u32..14, which in 0usize..TREE_BASELINES.len(),
        root_pick in 0u32..1000, bytes in 1u64..5000, blocking in any::<bool>(),
    ) {
        let t = random_topology(seed, n);
        let root = root_pick % n;
        let map = Placement::Block.map(n, t.num_ranks()).unwrap();
        let plan = TREE_BASELINES[which].parse::<Baseline>().unwrap().build(&t, &map, root, bytes).unwrap();
        let opts = SimOptions { blocking_sends: blocking, record: true, audit: true, ..SimOptions::default() };
        let r = simulate_plan(&t, &plan, bytes, &opts).unwrap();
        for u in &r.links {
            prop_assert!(u.peak_bps <= u.capacity_bps * (1.0 + 1e-9));
        }
        prop_assert!(r.rank_done_s.iter().all(|x| x.is_finite()));
        prop_assert!(r.time_s > 0.0);
    }

    /// Every baseline produces a valid plan for random sizes, roots and placements.
    #[test]
    fn every_baseline_validates(
        seed in 0u64..1000, n in 1u32..70, which in 0usize..TREE_BASELINES.len(),
        root_pick in 0u32..1000, bytes in 0u64..1_000_000, random_place in any::<bool>(),
    ) {
        let t = random_topology(seed, n);
        let place = if random_place { Placement::Random(seed) } else { Placement::Block };
        let map = place.map(n, t.num_ranks()).unwrap();
        let b: Baseline = TREE_BASELINES[which].parse().unwrap();
        let plan = b.build(&t, &map, root_pick % n, bytes).unwrap();
        prop_assert!(plan.validate().is_ok(), "{} n={} : {:?}", b, n, plan.validate());
    }
}

/// The same topology with link `l`'s bandwidth (both directions) multiplied by `factor`.
fn widen(t: &Topology, l: usize, factor: f64) -> Topology {
    let mut b = t.to_builder();
    b.links[l].ab.bandwidth_bps *= factor;
    b.links[l].ba.bandwidth_bps *= factor;
    b.build().unwrap()
}

fn scale_all(t: &Topology, factor: f64) -> Topology {
    let mut b = t.to_builder();
    for l in b.links.iter_mut() {
        l.ab.bandwidth_bps *= factor;
        l.ba.bandwidth_bps *= factor;
    }
    b.build().unwrap()
}

fn without_latency(t: &Topology) -> Topology {
    let mut b = t.to_builder();
    for l in b.links.iter_mut() {
        l.ab.latency_s = 0.0;
        l.ba.latency_s = 0.0;
    }
    b.build().unwrap()
}

/// "More bandwidth never makes a plan slower" is false in general, and the simulator must not
/// pretend otherwise. Found by proptest: a binomial broadcast (blocking sends, 1 byte) on a
/// random tree. Widening rank 2's link lets 2 -> 4 finish earlier, so 4 -> 5 starts earlier
/// and overlaps 6 -> 0 longer on the half-duplex link n1-s0 (they cross it in opposite
/// directions, sharing one capacity); 6 -> 0 ends later, which delays 0 -> 1 and 6 -> 7 on the
/// critical path: 3.19 -> 3.357. A scheduling anomaly (Graham 1969), not a sharing bug: every
/// allocation along the way is the exact max-min one (the audit checks). Static flow sets
/// without dependencies are not monotone either (raising one link lets a flow take more of a
/// shared link from a flow whose finish decides the makespan). What does hold is tested below.
#[test]
fn more_bandwidth_can_slow_a_plan() {
    let t = random_topology(41281, 8);
    let map = Placement::Block.map(8, 8).unwrap();
    let plan = Baseline::Binomial { seg: 0 }.build(&t, &map, 2, 1).unwrap();
    let opts = SimOptions {
        blocking_sends: true,
        audit: true,
        ..SimOptions::default()
    };
    let before = simulate_plan(&t, &plan, 1, &opts).unwrap().time_s;
    let after = simulate_plan(&widen(&t, 2, 3.4252636913491674), &plan, 1, &opts)
        .unwrap()
        .time_s;
    assert!((before - 3.19).abs() < 1e-9, "{before}");
    assert!(after > before + 0.1, "{after}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// The true monotonicity of max-min sharing: the allocation is the leximin-best feasible
    /// one, and more capacity only enlarges the feasible set, so the sorted rate vector never
    /// gets lexicographically worse (the slowest flow never slows down, and so on up). Checked
    /// on the engine's own allocation of random concurrent flows.
    #[test]
    fn more_capacity_never_worsens_the_sorted_rates(
        seed in 0u64..10_000, n in 2u32..12, lpick in 0usize..1000, factor in 1.0f64..4.0,
        msgs in proptest::collection::vec((0u32..100, 0u32..100), 1..25),
    ) {
        let t = random_topology(seed, n);
        let w = widen(&t, lpick % t.links().len(), factor);
        let sorted_rates = |topo: &Topology| {
            let mut sim = FlowSim::new(topo);
            for (i, &(a, b)) in msgs.iter().enumerate() {
                let (a, b) = (a % n, b % n);
                if a != b {
                    sim.send(topo.rank_vertex(a), topo.rank_vertex(b), 1e9, i as u64, None);
                }
            }
            sim.settle();
            let mut r: Vec<f64> = sim.rates().into_iter().map(|x| x.1).collect();
            r.sort_by(f64::total_cmp);
            r
        };
        let (before, after) = (sorted_rates(&t), sorted_rates(&w));
        for (x, y) in before.iter().zip(&after) {
            if (y - x).abs() > 1e-9 * x.abs().max(1e-300) {
                prop_assert!(y > x, "leximin got worse: {:?} -> {:?}", before, after);
                break;
            }
        }
    }

    /// Without latency, multiplying every bandwidth by c runs the same schedule c times
    /// faster: every event time scales by 1/c, for any plan and send mode.
    #[test]
    fn uniform_bandwidth_scaling_speeds_up_exactly(
        seed in 0u64..10_000, n in 2u32..12, which in 0usize..TREE_BASELINES.len(),
        root_pick in 0u32..1000, bytes in 1u64..5000, blocking in any::<bool>(), factor in 1.0f64..8.0,
    ) {
        let t = without_latency(&random_topology(seed, n));
        let map = Placement::Block.map(n, n as usize).unwrap();
        let plan = TREE_BASELINES[which].parse::<Baseline>().unwrap().build(&t, &map, root_pick % n, bytes).unwrap();
        let opts = SimOptions { blocking_sends: blocking, ..SimOptions::default() };
        let a = simulate_plan(&t, &plan, bytes, &opts).unwrap().time_s;
        let b = simulate_plan(&scale_all(&t, factor), &plan, bytes, &opts).unwrap().time_s;
        prop_assert!((b * factor - a).abs() <= 1e-9 * a, "{} -> {} (x{})", a, b, factor);
    }
}

/// Found by `allocation_is_max_min_and_within_capacity` (seed 446, 8 ranks, scatter-rd,
/// blocking sends): a flow that finished at the instant another arrived on its link without
/// fitting recorded the other's transient overload as a settled peak (4.25 on a link of 3).
#[test]
fn a_finishing_flow_does_not_settle_a_transient_overload() {
    let t = random_topology(446, 8);
    let map = Placement::Block.map(8, t.num_ranks()).unwrap();
    let plan = "scatter-rd"
        .parse::<Baseline>()
        .unwrap()
        .build(&t, &map, 3, 4225)
        .unwrap();
    let opts = SimOptions {
        blocking_sends: true,
        record: true,
        audit: true,
        ..SimOptions::default()
    };
    let r = simulate_plan(&t, &plan, 4225, &opts).unwrap();
    for (i, u) in r.links.iter().enumerate() {
        assert!(
            u.peak_bps <= u.capacity_bps * (1.0 + 1e-9),
            "link {i}: peak {} above capacity {}",
            u.peak_bps,
            u.capacity_bps
        );
    }
    assert!(r.links.iter().any(|u| u.peak_bps > 0.0));
}

/// Message overhead by hand: a flat broadcast from rank 0 to 3 ranks on a star (link latency
/// 1 us, 1 GB/s, 1000 bytes). With overhead 5 us the k-th send starts at 5k us, the last
/// arrives at 10 us + 2 us latency + 1 us of transfer and is usable 5 us later (18 us).
/// Without overhead the three share the root's link: 3 us of transfer + 2 us of latency.
#[test]
fn message_overhead_spaces_sends_and_delays_receipt() {
    let t = star(&[(1e-6, 1e9); 4]);
    let map: Vec<u32> = (0..4).collect();
    let plan = "flat".parse::<Baseline>().unwrap().build(&t, &map, 0, 1000).unwrap();
    let with = |o: f64| {
        let opts = SimOptions {
            send_overhead_s: o,
            record: true,
            audit: true,
            ..SimOptions::default()
        };
        simulate_plan(&t, &plan, 1000, &opts).unwrap()
    };
    let base = with(0.0);
    // Three flows share the root's 1 GB/s link: 3 us of transfer, 2 us of latency.
    assert!((base.time_s - 5e-6).abs() < 1e-12, "{}", base.time_s);
    let spaced = with(5e-6);
    assert!((spaced.time_s - 18e-6).abs() < 1e-12, "{}", spaced.time_s);
    let mut starts: Vec<f64> = spaced.transfers.iter().map(|x| x.issued_s).collect();
    starts.sort_by(f64::total_cmp);
    for (k, s) in starts.iter().enumerate() {
        assert!((s - 5e-6 * k as f64).abs() < 1e-12, "send {k} issued at {s}");
    }
}

/// Receive overhead along a relay: chain 0 -> 1 -> 2 on a star of zero-latency, very fast
/// links, 1 byte, overhead 4 us. The root's send leaves at 0 and lands at once; rank 1 has it
/// at 4 (its receive overhead), forwards at 4; rank 2 has it at 8.
#[test]
fn message_overhead_adds_up_along_a_chain() {
    let t = star(&[(0.0, 1e15); 3]);
    let map: Vec<u32> = (0..3).collect();
    let plan = "chain".parse::<Baseline>().unwrap().build(&t, &map, 0, 1).unwrap();
    let opts = SimOptions {
        send_overhead_s: 4e-6,
        ..SimOptions::default()
    };
    let r = simulate_plan(&t, &plan, 1, &opts).unwrap();
    assert!((r.rank_done_s[1] - 4e-6).abs() < 1e-12, "{:?}", r.rank_done_s);
    assert!((r.rank_done_s[2] - 8e-6).abs() < 1e-12, "{:?}", r.rank_done_s);
}

/// Wake-up by hand: chain 0 -> 1 -> 2 on a star of zero-latency, very fast links, overhead
/// 4 us, wake-up 10 us. One 1-byte message: each relay is idle when it lands, so rank 1 has
/// it at 0 + 10 + 4 = 14 and rank 2 at 14 + 10 + 4 = 28. Two segments: the root sends them
/// at 0 and 4; segment 1 lands on rank 1 while it is still busy with segment 0 (until 14), so
/// it is usable at 18 with no wake-up. Rank 1 then sends segment 0 at 18 and segment 1 at 22
/// (its CPU does one thing at a time); rank 2 wakes for segment 0 (18 + 10 + 4 = 32) and is
/// busy when segment 1 lands at 22, so it has both at 36.
#[test]
fn only_idle_ranks_pay_the_wake_up() {
    let t = star(&[(0.0, 1e15); 3]);
    let chain = trees::rank_chain(3, 0);
    let opts = SimOptions {
        send_overhead_s: 4e-6,
        wake_s: 10e-6,
        record: true,
        ..SimOptions::default()
    };
    let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
    let one = simulate_plan(&t, &Plan::from_tree(0, &chain, 1, "chain"), 1, &opts).unwrap();
    assert!(
        close(one.rank_done_s[1], 14e-6) && close(one.rank_done_s[2], 28e-6),
        "{:?}",
        one.rank_done_s
    );
    let two = simulate_plan(&t, &Plan::from_tree(0, &chain, 2, "pipeline"), 2, &opts).unwrap();
    assert!(
        close(two.rank_done_s[1], 18e-6) && close(two.rank_done_s[2], 36e-6),
        "{:?}",
        two.rank_done_s
    );
    // Each relay wakes once, for its first segment: two wake-ups later than without them.
    let no_wake = SimOptions { wake_s: 0.0, ..opts };
    let base = simulate_plan(&t, &Plan::from_tree(0, &chain, 2, "pipeline"), 2, &no_wake).unwrap();
    assert!(
        close(two.rank_done_s[2] - base.rank_done_s[2], 2.0 * 10e-6),
        "{:?} {:?}",
        base.rank_done_s,
        two.rank_done_s
    );
}

/// CPU pools by hand: chain 0 -> 1 -> 2 on a star of zero-latency, very fast links, 1 byte,
/// overhead 4 us, all three ranks in one pool. With one CPU the root's send holds it until
/// 4, so rank 1 takes the message in from 4 to 8, sends at 8 (CPU busy until 12), and rank 2
/// takes it in from 12 to 16. With two CPUs rank 1 uses the other one at once: 4 and 8, as
/// without a pool. A pool list of the wrong length, or a pool without CPUs, is an error.
#[test]
fn ranks_in_a_pool_share_its_cpus() {
    let t = star(&[(0.0, 1e15); 3]);
    let plan = Plan::from_tree(0, &trees::rank_chain(3, 0), 1, "chain");
    let run = |pool_of: Vec<Option<u32>>, cpus: Vec<u32>| {
        let opts = SimOptions {
            send_overhead_s: 4e-6,
            cpu_pools: Some(CpuPools { pool_of, cpus }),
            ..SimOptions::default()
        };
        simulate_plan(&t, &plan, 1, &opts)
    };
    let close = |a: &[f64], b: [f64; 2]| (a[1] - b[0]).abs() < 1e-12 && (a[2] - b[1]).abs() < 1e-12;
    let one = run(vec![Some(0); 3], vec![1]).unwrap();
    assert!(close(&one.rank_done_s, [8e-6, 16e-6]), "{:?}", one.rank_done_s);
    let two = run(vec![Some(0); 3], vec![2]).unwrap();
    assert!(close(&two.rank_done_s, [4e-6, 8e-6]), "{:?}", two.rank_done_s);
    // Rank 2 with a CPU of its own: only ranks 0 and 1 queue on the single CPU.
    let own = run(vec![Some(0), Some(0), None], vec![1]).unwrap();
    assert!(close(&own.rank_done_s, [8e-6, 12e-6]), "{:?}", own.rank_done_s);
    for (pool_of, cpus) in [
        (vec![Some(0); 2], vec![1]),
        (vec![Some(0); 3], vec![0]),
        (vec![Some(1); 3], vec![1]),
    ] {
        let e = run(pool_of, cpus).unwrap_err();
        assert!(matches!(e, SimError::BadCpuPools { ranks: 3 }), "{e}");
    }
}

/// Root 0 sends 1 byte to 1 and then 2 (flat tree, zero-latency fast links), overhead 4 us,
/// all three ranks on one CPU, with a wake-up `wake_s` and entries `enter_s`.
fn flat_on_one_cpu(wake_s: f64, enter_s: Option<Vec<f64>>) -> SimResult {
    let t = star(&[(0.0, 1e15); 3]);
    let plan = Plan::from_tree(0, &trees::flat(3, 0), 1, "flat");
    let opts = SimOptions {
        send_overhead_s: 4e-6,
        wake_s,
        cpu_pools: Some(CpuPools {
            pool_of: vec![Some(0); 3],
            cpus: vec![1],
        }),
        enter_s,
        ..SimOptions::default()
    };
    simulate_plan(&t, &plan, 1, &opts).unwrap()
}

/// A wake-up does not hold a pool's CPU: root 0 sends to 1 and then 2 (flat tree, zero-latency
/// fast links, 1 byte), overhead 4 us, wake-up 10 us, all three ranks on one CPU. The root's
/// sends use the CPU at 0-4 and 4-8; rank 1 wakes until 10 and takes its message in at 10-14,
/// rank 2 (landed at 4, awake at 14) at 14-18. Had rank 1 booked the CPU when its message
/// landed, the CPU would have idled through its wake-up and the root's second send waited.
#[test]
fn a_waking_rank_leaves_the_pool_to_others() {
    let r = flat_on_one_cpu(10e-6, None);
    let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
    assert!(
        close(r.rank_done_s[1], 14e-6) && close(r.rank_done_s[2], 18e-6),
        "{:?}",
        r.rank_done_s
    );
}

/// A rank that has not entered leaves the pool to others: root 0 sends to 1 and then 2 (flat
/// tree, zero-latency fast links, 1 byte), overhead 4 us, all three ranks on one CPU, rank 1
/// entering at 100 us. The root's sends use the CPU at 0-4 and 4-8, rank 2 takes its message
/// in at 8-12 and rank 1 at 100-104. Booked when the message landed, rank 1's take-in held the
/// CPU from 4 to 104: the root's second send waited until then and rank 2 had its message at
/// 112 us.
#[test]
fn a_rank_not_yet_in_the_call_leaves_the_pool_to_others() {
    let r = flat_on_one_cpu(0.0, Some(vec![0.0, 100e-6, 0.0]));
    let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
    assert!(
        close(r.rank_done_s[1], 104e-6) && close(r.rank_done_s[2], 12e-6),
        "{:?}",
        r.rank_done_s
    );
}

/// Entry times by hand: chain 0 -> 1 -> 2 on a star of 1 us links at 1 GB/s, 1000 bytes, no
/// overhead, rendezvous above 10 KB. Rank 1 enters at 10 us: the root's message (there at
/// 3 us) is taken in at 10 us and forwarded then; rank 2 has it at 13 us. Rank 2 entering at
/// 20 us takes it in at 20 us. A 20 KB rendezvous message to a rank entering at 10 us leaves
/// once the answer to its request is back: max(0 + 2, 10) + 2 us, then 20 us of transfer.
#[test]
fn ranks_take_nothing_in_and_send_nothing_before_they_enter() {
    let t = star(&[(1e-6, 1e9); 3]);
    let map: Vec<u32> = (0..3).collect();
    let chain = "chain".parse::<Baseline>().unwrap().build(&t, &map, 0, 1000).unwrap();
    let run = |bytes: u64, enter: Vec<f64>| {
        let opts = SimOptions {
            enter_s: Some(enter),
            rendezvous_bytes: Some(10_000.0),
            ..SimOptions::default()
        };
        simulate_plan(&t, &chain, bytes, &opts).unwrap()
    };
    let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
    let r = run(1000, vec![0.0, 10e-6, 0.0]);
    assert!(
        close(r.rank_done_s[1], 10e-6) && close(r.rank_done_s[2], 13e-6),
        "{:?}",
        r.rank_done_s
    );
    let r = run(1000, vec![0.0, 0.0, 20e-6]);
    assert!(
        close(r.rank_done_s[1], 3e-6) && close(r.rank_done_s[2], 20e-6),
        "{:?}",
        r.rank_done_s
    );
    let r = run(20_000, vec![0.0, 10e-6, 10e-6]);
    // Rank 1: data leaves at 12 us, 2 us of latency, 20 us of transfer: 34 us.
    assert!(close(r.rank_done_s[1], 34e-6), "{:?}", r.rank_done_s);
    // Entering at 0 is the default.
    let opts = |e: Option<Vec<f64>>| SimOptions {
        enter_s: e,
        ..SimOptions::default()
    };
    let none = simulate_plan(&t, &chain, 1000, &opts(None)).unwrap();
    let zeros = simulate_plan(&t, &chain, 1000, &opts(Some(vec![0.0; 3]))).unwrap();
    assert_eq!(none.rank_done_s, zeros.rank_done_s);
    // One time per rank, finite and not negative.
    for bad in [vec![0.0; 2], vec![0.0, -1.0, 0.0], vec![0.0, f64::NAN, 0.0]] {
        let e = simulate_plan(&t, &chain, 1000, &opts(Some(bad))).unwrap_err();
        assert!(matches!(e, SimError::BadEntries { ranks: 3 }), "{e}");
    }
}
