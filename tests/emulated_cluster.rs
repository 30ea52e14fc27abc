//! End to end on an emulated cluster (`scripts/emucluster.sh`): network namespaces as hosts, Linux
//! bridges as switches, chains of bridges as longer uplinks, `tc tbf` on the uplinks.
//!
//! Each case brings a cluster up from a Slurm topology, runs the `pingpong` example across it
//! (host names must be exactly the emulated hosts; every same-switch RTT must be below every
//! cross-switch RTT), then `treecast probe` K times (treecast's own probing and inference,
//! half of the jobs with `mpi_yield_when_idle`): a required number of them must find the
//! emulated tree exactly — leaf groups, tree and rooted hierarchy, compared with
//! `metrics::compare` — and *every* probe that does not must say so with a confidence below
//! 0.9 (uncertainty is reported, never silently replaced). The JSON output is also written as
//! Slurm and groups and read back. Then `check_bcast` (topo_bcast byte-exact against MPI_Bcast
//! for every root, with the topology it probed), and the cluster is torn down through a guard
//! whose `Drop` runs `emucluster.sh down`, so a failed assertion leaves nothing behind; the end
//! of each case checks that nothing is left. One case repeats the 3x3 probes with one core kept
//! busy by a bounded CPU hog.
//!
//! Needs root (namespaces, bridges, tc) plus iproute2 and Open MPI; CI runs as root. Not root:
//! the tests FAIL with a message saying so, unless `TREECAST_SKIP_EMULATION=1` is set, which
//! skips them (for developers without root). The cases run one at a time (a lock), since timing
//! on a 2-core machine is only meaningful without a second cluster competing.

mod common;

use common::example;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;

const SKIP_VAR: &str = "TREECAST_SKIP_EMULATION";

/// One emulated cluster at a time (see the module docs).
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn script() -> PathBuf {
    repo().join("scripts/emucluster.sh")
}

/// True when the test should run; panics (fails) when it cannot and was not told to skip.
fn emulation_wanted() -> bool {
    if std::env::var(SKIP_VAR).as_deref() == Ok("1") {
        eprintln!("emulated cluster test skipped: {SKIP_VAR}=1");
        return false;
    }
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert!(
        euid == 0,
        "the emulated cluster test needs root (network namespaces, bridges, tc); run it as root \
         (CI does) or set {SKIP_VAR}=1 to skip it"
    );
    true
}

/// `emucluster.sh --prefix P ARGS` with a hard time limit.
fn emu(prefix: &str, args: &[&str], limit_s: u32) -> Output {
    Command::new("timeout")
        .arg("--kill-after=10")
        .arg(limit_s.to_string())
        .arg(script())
        .args(["--prefix", prefix])
        .args(args)
        .env("TREECAST_BIN", env!("CARGO_BIN_EXE_treecast"))
        .output()
        .expect("failed to run scripts/emucluster.sh")
}

