//! Rank placement: which leaf of the topology each MPI rank runs on.
//!
//! MFS showed that placement alone changes an all-to-all on a full-bisection fat tree by 2.5-3.4x
//! (regular vs random), so patterns and baselines take a placement. *Block* puts MPI rank r on
//! rank leaf r (the topology's own numbering, which the generators and Slurm order host by host);
//! *random:SEED* is a seeded permutation of the leaves (same seed, same permutation, everywhere,
//! via `util::rng`).

use super::SimError;
use crate::topology::{Topology, VertexId};
use crate::util::rng::Rng;
use std::fmt;
use std::str::FromStr;

/// How MPI ranks map onto the topology's rank leaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Placement {
    /// MPI rank r on leaf r.
    #[default]
    Block,
    /// A permutation of the leaves drawn from this seed.
    Random(u64),
}

impl Placement {
    /// `map[r]` = index of the leaf (in [`endpoints`] order) MPI rank r runs on, for `nranks`
    /// ranks on `nleaves` leaves.
    pub fn map(&self, nranks: u32, nleaves: usize) -> Result<Vec<u32>, SimError> {
        if nranks as usize > nleaves {
            return Err(SimError::RanksDoNotFit {
                nranks,
                leaves: nleaves,
            });
        }
        let mut all: Vec<u32> = (0..nleaves as u32).collect();
        if let Placement::Random(seed) = *self {
            Rng::new(seed).shuffle(&mut all);
        }
        all.truncate(nranks as usize);
        Ok(all)
    }
}

/// Why a text is not a [`Placement`] (the text at fault as given);
/// [`Display`](fmt::Display) gives the line the CLI prints after `--placement`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlacementError {
    /// `random:SEED` with a seed that is not an unsigned integer.
    BadSeed(String),
    /// `random` without a seed (a placement must be reproducible).
    MissingSeed,
    /// Neither block nor random:SEED.
    Unknown(String),
}

impl fmt::Display for PlacementError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PlacementError::BadSeed(seed) => {
                write!(
                    f,
                    "placement 'random:SEED' needs an unsigned integer seed, got '{seed}'"
                )
            }
            PlacementError::MissingSeed => f.write_str("placement 'random' needs a seed: random:SEED"),
            PlacementError::Unknown(s) => write!(f, "unknown placement '{s}' (expected block or random:SEED)"),
        }
    }
}

impl std::error::Error for PlacementError {}

impl FromStr for Placement {
    type Err = PlacementError;
    fn from_str(s: &str) -> Result<Self, PlacementError> {
        let s = s.trim();
        if s == "block" {
            return Ok(Placement::Block);
        }
        if let Some(seed) = s.strip_prefix("random:") {
            return seed
                .trim()
                .parse::<u64>()
                .map(Placement::Random)
                .map_err(|_| PlacementError::BadSeed(seed.into()));
        }
        if s == "random" {
            return Err(PlacementError::MissingSeed);
        }
        Err(PlacementError::Unknown(s.into()))
    }
}

impl fmt::Display for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Placement::Block => f.write_str("block"),
            Placement::Random(s) => write!(f, "random:{s}"),
        }
    }
}

/// The vertices ranks can run on: the rank leaves in rank order, or, for a host-level tree
/// without rank vertices (as inferred from an RTT matrix), the non-switch leaves in vertex order.
pub fn endpoints(topo: &Topology) -> Vec<VertexId> {
    if topo.num_ranks() > 0 {
        (0..topo.num_ranks() as u32).map(|r| topo.rank_vertex(r)).collect()
    } else {
        topo.leaves()
    }
}

/// `topo` with MPI rank r on the endpoint `map[r]` ([`endpoints`] order), for planners that
/// take a topology whose rank leaves are the communicator in rank order. `map` must place a
/// rank on every endpoint: a planner would otherwise plan for ranks that do not take part.
pub fn relabelled(topo: &Topology, map: &[u32]) -> Result<Topology, SimError> {
    let ends = endpoints(topo);
    if map.len() != ends.len() {
        return Err(SimError::NotEveryLeaf {
            nranks: map.len(),
            leaves: ends.len(),
        });
    }
    let vertices = resolve(topo, map.len() as u32, Some(map))?;
    let mut b = topo.to_builder();
    for (r, &v) in vertices.iter().enumerate() {
        b.vertices[v].kind = crate::topology::VertexKind::Rank;
        b.vertices[v].rank = Some(r as u32);
    }
    b.build().map_err(SimError::Topology)
}

/// Vertex of every MPI rank `0..nranks` under an explicit placement map (or the identity).
pub(crate) fn resolve(topo: &Topology, nranks: u32, map: Option<&[u32]>) -> Result<Vec<VertexId>, SimError> {
    let ends = endpoints(topo);
    if nranks as usize > ends.len() {
        return Err(SimError::RanksDoNotFit {
            nranks,
            leaves: ends.len(),
        });
    }
    match map {
        None => Ok(ends[..nranks as usize].to_vec()),
        Some(m) => {
            if m.len() != nranks as usize {
                return Err(SimError::PlacementLength {
                    mapped: m.len(),
                    nranks,
                });
            }
            let mut used = vec![false; ends.len()];
            m.iter()
                .enumerate()
                .map(|(r, &leaf)| {
                    let l = leaf as usize;
                    if l >= ends.len() {
                        return Err(SimError::NoSuchLeaf { rank: r, leaf });
                    }
                    if std::mem::replace(&mut used[l], true) {
                        return Err(SimError::SharedLeaf { leaf });
                    }
                    Ok(ends[l])
                })
                .collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_map() {
        assert_eq!("block".parse::<Placement>(), Ok(Placement::Block));
        assert_eq!("random:42".parse::<Placement>(), Ok(Placement::Random(42)));
        assert!("random".parse::<Placement>().unwrap_err().to_string().contains("seed"));
        assert!("random:x".parse::<Placement>().is_err());
        assert!("diagonal"
            .parse::<Placement>()
            .unwrap_err()
            .to_string()
            .contains("unknown placement"));
        assert_eq!(Placement::Block.map(3, 5).unwrap(), vec![0, 1, 2]);
        let a = Placement::Random(7).map(16, 16).unwrap();
        let mut s = a.clone();
        s.sort_unstable();
        assert_eq!(s, (0..16).collect::<Vec<u32>>());
        assert_ne!(a, (0..16).collect::<Vec<u32>>());
        assert_eq!(a, Placement::Random(7).map(16, 16).unwrap());
        assert!(Placement::Block.map(6, 5).is_err());
    }
}
