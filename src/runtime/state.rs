//! Per-communicator state, cached on the user's communicator with MPI attribute caching.
//!
//! The first treecast call on a communicator creates the state collectively (duplicate the
//! communicator, learn the topology, ...) and attaches it with `MPI_Comm_set_attr`; later calls
//! find it with `MPI_Comm_get_attr` (a hash lookup). When the user frees the communicator, MPI
//! calls our delete callback, which frees the duplicate and the plans. The same mechanism serves
//! Rust (rsmpi communicators free themselves on drop) and C.
//!
//! At `MPI_Finalize` MPI deletes `MPI_COMM_SELF`'s attributes first, while everything still
//! works (MPI-4 section 11.2.5); a hook attribute there releases every state still alive
//! (`MPI_COMM_WORLD`'s, and communicators the user never freed), so no duplicate outlives MPI.
//!
//! Threads (`MPI_THREAD_MULTIPLE`): states of different communicators may be created and used
//! concurrently from different threads (each has its own lock; the globals here are a
//! `OnceLock` and mutex-guarded lists). The finalize hook runs collective gathers on every live
//! state, so all ranks must visit shared states in the same order. Creation order is not that
//! order once threads create states concurrently (rank 0 may create X then Y, rank 1 Y then X,
//! and both would block in different gathers), so each state carries an [`OrderKey`] agreed by
//! its members at creation and the hook visits states sorted by it.

use super::config::{config, Config};
use super::plans::Planner;
use crate::error::{Error, ErrorKind, Result};
use crate::exec::raw;
use crate::exec::tags::TagCodec;
use crate::exec::LocalPlan;
use crate::util::fasthash::FastMap;
use mpi::ffi::{self, MPI_Comm};
use std::ffi::c_void;
use std::os::raw::c_int;
use std::sync::{Arc, Mutex, OnceLock};

/// Upper bound on cached plans per communicator (roots x size classes); least recently used
/// entries are evicted beyond it, so long jobs with many roots stay bounded in memory.
const PLAN_CACHE_LIMIT: usize = 512;

/// Everything treecast keeps for one communicator.
pub struct CommState {
    /// Private duplicate of the user's communicator (`MPI_ERRORS_RETURN`).
    pub comm: MPI_Comm,
    pub rank: u32,
    pub size: u32,
    /// Sequence number of the next call that runs treecast's plan (identical on every rank;
    /// the tags of a call's messages carry it). Calls on the library route do not use one.
    pub seq: u64,
    /// Number of calls so far, whatever their route (profiling samples by it).
    pub calls: u64,
    /// The route of each (root, size class) (see `route`).
    routes: FastMap<(u32, u8), super::route::Selection>,
    pub codec: TagCodec,
    pub planner: Planner,
    plans: PlanCache<LocalPlan>,
    /// This rank's part of the unsegmented plan of each (root, size class) whose route's trial
    /// times it against the planner's segments (`route::Arm::Unsegmented`), until decided.
    unsegmented_plans: FastMap<(u32, u8), Arc<LocalPlan>>,
    /// Set when the finalize hook released MPI resources; the state is then inert.
    released: bool,
    pub config: &'static Config,
    /// Reused buffers of the executor.
    pub scratch: crate::exec::engine::Scratch,
    /// Per-call-site profile of this communicator.
    pub profile: crate::profile::CommProfile,
    /// Position of this state in the finalize hook's collective visits.
    pub order: OrderKey,
}

/// Values per (root, size class), computed on first use; beyond `limit` entries the least
/// recently used one is evicted. Separate from [`CommState`] (and generic) so the caching is
/// tested without MPI.
struct PlanCache<V> {
    entries: FastMap<(u32, u8), (Arc<V>, u64)>,
    /// Use counter: the last use of each entry, for LRU eviction.
    clock: u64,
    limit: usize,
}

impl<V> PlanCache<V> {
    fn new(limit: usize) -> Self {
        PlanCache {
            entries: FastMap::default(),
            clock: 0,
            limit: limit.max(1),
        }
    }

