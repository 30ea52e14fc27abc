//! What else ran on the ranks' machines while the job did: each kernel's user CPU time (from
//! `/proc/stat`) less the job's ranks' own (`getrusage`), and the time the hypervisor stole,
//! from the start of a communicator's set-up to its gather.
//!
//! Why: predictions are calibrated at set-up, and a host shared with another program runs the
//! job's calls at the scheduler's pace, from job to job and from set-up to job. With a busy
//! loop on one of the VM's two cores, one host's 20 jobs met the 25% goal from the entries in
//! none (85 of 160 sizes), and on the emulated 3x3 cluster in none of 8 (45 of 64), while the
//! same jobs without it met it in 11-19 of 20 and 7-10 of 10 (`docs/profiling-log.md`,
//! 2026-12-03). The profile could name the one-host misses as sizes run off their set-up
//! timing, but had nothing to say about the 3x3's. Another program's CPU time is what says
//! "the host was shared" without a model: the report names it and the share of a CPU it took.
//!
//! Only user time is counted: the kernel's system time also holds the job's own packet work in
//! softirqs (emulated hosts' bridges, `tc` shapers), which no process is charged for.

use serde::{Deserialize, Serialize};

/// One process's reading of its kernel and itself (seconds).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuSample {
    /// The kernel's user and nice time since boot over all its CPUs (`/proc/stat`).
    pub kernel_user_s: f64,
    /// The kernel's steal time since boot: its CPUs wanted to run while the hypervisor ran
    /// something else.
    pub kernel_steal_s: f64,
    /// This process's user time (every thread).
    pub own_user_s: f64,
    /// When read, on `CLOCK_MONOTONIC`.
    pub at_s: f64,
    /// CPUs online on the kernel.
    pub cpus: u32,
}

/// This process's reading now; `None` where `/proc/stat` cannot be read or parsed.
pub fn sample() -> Option<CpuSample> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    // SAFETY: plain sysconf queries.
    let (hz, cpus) = unsafe {
        (
            libc::sysconf(libc::_SC_CLK_TCK),
            libc::sysconf(libc::_SC_NPROCESSORS_ONLN),
        )
    };
    let (user, steal) = parse_stat(&stat)?;
    let hz = if hz > 0 { hz as f64 } else { 100.0 };
    // SAFETY: rusage is plain data that getrusage fills.
    let own_user_s = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        if libc::getrusage(libc::RUSAGE_SELF, &mut u) != 0 {
            return None;
        }
        u.ru_utime.tv_sec as f64 + u.ru_utime.tv_usec as f64 * 1e-6
    };
    Some(CpuSample {
        kernel_user_s: user / hz,
        kernel_steal_s: steal / hz,
        own_user_s,
        at_s: crate::host::monotonic_s(),
        cpus: cpus.max(1) as u32,
    })
}

/// `/proc/stat`'s aggregate line: (user + nice, steal) in clock ticks. The fields are user,
/// nice, system, idle, iowait, irq, softirq, steal, ...; kernels before 2.6.11 have no steal
/// (read as 0).
fn parse_stat(stat: &str) -> Option<(f64, f64)> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let f: Vec<f64> = line.split_whitespace().skip(1).map_while(|x| x.parse().ok()).collect();
    let user = f.first()? + f.get(1)?;
    Some((user, f.get(7).copied().unwrap_or(0.0)))
}

/// One kernel's load over a job, from its ranks' readings at set-up and at the gather: in
/// CPUs (CPU seconds per second of the window).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Load {
    /// The window: the first rank's set-up reading to its gather reading (s).
    pub window_s: f64,
    /// User time of the job's ranks on the kernel.
    pub job_cpus: f64,
    /// User time of everything else on the kernel (at least 0).
    pub other_cpus: f64,
    /// Time stolen by the hypervisor.
    pub steal_cpus: f64,
    pub cpus: u32,
}

/// Windows shorter than this say nothing: `/proc/stat` counts each CPU's time in ticks of
/// 10 ms, so a tick either way on each of 2 CPUs is 0.08 CPU over 0.25 s.
pub const MIN_WINDOW_S: f64 = 0.25;

