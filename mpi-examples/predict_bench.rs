//! How well a profile's predictions match what the job measures, per message size: the
//! benchmark of issue 23's calibrated predictions.
//!
//! ```text
//! cargo build --release --example predict_bench
//! mpirun -np 4 --oversubscribe target/release/examples/predict_bench [CALLS=200] [--sizes B,B,..] [--root R] [--fresh] [--interleave]
//! ```
//!
//! Every rank makes `topo_bcast` calls from one call site, each after a barrier (so the ranks
//! enter as nearly together as they can, as the headline prediction assumes), of 1 KiB, 4 KiB,
//! ... 16 MiB (powers of 4, the sizes the one-host set-up times; `--sizes` for others, at most
//! one per power-of-two size class) from root 0 (`--root`), up to `CALLS` per size, fewer for
//! the largest so that each size moves at most 256 MiB, of written data, with profiling on and
//! every call timed (`TREECAST_PROFILE_TIMING=all`; the profile goes to a temporary file unless
//! `TREECAST_PROFILE` names one). By default every call of a size comes in a row and sends the
//! same data, as MPI benchmarks make them and as the set-up times the library; a program mixes
//! sizes and broadcasts what it has just computed:
//! - `--fresh`: the root writes its data anew before each call's barrier;
//! - `--interleave`: the sizes in turn, one call of each.
//!
//! After `MPI_Finalize` rank 0 reads the profile and prints, per size class:
//! - the measured median of per-rank call durations, the prediction the profile compares with
//!   it (with the set-up calibration: the median rank's predicted time in the call;
//!   `TREECAST_CALIBRATE=0`: the uncalibrated contention-free completion, as before
//!   calibration existed), the error and whether it is within 25%;
//! - over the calls every rank timed (the latest 64 of the size): their measured median, the
//!   median of the same calls predicted from the times their ranks entered
//!   (`given_entries`), the error and whether it is within 25%;
//! - the rank whose median time in those calls the model gets most wrong, with that error.
//!
//! Then the sizes whose latest calls' median lies more than a factor of 1.25 from all their
//! calls' (the job's own variation, as much as a prediction may be off; the factor is given),
//! the sizes whose calls ran mostly with other ranks sharing a CPU than the set-up's calls of
//! that size (where ranks outnumber cores the scheduler picks which share one, and the same
//! broadcast runs at different speeds by that alone: `treecast::profile::placement`), and one
//! line: `met` or `NOT met` (every size within 25%) for each of the two.

use mpi::traits::*;
use treecast::profile::report::{drift_factor, ProfileReport, GOAL};
use treecast::TopoBcast;

