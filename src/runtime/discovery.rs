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
use crate::estimate::bucket::probe_pairs;
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
        let calibrating = calibration_wanted(comm, rank, cfg)?;
        let (calibration, burst, cpu_pools) = calibrate(comm, rank, &hosts, calibrating, Some(&t))?;
        return Ok(Acquired {
            topology: Some(Arc::new(t)),
            source: Source::SingleHost,
            message_overhead_s: None,
            message_costs: None,
            calibration,
            burst,
            cpu_pools,
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
        message_costs: None,
        calibration: None,
        burst: Default::default(),
        cpu_pools: None,
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
    // The ring's train and kernels serve only calibrated predictions: skipped otherwise.
    let calibrating = calibration_wanted(comm, rank, cfg)?;
    let mut ring = super::mpi_prober::ring(comm, rank, &hosts, calibrating)?;
    let (calibration, burst, cpu_pools) = calibrate(comm, rank, &hosts, calibrating, Some(&t))?;
    if calibrating {
        super::mpi_prober::ring_train_again(comm, rank, &hosts, &mut ring)?;
    }
    // [planning overhead, predictions' CPU time per message, predictions' wake-up, the CPU
    // time each of the train's two passes gave]
    let mut costs = [0.0f64; 5];
    if let (Some(r), 0) = (&ring, rank) {
        let o = message_overhead(&t, r.hop_s, &r.members);
        costs[0] = o;
        if calibrating {
            let m = MessageCosts::from_ring(o, r);
            costs[1..].copy_from_slice(&[m.cpu_s, m.wake_s, m.cpu_passes_s[0], m.cpu_passes_s[1]]);
        }
    }
    raw::bcast(&mut costs, 0, comm)?;
    Ok(Acquired {
        topology: Some(Arc::new(t)),
        source,
        message_overhead_s: Some(costs[0]),
        message_costs: calibrating.then_some(MessageCosts {
            cpu_s: costs[1],
            wake_s: costs[2],
            cpu_passes_s: [costs[3], costs[4]],
        }),
        calibration,
        burst,
        cpu_pools,
    })
}

/// Collective: the set-up calibration of predictions ([`super::calibrate`] between host-mates,
/// [`super::burst`] on the tree's slow links, the CPU pools) when `calibrating` (from
/// [`calibration_wanted`], the same on every rank).
unsafe fn calibrate(
    comm: MPI_Comm,
    rank: u32,
    hosts: &Hosts,
    calibrating: bool,
    topology: Option<&Topology>,
) -> Result<(
    Option<crate::estimate::calibrate::Calibration>,
    super::burst::Findings,
    Option<crate::sim::CpuPools>,
)> {
    let mates = super::calibrate::host_mates(hosts).is_some();
    let slow_links = topology.is_some_and(|t| !probe_pairs(t, 1).is_empty());
    if !calibrating || (!mates && !slow_links) {
        return Ok((None, Default::default(), None)); // nothing to measure: the same on every rank
    }
    let shared = super::setup_cache::Shared::new(comm)?;
    let calibration = super::calibrate::measure(comm, rank, hosts, &shared)?;
    let burst = match topology {
        Some(t) if slow_links => super::burst::measure(comm, rank, t, &shared)?,
        _ => Default::default(),
    };
    let pools = match topology {
        Some(_) if hosts.count() > 1 && comm_size(comm)? <= super::config::SIMULATED_RANKS_MAX => cpu_pools(comm)?,
        _ => None,
    };
    Ok((calibration, burst, pools))
}

/// Collective: whether set-up calibrates predictions: when rank 0 has profiling configured
/// (only profiles use predictions) and not `TREECAST_CALIBRATE=0`. Rank 0 decides and
/// broadcasts it, so ranks whose environments differ still agree (a rank skipping a
/// measurement while the others wait in it would hang the job).
fn calibration_wanted(comm: MPI_Comm, rank: u32, cfg: &Config) -> Result<bool> {
    let mut flag: c_int = (rank == 0 && cfg.calibrate && cfg.profile_path.is_some()) as c_int;
    raw::bcast(std::slice::from_mut(&mut flag), 0, comm)?;
    Ok(flag != 0)
}

fn comm_size(comm: MPI_Comm) -> Result<u32> {
    Ok(raw::comm_size(comm)?.max(0) as u32)
}

/// Collective: the ranks that outnumber the CPUs of their kernel, as CPU pools for the
/// simulator (`None` when no kernel is crowded). Every rank gathers every rank's boot id and
/// CPU mask (136 bytes each), so it is done only where predictions simulate (at most
/// `config::SIMULATED_RANKS_MAX` ranks).
///
/// Why: on the emulated 3x3 cluster nine ranks share two CPUs. Charged to each rank as if it
/// had a CPU of its own, the CPU time a message costs (23 us there) made a 16 KiB pipeline
/// look 26-54% faster than it ran, in 6 of 6 jobs.
fn cpu_pools(comm: MPI_Comm) -> Result<Option<crate::sim::CpuPools>> {
    let mine = crate::host::kernel_words();
    let n = comm_size(comm)? as usize;
    let mut all = vec![0i64; mine.len() * n];
    raw::allgather(&mine, &mut all, comm)?;
    let kernels: Vec<(u64, Vec<u64>)> = all.chunks(mine.len()).map(crate::host::from_kernel_words).collect();
    Ok(pools_of(&kernels))
}

/// One CPU pool per kernel whose ranks (boot id and CPU mask, in rank order) outnumber the
/// CPUs they may use together; `None` when there is no such kernel.
fn pools_of(kernels: &[(u64, Vec<u64>)]) -> Option<crate::sim::CpuPools> {
    let crowded: Vec<crate::host::KernelGroup> =
        crate::host::kernel_groups(kernels.iter().map(|(b, m)| (*b, m.as_slice())))
            .into_iter()
            .filter(|g| g.crowded())
            .collect();
    if crowded.is_empty() {
        return None;
    }
    let mut pool_of = vec![None; kernels.len()];
    for (p, g) in crowded.iter().enumerate() {
        for &r in &g.members {
            pool_of[r] = Some(p as u32);
        }
    }
    Some(crate::sim::CpuPools {
        pool_of,
        cpus: crowded.iter().map(|g| g.cpus).collect(),
    })
}

/// What a communicator learns about its network at start-up.
pub struct Acquired {
    /// Rank-level tree, identical on every rank, if known.
    pub topology: Option<Arc<Topology>>,
    pub source: Source,
    /// Per-message overhead for planning (seconds), measured by the token ring between hosts;
    /// `None` on one host or without a topology.
    pub message_overhead_s: Option<f64>,
    /// What predictions charge a message between hosts, from the same ring and its train
    /// (`None` where `message_overhead_s` is, or when predictions are not calibrated).
    pub message_costs: Option<MessageCosts>,
    /// What two host-mates measured at set-up (`None` when no two ranks share a host, without a
    /// topology, or with `TREECAST_CALIBRATE=0`): for predictions only, never for planning.
    pub calibration: Option<crate::estimate::calibrate::Calibration>,
    /// Token buckets and the senders' transport buffer found on the tree's slow links by the
    /// same calibration (predictions only).
    pub burst: super::burst::Findings,
    /// Across hosts, with the same calibration: ranks that share their kernel's CPUs with more
    /// ranks than it has (predictions only).
    pub cpu_pools: Option<crate::sim::CpuPools>,
}

/// What predictions across hosts charge a message (seconds), split in two because relays are
/// not always asleep when a message lands: `cpu_s`, the CPU time it costs its sender and
/// receiver together (half each), and `wake_s`, what a relay that was idle pays before it
/// can take the message in (`sim::SimOptions::wake_s`).
///
/// Why: predictions used to charge the ring's whole per-message overhead to every message.
/// On the emulated 3x3 cluster that overhead read 53-97 us per hop, while a 64 KiB broadcast
/// pipelined in 8 segments ran 870-1480 us; the prediction charged every segment a wake-up
/// the relays, busy with the segment before, never paid, and missed by +27 .. +85% in 6 of 10
/// jobs, its error following the ring's reading (correlation 0.67 over 20 jobs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MessageCosts {
    pub cpu_s: f64,
    pub wake_s: f64,
    /// What each of the train's two passes gave as `cpu_s` (0 for a pass not run): `cpu_s` is
    /// the lesser; far apart, the host's state changed while the set-up timed it.
    pub cpu_passes_s: [f64; 2],
}

