//! Every predicted time of the chooser, through one interface: [`PlanPredictor`].
//!
//! Why one interface: the chooser predicts candidates, re-predicts a winner known only by its
//! analytic estimate, ranks the MPI baselines and records the chosen plan's message timing;
//! when each of those called the simulator or the cost model on its own, nothing said they
//! used the same model. Here one value, built once per planning call, holds the model (the
//! topology, the [Hourai2004] cost model for the message size, the per-message overhead and
//! [`Predictor`]) and every number the chooser reports is a [`Prediction`] it made.
//!
//! Which model: the flow simulator ([`crate::sim::simulate_plan`], non-blocking sends as
//! `exec` issues them, options [`planning_sim_options`]); the [Hourai2004] cost-model replay
//! ([`crate::plan::cost_replay`]) stands in if the simulator fails, or always with
//! [`Predictor::CostModel`]; and a candidate's analytic estimate
//! ([`crate::plan::pipeline::Estimator`]) when the plan is too large for either, or not worth
//! simulating. Each prediction says which produced it.

use crate::plan::cost::CostModel;
use crate::plan::cost_replay::{replay, SegTransfer};
use crate::plan::{Plan, SegRange};
use crate::topology::Topology;

/// How predicted times are obtained.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Predictor {
    /// The simulator when available and within the message limit, else the cost-model replay.
    #[default]
    Auto,
    /// Always the [Hourai2004] cost-model replay.
    CostModel,
}

/// The simulator as the chooser predicts with: per-message overhead `overhead_s` (sends of a
/// rank spaced by it, receipt delayed by it) and messages above
/// [`RENDEZVOUS_BYTES`](crate::plan::pipeline::RENDEZVOUS_BYTES) sent by rendezvous. Benchmarks
/// that compare against the chooser's predictions use the same.
pub fn planning_sim_options(overhead_s: f64) -> crate::sim::SimOptions {
    crate::sim::SimOptions {
        send_overhead_s: overhead_s,
        rendezvous_bytes: Some(crate::plan::pipeline::RENDEZVOUS_BYTES as f64),
        ..crate::sim::SimOptions::default()
    }
}

/// A predicted completion time and where it came from.
#[derive(Clone, Debug)]
pub struct Prediction {
    pub time_s: f64,
    /// `simulator`, `cost-model`, `analytic`, or a lower bound's label (see
    /// [`super::Evaluated::by`]).
    pub by: &'static str,
    /// The predicted timing of every message, when the predictor ran the plan.
    pub timing: Option<Vec<SegTransfer>>,
}

impl Prediction {
    /// A time known without running the plan: an analytic estimate or a lower bound.
    pub fn without_timing(time_s: f64, by: &'static str) -> Prediction {
        Prediction {
            time_s,
            by,
            timing: None,
        }
    }
}

/// The chooser's model of one (topology, message size, per-message overhead), through which
/// every plan's time is predicted. `overhead` is the per-message CPU time in seconds, `kind`
/// which model runs plans ([`Predictor`]).
pub struct PlanPredictor<'a> {
    topo: &'a Topology,
    model: &'a CostModel<'a>,
    bytes: u64,
    overhead: f64,
    kind: Predictor,
}

impl<'a> PlanPredictor<'a> {
    pub fn new(
        topo: &'a Topology,
        model: &'a CostModel<'a>,
        bytes: u64,
        overhead: f64,
        kind: Predictor,
    ) -> PlanPredictor<'a> {
        PlanPredictor {
            topo,
            model,
            bytes,
            overhead,
            kind,
        }
    }

    /// The analytic estimate of a candidate not worth (or too large) to run.
    pub fn analytic(&self, estimate: f64) -> Prediction {
        Prediction::without_timing(estimate, "analytic")
    }

    /// Predicted time of `plan`, which predictor produced it, and the predicted timing of its
    /// messages. `estimate` stands in should neither the simulator nor the replay run it.
    pub fn predict(&self, plan: &Plan, estimate: Option<f64>) -> Prediction {
        self.predict_with(self.kind, plan, estimate)
    }

    /// The timing of every message of the chosen `plan`, by the model that predicted it (`by`):
    /// the simulator's if it did, else the cost-model replay's; empty if neither runs it.
    pub fn timing(&self, plan: &Plan, by: &str) -> Vec<SegTransfer> {
        if by == "simulator" {
            self.predict_with(Predictor::Auto, plan, None)
                .timing
                .unwrap_or_default()
        } else {
            replay(self.model, plan, self.bytes)
                .map(|r| r.transfers)
                .unwrap_or_default()
        }
    }

    fn predict_with(&self, kind: Predictor, plan: &Plan, estimate: Option<f64>) -> Prediction {
        if kind == Predictor::Auto {
            // Our candidates are valid by construction (the tests validate every family).
            let o = crate::sim::SimOptions {
                trusted_plan: true,
                record: true,
                ..planning_sim_options(self.overhead)
            };
            if let Ok(r) = crate::sim::simulate_plan(self.topo, plan, self.bytes, &o) {
                let timing = r
                    .transfers
                    .iter()
                    .map(|x| SegTransfer {
                        src: x.src,
                        dst: x.dst,
                        segs: x.segs.unwrap_or(SegRange::new(0, plan.nsegs)),
                        start_s: x.start_s,
                        end_s: x.end_s,
                    })
                    .collect();
                return Prediction {
                    time_s: r.time_s,
                    by: "simulator",
                    timing: Some(timing),
                };
            }
        }
        // The [Hourai2004] cost-model replay (also the stand-in should the simulator fail).
        match replay(self.model, plan, self.bytes) {
            Ok(r) => Prediction {
                time_s: r.makespan,
                by: "cost-model",
                timing: Some(r.transfers),
            },
            Err(_) => Prediction::without_timing(estimate.unwrap_or(f64::INFINITY), "analytic"),
        }
    }
}