fn show(out: &Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// An emulated cluster that is torn down when dropped (also when the test panics).
struct Cluster {
    prefix: String,
    _dir: TempDir,
}

impl Cluster {
    fn up(prefix: &str, topology: &str, subnet: &str, link_args: &[&str]) -> Cluster {
        let dir = TempDir::new(prefix);
        let file = dir.0.join("topology.conf");
        std::fs::write(&file, topology).expect("write topology");
        let mut args = vec!["up", file.to_str().expect("utf-8 path"), "--subnet", subnet, "--force"];
        args.extend_from_slice(link_args);
        // The guard exists before `up` runs: whatever `up` leaves is torn down.
        let cluster = Cluster {
            prefix: prefix.to_string(),
            _dir: dir,
        };
        let out = emu(prefix, &args, 120);
        assert!(out.status.success(), "emucluster up failed: {}", show(&out));
        cluster
    }

    fn mpirun(&self, placement: &str, ranks_per_host: u32, exe: &Path, args: &[&str]) -> Output {
        let mut all = vec![exe.to_str().expect("utf-8 path")];
        all.extend_from_slice(args);
        self.mpirun_args(placement, ranks_per_host, &all)
    }

    /// `emucluster.sh mpirun` with `args` given to mpirun as they are (options, then the program).
    fn mpirun_args(&self, placement: &str, ranks_per_host: u32, args: &[&str]) -> Output {
        let rph = ranks_per_host.to_string();
        let mut all = vec!["mpirun", "--placement", placement, "--ranks-per-host", &rph];
        all.extend_from_slice(args);
        emu(&self.prefix, &all, 600)
    }

    /// Run `pingpong` until same-switch < cross-switch holds on the element-wise minimum of the
    /// runs so far (at most `runs`): a minimum over more samples is still a minimum RTT, and a
    /// second run rescues a pair that a busy moment inflated in the first.
    fn rtt_matrix(&self, runs: usize, switch_of: &dyn Fn(&str) -> usize) -> (Vec<String>, Vec<Vec<f64>>) {
        let mut best: Option<(Vec<String>, Vec<Vec<f64>>)> = None;
        for run in 0..runs {
            let out = self.mpirun("block", 1, &example("pingpong"), &[]);
            assert!(out.status.success(), "pingpong failed: {}", show(&out));
            let (hosts, m) = parse_rtt_csv(&String::from_utf8_lossy(&out.stdout));
            let merged = match best.take() {
                None => (hosts, m),
                Some((h0, m0)) => {
                    assert_eq!(h0, hosts, "host names changed between runs");
                    let m = m0
                        .iter()
                        .zip(&m)
                        .map(|(a, b)| a.iter().zip(b).map(|(x, y)| x.min(*y)).collect())
                        .collect();
                    (h0, m)
                }
            };
            let (same, cross) = classes(&merged.0, &merged.1, switch_of);
            eprintln!(
                "pingpong run {}: same-switch max {:.2} us, cross-switch min {:.2} us",
                run + 1,
                same.iter().cloned().fold(f64::NAN, f64::max),
                cross.iter().cloned().fold(f64::NAN, f64::min)
            );
            let separated = max(&same) < min(&cross);
            best = Some(merged);
            if separated {
                break;
            }
        }
        best.expect("at least one run")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let out = emu(&self.prefix, &["down"], 120);
        if !out.status.success() {
            eprintln!("emucluster down failed: {}", show(&out));
        }
    }
}

/// A private directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("treecast-emu-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&p).expect("create temp dir");
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Parse the RTT-matrix CSV (`host,<name>,...` then `<name>,v,...`), checking its shape.
fn parse_rtt_csv(text: &str) -> (Vec<String>, Vec<Vec<f64>>) {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header = lines.next().unwrap_or_else(|| panic!("pingpong printed nothing"));
    let mut cols = header.split(',');
    assert_eq!(cols.next(), Some("host"), "bad header: {header}");
    let hosts: Vec<String> = cols.map(str::to_string).collect();
    let mut m = Vec::new();
    for (i, line) in lines.enumerate() {
        let mut cells = line.split(',');
        assert_eq!(
            cells.next(),
            hosts.get(i).map(String::as_str),
            "row {i} names the wrong host: {line}"
        );
        let row: Vec<f64> = cells
            .map(|c| c.parse().unwrap_or_else(|_| panic!("bad cell '{c}' in: {line}")))
            .collect();
        assert_eq!(row.len(), hosts.len(), "row {i} has {} cells: {line}", row.len());
        m.push(row);
    }
    assert_eq!(m.len(), hosts.len(), "matrix is not square:\n{text}");
    for (i, row) in m.iter().enumerate() {
        assert_eq!(row[i], 0.0, "diagonal is not 0:\n{text}");
        for (j, &v) in row.iter().enumerate() {
            assert_eq!(v, m[j][i], "matrix is not symmetric:\n{text}");
            assert!(i == j || (v > 0.0 && v.is_finite()), "bad RTT {v}:\n{text}");
        }
    }
    (hosts, m)
}

/// RTTs of same-switch pairs and of cross-switch pairs.
fn classes(hosts: &[String], m: &[Vec<f64>], switch_of: &dyn Fn(&str) -> usize) -> (Vec<f64>, Vec<f64>) {
    let (mut same, mut cross) = (Vec::new(), Vec::new());
    for i in 0..hosts.len() {
        for j in (i + 1)..hosts.len() {
            if switch_of(&hosts[i]) == switch_of(&hosts[j]) {
                same.push(m[i][j]);
            } else {
                cross.push(m[i][j]);
            }
        }
    }
    (same, cross)
}

fn max(v: &[f64]) -> f64 {
    v.iter().cloned().fold(f64::NEG_INFINITY, f64::max)
}

fn min(v: &[f64]) -> f64 {
    v.iter().cloned().fold(f64::INFINITY, f64::min)
}

fn matrix_text(hosts: &[String], m: &[Vec<f64>]) -> String {
    let mut s = String::new();
    for (h, row) in hosts.iter().zip(m) {
        let cells: Vec<String> = row.iter().map(|v| format!("{v:7.2}")).collect();
        s.push_str(&format!("{h:>8} {}\n", cells.join(" ")));
    }
    s
}

/// Objects of the cluster still present: namespaces and root-namespace links named `P-...`.
fn leftovers(prefix: &str) -> Vec<String> {
    let mut left = Vec::new();
    for (cmd, args) in [("ip", &["netns", "list"][..]), ("ip", &["-o", "link", "show"][..])] {
        let out = Command::new(cmd).args(args).output().expect("run ip");
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            if line
                .split_whitespace()
                .any(|w| w.trim_end_matches(':').starts_with(&format!("{prefix}-")))
            {
                left.push(line.to_string());
            }
        }
    }
    left
}