impl MessageCosts {
    /// From the ring's per-message overhead `overhead_s` (a lone token's hop beyond the
    /// links' latency) and its train: a token that reaches a busy relay costs the train's step,
    /// over the members sharing a CPU, and at most the whole overhead. In the simulator a
    /// relay's hop is its wake-up and its half of the CPU time (a send leaves at once and
    /// occupies its sender's CPU afterwards), so the wake-up is what makes a lone token's hop
    /// the ring's overhead.
    pub fn from_ring(overhead_s: f64, ring: &super::mpi_prober::Ring) -> MessageCosts {
        let cpu_of = |step_s: f64| (step_s / ring.members_per_cpu).clamp(0.0, overhead_s);
        let cpu_s = cpu_of(ring.train_step_s);
        let wake_s = (overhead_s - cpu_s / 2.0).max(0.0);
        let mut cpu_passes_s = [0.0; 2];
        for (c, s) in cpu_passes_s.iter_mut().zip(&ring.train_passes_s) {
            *c = cpu_of(*s);
        }
        log::info!(
            "treecast: a train of tokens steps {:.1} us per token (the least of {} passes: {}) over \
             {:.2} ring members per CPU: predictions charge {:.1} us of CPU per message and {:.1} \
             us to wake an idle relay",
            ring.train_step_s * 1e6,
            ring.train_passes_s.len(),
            ring.train_passes_s
                .iter()
                .map(|s| format!("{:.1}", s * 1e6))
                .collect::<Vec<_>>()
                .join(", "),
            ring.members_per_cpu,
            cpu_s * 1e6,
            wake_s * 1e6
        );
        MessageCosts {
            cpu_s,
            wake_s,
            cpu_passes_s,
        }
    }
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

