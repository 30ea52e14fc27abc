//! Learning the network of a communicator at start-up (collective).
//!
//! 1. Hosts ([`super::hosts`]): ranks sharing memory are grouped exactly with
//!    `MPI_Comm_split_type(SHARED)`; the lowest rank of each group is its leader, and the group
//!    is named by its processor name.
//! 2. The host-level tree comes, in this order, from `TREECAST_TOPOLOGY` (JSON or Slurm), from
//!    the cache in `TREECAST_CACHE` keyed by the sorted host names, or from probing RTTs between
//!    host leaders and inferring the tree (`probe` + `infer`); one host needs no network at all.
//! 3. Every decision is taken on rank 0 and broadcast (the tree travels as JSON), so all ranks
//!    hold the identical topology even if only rank 0 can read the file.
//! 4. Ranks are attached under their host's node with shared-memory link parameters, giving the
//!    rank-level tree the planner works on (rank leaves = communicator ranks).
//!
//! Any failure degrades to `None` (topology-agnostic plans) on every rank alike: a wrong or
//! missing tree may only cost speed, never correctness.

use super::config::Config;
use super::hosts::{discover_hosts, Hosts};
use crate::error::{Error, ErrorKind, Result};
use crate::estimate::bucket::{probe_pairs, LinkBucket};
use crate::exec::raw;
use crate::topology::{self, Topology, TopologyBuilder, VertexKind};
use mpi::ffi::MPI_Comm;
use std::collections::HashMap;
use std::os::raw::c_int;
use std::sync::Arc;

/// One-way latency and bandwidth assumed between ranks of one host (shared memory).
pub const SHM_LATENCY_S: f64 = 0.3e-6;
pub const SHM_BANDWIDTH_BPS: f64 = 8e9;

/// Attach the communicator's ranks under their hosts' nodes in a host-level tree (whose leaves
/// are nodes named like `hosts.names`; ranks already in it are dropped). Fails if a host of the
/// job is missing from the tree.
///
/// The tree is cut down to the part spanning the job's hosts: a file may describe the whole
/// cluster (and a sub-communicator uses only some hosts), but planners expect every host and
/// switch to have ranks below it.
pub fn attach_ranks(host_tree: &Topology, hosts: &Hosts) -> std::result::Result<Topology, AttachError> {
    let mut job_vertex = Vec::with_capacity(hosts.names.len());
    for name in &hosts.names {
        let v = host_tree
            .find(name)
            .filter(|&v| host_tree.vertex(v).kind == VertexKind::Node)
            .ok_or_else(|| AttachError::MissingHost(name.clone()))?;
        job_vertex.push(v);
    }
    let keep = spanning_vertices(host_tree, &job_vertex);
    let mut b = TopologyBuilder::new();
    b.confidence = host_tree.confidence();
    let mut map: HashMap<usize, usize> = HashMap::new();
    for (i, v) in host_tree.vertices().iter().enumerate() {
        if v.kind != VertexKind::Rank && keep[i] {
            map.insert(i, b.vertex(v.name.clone(), v.kind));
        }
    }
    for l in host_tree.links() {
        if let (Some(&a), Some(&c)) = (map.get(&l.a), map.get(&l.b)) {
            // Everything the link carries (latency fit, confidence), between the kept vertices.
            b.links.push(crate::topology::Link { a, b: c, ..l.clone() });
        }
    }
    for (rank, &h) in hosts.host_of.iter().enumerate() {
        let name = &hosts.names[h as usize];
        let host_v = host_tree
            .find(name)
            .and_then(|v| map.get(&v).copied())
            .filter(|&v| b.vertices[v].kind == VertexKind::Node)
            .ok_or_else(|| AttachError::MissingHost(name.clone()))?;
        let r = b.rank(rank as u32);
        b.link(r, host_v, SHM_LATENCY_S, SHM_BANDWIDTH_BPS);
    }
    b.build().map_err(AttachError::Build)
}

/// Why the job's ranks could not be attached to a host-level tree.
#[derive(Debug)]
pub enum AttachError {
    /// A host of the job is not a node of the tree (a topology file of another cluster, or a
    /// cache of another set of hosts).
    MissingHost(String),
    /// The tree with the ranks attached is not a valid topology.
    Build(crate::topology::TopologyError),
}

