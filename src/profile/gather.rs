//! Gathering profiles to rank 0 and writing the file (see the module docs of `profile`).

use super::clock::Line;
use super::offset::{ClockMap, Offset};
use super::report::{
    class_bytes, CommReport, Compare, ProfileReport, RankClock, RankTiming, SampleCall, SharedCpus, SiteReport,
    SizeClassReport, TimeStats, PROFILE_VERSION,
};
use super::ProfiledComm;
use super::{sites, Histogram, SiteStats};
use crate::exec::raw;
use mpi::ffi::MPI_Comm;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::os::raw::c_int;
use std::sync::Mutex;

/// Reports of communicators already gathered on this rank (it was their rank 0).
static FINISHED: Mutex<Vec<CommReport>> = Mutex::new(Vec::new());

/// What one rank contributes to its communicator's report.
#[derive(Serialize, Deserialize)]
struct RankWire {
    rank: u32,
    world_rank: i32,
    host: String,
    /// This rank's offsets to rank 0's clock, when profiling started and now.
    setup_offset: Option<Offset>,
    end_offset: Offset,
    clock: RankClock,
    sites: Vec<(String, SiteStats)>,
    /// The kernel this rank runs on (a hash of its boot id; 0 unknown) and the CPUs it may
    /// use (`host::cpu_mask`): who shares CPUs with whom.
    boot_id: u64,
    cpus: Vec<u64>,
    /// This rank's CPU readings at set-up and at the gather (`host_load`), where both read.
    load: Option<(super::host_load::CpuSample, super::host_load::CpuSample)>,
}

fn processor_name() -> String {
    let buf = raw::processor_name();
    let len = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..len]).into_owned()
}

fn world_rank() -> i32 {
    raw::comm_rank(raw::comm_world()).unwrap_or(-1)
}

/// Cristian's algorithm against rank 0: a few ping-pongs, each of which bounds the offset; the
/// offset is where all their bounds meet, with half that interval as its error bound
/// ([`from_round_trips`](super::offset::from_round_trips); 0 offset and error on rank 0). With
/// it, every rank's [`KernelStamp`](super::offset::KernelStamp), by which rank 0 aligns the
/// ranks of its own kernel exactly when the profile is gathered ([`align_same_kernel`]).
/// Collective over `comm` (blocking point-to-point on our duplicate with a reserved tag): at a
/// communicator's set-up when it is profiled, and again when it is gathered.
pub fn measure_offset(comm: MPI_Comm, rank: u32, size: u32, tag: c_int) -> crate::error::Result<Offset> {
    // Enough rounds that their bounds rarely all stay wide on a loaded node.
    const ROUNDS: usize = 12;
    if rank == 0 {
        for r in 1..size as c_int {
            for _ in 0..ROUNDS {
                let mut ping = [0f64];
                raw::recv(&mut ping, r, tag, comm)?;
                raw::send(&[raw::wtime()], r, tag, comm)?;
            }
        }
        Ok(Offset {
            at_s: raw::wtime(),
            offset_s: 0.0,
            error_s: 0.0,
            kernel: Some(super::offset::kernel_stamp(raw::wtime)),
        })
    } else {
        let mut rounds = Vec::with_capacity(ROUNDS);
        for _ in 0..ROUNDS {
            let t1 = raw::wtime();
            raw::send(&[t1], 0, tag, comm)?;
            let mut t0 = [0f64];
            raw::recv(&mut t0, 0, tag, comm)?;
            rounds.push(super::offset::RoundTrip {
                sent_s: t1,
                reference_s: t0[0],
                received_s: raw::wtime(),
            });
        }
        let measured = super::offset::from_round_trips(&rounds)
            .ok_or_else(|| crate::error::Error::new(crate::error::ErrorKind::Other, "no clock round trips"))?;
        Ok(Offset {
            kernel: Some(super::offset::kernel_stamp(raw::wtime)),
            ..measured
        })
    }
}

impl RankWire {
    /// This rank's times on rank 0's clock.
    fn clock_map(&self) -> ClockMap {
        ClockMap::new(self.setup_offset, self.end_offset)
    }
}