    fn ring(step_us: f64, per_cpu: f64) -> super::super::mpi_prober::Ring {
        super::super::mpi_prober::Ring {
            hop_s: 80e-6,
            train_step_s: step_us * 1e-6,
            train_passes_s: vec![step_us * 1e-6],
            members_per_cpu: per_cpu,
            members: vec![0, 1, 2],
        }
    }

    /// Ranks of a crowded kernel form a pool; a kernel with a CPU per rank, or an unknown one,
    /// does not.
    #[test]
    fn only_crowded_kernels_pool_their_ranks() {
        let two = vec![0b11u64];
        let k = |b: u64| (b, two.clone());
        let pools = pools_of(&[k(1), k(2), k(1), k(1), k(2), (0, two.clone())]).expect("kernel 1 is crowded");
        assert_eq!(pools.pool_of, vec![Some(0), None, Some(0), Some(0), None, None]);
        assert_eq!(pools.cpus, vec![2]);
        assert_eq!(pools_of(&[k(1), k(1), k(2)]), None);
    }

    /// The emulated 3x3 cluster's reading (72.4 us of overhead, a train step of 103.3 us over
    /// 4.5 members per CPU) charges 23 us of CPU and wakes a relay in the rest of the lone
    /// token's hop; a step larger than the whole overhead is capped, and a train that came
    /// back as fast as one token charges no CPU, only the wake-up.
    #[test]
    fn message_costs_split_the_rings_overhead() {
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        let m = MessageCosts::from_ring(72.4e-6, &ring(103.3, 4.5));
        let cpu = 103.3e-6 / 4.5; // 22.96 us
        assert!(close(m.cpu_s, cpu) && close(m.wake_s, 72.4e-6 - cpu / 2.0), "{m:?}");
        let m = MessageCosts::from_ring(10e-6, &ring(40.0, 1.0));
        assert!(close(m.cpu_s, 10e-6) && close(m.wake_s, 5e-6), "{m:?}");
        let m = MessageCosts::from_ring(10e-6, &ring(0.0, 1.0));
        assert!(close(m.cpu_s, 0.0) && close(m.wake_s, 10e-6), "{m:?}");
        // Two passes of the train: each pass's CPU time is kept for the profile, and the costs
        // follow the lesser step (`train_step_s`, which `ring_train_again` lowers).
        let mut r = ring(73.7, 4.0);
        r.train_passes_s.push(148.1e-6);
        let m = MessageCosts::from_ring(72.4e-6, &r);
        assert!(close(m.cpu_s, 73.7e-6 / 4.0), "{m:?}");
        assert!(
            close(m.cpu_passes_s[0], 73.7e-6 / 4.0) && close(m.cpu_passes_s[1], 148.1e-6 / 4.0),
            "{m:?}"
        );
    }

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