/// How many probes a case runs and how many must find the emulated tree exactly.
#[derive(Clone, Copy, Debug)]
struct Probes {
    runs: usize,
    exact_at_least: usize,
}

/// Confidence below which a probe counts as having reported its uncertainty.
const UNCERTAIN: f64 = 0.9;

/// Where probe `k` on `cluster` writes its measurements (`TREECAST_PROBE_DUMP`), and the `-x`
/// value that asks for it. A probe that infers a wrong tree on a busy machine happens once in
/// many runs (one CI run of 2026-11-29 split a leaf and claimed 0.951), so a failure message
/// names the file: `treecast infer --replay` runs the inference again on exactly what it saw.
fn probe_dump(cluster: &Cluster, k: usize) -> (String, String) {
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{}-probe-{k}.json", cluster.prefix));
    let path = path.display().to_string();
    (
        format!("its measurements: {path} (treecast infer --replay {path})"),
        format!("TREECAST_PROBE_DUMP={path}"),
    )
}

/// Run `treecast probe --format json` `want.runs` times (every other job with
/// `mpi_yield_when_idle`), compare each tree with `truth` (Slurm text), and assert that at
/// least `want.exact_at_least` match exactly and that every other one reported a confidence
/// below [`UNCERTAIN`]. Each tree is also written as Slurm and groups and read back.
fn probe_many(cluster: &Cluster, truth: &str, want: &Probes) {
    use treecast::infer::metrics;
    use treecast::topology::{io::from_str_auto, Format};
    let truth = from_str_auto(truth, "truth.conf").expect("the emulated topology reads");
    let mut exact = 0;
    let mut lines = Vec::new();
    for k in 0..want.runs {
        let (dump, dump_env) = probe_dump(cluster, k);
        let mut args = Vec::new();
        if k % 2 == 1 {
            args.extend(["--mca", "mpi_yield_when_idle", "1"]);
        }
        args.extend(["-x", "TREECAST_LOG=info", "-x", &dump_env]);
        args.push(env!("CARGO_BIN_EXE_treecast"));
        args.extend(["probe", "--format", "json"]);
        let out = cluster.mpirun_args("block", 1, &args);
        assert!(out.status.success(), "treecast probe failed: {}", show(&out));
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let t = from_str_auto(&text, "probe.json")
            .unwrap_or_else(|e| panic!("treecast probe wrote an unreadable tree: {e}\n{text}"));
        let c = metrics::compare(&truth, &t).expect("comparable trees");
        let confidence = t.confidence().expect("an inferred tree states its confidence");
        let ok = c.rooted && c.leaf_groups;
        exact += usize::from(ok);
        lines.push(format!("probe {k}: {} (confidence {confidence:.3})", c.summary()));
        assert!(
            ok || confidence < UNCERTAIN,
            "probe {k} is wrong but claims confidence {confidence:.3}: {}\n{text}\n{}\n{dump}",
            c.summary(),
            String::from_utf8_lossy(&out.stderr)
        );
        // The other formats say the same about the leaf switches.
        let groups = metrics::leaf_partition(&t).expect("leaf partition");
        for format in [Format::Slurm, Format::Groups] {
            let written = format.write(&t).unwrap();
            let got: Vec<Vec<String>> = match format {
                Format::Groups => written
                    .lines()
                    .filter(|l| !l.trim().is_empty())
                    .map(|l| l.split_whitespace().map(str::to_string).collect())
                    .collect(),
                _ => metrics::leaf_partition(&from_str_auto(&written, "probe.conf").expect("slurm reads back"))
                    .expect("leaf partition"),
            };
            assert_eq!(
                got, groups,
                "{format:?} output disagrees with the JSON tree:\n{written}"
            );
        }
    }
    eprintln!("{}", lines.join("\n"));
    assert!(
        exact >= want.exact_at_least,
        "only {exact} of {} probes found the emulated tree exactly (need {}):\n{}\nprobe 0's {}",
        want.runs,
        want.exact_at_least,
        lines.join("\n"),
        probe_dump(cluster, 0).0
    );
}

/// A CPU hog on one core for at most `seconds`, killed on drop. The loop bounds itself (bash's
/// `SECONDS`), so it is one process: killing a `timeout` wrapper with SIGKILL would orphan the
/// loop it started, and the orphan would load the machine for good.
struct Hog(std::process::Child);

impl Hog {
    fn start(seconds: u32) -> Hog {
        Hog(Command::new("bash")
            .arg("-c")
            .arg(format!("while [ $SECONDS -lt {seconds} ]; do :; done"))
            .spawn()
            .expect("start a CPU hog"))
    }
}