/// Gather variable-size byte blobs to rank 0 of `comm`.
fn gather_bytes(comm: MPI_Comm, rank: u32, size: u32, mine: &[u8]) -> crate::error::Result<Vec<Vec<u8>>> {
    let mut lens = vec![0i64; if rank == 0 { size as usize } else { 0 }];
    // SAFETY (both gathers): collective on our duplicate, every buffer kept alive until the
    // request completes right after.
    let mut req = unsafe { raw::igather(&[mine.len() as i64], &mut lens, 0, comm)? };
    raw::wait_all(std::slice::from_mut(&mut req))?;
    let counts: Vec<c_int> = lens.iter().map(|&l| l as c_int).collect();
    let mut displs = Vec::with_capacity(counts.len());
    let mut total = 0usize;
    for &c in &counts {
        displs.push(total as c_int);
        total += c as usize;
    }
    // An empty Vec's dangling pointer is 0x1 = Open MPI's MPI_IN_PLACE: never pass one.
    let mut all = vec![0u8; total + 1];
    let mut req = unsafe { raw::igatherv(mine, &mut all, &counts, &displs, 0, comm)? };
    raw::wait_all(std::slice::from_mut(&mut req))?;
    Ok(counts
        .iter()
        .zip(&displs)
        .map(|(&c, &d)| all[d as usize..(d + c) as usize].to_vec())
        .collect())
}

fn time_stats(h: &Histogram) -> TimeStats {
    TimeStats {
        min_s: h.min(),
        median_s: h.quantile(0.5),
        p99_s: h.quantile(0.99),
        max_s: h.max(),
        mean_s: h.mean(),
    }
}

/// One size class of one site, being merged over ranks.
#[derive(Default)]
struct ClassMerge {
    calls: u64,
    bytes: u64,
    after_other_size: u64,
    rank_calls: u64,
    time: Histogram,
    roots: BTreeMap<u32, u64>,
}

/// The report of one size class, with the prediction for its mean message size from its most
/// frequent root (the plan is the one the runtime uses for the class).
fn class_report(
    st: &dyn ProfiledComm,
    class: u8,
    m: ClassMerge,
    aligned: &[super::arrival::AlignedCall],
    setup_timing: &[super::report::LibraryTimingReport],
) -> SizeClassReport {
    let (min_bytes, max_bytes) = class_bytes(class);
    let mean = if m.calls > 0 {
        (m.bytes as f64 / m.calls as f64).round() as u64
    } else {
        min_bytes
    };
    let predicted_bytes = mean.clamp(min_bytes, max_bytes);
    // Most calls; the smallest root on ties (max_by_key keeps the last maximum, so reverse).
    let predicted_root = m
        .roots
        .iter()
        .rev()
        .max_by_key(|(_, &n)| n)
        .map(|(&r, _)| r)
        .unwrap_or(0);
    let time = time_stats(&m.time);
    let in_class = || aligned.iter().filter(|c| crate::plan::size_class(c.bytes) == class);
    let train = super::entries::call_train(in_class());
    let predicted = st.predict_time(predicted_root, predicted_bytes, train);
    let setup_groups = setup_timing
        .iter()
        .find(|t| crate::plan::size_class(t.bytes) == class)
        .and_then(|t| t.cpu_groups.clone());
    SizeClassReport {
        class,
        min_bytes,
        max_bytes,
        calls: m.calls,
        bytes: m.bytes,
        calls_after_other_size: m.after_other_size,
        rank_calls: m.rank_calls,
        time,
        roots: m.roots.into_iter().collect(),
        predicted_bytes,
        predicted_root,
        prediction_error: predicted.as_ref().and_then(|p| p.error(time.median_s)),
        predicted,
        given_entries: super::entries::given_entries(in_class(), st.size(), |root, bytes, calls| {
            st.predict_given_entries(root, bytes, calls, train)
        }),
        cpu_groups: super::placement::class_groups(
            in_class(),
            setup_groups.as_deref(),
            st.rank_roles(predicted_root, predicted_bytes).as_deref(),
        ),
    }
}

/// Gather `st`'s records to its rank 0, which keeps the merged report for the final file.
pub fn gather_comm(st: &mut dyn ProfiledComm) {
    st.profile_mut().gathered = true;
    if let Err(e) = try_gather_comm(st) {
        log::error!("treecast profile: gathering {} failed: {e}", st.profile().label);
    }
}

/// This rank's sites by name, entries of the same name (one call site the compiler emitted
/// twice, see [`CallSite`](super::CallSite)) merged.
fn by_name(sites: &super::SiteMap) -> Vec<(String, SiteStats)> {
    let mut out: BTreeMap<String, SiteStats> = BTreeMap::new();
    for (k, v) in sites {
        match out.entry(sites::name(k)) {
            std::collections::btree_map::Entry::Vacant(e) => {
                e.insert(v.clone());
            }
            std::collections::btree_map::Entry::Occupied(mut e) => e.get_mut().absorb(v),
        }
    }
    out.into_iter().collect()
}