impl std::fmt::Display for AttachError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AttachError::MissingHost(name) => write!(f, "host '{name}' of this job is not a node of the topology"),
            AttachError::Build(e) => write!(f, "cannot attach ranks to the topology: {e}"),
        }
    }
}

impl std::error::Error for AttachError {}

/// What rank 0 knows before any probing: a host-level tree (as JSON, to broadcast) and where it
/// came from, that the network must be probed, or why there is no tree.
enum Decision {
    Tree(String, Source),
    Probe,
    Unavailable(String),
}

/// Vertices of the smallest subtree containing `wanted` (the tree rooted at one of them; a
/// vertex is kept when its subtree holds a wanted vertex).
fn spanning_vertices(t: &Topology, wanted: &[usize]) -> Vec<bool> {
    let n = t.vertices().len();
    let mut adj: Vec<Vec<usize>> = vec![Vec::new(); n];
    for l in t.links() {
        adj[l.a].push(l.b);
        adj[l.b].push(l.a);
    }
    let mut keep = vec![false; n];
    let Some(&root) = wanted.first() else {
        return keep;
    };
    for &w in wanted {
        keep[w] = true;
    }
    // Iterative DFS order, then propagate "holds a wanted vertex" from the leaves up.
    let mut parent = vec![usize::MAX; n];
    let mut order = Vec::with_capacity(n);
    let mut seen = vec![false; n];
    let mut stack = vec![root];
    seen[root] = true;
    while let Some(v) = stack.pop() {
        order.push(v);
        for &w in &adj[v] {
            if !seen[w] {
                seen[w] = true;
                parent[w] = v;
                stack.push(w);
            }
        }
    }
    for &v in order.iter().rev() {
        if keep[v] && parent[v] != usize::MAX {
            keep[parent[v]] = true;
        }
    }
    keep
}

/// A single host: one node with every rank below it.
pub fn single_host(name: &str, nranks: u32) -> Topology {
    let mut b = TopologyBuilder::new();
    let n = b.vertex(name, VertexKind::Node);
    for r in 0..nranks {
        let rv = b.rank(r);
        b.link(rv, n, SHM_LATENCY_S, SHM_BANDWIDTH_BPS);
    }
    b.build().expect("a star is a tree")
}

/// Cache file for a set of hosts: a stable hash of the sorted names.
pub fn cache_path(dir: &str, names: &[String]) -> std::path::PathBuf {
    let mut sorted: Vec<&String> = names.iter().collect();
    sorted.sort();
    // FNV-1a: stable across runs and Rust versions (unlike DefaultHasher).
    let joined: Vec<u8> = sorted
        .iter()
        .flat_map(|n| n.bytes().chain(std::iter::once(0)))
        .collect();
    let h = crate::util::fnv1a(&joined);
    std::path::Path::new(dir).join(format!("treecast-topology-{h:016x}.json"))
}

/// Where a communicator's topology came from (for logs and `treecast probe`).
#[derive(Clone, Debug, PartialEq)]
pub enum Source {
    SingleHost,
    File(String),
    Cache(String),
    Probed { seconds: f64 },
    Unavailable(String),
}

