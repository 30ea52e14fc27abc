//! The MPI libraries' broadcast algorithms, built as [`Plan`]s so the simulator runs them with
//! exactly the semantics of our own plans (the baselines we must beat).
//!
//! Names (`--algorithm` in `treecast simulate`), optional parameters after a colon:
//!
//! | name | what | from |
//! |---|---|---|
//! | `flat` | root sends to every rank (isend, rank order) | Open MPI `basic_linear`, SMPI `flattree` |
//! | `binomial[:seg=S]` | binomial tree, largest subtree first | MPICH, SMPI `binomial_tree` |
//! | `ompi-binomial[:seg=S]` | binomial tree, smallest subtree first | Open MPI `bmtree` |
//! | `binary[:seg=S]` | binary tree, level order | Open MPI `bintree` |
//! | `knomial[:k=K,seg=S]` | k-nomial tree (K = 4) | Open MPI `kmtree` |
//! | `chain` / `pipeline[:seg=S]` | chain in rank order; pipelined in S-byte segments (128 KiB) | Open MPI `chain`/`pipeline` |
//! | `split-binary` | halves down a binary tree, then pairwise swap | Open MPI `split_bintree` |
//! | `scatter-ring` | binomial scatter + ring allgather | Open MPI alg 9, MPICH `scatter_ring_allgather` |
//! | `scatter-rd` | binomial scatter + recursive-doubling allgather | Open MPI alg 8, MPICH `scatter_recursive_doubling_allgather` |
//! | `ompi` | Open MPI 4.1's fixed decision for (ranks, bytes) | `coll_tuned_decision_fixed.c` |
//! | `han[:seg=S]` | two-level: leaders across nodes, then within nodes, pipelined (64 KiB) | Open MPI `coll/han` |
//! | `topo-wave` | greedy earliest-arrival tree switch by switch | MPICH `topology_wave` |
//!
//! Segment sizes accept `4MiB`, `64KiB`, `1000` etc.; a plan's segments are equal-sized (they
//! differ by at most a byte), where the libraries use full segments and a short last one.
//!
//! The planner's `auto` chooser ranks all of them ([`Baseline::all`]) beside its own plans;
//! [`bound`] gives it cheap lower bounds on their simulated times, so it simulates only those
//! that could win.

pub mod bound;
pub mod hierarchy;
pub mod ompi;
pub mod scatter_allgather;

use crate::plan::{trees, Plan, DEFAULT_SEGMENT_BYTES};
use crate::sim::{placement, SimError};
use crate::topology::Topology;
use crate::util::bytes::parse_size;
use std::fmt;
use std::str::FromStr;

/// Default HAN segment size (`coll_han_bcast_segsize`).
pub const HAN_SEGMENT_BYTES: u64 = 64 * 1024;
/// Default Open MPI k-nomial radix (`coll_tuned_bcast_knomial_radix`).
pub const KNOMIAL_RADIX: u32 = 4;

/// A baseline broadcast algorithm with its parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Baseline {
    Flat,
    /// MPICH / SMPI binomial tree; `seg` bytes per segment (0 = unsegmented).
    Binomial {
        seg: u64,
    },
    /// Open MPI binomial tree.
    OmpiBinomial {
        seg: u64,
    },
    Binary {
        seg: u64,
    },
    Knomial {
        k: u32,
        seg: u64,
    },
    /// Chain in rank order; `seg` 0 is the unsegmented chain.
    Chain {
        seg: u64,
    },
    SplitBinary,
    ScatterRing,
    ScatterRd,
    Ompi,
    Han {
        seg: u64,
    },
    TopoWave,
}