impl Drop for Hog {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The whole scenario on one cluster.
#[allow(clippy::too_many_arguments)]
fn scenario(
    prefix: &str,
    topology: &str,
    subnet: &str,
    link_args: &[&str],
    expected_hosts: &[&str],
    switch_of: &dyn Fn(&str) -> usize,
    probes: Probes,
    bcast_placement: (&str, u32),
    also: Option<&dyn Fn(&Cluster)>,
) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let cluster = Cluster::up(prefix, topology, subnet, link_args);

    // A second `up` with the same prefix refuses (one line, non-zero) instead of clobbering.
    let again = emu(prefix, &["up", "2x2"], 60);
    assert!(
        !again.status.success(),
        "a second up with prefix {prefix} succeeded: {}",
        show(&again)
    );
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("exists"),
        "second up did not say the cluster exists: {}",
        show(&again)
    );

    let (hosts, m) = cluster.rtt_matrix(3, switch_of);
    let mut want: Vec<String> = expected_hosts.iter().map(|s| s.to_string()).collect();
    want.sort();
    assert_eq!(hosts, want, "pingpong saw other host names than the emulated hosts");
    let (same, cross) = classes(&hosts, &m, switch_of);
    assert!(
        max(&same) < min(&cross),
        "a same-switch RTT ({:.2} us) is not below every cross-switch RTT ({:.2} us):\n{}",
        max(&same),
        min(&cross),
        matrix_text(&hosts, &m)
    );
    eprintln!("RTT matrix (us, min over runs):\n{}", matrix_text(&hosts, &m));

    probe_many(&cluster, topology, &probes);
    if let Some(check) = also {
        check(&cluster);
    }
    let (placement, rph) = bcast_placement;
    let out = cluster.mpirun(
        placement,
        rph,
        &example("check_bcast"),
        &["match", "u8:world:4096", "u8:world:1MiB+3"],
    );
    common::assert_ok(
        &out,
        2,
        &format!("check_bcast across {prefix} ({placement}, {rph} rank(s)/host)"),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let ranks = expected_hosts.len() as u32 * rph;
    assert!(
        stdout.contains(&format!("on {ranks} ranks")),
        "expected {ranks} ranks:\n{stdout}"
    );

    drop(cluster);
    let left = leftovers(prefix);
    assert!(left.is_empty(), "emucluster down left objects behind: {left:?}");
}

const THREE_BY_THREE: &str = "# 3 leaf switches below core\n\
                              SwitchName=s0 Nodes=h[000-002]\n\
                              SwitchName=s1 Nodes=h[003-005]\n\
                              SwitchName=s2 Nodes=h[006-008]\n\
                              SwitchName=core Switches=s[0-2]\n";

fn numbered_hosts(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("h{i:03}")).collect()
}

/// 3 switches x 3 hosts, 2 extra bridges per uplink, uplinks shaped to 300 Mbit/s: the demo's
/// cluster. 10 probes, at least 9 exact.
#[test]
fn three_switches_three_hosts_shaped() {
    if !emulation_wanted() {
        return;
    }
    let hosts = numbered_hosts(9);
    let host_refs: Vec<&str> = hosts.iter().map(String::as_str).collect();
    let switch_of = |h: &str| -> usize { h[1..].parse::<usize>().expect("host number") / 3 };
    scenario(
        "tcte3",
        THREE_BY_THREE,
        "10.213.231.0/24",
        &["--extra-hops", "2", "--uplink-rate", "300mbit"],
        &host_refs,
        &switch_of,
        Probes {
            runs: 10,
            exact_at_least: 9,
        },
        ("block", 1),
        Some(&burst_probe_finds_the_uplink_buckets),
    );
}

