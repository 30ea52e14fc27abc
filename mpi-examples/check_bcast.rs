//! MPI test program (run under mpirun by `tests/mpi_bcast.rs`): checks `topo_bcast` against
//! `MPI_Bcast` byte for byte, and checks error behaviour.
//!
//! Modes:
//! - `check_bcast match TYPE:COMM:SIZE ...` — for each case and every root, broadcast the same
//!   data with MPI_Bcast and with topo_bcast into identically initialised buffers and compare
//!   the whole buffer memory (padding and gaps included). TYPE: u8, f64, particle (a derived
//!   struct with padding), strided (a vector datatype with gaps). COMM: world, split, dup.
//!   SIZE: bytes (elements = ceil(SIZE / type size)); suffixes KiB, MiB, GiB and `+N` allowed.
//! - `check_bcast bad` — invalid root, negative count, a too-small buffer on one rank (same and
//!   different size class; small unsegmented and 1 MiB segmented plans; C ABI and Rust API):
//!   errors where expected, correct data elsewhere, no write past any rank's count (guard
//!   regions), no hang, and the communicator still works afterwards.
//! - `check_bcast soak N` — N calls with varying roots and sizes; resident memory must not grow.
//! - `check_bcast large BYTES` — one broadcast of BYTES (> 2 GiB) of u8, pattern-checked.
//! - `check_bcast routes library|plan` — `topo_route` on one host under the automatic route
//!   (`library`: settled on the library for every root before any call) or
//!   `TREECAST_ROUTE=plan` (`plan`: unseen until a root's first call, then the plan); then
//!   rounds of broadcasts from each rank in turn with sizes and data changing, compared with
//!   `MPI_Bcast` (a repeat from a new root may take the fast path); an invalid root is an
//!   error.
//! - `check_bcast trial BYTES...` — for each size, broadcasts from rank 0 with new data each
//!   call, compared with `MPI_Bcast`, until `topo_route` says the route settled (at most 300
//!   calls): correct data through a route's trial, whichever plans it alternates (the library,
//!   the planner's segmented plan, its unsegmented one) and after the planner plans the class
//!   with the winner.
//!
//! Prints `CHECK OK ...` lines; exits non-zero on the first failure.

use mpi::datatype::{MutView, UserDatatype};
use mpi::traits::*;
use std::process::exit;
use treecast::plan::{library_plan, size_class};
use treecast::{ErrorKind, Route, RouteState, TopoBcast};

#[derive(Equivalence, Clone, Copy, Default)]
struct Particle {
    id: u32,
    pos: [f64; 3],
    flag: u8,
}

fn parse_size(s: &str) -> u64 {
    let (base, extra) = match s.split_once('+') {
        Some((b, e)) => (b, e.parse::<u64>().expect("bad +N")),
        None => (s, 0),
    };
    treecast::runtime::config::parse_bytes(base).unwrap_or_else(|| panic!("bad size {s}")) + extra
}

/// Deterministic byte pattern for (root, case, position).
fn pattern(seed: u64, i: usize) -> u8 {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (i as u64).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 29;
    (x & 0xff) as u8
}

fn fill(bytes: &mut [u8], seed: u64) {
    for (i, b) in bytes.iter_mut().enumerate() {
        *b = pattern(seed, i);
    }
}

/// Raw bytes of a slice of plain-old-data values (including padding).
fn as_bytes_mut<T>(v: &mut [T]) -> &mut [u8] {
    // SAFETY: every type used here is plain old data; reading padding as bytes is fine for the
    // comparison we make (we wrote every byte ourselves with `fill`).
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr() as *mut u8, std::mem::size_of_val(v)) }
}

fn fail(msg: String) -> ! {
    eprintln!("CHECK FAILED: {msg}");
    exit(1);
}

fn compare(what: &str, ours: &[u8], reference: &[u8]) {
    if ours != reference {
        let first = ours.iter().zip(reference).position(|(a, b)| a != b).unwrap_or(0);
        fail(format!(
            "{what}: topo_bcast differs from MPI_Bcast at byte {first} of {} (ours {:#x}, MPI {:#x})",
            ours.len(),
            ours[first],
            reference[first]
        ));
    }
}

