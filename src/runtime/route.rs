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
//! **Segments.** Where the plan is segmented and the planner has an unsegmented plan for the
//! class that a trial can afford, the two plans are first timed against each other in the same
//! way (the planner's plan keeps the class unless the unsegmented one wins by the margin); the
//! winner is the class's plan from then on, for its calls and for the profile's predictions,
//! and is tried against the library as above unless it was predicted to win clearly. Why: the
//! segment count rests on what the set-up measures least well (how fast the uplinks pass a
//! short burst, what each extra message costs on a busy host).
//!
//! **Semantics.** Results are the same either way. Error detection differs: treecast's route
//! finds a rank whose count disagrees with the root's and turns it into `MPI_ERR_TRUNCATE` there
//! and an error downstream, without hanging; on the library route erroneous calls behave as
//! they do with `MPI_Bcast` itself. `TREECAST_ROUTE=plan` keeps every call on the checked route.
//! Every rank must choose the same route for a call, which holds when all pass the same root
//! and message size (as `MPI_Bcast` requires). A rank whose size falls in another class keeps
//! its own trial's count, so while either class is on trial it may take another arm than the
//! root (the library, or the other of two plans whose segments differ): there an erroneous
//! call can wait as it would in `MPI_Bcast` (on a plan, `TREECAST_TIMEOUT` ends the wait with
//! an error).
//! `TREECAST_ROUTE=plan` has no trials and keeps the checked route for every call.

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

/// What a call runs while the route of its (root, size class) is being chosen: the library's
/// broadcast, the planner's plan, or the planner's best unsegmented plan. The last is tried only
/// against the planner's segmented plan, before the library is (see [`initial`]); after that
/// trial the planner plans the class with its winner, so a settled route is one of [`Route`]'s.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arm {
    Library,
    Plan,
    Unsegmented,
}

impl Arm {
    /// The route a call of this arm takes.
    pub fn route(self) -> Route {
        match self {
            Arm::Library => Route::Library,
            Arm::Plan | Arm::Unsegmented => Route::Plan,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Arm::Library | Arm::Plan => self.route().name(),
            Arm::Unsegmented => "unsegmented treecast plan",
        }
    }
}

/// The route of one (root, size class): decided, or being tried.
#[derive(Clone, Debug)]
pub struct Selection {
    decided: Option<Route>,
    /// The two arms on trial: the incumbent, then the challenger (which must win by a margin).
    arms: [Arm; 2],
    /// After a trial of the planner's segments against the unsegmented plan, whether the
    /// winner is then tried against the library (no clear win predicted over it).
    then_library: bool,
    calls: u32,
    /// Timed calls of each arm.
    times_s: [Vec<f64>; 2],
    /// Why the route is what it is (for the log and the profile).
    reason: &'static str,
    /// After a trial against the library: the slowest rank's median times `[library, plan]`
    /// that decided it.
    trial_s: Option<[f64; 2]>,
    /// After a trial of the planner's segments: the slowest rank's median times
    /// `[segmented, unsegmented]`.
    segments_trial_s: Option<[f64; 2]>,
}

impl Default for Selection {
    fn default() -> Selection {
        Selection {
            decided: None,
            arms: [Arm::Library, Arm::Plan],
            then_library: false,
            calls: 0,
            times_s: [Vec::new(), Vec::new()],
            reason: "",
            trial_s: None,
            segments_trial_s: None,
        }
    }
}

impl Selection {
    pub fn decided(route: Route, reason: &'static str) -> Selection {
        Selection {
            decided: Some(route),
            reason,
            ..Selection::default()
        }
    }

    /// A trial of the library against the plan.
    pub fn trial() -> Selection {
        Selection {
            reason: "on trial",
            ..Selection::default()
        }
    }