/// With profiling on, the set-up burst probe finds the token buckets `tc tbf` puts on both
/// directions of the three uplinks (`emucluster.sh`: burst = 2 ms of the rate, 75,000 bytes at
/// 300 Mbit/s, counted with headers), the profile lists them and `treecast report` names them.
/// Depth within 0.5-1.5x of tbf's burst (payload: about 72 KB; read 63-71 KB, also with a CPU
/// hog beside), sustained rate within 80-105% of 300 Mbit/s (payload: 287 Mbit/s; read 281-295
/// Mbit/s with the hog), a peak at least 3x the sustained rate. The buckets are put on the links of the
/// tree the job inferred, so a job whose tree came out wrong (1 in 10 probes may) is run again:
/// up to 3 jobs, one must find them all. The same probe reads what the senders' transport
/// holds unsent.
fn burst_probe_finds_the_uplink_buckets(cluster: &Cluster) {
    let dir = TempDir::new("burst");
    let mut seen = Vec::new();
    for attempt in 0..3 {
        let profile = dir.0.join(format!("profile-{attempt}.json"));
        let var = format!("TREECAST_PROFILE={}", profile.display());
        let exe = example("predict_bench");
        let args = ["-x", &var, exe.to_str().expect("utf-8 path"), "10"];
        let out = cluster.mpirun_args("block", 1, &args);
        assert!(out.status.success(), "predict_bench failed: {}", show(&out));
        let report = treecast::profile::report::ProfileReport::load(&profile).unwrap_or_else(|e| panic!("{e}"));
        let buckets = &report.communicators[0].link_buckets;
        let hosts = numbered_hosts(9);
        let between_switches = buckets
            .iter()
            .filter(|b| b.link.split(" -> ").all(|end| !hosts.iter().any(|h| h == end)))
            .count();
        let ok = |b: &treecast::profile::report::LinkBucketReport| {
            (0.5 * 75e3..=1.5 * 75e3).contains(&b.depth_bytes)
                && (0.8 * 37.5e6..=1.05 * 37.5e6).contains(&b.sustained_bps)
                && b.peak_bps >= 3.0 * b.sustained_bps
        };
        seen.push(format!("{buckets:?}"));
        if buckets.len() == 6 && between_switches == 6 && buckets.iter().all(ok) {
            let text = Command::new(env!("CARGO_BIN_EXE_treecast"))
                .arg("report")
                .arg(&profile)
                .output()
                .expect("treecast report runs");
            let text = String::from_utf8_lossy(&text.stdout);
            assert_eq!(text.matches("passes a burst").count(), 6, "{text}");
            // Open MPI's TCP sender completes once the kernel holds its bytes: its 1 MiB probe
            // send completed 27 ms before the acknowledgement (read 968-973 KB held in every
            // job, 2026-11-29). A preempted sender reads less, so only a quarter is asserted;
            // the fit never reads more than the probe's largest transfer.
            let held = report.communicators[0]
                .send_buffer_bytes
                .expect("transport buffer measured");
            assert!((256e3..=1048576.0).contains(&held), "{held}");
            assert!(text.contains("a sender's transport held"), "{text}");
            // Across hosts the token ring measured the overhead plans charge; predictions split
            // it into CPU time per message (from the ring's train) and the wake-up that makes
            // up the rest of a lone token's hop. Each route names what it ran. The CPU time may
            // read 0: on a calm machine nine ranks on two cores pass a train of 8 tokens
            // 85-103 us slower per token than one, but with two more busy processes beside the
            // job (a build, or two CPU hogs) the train's lap read no longer than a lone token's
            // (hops of 230-630 us, every relay's wake-up taking all the tokens waiting for it;
            // 3 of 4 runs so loaded, 2026-11-28), so only the split's identity is asserted.
            let c = &report.communicators[0];
            let m = c.message_overhead.as_ref().expect("overheads recorded");
            assert_eq!(m.planning_source, "token ring", "{m:?}");
            assert!(m.planning_s >= treecast::plan::pipeline::MESSAGE_OVERHEAD_S, "{m:?}");
            let (cpu, wake) = (m.prediction_s.expect("calibrated"), m.prediction_wake_s.expect("split"));
            assert!(cpu >= 0.0 && cpu <= m.planning_s && wake >= 0.0, "{m:?}");
            assert!((cpu / 2.0 + wake - m.planning_s).abs() < 1e-9, "{m:?}");
            assert!(text.contains("measured by the token ring at set-up"), "{text}");
            assert!(text.contains("to wake a relay that was idle"), "{text}");
            // The nine ranks share the machine's CPUs, and predictions queue on them.
            assert!(
                text.contains("predictions queue their messages' CPU time on those CPUs"),
                "{text}"
            );
            assert!(c.routes.iter().all(|r| !r.algorithm.is_empty()), "{:?}", c.routes);
            // The emulated hosts share this machine's kernel and counter: their clocks are
            // aligned through them, not by ping-pongs that wait for one of 2 cores among 9 ranks.
            for k in c.clocks.iter().filter(|k| k.rank != 0) {
                let method = if k.source == "tsc" {
                    "same counter"
                } else {
                    "same kernel"
                };
                assert_eq!(k.offset_method, method, "{k:?}");
            }
            eprintln!("burst probe, job {}: {buckets:?}", attempt + 1);
            burst_readings_are_kept_for_later_communicators(cluster);
            return;
        }
    }
    panic!("no job found the six uplink buckets:\n{}", seen.join("\n"));
}