    /// The cached value for `key`, or `make()`'s, cached.
    fn get_or_insert_with(&mut self, key: (u32, u8), make: impl FnOnce() -> V) -> Arc<V> {
        self.clock += 1;
        let clock = self.clock;
        if let Some(e) = self.entries.get_mut(&key) {
            e.1 = clock;
            return e.0.clone();
        }
        let v = Arc::new(make());
        if self.entries.len() >= self.limit {
            if let Some(&k) = self.entries.iter().min_by_key(|(_, v)| v.1).map(|(k, _)| k) {
                self.entries.remove(&k);
            }
        }
        self.entries.insert(key, (v.clone(), clock));
        v
    }

    /// Forget the value for `key` (it is made again on its next use).
    fn remove(&mut self, key: &(u32, u8)) {
        self.entries.remove(key);
    }

    /// The cached value for `key`, if any, without counting it as a use.
    fn peek(&self, key: &(u32, u8)) -> Option<&Arc<V>> {
        self.entries.get(key).map(|e| &e.0)
    }

    fn len(&self) -> usize {
        self.entries.len()
    }
}

/// `(world rank of the communicator's rank 0, number of states that rank had created before)`:
/// the same on every member (agreed at creation) and different for any two communicators, so
/// sorting by it orders shared states identically on all ranks, which keeps the collective
/// gathers of the finalize hook deadlock-free whatever order threads created states in.
pub type OrderKey = (i64, i64);

/// Most route selections kept per communicator; beyond it the settled ones are forgotten (and
/// settled again, identically on every rank: all ranks see the same sequence of calls).
const ROUTE_LIMIT: usize = 4096;

/// A communicator's state goes away (or its routes are forgotten): the broadcast's fast path,
/// which remembers a communicator's duplicate, must not trust a remembered one after that.
fn bump_epoch() {
    super::last_call::invalidate();
}

impl CommState {
    /// The route selection of (root, size class), made on first use from inputs identical on
    /// every rank (see [`super::route::initial`]).
    pub fn selection(&mut self, root: u32, class: u8) -> &mut super::route::Selection {
        use super::route::{initial, RoutePolicy, LIBRARY_MAX_CLASS};
        if !self.routes.contains_key(&(root, class)) {
            if self.routes.len() >= ROUTE_LIMIT {
                self.routes.retain(|_, s| s.settled().is_none());
                bump_epoch();
            }
            let network = self.planner.has_network();
            let forced = self.planner.forced_algorithm();
            let needs_plan = network && !forced && self.config.route == RoutePolicy::Auto && class <= LIBRARY_MAX_CLASS;
            let plan = needs_plan.then(|| self.plan(root, class));
            let unsegmented = plan
                .as_deref()
                .and_then(|p| self.planner.unsegmented_alternative(self.rank, root, class, p));
            let sel = initial(
                self.config.route,
                class,
                forced,
                network,
                plan.as_deref(),
                unsegmented.is_some(),
            );
            // Kept only while a trial times it (not where the route was settled without one).
            if let Some(u) = unsegmented.filter(|_| sel.arms()[1] == super::route::Arm::Unsegmented) {
                self.unsegmented_plans.insert((root, class), Arc::new(u));
            }
            self.routes.insert((root, class), sel);
        }
        self.routes.get_mut(&(root, class)).expect("just inserted")
    }

    /// Whether every root's broadcasts of every size within the library's reach take the
    /// library's `MPI_Bcast` from the first call, so the route does not depend on the root
    /// (see [`super::route::initial`]): `TREECAST_ROUTE=library`, or the default policy with
    /// no network topology (one host) and no forced algorithm. The fast path then serves a
    /// repeated call whatever its root (programs that broadcast from each rank in turn).
    pub fn library_for_every_root(&self) -> bool {
        super::route::library_for_every_root(
            self.config.route,
            self.planner.forced_algorithm(),
            self.planner.has_network(),
        )
    }

    /// Whether broadcasts of `bytes` from `root` settled on the library's `MPI_Bcast`.
    fn library_route(&self, root: u32, bytes: u64) -> bool {
        let key = (root, crate::plan::size_class(bytes));
        self.routes.get(&key).and_then(|s| s.settled()) == Some(super::route::Route::Library)
    }