fn try_gather_comm(st: &mut dyn ProfiledComm) -> crate::error::Result<()> {
    let (comm, rank, size) = (st.comm(), st.rank(), st.size());
    // The window's end before the gather's own traffic, as its start followed the set-up's.
    let load = st.profile().setup_load.zip(super::host_load::sample());
    let end_offset = measure_offset(comm, rank, size, st.control_tag())?;
    let mut setup_offset = st.profile().setup_offset;
    let clock = super::clock::Clock::global();
    let boot_id = crate::host::kernel_info().boot_id;
    let own = clock.line();
    let theirs = rank0_counter(comm, rank, clock, own, boot_id)?;
    let shared = theirs.and_then(|r0| one_counter(own, r0, end_offset, rank, clock.now()));
    let mut end_offset = end_offset;
    let mut method = if rank == 0 { "reference" } else { "ping-pong" };
    if let Some(err) = shared {
        // Converted with rank 0's line, this rank's times are on rank 0's base already.
        end_offset = counter_offset(end_offset, err);
        setup_offset = setup_offset.map(|o| counter_offset(o, err));
        method = "same counter";
    }
    let map = ClockMap::new(setup_offset, end_offset);
    let line = match (shared, theirs) {
        (Some(_), Some(r0)) => r0.line,
        _ => own,
    };
    let wire = RankWire {
        clock: RankClock {
            rank,
            source: if clock.is_tsc() { "tsc" } else { "monotonic" }.into(),
            ns_per_tick: clock.s_per_tick() * 1e9,
            rate_error: clock.rate_error(),
            rate_error_at_finalize: clock.long_rate().1,
            offset_s: end_offset.offset_s,
            offset_error_s: map.error_s(),
            offset_at_setup_s: setup_offset.map(|o| o.offset_s),
            drift_ppm: setup_offset.map(|_| map.drift() * 1e6),
            offset_method: method.into(),
        },
        rank,
        world_rank: world_rank(),
        host: processor_name(),
        setup_offset,
        end_offset,
        sites: by_name(&st.profile_mut().tally.sites(&line)),
        boot_id,
        cpus: crate::host::cpu_mask(),
        load,
    };
    let bytes = postcard::to_stdvec(&wire)
        .map_err(|e| crate::error::Error::new(crate::error::ErrorKind::Other, e.to_string()))?;
    let blobs = gather_bytes(comm, rank, size, &bytes)?;
    if rank != 0 {
        return Ok(());
    }
    let ranks: Vec<RankWire> = blobs
        .iter()
        .filter_map(|b| {
            postcard::from_bytes(b)
                .map_err(|e| log::error!("bad profile record: {e}"))
                .ok()
        })
        .collect();
    let mut ranks = ranks;
    align_same_kernel(&mut ranks);
    let report = merge(st, &ranks);
    FINISHED.lock().unwrap_or_else(|p| p.into_inner()).push(report);
    Ok(())
}

/// Rank 0's counter as every rank learns it at the gather: its line from ticks to its
/// `MPI_Wtime` and what one read of its counter costs.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Rank0Counter {
    line: Line,
    read_cost_s: f64,
}

/// Rank 0's counter line, sent to every rank (collective over `comm`); `None` on rank 0, and
/// where rank 0's ticks or this rank's are not the time-stamp counter or the two run on
/// different kernels (boot id 0: unknown), where ticks do not compare.
///
/// Why: each rank converts its ticks to its own `MPI_Wtime` through a line from its own
/// calibration (at set-up) to the gather, and the offsets between ranks are measured at those
/// two ends. Where the reference clocks do not run straight against the counter in between
/// (2 MPICH ranks on the VM, 2026-11-28: `MPI_Wtime` ran 0.5% faster than `CLOCK_MONOTONIC`
/// for seconds at a time, at other times at its rate), two ranks whose calibrations were a
/// few milliseconds apart convert the same instant microseconds apart: the receiver of a 1 KiB
/// broadcast then seemed to enter and leave 2-11 us before the root entered, in every call of a
/// job (6 of 10 jobs), and the predictions from the entries read 3-60x the measured time. One
/// counter read through one line has no such error.
fn rank0_counter(
    comm: MPI_Comm,
    rank: u32,
    clock: &super::clock::Clock,
    own: Line,
    boot_id: u64,
) -> crate::error::Result<Option<Rank0Counter>> {
    let mut msg = [
        u64::from(clock.is_tsc()),
        boot_id,
        own.ticks,
        own.ref_s.to_bits(),
        own.s_per_tick.to_bits(),
        clock.read_cost_s().to_bits(),
    ]
    .map(|x| x as i64);
    raw::bcast(&mut msg, 0, comm)?;
    let m = msg.map(|x| x as u64);
    let comparable = rank != 0 && m[0] == 1 && clock.is_tsc() && boot_id != 0 && m[1] == boot_id;
    Ok(comparable.then(|| Rank0Counter {
        line: Line {
            ticks: m[2],
            ref_s: f64::from_bits(m[3]),
            s_per_tick: f64::from_bits(m[4]),
        },
        read_cost_s: f64::from_bits(m[5]) + clock.read_cost_s(),
    }))
}