/// Collective: the rank-level topology of `comm`, identical on every rank, or `None`.
///
/// # Safety
/// `comm` must be our valid duplicate communicator.
pub unsafe fn acquire(comm: MPI_Comm, rank: u32, size: u32, cfg: &Config) -> Result<Acquired> {
    let hosts = discover_hosts(comm, rank, size, cfg)?;
    if hosts.count() == 1 {
        let t = single_host(&hosts.names[0], size);
        let (calibration, buckets) = calibrate(comm, rank, &hosts, cfg, Some(&t))?;
        return Ok(Acquired {
            topology: Some(Arc::new(t)),
            source: Source::SingleHost,
            message_overhead_s: None,
            calibration,
            buckets,
        });
    }
    // Rank 0 decides and produces the host-level tree as JSON (or why there is none); the other
    // ranks learn the outcome from its broadcast.
    let mut decided = Decision::Probe;
    if rank == 0 {
        decided = host_tree_on_rank0(&hosts, cfg);
    }
    // Probing is collective among host leaders; rank 0 asks for it through the broadcast flag.
    let want_probe = rank == 0 && matches!(decided, Decision::Probe) && cfg.probe;
    let mut flag: c_int = want_probe as c_int;
    raw::bcast(std::slice::from_mut(&mut flag), 0, comm)?;
    if flag != 0 {
        let t0 = raw::wtime();
        let probed = super::mpi_prober::probe_and_infer(comm, rank, &hosts, cfg);
        if rank == 0 {
            decided = match probed {
                Ok(tree) => {
                    let json = topology::json::to_string(&tree);
                    if let Some(dir) = &cfg.cache_dir {
                        let p = cache_path(dir, &hosts.names);
                        match std::fs::create_dir_all(dir).and_then(|_| std::fs::write(&p, &json)) {
                            Ok(()) => log::info!("treecast: cached the inferred topology in {}", p.display()),
                            Err(e) => log::warn!("treecast: cannot write topology cache {}: {e}", p.display()),
                        }
                    }
                    Decision::Tree(
                        json,
                        Source::Probed {
                            seconds: raw::wtime() - t0,
                        },
                    )
                }
                Err(e) => Decision::Unavailable(format!("probing failed: {e}")),
            };
        }
    } else if rank == 0 && matches!(decided, Decision::Probe) {
        decided = Decision::Unavailable("probing disabled (TREECAST_PROBE=0) and no topology file or cache".into());
    }
    // Broadcast rank 0's outcome: [ok flag][source tag + text]. Only rank 0's payload is sent,
    // and rank 0 has decided by now (a wish to probe was either probed or refused above).
    let payload = match &decided {
        Decision::Tree(json, src) => format!("1{}\n{json}", source_tag(src)),
        Decision::Unavailable(e) => format!("0{e}"),
        Decision::Probe => String::new(),
    };
    let text = bcast_string(comm, rank, &payload)?;
    let (ok, rest) = text.split_at(1.min(text.len()));
    let unavailable = |why: String| Acquired {
        topology: None,
        source: Source::Unavailable(why),
        message_overhead_s: None,
        calibration: None,
        buckets: Vec::new(),
    };
    if ok != "1" {
        return Ok(unavailable(rest.to_string()));
    }
    let (tag, json) = rest.split_once('\n').unwrap_or((rest, ""));
    let source = parse_source(tag);
    let tree = match topology::json::from_str(json, "(broadcast topology)") {
        Ok(t) => t,
        Err(e) => return Ok(unavailable(format!("broadcast topology unreadable: {e}"))),
    };
    // Every rank reaches this point with the same outcome, so the ring is collective.
    let t = match attach_ranks(&tree, &hosts) {
        Ok(t) => t,
        Err(e) => return Ok(unavailable(e.to_string())),
    };
    let ring = super::mpi_prober::ring_hop_s(comm, rank, &hosts)?;
    let mut overhead: f64 = match &ring {
        Some((hop, members)) if rank == 0 => message_overhead(&t, *hop, members),
        _ => 0.0,
    };
    raw::bcast(std::slice::from_mut(&mut overhead), 0, comm)?;
    let (calibration, buckets) = calibrate(comm, rank, &hosts, cfg, Some(&t))?;
    Ok(Acquired {
        topology: Some(Arc::new(t)),
        source,
        message_overhead_s: Some(overhead),
        calibration,
        buckets,
    })
}

