//! From the working tree to a [`Topology`], and from a host-level tree to a rank-level one.

use super::fit::{fit_links, PathSamples};
use super::store::Store;
use super::tree::WorkTree;
use crate::topology::{Duplex, LinkDir, Topology, TopologyBuilder, TopologyError, VertexKind};
use std::collections::{HashMap, HashSet};

/// Build the host-level topology: switches named `sw0, sw1, ...` (in a canonical order: depth
/// first from the root, children by their smallest host name), hosts as `node` leaves named by
/// host. Links are symmetric and full duplex; their bandwidth is the bandwidth map's value, or
/// infinite when no map was built (latency-only planning). Every link carries a latency fit
/// from the samples of the measured pairs whose paths cross it (see `fit`), when it has enough.
/// `confidence` gives links (by their lower vertex) their confidence, and `overall` the tree's.
pub(crate) fn to_topology(
    t: &WorkTree,
    names: &[String],
    store: &Store,
    bandwidth: Option<&HashMap<usize, f64>>,
    confidence: &HashMap<usize, f64>,
    overall: Option<f64>,
) -> Result<Topology, TopologyError> {
    let mut b = TopologyBuilder::new();
    b.confidence = overall;
    let hosts: Vec<usize> = t.hosts().collect();
    if hosts.len() == 1 {
        b.vertex(names[hosts[0]].clone(), VertexKind::Node);
        return b.build();
    }
    let taken: HashSet<&str> = names.iter().map(|s| s.as_str()).collect();
    let mut prefix = String::from("sw");
    while taken.iter().any(|n| n.starts_with(&prefix)) {
        prefix.insert(0, '_');
    }
    let min_name = min_host_names(t, names);
    let root = t.root();
    let mut id: HashMap<usize, usize> = HashMap::new();
    let mut stack = vec![root];
    let mut switches = 0usize;
    let mut order = Vec::new();
    while let Some(v) = stack.pop() {
        let vid = match t.host_of(v) {
            Some(h) => b.vertex(names[h].clone(), VertexKind::Node),
            None => {
                switches += 1;
                b.vertex(format!("{prefix}{}", switches - 1), VertexKind::Switch)
            }
        };
        id.insert(v, vid);
        order.push(v);
        let mut kids: Vec<usize> = t.children(v).to_vec();
        kids.sort_by(|x, y| min_name[x].cmp(&min_name[y]));
        stack.extend(kids.into_iter().rev());
    }
    if t.is_host(root) {
        // Two hosts and no switch: a switch in the middle (RTTs cannot tell where it is). Its
        // two halves are crossed by the same pair, so they share its samples evenly.
        let c = t.children(root)[0];
        let s = b.vertex(format!("{prefix}0"), VertexKind::Switch);
        let bw = bandwidth.and_then(|m| m.get(&c).copied()).unwrap_or(f64::INFINITY);
        let half = t.len(c) / 2.0;
        let fits = fit_links(&[half, half], &path_samples(store, |_, _| Some(vec![0, 1])));
        for (v, fit) in [root, c].into_iter().zip(fits) {
            let l = b.link(id[&v], s, half, bw);
            b.links[l].latency_fit = fit;
        }
        return b.build();
    }
    // Tree links are named by their child vertex; index them in export order.
    let tree_links: Vec<usize> = order.iter().copied().filter(|&v| t.parent(v).is_some()).collect();
    let index: HashMap<usize, usize> = tree_links.iter().enumerate().map(|(i, &v)| (v, i)).collect();
    let latency: Vec<f64> = tree_links.iter().map(|&v| t.len(v)).collect();
    let paths = path_samples(store, |a, b| {
        let (u, w) = (t.vertex_of(a)?, t.vertex_of(b)?);
        Some(path_links(t, u, w).iter().map(|v| index[v]).collect())
    });
    let fits = fit_links(&latency, &paths);
    for (&v, fit) in tree_links.iter().zip(fits) {
        let p = t.parent(v).expect("tree links have parents");
        let lat = t.len(v);
        let bw = bandwidth.and_then(|m| m.get(&v).copied()).unwrap_or(f64::INFINITY);
        let d = LinkDir::new(lat, bw);
        let l = b.link_full(id[&v], id[&p], d, d, Duplex::Full);
        b.links[l].latency_fit = fit;
        b.links[l].confidence = confidence.get(&v).copied();
    }
    b.build()
}