/// Whether this rank's counter is rank 0's (`theirs`): then the error bound of its times on
/// rank 0's base through rank 0's line (the two reads' cost), else `None`. The check: at `now`
/// (ticks), both lines are right (each was anchored there by its rate), so rank 0's line
/// minus this rank's `own` must be the offset just measured (`end`), to within its bound and
/// the reads'; a counter that is not shared after all (a kernel whose CPUs' counters were not
/// synchronised) is off by far more.
fn one_counter(own: Line, theirs: Rank0Counter, end: Offset, rank: u32, now: u64) -> Option<f64> {
    let said = theirs.line.at(now) - own.at(now);
    let agrees = (said - end.offset_s).abs() <= end.error_s + theirs.read_cost_s + 1e-7;
    log::debug!(
        "profile clocks: rank {rank}: rank 0's counter line puts it {:+.2} us from rank 0 now (measured {:+.2} +- {:.2} us), {:+.2} us at its calibration: {}",
        said * 1e6,
        end.offset_s * 1e6,
        end.error_s * 1e6,
        (theirs.line.at(own.ticks) - own.ref_s - end.offset_s) * 1e6,
        if agrees { "one counter" } else { "not one counter" }
    );
    agrees.then_some(theirs.read_cost_s)
}

/// The offset of a rank whose times were converted with rank 0's counter line (measured as
/// `o`): none, to within `error_s`, and no kernel stamp (so rank 0 does not put its kernel's
/// offset back in place of it, `align_same_kernel`).
fn counter_offset(o: Offset, error_s: f64) -> Offset {
    Offset {
        offset_s: 0.0,
        error_s,
        kernel: None,
        ..o
    }
}

/// On rank 0: the ranks that run on rank 0's kernel get the offsets their kernel stamps give
/// (`offset::same_kernel`, at set-up and at the gather alike) in place of their ping-pongs',
/// and their clocks' reported offset, bound and drift follow. Ranks of other
/// kernels, or of an unknown one (boot id 0), keep their ping-pongs.
fn align_same_kernel(ranks: &mut [RankWire]) {
    let Some(r0) = ranks.iter().find(|r| r.rank == 0) else {
        return;
    };
    let (kernel, setup0, end0) = (r0.boot_id, r0.setup_offset, r0.end_offset);
    if kernel == 0 {
        return;
    }
    for r in ranks.iter_mut().filter(|r| r.rank != 0 && r.boot_id == kernel) {
        // Both measurements or neither: a map with one exact end and one ping-pong would be
        // labelled by the one and bounded by the other.
        let end = super::offset::same_kernel(r.end_offset, end0.kernel);
        let setup = match r.setup_offset {
            None => Some(None),
            Some(o) => super::offset::same_kernel(o, setup0.and_then(|s| s.kernel)).map(Some),
        };
        let (Some(end), Some(setup)) = (end, setup) else {
            continue;
        };
        // What the ping-pongs would have said: on one kernel the kernel's offset is the truth
        // they are judged by.
        for (pp, k) in [(Some(r.end_offset), Some(end)), (r.setup_offset, setup)] {
            if let (Some(pp), Some(k)) = (pp, k) {
                log::debug!(
                    "profile clocks: rank {}: ping-pong offset {:+.2} us from the kernel's (its bound {:.2} us)",
                    r.rank,
                    (pp.offset_s - k.offset_s) * 1e6,
                    pp.error_s * 1e6
                );
            }
        }
        r.end_offset = end;
        r.setup_offset = setup;
        let map = r.clock_map();
        r.clock.offset_s = r.end_offset.offset_s;
        r.clock.offset_error_s = map.error_s();
        r.clock.offset_at_setup_s = r.setup_offset.map(|o| o.offset_s);
        r.clock.drift_ppm = r.setup_offset.map(|_| map.drift() * 1e6);
        r.clock.offset_method = "same kernel".into();
    }
}

