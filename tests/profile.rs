//! A profiled mpirun job (`TREECAST_PROFILE`) writes a report whose call counts and byte totals
//! are exactly right, per call site and communicator, including a communicator freed before
//! finalize and one never freed; MPI_Bcast comparisons appear every Nth call.

mod common;
use common::{assert_ok, example, mpirun};
use treecast::profile::ProfileReport;

/// Run `check_bcast MODE` on `np` ranks with `TREECAST_PROFILE` set to a fresh file (plus
/// `env`), and load the profile it wrote; returns the job's directory, the profile's path, the
/// profile and the job's standard error.
fn profiled_job(
    tag: &str,
    np: u32,
    mode: &str,
    env: &[(&str, &str)],
) -> (std::path::PathBuf, std::path::PathBuf, ProfileReport, String) {
    let dir = std::env::temp_dir().join(format!("treecast-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("profile.json");
    let path_s = path.to_string_lossy().into_owned();
    let mut all = vec![("TREECAST_PROFILE", path_s.as_str()), ("TREECAST_TIMEOUT", "120")];
    all.extend_from_slice(env);
    let out = mpirun(np, &example("check_bcast"), &[mode], &all, 600);
    assert_ok(&out, 1, &format!("{mode} job"));
    let report = ProfileReport::load(&path).unwrap_or_else(|e| panic!("{e}"));
    (dir, path, report, String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn profile_counts_calls_and_bytes_exactly() {
    let np = 4;
    let (dir, _, report, stderr) = profiled_job(
        "profile",
        np,
        "profile",
        &[("TREECAST_PROFILE_COMPARE", "4"), ("TREECAST_LOG", "info")],
    );
    assert_eq!(report.world_size, np);
    // The set-up calibration measured world's pair of host-mates (world ranks 0 and 1) and each
    // half of the split (world ranks 0, 2 and 1, 3: other pairs); the duplicate of world has
    // world's pair, whose readings every rank kept, so it measured nothing.
    let lines = |kept: bool| {
        stderr
            .lines()
            .filter(|l| l.contains("treecast: calibration between ranks 0 and 1 of one host"))
            .filter(|l| l.contains("kept from an earlier communicator") == kept)
            .count()
    };
    assert_eq!((lines(false), lines(true)), (3, 1), "{stderr}");
    // World (4 ranks on one host) timed the library's broadcast and fitted a scale of the
    // host-mates' costs at each size, and its duplicate, the same processes in the same order,
    // took those; the halves (2 ranks) timed their own, only under MPICH.
    let halves_fit = 2 >= treecast::runtime::library_fit::MIN_RANKS;
    let fits_of = |n: u32| -> Vec<&str> {
        let of = format!("timed at set-up on one host of {n} ranks");
        stderr
            .lines()
            .filter_map(|l| l.split_once(of.as_str()).map(|(_, r)| r))
            .collect()
    };
    assert_eq!(fits_of(4).len(), 1, "{stderr}");
    let kept = "on one host of 4 ranks, kept from an earlier communicator of the same ranks";
    assert_eq!(stderr.lines().filter(|l| l.contains(kept)).count(), 1, "{stderr}");
    assert_eq!(fits_of(2).len(), if halves_fit { 2 } else { 0 }, "{stderr}");
    let fits: Vec<&str> = fits_of(4).into_iter().chain(fits_of(2)).collect();
    let (lo, hi) = treecast::estimate::curve_fit::SCALE_RANGE;
    for f in fits {
        let sizes: Vec<&str> = f.split_once("): ").expect("readings").1.split(" | ").collect();
        assert_eq!(sizes.len(), treecast::runtime::library_fit::FIT_SIZES.len(), "{f}");
        for s in sizes {
            // Each pass's factor follows " x", then the kept one.
            let scales: Vec<f64> = s
                .split(" x")
                .skip(1)
                .map(|x| {
                    x.split_whitespace()
                        .next()
                        .and_then(|v| v.trim_end_matches([',', ';']).parse().ok())
                })
                .map(|v| v.unwrap_or(f64::NAN))
                .collect();
            assert_eq!(scales.len(), treecast::runtime::library_fit::PASSES + 1, "{s} in {f}");
            assert!(scales.iter().all(|x| (lo..=hi).contains(x)), "{s} in {f}");
        }
    }

    let world = report
        .communicators
        .iter()
        .find(|c| c.label == "MPI_COMM_WORLD")
        .expect("world report");
    assert_eq!(world.size, np);
    assert_eq!(world.hosts.len(), np as usize);
    assert_eq!(world.sites.len(), 3, "{:#?}", world.sites);
    // Every communicator has host-mates, whose costs were timed in two passes (or kept from a
    // communicator that timed them): how far apart the passes read reaches each profile, the
    // same on every rank (it is broadcast with the readings), and is a ratio of at least 1.
    for c in &report.communicators {
        let apart = c.message_overhead.as_ref().and_then(|m| m.curve_passes_apart);
        assert!(
            apart.is_some_and(|a| a.is_finite() && a >= 1.0),
            "{}: {apart:?}",
            c.label
        );
    }
    // The library's broadcast timed at set-up is in the profile: every size, a positive median
    // per pass and the scale kept; for the 2-rank halves of the split only under MPICH.
    let sizes = &treecast::runtime::library_fit::FIT_SIZES;
    let timed: Vec<&treecast::profile::report::CommReport> = report
        .communicators
        .iter()
        .filter(|c| c.size == np || halves_fit)
        .collect();
    assert!(timed.len() >= 2, "{:#?}", report.communicators);
    for (label, t) in timed
        .iter()
        .flat_map(|c| c.library_timing.iter().map(|t| (&c.label, t)))
    {
        assert_eq!(t.pass_median_s.len(), treecast::runtime::library_fit::PASSES, "{t:?}");
        assert!(t.pass_median_s.iter().all(|&m| m > 0.0 && m < 1.0), "{t:?}");
        assert!(t.scale.is_some_and(|x| (lo..=hi).contains(&x)), "{t:?}");
        assert!(
            t.cpu_groups.as_deref().is_some_and(is_cpu_groups_label),
            "{label}: {t:?}"
        );
        // A size is modelled as a shared-memory release exactly where the point-to-point
        // model can hardly be as fast as the calls (its scale at or near the lower limit), and
        // then with plausible costs (under MPICH, 1-16 KiB; under Open MPI, as a rule, none).
        let near_limit = t
            .scale
            .is_some_and(|x| x <= treecast::runtime::library_fit::RELEASE_BELOW);
        assert_eq!(t.release.is_some(), near_limit, "{t:?}");
        if let Some(r) = &t.release {
            let ok = |s: f64| s.is_finite() && (0.0..0.1).contains(&s);
            assert!(ok(r.release_s) && ok(r.copy_s) && ok(r.root_s), "{t:?}");
        }
    }
    for c in &timed {
        assert_eq!(
            c.library_timing.iter().map(|t| t.bytes).collect::<Vec<u64>>(),
            sizes.to_vec(),
            "{}",
            c.label
        );
    }
    for c in report.communicators.iter().filter(|c| c.size < np && !halves_fit) {
        assert!(c.library_timing.is_empty(), "{}: {:?}", c.label, c.library_timing);
    }
    // Every rank's offset to rank 0 was measured at set-up and at the gather, and the drift
    // between them, by which times in between are mapped, is a plausible one.
    assert_eq!(world.clocks.len(), np as usize);
    for k in &world.clocks {
        assert!(k.offset_at_setup_s.is_some(), "{k:?}");
        let drift = k.drift_ppm.expect("drift");
        assert!(drift.is_finite() && drift.abs() <= 1000.0, "{k:?}");
        assert!(k.offset_error_s >= 0.0 && k.offset_error_s.is_finite(), "{k:?}");
        // One host: every rank reads rank 0's time-stamp counter (its times are converted
        // with rank 0's line) or, without one, rank 0's kernel clock, so its offset comes
        // from that (to a bracket of reads, well under a microsecond unless all eight
        // attempts were preempted), not from a ping-pong that may wait for a core.
        let method = match (k.rank, k.source.as_str()) {
            (0, _) => "reference",
            (_, "tsc") => "same counter",
            _ => "same kernel",
        };
        assert_eq!(k.offset_method, method, "{k:?}");
        assert!(k.offset_error_s < 50e-6, "{k:?}");
    }
    let a = world
        .sites
        .iter()
        .find(|s| s.calls == 37)
        .expect("site A with 37 calls");
    let b = world
        .sites
        .iter()
        .find(|s| s.calls == 11)
        .expect("site B with 11 calls");
    let a_bytes: u64 = (0..37u64).map(|i| i * 13 % 1000 + 1).sum();
    assert_eq!(a.bytes, a_bytes);
    assert_eq!(b.bytes, 11 * 4096);
    // Per size class, the calls whose previous broadcast on world was of another class: site
    // A's sizes in turn, then B's first call (after A's last) and G's (after B's last).
    let world_classes: Vec<u8> = (0..37u64)
        .map(|i| i * 13 % 1000 + 1)
        .chain(std::iter::repeat_n(4096, 11))
        .chain(std::iter::repeat_n(2048, 2 * np as usize))
        .map(treecast::plan::size_class)
        .collect();
    let mut after_other: std::collections::BTreeMap<(usize, u8), u64> = Default::default();
    for (k, w) in world_classes.windows(2).enumerate() {
        let site = if k + 1 < 37 {
            0
        } else if k + 1 < 48 {
            1
        } else {
            2
        };
        *after_other.entry((site, w[1])).or_insert(0) += u64::from(w[0] != w[1]);
    }
    for (i, s) in [a, b].iter().enumerate() {
        for k in &s.size_classes {
            let want = after_other.get(&(i, k.class)).copied().unwrap_or(0);
            assert_eq!(k.calls_after_other_size, want, "{} class {}", s.site, k.class);
        }
    }
    // A's sizes grow through 7 classes (1 B .. 469 B): 6 calls follow another class.
    assert_eq!(a.size_classes.iter().map(|k| k.calls_after_other_size).sum::<u64>(), 6);
    assert_eq!(b.size_classes[0].calls_after_other_size, 1);
    for s in [a, b] {
        assert!(s.site.contains("check_bcast.rs:"), "{}", s.site);
        assert_eq!(s.ranks, np);
        assert_eq!(s.rank_calls, s.calls * np as u64);
        assert_eq!(s.failures, 0);
        // Every call is counted; short calls are timed in a sample (each cell's first call and
        // every compared call always).
        assert_eq!(s.histogram.iter().map(|h| h.2).sum::<u64>(), s.timed_calls);
        assert!(s.timed_calls >= np as u64 && s.timed_calls <= s.rank_calls, "{s:#?}");
        assert!(s.time.min_s > 0.0 && s.time.min_s <= s.time.median_s && s.time.median_s <= s.time.max_s);
        // One machine: the topology is one node, so predictions exist for every site.
        let p = s.predicted.as_ref().expect("prediction");
        assert!(p.deterministic_s > 0.0);
        // Heavy tails never make a broadcast faster. Where the calibration leaves the host links
        // no latency (the per-message overhead took all of it), every latency is a point and the
        // two are the same sum in another order: equal up to rounding, which fails `>=` by an ulp.
        assert!(
            p.pareto_mean_s.unwrap() >= p.deterministic_s * (1.0 - 1e-12) && p.normal_p99_s.is_some(),
            "site {} ({} B): {p:?}",
            s.site,
            s.bytes
        );
        let sample = s.sample_call.as_ref().expect("sample call");
        assert!(sample
            .ranks
            .iter()
            .filter(|r| r.rank != sample.root)
            .all(|r| r.predicted_done_s.unwrap() > 0.0));
        assert_eq!(sample.ranks.len(), np as usize);
        let root = sample.ranks.iter().find(|r| r.rank == sample.root).unwrap();
        assert!(root.enter_s.abs() < 1e-9, "times are relative to the root's entry");
    }
    // Site A rotates roots: 37 calls over 4 roots.
    assert_eq!(a.roots.iter().map(|r| r.1).sum::<u64>(), 37);
    assert_eq!(a.roots.len(), np as usize);
    // Per size class (the runtime's plan granularity): calls and bytes exactly, each class with
    // a prediction for a size inside it; site A's sizes span several classes.
    let mut want: std::collections::BTreeMap<u8, (u64, u64)> = Default::default();
    for i in 0..37u64 {
        let n = i * 13 % 1000 + 1;
        let e = want.entry(treecast::plan::size_class(n)).or_default();
        *e = (e.0 + 1, e.1 + n);
    }
    assert!(want.len() > 3, "{want:?}");
    let got: std::collections::BTreeMap<u8, (u64, u64)> =
        a.size_classes.iter().map(|c| (c.class, (c.calls, c.bytes))).collect();
    assert_eq!(got, want);
    assert_eq!(b.size_classes.len(), 1);
    assert_eq!(
        (
            b.size_classes[0].class,
            b.size_classes[0].calls,
            b.size_classes[0].predicted_bytes
        ),
        (13, 11, 4096)
    );
    for s in [a, b] {
        for c in &s.size_classes {
            assert_eq!(c.rank_calls, c.calls * np as u64, "{}: class {}", s.site, c.class);
            assert_eq!(c.roots.iter().map(|r| r.1).sum::<u64>(), c.calls);
            assert!(
                (c.min_bytes..=c.max_bytes).contains(&c.predicted_bytes),
                "class {} predicted for {} bytes",
                c.class,
                c.predicted_bytes
            );
            assert!(c.roots.iter().any(|r| r.0 == c.predicted_root));
            assert!(c.time.min_s > 0.0 && c.time.min_s <= c.time.median_s && c.time.median_s <= c.time.max_s);
            let p = c.predicted.as_ref().expect("per-class prediction");
            assert!(p.deterministic_s > 0.0);
            // Two ranks share the host, so the set-up calibration fed the prediction, and the
            // error against the measured median is recorded (its size is timing: not asserted).
            let median = p.rank_median_s.expect("calibrated median rank's time");
            assert!(median > 0.0 && median <= p.completion_s.unwrap(), "{p:?}");
            let (got, want) = (c.prediction_error.unwrap(), p.error(c.time.median_s).unwrap());
            assert!((got - want).abs() < 1e-9, "{got} {want}");
            // The calls every rank timed (at least each class's first) are predicted again
            // from the times their ranks entered, and set against their own measured times.
            let g = c
                .given_entries
                .unwrap_or_else(|| panic!("no prediction from the entries: {}: {c:#?}", s.site));
            assert!(g.calls >= 1 && g.calls <= c.calls, "{g:?}");
            assert!(g.measured_median_s > 0.0 && g.predicted_median_s > 0.0, "{g:?}");
            let e = g.predicted_median_s / g.measured_median_s - 1.0;
            assert!((g.error.unwrap() - e).abs() < 1e-9, "{g:?}");
            // Each rank's CPU was read in those calls: which ranks shared one.
            let cpus = c.cpu_groups.as_ref().unwrap_or_else(|| panic!("no CPU groups: {c:#?}"));
            assert!(is_cpu_groups_label(&cpus.most_calls), "{cpus:?}");
            assert!(
                cpus.known_calls >= 1 && cpus.most_calls_count <= cpus.known_calls,
                "{cpus:?}"
            );
            assert!(cpus.setup_count <= cpus.known_calls, "{cpus:?}");
        }
        // The site-level prediction is labelled with the class, size and root it is for: the
        // class with the most calls.
        let dominant = s.predicted_size_class().expect("predicted class");
        assert_eq!(dominant.calls, s.size_classes.iter().map(|c| c.calls).max().unwrap());
        assert_eq!(s.predicted, dominant.predicted);
        assert_eq!(s.predicted_bytes, Some(dominant.predicted_bytes));
        assert_eq!(s.predicted_root, Some(dominant.predicted_root));
    }
    // Every 4th call on world (sequence numbers 0, 4, ...) was also timed with MPI_Bcast:
    // calls 0..48 + 2 * np on world -> 12 + np / 2 comparisons, split between the sites by
    // sequence number.
    let compared: u64 = world.sites.iter().filter_map(|s| s.compare.map(|c| c.calls)).sum();
    assert_eq!(compared, (48 + 2 * np as u64).div_ceil(4));
    // Site G broadcast 2048 B from every rank in turn: every root is counted, and (checked
    // below) each root's route is listed, though all but the first root's first calls took the
    // fast path.
    let g = world
        .sites
        .iter()
        .find(|s| s.bytes == 2 * np as u64 * 2048)
        .expect("site G");
    assert_eq!(g.roots.len(), np as usize, "{:?}", g.roots);
    // The profile records each (root, size class)'s route and why: on one host there is no
    // network, so every one of them is the library's MPI_Bcast.
    let want: std::collections::BTreeSet<(u32, u8)> = world
        .sites
        .iter()
        .flat_map(|s| {
            s.size_classes
                .iter()
                .flat_map(|c| c.roots.iter().map(move |r| (r.0, c.class)))
        })
        .collect();
    let got: std::collections::BTreeSet<(u32, u8)> = world.routes.iter().map(|r| (r.root, r.class)).collect();
    assert_eq!(got, want, "{:#?}", world.routes);
    for r in &world.routes {
        assert_eq!(r.route, "library", "{r:?}");
        assert!(r.reason.contains("no network topology"), "{r:?}");
        // What ran: the library's algorithm as predictions model it (Open MPI's table).
        let modelled = treecast::plan::library_plan_for_class(np, r.root, r.class)
            .info
            .algorithm;
        assert_eq!(r.algorithm, modelled, "{r:?}");
        assert!(
            (r.min_bytes..=r.max_bytes).contains(&(1u64 << r.class.saturating_sub(1))),
            "{r:?}"
        );
    }

    // One host: plans charge the planner's default per message (no ring between hosts);
    // predictions, the host-mates' send burst measured at set-up.
    let m = world.message_overhead.as_ref().expect("overheads recorded");
    assert_eq!(
        (m.planning_s, m.planning_source.as_str(), m.prediction_source.as_str()),
        (treecast::plan::pipeline::MESSAGE_OVERHEAD_S, "default", "send burst"),
        "{m:?}"
    );
    assert!(m.prediction_s.is_some_and(|p| p > 0.0 && p < 1e-3), "{m:?}");
    assert_eq!(m.prediction_wake_s, None, "one host has no ring to split: {m:?}");

    // Two split communicators (freed before finalize), each 2 ranks, 5 calls of 100 bytes.
    let splits: Vec<_> = report.communicators.iter().filter(|c| c.size == 2).collect();
    assert_eq!(
        splits.len(),
        2,
        "{:?}",
        report.communicators.iter().map(|c| &c.label).collect::<Vec<_>>()
    );
    for c in splits {
        assert_eq!(c.sites.len(), 1);
        assert_eq!((c.sites[0].calls, c.sites[0].bytes), (5, 500));
    }
    // The duplicate of world, never freed: gathered at finalize.
    let dups: Vec<_> = report
        .communicators
        .iter()
        .filter(|c| c.size == np && c.label != "MPI_COMM_WORLD")
        .collect();
    assert_eq!(dups.len(), 1);
    assert_eq!((dups[0].sites[0].calls, dups[0].sites[0].bytes), (3, 24));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn arrival_skew_is_told_from_transfer_time() {
    // Site E: the last rank sleeps 20 ms before each of 40 calls; site F: a barrier before each.
    // Every call is timed on every rank (TREECAST_PROFILE_TIMING=all), so both sites have 40
    // aligned calls. Thresholds leave room for a busy 2-core machine (4 ranks share 2 cores).
    let np = 4;
    let (dir, path, report, _) = profiled_job("arrival", np, "imbalance", &[("TREECAST_PROFILE_TIMING", "all")]);
    let path_s = path.to_string_lossy().into_owned();
    let world = &report.communicators[0];
    assert_eq!(world.sites.len(), 2, "{:#?}", world.sites);
    let (e, f) = (&world.sites[0], &world.sites[1]);
    assert!(e.site < f.site, "sites sorted by name: E's line comes first");
    let ea = e.arrival.as_ref().expect("site E arrival");
    let fa = f.arrival.as_ref().expect("site F arrival");
    assert_eq!((ea.calls, fa.calls), (40, 40), "{ea:?} {fa:?}");
    assert_eq!(ea.last_rank, np - 1, "{ea:?}");
    assert!(ea.last_rank_share >= 0.5, "{ea:?}"); // chance: 0.25; 0.7-0.98 seen, tests in parallel
    assert!(ea.skew_median_s >= 10e-3, "{ea:?}");
    assert!(ea.verdict.starts_with("load imbalance"), "{ea:?}");
    assert!(fa.skew_median_s < ea.skew_median_s / 3.0, "{fa:?} vs {ea:?}");
    let slow = e.slowest_call.as_ref().expect("slowest call of E");
    assert_eq!(slow.ranks.len(), np as usize);
    assert!(
        slow.ranks.iter().any(|r| r.enter_s >= 10e-3),
        "the late rank shows: {slow:?}"
    );
    // Site E broadcasts from rank 1. Its calls' predictions start from the times their ranks
    // entered (the calibrated model), so no rank is predicted to leave before it entered, nor
    // a receiver before the root entered; the late rank's entry is 10-20 ms after the others'.
    for call in [slow, e.sample_call.as_ref().expect("sample call of E")] {
        assert_eq!(call.root, 1, "{call:?}");
        assert!(call.predicted_from_entries, "{call:?}");
        for r in &call.ranks {
            let p = r
                .predicted_done_s
                .unwrap_or_else(|| panic!("rank {} not predicted: {call:?}", r.rank));
            assert!(
                p >= r.enter_s && p >= 0.0,
                "rank {} predicted before its entry: {call:?}",
                r.rank
            );
            assert!(
                r.rank == call.root || p > 0.0,
                "receiver {} before the root: {call:?}",
                r.rank
            );
        }
    }
    // The text report has the table and the verdict; the chart of the slowest call is drawn.
    let text = std::process::Command::new(env!("CARGO_BIN_EXE_treecast"))
        .args(["report", &path_s, "--svg"])
        .arg(dir.join("svg"))
        .output()
        .unwrap();
    assert!(text.status.success(), "{}", String::from_utf8_lossy(&text.stderr));
    let t = String::from_utf8_lossy(&text.stdout);
    assert!(t.contains("Arrival skew vs transfer"), "{t}");
    assert!(t.contains("load imbalance before the call"), "{t}");
    let slowest: Vec<_> = std::fs::read_dir(dir.join("svg"))
        .unwrap()
        .flatten()
        .filter(|f| f.file_name().to_string_lossy().ends_with("slowest-gantt.svg"))
        .collect();
    assert_eq!(slowest.len(), 2, "one slowest-call timeline per site");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Empty broadcasts through the library (which returns at once for 0 B), one rank 2 ms late
/// to each: predicted to move nothing, so no rank is predicted to wait for the late one (the
/// one-host model once predicted 1.3 ms), no relative error is given, and the report says why.
#[test]
fn empty_broadcasts_are_predicted_to_move_nothing() {
    let (dir, path, report, _) = profiled_job("empty", 4, "empty", &[("TREECAST_PROFILE_TIMING", "all")]);
    let site = &report.communicators[0].sites[0];
    assert_eq!((site.calls, site.bytes), (30, 0));
    let class = &site.size_classes[0];
    assert_eq!(class.max_bytes, 0, "{class:#?}");
    let p = class.predicted.as_ref().expect("a prediction");
    assert_eq!((p.comparable_s(), p.completion()), (0.0, 0.0), "{p:?}");
    assert_eq!(class.prediction_error, None);
    let g = class.given_entries.as_ref().expect("calls every rank timed");
    assert!(g.calls >= 10, "{g:?}");
    assert_eq!((g.predicted_median_s, g.error), (0.0, None), "{g:?}");
    // Measured: far below the late rank's 2 ms (nobody waited for it).
    assert!(class.time.median_s < 1e-3, "{:?}", class.time);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_treecast"))
        .arg("report")
        .arg(&path)
        .output()
        .unwrap();
    let t = String::from_utf8_lossy(&out.stdout);
    assert!(t.contains("no message moves"), "{t}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn report_renders_a_profile_and_rejects_garbage() {
    let dir = std::env::temp_dir().join(format!("treecast-report-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("p.json");
    let out = mpirun(
        3,
        &example("check_bcast"),
        &["profile"],
        &[
            ("TREECAST_PROFILE", path.to_str().unwrap()),
            ("TREECAST_PROFILE_TIMING", "all"),
            ("TREECAST_TIMEOUT", "120"),
        ],
        600,
    );
    assert_ok(&out, 1, "profile job");
    // Timing every call: the histograms hold every call of every rank.
    let report = ProfileReport::load(&path).unwrap_or_else(|e| panic!("{e}"));
    for s in report.communicators.iter().flat_map(|c| &c.sites) {
        assert_eq!(s.timed_calls, s.rank_calls, "{}", s.site);
        assert_eq!(s.histogram.iter().map(|h| h.2).sum::<u64>(), s.rank_calls, "{}", s.site);
    }
    let treecast = env!("CARGO_BIN_EXE_treecast");
    let svg = dir.join("svg");
    let out = std::process::Command::new(treecast)
        .arg("report")
        .arg(&path)
        .arg("--svg")
        .arg(&svg)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("MPI_COMM_WORLD (3 ranks)"), "{text}");
    let row = text
        .lines()
        .find(|l| l.contains("check_bcast.rs:") && l.split_whitespace().nth(1) == Some("37"));
    assert!(row.is_some(), "site A row with 37 calls:\n{text}");
    assert!(
        text.contains("Prediction error per site and size class (median rank's"),
        "{text}"
    );
    let charts = std::fs::read_dir(&svg).unwrap().count();
    assert!(charts >= 3, "{charts} charts");
    // Site A broadcast several size classes: no single prediction on its row, one row per class
    // naming the size and root its prediction is for.
    assert!(row.unwrap().ends_with("per size class:"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("  256 B..<512 B") && l.contains(" B root ")),
        "{text}"
    );
    let chart = std::fs::read_to_string(svg.join("comm0-predicted-vs-measured.svg")).unwrap();
    assert!(
        chart.contains("256 B..&lt;512 B") && chart.contains("pred. "),
        "{chart}"
    );
    // What a person sees: every chart renders, with ink on it, at the size it declares.
    let charts: Vec<std::path::PathBuf> = std::fs::read_dir(&svg)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "svg"))
        .collect();
    for file in charts {
        let text = std::fs::read_to_string(&file).unwrap();
        let png = render(&file);
        let declared = |attr: &str| -> u32 {
            let at = text.find(&format!(" {attr}=\"")).expect("declared size") + attr.len() + 3;
            let v: String = text[at..].chars().take_while(|c| *c != '"').collect();
            v.parse::<f64>().expect("a number").round() as u32
        };
        assert_eq!(
            (png.width, png.height),
            (declared("width"), declared("height")),
            "{}",
            file.display()
        );
        let ink = png.pixels().filter(|&(_, _, c)| c != [255, 255, 255]).count();
        let share = ink as f64 / (png.width * png.height) as f64;
        assert!(
            (0.005..0.6).contains(&share),
            "{}: {:.1}% ink",
            file.display(),
            100.0 * share
        );
        // Nothing runs off the right edge: a gantt chart's one-line caption once did, cut
        // off mid-word.
        let edge = png
            .pixels()
            .filter(|&(x, _, c)| x + 6 >= png.width && c != [255, 255, 255])
            .count();
        assert_eq!(edge, 0, "{}: ink in the rightmost 6 columns", file.display());
    }
    // Every measured bar of the predicted-vs-measured chart is visible (at least 3 pixels
    // tall): on a linear axis all but the largest were slivers of less than one pixel.
    let png = render(&svg.join("comm0-predicted-vs-measured.svg"));
    let bars = chart.matches("<title>measured median").count();
    let blue = |c: [u8; 3]| c.iter().zip([0x44u8, 0x77, 0xaa]).all(|(a, b)| a.abs_diff(b) <= 8);
    let plot_bottom = png.height.saturating_sub(35); // the legend's swatch is below
    let tall: Vec<bool> = (0..png.width)
        .map(|x| (0..plot_bottom).filter(|&y| blue(png.at(x, y))).count() >= 3)
        .collect();
    let runs = tall.windows(2).filter(|w| w[1] && !w[0]).count() + usize::from(tall[0]);
    assert!(bars >= 2, "{chart}");
    assert_eq!(runs, bars, "visible measured bars in the rendered chart");

    std::fs::write(dir.join("bad.json"), "{\"version\": 1, \"world_size\": \"x\"}").unwrap();
    let out = std::process::Command::new(treecast)
        .arg("report")
        .arg(dir.join("bad.json"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.json") && err.lines().count() == 1, "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A chart rendered by `rsvg-convert` (Debian's librsvg2-bin, installed by
/// `scripts/setup.sh --test`): RGB pixels.
struct Png {
    width: u32,
    height: u32,
    rgb: Vec<[u8; 3]>,
}

impl Png {
    fn at(&self, x: u32, y: u32) -> [u8; 3] {
        self.rgb[(y * self.width + x) as usize]
    }
    fn pixels(&self) -> impl Iterator<Item = (u32, u32, [u8; 3])> + '_ {
        (0..self.height).flat_map(move |y| (0..self.width).map(move |x| (x, y, self.at(x, y))))
    }
}

/// Render `svg` to PNG next to it and decode it (flattened on white).
fn render(svg: &std::path::Path) -> Png {
    let out = svg.with_extension("png");
    let status = std::process::Command::new("rsvg-convert")
        .arg("--background-color=white")
        .arg("-o")
        .arg(&out)
        .arg(svg)
        .status()
        .expect("rsvg-convert (librsvg2-bin; scripts/setup.sh --test installs it)");
    assert!(status.success(), "rsvg-convert failed on {}", svg.display());
    let decoder = png::Decoder::new(std::fs::File::open(&out).unwrap());
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    assert_eq!(info.bit_depth, png::BitDepth::Eight, "{}", out.display());
    let rgb = buf[..info.buffer_size()]
        .chunks(channels)
        .map(|p| match channels {
            1 | 2 => [p[0]; 3],
            _ => [p[0], p[1], p[2]],
        })
        .collect();
    Png {
        width: info.width,
        height: info.height,
        rgb,
    }
}

/// A grouping of ranks by CPU as `profile::placement::label` writes it: `none`, or groups of
/// two or more rank numbers joined by `+`, separated by spaces.
fn is_cpu_groups_label(s: &str) -> bool {
    s == "none"
        || s.split(' ').all(|g| {
            let ranks: Vec<&str> = g.split('+').collect();
            ranks.len() >= 2 && ranks.iter().all(|r| r.parse::<u32>().is_ok())
        })
}

/// `scripts/predict-stats.sh` refuses an environment setting that is not NAME=VALUE, naming it,
/// before it builds or launches anything.
#[test]
fn predict_stats_refuses_a_malformed_setting() {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/predict-stats.sh");
    for args in [
        &["--env", "TREECAST_ALGORITHM"][..],
        &["--against-env", "=1"][..],
        &["--env", "A=1", "--against-env", "1B=2"][..],
    ] {
        let out = std::process::Command::new("bash")
            .arg(&script)
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        let bad = args.last().unwrap();
        assert!(
            err.contains("take NAME=VALUE") && err.contains(&format!("not {bad}")),
            "{args:?}: {err}"
        );
    }
}

/// `scripts/predict-stats.sh --env` reaches every job's ranks, with `--keep` too (which once
/// replaced it with the profile's variable), and `--against-env` only the other arm's: a
/// comparison of two settings runs what it says.
#[test]
fn predict_stats_gives_each_arm_its_settings() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = std::env::temp_dir().join(format!("treecast-stats-env-{}", std::process::id()));
    let logged = |name: &str| {
        std::fs::read_to_string(dir.join(name))
            .unwrap_or_else(|e| panic!("{name}: {e}"))
            .contains("treecast: calibration between ranks 0 and 1")
    };
    let mpich = matches!(common::launcher(), common::Launcher::Hydra);
    for (flag, main_logs) in [("--env", true), ("--against-env", false)] {
        let _ = std::fs::remove_dir_all(&dir);
        let mut cmd = std::process::Command::new("timeout");
        cmd.args(["300", "bash"]).arg(root.join("scripts/predict-stats.sh"));
        cmd.args([
            "--runs", "1", "--ranks", "2", "--calls", "10", "--sizes", "1024", "--keep",
        ]);
        cmd.arg(&dir).args([flag, "TREECAST_LOG=info"]);
        if mpich {
            cmd.arg("--mpich");
        }
        let out = cmd.output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{flag}: {text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            dir.join("job-1.json").exists(),
            "{flag}: the kept profile is missing: {text}"
        );
        assert_eq!(logged("job-1.err"), main_logs, "{flag}: {text}");
        if !main_logs {
            assert!(logged("job-1.against.err"), "{flag}: {text}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `scripts/predict-stats.sh --fresh` reaches every job's `predict_bench` and `--against-arg`
/// only the other arm's: a comparison of calls made in a row against calls of the sizes in
/// turn runs what it says, and each arm's benchmark says which it made and prints every size.
#[test]
fn predict_stats_gives_each_arm_its_arguments() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = std::env::temp_dir().join(format!("treecast-stats-args-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut cmd = std::process::Command::new("timeout");
    cmd.args(["300", "bash"]).arg(root.join("scripts/predict-stats.sh"));
    cmd.args([
        "--runs",
        "1",
        "--ranks",
        "2",
        "--calls",
        "10",
        "--sizes",
        "1024,65536",
        "--fresh",
        "--against-arg",
        "--interleave",
        "--keep",
    ]);
    cmd.arg(&dir);
    if matches!(common::launcher(), common::Launcher::Hydra) {
        cmd.arg("--mpich");
    }
    let out = cmd.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    let (main, against) = (read("job-1.txt"), read("job-1.against.txt"));
    for (job, interleaved) in [(&main, false), (&against, true)] {
        let header = job.lines().next().unwrap_or_default();
        assert!(
            header.contains("the root's data written anew before each call"),
            "{job}"
        );
        assert_eq!(header.contains("the sizes in turn"), interleaved, "{job}");
        for size in ["1024", "65536"] {
            assert!(
                job.lines().any(|l| l.split_whitespace().next() == Some(size)),
                "no row for {size} B: {job}"
            );
        }
    }
    assert!(text.contains("given --interleave"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `predict_bench` (issue 23's benchmark) runs under mpirun and prints a row per size, the
/// line of sizes whose calls moved within the job and the verdict; and
/// `scripts/predict_stats_report.py`, which tallies its outputs over jobs
/// (`scripts/predict-stats.sh`), reads every row of it: if either's format drifts, the tally
/// the README's numbers come from breaks here, not silently.
#[test]
fn predict_bench_output_is_what_the_tally_reads() {
    let out = mpirun(
        3,
        &example("predict_bench"),
        &["10"],
        &[("TREECAST_TIMEOUT", "120")],
        600,
    );
    let text = succeeded(&out, "predict_bench");
    assert!(text.contains("median prediction within 25%"), "{text}");
    assert!(
        text.contains("moved by more than a factor of 1.25 from all their calls: "),
        "{text}"
    );
    assert!(
        text.contains("another grouping of ranks by CPU than the set-up's: "),
        "{text}"
    );
    let off_prefix = "sizes whose calls ran more than a factor of 1.25 off the same broadcasts timed at set-up: ";
    let off_line = text
        .lines()
        .find(|l| l.starts_with(off_prefix))
        .unwrap_or_else(|| panic!("no line of sizes off the set-up's timing in\n{text}"))
        .to_string();
    // One host: the set-up timed the library's broadcasts, so the line lists sizes or none.
    let listed = &off_line[off_prefix.len()..];
    assert!(
        listed == "none" || listed.split(", ").all(|x| x.contains(" B x")),
        "{off_line}"
    );
    // What else ran on the host (`profile::host_load`): none, the hosts shared, or not read
    // where the window from set-up to gather was too short to say.
    let shared_prefix = "hosts shared with other programs while the job ran: ";
    let shared_line = text
        .lines()
        .find(|l| l.starts_with(shared_prefix))
        .unwrap_or_else(|| panic!("no line of hosts shared in\n{text}"))
        .to_string();
    let said = &shared_line[shared_prefix.len()..];
    assert!(
        said == "(not read)" || said.starts_with("none (others at most ") || said.contains(" CPUs, steal "),
        "{shared_line}"
    );
    let dir = std::env::temp_dir().join(format!("treecast-predict-tally-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let job = dir.join("job-1.txt");
    std::fs::write(&job, &text).unwrap();
    let tally_text = python_script("predict_stats_report.py", &job);
    assert!(tally_text.starts_with("1 jobs"), "{tally_text}");
    // One row per size, 1 KiB .. 16 MiB in powers of 4, each read from both columns.
    for k in 0..8 {
        let size = 1024u64 << (2 * k);
        let row = tally_text
            .lines()
            .find(|l| l.split_whitespace().next() == Some(&size.to_string()))
            .unwrap_or_else(|| panic!("no row for {size} B in\n{tally_text}\nfrom\n{text}"));
        assert_eq!(row.matches("/1").count(), 3, "{row}");
    }
    // Every size row ends with the rank the model gets most wrong (a rank of the 3 and its
    // error), measured under mpirun from the job's own calls.
    for k in 0..8 {
        let size = (1024u64 << (2 * k)).to_string();
        let row = text
            .lines()
            .find(|l| l.split_whitespace().next() == Some(size.as_str()))
            .unwrap_or_else(|| panic!("no {size} B row in\n{text}"));
        let t: Vec<&str> = row.split_whitespace().collect();
        let (rank, err) = (t[t.len() - 2], t[t.len() - 1]);
        assert!(rank.parse::<u32>().is_ok_and(|r| r < 3), "{row}");
        assert!(
            err.ends_with('%') && err[..err.len() - 1].parse::<i64>().is_ok(),
            "{row}"
        );
    }
    assert!(tally_text.contains("cells within 25%: together "), "{tally_text}");
    assert!(tally_text.contains("/8, entries "), "{tally_text}");
    assert!(
        tally_text.contains("cells missed from the entries whose calls ran in another grouping"),
        "{tally_text}"
    );
    assert!(
        tally_text.contains(
            "cells missed from the entries whose calls ran more than a factor of 1.25 off the set-up's timing"
        ),
        "{tally_text}"
    );
    // Both what-if lines rescale all 8 sizes of the one job.
    let what_ifs: Vec<&str> = tally_text.lines().filter(|l| l.starts_with("what-if, ")).collect();
    assert_eq!(what_ifs.len(), 2, "{tally_text}");
    assert!(
        what_ifs
            .iter()
            .all(|l| l.contains("/8, goal met ") && (l.ends_with(" 0/1") || l.ends_with(" 1/1"))),
        "{tally_text}"
    );
    // The tally's `off` column counts the sizes that line lists: with 1 KiB listed against
    // none, the 1 KiB row differs in one count, 0 against 1.
    let row_with = |listed: &str| {
        std::fs::write(&job, text.replace(&off_line, &format!("{off_prefix}{listed}"))).unwrap();
        let t = python_script("predict_stats_report.py", &job);
        t.lines()
            .find(|l| l.split_whitespace().next() == Some("1024"))
            .unwrap_or_else(|| panic!("no 1 KiB row in\n{t}"))
            .to_string()
    };
    let (none, listed) = (row_with("none"), row_with("1024 B x1.40"));
    let changed: Vec<(&str, &str)> = none
        .split_whitespace()
        .zip(listed.split_whitespace())
        .filter(|(a, b)| a != b)
        .collect();
    assert_eq!(changed, [("0", "1")], "{none}\n{listed}");
    // The tally takes each cell's verdict from the benchmark (decided on the exact error), not
    // from the rounded percentage: flipping the 1 KiB row's entries verdict (its second
    // yes/no; the worst-predicted rank follows it) flips its count.
    let (verdict, flipped) = {
        let row = text
            .lines()
            .find(|l| l.split_whitespace().next() == Some("1024"))
            .expect("a 1 KiB row");
        let mut tokens: Vec<&str> = row.split_whitespace().collect();
        let at = tokens
            .iter()
            .enumerate()
            .filter(|(_, t)| **t == "yes" || **t == "no")
            .map(|(i, _)| i)
            .nth(1)
            .unwrap_or_else(|| panic!("no entries verdict in {row}"));
        let was = tokens[at] == "yes";
        tokens[at] = if was { "no" } else { "yes" };
        (was, text.replacen(row, &format!("   {}", tokens.join("  ")), 1))
    };
    std::fs::write(&job, &flipped).unwrap();
    let tally_text = python_script("predict_stats_report.py", &job);
    let row = tally_text
        .lines()
        .find(|l| l.split_whitespace().next() == Some("1024"))
        .unwrap_or_else(|| panic!("no 1 KiB row in\n{tally_text}"));
    // Counts read "k/1": together, entries, best constant.
    let entries = row
        .split_whitespace()
        .filter(|t| t.ends_with("/1"))
        .nth(1)
        .unwrap_or_default();
    let expected = if verdict { "0/1" } else { "1/1" };
    assert_eq!(entries, expected, "{row}");
    // The tally counts a job whose hosts the profile found shared, and only such a job.
    let shared_with = |said: &str| {
        std::fs::write(&job, text.replace(&shared_line, &format!("{shared_prefix}{said}"))).unwrap();
        let t = python_script("predict_stats_report.py", &job);
        let line = t
            .lines()
            .find(|l| l.starts_with("jobs whose hosts the profile found shared"))
            .unwrap_or_else(|| panic!("no line of shared jobs in\n{t}"))
            .to_string();
        line
    };
    let (alone, shared) = (
        shared_with("none (others at most 0.01 CPU)"),
        shared_with("vm (0.97 of 2 CPUs, steal 0.00)"),
    );
    assert!(alone.contains("(at least 0.2 CPU): 0/1, "), "{alone}");
    assert!(shared.contains("(at least 0.2 CPU): 1/1, "), "{shared}");
    assert!(shared.ends_with("goal met in the other jobs: 0/0"), "{shared}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The tally's what-if lines rescale each size's prediction from the entries by the job's
/// other sizes, or by its neighbouring sizes (the median of their measured / predicted): a job
/// predicted twice too slow at every size is put within 25% everywhere, one whose sizes are off
/// by different factors is not, at the size that differs.
#[test]
fn the_tally_rescales_each_size_by_the_jobs_other_sizes() {
    let dir = std::env::temp_dir().join(format!("treecast-rescaled-tally-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let job = dir.join("job-1.txt");
    let text = |predicted: &[f64]| {
        let row = |size: u64, predicted: f64| {
            let err = format!("{:+.0}%", (predicted / 10.0 - 1.0) * 100.0);
            format!("{size:>10}    200           10.0  {predicted:>13.1}  {err:>8}  no               64           10.0  {predicted:>13.1}  {err:>8}  no\n")
        };
        let rows: String = predicted
            .iter()
            .enumerate()
            .map(|(k, &p)| row(1024 << (2 * k), p))
            .collect();
        format!("{rows}median prediction within 25% of the measured median, 1 KiB .. 16 MiB: NOT met (all ranks entering together), NOT met (each call from its ranks' entries)\n")
    };
    let what_if = |t: &str| {
        t.lines()
            .find(|l| l.starts_with("what-if, each size's entries prediction rescaled"))
            .unwrap_or_else(|| panic!("no what-if line in\n{t}"))
            .to_string()
    };
    std::fs::write(&job, text(&[20.0, 20.0, 20.0])).unwrap();
    let line = what_if(&python_script("predict_stats_report.py", &job));
    assert!(line.ends_with("cells within 25% 3/3, goal met 1/1"), "{line}");
    // 16 KiB predicted 3x: scaled by the others' 0.5 it reads +50%; 1 KiB, scaled by the
    // median of 0.5 and 1/3, -17%.
    std::fs::write(&job, text(&[20.0, 20.0, 30.0])).unwrap();
    let line = what_if(&python_script("predict_stats_report.py", &job));
    assert!(line.ends_with("cells within 25% 2/3, goal met 0/1"), "{line}");
    // Each size is left out of its own factor: 20 and 28 us against 10 scale by the other's
    // 0.36 and 0.5 (-29%, +40%), where the median of both (0.43) would put both within.
    std::fs::write(&job, text(&[20.0, 28.0])).unwrap();
    let line = what_if(&python_script("predict_stats_report.py", &job));
    assert!(line.ends_with("cells within 25% 0/2, goal met 0/1"), "{line}");
    // Two small sizes predicted 2x and two large 3.2x: the job's other sizes fit none of them;
    // the neighbours fit all but 16 KiB, whose smaller neighbour is of the other pair.
    std::fs::write(&job, text(&[20.0, 20.0, 32.0, 32.0])).unwrap();
    let tally = python_script("predict_stats_report.py", &job);
    assert!(
        what_if(&tally).ends_with("cells within 25% 0/4, goal met 0/1"),
        "{tally}"
    );
    let by_neighbours = tally
        .lines()
        .find(|l| l.starts_with("what-if, each size's entries prediction rescaled by the next smaller and larger"))
        .unwrap_or_else(|| panic!("no neighbours' what-if in\n{tally}"));
    assert!(
        by_neighbours.ends_with("cells within 25% 3/4, goal met 0/1"),
        "{by_neighbours}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `scripts/curve_bumps.py`, which replays the curve's bump rule on logged set-ups for the
/// README: it finds the rule's one reading in a log line of the set-up's format (the 256 KiB
/// bump of `estimate::send_curve`'s unit test) and scales the job's prediction with it.
#[test]
fn curve_bumps_replays_the_rule_on_a_logged_set_up() {
    let dir = std::env::temp_dir().join(format!("treecast-curve-bumps-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = "[INFO treecast::runtime::calibrate] treecast: calibration between ranks 0 and 1 of one host \
        (us): 256 B: send 0.08 one way 0.20 late receive 0.07; 512 B: send 0.32 one way 0.24 late receive \
        0.07 (waits for the receiver); 1024 B: send 0.33 one way 0.28 late receive 0.07 (waits for the \
        receiver); 131072 B: send 11.00 one way 11.10 late receive 10.60 (waits for the receiver); 262144 \
        B: send 21.00 one way 21.10 late receive 33.70 (waits for the receiver); 524288 B: send 40.30 one \
        way 40.45 late receive 40.65 (waits for the receiver); 0.41 per send issued\n";
    std::fs::write(dir.join("job-1.err"), log).unwrap();
    let row = "    262144    200           19.5           33.7      +73%  no               64           19.5           33.7      +73%  no\n";
    std::fs::write(dir.join("job-1.txt"), row).unwrap();
    let text = python_script("curve_bumps.py", &dir.join("job-1.err"));
    assert!(
        text.contains("262144 B late receive 33.70 -> 21.20 us; calls 19.5 us, predicted 33.7 (+73%) -> 21.2 (+9%)"),
        "{text}"
    );
    // Only that reading: 512 B's send is the first that waits, a step.
    assert_eq!(text.matches(" -> ").count(), 2, "{text}");
    assert!(text.contains("1 set-ups read"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// What `python3 scripts/NAME FILE` printed, once it has succeeded.
fn python_script(name: &str, file: &std::path::Path) -> String {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scripts")
        .join(name);
    let out = std::process::Command::new("python3")
        .arg(&script)
        .arg(file)
        .output()
        .expect("python3 runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{name}: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// `mpi-examples/NAME.c` built with mpicc (warnings as errors) into the target directory.
fn build_c_example(name: &str) -> std::path::PathBuf {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let exe = common::target_dir().join(format!("{name}_test"));
    let status = std::process::Command::new(common::mpicc())
        .args(["-O2", "-Wall", "-Werror"])
        .arg(root.join(format!("mpi-examples/{name}.c")))
        .arg("-o")
        .arg(&exe)
        .status()
        .expect("mpicc runs");
    assert!(status.success(), "mpicc failed on mpi-examples/{name}.c");
    exe
}

/// A C example given a bad argument ("0") exits with an error saying `message`, not a run.
fn refuses_bad_arguments(exe: &std::path::Path, message: &str) {
    let bad = mpirun(1, exe, &["0"], &[], 120);
    assert!(!bad.status.success());
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(stderr.contains(message), "{stderr}");
}

/// `mpi-examples/bcast_placement.c`, the plain MPI program the README's account of which ranks
/// share a core names: it builds with mpicc, runs, and prints one row per block of calls with a
/// positive median and the groupings of ranks by CPU, whose counts add up to the block.
#[test]
fn bcast_placement_prints_each_block_with_its_groupings() {
    let exe = build_c_example("bcast_placement");
    let out = mpirun(3, &exe, &["65536", "60", "20"], &[], 300);
    let text = succeeded(&out, "bcast_placement");
    let rows: Vec<&str> = text.lines().filter(|l| l.starts_with("calls ")).collect();
    assert_eq!(rows.len(), 3, "{text}");
    for row in rows {
        let (time, groups) = row
            .split_once(": ")
            .expect("a block")
            .1
            .split_once(" us;")
            .expect("a time");
        assert!(time.parse::<f64>().is_ok_and(|t| t > 0.0), "{row}");
        // "0+3 1+2=50 none=3": groupings (which may hold spaces), each followed by "=count".
        let (mut calls, mut label) = (0u32, Vec::new());
        for token in groups.split_whitespace() {
            match token.split_once('=') {
                Some((last, count)) => {
                    label.push(last);
                    assert!(is_cpu_groups_label(&label.join(" ")), "{label:?} in {row}");
                    calls += count.parse::<u32>().expect("a count");
                    label.clear();
                }
                None => label.push(token),
            }
        }
        assert!(label.is_empty(), "{row}");
        assert_eq!(calls, 20, "{row}");
    }
    refuses_bad_arguments(&exe, "BYTES, CALLS and BLOCK must be positive");
}

/// `mpi-examples/bcast_windows.c`, the plain MPI program the README's account of one-host
/// predictions names (how steady the library's own broadcast is within a job): it builds with
/// mpicc, runs, and prints one row per size with one positive median per window and the
/// spread between them.
#[test]
fn bcast_windows_prints_each_size_and_window() {
    let exe = build_c_example("bcast_windows");
    let out = mpirun(2, &exe, &["3", "5"], &[], 300);
    let text = succeeded(&out, "bcast_windows");
    for k in 0..8 {
        let size = 1024u64 << (2 * k);
        let row = text
            .lines()
            .find(|l| l.split_whitespace().next() == Some(&size.to_string()))
            .unwrap_or_else(|| panic!("no row for {size} B in\n{text}"));
        let (windows, spread) = row
            .split_once(':')
            .expect("row has windows")
            .1
            .split_once("; spread ")
            .expect("spread");
        let medians: Vec<f64> = windows
            .split_whitespace()
            .map(|w| w.parse().expect("a number"))
            .collect();
        assert_eq!(medians.len(), 3, "{row}");
        assert!(medians.iter().all(|&m| m > 0.0), "{row}");
        let spread: f64 = spread.trim_end_matches('x').parse().expect("spread number");
        let lo = medians.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = medians.iter().copied().fold(0.0, f64::max);
        assert!((spread - hi / lo).abs() <= 0.01 + 0.05 * spread, "{row}");
    }
    assert!(
        text.contains("sizes whose windows differ by more than 1.25x: "),
        "{text}"
    );
    refuses_bad_arguments(&exe, "WINDOWS and CALLS must be positive");
}

/// The standard output of a job that must have succeeded (`what` names it in the failure,
/// with both outputs).
fn succeeded(out: &std::process::Output, what: &str) -> String {
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what}: {:?}\n{text}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    text
}
