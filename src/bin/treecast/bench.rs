//! `treecast bench` (run under mpirun): topo_bcast vs MPI_Bcast, side by side in one run.
//!
//! For each size, iterations alternate MPI_Bcast and topo_bcast on the same buffer so both see
//! the same machine noise. One iteration's time is the slowest rank's (barrier, broadcast,
//! per-rank elapsed, max over ranks); the table reports medians and the ratio topo/MPI.

use crate::CliError;
use mpi::collective::SystemOperation;
use mpi::traits::*;
use serde::Serialize;
use treecast::runtime::config::parse_bytes;
use treecast::TopoBcast;

#[derive(clap::Args)]
pub struct Args {
    /// Smallest message size (bytes; suffixes KiB, MiB accepted).
    #[arg(long, default_value = "8")]
    min: String,
    /// Largest message size.
    #[arg(long, default_value = "16MiB")]
    max: String,
    /// Size multiplier between steps.
    #[arg(long, default_value_t = 4)]
    step: u64,
    /// Root rank; `rotate` cycles the root every iteration.
    #[arg(long, default_value = "0")]
    root: String,
    /// Iterations per size for small messages (fewer for large ones).
    #[arg(long, default_value_t = 200)]
    iters: u64,
    /// Output format.
    #[arg(long, default_value = "text", value_parser = ["text", "json"])]
    format: String,
}

#[derive(Serialize)]
struct Row {
    bytes: u64,
    iterations: u64,
    mpi_bcast_median_us: f64,
    topo_bcast_median_us: f64,
    ratio: f64,
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    }
}

pub fn run(args: Args) -> Result<(), CliError> {
    let min = parse_bytes(&args.min).ok_or_else(|| CliError::Input(format!("--min: bad size '{}'", args.min)))?;
    let max = parse_bytes(&args.max).ok_or_else(|| CliError::Input(format!("--max: bad size '{}'", args.max)))?;
    if min == 0 || max < min || args.step < 2 {
        return Err(CliError::Input("need 0 < --min <= --max and --step >= 2".into()));
    }
    let rotate = args.root == "rotate";
    let fixed_root: i32 = if rotate {
        0
    } else {
        args.root
            .parse()
            .map_err(|_| CliError::Input(format!("--root: expected a rank or 'rotate', got '{}'", args.root)))?
    };
    let universe = mpi::initialize().ok_or_else(|| CliError::Failed("MPI is already initialized".into()))?;
    let world = universe.world();
    let (me, n) = (world.rank(), world.size());
    if fixed_root < 0 || fixed_root >= n {
        return Err(CliError::Input(format!(
            "--root {fixed_root} out of range for {n} ranks"
        )));
    }
    world.topo_init().map_err(|e| CliError::Failed(e.to_string()))?;
    let mut rows = Vec::new();
    let mut size = min;
    while size <= max {
        let iters = (args.iters * 65536 / size.max(65536)).clamp(5, args.iters);
        let warmup = 3.min(iters);
        let mut buf = vec![0u8; size as usize];
        let mut mpi_t = Vec::with_capacity(iters as usize);
        let mut topo_t = Vec::with_capacity(iters as usize);
        for it in 0..(iters + warmup) {
            let root = if rotate { (it % n as u64) as i32 } else { fixed_root };
            if me == root {
                buf.iter_mut().for_each(|b| *b = it as u8);
            }
            world.barrier();
            let t0 = mpi::time();
            world.process_at_rank(root).broadcast_into(&mut buf[..]);
            let t_mpi = mpi::time() - t0;
            world.barrier();
            let t0 = mpi::time();
            world
                .topo_bcast(&mut buf[..], root)
                .map_err(|e| CliError::Failed(e.to_string()))?;
            let t_topo = mpi::time() - t0;
            if buf.first().is_some_and(|&b| b != it as u8) {
                return Err(CliError::Failed(format!("rank {me}: wrong data at {size} bytes")));
            }
            if it >= warmup {
                mpi_t.push(t_mpi);
                topo_t.push(t_topo);
            }
        }
        // Per iteration, the slowest rank's time.
        let mut mpi_max = vec![0.0f64; mpi_t.len()];
        let mut topo_max = vec![0.0f64; topo_t.len()];
        world.all_reduce_into(&mpi_t[..], &mut mpi_max[..], SystemOperation::max());
        world.all_reduce_into(&topo_t[..], &mut topo_max[..], SystemOperation::max());
        let m = median(&mut mpi_max) * 1e6;
        let t = median(&mut topo_max) * 1e6;
        rows.push(Row {
            bytes: size,
            iterations: iters,
            mpi_bcast_median_us: m,
            topo_bcast_median_us: t,
            ratio: t / m,
        });
        size = match size.checked_mul(args.step) {
            Some(s) => s,
            None => break,
        };
    }
    if me == 0 {
        if args.format == "json" {
            let out = serde_json::json!({ "ranks": n, "root": args.root, "rows": rows });
            println!("{}", serde_json::to_string_pretty(&out).expect("json"));
        } else {
            println!("treecast bench: {n} ranks, root {}", args.root);
            println!(
                "{:>12} {:>8} {:>16} {:>16} {:>10}",
                "bytes", "iters", "MPI_Bcast us", "topo_bcast us", "topo/MPI"
            );
            for r in &rows {
                println!(
                    "{:>12} {:>8} {:>16.2} {:>16.2} {:>10.3}",
                    r.bytes, r.iterations, r.mpi_bcast_median_us, r.topo_bcast_median_us, r.ratio
                );
            }
        }
    }
    Ok(())
}