/// Merge per-rank records of one communicator into its report.
fn merge(st: &dyn ProfiledComm, ranks: &[RankWire]) -> CommReport {
    let mut by_site: BTreeMap<String, Vec<(&RankWire, &SiteStats)>> = BTreeMap::new();
    for r in ranks {
        for (name, s) in &r.sites {
            by_site.entry(name.clone()).or_default().push((r, s));
        }
    }
    let mut sites_out = Vec::new();
    let setup_timing = st.library_timing();
    for (site, entries) in by_site {
        let mut time = Histogram::default();
        let mut cmp_mpi = Histogram::default();
        let mut cmp_topo = Histogram::default();
        let mut roots: BTreeMap<u32, u64> = BTreeMap::new();
        let mut classes: BTreeMap<u8, ClassMerge> = BTreeMap::new();
        let (mut calls, mut bytes, mut rank_calls, mut failures, mut by_mpi) = (0, 0, 0, 0, 0);
        for (_, s) in &entries {
            cmp_mpi.merge(&s.compare_mpi);
            cmp_topo.merge(&s.compare_topo);
            calls = calls.max(s.calls);
            bytes = bytes.max(s.bytes);
            rank_calls += s.calls;
            by_mpi = by_mpi.max(s.mpi_bcast_calls);
            failures += s.failures;
            for (&class, c) in &s.classes {
                time.merge(&c.time);
                let m = classes.entry(class).or_default();
                m.time.merge(&c.time);
                // Per-rank counts are the same on every rank calling from here: take the max.
                m.calls = m.calls.max(c.calls);
                m.bytes = m.bytes.max(c.bytes);
                m.after_other_size = m.after_other_size.max(c.after_other_size);
                m.rank_calls += c.calls;
                for (&r, &n) in &c.roots {
                    let e = m.roots.entry(r).or_insert(0);
                    *e = (*e).max(n);
                }
            }
        }
        for m in classes.values() {
            for (&r, &n) in &m.roots {
                *roots.entry(r).or_insert(0) += n;
            }
        }
        // Arrival skew and transfer over the calls every rank timed, and the slowest of them.
        let aligned = super::arrival::align(
            &entries
                .iter()
                .map(|(r, s)| super::arrival::RankCalls {
                    rank: r.rank,
                    kernel: r.boot_id,
                    clock: r.clock_map(),
                    calls: &s.common,
                })
                .collect::<Vec<_>>(),
        );
        // Sample call: the latest call every rank calling from here timed (ranks sample at
        // their own strides, but all time the common samples); failing that, the latest call
        // any of them timed, on the ranks that timed it.
        let on_all = |seq: u64| {
            entries
                .iter()
                .all(|(_, s)| [s.last, s.last_common].iter().flatten().any(|l| l.seq == seq))
        };
        let candidates = entries.iter().flat_map(|(_, s)| [s.last, s.last_common]).flatten();
        let seq = candidates
            .clone()
            .map(|l| l.seq)
            .filter(|&q| on_all(q))
            .max()
            .or_else(|| candidates.map(|l| l.seq).max());
        let sample = seq.and_then(|seq| {
            let parts: Vec<(&RankWire, super::LastCall)> = entries
                .iter()
                .filter_map(|(r, s)| {
                    [s.last, s.last_common]
                        .into_iter()
                        .flatten()
                        .find(|l| l.seq == seq)
                        .map(|l| (*r, l))
                })
                .collect();
            let first = parts.first()?.1;
            let mut ranks: Vec<(u32, f64, f64)> = parts
                .iter()
                .map(|(r, l)| {
                    let m = r.clock_map();
                    (r.rank, m.to_rank0(l.enter_s), m.to_rank0(l.done_s))
                })
                .collect();
            ranks.sort_by_key(|p| p.0);
            Some(timeline(
                st,
                &super::arrival::AlignedCall {
                    seq,
                    root: first.root,
                    bytes: first.bytes,
                    by_mpi: parts.iter().any(|(_, l)| l.by_mpi),
                    ranks,
                    cpus: vec![],
                },
                &aligned,
            ))
        });
        let arrival = super::arrival::analyse(&aligned);
        let slowest_call = aligned
            .iter()
            .max_by(|a, b| a.span_s().total_cmp(&b.span_s()))
            .map(|c| timeline(st, c, &aligned));
        let size_classes: Vec<SizeClassReport> = classes
            .into_iter()
            .map(|(class, m)| class_report(st, class, m, &aligned, &setup_timing))
            .collect();
        // The site-level prediction is its dominant class's (most calls, larger class on ties).
        let dominant = size_classes.iter().max_by_key(|c| (c.calls, c.class));
        let compare = (cmp_mpi.count() > 0).then(|| Compare {
            calls: entries.iter().map(|(_, s)| s.compare_mpi.count()).max().unwrap_or(0),
            mpi_bcast_median_s: cmp_mpi.quantile(0.5),
            topo_bcast_median_s: cmp_topo.quantile(0.5),
            ratio: cmp_topo.quantile(0.5) / cmp_mpi.quantile(0.5),
        });
        sites_out.push(SiteReport {
            site,
            calls,
            bytes,
            ranks: entries.len() as u32,
            rank_calls,
            failures,
            mpi_bcast_calls: by_mpi,
            time: time_stats(&time),
            timed_calls: time.count(),
            histogram: time.bins(),
            roots: roots.into_iter().collect(),
            predicted: dominant.and_then(|c| c.predicted.clone()),
            predicted_bytes: dominant.map(|c| c.predicted_bytes),
            predicted_root: dominant.map(|c| c.predicted_root),
            predicted_class: dominant.map(|c| c.class),
            prediction_error: dominant.and_then(|c| c.prediction_error),
            size_classes,
            compare,
            sample_call: sample,
            arrival,
            slowest_call,
        });
    }
    let mut hosts = vec![String::new(); st.size() as usize];
    let mut world_ranks = vec![-1; st.size() as usize];
    for r in ranks {
        if let Some(h) = hosts.get_mut(r.rank as usize) {
            *h = r.host.clone();
        }
        if let Some(w) = world_ranks.get_mut(r.rank as usize) {
            *w = r.world_rank;
        }
    }
    let mut clocks: Vec<RankClock> = ranks.iter().map(|r| r.clock.clone()).collect();
    clocks.sort_by_key(|c| c.rank);
    let shared_cpus = shared_cpus(ranks.iter().map(|r| (r.boot_id, r.cpus.as_slice(), r.host.as_str())));
    let host_load = host_load(ranks);
    CommReport {
        label: st.profile().label.clone(),
        size: st.size(),
        hosts,
        world_ranks,
        sites: sites_out,
        clocks,
        routes: st.routes(),
        shared_cpus,
        link_buckets: st.link_buckets(),
        send_buffer_bytes: st.send_buffer_bytes(),
        library_timing: setup_timing,
        message_overhead: st.message_overhead(),
        host_load,
    }
}