/// One case on one communicator, every root.
/// Reference broadcast with MPI_Bcast. Skipped for empty buffers: Rust's dangling pointer for an
/// empty `Vec<u8>` is `(void*)1`, which is Open MPI's `MPI_IN_PLACE`, so MPI_Bcast rejects it.
fn reference<C: Communicator, B: BufferMut + ?Sized>(comm: &C, root: i32, buf: &mut B) {
    if buf.count() > 0 {
        comm.process_at_rank(root).broadcast_into(buf);
    }
}

fn run_case<C: Communicator>(comm: &C, ty: &str, bytes: u64, seed_base: u64) {
    let n = comm.size();
    let me = comm.rank();
    for root in 0..n {
        let seed = seed_base ^ ((root as u64) << 40);
        let garbage = seed ^ 0xdead_beef;
        let what = format!("{ty} {bytes} B root {root} on {n} ranks (rank {me})");
        match ty {
            "u8" => {
                let count = bytes as usize;
                let mut a = vec![0u8; count];
                fill(&mut a, if me == root { seed } else { garbage });
                let mut b = a.clone();
                reference(comm, root, &mut a[..]);
                comm.topo_bcast(&mut b[..], root)
                    .unwrap_or_else(|e| fail(format!("{what}: {e}")));
                compare(&what, &b, &a);
            }
            "f64" => {
                let count = bytes.div_ceil(8) as usize;
                let mut a = vec![0f64; count];
                fill(as_bytes_mut(&mut a), if me == root { seed } else { garbage });
                let mut b = a.clone();
                reference(comm, root, &mut a[..]);
                comm.topo_bcast(&mut b[..], root)
                    .unwrap_or_else(|e| fail(format!("{what}: {e}")));
                compare(&what, as_bytes_mut(&mut b), as_bytes_mut(&mut a));
            }
            "particle" => {
                let count = bytes.div_ceil(std::mem::size_of::<Particle>() as u64) as usize;
                let mut a = vec![Particle::default(); count];
                fill(as_bytes_mut(&mut a), if me == root { seed } else { garbage });
                let mut b = a.clone();
                reference(comm, root, &mut a[..]);
                comm.topo_bcast(&mut b[..], root)
                    .unwrap_or_else(|e| fail(format!("{what}: {e}")));
                compare(&what, as_bytes_mut(&mut b), as_bytes_mut(&mut a));
            }
            "strided" => {
                // Element: 3 blocks of 2 doubles with stride 4 -> 48 data bytes over an 80-byte
                // extent; consecutive elements follow at the extent.
                let vt = UserDatatype::vector(3, 2, 4, &f64::equivalent_datatype());
                let count = bytes.div_ceil(48) as usize;
                let mut a = vec![0f64; count * 10];
                fill(as_bytes_mut(&mut a), if me == root { seed } else { garbage });
                let mut b = a.clone();
                {
                    // SAFETY: `a` holds `count` elements of the vector type (10 doubles each).
                    let mut va = unsafe { MutView::with_count_and_datatype(&mut a[..], count as i32, &vt) };
                    reference(comm, root, &mut va);
                }
                {
                    // SAFETY: as above.
                    let mut vb = unsafe { MutView::with_count_and_datatype(&mut b[..], count as i32, &vt) };
                    comm.topo_bcast(&mut vb, root)
                        .unwrap_or_else(|e| fail(format!("{what}: {e}")));
                }
                compare(&what, as_bytes_mut(&mut b), as_bytes_mut(&mut a));
            }
            other => fail(format!("unknown type {other}")),
        }
    }
}

fn mode_match(world: &mpi::topology::SimpleCommunicator, cases: &[String]) {
    let me = world.rank();
    for (ci, case) in cases.iter().enumerate() {
        let parts: Vec<&str> = case.split(':').collect();
        if parts.len() != 3 {
            fail(format!("bad case {case}: want TYPE:COMM:SIZE"));
        }
        let (ty, comm_kind, bytes) = (parts[0], parts[1], parse_size(parts[2]));
        let seed = 0x1234_5678 + ci as u64 * 7919;
        match comm_kind {
            "world" => run_case(world, ty, bytes, seed),
            "dup" => {
                let d = world.duplicate();
                run_case(&d, ty, bytes, seed);
            }
            "split" => {
                // Two halves by parity, ranks reversed inside each, so comm ranks differ from
                // world ranks.
                let color = mpi::topology::Color::with_value(me % 2);
                let s = world
                    .split_by_color_with_key(color, -me)
                    .unwrap_or_else(|| fail("split returned no communicator".into()));
                run_case(&s, ty, bytes, seed);
            }
            other => fail(format!("unknown communicator kind {other}")),
        }
        world.barrier();
        if me == 0 {
            println!("CHECK OK match {case} on {} ranks", world.size());
        }
    }
}