/// A profiled job that makes world, then a split of it, then a duplicate of world
/// (`check_bcast profile`): the duplicate's burst-probe pairs are world's pairs (the same
/// processes), whose readings every rank kept, so it probes none of them again. The job caches
/// topologies (`TREECAST_CACHE`), so the duplicate plans on world's tree and picks the same
/// pairs; inferred again, its tree could differ (1 probe in 10 may).
fn burst_readings_are_kept_for_later_communicators(cluster: &Cluster) {
    let dir = TempDir::new("burstkept");
    let profile = dir.0.join("profile.json");
    let var = format!("TREECAST_PROFILE={}", profile.display());
    let cache = format!("TREECAST_CACHE={}", dir.0.display());
    let exe = example("check_bcast");
    let args = [
        "-x",
        &var,
        "-x",
        &cache,
        "-x",
        "TREECAST_LOG=info",
        exe.to_str().expect("utf-8 path"),
        "profile",
    ];
    let out = cluster.mpirun_args("block", 1, &args);
    assert!(out.status.success(), "check_bcast profile failed: {}", show(&out));
    // One summary line per communicator that probed: world's first, the duplicate's last.
    let stderr = String::from_utf8_lossy(&out.stderr);
    let summaries: Vec<(usize, usize)> = stderr
        .lines()
        .filter_map(|l| {
            let rest = l.split("treecast: burst probe: ").nth(1)?;
            // "4 pairs (0 kept from an earlier communicator) in ..."
            let words: Vec<&str> = rest.split_whitespace().collect();
            let pairs = words.first()?.parse().ok()?;
            let kept = words.get(2)?.trim_start_matches('(').parse().ok()?;
            Some((pairs, kept))
        })
        .collect();
    let (first, last) = (summaries.first(), summaries.last());
    assert!(summaries.len() >= 2, "{}", show(&out));
    let (world_pairs, world_kept) = *first.expect("world");
    assert!(world_pairs > 0 && world_kept == 0, "{summaries:?}");
    assert_eq!(*last.expect("duplicate"), (world_pairs, world_pairs), "{summaries:?}");
}

