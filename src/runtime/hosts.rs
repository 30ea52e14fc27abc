//! Which ranks of a communicator share a host (collective): the first step of learning the
//! network ([`super::topo`]), and what the MPI prober ([`super::prober`]) measures between.
//! Its own module so that both can use it without depending on each other.

use super::config::Config;
use crate::error::Result;
use crate::exec::raw;
use mpi::ffi::MPI_Comm;
use std::collections::HashMap;
use std::os::raw::c_int;

/// How a communicator's ranks sit on hosts.
pub struct Hosts {
    /// Host index (into `names`) of every rank.
    pub host_of: Vec<u32>,
    /// Unique host names, indexed by host.
    pub names: Vec<String>,
    /// Communicator rank of each host's leader.
    pub leaders: Vec<u32>,
}

impl Hosts {
    pub fn count(&self) -> usize {
        self.names.len()
    }
}

fn cstr(buf: &[u8]) -> String {
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// Group ranks by shared memory (collective over `comm`, a valid intra-communicator).
pub fn discover_hosts(comm: MPI_Comm, rank: u32, size: u32, cfg: &Config) -> Result<Hosts> {
    if let Some(k) = cfg.virtual_hosts {
        // Testing knob (identical on every rank by construction): hosts of k consecutive ranks.
        let leader_of: Vec<u32> = (0..size).map(|r| r / k * k).collect();
        return Ok(group(&leader_of, |r| format!("vhost{}", r as u32 / k)));
    }
    let mut node = raw::comm_split_shared(comm, rank as c_int)?;
    // The leader's communicator rank identifies the host.
    let mut leader = [rank as c_int];
    let r = raw::bcast(&mut leader, 0, node);
    raw::comm_free(&mut node);
    r?;
    let mut leader_of = vec![0 as c_int; size as usize];
    raw::allgather(&leader, &mut leader_of, comm)?;
    let me = raw::processor_name();
    const NAME: usize = raw::PROCESSOR_NAME_BYTES;
    let mut names_raw = vec![0u8; NAME * size as usize];
    raw::allgather(&me, &mut names_raw, comm)?;
    Ok(group(&leader_of.iter().map(|&l| l as u32).collect::<Vec<_>>(), |r| {
        cstr(&names_raw[r * NAME..(r + 1) * NAME])
    }))
}

/// Dense host numbering from each rank's leader; names from the leaders' processor names, made
/// unique (two groups reporting the same name get `#2`, `#3` suffixes).
fn group(leader_of: &[u32], name_of_rank: impl Fn(usize) -> String) -> Hosts {
    let mut leaders: Vec<u32> = leader_of.to_vec();
    leaders.sort_unstable();
    leaders.dedup();
    let index: HashMap<u32, u32> = leaders.iter().enumerate().map(|(i, &l)| (l, i as u32)).collect();
    let host_of = leader_of.iter().map(|l| index[l]).collect();
    let mut seen: HashMap<String, u32> = HashMap::new();
    let names = leaders
        .iter()
        .map(|&l| {
            let mut n = name_of_rank(l as usize);
            if n.is_empty() {
                n = format!("host{l}");
            }
            let k = seen.entry(n.clone()).or_insert(0);
            *k += 1;
            if *k > 1 {
                format!("{n}#{k}")
            } else {
                n
            }
        })
        .collect();
    Hosts {
        host_of,
        names,
        leaders,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grouping_is_dense_and_names_unique() {
        // Ranks 0,1 on host led by 0; 2 alone; 3,4 led by 3 but reporting the same name as 0.
        let leader_of = [0, 0, 2, 3, 3];
        let names = ["a", "a", "b", "a", "a"];
        let h = group(&leader_of, |r| names[r].to_string());
        assert_eq!(h.host_of, vec![0, 0, 1, 2, 2]);
        assert_eq!(h.names, vec!["a", "b", "a#2"]);
        assert_eq!(h.leaders, vec![0, 2, 3]);
    }
}
