//! Why an estimate could not be computed: the errors of the `estimate` layer.
//!
//! Each variant keeps the value at fault so a caller can react to *what* went wrong (the CLI
//! prefixes the parameter errors with `--` to name its own flag); [`Display`](fmt::Display) gives
//! the one-line text the CLI prints.

use crate::schedule::PlanError;
use std::fmt;

/// Why an estimate could not be computed. One line, naming the parameter at fault.
#[derive(Clone, Debug, PartialEq)]
pub enum EstimateError {
    /// Pareto scale `k` not finite or not > 0.
    ParetoScale(f64),
    /// Pareto tail index `alpha` not finite or not > 0.
    ParetoShape(f64),
    /// Pareto shift not finite.
    ParetoShift(f64),
    /// Pareto cap at or below the support minimum.
    ParetoCap { cap: f64, lower: f64 },
    /// Normal mean not finite.
    NormalMean(f64),
    /// Normal standard deviation not finite or not > 0.
    NormalSigma(f64),
    /// A fit of `model` ("pareto" or "normal") given no samples.
    NoSamples { model: &'static str },
    /// Sample `index` (1-based) of a Pareto fit is not a finite number > 0.
    ParetoSample { index: usize, value: f64 },
    /// Sample `index` (1-based) of a normal fit is not finite.
    NormalSample { index: usize, value: f64 },
    /// A receiver count that is not finite or not > 0.
    ReceiverCount(f64),
    /// E\[max\] asked of no receivers.
    NoReceivers,
    /// A default tail index that is not finite or not > 1.
    DefaultTailIndex(f64),
    /// Link latencies built for another topology than the one evaluated.
    ForeignLatencies,
    /// Monte Carlo with fewer than 2 samples.
    TooFewSamples,
    /// The analytic model with fewer than 16 grid points.
    TooFewGridPoints,
    /// The plan and the topology disagree on the number of ranks.
    RankMismatch { plan: u32, topology: usize },
    /// The plan failed validation.
    InvalidPlan(PlanError),
    /// Entry times that are not one finite, non-negative time per rank.
    BadEntries { ranks: usize },
    /// A root that is not one of the ranks.
    BadRoot { root: usize, ranks: usize },
}

impl fmt::Display for EstimateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use EstimateError::*;
        match self {
            ParetoScale(k) => write!(f, "pareto: k must be finite and > 0, got {k}"),
            ParetoShape(alpha) => write!(f, "pareto: alpha must be finite and > 0, got {alpha}"),
            ParetoShift(c) => write!(f, "pareto: shift must be finite, got {c}"),
            ParetoCap { cap, lower } => write!(f, "pareto: cap {cap} must exceed the support minimum {lower}"),
            NormalMean(mu) => write!(f, "normal: mu must be finite, got {mu}"),
            NormalSigma(sigma) => write!(f, "normal: sigma must be finite and > 0, got {sigma}"),
            NoSamples { model } => write!(f, "{model} fit: no samples"),
            ParetoSample { index, value } => {
                write!(
                    f,
                    "pareto fit: sample #{index} must be a finite number > 0, got {value}"
                )
            }
            NormalSample { index, value } => write!(f, "normal fit: sample #{index} is not finite ({value})"),
            ReceiverCount(count) => write!(f, "receiver count must be finite and > 0, got {count}"),
            NoReceivers => f.write_str("E[max] of an empty set of receivers"),
            DefaultTailIndex(a) => write!(f, "default tail index must be finite and > 1, got {a}"),
            ForeignLatencies => f.write_str("link latencies were built for a different topology"),
            TooFewSamples => f.write_str("Monte Carlo needs at least 2 samples"),
            TooFewGridPoints => f.write_str("analytic model needs at least 16 grid points"),
            RankMismatch { plan, topology } => {
                write!(f, "plan has {plan} ranks but the topology has {topology} rank leaves")
            }
            InvalidPlan(e) => e.fmt(f),
            BadEntries { ranks } => write!(
                f,
                "entry times must be {ranks} finite, non-negative seconds, one per rank"
            ),
            BadRoot { root, ranks } => write!(f, "root {root} is not one of the {ranks} ranks"),
        }
    }
}

impl std::error::Error for EstimateError {}

impl From<PlanError> for EstimateError {
    fn from(e: PlanError) -> Self {
        EstimateError::InvalidPlan(e)
    }
}