fn main() {
    let own_profile = std::env::var_os("TREECAST_PROFILE").is_none().then(|| {
        let path = std::env::temp_dir().join(format!("treecast-predict-bench-{}.json", std::process::id()));
        // Single-threaded here: MPI is not initialised yet.
        std::env::set_var("TREECAST_PROFILE", &path);
        path
    });
    let profile = std::path::PathBuf::from(std::env::var_os("TREECAST_PROFILE").expect("set above"));
    if std::env::var_os("TREECAST_PROFILE_TIMING").is_none() {
        std::env::set_var("TREECAST_PROFILE_TIMING", "all");
    }
    let args = match Args::parse(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) => {
            eprintln!(
                "predict_bench: {e}\nusage: predict_bench [CALLS] [--sizes B,B,..] [--root R] [--fresh] [--interleave]"
            );
            std::process::exit(2);
        }
    };
    let (sizes, root, fresh) = (args.sizes.clone(), args.root, args.fresh);

    let universe = mpi::initialize().expect("MPI initialisation failed");
    let world = universe.world();
    if root >= world.size() {
        if world.rank() == 0 {
            eprintln!(
                "predict_bench: --root {root} is not a rank of the {} ranks",
                world.size()
            );
        }
        std::process::exit(2);
    }
    // Real data on every rank: a buffer of zeros is the kernel's shared zero page until
    // written, and the root's sends then read one cached page over and over (1 MiB between
    // two ranks of one host measured 39 us from zeros, against 110 us one way in a ping-pong).
    let mut buf: Vec<u8> = (0..*sizes.last().unwrap())
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(world.rank() as u8 + 1))
        .collect();
    let nranks = world.size();
    for (k, bytes) in args.order() {
        if fresh && world.rank() == root {
            let stamp = k as u8;
            buf[..bytes].iter_mut().for_each(|b| *b = b.wrapping_add(stamp) | 1);
        }
        world.barrier();
        if let Err(e) = world.topo_bcast(&mut buf[..bytes], root) {
            eprintln!("rank {}: topo_bcast failed: {e}", world.rank());
            world.abort(1);
        }
    }
    let rank = world.rank();
    drop(universe); // MPI_Finalize: rank 0 writes the profile
    if rank != 0 {
        return;
    }
    let report = match ProfileReport::load(&profile) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("predict_bench: {e}");
            std::process::exit(2);
        }
    };
    if let Some(p) = own_profile {
        let _ = std::fs::remove_file(p);
    }
    let Some((comm, site)) = report
        .communicators
        .iter()
        .flat_map(|c| c.sites.iter().map(move |s| (c, s)))
        .max_by_key(|(_, s)| s.calls)
    else {
        eprintln!("predict_bench: the profile has no call site");
        std::process::exit(2);
    };
    let calibrated = site
        .size_classes
        .iter()
        .any(|c| c.predicted.as_ref().is_some_and(|p| p.rank_median_s.is_some()));
    println!(
        "{nranks} ranks ({}), topo_bcast from root {root} after a barrier{}, predictions {}",
        report.mpi_library,
        match (fresh, args.interleave) {
            (false, false) => "",
            (true, false) => ", the root's data written anew before each call",
            (false, true) => ", the sizes in turn",
            (true, true) => ", the sizes in turn, the root's data written anew before each call",
        },
        if calibrated {
            "calibrated at set-up (median rank's time in the call)"
        } else {
            "uncalibrated (contention-free completion)"
        }
    );
    println!(
        "{:>10} {:>6} {:>14} {:>14} {:>9}  within 25%   {:>6} {:>14} {:>14} {:>9}  within 25%  {:>10}",
        "size",
        "calls",
        "measured us",
        "predicted us",
        "error",
        "calls",
        "measured us",
        "given entries",
        "error",
        "worst rank"
    );
    let mut all = true;
    let mut all_given = true;
    let mut moved = Vec::new();
    let mut placed = Vec::new();
    let mut host_changed = Vec::new();
    for &bytes in &sizes {
        let Some(c) = site
            .size_classes
            .iter()
            .find(|c| c.min_bytes <= bytes as u64 && bytes as u64 <= c.max_bytes)
        else {
            println!("{bytes:>10} (no calls in the profile)");
            all = false;
            continue;
        };
        let measured = c.time.median_s;
        let (pred, err) = match &c.predicted {
            Some(p) => (format!("{:.1}", p.comparable_s() * 1e6), p.error(measured)),
            None => ("-".into(), None),
        };
        let ok = err.is_some_and(|e| e.abs() <= GOAL);
        all &= ok;
        let pct = |e: Option<f64>| e.map_or("-".into(), |e| format!("{:+.0}%", e * 100.0));
        if let Some(g) = c.cpu_groups.as_ref().filter(|g| g.unlike_setup()) {
            placed.push(format!(
                "{bytes} B ({} in {} of {} calls; set-up {})",
                g.most_calls,
                g.most_calls_count,
                g.known_calls,
                g.setup.as_deref().unwrap_or("-")
            ));
        }
        let given = match c.given_entries {
            Some(g) => {
                let ok = g.error.is_some_and(|e| e.abs() <= GOAL);
                all_given &= ok;
                if let Some(drift) = g.moved(measured) {
                    let factor = drift_factor(drift);
                    moved.push(format!("{bytes} B {:+.0}% (x{factor:.2})", drift * 100.0));
                }
                let timed = comm.library_timing.iter().find(|t| t.bytes == bytes as u64);
                if let Some(r) = timed.and_then(|t| t.host_change(g.measured_median_s)) {
                    host_changed.push(format!("{bytes} B x{r:.2}"));
                }
                format!(
                    "{:>6} {:>14.1} {:>14.1} {:>9}  {:<10}  {:>10}",
                    g.calls,
                    g.measured_median_s * 1e6,
                    g.predicted_median_s * 1e6,
                    pct(g.error),
                    if ok { "yes" } else { "no" },
                    g.worst_rank
                        .map_or("-".into(), |(r, e)| format!("{r} {}", pct(Some(e)))),
                )
            }
            None => {
                all_given = false;
                format!("{:>6}", "-")
            }
        };
        println!(
            "{:>10} {:>6} {:>14.1} {:>14} {:>9}  {:<10}   {given}",
            bytes,
            c.calls,
            measured * 1e6,
            pred,
            pct(err),
            if ok { "yes" } else { "no" }
        );
    }
    let listed = |v: &[String]| if v.is_empty() { "none".to_string() } else { v.join(", ") };
    // The job's own variation: where the latest calls' median lies more than a factor of 1.25
    // from all the size's calls' (`treecast report` notes it too).
    println!(
        "sizes whose latest calls (those given entries) moved by more than a factor of 1.25 from all their calls: {}",
        listed(&moved)
    );
    // Where ranks outnumber cores: the sizes whose calls ran mostly with other ranks sharing
    // a CPU than the set-up's calls of that size (`treecast::profile::placement`).
    println!(
        "sizes whose calls ran mostly in another grouping of ranks by CPU than the set-up's: {}",
        listed(&placed)
    );
    // On one host, where the predictions reproduce the library's broadcasts timed at set-up:
    // the sizes whose calls (those given entries) ran more than a factor of 1.25 slower or
    // faster than those did (`LibraryTimingReport::host_change`, measured over set-up).
    println!(
        "sizes whose calls ran more than a factor of 1.25 off the same broadcasts timed at set-up: {}",
        if comm.library_timing.is_empty() {
            "(none timed)".to_string()
        } else {
            listed(&host_changed)
        }
    );
    // What else ran on the ranks' machines while the job did (`treecast::profile::host_load`):
    // a host shared with another program runs the calls at the scheduler's pace.
    let shared: Vec<String> = comm
        .host_load
        .iter()
        .filter(|l| l.shared())
        .map(|l| {
            format!(
                "{} ({:.2} of {} CPUs, steal {:.2})",
                l.hosts_label(),
                l.other_cpus,
                l.cpus,
                l.steal_cpus
            )
        })
        .collect();
    let most = comm
        .host_load
        .iter()
        .map(|l| l.other_cpus.max(l.steal_cpus))
        .fold(0.0, f64::max);
    println!(
        "hosts shared with other programs while the job ran: {}",
        match (shared.is_empty(), comm.host_load.is_empty()) {
            (_, true) => "(not read)".to_string(),
            (true, false) => format!("none (others at most {most:.2} CPU)"),
            (false, false) => shared.join(", "),
        }
    );
    let verdict = |b: bool| if b { "met" } else { "NOT met" };
    let span = match (sizes.first(), sizes.last()) {
        (Some(&a), Some(&b)) if a != b => format!("{} .. {}", bytes_text(a), bytes_text(b)),
        (Some(&a), _) => bytes_text(a),
        _ => String::new(),
    };
    println!(
        "median prediction within 25% of the measured median, {span}: {} (all ranks entering together), {} (each call from its ranks' entries)",
        verdict(all),
        verdict(all_given)
    );
}

