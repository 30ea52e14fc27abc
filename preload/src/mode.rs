//! What the interposer does, decided once for the whole job at `MPI_Init`.
//!
//! Serving must be all or nothing: if one rank served a broadcast with treecast's point-to-point
//! messages while another called `PMPI_Bcast`, both would wait forever. So at start-up the
//! ranks agree with one allreduce over `MPI_COMM_WORLD`: treecast serves only if every rank has
//! `TREECAST_INTERCEPT` on, and profiling is on if any rank has `TREECAST_PROFILE` (each
//! communicator then agrees again whether every member has it; see `runtime::state`). Every
//! communicator's ranks are in the world, so this one agreement covers them all.
//!
//! When serving or profiling is on, treecast's state for `MPI_COMM_WORLD` is created right away
//! (collective, inside `MPI_Init` where every rank is): the profile's final gather at
//! `MPI_Finalize` then always has a world communicator, and the finalize hook that writes the
//! profile is registered inside `PMPI_Finalize` as for linked programs.
//!
//! The mode is one atomic byte, read on every `MPI_Bcast`: with serving and profiling off the
//! interposer costs one load and a branch before `PMPI_Bcast`.

use mpi::ffi;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Once;
use treecast::runtime::{config, state};

/// The mode has been decided (at start-up, or lazily).
const KNOWN: u8 = 1;
const SERVE: u8 = 2;
const PROFILE: u8 = 4;
/// `MPI_Finalize` has returned: leave everything to MPI.
const FINALIZED: u8 = 8;
/// Decided lazily (MPI_Init was not seen), so whether MPI is initialized is not known.
const LAZY: u8 = 16;

static MODE: AtomicU8 = AtomicU8::new(0);
static START: Once = Once::new();

/// The current mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mode {
    /// treecast performs `MPI_Bcast`.
    pub serve: bool,
    /// `MPI_Bcast` calls are profiled (performed by treecast or by MPI).
    pub profile: bool,
    /// MPI is known to be between `MPI_Init` and `MPI_Finalize` (our wrappers saw both ends);
    /// otherwise each call asks MPI.
    pub initialized: bool,
}

impl Mode {
    const OFF: Mode = Mode {
        serve: false,
        profile: false,
        initialized: false,
    };

    fn from_bits(bits: u8) -> Mode {
        if bits & FINALIZED != 0 {
            return Mode::OFF;
        }
        Mode {
            serve: bits & SERVE != 0,
            profile: bits & PROFILE != 0,
            initialized: bits & LAZY == 0,
        }
    }

    fn bits(self) -> u8 {
        KNOWN
            | if self.serve { SERVE } else { 0 }
            | if self.profile { PROFILE } else { 0 }
            | if self.initialized { 0 } else { LAZY }
    }
}

/// Serving and not profiling, the mode known and MPI not finalized: the fast path's question
/// in one load and one compare.
#[inline(always)]
pub fn serving_unprofiled() -> bool {
    MODE.load(Ordering::Acquire) & (KNOWN | SERVE | PROFILE | FINALIZED) == KNOWN | SERVE
}

/// The mode once it is known (agreed at start-up, or settled by a first call), else `None`:
/// loads only, for an entry point that must not call anything before its tail call.
#[inline(always)]
pub fn known() -> Option<Mode> {
    let bits = MODE.load(Ordering::Acquire);
    (bits & KNOWN != 0).then(|| Mode::from_bits(bits))
}

/// The mode for an `MPI_Bcast` now.
#[inline]
pub fn current() -> Mode {
    let bits = MODE.load(Ordering::Acquire);
    if bits & KNOWN != 0 {
        return Mode::from_bits(bits);
    }
    lazy()
}

/// MPI was initialized without our `MPI_Init` (e.g. a library called `PMPI_Init` itself): no
/// collective agreement is possible at an arbitrary broadcast, so each rank follows its own
/// environment, which is then assumed to be the same on every rank.
#[cold]
fn lazy() -> Mode {
    let cfg = config();
    let mode = Mode {
        serve: cfg.intercept,
        profile: cfg.profile_path.is_some(),
        initialized: false,
    };
    if MODE
        .compare_exchange(0, mode.bits(), Ordering::AcqRel, Ordering::Acquire)
        .is_ok()
    {
        log::warn!(
            "treecast preload: MPI was initialized without MPI_Init/MPI_Init_thread passing through the \
             interposer; following this rank's environment (serve {}, profile {}), which must be the same on \
             every rank",
            mode.serve,
            mode.profile
        );
    }
    Mode::from_bits(MODE.load(Ordering::Acquire))
}

/// After a successful `PMPI_Init`/`PMPI_Init_thread` (C or Fortran): agree on the mode and set
/// up `MPI_COMM_WORLD`. Collective over `MPI_COMM_WORLD`; runs once.
pub fn start_up() {
    START.call_once(|| {
        if !state::mpi_initialized() {
            return;
        }
        let r = std::panic::catch_unwind(|| {
            // SAFETY: MPI is initialized; every rank runs this inside its MPI_Init.
            let mode = unsafe { agree() };
            MODE.store(mode.bits(), Ordering::Release);
        });
        if r.is_err() {
            log::error!("treecast preload: panic during start-up; MPI_Bcast is left to MPI");
            MODE.store(
                Mode {
                    initialized: true,
                    ..Mode::OFF
                }
                .bits(),
                Ordering::Release,
            );
        }
    });
}