    /// Every (root, size class) seen so far with its route selection, sorted (identical on
    /// every rank: all take the same decisions at the same calls).
    pub fn routes(&self) -> Vec<((u32, u8), &super::route::Selection)> {
        let mut v: Vec<((u32, u8), &super::route::Selection)> = self.routes.iter().map(|(k, s)| (*k, s)).collect();
        v.sort_by_key(|e| e.0);
        v
    }

    /// This rank's part of the plan for (root, size class), computed on first use. Planning is
    /// deterministic, so every rank computes the same plan without communicating.
    pub fn plan(&mut self, root: u32, class: u8) -> Arc<LocalPlan> {
        let (planner, rank) = (&self.planner, self.rank);
        self.plans
            .get_or_insert_with((root, class), || planner.local_plan(rank, root, class))
    }

    /// This rank's part of the unsegmented plan on trial for (root, size class), if any.
    pub fn unsegmented_plan(&self, root: u32, class: u8) -> Option<Arc<LocalPlan>> {
        self.unsegmented_plans.get(&(root, class)).cloned()
    }

    /// The trial of the planner's segments for (root, size class) chose `won`: with the
    /// unsegmented plan, the planner plans the class unsegmented from now on (runs and
    /// predictions alike) and the cached plan is made again.
    pub fn settle_segments(&mut self, root: u32, class: u8, won: super::route::Arm) {
        if let Some(u) = self.unsegmented_plans.remove(&(root, class)) {
            if won == super::route::Arm::Unsegmented {
                self.planner.settle_unsegmented(root, class, &u.algorithm);
                self.plans.remove(&(root, class));
            }
        }
    }

    /// Number of cached plans (for tests of boundedness).
    pub fn cached_plans(&self) -> usize {
        self.plans.len()
    }

    /// Free the MPI resources (the duplicate communicator). Idempotent.
    fn release(&mut self) {
        if !self.released {
            self.released = true;
            if !mpi_finalized() {
                // Our duplicate, freed once.
                raw::comm_free(&mut self.comm);
            }
        }
    }
}

impl Drop for CommState {
    fn drop(&mut self) {
        self.release();
    }
}

/// The boxed value stored in the attribute.
pub type Slot = Mutex<CommState>;

/// Addresses of live states, for the finalize hook.
fn live() -> &'static Mutex<Vec<usize>> {
    static LIVE: OnceLock<Mutex<Vec<usize>>> = OnceLock::new();
    LIVE.get_or_init(|| Mutex::new(Vec::new()))
}

pub fn mpi_initialized() -> bool {
    raw::initialized()
}

pub fn mpi_finalized() -> bool {
    raw::finalized()
}

/// Copy callback: a duplicated communicator does not inherit our state (it gets its own).
unsafe extern "C" fn no_copy(
    _old: MPI_Comm,
    _kv: c_int,
    _extra: *mut c_void,
    _val_in: *mut c_void,
    _val_out: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    *flag = 0;
    ffi::MPI_SUCCESS as c_int
}

/// Delete callback: the user's communicator is being freed.
unsafe extern "C" fn delete_state(_comm: MPI_Comm, _kv: c_int, val: *mut c_void, _extra: *mut c_void) -> c_int {
    let r = std::panic::catch_unwind(|| {
        live()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|&a| a != val as usize);
        // SAFETY: val is the Box we leaked in `create`.
        let slot: Box<Slot> = Box::from_raw(val as *mut Slot);
        bump_epoch();
        let mut st = slot.lock().unwrap_or_else(|p| p.into_inner());
        crate::profile::on_comm_free(&mut *st);
        st.release();
    });
    if r.is_err() {
        log::error!("panic while freeing treecast communicator state");
    }
    ffi::MPI_SUCCESS as c_int
}

