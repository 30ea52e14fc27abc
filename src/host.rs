//! What this process runs on: its kernel and the CPUs it may use. Probing limits how many host
//! pairs measure at once when emulated hosts share a kernel (`runtime::mpi_prober`); profiles
//! say when ranks outnumber the CPUs they share (`profile::gather`), which predictions do not
//! model.

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
