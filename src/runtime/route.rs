//! Which way each (root, size class) travels: treecast's own plan (point-to-point sends in the
//! order the planner chose) or the MPI library's `MPI_Bcast` on the private communicator.
//!
//! Why both: where the best plan is what the library does anyway (one host, where its
//! shared-memory collectives are tuned; small messages where the network topology adds nothing)
//! replaying the library's algorithm with point-to-point calls can only add the cost of those
//! calls — 0.4-0.7 us against the library's 0.12-0.35 us for 8 bytes. Where the topology helps
//! (large messages across oversubscribed uplinks) the plan is several times faster.
//!
//! **Choice.** Without a network topology the library; when the plan's predicted time is at
//! most half the library's (its algorithm's simulated time or lower bound), the plan; otherwise,
//! when the chosen plan is one of the libraries' own algorithms, the library: the route is clear
//! at once. Otherwise the calls of the two routes alternate in a trial, every rank timing its
//! own part (the first call of each route untimed: connections, caches), in the order
//! library, plan, plan, library, ... (so a pattern of the program's own that repeats every
//! other call cannot favour one route), and after each stage of [`TRIAL_CALLS`] timed calls
//! each one `MPI_Allreduce` (max over ranks of each route's median) decides for every rank
//! alike — never a per-rank guess, so ranks cannot diverge. Only a clear difference ends the
//! trial early; otherwise it runs to [`TRIAL_MAX_CALLS`] calls each, and then the plan wins
//! only by a margin: within noise, the library. `TREECAST_ROUTE` forces one route.
//!
//! **Semantics.** Results are the same either way. Error detection differs: treecast's route
//! finds a rank whose count disagrees with the root's and turns it into `MPI_ERR_TRUNCATE` there
//! and an error downstream, without hanging; on the library route erroneous calls behave as
//! they do with `MPI_Bcast` itself. `TREECAST_ROUTE=plan` keeps every call on the checked route.
//! Every rank must choose the same route for a call, which holds when all pass the same root
//! and message size (as `MPI_Bcast` requires).

use crate::exec::LocalPlan;

/// How a call is broadcast.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// The MPI library's `MPI_Bcast` on the private communicator.
    Library,
    /// Treecast's plan, point to point.
    Plan,
}

impl Route {
    pub fn name(self) -> &'static str {
        match self {
            Route::Library => "library MPI_Bcast",
            Route::Plan => "treecast plan",
        }
    }

    /// One-word name, as the profile's `routes` give it: `library` or `plan`.
    pub fn key(self) -> &'static str {
        match self {
            Route::Library => "library",
            Route::Plan => "plan",
        }
    }
}

/// Where broadcasts of one (root, size) stand on a communicator, as
/// [`crate::TopoBcast::topo_route`] reports it. The same on every rank after the same calls
/// (every decision is collective), so a program or a benchmark may branch on it without
/// communicating.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RouteState {
    /// No broadcast of this root and size class on the communicator yet: the route is chosen
    /// at the first.
    Unseen,
    /// The two routes are being timed against each other: calls alternate between them, for at
    /// most `2 * (TRIAL_MAX_CALLS + 1)` calls. A benchmark of the settled route waits this
    /// out.
    Trial,
    /// Every later call takes this route.
    Settled(Route),
}

/// `TREECAST_ROUTE`: how routes are chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum RoutePolicy {
    /// By prediction, else by a timed trial (the default).
    #[default]
    Auto,
    /// Always treecast's plan (full error detection).
    Plan,
    /// Always the library's `MPI_Bcast` (where a call can use it).
    Library,
}

impl RoutePolicy {
    pub fn parse(s: &str) -> Option<RoutePolicy> {
        match s.trim() {
            "auto" => Some(RoutePolicy::Auto),
            "plan" => Some(RoutePolicy::Plan),
            "library" => Some(RoutePolicy::Library),
            _ => None,
        }
    }
}

/// Timed calls per route in one stage of a trial; a decision is taken after each stage.
pub const TRIAL_CALLS: usize = 5;

/// Most timed calls per route before the trial must end.
pub const TRIAL_MAX_CALLS: usize = 20;

/// After any stage, a plan at most this fraction of the library's time wins at once, and one
/// at least [`TRIAL_CLEAR_LOSS`] times it loses at once. Why so wide: on the emulated 3x3 cluster
/// (nine ranks on two cores) the medians of 5 calls of each route read plan / library 0.75 to
/// 1.48 for 1 KiB, whose plan runs 1.0-1.2x the library's time once settled. A plan that won
/// such a stage at 0.75 (then the rule, 0.8) ran 1.22x slower than `MPI_Bcast` for the rest of
/// the job.
const TRIAL_CLEAR: f64 = 0.5;