/// Collective: the set-up calibration of predictions ([`super::calibrate`] between host-mates,
/// [`super::burst`] on the tree's slow links) when rank 0 has profiling configured (only
/// profiles use predictions) and not `TREECAST_CALIBRATE=0`. Rank 0 decides and broadcasts
/// it, so ranks whose environments differ still agree (a rank skipping the measurement while
/// the others wait in it would hang the job).
unsafe fn calibrate(
    comm: MPI_Comm,
    rank: u32,
    hosts: &Hosts,
    cfg: &Config,
    topology: Option<&Topology>,
) -> Result<(Option<crate::estimate::calibrate::Calibration>, Vec<LinkBucket>)> {
    let mates = super::calibrate::host_mates(hosts).is_some();
    let slow_links = topology.is_some_and(|t| !probe_pairs(t, 1).is_empty());
    if !mates && !slow_links {
        return Ok((None, Vec::new())); // nothing to measure: the same on every rank
    }
    let mut flag: c_int = (rank == 0 && cfg.calibrate && cfg.profile_path.is_some()) as c_int;
    raw::bcast(std::slice::from_mut(&mut flag), 0, comm)?;
    if flag == 0 {
        return Ok((None, Vec::new()));
    }
    let shared = super::setup_cache::Shared::new(comm)?;
    let calibration = super::calibrate::measure(comm, rank, hosts, &shared)?;
    let buckets = match topology {
        Some(t) if slow_links => super::burst::measure(comm, rank, t, &shared)?,
        _ => Vec::new(),
    };
    Ok((calibration, buckets))
}

/// What a communicator learns about its network at start-up.
pub struct Acquired {
    /// Rank-level tree, identical on every rank, if known.
    pub topology: Option<Arc<Topology>>,
    pub source: Source,
    /// Per-message overhead for planning (seconds), measured by the token ring between hosts;
    /// `None` on one host or without a topology.
    pub message_overhead_s: Option<f64>,
    /// What two host-mates measured at set-up (`None` when no two ranks share a host, without a
    /// topology, or with `TREECAST_CALIBRATE=0`): for predictions only, never for planning.
    pub calibration: Option<crate::estimate::calibrate::Calibration>,
    /// Token buckets found on the tree's slow links by the same calibration (predictions only).
    pub buckets: Vec<LinkBucket>,
}

/// The per-message overhead the planner charges, from the ring's median hop time: what a hop
/// costs beyond the one-way latency of its path in the topology (which ping-pong measured),
/// at least the planner's default.
fn message_overhead(t: &Topology, hop_s: f64, members: &[u32]) -> f64 {
    let k = members.len();
    let latency: f64 = (0..k)
        .map(|i| {
            let (a, b) = (t.rank_vertex(members[i]), t.rank_vertex(members[(i + 1) % k]));
            t.path(a, b).iter().map(|d| t.dir_params(*d).latency_s).sum::<f64>()
        })
        .sum::<f64>()
        / k as f64;
    let o = (hop_s - latency).max(crate::plan::pipeline::MESSAGE_OVERHEAD_S);
    log::info!(
        "treecast: a token ring over {k} hosts takes {:.1} us per hop, {:.1} us of it the links' \
         latency: planning with {:.1} us per message",
        hop_s * 1e6,
        latency * 1e6,
        o * 1e6
    );
    o
}

fn source_tag(s: &Source) -> String {
    match s {
        Source::File(f) => format!("file:{f}"),
        Source::Cache(f) => format!("cache:{f}"),
        Source::Probed { seconds } => format!("probed:{seconds}"),
        Source::SingleHost => "single".into(),
        Source::Unavailable(e) => format!("none:{e}"),
    }
}

fn parse_source(tag: &str) -> Source {
    match tag.split_once(':') {
        Some(("file", f)) => Source::File(f.into()),
        Some(("cache", f)) => Source::Cache(f.into()),
        Some(("probed", s)) => Source::Probed {
            seconds: s.parse().unwrap_or(0.0),
        },
        _ => Source::SingleHost,
    }
}

/// Rank 0: the host-level tree from a file or the cache, else [`Decision::Probe`].
fn host_tree_on_rank0(hosts: &Hosts, cfg: &Config) -> Decision {
    if let Some(f) = &cfg.topology_file {
        return match topology::load_file(std::path::Path::new(f)) {
            Ok(t) => Decision::Tree(topology::json::to_string(&t), Source::File(f.clone())),
            Err(e) => Decision::Unavailable(format!("TREECAST_TOPOLOGY: {e}")),
        };
    }
    if let Some(dir) = &cfg.cache_dir {
        let p = cache_path(dir, &hosts.names);
        if p.exists() {
            return match topology::load_file(&p) {
                Ok(t) => Decision::Tree(topology::json::to_string(&t), Source::Cache(p.display().to_string())),
                Err(e) => {
                    log::warn!("treecast: ignoring unreadable topology cache: {e}");
                    Decision::Probe
                }
            };
        }
    }
    Decision::Probe
}