impl Baseline {
    /// Every algorithm name, for help texts.
    pub const NAMES: &'static [&'static str] = &[
        "flat",
        "binomial",
        "ompi-binomial",
        "binary",
        "knomial",
        "chain",
        "pipeline",
        "split-binary",
        "scatter-ring",
        "scatter-rd",
        "ompi",
        "han",
        "topo-wave",
    ];

    /// Every algorithm of [`NAMES`](Self::NAMES) with its default parameters, in that order
    /// (what `bench_plan` compares against and what the planner's `auto` chooser ranks).
    pub fn all() -> Vec<Baseline> {
        Baseline::NAMES
            .iter()
            .map(|n| n.parse().expect("every listed name parses"))
            .collect()
    }

    /// Build the plan for `bytes` from `root` on the ranks placed at `map` (see
    /// [`placement::Placement::map`]; topology-aware baselines need to know where ranks run).
    pub fn build(&self, topo: &Topology, map: &[u32], root: u32, bytes: u64) -> Result<Plan, SimError> {
        let n = map.len() as u32;
        if n == 0 {
            return Err(SimError("no ranks to broadcast to".into()));
        }
        if root >= n {
            return Err(SimError(format!("root {root} out of range for {n} ranks")));
        }
        let tree = |children: Vec<Vec<u32>>, seg: u64, name: &str| {
            Plan::from_tree(root, &children, hierarchy::segments(bytes, seg), name)
        };
        let mut p = match *self {
            Baseline::Flat => tree(trees::flat(n, root), 0, "flat"),
            Baseline::Binomial { seg } => tree(trees::binomial(n, root), seg, "binomial"),
            Baseline::OmpiBinomial { seg } => tree(trees::ompi_binomial(n, root), seg, "ompi-binomial"),
            Baseline::Binary { seg } => tree(trees::ompi_kary(n, root, 2), seg, "binary"),
            Baseline::Knomial { k, seg } => tree(trees::ompi_knomial(n, root, k), seg, "knomial"),
            Baseline::Chain { seg } => tree(
                trees::rank_chain(n, root),
                seg,
                if seg == 0 { "chain" } else { "pipeline" },
            ),
            Baseline::SplitBinary => ompi::split_bintree(n, root),
            Baseline::ScatterRing | Baseline::ScatterRd if bytes < n as u64 => {
                // Open MPI's own fallback when blocks would be empty.
                tree(trees::flat(n, root), 0, "flat")
            }
            Baseline::ScatterRing => scatter_allgather::scatter_allgather_ring(n, root),
            Baseline::ScatterRd => scatter_allgather::scatter_allgather_rd(n, root),
            Baseline::Ompi => ompi::default_bcast(n, root, bytes),
            Baseline::Han { seg } => hierarchy::han(topo, &placement_vertices(topo, map)?, root, bytes, seg),
            Baseline::TopoWave => hierarchy::topology_wave(topo, &placement_vertices(topo, map)?, root),
        };
        p.info.planned_bytes = bytes;
        Ok(p)
    }
}

fn placement_vertices(topo: &Topology, map: &[u32]) -> Result<Vec<crate::topology::VertexId>, SimError> {
    placement::resolve(topo, map.len() as u32, Some(map))
}

