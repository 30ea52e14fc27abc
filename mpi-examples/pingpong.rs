//! MPI ping-pong RTT matrix between hosts (run under mpirun, e.g. on the emulated cluster of
//! `scripts/emucluster.sh`): a sanity check that the network looks like the tree it should be
//! (same-switch RTT < cross-switch RTT).
//!
//! `pingpong [--rounds R] [--iters K] [--bytes B]`
//!
//! Hosts are told apart by `MPI_Get_processor_name`; the lowest rank on each host is its leader
//! and only leaders measure. Pairs are measured one at a time, `R` rounds over all pairs
//! (default 3), `K` timed round trips of `B` bytes per pair and round (defaults 20 and 8) after 3
//! untimed ones (which also open the TCP connection); a pair's value is the minimum over all its
//! round trips, so a pair descheduled in one round is rescued by another.
//!
//! While a pair measures, every other rank waits *politely* for the end of the pair's turn in
//! `MPI_Ibarrier` + `MPI_Test` + `nanosleep(50 us)`: with Open MPI's default busy-polling the
//! bystanders steal the CPU from the pair on a small machine and a few pairs read milliseconds
//! instead of tens of microseconds (docs/design.md §5.3).
//!
//! Rank 0 prints the RTT matrix CSV in microseconds (`host,<name>,...`, then `<name>,v,...`;
//! hosts sorted by name; diagonal 0) on standard output; progress goes to standard error.

use mpi::collective::SystemOperation;
use mpi::traits::*;
use std::process::exit;
use std::time::Duration;

/// `MPI_MAX_PROCESSOR_NAME` in Open MPI and MPICH; names are exchanged as fixed-size records.
const NAME_LEN: usize = 256;

struct Options {
    rounds: usize,
    iters: usize,
    bytes: usize,
    spin: bool,
    no_pin: bool,
}

fn fail(msg: &str) -> ! {
    eprintln!("pingpong: {msg}");
    exit(2);
}

