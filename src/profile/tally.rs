//! The profiler's hot path: count every call exactly, time an adaptive sample.
//!
//! A 1 KiB broadcast between two ranks of one host takes about 450 ns. Timing it costs two
//! clock reads (about 10 ns each with the time-stamp counter) plus a histogram update, about
//! 8% of the call; the goal is that profiling costs at most 2%. So every call is *counted*
//! (calls, bytes, failures and roots are exact: a cache of one entry per size class finds the
//! call's counters without hashing when its class's site and root repeat), but each (site,
//! size class) *times* only a sample of
//! its calls, chosen so that timing costs at most [`TIMING_BUDGET`] of the calls' duration: a
//! cell whose calls take 15 us or more times every one of them, a 450 ns cell about one in 32
//! (the budget shrinks where ranks outnumber the host's CPUs, see [`cpu_sharing`]).
//!
//! The sample is a fixed pseudo-random subset of sequence numbers (a hash of the call's
//! sequence number, which every rank of the communicator shares, below the cell's stride), so
//! sampling does not alias with a program's periodic pattern of sites. Strides are powers of
//! two up to [`MAX_STRIDE`], so every rank times the calls whose hash is a multiple of
//! `MAX_STRIDE`, whatever its own stride, and the first call of each cell: those give the
//! per-rank Gantt chart of one call.
//! Quantiles of a cell are those of its timed calls (the report says how many were timed).

use super::clock::{Clock, Line};
use super::{CallSite, ClassStats, Histogram, LastCall, SiteMap};

/// Share of a cell's call time that timing may cost.
pub const TIMING_BUDGET: f64 = 0.0025;
/// Largest sampling stride (a power of two): at least one call in this many is timed.
pub const MAX_STRIDE: u64 = 64;
/// Calls every rank timed that a cell (and a site, per size class) keeps for the arrival
/// analysis and for predictions from each call's entries (the latest ones).
pub const COMMON_KEEP: usize = 64;
/// Bookkeeping of a timed call beyond its two clock reads (histogram, running mean), seconds.
const TIMED_BOOKKEEPING_S: f64 = 15e-9;

/// How many ranks share each CPU of this host (at least 1). Timing is CPU work: when ranks
/// outnumber cores, every rank's timing work delays the broadcast, so the budget per rank
/// shrinks by this factor. From the launcher's local-size variable (Open MPI, MPICH/Hydra);
/// 1 when there is none.
fn cpu_sharing() -> f64 {
    static SHARING: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *SHARING.get_or_init(|| {
        let local = ["OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"]
            .iter()
            .find_map(|v| std::env::var(v).ok()?.trim().parse::<f64>().ok())
            .unwrap_or(1.0);
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        (local / cpus).max(1.0)
    })
}

/// Six pseudo-random bits of a sequence number (Fibonacci hashing: one multiply, and
/// consecutive or evenly spaced numbers spread over all values, so a program's periodic
/// pattern of sites does not alias with the sample).
#[inline(always)]
fn mix(seq: u64) -> u64 {
    seq.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - MAX_STRIDE.trailing_zeros())
}

/// Whether every rank times call `seq` (whatever its strides).
fn common_sample(seq: u64) -> bool {
    mix(seq) & (MAX_STRIDE - 1) == 0
}

#[derive(Clone, Copy, Debug)]
struct Last {
    seq: u64,
    root: u32,
    bytes: u64,
    by_mpi: bool,
    /// Start and end, clock ticks.
    span: (u64, u64),
    /// The CPU the call finished on, read only for the calls every rank times
    /// (`super::placement`).
    cpu: Option<u32>,
}

impl Last {
    fn resolve(&self, line: &Line) -> LastCall {
        let (enter_s, done_s) = (line.at(self.span.0), line.at(self.span.1));
        LastCall {
            seq: self.seq,
            root: self.root,
            bytes: self.bytes,
            enter_s,
            done_s,
            by_mpi: self.by_mpi,
            cpu: self.cpu,
        }
    }
}