/// Per kernel of the communicator's ranks (in order of its first rank), what else ran on it
/// between the set-up and the gather (`host_load::load`); kernels whose ranks did not all
/// read both ends, or unknown kernels, are left out.
fn host_load(ranks: &[RankWire]) -> Vec<super::report::HostLoadReport> {
    let mut by_rank: Vec<&RankWire> = ranks.iter().collect();
    by_rank.sort_by_key(|r| r.rank);
    let mut kernels: Vec<(u64, Vec<&RankWire>)> = Vec::new();
    for r in by_rank.into_iter().filter(|r| r.boot_id != 0) {
        match kernels.iter_mut().find(|k| k.0 == r.boot_id) {
            Some(k) => k.1.push(r),
            None => kernels.push((r.boot_id, vec![r])),
        }
    }
    kernels
        .into_iter()
        .filter_map(|(_, members)| {
            let readings: Option<Vec<_>> = members.iter().map(|r| r.load).collect();
            let l = super::host_load::load(&readings?)?;
            let mut hosts: Vec<String> = Vec::new();
            for r in &members {
                if !hosts.contains(&r.host) {
                    hosts.push(r.host.clone());
                }
            }
            Some(super::report::HostLoadReport {
                hosts,
                ranks: members.len() as u32,
                cpus: l.cpus,
                window_s: l.window_s,
                job_cpus: l.job_cpus,
                other_cpus: l.other_cpus,
                steal_cpus: l.steal_cpus,
            })
        })
        .collect()
}

/// Kernels whose ranks (`(boot id, CPU mask, host name)`, one per rank) outnumber the CPUs
/// they may use together (the union of their masks); an unknown kernel (boot id 0) or mask
/// never counts as shared.
fn shared_cpus<'a>(ranks: impl Iterator<Item = (u64, &'a [u64], &'a str)>) -> Vec<SharedCpus> {
    let ranks: Vec<(u64, &[u64], &str)> = ranks.collect();
    crate::host::kernel_groups(ranks.iter().map(|r| (r.0, r.1)))
        .into_iter()
        .filter(|g| g.crowded())
        .map(|g| {
            let mut hosts: Vec<String> = Vec::new();
            for &i in &g.members {
                if !hosts.iter().any(|h| h == ranks[i].2) {
                    hosts.push(ranks[i].2.to_string());
                }
            }
            SharedCpus {
                hosts,
                ranks: g.members.len() as u32,
                cpus: g.cpus,
            }
        })
        .collect()
}