/// See [`TRIAL_CLEAR`].
const TRIAL_CLEAR_LOSS: f64 = 1.5;

/// At the end of a trial, the plan wins only at this fraction of the library's time or less:
/// a plan that seems a few percent faster over a handful of noisy calls may well be slower
/// (on the emulated 3x3 cluster a 1 KiB plan won a 5-call trial by 3%, 361 against 372 us,
/// then ran 12% slower than the library in the next 200 calls). The library is the safe
/// side: "never slower than MPI_Bcast".
const TRIAL_MARGIN: f64 = 0.95;

/// Largest size class the library route serves: `MPI_Bcast` takes an `int` count, and every
/// element is at least one byte, so a message below 2^31 bytes fits whatever its datatype.
pub const LIBRARY_MAX_CLASS: u8 = 31;

/// A plan whose predicted time is at most this fraction of the library's simulated lower bound
/// wins without a trial.
const CLEAR_WIN: f64 = 0.5;

/// The route of one (root, size class): decided, or being tried.
#[derive(Clone, Debug, Default)]
pub struct Selection {
    decided: Option<Route>,
    calls: u32,
    library_s: Vec<f64>,
    plan_s: Vec<f64>,
    /// Why the route is what it is (for the log and the profile).
    reason: &'static str,
    /// After a trial: the slowest rank's median times `[library, plan]` that decided it.
    trial_s: Option<[f64; 2]>,
}

impl Selection {
    pub fn decided(route: Route, reason: &'static str) -> Selection {
        Selection {
            decided: Some(route),
            reason,
            ..Selection::default()
        }
    }

    pub fn trial() -> Selection {
        Selection {
            reason: "on trial",
            ..Selection::default()
        }
    }

    /// Why the route is what it is.
    pub fn reason(&self) -> &'static str {
        self.reason
    }

    /// The slowest rank's median times `[library, plan]` (seconds) of a completed trial.
    pub fn trial_s(&self) -> Option<[f64; 2]> {
        self.trial_s
    }

    /// The route settled on, if any.
    pub fn settled(&self) -> Option<Route> {
        self.decided
    }

    /// The route of the next call: the decision, else the trial's order, library, plan, plan,
    /// library, library, plan, ... (a program that alternates between two kinds of work, or a
    /// benchmark that rotates what runs before each call, would favour one route of a strict
    /// alternation).
    pub fn next(&self) -> Route {
        self.decided.unwrap_or(if self.calls.div_ceil(2).is_multiple_of(2) {
            Route::Library
        } else {
            Route::Plan
        })
    }

    /// Record a trial call's time on this rank (seconds); the first call of each route is not
    /// timed (it may set up connections). Returns true when a stage of the trial is complete
    /// and a decision is due (on every rank at the same call: it depends on the count of calls
    /// only).
    pub fn record(&mut self, route: Route, seconds: f64) -> bool {
        if self.decided.is_some() {
            return false;
        }
        self.calls += 1;
        if self.calls <= 2 {
            return false; // the first library call and the first plan call
        }
        match route {
            Route::Library => self.library_s.push(seconds),
            Route::Plan => self.plan_s.push(seconds),
        }
        let n = self.library_s.len();
        n == self.plan_s.len() && n.is_multiple_of(TRIAL_CALLS)
    }

    /// Timed calls of each route so far.
    pub fn trial_calls(&self) -> usize {
        self.library_s.len().min(self.plan_s.len())
    }

    /// This rank's median time of each route: `[library, plan]`.
    pub fn medians(&self) -> [f64; 2] {
        [median(&self.library_s), median(&self.plan_s)]
    }

    /// Decide from the slowest rank's medians (`[library, plan]`, identical on every rank), or
    /// go on with the trial (`None`):
    /// - the plan at least [`TRIAL_CLEAR_LOSS`] times the library's time: the library;
    /// - the plan at most [`TRIAL_CLEAR`] of the library's time: the plan;
    /// - in between, another stage of [`TRIAL_CALLS`] calls each, up to [`TRIAL_MAX_CALLS`];
    ///   then the plan only at [`TRIAL_MARGIN`] of the library's time or less (on a tie the
    ///   library: it keeps MPI's error semantics).
    pub fn decide(&mut self, worst: [f64; 2]) -> Option<Route> {
        let ratio = worst[1] / worst[0];
        let r = if ratio.is_nan() || ratio >= TRIAL_CLEAR_LOSS {
            Route::Library
        } else if ratio <= TRIAL_CLEAR {
            Route::Plan
        } else if self.trial_calls() < TRIAL_MAX_CALLS {
            return None;
        } else if ratio <= TRIAL_MARGIN {
            Route::Plan
        } else {
            Route::Library
        };
        self.decided = Some(r);
        self.trial_s = Some(worst);
        self.reason = "measured: the faster in a trial of both routes (slowest rank's medians)";
        Some(r)
    }
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => f64::INFINITY,
        n if n % 2 == 1 => s[n / 2],
        n => 0.5 * (s[n / 2 - 1] + s[n / 2]),
    }
}