    /// A trial of the planner's segmented plan against its unsegmented one; then, if
    /// `then_library`, of the winner against the library.
    pub fn segments_trial(then_library: bool) -> Selection {
        Selection {
            arms: [Arm::Plan, Arm::Unsegmented],
            then_library,
            reason: "on trial: segmented against unsegmented",
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

    /// The slowest rank's median times `[segmented, unsegmented]` (seconds) of a completed
    /// trial of the planner's segments.
    pub fn segments_trial_s(&self) -> Option<[f64; 2]> {
        self.segments_trial_s
    }

    /// The route settled on, if any.
    pub fn settled(&self) -> Option<Route> {
        self.decided
    }

    /// The arm of the next call: the decision, else the trial's order, incumbent, challenger,
    /// challenger, incumbent, incumbent, challenger, ... (a program that alternates between
    /// two kinds of work, or a benchmark that rotates what runs before each call, would favour
    /// one arm of a strict alternation).
    pub fn next(&self) -> Arm {
        match self.decided {
            Some(Route::Library) => Arm::Library,
            Some(Route::Plan) => Arm::Plan,
            None => self.arms[usize::from(!self.calls.div_ceil(2).is_multiple_of(2))],
        }
    }

    /// Record a trial call's time on this rank (seconds); the first call of each arm is not
    /// timed (it may set up connections). Returns true when a stage of the trial is complete
    /// and a decision is due (on every rank at the same call: it depends on the count of calls
    /// only).
    pub fn record(&mut self, arm: Arm, seconds: f64) -> bool {
        if self.decided.is_some() {
            return false;
        }
        self.calls += 1;
        if self.calls <= 2 {
            return false; // the first call of each arm
        }
        let i = usize::from(arm == self.arms[1]);
        self.times_s[i].push(seconds);
        let n = self.times_s[0].len();
        n == self.times_s[1].len() && n.is_multiple_of(TRIAL_CALLS)
    }

    /// Timed calls of each arm so far.
    pub fn trial_calls(&self) -> usize {
        self.times_s[0].len().min(self.times_s[1].len())
    }

    /// The two arms of the trial under way: incumbent, challenger.
    pub fn arms(&self) -> [Arm; 2] {
        self.arms
    }

    /// This rank's median time of each arm: `[incumbent, challenger]`.
    pub fn medians(&self) -> [f64; 2] {
        [median(&self.times_s[0]), median(&self.times_s[1])]
    }

    /// Decide a stage from the slowest rank's medians (`[incumbent, challenger]`, identical on
    /// every rank); the winning arm, or `None` to go on with the trial:
    /// - the challenger at least [`TRIAL_CLEAR_LOSS`] times the incumbent's time: the
    ///   incumbent;
    /// - the challenger at most [`TRIAL_CLEAR`] of it: the challenger;
    /// - in between, another stage of [`TRIAL_CALLS`] calls each, up to [`TRIAL_MAX_CALLS`];
    ///   then the challenger only at [`TRIAL_MARGIN`] of the incumbent's time or less (on a
    ///   tie the library, which keeps MPI's error semantics, or the planner's own plan).
    ///
    /// A trial of the planner's segments that is to go on against the library starts that
    /// trial (the winner as the plan: the caller makes the planner plan the class with it);
    /// otherwise the route is settled.
    pub fn decide(&mut self, worst: [f64; 2]) -> Option<Arm> {
        let ratio = worst[1] / worst[0];
        let won = if ratio.is_nan() || ratio >= TRIAL_CLEAR_LOSS {
            self.arms[0]
        } else if ratio <= TRIAL_CLEAR {
            self.arms[1]
        } else if self.trial_calls() < TRIAL_MAX_CALLS {
            return None;
        } else if ratio <= TRIAL_MARGIN {
            self.arms[1]
        } else {
            self.arms[0]
        };
        if self.arms[0] == Arm::Library {
            self.trial_s = Some(worst);
            self.reason = "measured: the faster in a trial of both routes (slowest rank's medians)";
        } else {
            self.segments_trial_s = Some(worst);
            self.reason = if won == Arm::Unsegmented {
                "plan predicted at most half the library's time; unsegmented: faster in a trial"
            } else {
                "plan predicted at most half the library's time; its segments: not slower in a trial"
            };
            if self.then_library {
                // The winner is the plan from now on: try it against the library.
                let segments_trial_s = self.segments_trial_s;
                *self = Selection::trial();
                self.segments_trial_s = segments_trial_s;
                return Some(won);
            }
        }
        self.decided = Some(won.route());
        Some(won)
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
///
/// `unsegmented`: the plan is segmented and the planner has an unsegmented one for the class
/// (`Planner::unsegmented_alternative`). Where the plan would then win at once or go on trial,
/// the two plans are first tried against each other: the segment count rests on what the
/// set-up measures least well, how fast the uplinks pass a short burst and what each extra
/// message costs on a busy host. On the emulated 3x3 cluster (token-bucket uplinks) the planner
/// split 16 KiB into 2 or 4 segments on the uplinks' sustained rate, and the unsegmented plan
/// ran faster in 6 of 8 jobs (medians 269 against 442 us, 2026-11-29). With this trial the
/// unsegmented plan won it in 8 of 8 jobs, and 16 KiB ran 230-254 us against 323-601 us for
/// the code before, in jobs alternating with it.
pub fn initial(
    policy: RoutePolicy,
    class: u8,
    forced_algorithm: bool,
    network: bool,
    plan: Option<&LocalPlan>,
    unsegmented: bool,
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
    match (clear_win, unsegmented) {
        (true, false) => Selection::decided(Route::Plan, "plan predicted at most half the library's time"),
        (true, true) => Selection::segments_trial(false),
        (false, true) => Selection::segments_trial(true),
        (false, false) => Selection::trial(),
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
            initial(RoutePolicy::Auto, 10, false, false, Some(&p), false).settled(),
            Some(Route::Library)
        );
        assert_eq!(
            initial(
                RoutePolicy::Auto,
                10,
                false,
                true,
                Some(&plan("mpi:binomial", Some(1.0), Some(1.0))),
                false
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
                Some(&plan("mpi:pipeline:seg=131072", Some(0.21), Some(0.66))),
                false
            )
            .settled(),
            Some(Route::Plan)
        );
        assert_eq!(
            initial(RoutePolicy::Auto, 22, false, true, Some(&p), false).settled(),
            Some(Route::Plan)
        );
        assert_eq!(
            initial(RoutePolicy::Auto, 22, false, true, Some(&close), false).settled(),
            None
        );
        assert_eq!(
            initial(RoutePolicy::Auto, 10, true, false, Some(&p), false).settled(),
            Some(Route::Plan)
        );
        assert_eq!(
            initial(RoutePolicy::Plan, 3, false, false, None, false).settled(),
            Some(Route::Plan)
        );
        assert_eq!(
            initial(RoutePolicy::Library, 3, false, true, Some(&p), false).settled(),
            Some(Route::Library)
        );
        // Beyond an int count the library cannot serve, whatever the policy.
        assert_eq!(
            initial(RoutePolicy::Library, 32, false, false, None, false).settled(),
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
            order.push(if r == Arm::Library { 'L' } else { 'P' });
            // The first call of each route sets up connections: slow, and not counted.
            let t = if k < 2 {
                1.0
            } else if r == Arm::Library {
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
        assert_eq!(s.decide([2e-6, 3e-6]), Some(Arm::Library));
        assert_eq!(s.next(), Arm::Library);
        assert!(!s.record(Arm::Library, 1.0), "no trial after the decision");
        // Clearly faster: the plan at once.
        let mut c = Selection::trial();
        assert_eq!(c.decide([1e-6, 0.45e-6]), Some(Arm::Plan));
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
                return (r.route(), s.trial_calls());
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

    /// Run calls of a trial until a stage is due; the arms in the order they ran.
    fn stage(s: &mut Selection) -> Vec<Arm> {
        let mut ran = Vec::new();
        loop {
            let a = s.next();
            ran.push(a);
            if s.record(a, 1e-6) {
                return ran;
            }
        }
    }

    #[test]
    fn a_segmented_plan_is_first_tried_against_the_unsegmented_one() {
        let clear = plan("hier-pipeline:segs=4", Some(0.1), Some(0.6));
        // Without an unsegmented alternative a clear win needs no trial.
        assert_eq!(
            initial(RoutePolicy::Auto, 14, false, true, Some(&clear), false).settled(),
            Some(Route::Plan)
        );
        // With one, the two plans are timed, alternating in pairs; the library is not tried.
        let mut s = initial(RoutePolicy::Auto, 14, false, true, Some(&clear), true);
        assert_eq!(s.settled(), None);
        assert_eq!(s.arms(), [Arm::Plan, Arm::Unsegmented]);
        let ran = stage(&mut s);
        assert_eq!(
            &ran[..6],
            &[
                Arm::Plan,
                Arm::Unsegmented,
                Arm::Unsegmented,
                Arm::Plan,
                Arm::Plan,
                Arm::Unsegmented
            ]
        );
        assert!(!ran.contains(&Arm::Library));
        assert_eq!(s.decide([1e-3, 0.4e-3]), Some(Arm::Unsegmented));
        assert_eq!(s.settled(), Some(Route::Plan));
        assert_eq!(s.next(), Arm::Plan, "settled: the class is planned with the winner");
        assert_eq!(s.segments_trial_s(), Some([1e-3, 0.4e-3]));
        assert_eq!(s.trial_s(), None);
        // Within noise after every stage: the planner's segments keep the class.
        let mut s = initial(RoutePolicy::Auto, 14, false, true, Some(&clear), true);
        let decided = loop {
            stage(&mut s);
            if let Some(a) = s.decide([1e-3, 0.97e-3]) {
                break a;
            }
        };
        assert_eq!((decided, s.trial_calls()), (Arm::Plan, TRIAL_MAX_CALLS));

        // A plan not predicted to win clearly: the winner of the segments' trial is then tried
        // against the library, in a trial of its own.
        let close = plan("hier-pipeline:segs=4", Some(0.1), Some(0.15));
        let mut s = initial(RoutePolicy::Auto, 14, false, true, Some(&close), true);
        stage(&mut s);
        assert_eq!(s.decide([1e-3, 1.6e-3]), Some(Arm::Plan));
        assert_eq!(s.settled(), None);
        assert_eq!(s.arms(), [Arm::Library, Arm::Plan]);
        assert_eq!(s.trial_calls(), 0);
        let ran = stage(&mut s);
        assert_eq!(ran[0], Arm::Library);
        assert!(!ran.contains(&Arm::Unsegmented));
        assert_eq!(s.decide([1e-3, 2e-3]), Some(Arm::Library));
        assert_eq!(s.settled(), Some(Route::Library));
        assert_eq!(s.segments_trial_s(), Some([1e-3, 1.6e-3]));
        assert_eq!(s.trial_s(), Some([1e-3, 2e-3]));
        // An MPI library's algorithm not predicted to win clearly: the library, untried.
        assert_eq!(
            initial(
                RoutePolicy::Auto,
                14,
                false,
                true,
                Some(&plan("mpi:pipeline", Some(0.1), Some(0.15))),
                true
            )
            .settled(),
            Some(Route::Library)
        );
    }
}