/// Ranks that receive through `k` in the plan topo_bcast uses without a network topology
/// (`plan::library_plan` for the size class), when that plan is a tree. `None` for other
/// shapes (scatter + allgather): a rank there can receive from a failed rank before or after
/// forwarding other data, so who learns of a failure depends on timing; the checks then only
/// demand that every rank gets either the right data or an error.
fn descendants(n: i32, root: i32, bytes: u64, k: i32) -> Option<Vec<i32>> {
    let plan = library_plan(
        n as u32,
        root as u32,
        treecast::plan::class_representative(size_class(bytes)),
    );
    let parents = plan.tree_parents()?;
    let set = (0..n)
        .filter(|&r| {
            let mut x = r as u32;
            while x != root as u32 {
                x = parents[x as usize];
                if x == k as u32 {
                    return true;
                }
            }
            false
        })
        .collect();
    Some(set)
}

fn mode_bad(world: &mpi::topology::SimpleCommunicator) {
    let n = world.size();
    let me = world.rank();

    // 1. Invalid root on every rank: MPI_ERR_ROOT everywhere, at once.
    for bad_root in [n, -1, n + 7] {
        let mut buf = vec![0u8; 16];
        match world.topo_bcast(&mut buf[..], bad_root) {
            Err(e) if e.kind == ErrorKind::Root => {}
            other => fail(format!("root {bad_root}: expected a root error, got {other:?}")),
        }
        let code = unsafe {
            treecast::capi::topo_bcast(
                buf.as_mut_ptr() as *mut _,
                16,
                mpi::ffi::RSMPI_UINT8_T,
                bad_root,
                world.as_raw(),
            )
        };
        if code != mpi::ffi::MPI_ERR_ROOT as i32 {
            fail(format!("C ABI root {bad_root}: expected MPI_ERR_ROOT, got {code}"));
        }
    }
    world.barrier();
    if me == 0 {
        println!("CHECK OK bad root");
    }

    // 2. Negative count on every rank (C ABI): MPI_ERR_COUNT everywhere, no hang.
    {
        let mut buf = vec![0u8; 16];
        let code = unsafe {
            treecast::capi::topo_bcast(
                buf.as_mut_ptr() as *mut _,
                -3,
                mpi::ffi::RSMPI_UINT8_T,
                0,
                world.as_raw(),
            )
        };
        if code != mpi::ffi::MPI_ERR_COUNT as i32 {
            fail(format!("negative count: expected MPI_ERR_COUNT, got {code}"));
        }
    }
    world.barrier();

    // 3. Bad arguments on ONE rank through the C ABI, small unsegmented plans: every root, every
    //    victim, every way of being wrong.
    const SMALL: u64 = 5000;
    let every: Vec<(i32, i32)> = (0..n).flat_map(|root| (0..n).map(move |v| (root, v))).collect();
    bad_on_one_rank(world, SMALL, &every, &["negative", "short", "half", "long"], 4096);
    world.barrier();
    if me == 0 {
        println!("CHECK OK bad arguments on one rank ({n} ranks, {SMALL} B)");
    }

    // 4. Too small a buffer on one rank at 1 MiB + 3 B, where the default plan is a segmented
    //    pipeline: "short" keeps the size class, so the victim runs the same pipeline with segment
    //    bounds that disagree with the root's; "half" is a different class, so it joins the
    //    root's plan in error mode. Two roots and every victim keep the job short (each case is
    //    a megabyte through oversubscribed ranks) while still covering the victim at every
    //    depth of the tree. The guard is one default segment, so a segment landing at a wrong
    //    offset past the end would show.
    const LARGE: u64 = (1 << 20) + 3;
    let mut roots = vec![0, n - 1];
    roots.dedup();
    let pairs: Vec<(i32, i32)> = roots
        .iter()
        .flat_map(|&root| (0..n).filter(move |&v| v != root).map(move |v| (root, v)))
        .collect();
    bad_on_one_rank(world, LARGE, &pairs, &["short", "half"], 128 * 1024);
    world.barrier();
    if me == 0 {
        println!("CHECK OK too small a buffer on one rank, segmented plans ({n} ranks, {LARGE} B)");
    }

    // 5. The same through the Rust API.
    bad_rust_api(world);
}

