//! Pinning a measuring thread to one CPU.
//!
//! Both ranks of a ping-pong pair run on one machine when the cluster is emulated (hosts as
//! network namespaces); left to the scheduler they sometimes share a core for a whole run, and
//! that pair then reads a context switch per message (+10 us) more. On a real cluster the two
//! are on different machines and pinning changes nothing. Best effort: on failure the mask
//! stays as it was.

/// Pins the calling thread to the `which`-th CPU it may run on (0 or 1) while it lives, and
/// gives the old mask back when dropped.
pub struct Pinned(Option<libc::cpu_set_t>);

impl Pinned {
    pub fn new(which: usize) -> Pinned {
        // SAFETY: cpu_set_t is plain data; the calls get valid pointers and its size.
        unsafe {
            let mut old: libc::cpu_set_t = std::mem::zeroed();
            if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut old) != 0 {
                return Pinned(None);
            }
            let allowed: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
                .filter(|&c| libc::CPU_ISSET(c, &old))
                .collect();
            if allowed.len() < 2 {
                return Pinned(None);
            }
            let mut one: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(allowed[which.min(1)], &mut one);
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
