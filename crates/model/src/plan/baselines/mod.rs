//! The MPI libraries' broadcast algorithms, built as [`Plan`]s so the simulator runs them with
//! exactly the semantics of our own plans (the baselines we must beat).
//!
//! Their names, parameters and help are in the registry ([`super::registry`], family `mpi`):
//! `flat`, `binomial`, `ompi-binomial`, `binary`, `knomial`, `chain`, `pipeline`,
//! `split-binary`, `scatter-ring`, `scatter-rd`, `ompi`, `han`, `topo-wave`. A plan built here is
//! named by its [`Baseline`]'s `Display`, which parses back to the same baseline (`ompi` names
//! its plan by the algorithm Open MPI picked). Parsing and [`Baseline::all`] are the registry's
//! (defined there, so this module does not depend on it).
//!
//! Segment sizes accept `4MiB`, `64KiB`, `1000` etc.; a plan's segments are equal-sized (they
//! differ by at most a byte), where the libraries use full segments and a short last one.
//!
//! The planner's `auto` chooser ranks all of them ([`Baseline::all`]) beside its own plans;
//! [`screen`] gives it cheap lower bounds on their simulated times, so it simulates only those
//! that could win.

pub mod hierarchy;
pub mod ompi;
pub mod scatter_allgather;
pub mod screen;

use crate::plan::{trees, Plan};
use crate::sim::{placement, SimError};
use crate::topology::Topology;
use std::fmt;

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
    /// The same algorithm cut into `seg`-byte segments if it is segmented (its segment size is
    /// not 0); the unsegmented ones are returned as they are.
    pub fn with_segment(self, seg: u64) -> Baseline {
        match self {
            Baseline::Binomial { seg: s } if s > 0 => Baseline::Binomial { seg },
            Baseline::OmpiBinomial { seg: s } if s > 0 => Baseline::OmpiBinomial { seg },
            Baseline::Binary { seg: s } if s > 0 => Baseline::Binary { seg },
            Baseline::Knomial { k, seg: s } if s > 0 => Baseline::Knomial { k, seg },
            Baseline::Chain { seg: s } if s > 0 => Baseline::Chain { seg },
            Baseline::Han { seg: s } if s > 0 => Baseline::Han { seg },
            b => b,
        }
    }

    /// Whether the plan depends on where ranks run (HAN's nodes, the topology wave's switches);
    /// the others are rank-order shapes.
    pub fn needs_topology(&self) -> bool {
        matches!(self, Baseline::Han { .. } | Baseline::TopoWave)
    }

    /// The plan on `n` ranks for a baseline that does not need the topology
    /// ([`needs_topology`](Self::needs_topology) is false); `None` for one that does.
    pub fn build_ranks(&self, n: u32, root: u32, bytes: u64) -> Option<Plan> {
        let tree =
            |children: Vec<Vec<u32>>, seg: u64| Plan::from_tree(root, &children, hierarchy::segments(bytes, seg), "");
        let mut p = match *self {
            Baseline::Flat => tree(trees::flat(n, root), 0),
            Baseline::Binomial { seg } => tree(trees::binomial(n, root), seg),
            Baseline::OmpiBinomial { seg } => tree(trees::ompi_binomial(n, root), seg),
            Baseline::Binary { seg } => tree(trees::ompi_kary(n, root, 2), seg),
            Baseline::Knomial { k, seg } => tree(trees::ompi_knomial(n, root, k), seg),
            Baseline::Chain { seg } => tree(trees::rank_chain(n, root), seg),
            Baseline::SplitBinary => ompi::split_bintree(n, root),
            // Open MPI's own fallback when blocks would be empty.
            Baseline::ScatterRing | Baseline::ScatterRd if bytes < n as u64 => {
                return Baseline::Flat.build_ranks(n, root, bytes)
            }
            Baseline::ScatterRing => scatter_allgather::scatter_allgather_ring(n, root),
            Baseline::ScatterRd => scatter_allgather::scatter_allgather_rd(n, root),
            Baseline::Ompi => return ompi::decision_baseline(n, bytes).build_ranks(n, root, bytes),
            Baseline::Han { .. } | Baseline::TopoWave => return None,
        };
        p.info.algorithm = self.to_string();
        p.info.planned_bytes = bytes;
        Some(p)
    }

    /// Build the plan for `bytes` from `root` on the ranks placed at `map` (see
    /// [`placement::Placement::map`]; topology-aware baselines need to know where ranks run).
    pub fn build(&self, topo: &Topology, map: &[u32], root: u32, bytes: u64) -> Result<Plan, SimError> {
        let n = map.len() as u32;
        if n == 0 {
            return Err(SimError::NoRanks);
        }
        if root >= n {
            return Err(SimError::RootOutOfRange { root, nranks: n });
        }
        let mut p = match *self {
            Baseline::Han { seg } => hierarchy::han(topo, &placement_vertices(topo, map)?, root, bytes, seg),
            Baseline::TopoWave => hierarchy::topology_wave(topo, &placement_vertices(topo, map)?, root),
            b => return Ok(b.build_ranks(n, root, bytes).expect("a rank-order baseline")),
        };
        p.info.algorithm = self.to_string();
        p.info.planned_bytes = bytes;
        Ok(p)
    }
}

fn placement_vertices(topo: &Topology, map: &[u32]) -> Result<Vec<crate::topology::VertexId>, SimError> {
    placement::resolve(topo, map.len() as u32, Some(map))
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
    use crate::plan::registry::{self, Family};
    use crate::plan::DEFAULT_SEGMENT_BYTES;

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
        let err = |s: &str| s.parse::<Baseline>().unwrap_err().to_string();
        assert!(err("knomial:k=1").contains(">= 2"));
        assert!(err("flat:seg=1").contains("no parameters"));
        assert!(err("bogus").contains("unknown algorithm"));
        assert!(err("dfs-chain").contains("unknown algorithm"));
        assert!("binomial:seg=lots".parse::<Baseline>().is_err());
        for name in registry::names(Some(Family::Library)) {
            let b: Baseline = name.parse().unwrap();
            assert_eq!(b.to_string().parse::<Baseline>(), Ok(b), "{name}");
        }
    }
}