/// Every usable measurement (not marked bad) with the links its path crosses, as `links(a, b)`
/// names them (`None`: a host not in the tree, skipped).
fn path_samples<'a>(store: &'a Store, links: impl Fn(usize, usize) -> Option<Vec<usize>>) -> Vec<PathSamples<'a>> {
    store
        .raw
        .iter()
        .filter(|m| !store.is_bad(m.a, m.b))
        .filter_map(|m| {
            Some(PathSamples {
                measurement: m,
                links: links(m.a, m.b)?,
            })
        })
        .collect()
}

/// The links (named by their child vertex) on the path between vertices `u` and `w`.
fn path_links(t: &WorkTree, u: usize, w: usize) -> Vec<usize> {
    let top = t.lca(u, w);
    let mut out = Vec::new();
    for start in [u, w] {
        let mut x = start;
        while x != top {
            out.push(x);
            x = t.parent(x).expect("below the common ancestor");
        }
    }
    out
}

/// Smallest host name below every vertex (for canonical ordering).
fn min_host_names(t: &WorkTree, names: &[String]) -> HashMap<usize, String> {
    let mut out: HashMap<usize, String> = HashMap::new();
    let mut post = Vec::new();
    let mut stack = vec![t.root()];
    while let Some(v) = stack.pop() {
        post.push(v);
        stack.extend(t.children(v).iter().copied());
    }
    for &v in post.iter().rev() {
        let mut best: Option<String> = t.host_of(v).map(|h| names[h].clone());
        for c in t.children(v) {
            let m = &out[c];
            if best.as_ref().is_none_or(|b| m < b) {
                best = Some(m.clone());
            }
        }
        out.insert(v, best.unwrap_or_default());
    }
    out
}

/// Hang ranks below the hosts of a host-level tree: rank `r` becomes a `rank` leaf below the
/// `node` named `rank_hosts[r]`, joined by `rank_link` (intra-host latency and bandwidth).
/// Hosts without ranks stay as they are.
pub fn with_ranks(host_tree: &Topology, rank_hosts: &[String], rank_link: LinkDir) -> Result<Topology, TopologyError> {
    let mut b = host_tree.to_builder();
    for (r, host) in rank_hosts.iter().enumerate() {
        let node = host_tree
            .find(host)
            .filter(|&v| host_tree.vertex(v).kind == VertexKind::Node)
            .ok_or_else(|| TopologyError::new(format!("rank {r}: host '{host}' is not a node of the tree")))?;
        let rv = b.rank(r as u32);
        b.link_full(rv, node, rank_link, rank_link, Duplex::Full);
    }
    b.build()
}

#[cfg(test)]
mod tests {
    use crate::infer::{infer, InferOptions, Strategy, ALL_PAIRS_MAX_HOSTS};
    use crate::probe::{NoiseModel, SimProber};
    use crate::topology::gen::Tree;
    use crate::topology::{Topology, VertexKind};

