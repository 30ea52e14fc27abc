//! What this process runs on: its kernel and the CPUs it may use. Probing limits how many host
//! pairs measure at once when emulated hosts share a kernel (`runtime::mpi_prober`); profiles
//! say when ranks outnumber the CPUs they share (`profile::gather`), and predictions across
//! hosts queue such ranks' per-message work on those CPUs (`runtime::discovery`).

use serde::{Deserialize, Serialize};

/// A process's kernel (a hash of its boot id; 0 when unknown) and the CPUs it may run on.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct KernelInfo {
    pub boot_id: u64,
    pub cpus: u32,
}

/// Seconds on the kernel's monotonic clock: one clock for every process of a kernel, so ranks
/// of one host (or of emulated hosts sharing it) can compare their readings directly
/// (`runtime::library_fit`'s entries, `profile::offset`'s same-kernel offsets).
pub fn monotonic_s() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid timespec to fill; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// This process's [`KernelInfo`].
pub fn kernel_info() -> KernelInfo {
    let boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|s| crate::util::fnv1a(s.trim().as_bytes()))
        .unwrap_or(0);
    // SAFETY: cpu_set_t is plain data; sched_getaffinity writes at most its size.
    let cpus = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0 {
            libc::CPU_COUNT(&set).max(1) as u32
        } else {
            1
        }
    };
    KernelInfo { boot_id, cpus }
}

/// The CPUs this process may run on, as 64-bit words of a bit set (CPU `i` is bit `i % 64` of
/// word `i / 64`); empty when unknown. Ranks bound to one core each have one bit each, so who
/// shares CPUs is the union over the ranks of a kernel, not any one rank's count.
pub fn cpu_mask() -> Vec<u64> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity writes at most its size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        let n = 8 * std::mem::size_of::<libc::cpu_set_t>();
        let mut words = vec![0u64; n.div_ceil(64)];
        for cpu in 0..n {
            if libc::CPU_ISSET(cpu, &set) {
                words[cpu / 64] |= 1 << (cpu % 64);
            }
        }
        while words.last() == Some(&0) {
            words.pop();
        }
        words
    }
}

/// Words of a CPU mask exchanged in fixed-size messages ([`kernel_words`]): 1024 CPUs.
pub const MASK_WORDS: usize = 16;

/// This process's boot id and CPU mask as `1 + MASK_WORDS` integers, for MPI messages.
pub fn kernel_words() -> Vec<i64> {
    let mut words = vec![0i64; 1 + MASK_WORDS];
    words[0] = kernel_info().boot_id as i64;
    for (w, m) in words[1..].iter_mut().zip(cpu_mask()) {
        *w = m as i64;
    }
    words
}

/// [`kernel_words`] back into (boot id, CPU mask).
pub fn from_kernel_words(words: &[i64]) -> (u64, Vec<u64>) {
    let boot = words.first().map_or(0, |&b| b as u64);
    (boot, words.iter().skip(1).map(|&m| m as u64).collect())
}

/// Processes of one kernel and the CPUs they may use together (the union of their masks).
#[derive(Clone, Debug, PartialEq)]
pub struct KernelGroup {
    /// Indices into the list given to [`kernel_groups`], ascending.
    pub members: Vec<usize>,
    pub cpus: u32,
}

impl KernelGroup {
    /// More processes than CPUs: they take turns on them.
    pub fn crowded(&self) -> bool {
        self.members.len() > self.cpus as usize
    }
}

/// Processes (boot id, CPU mask) grouped by kernel, in order of first appearance. An unknown
/// kernel (boot id 0) or mask (empty, or no CPU) joins no group: nothing is known to be shared.
pub fn kernel_groups<'a>(procs: impl IntoIterator<Item = (u64, &'a [u64])>) -> Vec<KernelGroup> {
    let mut groups: Vec<(u64, KernelGroup, Vec<u64>)> = Vec::new();
    for (i, (boot, mask)) in procs.into_iter().enumerate() {
        if boot == 0 || mask.iter().all(|w| *w == 0) {
            continue;
        }
        let at = match groups.iter().position(|g| g.0 == boot) {
            Some(at) => at,
            None => {
                groups.push((
                    boot,
                    KernelGroup {
                        members: Vec::new(),
                        cpus: 0,
                    },
                    Vec::new(),
                ));
                groups.len() - 1
            }
        };
        let (_, g, union) = &mut groups[at];
        g.members.push(i);
        if union.len() < mask.len() {
            union.resize(mask.len(), 0);
        }
        for (u, m) in union.iter_mut().zip(mask) {
            *u |= m;
        }
    }
    groups
        .into_iter()
        .map(|(_, mut g, union)| {
            g.cpus = union.iter().map(|w| w.count_ones()).sum();
            g
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ranks bound to one CPU each share the kernel's CPUs they cover together; unknown kernels
    /// and masks are left out; groups come in order of first appearance.
    #[test]
    fn kernel_groups_unite_masks_per_kernel() {
        let (two, cpu0, cpu1, none) = (vec![0b11u64], vec![1u64], vec![2u64], Vec::<u64>::new());
        let procs: Vec<(u64, &[u64])> = vec![
            (9, &cpu0),
            (4, &two),
            (9, &cpu1),
            (0, &two),
            (9, &cpu0),
            (5, &none),
            (4, &two),
            (4, &two),
        ];
        let g = kernel_groups(procs);
        assert_eq!(
            g,
            vec![
                KernelGroup {
                    members: vec![0, 2, 4],
                    cpus: 2
                },
                KernelGroup {
                    members: vec![1, 6, 7],
                    cpus: 2
                },
            ]
        );
        assert!(g[0].crowded() && g[1].crowded());
        assert!(!KernelGroup {
            members: vec![0, 1],
            cpus: 2
        }
        .crowded());
        let words = kernel_words();
        assert_eq!(words.len(), 1 + MASK_WORDS);
        let (boot, mask) = from_kernel_words(&words);
        assert_eq!(boot, kernel_info().boot_id);
        assert_eq!(mask.len(), MASK_WORDS);
    }
}