/// Fill a guard region placed right after the elements a rank passes to topo_bcast.
fn guard_fill(guard: &mut [u8], seed: u64) {
    fill(guard, seed ^ 0x6a09_e667_f3bc_c908);
}

/// Fail if anything wrote into the guard region after a rank's `count` elements.
fn guard_check(what: &str, guard: &[u8], seed: u64) {
    let mut expect = vec![0u8; guard.len()];
    guard_fill(&mut expect, seed);
    if let Some(i) = guard.iter().zip(&expect).position(|(a, b)| a != b) {
        fail(format!(
            "{what}: memory past the buffer's count was overwritten (guard byte {i} of {})",
            guard.len()
        ));
    }
}

/// Bad arguments on ONE rank (`victim`) through the C ABI, for each `(root, victim)` in `pairs`
/// and each way in `hows` (negative count, one byte short = same size class, half = another size
/// class, 8 bytes long): that rank gets the matching MPI error, exactly its plan descendants get
/// an error, everyone else gets the data; nobody writes into the `guard` bytes after its count;
/// then the communicator keeps working.
fn bad_on_one_rank(
    world: &mpi::topology::SimpleCommunicator,
    bytes: u64,
    pairs: &[(i32, i32)],
    hows: &[&str],
    guard: usize,
) {
    let n = world.size();
    let me = world.rank();
    for &(root, victim) in pairs {
        for &how in hows {
            if victim == root && how != "negative" {
                continue;
            }
            let seed = 77 + root as u64 * 31 + victim as u64 + bytes;
            let my_count: i32 = if me != victim {
                bytes as i32
            } else {
                match how {
                    "negative" => -1,
                    "short" => bytes as i32 - 1,
                    "half" => bytes as i32 / 2,
                    _ => bytes as i32 + 8,
                }
            };
            // The elements this rank hands over (a negative count hands over none, but the
            // buffer still holds the message so the guard sits where an overrun would go).
            let region = if my_count < 0 {
                bytes as usize
            } else {
                my_count as usize
            };
            let mut buf = vec![0u8; region + guard];
            if me == root {
                fill(&mut buf[..bytes as usize], seed);
            }
            guard_fill(&mut buf[region..], seed);
            let code = unsafe {
                treecast::capi::topo_bcast(
                    buf.as_mut_ptr() as *mut _,
                    my_count,
                    mpi::ffi::RSMPI_UINT8_T,
                    root,
                    world.as_raw(),
                )
            };
            let mut msg = vec![0 as std::os::raw::c_char; 512];
            unsafe { treecast::capi::treecast_last_error(msg.as_mut_ptr(), 512) };
            let msg = unsafe { std::ffi::CStr::from_ptr(msg.as_ptr()) }
                .to_string_lossy()
                .into_owned();
            let what = format!("{bytes} B, root {root}, rank {victim} {how}, at rank {me}");
            guard_check(&what, &buf[region..], seed);
            let downstream = descendants(n, root, bytes, victim);
            if me == victim {
                let want = if how == "negative" {
                    mpi::ffi::MPI_ERR_COUNT
                } else {
                    mpi::ffi::MPI_ERR_TRUNCATE
                };
                if code != want as i32 {
                    fail(format!(
                        "{what}: expected error {want} on the bad rank, got {code} ({msg})"
                    ));
                }
            } else if victim == root || downstream.as_ref().is_some_and(|d| d.contains(&me)) {
                if code == mpi::ffi::MPI_SUCCESS as i32 {
                    fail(format!("{what}: downstream of the bad rank but got success"));
                }
                if !msg.contains("rank") {
                    fail(format!("{what}: error message does not name the rank: {msg}"));
                }
            } else if downstream.is_none() && code != mpi::ffi::MPI_SUCCESS as i32 {
                // Not a tree: an error is allowed anywhere, and must name the failed rank.
                if !msg.contains("rank") {
                    fail(format!("{what}: error message does not name the rank: {msg}"));
                }
            } else {
                if code != mpi::ffi::MPI_SUCCESS as i32 {
                    fail(format!("{what}: not downstream of the bad rank but got {code} ({msg})"));
                }
                let mut expect = vec![0u8; bytes as usize];
                fill(&mut expect, seed);
                compare(&what, &buf[..bytes as usize], &expect);
            }
            // The communicator still works.
            let mut ok = [me as u8; 64];
            world
                .topo_bcast(&mut ok[..], root)
                .unwrap_or_else(|e| fail(format!("{what}: follow-up broadcast failed: {e}")));
            if ok.iter().any(|&x| x != root as u8) {
                fail(format!("{what}: follow-up broadcast delivered wrong data"));
            }
        }
    }
}