/// Counters and times of one (site, size class) on this rank.
#[derive(Debug)]
struct Cell {
    site: CallSite,
    class: u8,
    calls: u64,
    bytes: u64,
    failures: u64,
    mpi_bcast_calls: u64,
    /// Calls whose previous call on the communicator was of another size class
    /// (`ClassStats::after_other_size`).
    after_other_size: u64,
    /// Calls per root; the last entry is the most recent root (usually the only one).
    roots: Vec<(u32, u64)>,
    time: Histogram,
    /// Sampling stride (power of two) and running mean of timed durations.
    stride: u64,
    mean_s: f64,
    last: Option<Last>,
    /// The latest timed call that every rank timed too.
    last_common: Option<Last>,
    /// The latest calls every rank timed (at most [`COMMON_KEEP`]).
    common: std::collections::VecDeque<Last>,
    compare_mpi: Histogram,
    compare_topo: Histogram,
}

impl Cell {
    fn new(site: CallSite, class: u8) -> Cell {
        Cell {
            site,
            class,
            calls: 0,
            bytes: 0,
            failures: 0,
            mpi_bcast_calls: 0,
            after_other_size: 0,
            roots: Vec::new(),
            time: Histogram::default(),
            stride: 1,
            mean_s: 0.0,
            last: None,
            last_common: None,
            common: std::collections::VecDeque::new(),
            compare_mpi: Histogram::default(),
            compare_topo: Histogram::default(),
        }
    }

    /// Count `calls` calls of `bytes` bytes in all from `root`.
    fn count(&mut self, root: u32, calls: u64, bytes: u64) {
        self.calls += calls;
        self.bytes += bytes;
        match self.roots.last_mut() {
            Some(r) if r.0 == root => r.1 += calls,
            _ => match self.roots.iter().position(|r| r.0 == root) {
                Some(i) => {
                    // Move it to the end: the next call most likely has the same root.
                    let mut r = self.roots.remove(i);
                    r.1 += calls;
                    self.roots.push(r);
                }
                None => self.roots.push((root, calls)),
            },
        }
    }

    /// Add a timed call's duration and adapt the stride to it; `forced`: timed on every rank
    /// whatever the sample (a compared call, or every call timed).
    fn timed(&mut self, seconds: f64, mut last: Last, timed_cost_s: f64, forced: bool) {
        self.time.add(seconds);
        if seconds.is_finite() && seconds >= 0.0 {
            self.mean_s = if self.time.count() == 1 {
                seconds
            } else {
                self.mean_s + (seconds - self.mean_s) / 8.0
            };
            let want = timed_cost_s / (TIMING_BUDGET * self.mean_s.max(1e-12));
            self.stride = (want.ceil().min(MAX_STRIDE as f64) as u64).max(1).next_power_of_two();
        }
        // A cell's first call is timed on every rank too (strides start at 1).
        let everywhere = common_sample(last.seq) || self.last.is_none();
        if everywhere || forced {
            last.cpu = super::placement::current_cpu();
            if everywhere {
                self.last_common = Some(last);
            }
            if self.common.len() == COMMON_KEEP {
                self.common.pop_front();
            }
            self.common.push_back(last);
        }
        self.last = Some(last);
    }
}

/// A call being recorded: its cell and, if timed, its start.
#[derive(Clone, Copy, Debug)]
pub struct Pending {
    cell: usize,
    seq: u64,
    root: u32,
    bytes: u64,
    by_mpi: bool,
    /// Timed whatever the sample (on every rank).
    forced: bool,
    start: Option<u64>,
}

impl Pending {
    /// Whether the call is being timed.
    pub fn timed(&self) -> bool {
        self.start.is_some()
    }
}

/// Calls of a size class's most recent (site, root) not yet added to its cell: an untimed call
/// repeating the site and root of its class's previous call touches only this, which lives in
/// the communicator's state next to the profiling flag the call has just read (the cells are
/// elsewhere on the heap). One per class, so a program that mixes sizes keeps each size's
/// entry: with one entry for all, profiling 8 and 64 B calls in turn cost +26-44% against +21%
/// for 8 B in a row (`bench_preload 2 41 2000 8,64 3`, 2026-11-30).
#[derive(Clone, Copy, Debug)]
struct Hot {
    id: (u8, usize),
    root: u32,
    cell: usize,
    /// The cell's stride - 1.
    mask: u64,
    calls: u64,
    bytes: u64,
    /// Of `calls`, those whose previous call on the communicator was of another class.
    after_other_size: u64,
}