/// MIN-allreduce of a few flags over `MPI_COMM_WORLD`; None (and a log line) if it fails.
unsafe fn all_min<const N: usize>(mine: [c_int; N]) -> Option<[c_int; N]> {
    let mut all = [0 as c_int; N];
    let rc = ffi::PMPI_Allreduce(
        mine.as_ptr() as *const _,
        all.as_mut_ptr() as *mut _,
        N as c_int,
        ffi::RSMPI_INT32_T,
        ffi::RSMPI_MIN,
        ffi::RSMPI_COMM_WORLD,
    );
    if rc != ffi::MPI_SUCCESS as c_int {
        log::error!(
            "treecast preload: MPI_Allreduce at start-up failed ({}); MPI_Bcast is left to MPI",
            treecast::exec::raw::error_string(rc)
        );
        return None;
    }
    Some(all)
}

unsafe fn agree() -> Mode {
    let cfg = config();
    let off = Mode {
        initialized: true,
        ..Mode::OFF
    };
    let Some([serve, no_profile]) = all_min([cfg.intercept as c_int, cfg.profile_path.is_none() as c_int]) else {
        return off;
    };
    let mut mode = Mode {
        serve: serve == 1,
        profile: no_profile == 0,
        initialized: true,
    };
    if cfg.intercept && !mode.serve {
        log::warn!("treecast preload: TREECAST_INTERCEPT=0 on some ranks, so no rank serves MPI_Bcast");
    }
    let mut passed_through = false;
    if mode.serve || mode.profile {
        let world = ffi::RSMPI_COMM_WORLD;
        let mut library_only = false;
        let ok = treecast::capi::guard(|| {
            state::check_comm(world)?;
            let slot = state::get_or_create(world)?;
            let st = slot.lock().unwrap_or_else(|p| p.into_inner());
            library_only = library_everywhere(cfg, st.planner.has_network());
            Ok(())
        }) == ffi::MPI_SUCCESS as c_int;
        if !ok {
            log::error!(
                "treecast preload: setting up MPI_COMM_WORLD failed: {}",
                crate::serve::last_error()
            );
        }
        // No rank may serve unless all could set up; none passes calls straight through
        // unless all would.
        match all_min([ok as c_int, library_only as c_int]) {
            Some([1, 1]) if mode.serve && !mode.profile => {
                mode.serve = false;
                passed_through = true;
                log::info!(
                    "treecast preload: the job runs on one host and no route or algorithm is forced: every \
                     MPI_Bcast goes straight to the MPI library, whose broadcast treecast would choose here \
                     anyway (TREECAST_ROUTE=plan serves them with treecast's plans)"
                );
            }
            Some([1, _]) => {}
            _ => mode = off,
        }
    }
    let mut provided: c_int = 0;
    ffi::PMPI_Query_thread(&mut provided);
    log::info!(
        "treecast preload: MPI_Bcast {}, profiling {}, MPI thread level {}",
        if mode.serve {
            "served by treecast"
        } else if passed_through {
            "passed to the MPI library (one host)"
        } else {
            "left to MPI (TREECAST_INTERCEPT=0)"
        },
        if mode.profile { "on" } else { "off" },
        thread_level_name(provided)
    );
    mode
}

/// Whether every broadcast of the job would take the MPI library's route, so the interposer
/// can pass `MPI_Bcast` straight to `PMPI_Bcast` with the caller's own arguments: no network
/// topology for the world (one host, and so for every communicator, all subsets of it), the
/// automatic route, no forced algorithm (see `treecast::runtime::route::initial`). Profiling
/// is decided apart (a profiled call is always recorded by treecast).
///
/// Why: on one host a broadcast of a few bytes takes 80-100 ns, and even the served fast path
/// (look the call up, call `PMPI_Bcast` on the private duplicate) cost 3-4 ns of it, 3-5%.
/// Passing the call through costs what one more function call does. The library's broadcast
/// is what the served call would run, with MPI's own error behaviour either way.
fn library_everywhere(cfg: &treecast::runtime::Config, network: bool) -> bool {
    use treecast::runtime::route::RoutePolicy;
    !network && cfg.algorithm.is_none() && cfg.route == RoutePolicy::Auto
}

fn thread_level_name(level: c_int) -> &'static str {
    // SAFETY: reading constants.
    unsafe {
        if level == ffi::RSMPI_THREAD_MULTIPLE {
            "MPI_THREAD_MULTIPLE"
        } else if level == ffi::RSMPI_THREAD_SERIALIZED {
            "MPI_THREAD_SERIALIZED"
        } else if level == ffi::RSMPI_THREAD_FUNNELED {
            "MPI_THREAD_FUNNELED"
        } else {
            "MPI_THREAD_SINGLE"
        }
    }
}

/// Before `PMPI_Finalize`. The profile is gathered and written by treecast's finalize hook,
/// which MPI runs inside `PMPI_Finalize` (it is an attribute of `MPI_COMM_SELF`, registered
/// when the first state was created — at start-up whenever profiling is on).
pub fn finalizing() {
    if current().profile {
        if let Some(path) = &config().profile_path {
            log::info!("treecast preload: MPI_Finalize; the profile goes to {path}");
        }
    }
}

/// After `PMPI_Finalize` returned successfully: later calls go straight to MPI.
pub fn finalized() {
    if state::mpi_finalized() {
        MODE.fetch_or(KNOWN | FINALIZED, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mode_bits_round_trip() {
        for serve in [false, true] {
            for profile in [false, true] {
                for initialized in [false, true] {
                    let m = Mode {
                        serve,
                        profile,
                        initialized,
                    };
                    assert_eq!(Mode::from_bits(m.bits()), m);
                    assert_ne!(m.bits() & KNOWN, 0);
                }
            }
        }
    }

    #[test]
    fn finalized_turns_everything_off() {
        let m = Mode {
            serve: true,
            profile: true,
            initialized: true,
        };
        assert_eq!(Mode::from_bits(m.bits() | FINALIZED), Mode::OFF);
    }
}