/// Too small a buffer on one rank through the Rust API, on a segmented plan: `f64` elements,
/// 1 MiB + 24 B from the last rank, one element short on the non-root rank with the most
/// descendants (so the error has somewhere to travel). That rank must get `Err` of kind
/// `Truncate`, its descendants `Err`, the others `Ok` and the data; no rank may write past its
/// slice; afterwards a correct broadcast succeeds everywhere.
fn bad_rust_api(world: &mpi::topology::SimpleCommunicator) {
    let n = world.size();
    let me = world.rank();
    if n < 2 {
        // One rank has nobody to disagree with: topo_bcast has nothing to move.
        if me == 0 {
            println!("CHECK OK too small a buffer via the Rust API (1 rank: no peer, nothing to check)");
        }
        return;
    }
    const ELEMS: usize = ((1 << 20) + 24) / 8;
    const GUARD_ELEMS: usize = 128 * 1024 / 8;
    let bytes = (ELEMS * 8) as u64;
    let root = n - 1;
    let victim = (0..n)
        .filter(|&r| r != root)
        .max_by_key(|&r| (descendants(n, root, bytes, r).map_or(0, |d| d.len()), -r))
        .expect("n >= 2");
    let downstream = descendants(n, root, bytes, victim);
    let must_fail = |r: i32| downstream.as_ref().is_some_and(|d| d.contains(&r));
    let value = |i: usize| i as f64 * 0.25 + 1.0;
    let guard_value = |i: usize| -(i as f64) - 0.5;
    let count = if me == victim { ELEMS - 1 } else { ELEMS };
    let mut buf = vec![-7.0f64; count + GUARD_ELEMS];
    if me == root {
        buf[..ELEMS].iter_mut().enumerate().for_each(|(i, x)| *x = value(i));
    }
    buf[count..]
        .iter_mut()
        .enumerate()
        .for_each(|(i, x)| *x = guard_value(i));
    let what = format!("Rust API, {bytes} B of f64 from root {root}, rank {victim} one element short, at rank {me}");
    let result = world.topo_bcast(&mut buf[..count], root);
    if let Some(i) = buf[count..].iter().enumerate().position(|(i, &x)| x != guard_value(i)) {
        fail(format!("{what}: element {i} past the slice was overwritten"));
    }
    match result {
        Err(e) if me == victim && e.kind == ErrorKind::Truncate => {}
        other if me == victim => fail(format!("{what}: expected a truncate error, got {other:?}")),
        Err(e) if must_fail(me) || downstream.is_none() => {
            if !e.message.contains("rank") {
                fail(format!("{what}: error message does not name the rank: {e}"));
            }
        }
        Ok(()) if must_fail(me) => fail(format!("{what}: downstream of the bad rank but got Ok")),
        Err(e) => fail(format!("{what}: not downstream of the bad rank but got {e}")),
        Ok(()) => {
            if let Some(i) = (0..ELEMS).find(|&i| buf[i] != value(i)) {
                fail(format!("{what}: element {i} is {} instead of {}", buf[i], value(i)));
            }
        }
    }
    // A correct broadcast of the same size afterwards succeeds with the right data everywhere.
    let mut again = vec![0.0f64; ELEMS];
    if me == root {
        again.iter_mut().enumerate().for_each(|(i, x)| *x = value(i) * 2.0);
    }
    world
        .topo_bcast(&mut again[..], root)
        .unwrap_or_else(|e| fail(format!("{what}: follow-up broadcast failed: {e}")));
    if let Some(i) = (0..ELEMS).find(|&i| again[i] != value(i) * 2.0) {
        fail(format!(
            "{what}: follow-up broadcast delivered wrong data at element {i}"
        ));
    }
    world.barrier();
    if me == 0 {
        println!(
            "CHECK OK too small a buffer via the Rust API (rank {victim} truncated, {} downstream got errors)",
            downstream.as_ref().map_or("its".to_string(), |d| d.len().to_string())
        );
    }
}

fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = s.split_whitespace().nth(1).and_then(|x| x.parse().ok()).unwrap_or(0);
    pages * 4
}