/// Size classes (`plan::size_class`: 0 ..= 64).
const CLASSES: usize = 65;

/// Per-(site, size class) counters of one communicator on this rank.
#[derive(Debug)]
pub struct Tally {
    hot: [Option<Hot>; CLASSES],
    /// The class of the previous call (`None` before the first).
    last_class: Option<u8>,
    cells: Vec<Cell>,
}

impl Default for Tally {
    fn default() -> Tally {
        Tally {
            hot: [None; CLASSES],
            last_class: None,
            cells: Vec::new(),
        }
    }
}

impl Tally {
    fn clock() -> &'static Clock {
        Clock::global()
    }

    /// Add a class's hot counts to their cell.
    fn flush(&mut self, class: u8) {
        if let Some(h) = self.hot[class as usize].as_mut() {
            if h.calls > 0 {
                let c = &mut self.cells[h.cell];
                c.count(h.root, h.calls, h.bytes);
                c.after_other_size += h.after_other_size;
                (h.calls, h.bytes, h.after_other_size) = (0, 0, 0);
            }
        }
    }

    /// Make (site, root) the class's hot key; returns its cell.
    fn heat(&mut self, site: CallSite, class: u8, root: u32) -> usize {
        self.flush(class);
        let id = site.identity();
        let i = match self
            .cells
            .iter()
            .position(|c| c.site.identity() == id && c.class == class)
        {
            Some(i) => i,
            None => {
                self.cells.push(Cell::new(site, class));
                self.cells.len() - 1
            }
        };
        self.hot[class as usize] = Some(Hot {
            id,
            root,
            cell: i,
            mask: self.cells[i].stride - 1,
            calls: 0,
            bytes: 0,
            after_other_size: 0,
        });
        i
    }

    /// Count a call and decide whether to time it (always when `force`).
    #[inline]
    pub fn begin(&mut self, site: CallSite, root: u32, bytes: u64, seq: u64, force: bool) -> Pending {
        let class = crate::plan::size_class(bytes);
        let id = site.identity();
        let other_size = u64::from(self.last_class.is_some_and(|c| c != class));
        self.last_class = Some(class);
        let cell = match self.hot[class as usize].as_mut() {
            Some(h) if h.id == id && h.root == root => {
                h.calls += 1;
                h.bytes += bytes;
                h.after_other_size += other_size;
                if !force && mix(seq) & h.mask != 0 {
                    return Pending {
                        cell: h.cell,
                        seq,
                        root,
                        bytes,
                        by_mpi: false,
                        forced: false,
                        start: None,
                    };
                }
                h.cell
            }
            _ => {
                let i = self.heat(site, class, root);
                let h = self.hot[class as usize].as_mut().expect("just heated");
                (h.calls, h.bytes, h.after_other_size) = (1, bytes, other_size);
                i
            }
        };
        let timed = force || mix(seq) & (self.cells[cell].stride - 1) == 0;
        Pending {
            cell,
            seq,
            root,
            bytes,
            by_mpi: false,
            forced: force,
            start: timed.then(|| Self::clock().now()),
        }
    }

    /// Finish a call; its duration when it was timed.
    #[inline]
    pub fn end(&mut self, p: Pending, ok: bool) -> Option<f64> {
        let Some(start) = p.start else {
            if !ok {
                self.cells[p.cell].failures += 1;
            }
            return None;
        };
        let clock = Self::clock();
        let end = clock.now();
        let c = &mut self.cells[p.cell];
        if !ok {
            c.failures += 1;
        }
        let seconds = clock.seconds(start, end);
        let last = Last {
            seq: p.seq,
            root: p.root,
            bytes: p.bytes,
            by_mpi: p.by_mpi,
            span: (start, end),
            cpu: None,
        };
        c.timed(
            seconds,
            last,
            (2.0 * clock.read_cost_s() + TIMED_BOOKKEEPING_S) * cpu_sharing(),
            p.forced,
        );
        let mask = c.stride - 1;
        if let Some(h) = self.hot[c.class as usize].as_mut().filter(|h| h.cell == p.cell) {
            h.mask = mask;
        }
        Some(seconds)
    }

    /// [`Tally::begin`] for a call the MPI library performs (`MPI_Bcast` via the interposer).
    pub fn begin_mpi_bcast(&mut self, site: CallSite, root: u32, bytes: u64, seq: u64, force: bool) -> Pending {
        let mut p = self.begin(site, root, bytes, seq, force);
        self.cells[p.cell].mpi_bcast_calls += 1;
        p.by_mpi = true;
        p
    }

    /// An MPI_Bcast comparison of the call `p` (which was timed).
    pub fn record_compare(&mut self, p: &Pending, topo_s: f64, mpi_s: f64) {
        let c = &mut self.cells[p.cell];
        c.compare_topo.add(topo_s);
        c.compare_mpi.add(mpi_s);
    }

    /// This rank's records per site, absolute times through `line` (this rank's own
    /// [`Clock::line`] puts them on its `MPI_Wtime`; see `super::gather` for when another's).
    pub fn sites(&mut self, line: &Line) -> SiteMap {
        for class in 0..CLASSES as u8 {
            self.flush(class);
        }
        let mut out = SiteMap::default();
        for c in &self.cells {
            let s = out.entry(c.site).or_default();
            s.calls += c.calls;
            s.bytes += c.bytes;
            s.failures += c.failures;
            s.mpi_bcast_calls += c.mpi_bcast_calls;
            s.compare_mpi.merge(&c.compare_mpi);
            s.compare_topo.merge(&c.compare_topo);
            let class = s.classes.entry(c.class).or_insert_with(ClassStats::default);
            class.calls += c.calls;
            class.bytes += c.bytes;
            class.after_other_size += c.after_other_size;
            class.time.merge(&c.time);
            for &(r, n) in &c.roots {
                *class.roots.entry(r).or_insert(0) += n;
            }
            s.common.extend(c.common.iter().map(|l| l.resolve(line)));
            super::keep_latest(&mut s.common);
            for (mine, theirs) in [(&mut s.last, c.last), (&mut s.last_common, c.last_common)] {
                if let Some(l) = theirs {
                    if mine.is_none_or(|m| m.seq < l.seq) {
                        *mine = Some(l.resolve(line));
                    }
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(line: usize) -> CallSite {
        CallSite::Address(line)
    }

    #[test]
    fn every_call_is_counted_and_the_sample_adapts_to_the_call_time() {
        let mut t = Tally::default();
        let (mut timed_fast, mut timed_slow) = (0, 0);
        for seq in 0..4096u64 {
            // Two interleaved sites: a fast one (100 ns calls) and a slow one (1 ms calls).
            let (s, d) = if seq % 2 == 0 {
                (site(1), 100e-9)
            } else {
                (site(2), 1e-3)
            };
            let p = t.begin(s, (seq % 3) as u32, 1000, seq, false);
            if let Some(start) = p.start {
                // Feed a synthetic duration through the same path as a real one.
                let c = &mut t.cells[p.cell];
                let last = Last {
                    seq,
                    root: p.root,
                    bytes: p.bytes,
                    by_mpi: false,
                    span: (start, start),
                    cpu: None,
                };
                c.timed(d, last, 45e-9, false);
                if seq % 2 == 0 {
                    timed_fast += 1;
                } else {
                    timed_slow += 1;
                }
            }
        }
        let sites = t.sites(&Clock::global().line());
        for s in [site(1), site(2)] {
            let st = &sites[&s];
            assert_eq!((st.calls, st.bytes), (2048, 2048 * 1000));
            let roots: u64 = st.classes.values().flat_map(|c| c.roots.values()).sum();
            assert_eq!(roots, 2048);
        }
        // The slow site's calls are all timed; the fast one's are sampled at the top stride
        // (45 ns / (0.5% of 100 ns) > 64), but not aliased away by the alternation.
        assert_eq!(timed_slow, 2048);
        assert!(
            (10..=2048 / 16).contains(&timed_fast),
            "fast site timed {timed_fast} of 2048"
        );
        assert_eq!(
            sites[&site(1)].classes.values().map(|c| c.time.count()).sum::<u64>(),
            timed_fast
        );
    }

    #[test]
    fn common_samples_are_timed_at_every_stride() {
        let mut common = 0;
        for seq in 0..10_000u64 {
            if common_sample(seq) {
                common += 1;
                for stride in [1u64, 2, 4, 8, 16, 32, 64] {
                    assert_eq!(mix(seq) & (stride - 1), 0);
                }
            }
        }
        // About one call in MAX_STRIDE.
        assert!((100..=220).contains(&common), "{common}");
    }

    #[test]
    fn repeated_calls_are_counted_through_the_hot_entry() {
        let mut t = Tally::default();
        let mut timed = 0;
        for seq in 0..1000u64 {
            // Runs of one root, then a new size class for the last 100 calls.
            let (root, bytes) = (seq as u32 / 300, if seq < 900 { 64 } else { 4096 });
            let p = t.begin(site(7), root, bytes, seq, false);
            if p.timed() {
                timed += 1;
            }
            t.end(p, seq != 5);
            if seq == 10 {
                // A slow first call would keep the stride at 1; make the cell sample.
                t.cells[0].stride = MAX_STRIDE;
                t.hot[crate::plan::size_class(64) as usize].as_mut().unwrap().mask = MAX_STRIDE - 1;
            }
        }
        let st = &t.sites(&Clock::global().line())[&site(7)];
        assert_eq!((st.calls, st.bytes, st.failures), (1000, 900 * 64 + 100 * 4096, 1));
        let small = &st.classes[&crate::plan::size_class(64)];
        assert_eq!(small.calls, 900);
        let roots: Vec<(u32, u64)> = small.roots.iter().map(|(&r, &n)| (r, n)).collect();
        assert_eq!(roots, [(0, 300), (1, 300), (2, 300)]);
        assert_eq!(st.classes[&crate::plan::size_class(4096)].roots.get(&3), Some(&100));
        assert!(timed < 200, "most calls untimed: {timed}");
    }

    /// A call counts as following another size when the previous call on the communicator
    /// was of another size class, whatever its site or root; a change of site or root alone
    /// does not count.
    #[test]
    fn calls_after_another_size_are_counted() {
        let mut t = Tally::default();
        let call = |t: &mut Tally, site_no: usize, root: u32, bytes: u64, seq: u64| {
            let p = t.begin(site(site_no), root, bytes, seq, false);
            t.end(p, true);
        };
        // 64 B and 4 KiB in turn: every call but the first follows the other size.
        for seq in 0..10u64 {
            call(&mut t, 1, 0, if seq % 2 == 0 { 64 } else { 4096 }, seq);
        }
        // Then 4 KiB ten times (the last call was 4 KiB too), from other roots and another
        // site: none follows another size.
        for seq in 10..20u64 {
            call(&mut t, if seq < 15 { 1 } else { 2 }, (seq % 3) as u32, 4096, seq);
        }
        let sites = t.sites(&Clock::global().line());
        let class = |site_no: usize, bytes: u64| &sites[&site(site_no)].classes[&crate::plan::size_class(bytes)];
        assert_eq!((class(1, 64).calls, class(1, 64).after_other_size), (5, 4));
        assert_eq!((class(1, 4096).calls, class(1, 4096).after_other_size), (10, 5));
        assert_eq!((class(2, 4096).calls, class(2, 4096).after_other_size), (5, 0));
    }

    #[test]
    fn forced_calls_are_timed() {
        let mut t = Tally::default();
        let c = t.heat(site(1), 3, 0);
        t.cells[c].stride = MAX_STRIDE;
        t.hot[3].as_mut().unwrap().mask = MAX_STRIDE - 1;
        let untimed = (0..1000u64).find(|&s| mix(s) & (MAX_STRIDE - 1) != 0).unwrap();
        assert!(!t.begin(site(1), 0, 4, untimed, false).timed());
        assert!(t.begin(site(1), 0, 4, untimed, true).timed());
    }
}