/// One aligned call as a per-rank timeline relative to the root's entry, with each rank's
/// predicted completion: the sample call and the slowest call alike. Where the calibrated model
/// can, the prediction starts from the times this call's ranks entered (as `given_entries`
/// does for a class, with the class's train of `calls`), so a rank that came late is not shown
/// finishing before it entered; else all ranks entering with the root.
fn timeline(
    st: &dyn ProfiledComm,
    c: &super::arrival::AlignedCall,
    calls: &[super::arrival::AlignedCall],
) -> SampleCall {
    let root_enter = c
        .ranks
        .iter()
        .find(|r| r.0 == c.root)
        .map_or_else(|| c.ranks.iter().map(|r| r.1).fold(f64::INFINITY, f64::min), |r| r.1);
    let (algorithm, predicted) = if c.by_mpi {
        ("MPI_Bcast".to_string(), None)
    } else {
        // The model without the entries only where it cannot take them: one simulation, not two.
        let predicted = match from_entries(st, c, calls) {
            Some(p) => Some((p, true)),
            None => st
                .predict_arrivals(c.root, c.bytes)
                .map(|p| (p.iter().map(|t| t + root_enter).collect(), false)),
        };
        (st.predicted_algorithm(c.root, c.bytes), predicted)
    };
    SampleCall {
        seq: c.seq,
        root: c.root,
        bytes: c.bytes,
        algorithm,
        ranks: c
            .ranks
            .iter()
            .map(|&(rank, enter, done)| RankTiming {
                rank,
                enter_s: enter - root_enter,
                done_s: done - root_enter,
                predicted_done_s: predicted
                    .as_ref()
                    .and_then(|(p, _): &(Vec<f64>, bool)| p.get(rank as usize))
                    .map(|t| t - root_enter),
            })
            .collect(),
        predicted_from_entries: predicted.as_ref().is_some_and(|p| p.1),
    }
}

/// [`ProfiledComm::predict_given_entries`] for the one call `c` (every rank's entry, in rank
/// order, on rank 0's clock): when each rank leaves it, on the same clock. `None` where not every
/// rank timed the call or the model is not calibrated.
fn from_entries(
    st: &dyn ProfiledComm,
    c: &super::arrival::AlignedCall,
    calls: &[super::arrival::AlignedCall],
) -> Option<Vec<f64>> {
    if !c.has_every_rank(st.size()) {
        return None;
    }
    let class = crate::plan::size_class(c.bytes);
    let train = super::entries::call_train(calls.iter().filter(|o| crate::plan::size_class(o.bytes) == class));
    let enter: Vec<f64> = c.ranks.iter().map(|r| r.1).collect();
    // The sample call is built from each rank's last call, without CPUs: the same call among
    // those every rank timed has them.
    let grouping = match c.cpus.is_empty() {
        true => calls
            .iter()
            .find(|o| o.seq == c.seq)
            .and_then(super::placement::call_grouping),
        false => super::placement::call_grouping(c),
    };
    st.predict_given_entries(c.root, c.bytes, (&[enter], &[grouping]), train)
        .pop()
        .flatten()
        .filter(|p| p.len() == c.ranks.len())
}

/// Final step at `MPI_Finalize`: gather the world communicator's records, then every report
/// held by any rank to world rank 0, and write the file. Without treecast state on
/// `MPI_COMM_WORLD` there is no safe world-wide collective, so each rank holding reports writes
/// `<path>.<world rank>` instead.
pub fn finish(world: Option<&mut dyn ProfiledComm>, path: &str) {
    let world_size = { raw::comm_size(raw::comm_world()).unwrap_or(0) as u32 };
    match world {
        Some(w) if w.profile().enabled => {
            if !w.profile().gathered {
                gather_comm(w);
            }
            let mine = std::mem::take(&mut *FINISHED.lock().unwrap_or_else(|p| p.into_inner()));
            let bytes = postcard::to_stdvec(&mine).unwrap_or_default();
            match gather_bytes(w.comm(), w.rank(), w.size(), &bytes) {
                Ok(blobs) if w.rank() == 0 => {
                    let mut comms: Vec<CommReport> = Vec::new();
                    for b in blobs {
                        match postcard::from_bytes::<Vec<CommReport>>(&b) {
                            Ok(v) => comms.extend(v),
                            Err(e) => log::error!("bad profile report: {e}"),
                        }
                    }
                    // World first, then by label.
                    comms.sort_by_key(|c| (c.label != "MPI_COMM_WORLD", c.label.clone()));
                    write(path, world_size, comms);
                }
                Ok(_) => {}
                Err(e) => log::error!("treecast profile: final gather failed: {e}"),
            }
        }
        Some(_) => {}
        None => {
            let mine = std::mem::take(&mut *FINISHED.lock().unwrap_or_else(|p| p.into_inner()));
            if !mine.is_empty() {
                write(&format!("{path}.{}", world_rank()), world_size, mine);
            }
        }
    }
}