fn mode_soak(world: &mpi::topology::SimpleCommunicator, calls: u64) {
    let n = world.size();
    let me = world.rank();
    let sizes = [1usize, 8, 100, 4096, 65536, 300_000];
    let mut baseline = 0;
    for i in 0..calls {
        if i == calls / 10 {
            baseline = rss_kib();
        }
        let root = ((i * 7) % n as u64) as i32;
        let size = sizes[(i % sizes.len() as u64) as usize];
        let mut buf = vec![0u8; size];
        if me == root {
            buf.iter_mut()
                .enumerate()
                .for_each(|(j, b)| *b = (i as usize + j) as u8);
        }
        world
            .topo_bcast(&mut buf[..], root)
            .unwrap_or_else(|e| fail(format!("soak call {i}: {e}")));
        if buf.iter().enumerate().any(|(j, &b)| b != (i as usize + j) as u8) {
            fail(format!("soak call {i}: wrong data"));
        }
    }
    let end = rss_kib();
    let growth = end.saturating_sub(baseline);
    // After warm-up (plans cached, MPI buffers allocated) memory must stay flat: allow 2 MiB of
    // allocator noise, far below what leaking one request or buffer per call would cost.
    if growth > 2048 {
        fail(format!(
            "rank {me}: resident memory grew by {growth} KiB over {} calls",
            calls - calls / 10
        ));
    }
    world.barrier();
    if me == 0 {
        println!("CHECK OK soak {calls} calls, rank 0 memory growth {growth} KiB after warm-up");
    }
}

/// Communicators made and freed over and over, each broadcasting sizes of several classes in
/// turn from every root: the fast path remembers a call per class of count, and each entry
/// names a communicator's private duplicate (and, profiled, its state). A freed
/// communicator's handle is soon reused by the next one (of another size, every other round:
/// half of the ranks), so an entry surviving the free would send on a freed duplicate or
/// count into a freed state.
fn mode_churn(world: &mpi::topology::SimpleCommunicator, rounds: u64) {
    let me = world.rank();
    let sizes = [8usize, 1000, 1024, 65536];
    for round in 0..rounds {
        let comm: mpi::topology::SimpleCommunicator = if round % 2 == 0 {
            world.duplicate()
        } else {
            let color = mpi::topology::Color::with_value(me % 2);
            world
                .split_by_color(color)
                .unwrap_or_else(|| fail("split gave no communicator".into()))
        };
        let n = comm.size();
        for i in 0..64u64 {
            let root = (i % n as u64) as i32;
            let size = sizes[(i % sizes.len() as u64) as usize];
            let stamp = |b: &mut [u8]| {
                b.iter_mut()
                    .enumerate()
                    .for_each(|(j, x)| *x = (round as usize * 13 + i as usize * 7 + j) as u8)
            };
            let mut ours = vec![0u8; size];
            let mut theirs = vec![0u8; size];
            if comm.rank() == root {
                stamp(&mut ours);
                stamp(&mut theirs);
            }
            comm.topo_bcast(&mut ours[..], root)
                .unwrap_or_else(|e| fail(format!("churn round {round}, call {i}, {size} B from {root}: {e}")));
            reference(&comm, root, &mut theirs[..]);
            compare(
                &format!("churn round {round}, call {i}, {size} B from {root}"),
                &ours,
                &theirs,
            );
        }
        drop(comm);
    }
    world.barrier();
    if me == 0 {
        println!("CHECK OK churn {rounds} rounds");
    }
}

fn mode_large(world: &mpi::topology::SimpleCommunicator, bytes: u64) {
    let me = world.rank();
    let mut buf = vec![0u8; bytes as usize];
    if me == 0 {
        fill(&mut buf, 42);
    }
    world
        .topo_bcast(&mut buf[..], 0)
        .unwrap_or_else(|e| fail(format!("large: {e}")));
    if me != 0 {
        if let Some(i) = buf.iter().enumerate().position(|(i, &b)| b != pattern(42, i)) {
            fail(format!("large: rank {me} wrong byte at {i}"));
        }
    }
    world.barrier();
    if me == 0 {
        println!("CHECK OK large {bytes} bytes");
    }
}