/// The same cluster with one core kept busy by a CPU hog for the whole case: 10 probes, at
/// least 8 exact, and the burst probe's six uplink buckets (probing must hold on a loaded
/// machine).
#[test]
fn three_switches_three_hosts_with_a_busy_core() {
    if !emulation_wanted() {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let cluster = Cluster::up(
        "tcte3h",
        THREE_BY_THREE,
        "10.213.233.0/24",
        &["--extra-hops", "2", "--uplink-rate", "300mbit"],
    );
    let hog = Hog::start(900);
    probe_many(
        &cluster,
        THREE_BY_THREE,
        &Probes {
            runs: 10,
            exact_at_least: 8,
        },
    );
    give_ups_leave_no_stale_answer(&cluster);
    burst_probe_finds_the_uplink_buckets(&cluster);
    drop(hog);
    drop(cluster);
    let left = leftovers("tcte3h");
    assert!(left.is_empty(), "emucluster down left objects behind: {left:?}");
}

/// Probes where round trips are given up all the time (`TREECAST_PROBE_GIVE_UP_RATIO=1`: any
/// round trip slower than its pair's fastest so far), so that late pongs of cancelled receives
/// abound: each probe must finish, name every host once, report its give-ups, and never take a
/// late pong for the current one. A round trip through the emulated network's veths and
/// bridges takes at least 10 us here (the lowest of 10 probes: 9.97 us); a pong already waiting
/// would return in 1-2 us, so every recorded round trip must be over 4 us.
fn give_ups_leave_no_stale_answer(cluster: &Cluster) {
    let dir = TempDir::new("giveup");
    for k in 0..2 {
        let dump = dir.0.join(format!("dump-{k}.json"));
        let dump_var = format!("TREECAST_PROBE_DUMP={}", dump.display());
        let mut args = Vec::new();
        if k == 1 {
            args.extend(["--mca", "mpi_yield_when_idle", "1"]);
        }
        args.extend(["-x", "TREECAST_LOG=info", "-x", "TREECAST_PROBE_GIVE_UP_US=1"]);
        args.extend(["-x", "TREECAST_PROBE_GIVE_UP_RATIO=1", "-x", &dump_var]);
        args.push(env!("CARGO_BIN_EXE_treecast"));
        args.extend(["probe", "--format", "groups"]);
        let out = cluster.mpirun_args("block", 1, &args);
        assert!(
            out.status.success(),
            "treecast probe with give-ups failed: {}",
            show(&out)
        );
        let mut named: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .map(str::to_string)
            .collect();
        named.sort();
        assert_eq!(named, numbered_hosts(9), "{}", show(&out));
        let log = String::from_utf8_lossy(&out.stderr);
        let given_up: u64 = common::given_up_in_log(&log)
            .unwrap_or_else(|| panic!("the probe did not report its give-ups: {}", show(&out)));
        assert!(given_up > 0, "no round trip was given up: {}", show(&out));
        assert!(!log.contains("late pongs unreceived"), "{}", show(&out));
        let text = std::fs::read_to_string(&dump).expect("the probe dump is written");
        let d: serde_json::Value = serde_json::from_str(&text).expect("the probe dump reads");
        let fastest = d["measurements"]
            .as_array()
            .expect("measurements")
            .iter()
            .flat_map(|m| m["samples_s"].as_array().expect("samples").iter())
            .map(|x| x.as_f64().expect("a number"))
            .fold(f64::INFINITY, f64::min);
        assert!(
            fastest > 4e-6,
            "probe {k}: a round trip of {:.2} us, a late pong taken for the current one",
            fastest * 1e6
        );
        eprintln!(
            "give-up probe {k}: {given_up} measurements given up, fastest round trip {:.2} us",
            fastest * 1e6
        );
    }
}

/// A three-level tree: 2 pods x 2 leaf switches x 2 hosts (every switch link 2 extra bridges,
/// uplinks shaped). A leaf switch of two hosts is decided by one pair only, the hardest case
/// for inference: 6 probes, at least 3 exact, and every other one reported as uncertain.
#[test]
fn three_level_tree() {
    if !emulation_wanted() {
        return;
    }
    let topo = "SwitchName=l0 Nodes=h000,h001\n\
                SwitchName=l1 Nodes=h002,h003\n\
                SwitchName=l2 Nodes=h004,h005\n\
                SwitchName=l3 Nodes=h006,h007\n\
                SwitchName=p0 Switches=l[0-1]\n\
                SwitchName=p1 Switches=l[2-3]\n\
                SwitchName=core Switches=p[0-1]\n";
    let hosts = numbered_hosts(8);
    let host_refs: Vec<&str> = hosts.iter().map(String::as_str).collect();
    let switch_of = |h: &str| -> usize { h[1..].parse::<usize>().expect("host number") / 2 };
    scenario(
        "tcte32",
        topo,
        "10.213.234.0/24",
        &["--extra-hops", "2", "--uplink-rate", "300mbit"],
        &host_refs,
        &switch_of,
        Probes {
            runs: 6,
            exact_at_least: 3,
        },
        ("block", 1),
        None,
    );
}

/// Leaf switches of 1, 2 and 4 hosts below a core (a switch above one host is invisible in
/// RTTs; the comparison leaves it out). 6 probes, at least 4 exact.
#[test]
fn uneven_leaf_switches() {
    if !emulation_wanted() {
        return;
    }
    let topo = "SwitchName=s0 Nodes=h000\n\
                SwitchName=s1 Nodes=h001,h002\n\
                SwitchName=s2 Nodes=h[003-006]\n\
                SwitchName=core Switches=s[0-2]\n";
    let hosts = numbered_hosts(7);
    let host_refs: Vec<&str> = hosts.iter().map(String::as_str).collect();
    let switch_of = |h: &str| -> usize {
        match h[1..].parse::<usize>().expect("host number") {
            0 => 0,
            1 | 2 => 1,
            _ => 2,
        }
    };
    scenario(
        "tcteu",
        topo,
        "10.213.235.0/24",
        &["--extra-hops", "2", "--uplink-rate", "300mbit"],
        &host_refs,
        &switch_of,
        Probes {
            runs: 6,
            exact_at_least: 4,
        },
        ("block", 1),
        None,
    );
}

/// Far-apart parts under real MPI: 2 switches x 3 hosts joined by a long uplink (60 extra
/// bridges), with the far threshold set between the same-switch and cross-switch round trips
/// that `pingpong` measured (`TREECAST_FAR_RTT_US`; on a real network it comes from a gap in
/// the readings, which a few bridges cannot make) and parts of 3 hosts led by their own leader
/// (`TREECAST_PART_LEADERS_FROM=3`; by default only parts of 64 hosts and more are):
/// host 3's leader coordinates the rounds of its switch and sends its tree back to rank 0,
/// which grafts the parts. Three probes (the second with both leaders at work at once) must
/// each say the parts were led that way and give the two switches; broadcasts on that
/// topology must match `MPI_Bcast` byte for byte.
#[test]
fn far_apart_parts_are_inferred_under_their_own_leaders() {
    if !emulation_wanted() {
        return;
    }
    use treecast::infer::metrics;
    use treecast::topology::io::from_str_auto;
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let topo = "SwitchName=spine Switches=leafA,leafB\n\
                SwitchName=leafA Nodes=h[000-002]\n\
                SwitchName=leafB Nodes=h[003-005]\n";
    let cluster = Cluster::up("tctef", topo, "10.213.236.0/24", &["--extra-hops", "60"]);
    let switch_of = |h: &str| -> usize { h[1..].parse::<usize>().expect("host number") / 3 };
    let (hosts, m) = cluster.rtt_matrix(3, &switch_of);
    let (same, cross) = classes(&hosts, &m, &switch_of);
    assert!(
        max(&same) < min(&cross),
        "same-switch RTTs overlap cross-switch ones:\n{}",
        matrix_text(&hosts, &m)
    );
    // The geometric middle of the two classes, as far (in ratio) from both: the long uplink's
    // round trip follows the machine's load (60 bridges of CPU work), so a threshold near it
    // is not safe. 0.6 x the cross-switch minimum was: one CI run's pingpong read 264.7 us
    // there and its probe found no far-apart parts under the 158.8 us that gave. An idle
    // machine's probes read those pairs at 146-150 us (its pingpong 160-174): at 158.8 us,
    // 12 of 12 probes found no parts; at the middle (50 us), 30 of 30 did. A spike only makes a near pair
    // look far, and three that agree are needed to keep two hosts apart.
    let far_us = format!("TREECAST_FAR_RTT_US={:.1}", (max(&same) * min(&cross)).sqrt());
    let truth = from_str_auto(topo, "truth.conf").expect("the emulated topology reads");
    let want = metrics::leaf_partition(&truth).expect("leaf partition");
    for k in 0..3 {
        // Hosts here share the machine's CPUs, so parts are led one after another; in the
        // middle probe the two leaders coordinate their parts at the same time, as on distinct
        // machines (one pair each: rank 0's rounds keep measuring one pair at a time, since
        // three pairs at once on two busy cores made same-switch round trips read far).
        let pairs = if k == 1 {
            "TREECAST_PROBE_PARTS=side-by-side"
        } else {
            "TREECAST_PROBE_PARTS=in-turn"
        };
        let (dump, dump_env) = probe_dump(&cluster, k);
        let args = [
            "-x",
            "TREECAST_LOG=info",
            "-x",
            &dump_env,
            "-x",
            &far_us,
            "-x",
            "TREECAST_PART_LEADERS_FROM=3",
            "-x",
            pairs,
            env!("CARGO_BIN_EXE_treecast"),
            "probe",
            "--format",
            "json",
        ];
        let out = cluster.mpirun_args("block", 1, &args);
        assert!(out.status.success(), "treecast probe failed: {}", show(&out));
        let log = String::from_utf8_lossy(&out.stderr);
        assert!(
            log.contains("2 far-apart parts of [3, 3] hosts inferred under 2 leaders (hosts [0, 3])"),
            "probe {k} ({far_us}) did not infer the two switches under their own leaders:\n{log}\n{dump}"
        );
        let how = if k == 1 { "side by side" } else { "one after another" };
        assert!(
            log.contains(&format!("led by hosts [0, 3], {how}")),
            "probe {k} ({pairs}) did not lead the parts {how}:\n{log}"
        );
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let t = from_str_auto(&text, "probe.json")
            .unwrap_or_else(|e| panic!("treecast probe wrote an unreadable tree: {e}\n{text}"));
        assert_eq!(
            metrics::leaf_partition(&t).expect("leaf partition"),
            want,
            "probe {k}: wrong switches\n{text}\n{log}\n{dump}"
        );
    }
    let exe = example("check_bcast");
    let out = cluster.mpirun_args(
        "block",
        2,
        &[
            "-x",
            &far_us,
            "-x",
            "TREECAST_PART_LEADERS_FROM=3",
            exe.to_str().expect("utf-8 path"),
            "match",
            "u8:world:4096",
            "u8:world:1MiB+3",
        ],
    );
    common::assert_ok(&out, 2, "check_bcast on the grafted topology");
    drop(cluster);
    let left = leftovers("tctef");
    assert!(left.is_empty(), "emucluster down left objects behind: {left:?}");
}

/// 2 switches x 3 hosts with other names, 4 extra bridges per uplink, unshaped; broadcasts with
/// 2 ranks per host placed round-robin over the switches.
#[test]
fn two_switches_three_hosts_round_robin() {
    if !emulation_wanted() {
        return;
    }
    let topo = "SwitchName=spine Switches=leafA,leafB\n\
                SwitchName=leafA Nodes=node[1-3]\n\
                SwitchName=leafB Nodes=node[4-6]\n";
    let hosts = ["node1", "node2", "node3", "node4", "node5", "node6"];
    let switch_of = |h: &str| -> usize { usize::from(h[4..].parse::<usize>().expect("host number") > 3) };
    scenario(
        "tcte2",
        topo,
        "10.213.232.0/24",
        &["--extra-hops", "4"],
        &hosts,
        &switch_of,
        Probes {
            runs: 4,
            exact_at_least: 3,
        },
        ("round-robin", 2),
        None,
    );
}