/// Broadcast a string from rank 0 (length, then bytes).
unsafe fn bcast_string(comm: MPI_Comm, rank: u32, s: &str) -> Result<String> {
    let mut len: i64 = if rank == 0 { s.len() as i64 } else { 0 };
    raw::bcast(std::slice::from_mut(&mut len), 0, comm)?;
    let mut buf = if rank == 0 {
        s.as_bytes().to_vec()
    } else {
        vec![0u8; len as usize]
    };
    raw::bcast_bytes(&mut buf, 0, comm)?;
    String::from_utf8(buf).map_err(|_| Error::new(ErrorKind::Other, "broadcast topology is not UTF-8"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_attach_under_their_hosts() {
        let tree = crate::topology::slurm::from_str(
            "SwitchName=s0 Nodes=a,b\nSwitchName=s1 Nodes=c\nSwitchName=top Switches=s[0-1]\n",
            "t",
        )
        .unwrap();
        let hosts = Hosts {
            host_of: vec![2, 0, 0, 1],
            names: vec!["a".into(), "b".into(), "c".into()],
            leaders: vec![1, 3, 0],
        };
        let t = attach_ranks(&tree, &hosts).unwrap();
        assert_eq!(t.num_ranks(), 4);
        assert_eq!(t.vertex(t.host_of_rank(0).unwrap()).name, "c");
        assert_eq!(t.vertex(t.host_of_rank(1).unwrap()).name, "a");
        assert_eq!(t.vertex(t.host_of_rank(3).unwrap()).name, "b");
        // Ranks 1 and 2 share host a: their path is only the shared-memory links.
        let (v1, v2) = (t.rank_vertex(1), t.rank_vertex(2));
        assert!((t.path_latency(v1, v2) - 2.0 * SHM_LATENCY_S).abs() < 1e-15);
        // A host missing from the tree is an error naming it.
        let bad = Hosts {
            host_of: vec![0],
            names: vec!["zz".into()],
            leaders: vec![0],
        };
        let e = attach_ranks(&tree, &bad).unwrap_err();
        assert!(matches!(&e, AttachError::MissingHost(h) if h == "zz"), "{e}");
        assert!(e.to_string().contains("'zz'"), "{e}");
    }

    #[test]
    fn a_job_on_some_hosts_gets_only_the_tree_spanning_them() {
        let tree = crate::topology::slurm::from_str(
            "SwitchName=s0 Nodes=a,b\nSwitchName=s1 Nodes=c,d\nSwitchName=s2 Nodes=e\nSwitchName=top Switches=s[0-2]\n",
            "t",
        )
        .unwrap();
        // Hosts a and b only: switch s0 is all that is left of the network.
        let hosts = Hosts {
            host_of: vec![0, 1],
            names: vec!["a".into(), "b".into()],
            leaders: vec![0, 1],
        };
        let t = attach_ranks(&tree, &hosts).unwrap();
        let names: Vec<&str> = t.vertices().iter().map(|v| v.name.as_str()).collect();
        assert!(
            names.contains(&"s0") && !names.contains(&"top") && !names.contains(&"c"),
            "{names:?}"
        );
        // Hosts a and c: the path a - s0 - top - s1 - c stays, b, d, e and s2 go.
        let hosts = Hosts {
            host_of: vec![0, 1],
            names: vec!["a".into(), "c".into()],
            leaders: vec![0, 1],
        };
        let t = attach_ranks(&tree, &hosts).unwrap();
        let mut names: Vec<&str> = t.vertices().iter().map(|v| v.name.as_str()).collect();
        names.sort_unstable();
        assert_eq!(names, ["a", "c", "r0", "r1", "s0", "s1", "top"]);
    }

    #[test]
    fn cache_key_ignores_order_and_separates_names() {
        let a = cache_path("/c", &["x".into(), "y".into()]);
        let b = cache_path("/c", &["y".into(), "x".into()]);
        let c = cache_path("/c", &["xy".into()]);
        assert_eq!(a, b);
        assert_ne!(a, c);
    }
}