/// Calls from four sites with known counts and sizes, on world, a split communicator that is
/// freed before finalize, and a duplicate that is never freed; `tests/profile.rs` checks the
/// profile file's counts and byte totals against these numbers.
fn mode_profile(world: &mpi::topology::SimpleCommunicator) {
    let n = world.size();
    let me = world.rank();
    let mut buf = vec![0u8; 4096];
    for i in 0..37usize {
        let len = i * 13 % 1000 + 1;
        let root = (i as i32) % n;
        world
            .topo_bcast(&mut buf[..len], root)
            .unwrap_or_else(|e| fail(format!("site A: {e}"))); // site A
    }
    for _ in 0..11 {
        world
            .topo_bcast(&mut buf[..4096], 0)
            .unwrap_or_else(|e| fail(format!("site B: {e}"))); // site B
    }
    // Site G: every rank in turn, twice, one size. After the first call the fast path serves
    // the other roots (on one host every root takes the library's route), and the profile
    // must still list each root's route.
    for i in 0..2 * n {
        world
            .topo_bcast(&mut buf[..2048], i % n)
            .unwrap_or_else(|e| fail(format!("site G: {e}"))); // site G
    }
    {
        let split = world
            .split_by_color(mpi::topology::Color::with_value(me % 2))
            .unwrap_or_else(|| fail("split failed".into()));
        for _ in 0..5 {
            split
                .topo_bcast(&mut buf[..100], 0)
                .unwrap_or_else(|e| fail(format!("site C: {e}"))); // site C
        }
    } // split freed here: its profile is gathered inside MPI_Comm_free
    let dup = world.duplicate();
    for _ in 0..3 {
        dup.topo_bcast(&mut buf[..8], 0)
            .unwrap_or_else(|e| fail(format!("site D: {e}"))); // site D
    }
    std::mem::forget(dup); // never freed: gathered at MPI_Finalize
    world.barrier();
    if me == 0 {
        println!("CHECK OK profile calls made");
    }
}