/// Finalize hook (attribute on `MPI_COMM_SELF`): gather profiles and release every live state.
/// States are visited in [`OrderKey`] order (the same on every rank); the world communicator's
/// state goes last so it can carry the final gather.
unsafe extern "C" fn finalize_hook(_comm: MPI_Comm, _kv: c_int, _val: *mut c_void, _extra: *mut c_void) -> c_int {
    let r = std::panic::catch_unwind(|| {
        bump_epoch();
        let addrs: Vec<usize> = std::mem::take(&mut *live().lock().unwrap_or_else(|p| p.into_inner()));
        // SAFETY: addresses in LIVE are Boxes owned by attributes that MPI has not deleted yet;
        // we only release MPI resources and leave the Box to the delete callback.
        let mut slots: Vec<&Slot> = addrs.iter().map(|&a| &*(a as *const Slot)).collect();
        slots.sort_by_cached_key(|slot| slot.lock().unwrap_or_else(|p| p.into_inner()).order);
        let mut world: Option<&Slot> = None;
        for slot in slots {
            let mut st = slot.lock().unwrap_or_else(|p| p.into_inner());
            if st.profile.is_world {
                world = Some(slot);
                continue;
            }
            crate::profile::on_comm_free(&mut *st);
            st.release();
        }
        match world {
            Some(slot) => {
                let mut st = slot.lock().unwrap_or_else(|p| p.into_inner());
                crate::profile::on_finalize_world(Some(&mut *st), profile_path());
                st.release();
            }
            None => crate::profile::on_finalize_world(None, profile_path()),
        }
    });
    if r.is_err() {
        log::error!("panic in treecast's finalize hook");
    }
    ffi::MPI_SUCCESS as c_int
}

/// The keyval for our state; created (with the finalize hook) on first use.
fn keyval() -> Result<c_int> {
    static KEYVAL: OnceLock<std::result::Result<c_int, Error>> = OnceLock::new();
    KEYVAL
        .get_or_init(|| {
            let kv = raw::comm_create_keyval(Some(no_copy), Some(delete_state))?;
            let hook = raw::comm_create_keyval(Some(no_copy), Some(finalize_hook))?;
            // SAFETY: the finalize hook ignores the attribute's value.
            unsafe { raw::comm_set_attr(raw::comm_self(), hook, std::ptr::null_mut())? };
            Ok(kv)
        })
        .clone()
}

/// Reject communicators we cannot serve, without letting MPI invoke a fatal error handler.
pub fn check_comm(comm: MPI_Comm) -> Result<()> {
    if comm == raw::comm_null() {
        return Err(Error::new(ErrorKind::Comm, "communicator is MPI_COMM_NULL"));
    }
    if raw::comm_test_inter(comm)? {
        return Err(Error::new(
            ErrorKind::Comm,
            "inter-communicators are not supported by topo_bcast",
        ));
    }
    Ok(())
}

/// Where broadcasts of `bytes` from `root` stand on `comm` (local, no communication): unseen
/// before the communicator's first broadcast of that root and size class.
///
/// # Safety
/// As for [`lookup`].
pub unsafe fn route_state(comm: MPI_Comm, root: u32, bytes: u64) -> Result<super::route::RouteState> {
    use super::route::RouteState;
    let Some(slot) = lookup(comm)? else {
        return Ok(RouteState::Unseen);
    };
    let st = slot.lock().unwrap_or_else(|p| p.into_inner());
    let class = crate::plan::size_class(bytes);
    if class <= super::route::LIBRARY_MAX_CLASS && st.library_for_every_root() {
        // Known before any call, and calls from a new root may skip the state (fast path).
        return Ok(RouteState::Settled(super::route::Route::Library));
    }
    Ok(match st.routes.get(&(root, class)) {
        None => RouteState::Unseen,
        Some(sel) => sel.settled().map_or(RouteState::Trial, RouteState::Settled),
    })
}

/// The state of `comm` if it has one: one attribute query, no collective. Only
/// intra-communicators ever get a state, so a hit also vouches for the communicator (the hot
/// path then skips [`check_comm`]).
///
/// # Safety
/// `comm` must be a valid communicator handle or `MPI_COMM_NULL` (which has no state). The
/// returned reference lives until the communicator is freed; callers hold it only for one call.
pub unsafe fn lookup(comm: MPI_Comm) -> Result<Option<&'static Slot>> {
    if comm == raw::comm_null() {
        return Ok(None);
    }
    let kv = keyval()?;
    let val = raw::comm_get_attr(comm, kv)?;
    // SAFETY: a value under our keyval is the Box leaked in `get_or_create`, alive until the
    // delete callback runs.
    Ok(val.filter(|v| !v.is_null()).map(|v| &*(v as *const Slot)))
}