fn write(path: &str, world_size: u32, communicators: Vec<CommReport>) {
    let report = ProfileReport {
        version: PROFILE_VERSION,
        world_size,
        mpi_library: if cfg!(treecast_mpi = "mpich") {
            "MPICH"
        } else {
            "Open MPI"
        }
        .into(),
        communicators,
    };
    match serde_json::to_string_pretty(&report) {
        Ok(text) => match std::fs::write(path, text + "\n") {
            Ok(()) => log::info!("treecast profile written to {path}"),
            Err(e) => log::error!("cannot write treecast profile {path}: {e}"),
        },
        Err(e) => log::error!("cannot encode treecast profile: {e}"),
    }
}

/// Whether a compare call should time MPI_Bcast: every rank's topo_bcast must have succeeded,
/// else sizes may differ across ranks and MPI_Bcast could fail or hang.
pub fn all_ok(comm: MPI_Comm, ok: bool) -> bool {
    // The largest "failed" flag: 0 only when every rank succeeded (collective on our duplicate).
    let mut any_failed = [1 as c_int];
    raw::allreduce_max(&[c_int::from(!ok)], &mut any_failed, comm).is_ok() && any_failed[0] == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two ranks of one counter (1 tick = 1 ns) whose `MPI_Wtime` ran 0.5% fast for the 3 ms
    /// between their calibrations: through their own lines (each from its calibration to the
    /// gather) one instant lands microseconds apart; through rank 0's, exactly together.
    /// The check accepts rank 0's line where it agrees with the measured offset, and refuses a
    /// counter that is not rank 0's.
    #[test]
    fn ranks_of_one_counter_compare_through_rank_0s_line() {
        // The reference as a function of ticks: straight, with 0.5% more over its first 3 ms.
        let wtime = |t: u64| {
            let s = t as f64 * 1e-9;
            s + 0.005 * s.min(0.003)
        };
        let line = |from: u64, to: u64| Line {
            ticks: from,
            ref_s: wtime(from),
            s_per_tick: (wtime(to) - wtime(from)) / (to - from) as f64,
        };
        let gather = 1_000_000_000u64;
        let (r0, r1) = (line(0, gather), line(3_000_000, gather));
        let instant = 50_000_000u64;
        assert!(
            (r1.at(instant) - r0.at(instant)).abs() > 10e-6,
            "{} {}",
            r0.at(instant),
            r1.at(instant)
        );
        let theirs = Rank0Counter {
            line: r0,
            read_cost_s: 2e-8,
        };
        let end = Offset {
            at_s: wtime(gather),
            offset_s: 0.0,
            error_s: 1e-6,
            kernel: None,
        };
        assert_eq!(one_counter(r1, theirs, end, 1, gather), Some(2e-8));
        // A counter 1 ms off rank 0's (or an offset that says so) is not one counter.
        let off = Line {
            ref_s: r1.ref_s + 1e-3,
            ..r1
        };
        assert_eq!(one_counter(off, theirs, end, 1, gather), None);
        let far = Offset { offset_s: 5e-6, ..end };
        assert_eq!(one_counter(r1, theirs, far, 1, gather), None);
    }

    #[test]
    fn ranks_outnumbering_their_kernels_cpus_are_reported() {
        let (two, cpu0, cpu1, eight) = ([0b11u64], [0b01u64], [0b10u64], [0xffu64]);
        // Kernel 1: 4 ranks of two emulated hosts, all on CPUs 0-1; kernel 2: 2 ranks bound
        // to one CPU each (not shared); kernel 3: 2 ranks on 8 CPUs; unknown kernels and
        // masks never count.
        let ranks: Vec<(u64, &[u64], &str)> = vec![
            (1, &two, "h0"),
            (1, &two, "h0"),
            (1, &two, "h1"),
            (1, &two, "h1"),
            (2, &cpu0, "bound"),
            (2, &cpu1, "bound"),
            (3, &eight, "big"),
            (3, &eight, "big"),
            (0, &cpu0, "x"),
            (0, &cpu0, "x"),
            (4, &[], "y"),
            (4, &[], "y"),
        ];
        let s = shared_cpus(ranks.into_iter());
        assert_eq!(
            s,
            vec![SharedCpus {
                hosts: vec!["h0".into(), "h1".into()],
                ranks: 4,
                cpus: 2
            }]
        );
        // Two ranks bound to the same CPU do share it.
        let s = shared_cpus([(5, &cpu0[..], "a"), (5, &cpu0[..], "a")].into_iter());
        assert_eq!(s.len(), 1);
        assert_eq!((s[0].ranks, s[0].cpus), (2, 1));
    }
}