/// One site of 30 empty broadcasts, one rank arriving 2 ms late to each: the library's
/// `MPI_Bcast` returns at once for 0 B, and `tests/profile.rs` checks that the profile predicts
/// them to move nothing (no rank waiting for the late one) and gives no relative error.
fn mode_empty(world: &mpi::topology::SimpleCommunicator) {
    let late = world.size() - 1;
    let mut buf = [0u8; 0];
    for _ in 0..30 {
        world.barrier();
        if world.rank() == late {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        world
            .topo_bcast(&mut buf[..], 0)
            .unwrap_or_else(|e| fail(format!("empty: {e}")));
    }
    world.barrier();
    if world.rank() == 0 {
        println!("CHECK OK empty calls made");
    }
}

/// Two sites of 40 broadcasts of 1 KiB: at site E (from rank 1, so a root other than 0 is
/// predicted) the last rank sleeps 20 ms before every call (it arrives last, the others wait),
/// at site F (from rank 0) every call follows a barrier; `tests/profile.rs` checks that the
/// profile tells load imbalance from transfer time, and that the late rank's predicted
/// completion follows its entry. 20 ms, not 3: with a core kept busy, four ranks on the other
/// wait for it in slices of milliseconds, and a 3 ms imbalance drowned in that.
fn mode_imbalance(world: &mpi::topology::SimpleCommunicator) {
    let n = world.size();
    let me = world.rank();
    let mut buf = vec![0u8; 1024];
    for _ in 0..40 {
        if me == n - 1 {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        world
            .topo_bcast(&mut buf, 1 % n)
            .unwrap_or_else(|e| fail(format!("site E: {e}"))); // site E
    }
    for _ in 0..40 {
        world.barrier();
        world
            .topo_bcast(&mut buf, 0)
            .unwrap_or_else(|e| fail(format!("site F: {e}"))); // site F
    }
    world.barrier();
    if me == 0 {
        println!("CHECK OK imbalance calls made");
    }
}

fn mode_routes(world: &mpi::topology::SimpleCommunicator, expect: &str) {
    let n = world.size();
    let me = world.rank();
    world.topo_init().unwrap_or_else(|e| fail(format!("topo_init: {e}")));
    let state = |root: i32, bytes: u64| {
        world
            .topo_route(root, bytes)
            .unwrap_or_else(|e| fail(format!("topo_route({root}, {bytes}): {e}")))
    };
    let sizes = [8u64, 1024, 4096, 65536];
    for (round, &bytes) in sizes.iter().chain(sizes.iter()).enumerate() {
        for root in 0..n {
            let before = state(root, bytes);
            let want_before = match (expect, round < sizes.len()) {
                ("library", _) => RouteState::Settled(Route::Library),
                (_, true) => RouteState::Unseen,
                _ => RouteState::Settled(Route::Plan),
            };
            if before != want_before {
                fail(format!(
                    "root {root}, {bytes} B, round {round}: route {before:?} before the call, want {want_before:?}"
                ));
            }
            let fill = |b: &mut Vec<u8>| {
                for (i, x) in b.iter_mut().enumerate() {
                    *x = (i as u64 * 31 + root as u64 * 7 + round as u64) as u8;
                }
            };
            let mut ours = vec![0u8; bytes as usize];
            let mut theirs = vec![0u8; bytes as usize];
            if me == root {
                fill(&mut ours);
                fill(&mut theirs);
            }
            world
                .topo_bcast(&mut ours, root)
                .unwrap_or_else(|e| fail(format!("root {root}, {bytes} B: {e}")));
            reference(world, root, &mut theirs[..]);
            compare(
                &format!("routes: root {root}, {bytes} B, round {round}"),
                &ours,
                &theirs,
            );
            let after = state(root, bytes);
            let want_after = RouteState::Settled(if expect == "library" {
                Route::Library
            } else {
                Route::Plan
            });
            if after != want_after {
                fail(format!(
                    "root {root}, {bytes} B: route {after:?} after the call, want {want_after:?}"
                ));
            }
        }
    }
    match world.topo_route(n, 8) {
        Err(e) if e.kind == ErrorKind::Root => {}
        other => fail(format!(
            "topo_route with root {n} of {n} ranks: expected a root error, got {other:?}"
        )),
    }
    world.barrier();
    if me == 0 {
        println!("CHECK OK routes {expect} on {n} ranks");
    }
}

fn mode_trial(world: &mpi::topology::SimpleCommunicator, sizes: &[String]) {
    let me = world.rank();
    for size in sizes {
        let bytes = parse_size(size);
        let mut calls = 0u32;
        // Settled, then a few calls more: the first calls of the plan the class settled on.
        let mut after = 0;
        while after < 3 {
            if calls == 300 {
                fail(format!("trial: {bytes} B not settled after {calls} calls"));
            }
            let fill = |b: &mut Vec<u8>| {
                for (i, x) in b.iter_mut().enumerate() {
                    *x = (i as u64 * 131 + calls as u64 * 17) as u8;
                }
            };
            let mut ours = vec![0u8; bytes as usize];
            let mut theirs = vec![0u8; bytes as usize];
            if me == 0 {
                fill(&mut ours);
                fill(&mut theirs);
            }
            world
                .topo_bcast(&mut ours, 0)
                .unwrap_or_else(|e| fail(format!("trial: {bytes} B, call {calls}: {e}")));
            reference(world, 0, &mut theirs[..]);
            compare(&format!("trial: {bytes} B, call {calls}"), &ours, &theirs);
            calls += 1;
            match world.topo_route(0, bytes) {
                Ok(RouteState::Settled(_)) => after += 1,
                Ok(_) => {}
                Err(e) => fail(format!("topo_route(0, {bytes}): {e}")),
            }
        }
        if me == 0 {
            println!("CHECK OK trial {bytes} B settled after {} calls", calls - 3);
        }
    }
}

fn main() {
    let universe = mpi::initialize().unwrap_or_else(|| fail("MPI init failed".into()));
    let world = universe.world();
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("match") => mode_match(&world, &args[1..]),
        Some("bad") => mode_bad(&world),
        Some("soak") => mode_soak(&world, args.get(1).and_then(|s| s.parse().ok()).unwrap_or(10_000)),
        Some("churn") => mode_churn(&world, args.get(1).and_then(|s| s.parse().ok()).unwrap_or(40)),
        Some("profile") => mode_profile(&world),
        Some("imbalance") => mode_imbalance(&world),
        Some("empty") => mode_empty(&world),
        Some("trial") => mode_trial(&world, &args[1..]),
        Some("routes") => mode_routes(&world, args.get(1).map(String::as_str).unwrap_or("library")),
        Some("large") => mode_large(&world, parse_size(args.get(1).map(String::as_str).unwrap_or("2GiB+5"))),
        _ => fail("usage: check_bcast match CASE... | bad | soak N | churn ROUNDS | large BYTES".into()),
    }
}