fn parse_args() -> Options {
    let mut o = Options {
        rounds: 10,
        iters: 10,
        bytes: 8,
        spin: false,
        no_pin: false,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < args.len() {
        let value = |i: usize| -> usize {
            args.get(i + 1)
                .and_then(|v| v.parse().ok())
                .filter(|&v| v > 0)
                .unwrap_or_else(|| fail(&format!("{} needs a number > 0", args[i])))
        };
        match args[i].as_str() {
            "--rounds" => o.rounds = value(i),
            "--iters" => o.iters = value(i),
            "--bytes" => o.bytes = value(i),
            "--no-pin" => {
                o.no_pin = true;
                i += 1;
                continue;
            }
            "--spin" => {
                o.spin = true;
                i += 1;
                continue;
            }
            other => fail(&format!(
                "unknown argument '{other}'; usage: pingpong [--rounds R] [--iters K] [--bytes B]"
            )),
        }
        i += 2;
    }
    o
}

/// Wait for all ranks without spinning: the CPU goes to whoever is measuring.
fn polite_barrier<C: Communicator>(comm: &C) {
    let mut req = comm.immediate_barrier();
    loop {
        match req.test() {
            Ok(_) => return,
            Err(r) => {
                req = r;
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    }
}

/// Receive into `buf` from `p`, spinning on `MPI_Test` but yielding the CPU between tests, so
/// that a peer sharing this core gets to run at once (a pure busy-poll holds the core until the
/// scheduler preempts it, which turns a 15 us round trip into hundreds of microseconds).
fn receive_yielding<P: Source>(p: &P, buf: &mut [u8], spin: bool) {
    if spin {
        p.receive_into(buf);
        return;
    }
    mpi::request::scope(|sc| {
        let mut req = p.immediate_receive_into(sc, buf);
        loop {
            match req.test() {
                Ok(_) => return,
                Err(r) => {
                    req = r;
                    // SAFETY: sched_yield has no preconditions.
                    unsafe { libc::sched_yield() };
                }
            }
        }
    });
}

/// Minimum round-trip time (seconds) of `iters` timed exchanges, measured at the initiator;
/// `None` at the responder.
fn ping_pong<C: Communicator>(comm: &C, peer: i32, initiator: bool, opts: &Options, buf: &mut [u8]) -> Option<f64> {
    const WARMUP: usize = 3;
    let p = comm.process_at_rank(peer);
    let _pin = (!opts.no_pin).then(|| treecast::runtime::pin::Pinned::new(if initiator { 0 } else { 1 }));
    let mut best = f64::INFINITY;
    for it in 0..(WARMUP + opts.iters) {
        if initiator {
            let t0 = mpi::time();
            p.send(&buf[..]);
            receive_yielding(&p, buf, opts.spin);
            let dt = mpi::time() - t0;
            if it >= WARMUP {
                best = best.min(dt);
            }
        } else {
            receive_yielding(&p, buf, opts.spin);
            p.send(&buf[..]);
        }
    }
    initiator.then_some(best)
}

fn main() {
    let opts = parse_args();
    let universe = mpi::initialize().unwrap_or_else(|| fail("MPI init failed"));
    let world = universe.world();
    let (me, n) = (world.rank(), world.size());

    let name = mpi::environment::processor_name().unwrap_or_else(|_| fail("processor name is not UTF-8"));
    let mut mine = [0u8; NAME_LEN];
    let nb = name.len().min(NAME_LEN);
    mine[..nb].copy_from_slice(&name.as_bytes()[..nb]);
    let mut all = vec![0u8; NAME_LEN * n as usize];
    world.all_gather_into(&mine[..], &mut all[..]);
    let names: Vec<String> = all
        .chunks(NAME_LEN)
        .map(|c| String::from_utf8_lossy(&c[..c.iter().position(|&b| b == 0).unwrap_or(NAME_LEN)]).into_owned())
        .collect();

    // Hosts sorted by name; the leader of a host is its lowest rank.
    let mut hosts: Vec<String> = names.clone();
    hosts.sort();
    hosts.dedup();
    let h = hosts.len();
    let leaders: Vec<i32> = hosts
        .iter()
        .map(|hn| names.iter().position(|x| x == hn).expect("host of some rank") as i32)
        .collect();
    if me == 0 {
        eprintln!(
            "pingpong: {n} ranks on {h} hosts, {} rounds x {} round trips of {} B per pair",
            opts.rounds, opts.iters, opts.bytes
        );
    }

    // rtt[i * h + j] (seconds) for the pairs this rank initiated; +inf elsewhere.
    let mut rtt = vec![f64::INFINITY; h * h];
    let mut buf = vec![0u8; opts.bytes];
    for _ in 0..opts.rounds {
        for i in 0..h {
            for j in (i + 1)..h {
                let (a, b) = (leaders[i], leaders[j]);
                if me == a || me == b {
                    if let Some(t) = ping_pong(&world, if me == a { b } else { a }, me == a, &opts, &mut buf) {
                        rtt[i * h + j] = rtt[i * h + j].min(t);
                    }
                }
                polite_barrier(&world);
            }
        }
    }

    let mut total = vec![f64::INFINITY; h * h];
    let root = world.process_at_rank(0);
    if me == 0 {
        root.reduce_into_root(&rtt[..], &mut total[..], SystemOperation::min());
        let mut out = String::from("host");
        for hn in &hosts {
            out.push(',');
            out.push_str(hn);
        }
        out.push('\n');
        for i in 0..h {
            out.push_str(&hosts[i]);
            for j in 0..h {
                let v = match i.cmp(&j) {
                    std::cmp::Ordering::Equal => 0.0,
                    std::cmp::Ordering::Less => total[i * h + j],
                    std::cmp::Ordering::Greater => total[j * h + i],
                };
                out.push_str(&format!(",{:.2}", v * 1e6));
            }
            out.push('\n');
        }
        print!("{out}");
    } else {
        root.reduce_into(&rtt[..], SystemOperation::min());
    }
}