    /// Infer `truth` through the simulated prober with heavy-tailed (Lomax) per-message jitter
    /// and check every exported link's latency fit: present, from the samples of at least one
    /// whole pair measurement (3 sets of at least 11 round trips each), Pareto minimum = the
    /// link's latency, normal mean above it. Returns (mean excess of host links, of
    /// switch-to-switch links).
    fn check_fits(truth: &Topology, strategy: Strategy, seed: u64) -> (f64, f64) {
        let noise = NoiseModel::jitter("lomax:scale_us=0.5,alpha=2.5".parse().unwrap());
        let mut p = SimProber::new(truth, noise, seed).unwrap();
        let r = infer(
            &mut p,
            &InferOptions {
                strategy,
                seed,
                ..InferOptions::default()
            },
        )
        .unwrap();
        let t = &r.topology;
        let (mut host, mut inner) = (Vec::new(), Vec::new());
        for (i, l) in t.links().iter().enumerate() {
            let fit = l
                .latency_fit
                .unwrap_or_else(|| panic!("{strategy:?}: link {i} ({:?}) has no latency fit", l));
            assert!(fit.samples >= 33, "{strategy:?}: link {i}: {} samples", fit.samples);
            let lat = l.ab.latency_s;
            let (k, alpha) = fit.pareto.expect("positive latency: a Pareto fit");
            assert_eq!(k, lat, "{strategy:?}: link {i}");
            assert!(alpha > 0.0, "{strategy:?}: link {i}: alpha {alpha}");
            let (mu, sd) = fit.normal.unwrap();
            assert!(mu >= lat && sd >= 0.0, "{strategy:?}: link {i}: {mu} {sd} vs {lat}");
            let is_host = [l.a, l.b].iter().any(|&v| t.vertex(v).kind == VertexKind::Node);
            if is_host { &mut host } else { &mut inner }.push(mu - lat);
        }
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
        assert!(!inner.is_empty(), "{strategy:?}: the tree has switch-to-switch links");
        (mean(&host), mean(&inner))
    }

    /// Both tree builders (all pairs up to 32 hosts, batch insertion beyond) export a fit on
    /// every link, switch-to-switch links included. The simulated jitter is per one-way message
    /// at the end hosts, the same on every path whatever its length, so a sound split puts it
    /// on host links: switch-to-switch links must get far less of it.
    #[test]
    fn every_inferred_link_carries_a_latency_fit() {
        // 24 hosts on 6 leaf switches under 2 aggregation switches: all pairs.
        let small = Tree {
            fanouts: vec![2, 3],
            ..Tree::fat_tree(4, 1)
        }
        .build()
        .unwrap();
        // 48 hosts on 12 leaf switches under 3 aggregation switches: batch insertion.
        let large = Tree {
            fanouts: vec![3, 4],
            ..Tree::fat_tree(4, 1)
        }
        .build()
        .unwrap();
        let hosts = |t: &Topology| t.vertices_of_kind(VertexKind::Node).len();
        assert!(hosts(&small) <= ALL_PAIRS_MAX_HOSTS && hosts(&large) > ALL_PAIRS_MAX_HOSTS);
        for (truth, strategy) in [
            (&small, Strategy::Auto),
            (&large, Strategy::Auto),
            (&small, Strategy::Batch),
        ] {
            for seed in [1, 2] {
                let (host, inner) = check_fits(truth, strategy, seed);
                assert!(host > 0.0, "{strategy:?} seed {seed}: host links have jitter");
                assert!(
                    inner < 0.2 * host,
                    "{strategy:?} seed {seed}: switch links' mean excess {inner:e} vs host links' {host:e}"
                );
            }
        }
    }

    /// Two hosts: one measured pair, exported as two half links around a switch; both halves
    /// carry the pair's samples and share its excess evenly.
    #[test]
    fn two_hosts_share_one_pair() {
        let truth = Tree::fat_tree(2, 1).build().unwrap();
        let noise = NoiseModel::jitter("lomax:scale_us=0.5,alpha=2.5".parse().unwrap());
        let mut p = SimProber::new(&truth, noise, 3).unwrap();
        let r = infer(&mut p, &InferOptions::default()).unwrap();
        let fits: Vec<_> = r.topology.links().iter().map(|l| l.latency_fit.unwrap()).collect();
        assert_eq!(fits.len(), 2);
        assert_eq!(fits[0], fits[1]);
        assert!(fits[0].samples >= 33 && fits[0].normal.unwrap().1 > 0.0, "{fits:?}");
    }
}
