//! Set-up readings kept for the rest of the process, so communicators made later reuse them.
//!
//! The calibration of predictions measures pairs of processes: two ranks of one host
//! (`super::calibrate`, about 100 ms) and pairs across slow links (`super::burst`, about 0.19 s
//! per pair). What it measures belongs to the processes and the path between them, not to the
//! communicator, yet every profiled communicator used to measure again: a program that
//! duplicates `MPI_COMM_WORLD` for a library, or builds a communicator per phase, paid it
//! each time. Readings are kept here by the processes' `MPI_COMM_WORLD` ranks, which name the
//! same processes in every communicator (communicator ranks do not, and host names are not
//! unique: the virtual-hosts knob names hosts by communicator rank).
//!
//! Whether to measure is decided collectively ([`Shared::lookup`]): a pair is reused only when
//! every rank of the communicator holds its readings (a rank that was not in the earlier
//! communicator does not), and then rank 0's readings are broadcast, so all ranks fit the
//! same numbers and take the same path through the collective measurement that follows.

use crate::error::Result;
use crate::exec::raw;
use mpi::ffi::MPI_Comm;
use std::collections::BTreeMap;
use std::os::raw::c_int;
use std::sync::Mutex;

/// What a set of readings measured, by `MPI_COMM_WORLD` ranks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Key {
    /// The one-host calibration between two ranks of one host (lower first).
    HostMates(u32, u32),
    /// The burst probe from the first rank to the second.
    Burst(u32, u32),
    /// What a communicator of these processes, in this order, measured of the library's
    /// collectives (`super::library_fit`): its size and a hash of its `MPI_COMM_WORLD` ranks.
    Ranks { size: u32, hash: u64 },
}

static READINGS: Mutex<BTreeMap<Key, Vec<f64>>> = Mutex::new(BTreeMap::new());

/// Keep `readings` for `key` (replacing older ones).
pub fn keep(key: Key, readings: &[f64]) {
    lock().insert(key, readings.to_vec());
}

/// This process's readings for `key`, if it holds some of `len` numbers.
pub fn held(key: Key, len: usize) -> Option<Vec<f64>> {
    lock().get(&key).filter(|r| r.len() == len).cloned()
}

fn lock() -> std::sync::MutexGuard<'static, BTreeMap<Key, Vec<f64>>> {
    READINGS.lock().unwrap_or_else(|p| p.into_inner())
}

/// A communicator's ranks as `MPI_COMM_WORLD` ranks, for naming what its ranks measure.
pub struct Shared {
    world: Vec<u32>,
}

impl Shared {
    /// Collective over `comm`: every rank's `MPI_COMM_WORLD` rank.
    pub fn new(comm: MPI_Comm) -> Result<Shared> {
        let me = [raw::comm_rank(raw::comm_world())?];
        let mut world = vec![0 as c_int; raw::comm_size(comm)? as usize];
        raw::allgather(&me, &mut world, comm)?;
        Ok(Shared::from_world(world.into_iter().map(|r| r as u32).collect()))
    }

    /// From the world rank of every communicator rank.
    pub fn from_world(world: Vec<u32>) -> Shared {
        Shared { world }
    }

    /// The key of the one-host calibration between communicator ranks `a` and `b`.
    pub fn host_mates(&self, a: u32, b: u32) -> Key {
        let (x, y) = (self.world[a as usize], self.world[b as usize]);
        Key::HostMates(x.min(y), x.max(y))
    }

    /// The key of the burst probe from communicator rank `from` to `to`.
    pub fn burst(&self, from: u32, to: u32) -> Key {
        Key::Burst(self.world[from as usize], self.world[to as usize])
    }

    /// The key of what the whole communicator measured: the same for every communicator of
    /// the same processes in the same order (a duplicate of `MPI_COMM_WORLD`, or of any
    /// other), whose library collectives are the same algorithm.
    pub fn ranks(&self) -> Key {
        // FNV-1a over the world ranks.
        let hash = self.world.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &r| {
            r.to_le_bytes()
                .iter()
                .fold(h, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
        });
        Key::Ranks {
            size: self.world.len() as u32,
            hash,
        }
    }

    /// Collective over `comm` (every rank with the same `keys`): for each key, the readings of
    /// `len` numbers when every rank holds some (rank 0's, broadcast), else `None`.
    pub fn lookup(&self, comm: MPI_Comm, keys: &[Key], len: usize) -> Result<Vec<Option<Vec<f64>>>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let mine: Vec<Option<Vec<f64>>> = keys.iter().map(|&k| held(k, len)).collect();
        let missing: Vec<c_int> = mine.iter().map(|r| r.is_none() as c_int).collect();
        let mut anywhere = vec![0 as c_int; keys.len()];
        raw::allreduce_max(&missing, &mut anywhere, comm)?;
        let everywhere: Vec<usize> = (0..keys.len()).filter(|&i| anywhere[i] == 0).collect();
        let mut flat: Vec<f64> = everywhere
            .iter()
            .flat_map(|&i| mine[i].clone().expect("held everywhere"))
            .collect();
        if !flat.is_empty() {
            raw::bcast(&mut flat, 0, comm)?;
        }
        let mut out = vec![None; keys.len()];
        for (j, &i) in everywhere.iter().enumerate() {
            out[i] = Some(flat[j * len..(j + 1) * len].to_vec());
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_name_world_ranks_and_readings_of_the_wrong_length_are_not_held() {
        // Communicator ranks 0..3 are world ranks 5, 2, 7.
        let s = Shared::from_world(vec![5, 2, 7]);
        assert_eq!(s.host_mates(0, 1), Key::HostMates(2, 5));
        assert_eq!(s.host_mates(1, 0), Key::HostMates(2, 5));
        assert_eq!(s.burst(2, 0), Key::Burst(7, 5));
        assert_ne!(s.burst(2, 0), s.burst(0, 2));
        // The same processes in the same order share a key; another order or set does not.
        assert_eq!(s.ranks(), Shared::from_world(vec![5, 2, 7]).ranks());
        assert_ne!(s.ranks(), Shared::from_world(vec![2, 5, 7]).ranks());
        assert_ne!(s.ranks(), Shared::from_world(vec![5, 2]).ranks());
        let key = Key::Burst(1000, 1001);
        assert_eq!(held(key, 2), None);
        keep(key, &[1.0, 2.0]);
        assert_eq!(held(key, 2), Some(vec![1.0, 2.0]));
        assert_eq!(held(key, 3), None);
        keep(key, &[3.0, 4.0]);
        assert_eq!(held(key, 2), Some(vec![3.0, 4.0]));
    }
}