/// The state of `comm`: found with one attribute query when it exists; otherwise `comm` is
/// checked ([`check_comm`], then `before_create`, e.g. argument checks that must fail on every
/// rank before anything collective happens) and the state created collectively.
///
/// # Safety
/// As for [`lookup`].
pub unsafe fn get_checked(comm: MPI_Comm, before_create: impl FnOnce() -> Result<()>) -> Result<&'static Slot> {
    if let Some(slot) = lookup(comm)? {
        return Ok(slot);
    }
    check_comm(comm)?;
    before_create()?;
    get_or_create(comm)
}

/// The state of `comm`, created collectively on first use.
///
/// # Safety
/// `comm` must be a valid intra-communicator. The returned reference lives until the
/// communicator is freed; callers hold it only for the duration of one call.
pub unsafe fn get_or_create(comm: MPI_Comm) -> Result<&'static Slot> {
    if let Some(slot) = lookup(comm)? {
        return Ok(slot);
    }
    let kv = keyval()?;
    let st = create(comm)?;
    let ptr = Box::into_raw(Box::new(Mutex::new(st)));
    if let Err(e) = raw::comm_set_attr(comm, kv, ptr as *mut c_void) {
        drop(Box::from_raw(ptr));
        return Err(e);
    }
    live().lock().unwrap_or_else(|p| p.into_inner()).push(ptr as usize);
    Ok(&*ptr)
}

/// Collective: duplicate the communicator and set up planning.
unsafe fn create(user: MPI_Comm) -> Result<CommState> {
    let cfg = config();
    let t0 = raw::wtime();
    // The start of the window over which a profile says what else ran on the host: before
    // the set-up, whose calibration a busy host disturbs as much as the job's calls.
    let setup_load = cfg
        .profile_path
        .is_some()
        .then(crate::profile::host_load::sample)
        .flatten();
    let dup = raw::comm_dup(user)?;
    let mut dup_guard = CommGuard(dup);
    raw::set_errors_return(dup)?;
    let rank = raw::comm_rank(dup)? as u32;
    let size = raw::comm_size(dup)? as u32;
    let tag_ub = raw::tag_ub(dup)?.unwrap_or(32767);
    let planner = Planner::create(dup, rank, size, cfg)?;
    let (profile_everywhere, order) = agree(dup, rank, cfg)?;
    let mut profile = profile_setup(user, cfg, profile_everywhere, order);
    // TREECAST_TAG_UB (testing) lowers the bound, so a test can drive the tags through a
    // wrap in hundreds of calls instead of tens of millions.
    let codec = TagCodec::new(cfg.tag_ub.map_or(tag_ub, |cap| tag_ub.min(cap)));
    if profile.enabled {
        // The first of the two clock offsets to rank 0 (the second when the profile is
        // gathered): times in between are mapped with the drift (see `profile::offset`).
        // Every rank agreed that profiling is on, so all take part.
        profile.setup_offset = Some(crate::profile::measure_offset(dup, rank, size, codec.control_tag())?);
        profile.setup_load = setup_load;
    }
    let comm = dup_guard.take();
    log::info!(
        "treecast: communicator of {size} ranks ready in {:.3} ms (planner: {})",
        (raw::wtime() - t0) * 1e3,
        planner.describe()
    );
    Ok(CommState {
        comm,
        rank,
        size,
        seq: 0,
        calls: 0,
        routes: FastMap::default(),
        codec,
        planner,
        plans: PlanCache::new(PLAN_CACHE_LIMIT),
        unsegmented_plans: FastMap::default(),
        released: false,
        config: cfg,
        scratch: Default::default(),
        profile,
        order,
    })
}