/// Whether [`initial`] settles every root and every class within the library's reach on the
/// library at once, without a plan: `TREECAST_ROUTE=library`, or the default policy with no
/// forced algorithm and no network topology. The fast path's any-root entry relies on it.
pub fn library_for_every_root(policy: RoutePolicy, forced_algorithm: bool, network: bool) -> bool {
    match policy {
        RoutePolicy::Library => true,
        RoutePolicy::Plan => false,
        RoutePolicy::Auto => !forced_algorithm && !network,
    }
}

/// The selection a (root, size class) starts with, from inputs identical on every rank.
///
/// - `policy` forces a route (the library only up to [`LIBRARY_MAX_CLASS`]);
/// - a forced algorithm (`TREECAST_ALGORITHM`) or a class beyond the library's reach: the plan;
/// - no network topology (one host, or none known): the library — the plan would replay its
///   algorithm;
/// - a plan predicted at most half the library's time (its decision's simulated time or lower
///   bound): the plan, even one of the MPI libraries' algorithms (`mpi:...`);
/// - another plan that is one of those algorithms: the library;
/// - otherwise a trial.
pub fn initial(
    policy: RoutePolicy,
    class: u8,
    forced_algorithm: bool,
    network: bool,
    plan: Option<&LocalPlan>,
) -> Selection {
    if class > LIBRARY_MAX_CLASS {
        return Selection::decided(Route::Plan, "beyond the library's int count");
    }
    match policy {
        RoutePolicy::Plan => return Selection::decided(Route::Plan, "TREECAST_ROUTE=plan"),
        RoutePolicy::Library => return Selection::decided(Route::Library, "TREECAST_ROUTE=library"),
        RoutePolicy::Auto => {}
    }
    if forced_algorithm {
        return Selection::decided(Route::Plan, "TREECAST_ALGORITHM forces a plan");
    }
    if library_for_every_root(policy, forced_algorithm, network) {
        return Selection::decided(Route::Library, "no network topology (one host, or none known)");
    }
    let Some(plan) = plan else {
        return Selection::trial();
    };
    let clear_win = matches!(
        (plan.predicted_time_s, plan.library_time_s),
        (Some(p), Some(l)) if p <= CLEAR_WIN * l
    );
    // An algorithm of a library's catalogue is not what that library runs for this call (its
    // decision table picks one): replayed by treecast it may still win clearly. Under a busy
    // start-up the token ring read 1.2 ms per message instead of 0.24 on the emulated 3x3
    // cluster, the planner chose Open MPI's 128 KiB pipeline for 4 MiB (211 ms predicted), and
    // the library's own choice then ran 706 ms, 6.3 times the bound, for the whole job.
    if plan.algorithm.starts_with("mpi:") && !clear_win {
        return Selection::decided(Route::Library, "the best plan is an MPI library's algorithm");
    }
    if clear_win {
        Selection::decided(Route::Plan, "plan predicted at most half the library's time")
    } else {
        Selection::trial()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(algorithm: &str, predicted: Option<f64>, library: Option<f64>) -> LocalPlan {
        LocalPlan {
            root: 0,
            nsegs: 1,
            ops: Vec::new(),
            algorithm: algorithm.into(),
            predicted_time_s: predicted,
            planned_bytes: 8,
            library_time_s: library,
        }
    }

    #[test]
    fn clear_cases_need_no_trial() {
        let p = plan("hier-pipeline", Some(0.1), Some(0.6));
        let close = plan("hier-pipeline", Some(0.1), Some(0.15));
        assert_eq!(
            initial(RoutePolicy::Auto, 10, false, false, Some(&p)).settled(),
            Some(Route::Library)
        );
        assert_eq!(
            initial(
                RoutePolicy::Auto,
                10,
                false,
                true,
                Some(&plan("mpi:binomial", Some(1.0), Some(1.0)))
            )
            .settled(),
            Some(Route::Library)
        );
        // A library's algorithm predicted at most half what the library itself runs: the plan.
        assert_eq!(
            initial(
                RoutePolicy::Auto,
                22,
                false,
                true,
                Some(&plan("mpi:pipeline:seg=131072", Some(0.21), Some(0.66)))
            )
            .settled(),
            Some(Route::Plan)
        );
        assert_eq!(
            initial(RoutePolicy::Auto, 22, false, true, Some(&p)).settled(),
            Some(Route::Plan)
        );
        assert_eq!(
            initial(RoutePolicy::Auto, 22, false, true, Some(&close)).settled(),
            None
        );
        assert_eq!(
            initial(RoutePolicy::Auto, 10, true, false, Some(&p)).settled(),
            Some(Route::Plan)
        );
        assert_eq!(
            initial(RoutePolicy::Plan, 3, false, false, None).settled(),
            Some(Route::Plan)
        );
        assert_eq!(
            initial(RoutePolicy::Library, 3, false, true, Some(&p)).settled(),
            Some(Route::Library)
        );
        // Beyond an int count the library cannot serve, whatever the policy.
        assert_eq!(
            initial(RoutePolicy::Library, 32, false, false, None).settled(),
            Some(Route::Plan)
        );
    }

    #[test]
    fn a_trial_alternates_in_pairs_then_takes_the_faster_by_the_worst_rank() {
        let mut s = Selection::trial();
        let mut due = false;
        let mut order = String::new();
        for k in 0..2 * TRIAL_CALLS + 2 {
            let r = s.next();
            order.push(if r == Route::Library { 'L' } else { 'P' });
            // The first call of each route sets up connections: slow, and not counted.
            let t = if k < 2 {
                1.0
            } else if r == Route::Library {
                2e-6
            } else {
                1e-6
            };
            due = s.record(r, t);
            assert_eq!(due, k + 1 == 2 * TRIAL_CALLS + 2, "call {k}");
        }
        assert_eq!(order, "LPPLLPPLLPPL");
        assert!(due);
        assert_eq!(s.medians(), [2e-6, 1e-6]);
        // This rank saw the plan faster, but the slowest rank did not: the worst decides.
        assert_eq!(s.decide([2e-6, 3e-6]), Some(Route::Library));
        assert_eq!(s.next(), Route::Library);
        assert!(!s.record(Route::Library, 1.0), "no trial after the decision");
        // Clearly faster: the plan at once.
        let mut c = Selection::trial();
        assert_eq!(c.decide([1e-6, 0.45e-6]), Some(Route::Plan));
    }

    /// Run stages of a trial whose slowest-rank medians are always `worst`; the decision and
    /// the calls each route had by then.
    fn staged(worst: [f64; 2]) -> (Route, usize) {
        let mut s = Selection::trial();
        loop {
            let mut due = false;
            while !due {
                let r = s.next();
                due = s.record(r, 1e-6);
            }
            if let Some(r) = s.decide(worst) {
                return (r, s.trial_calls());
            }
            assert!(s.settled().is_none());
        }
    }

    #[test]
    fn a_plan_within_noise_of_the_library_gets_more_calls_then_must_win_by_a_margin() {
        // 3% faster is within noise: four stages, then the library.
        assert_eq!(staged([1e-6, 0.97e-6]), (Route::Library, TRIAL_MAX_CALLS));
        // 10% faster: four stages, then the plan.
        assert_eq!(staged([1e-6, 0.9e-6]), (Route::Plan, TRIAL_MAX_CALLS));
        // 25% faster or 20% slower over 5 calls is what noise alone did on nine ranks on two
        // cores: four stages; a tie keeps the library.
        assert_eq!(staged([1e-6, 0.75e-6]), (Route::Plan, TRIAL_MAX_CALLS));
        assert_eq!(staged([1e-6, 1.2e-6]), (Route::Library, TRIAL_MAX_CALLS));
        assert_eq!(staged([1e-6, 1e-6]), (Route::Library, TRIAL_MAX_CALLS));
        // Clearly slower or clearly faster: decided after the first stage.
        assert_eq!(staged([1e-6, 1.5e-6]), (Route::Library, TRIAL_CALLS));
        assert_eq!(staged([1e-6, 0.5e-6]), (Route::Plan, TRIAL_CALLS));
    }
}
