//! Pinning a measuring thread to one CPU.
//!
//! Both ranks of a ping-pong pair run on one machine when the cluster is emulated (hosts as
//! network namespaces); left to the scheduler they sometimes share a core for a whole run, and
//! that pair then reads a context switch per message (+10 us) more. On a real cluster the two
//! are on different machines and pinning changes nothing. The library's broadcasts timed at
//! set-up on one host are pinned round robin where ranks outnumber CPUs (`library_fit`), so
//! they read one known placement. Best effort: on failure the mask stays as it was.

/// Pins the calling thread to the `which`-th CPU it may run on (0 or 1) while it lives, and
/// gives the old mask back when dropped.
pub struct Pinned(Option<libc::cpu_set_t>);

impl Pinned {
    pub fn new(which: usize) -> Pinned {
        Pinned::to(|allowed| (allowed >= 2).then_some(which.min(1)))
    }

    /// Where `ranks` ranks outnumber the CPUs this one may run on (at least two), pins rank
    /// `rank` to the `rank mod CPUs`-th of them, as `mpirun --bind-to core:overload-allowed`
    /// binds; elsewhere leaves the mask as it is.
    pub fn round_robin(rank: u32, ranks: u32) -> Pinned {
        Pinned::to(|allowed| (allowed >= 2 && ranks as usize > allowed).then_some(rank as usize % allowed))
    }

    /// Pins to the CPU `pick(how many are allowed)` indexes among the allowed ones (`None`:
    /// no pin).
    fn to(pick: impl FnOnce(usize) -> Option<usize>) -> Pinned {
        // SAFETY: cpu_set_t is plain data; the calls get valid pointers and its size.
        unsafe {
            let mut old: libc::cpu_set_t = std::mem::zeroed();
            if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut old) != 0 {
                return Pinned(None);
            }
            let allowed: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
                .filter(|&c| libc::CPU_ISSET(c, &old))
                .collect();
            let Some(i) = pick(allowed.len()).filter(|&i| i < allowed.len()) else {
                return Pinned(None);
            };
            let mut one: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(allowed[i], &mut one);
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &one) != 0 {
                return Pinned(None);
            }
            Pinned(Some(old))
        }
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        if let Some(old) = &self.0 {
            // SAFETY: as above.
            unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), old) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Pinned;

    /// The CPUs the calling thread may run on.
    fn allowed() -> Vec<usize> {
        // SAFETY: as in `Pinned::to`.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            assert_eq!(
                libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set),
                0
            );
            (0..libc::CPU_SETSIZE as usize)
                .filter(|&c| libc::CPU_ISSET(c, &set))
                .collect()
        }
    }

    #[test]
    fn round_robin_pins_only_where_ranks_outnumber_the_cpus_and_gives_the_mask_back() {
        let before = allowed();
        let n = before.len() as u32;
        {
            let _pin = Pinned::round_robin(1, n);
            assert_eq!(allowed(), before, "as many ranks as CPUs: no pin");
        }
        if n < 2 {
            return; // one CPU: nothing to choose
        }
        for rank in [0, 1, n, n + 1] {
            {
                let _pin = Pinned::round_robin(rank, n + 1);
                assert_eq!(allowed(), vec![before[rank as usize % before.len()]], "rank {rank}");
            }
            assert_eq!(allowed(), before, "rank {rank}: the mask is given back");
        }
    }
}