/// One allreduce settles what the members of a new state must agree on: whether every rank
/// has profiling configured, and the state's [`OrderKey`] (rank 0's proposal; the others send
/// -1, so MAX picks it). MIN(flag) is computed as -MAX(-flag) to need a single reduction.
fn agree(dup: MPI_Comm, rank: u32, cfg: &Config) -> Result<(bool, OrderKey)> {
    static CREATED: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);
    let flag = -(cfg.profile_path.is_some() as i64);
    let mine: [i64; 3] = if rank == 0 {
        let seq = CREATED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        [flag, raw::comm_rank(raw::comm_world())? as i64, seq]
    } else {
        [flag, -1, -1]
    };
    let mut all = [0i64; 3];
    raw::allreduce_max(&mine, &mut all, dup)?;
    Ok((all[0] == -1, (all[1], all[2])))
}

/// Profiling is on for a communicator only if every rank has it configured (agreed in
/// [`agree`]), so a variable missing on some ranks cannot make later gathers hang.
fn profile_setup(user: MPI_Comm, cfg: &Config, everywhere: bool, order: OrderKey) -> crate::profile::CommProfile {
    if cfg.profile_path.is_some() && !everywhere {
        log::warn!("TREECAST_PROFILE is not set on every rank of a communicator; profiling it is off");
    }
    if everywhere {
        // Calibrate the profiling clock now (a 2 ms spin, once per process) rather than inside
        // the first profiled broadcast.
        crate::profile::clock::Clock::global();
    }
    let is_world = user == raw::comm_world();
    crate::profile::CommProfile {
        enabled: everywhere,
        compare_every: cfg.profile_compare,
        time_every_call: cfg.profile_time_all,
        is_world,
        // The agreed ordering key (world rank of rank 0, its creation counter) is unique.
        label: if is_world {
            "MPI_COMM_WORLD".into()
        } else {
            format!("communicator {} of world rank {}", order.1, order.0)
        },
        ..Default::default()
    }
}

/// Frees a communicator unless taken (error paths during creation).
struct CommGuard(MPI_Comm);

impl CommGuard {
    fn take(&mut self) -> MPI_Comm {
        std::mem::replace(&mut self.0, raw::comm_null())
    }
}

impl Drop for CommGuard {
    fn drop(&mut self) {
        // Our own duplicate, unless taken.
        if self.0 != raw::comm_null() {
            raw::comm_free(&mut self.0);
        }
    }
}

/// `TREECAST_PROFILE`, where the profile is written at `MPI_Finalize`.
fn profile_path() -> Option<&'static str> {
    super::config::config().profile_path.as_deref()
}