/// `1 KiB`, `16 MiB`, `3000 B`: the verdict line's span (whole binary units where exact).
fn bytes_text(b: usize) -> String {
    match b {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    }
}

/// The command line: calls per size, the sizes (default 1 KiB .. 16 MiB in powers of 4) and
/// the root (default 0), and whether the root writes its data anew before each call. Other
/// sizes and roots are how the predictions are checked on inputs the set-up did not time: it
/// times powers of 4 from root 0.
#[derive(Debug, PartialEq)]
struct Args {
    calls: usize,
    sizes: Vec<usize>,
    root: i32,
    fresh: bool,
    interleave: bool,
}

impl Args {
    /// The calls in the order they are made, `(k, bytes)` for the size's `k`-th call: up to
    /// `calls` per size, fewer for the largest so that each size moves at most 256 MiB (at
    /// least 10); every call of a size in a row, or with `interleave` the sizes in turn (a
    /// size whose calls have run out drops out of the turn).
    fn order(&self) -> Vec<(usize, usize)> {
        let per_size: Vec<(usize, usize)> = self
            .sizes
            .iter()
            .map(|&b| (b, self.calls.min((256usize << 20) / b).max(10)))
            .collect();
        if !self.interleave {
            return per_size
                .iter()
                .flat_map(|&(b, n)| (0..n).map(move |k| (k, b)))
                .collect();
        }
        let rounds = per_size.iter().map(|p| p.1).max().unwrap_or(0);
        (0..rounds)
            .flat_map(|k| per_size.iter().filter(move |p| k < p.1).map(move |&(b, _)| (k, b)))
            .collect()
    }

    fn parse(mut it: impl Iterator<Item = String>) -> Result<Args, String> {
        let mut a = Args {
            calls: 200,
            sizes: (0..8).map(|k| 1024usize << (2 * k)).collect(),
            root: 0,
            fresh: false,
            interleave: false,
        };
        let mut positional = false;
        while let Some(arg) = it.next() {
            let mut value = |what: &str| it.next().ok_or_else(|| format!("{what} takes a value"));
            match arg.as_str() {
                "--sizes" => {
                    let list = value("--sizes")?;
                    a.sizes = list
                        .split(',')
                        .map(|x| x.trim().parse::<usize>().ok().filter(|&b| (1..=1 << 26).contains(&b)))
                        .collect::<Option<Vec<usize>>>()
                        .ok_or_else(|| format!("--sizes takes byte counts from 1 to 64 MiB, not {list}"))?;
                    a.sizes.sort_unstable();
                    // The profile's size classes are powers of two: two sizes of one class
                    // would share its row.
                    let class = |b: usize| usize::BITS - b.leading_zeros();
                    if a.sizes.windows(2).any(|w| class(w[0]) == class(w[1])) {
                        return Err(format!("--sizes {list}: two sizes in one power-of-two class"));
                    }
                }
                "--root" => {
                    let v = value("--root")?;
                    a.root = v
                        .parse()
                        .ok()
                        .filter(|&r: &i32| r >= 0)
                        .ok_or_else(|| format!("--root takes a rank, not {v}"))?;
                }
                "--fresh" => a.fresh = true,
                "--interleave" => a.interleave = true,
                x if !positional && !x.starts_with('-') => {
                    a.calls = x
                        .parse::<usize>()
                        .ok()
                        .filter(|&c| c > 0)
                        .ok_or_else(|| format!("CALLS must be a positive number, not {x}"))?;
                    positional = true;
                }
                x => return Err(format!("unknown argument {x}")),
            }
        }
        Ok(a)
    }
}