impl FromStr for Baseline {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (name, params) = match s.split_once(':') {
            Some((n, p)) => (n.trim(), p.trim()),
            None => (s.trim(), ""),
        };
        let mut seg: Option<u64> = None;
        let mut k: Option<u32> = None;
        for kv in params.split(',').map(str::trim).filter(|x| !x.is_empty()) {
            let (key, val) = kv
                .split_once('=')
                .ok_or_else(|| format!("algorithm parameter '{kv}' must be key=value"))?;
            match key.trim() {
                "seg" => seg = Some(parse_size(val.trim()).map_err(|e| format!("algorithm parameter seg: {e}"))?),
                "k" => {
                    let v: u32 = val
                        .trim()
                        .parse()
                        .map_err(|_| format!("algorithm parameter k: '{val}' is not an integer"))?;
                    if v < 2 {
                        return Err("algorithm parameter k: the radix must be >= 2".into());
                    }
                    k = Some(v);
                }
                other => return Err(format!("unknown algorithm parameter '{other}' (expected seg or k)")),
            }
        }
        let no_params = |b: Baseline| {
            if seg.is_some() || k.is_some() {
                Err(format!("algorithm '{name}' takes no parameters"))
            } else {
                Ok(b)
            }
        };
        let only_seg = |b: Baseline| {
            if k.is_some() {
                Err(format!("algorithm '{name}' has no parameter k"))
            } else {
                Ok(b)
            }
        };
        let seg0 = seg.unwrap_or(0);
        match name {
            "flat" | "linear" => no_params(Baseline::Flat),
            "binomial" => only_seg(Baseline::Binomial { seg: seg0 }),
            "ompi-binomial" => only_seg(Baseline::OmpiBinomial { seg: seg0 }),
            "binary" => only_seg(Baseline::Binary { seg: seg0 }),
            "knomial" => Ok(Baseline::Knomial {
                k: k.unwrap_or(KNOMIAL_RADIX),
                seg: seg0,
            }),
            "chain" => only_seg(Baseline::Chain { seg: seg0 }),
            "pipeline" => only_seg(Baseline::Chain {
                seg: seg.unwrap_or(DEFAULT_SEGMENT_BYTES),
            }),
            "split-binary" => no_params(Baseline::SplitBinary),
            "scatter-ring" => no_params(Baseline::ScatterRing),
            "scatter-rd" => no_params(Baseline::ScatterRd),
            "ompi" => no_params(Baseline::Ompi),
            "han" => only_seg(Baseline::Han {
                seg: seg.unwrap_or(HAN_SEGMENT_BYTES),
            }),
            "topo-wave" => no_params(Baseline::TopoWave),
            _ => Err(format!(
                "unknown algorithm '{name}' (expected one of: {})",
                Baseline::NAMES.join(", ")
            )),
        }
    }
}

impl fmt::Display for Baseline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let seg = |f: &mut fmt::Formatter<'_>, name: &str, s: u64| {
            if s == 0 {
                f.write_str(name)
            } else {
                write!(f, "{name}:seg={s}")
            }
        };
        match *self {
            Baseline::Flat => f.write_str("flat"),
            Baseline::Binomial { seg: s } => seg(f, "binomial", s),
            Baseline::OmpiBinomial { seg: s } => seg(f, "ompi-binomial", s),
            Baseline::Binary { seg: s } => seg(f, "binary", s),
            Baseline::Knomial { k, seg: s } => {
                if s == 0 {
                    write!(f, "knomial:k={k}")
                } else {
                    write!(f, "knomial:k={k},seg={s}")
                }
            }
            Baseline::Chain { seg: 0 } => f.write_str("chain"),
            Baseline::Chain { seg: s } => write!(f, "pipeline:seg={s}"),
            Baseline::SplitBinary => f.write_str("split-binary"),
            Baseline::ScatterRing => f.write_str("scatter-ring"),
            Baseline::ScatterRd => f.write_str("scatter-rd"),
            Baseline::Ompi => f.write_str("ompi"),
            Baseline::Han { seg: s } => write!(f, "han:seg={s}"),
            Baseline::TopoWave => f.write_str("topo-wave"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_names_and_params() {
        assert_eq!("flat".parse::<Baseline>(), Ok(Baseline::Flat));
        assert_eq!(
            "pipeline:seg=64KiB".parse::<Baseline>(),
            Ok(Baseline::Chain { seg: 65536 })
        );
        assert_eq!(
            "pipeline".parse::<Baseline>(),
            Ok(Baseline::Chain {
                seg: DEFAULT_SEGMENT_BYTES
            })
        );
        assert_eq!(
            "knomial:k=3".parse::<Baseline>(),
            Ok(Baseline::Knomial { k: 3, seg: 0 })
        );
        assert_eq!("han".parse::<Baseline>(), Ok(Baseline::Han { seg: 65536 }));
        assert!("knomial:k=1".parse::<Baseline>().unwrap_err().contains(">= 2"));
        assert!("flat:seg=1".parse::<Baseline>().unwrap_err().contains("no parameters"));
        assert!("bogus".parse::<Baseline>().unwrap_err().contains("unknown algorithm"));
        assert!("binomial:seg=lots".parse::<Baseline>().is_err());
        for name in Baseline::NAMES {
            let b: Baseline = name.parse().unwrap();
            assert_eq!(b.to_string().parse::<Baseline>(), Ok(b), "{name}");
        }
    }
}