/// What the profile's gather needs of a communicator: its handle, the planner's predictions and
/// the routes chosen, as report rows.
impl crate::profile::ProfiledComm for CommState {
    fn comm(&self) -> MPI_Comm {
        self.comm
    }
    fn rank(&self) -> u32 {
        self.rank
    }
    fn size(&self) -> u32 {
        self.size
    }
    fn control_tag(&self) -> i32 {
        self.codec.control_tag()
    }
    fn profile(&self) -> &crate::profile::CommProfile {
        &self.profile
    }
    fn profile_mut(&mut self) -> &mut crate::profile::CommProfile {
        &mut self.profile
    }
    fn predict_time(
        &self,
        root: u32,
        bytes: u64,
        train: Option<crate::estimate::bucket::CallTrain>,
    ) -> Option<crate::profile::report::Predicted> {
        self.planner
            .predict_time(root, bytes, self.library_route(root, bytes), train)
    }
    fn predicted_algorithm(&self, root: u32, bytes: u64) -> String {
        self.planner
            .predicted_plan(root, bytes, self.library_route(root, bytes))
            .info
            .algorithm
    }
    fn predict_arrivals(&self, root: u32, bytes: u64) -> Option<Vec<f64>> {
        self.planner
            .predict_arrivals(root, bytes, self.library_route(root, bytes))
    }
    fn predict_given_entries(
        &self,
        root: u32,
        bytes: u64,
        calls: (&[Vec<f64>], &[Option<Vec<u32>>]),
        train: Option<crate::estimate::bucket::CallTrain>,
    ) -> Vec<Option<Vec<f64>>> {
        self.planner
            .predict_given_entries(root, bytes, self.library_route(root, bytes), calls, train)
    }
    fn rank_roles(&self, root: u32, bytes: u64) -> Option<Vec<(u32, u32)>> {
        Some(
            self.planner
                .predicted_plan(root, bytes, self.library_route(root, bytes))
                .rank_roles(),
        )
    }
    fn link_buckets(&self) -> Vec<crate::profile::report::LinkBucketReport> {
        self.planner.link_buckets()
    }
    fn send_buffer_bytes(&self) -> Option<f64> {
        self.planner.send_buffer_bytes()
    }
    fn library_timing(&self) -> Vec<crate::profile::report::LibraryTimingReport> {
        self.planner.library_timing()
    }
    fn message_overhead(&self) -> Option<crate::profile::report::MessageOverheadReport> {
        self.planner.message_overhead_report()
    }
    fn routes(&self) -> Vec<crate::profile::report::RouteReport> {
        CommState::routes(self)
            .into_iter()
            .map(|((root, class), sel)| {
                let (min_bytes, max_bytes) = crate::profile::report::class_bytes(class);
                let trial = sel.trial_s();
                // The plan the calls ran, as cached; planned again only if evicted since.
                let algorithm = if sel.settled() == Some(super::route::Route::Library) {
                    self.planner.library_algorithm_name(root, class)
                } else if let Some(p) = self.plans.peek(&(root, class)) {
                    p.algorithm.clone()
                } else {
                    self.planner.local_plan(self.rank, root, class).algorithm
                };
                crate::profile::report::RouteReport {
                    root,
                    class,
                    min_bytes,
                    max_bytes,
                    route: sel.settled().map_or("trial", |r| r.key()).to_string(),
                    reason: sel.reason().to_string(),
                    library_us: trial.map(|t| t[0] * 1e6),
                    plan_us: trial.map(|t| t[1] * 1e6),
                    segmented_us: sel.segments_trial_s().map(|t| t[0] * 1e6),
                    unsegmented_us: sel.segments_trial_s().map(|t| t[1] * 1e6),
                    algorithm,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{class_representative, default_plan, size_class};

    #[test]
    fn plan_cache_hits_per_root_and_class_and_evicts_the_least_recent() {
        // What `CommState::plan` caches: one rank's part of the plan for (root, size class).
        let made = std::cell::Cell::new(0);
        let local = |root: u32, class: u8| {
            made.set(made.get() + 1);
            LocalPlan::from_plan(&default_plan(16, root, class_representative(class)), 3)
        };
        let mut c = PlanCache::new(3);
        let small = size_class(64 << 10);
        let large = size_class(4 << 20);
        let a = c.get_or_insert_with((0, small), || local(0, small));
        assert_eq!((made.get(), c.len()), (1, 1));
        // Same (root, class): a hit, the very same plan, nothing computed.
        let b = c.get_or_insert_with((0, small), || local(0, small));
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!((made.get(), c.len()), (1, 1));
        // Another class, another root: misses.
        let l = c.get_or_insert_with((0, large), || local(0, large));
        assert_eq!((made.get(), c.len()), (2, 2));
        assert!(l.nsegs > 1 && a.nsegs == 1, "{} {}", l.nsegs, a.nsegs);
        c.get_or_insert_with((5, small), || local(5, small));
        assert_eq!((made.get(), c.len()), (3, 3));
        // Full: touching (0, small) makes (0, large) the least recently used, so a fourth key
        // evicts it and keeps the others.
        c.get_or_insert_with((0, small), || local(0, small));
        c.get_or_insert_with((7, small), || local(7, small));
        assert_eq!((made.get(), c.len()), (4, 3));
        let again = c.get_or_insert_with((0, small), || local(0, small));
        assert!(Arc::ptr_eq(&a, &again));
        assert_eq!(made.get(), 4);
        c.get_or_insert_with((0, large), || local(0, large));
        assert_eq!((made.get(), c.len()), (5, 3));
        // A peek finds what is cached and computes nothing.
        assert!(c.peek(&(0, large)).is_some() && c.peek(&(9, large)).is_none());
        assert_eq!(made.get(), 5);
    }
}