/// The load of one kernel from its ranks' `(set-up, gather)` readings, the kernel's counters
/// taken from the first rank's (one process reads both ends, so the window is its own); `None`
/// without readings or with a window shorter than [`MIN_WINDOW_S`].
pub fn load(ranks: &[(CpuSample, CpuSample)]) -> Option<Load> {
    let (a, b) = ranks.first()?;
    let window_s = b.at_s - a.at_s;
    if window_s.is_nan() || window_s < MIN_WINDOW_S {
        return None;
    }
    let job: f64 = ranks.iter().map(|(s, e)| (e.own_user_s - s.own_user_s).max(0.0)).sum();
    let kernel = (b.kernel_user_s - a.kernel_user_s).max(0.0);
    Some(Load {
        window_s,
        job_cpus: job / window_s,
        other_cpus: (kernel - job).max(0.0) / window_s,
        steal_cpus: (b.kernel_steal_s - a.kernel_steal_s).max(0.0) / window_s,
        cpus: b.cpus,
    })
}

/// Other programs' CPU time from which the report calls a host shared (where they and the
/// ranks outnumber its CPUs, `report::HostLoadReport::shared`): 0.2 of a CPU. On the 2-core VM
/// (2026-12-04) quiet jobs read 0.00-0.03 (mpirun's own ticks) with 4 ranks and 0.00 on the
/// emulated 3x3; a busy loop took 0.89-0.98 beside 4 ranks and 0.29-0.32 beside the 3x3's 9
/// (whose packets keep the kernel busy in system time, which is not counted).
pub const SHARED_FROM_CPUS: f64 = 0.2;

#[cfg(test)]
mod tests {
    use super::*;

    fn at(t: f64, kernel_user: f64, own: f64, steal: f64) -> CpuSample {
        CpuSample {
            kernel_user_s: kernel_user,
            kernel_steal_s: steal,
            own_user_s: own,
            at_s: t,
            cpus: 2,
        }
    }

    #[test]
    fn the_aggregate_line_gives_user_and_nice_and_steal() {
        let stat = "cpu  100 20 30 4000 5 6 7 80 0 0\ncpu0 50 10 15 2000 2 3 3 40 0 0\nintr 1\n";
        assert_eq!(parse_stat(stat), Some((120.0, 80.0)));
        // An old kernel without steal.
        assert_eq!(parse_stat("cpu  1 2 3 4\n"), Some((3.0, 0.0)));
        assert_eq!(parse_stat("cpu0 1 2 3 4\n"), None);
        assert_eq!(parse_stat("cpu  x\n"), None);
    }

    #[test]
    fn another_programs_time_is_the_kernels_less_the_ranks() {
        // Two ranks on a kernel over 2 s: the kernel's user time grew by 5 s, the ranks' by
        // 1.5 s each, so 2 s was someone else's: 1 CPU.
        let ranks = [
            (at(10.0, 100.0, 1.0, 0.0), at(12.0, 105.0, 2.5, 0.4)),
            (at(10.1, 100.0, 3.0, 0.0), at(12.1, 105.2, 4.5, 0.4)),
        ];
        let l = load(&ranks).expect("load");
        assert!((l.window_s - 2.0).abs() < 1e-12);
        assert!((l.job_cpus - 1.5).abs() < 1e-12);
        assert!((l.other_cpus - 1.0).abs() < 1e-12);
        assert!((l.steal_cpus - 0.2).abs() < 1e-12);
        // The ranks' own time read after the kernel's can exceed its growth: never below 0.
        let ahead = [(at(0.0, 10.0, 0.0, 0.0), at(1.0, 10.9, 1.0, 0.0))];
        assert_eq!(load(&ahead).expect("load").other_cpus, 0.0);
    }

    #[test]
    fn a_short_window_or_none_says_nothing() {
        assert_eq!(load(&[]), None);
        assert_eq!(load(&[(at(1.0, 0.0, 0.0, 0.0), at(1.2, 1.0, 0.0, 0.0))]), None);
        assert_eq!(load(&[(at(1.0, 0.0, 0.0, 0.0), at(f64::NAN, 1.0, 0.0, 0.0))]), None);
    }

    #[test]
    fn this_process_reads_its_kernel() {
        let s = sample().expect("/proc/stat on Linux");
        assert!(s.cpus >= 1 && s.kernel_user_s > 0.0 && s.own_user_s >= 0.0);
        // Work in user space shows in both counters.
        let mut x = 0u64;
        let t0 = std::time::Instant::now();
        while t0.elapsed().as_millis() < 60 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        let e = sample().expect("again");
        assert!(e.own_user_s > s.own_user_s && e.kernel_user_s >= s.kernel_user_s && e.at_s > s.at_s);
    }
}
