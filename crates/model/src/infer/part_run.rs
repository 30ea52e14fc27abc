//! Each far-apart part inferred under its own coordinator (its leader), then handed back.
//!
//! Why: coordinated from one host, every round of every part crossed the far paths twice
//! (2.5-5 ms per round between clusters 1.25-2.5 ms apart, where a part's own rounds cost tens
//! of microseconds), and the parts, sharing rounds, waited for each other's slowest pair. On
//! two clusters of 256 hosts that coordination was 0.12 s of a 0.28 s probe. A part needs
//! nothing from the other parts until the graft, so its leader runs its insertion and
//! refinement ([`run`]) on a prober it coordinates ([`Prober::run_parts`]), and sends its tree,
//! its measurements and its report back; the coordinator grafts.
//!
//! The job and the outcome travel as bytes (postcard), so that an MPI leader, which runs this
//! same code on its own rank ([`work`]), gets exactly what a simulated one gets.

use super::driver::{Builder, Counters, Run};
use super::refine::RefineReport;
use super::tree::WorkTree;
use super::InferError;
use crate::probe::{PairMeasurement, PingSpec, ProbeError, Prober};
use serde::{Deserialize, Serialize};

/// Parts of at least this many hosts are inferred under their own leader; smaller ones grow
/// together under the coordinator, with the part of host 0.
///
/// Why: a tree grown alone estimates its noise, snap tolerance and access length from its own
/// measurements only. Under 2 us of normal jitter, 32-host parts each led alone were exact in
/// 99 of 120 trials of 4-8 such parts, against 120 of 120 grown side by side with the others,
/// their parameters estimated from all of them (families 4 x 128, 5 x 160, 8 x 256, seeds
/// 1-40: `bench_infer -- 20 families 1 32` leads them all). A lone cluster inferred by batch
/// insertion is exact in 193, 198 and 200 of 200 trials at 32, 64 and 128 hosts (the README
/// has the commands). Small parts are also the cheap ones to coordinate from afar: the
/// far-apart families whose probes took longest had parts of 64 hosts and more.
pub const LED_PART_MIN_HOSTS: usize = 64;

/// What a leader needs to infer its part, or its parts: several parts in one job grow side by
/// side in shared rounds and are refined together, their parameters (noise, snap tolerance,
/// access length) estimated from all of them (see [`LED_PART_MIN_HOSTS`]).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct PartJob {
    /// Blocks of insertion (host ids of the whole job), each in its insertion order.
    pub blocks: Vec<Vec<usize>>,
    /// The job's parts, each as indices into `blocks`.
    pub parts: Vec<Vec<usize>>,
    /// Measurements of the part's pairs made before it was handed out (the detection's warm
    /// round): the part's store starts with them.
    pub measured: Vec<PairMeasurement>,
    /// The ping protocol.
    pub spec: PingSpec,
    /// Round trips of at least this (seconds) end a pair's warm-up measurement after one
    /// sample (within a part only a spike reads that long).
    pub far_cut_s: f64,
    /// Seed of the part's own choices.
    pub seed: u64,
    /// Whether host order is a locality hint.
    pub hint: bool,
}

/// What a part's leader sends back.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct PartOutcome {
    /// One tree per part of the job, in its order (host ids of the whole job).
    pub trees: Vec<WorkTree>,
    /// Measurements made by the part, in order (not those of its job).
    pub measured: Vec<PairMeasurement>,
    /// Pairs the part found unusable.
    pub bad: Vec<(usize, usize)>,
    pub report: RefineReport,
    pub counters: Counters,
}

/// Infer one part on `prober` (coordinated by the part's leader): warm-up of its blocks, its
/// statistic, insertion and refinement, as `batch` does for the whole job.
pub(crate) fn run(prober: &mut dyn Prober, job: &PartJob) -> Result<PartOutcome, InferError> {
    let n = prober.num_hosts();
    if job.blocks.iter().flatten().any(|&h| h >= n) {
        return Err(InferError::Internal(format!(
            "a part names a host beyond the {n} probed"
        )));
    }
    let mut run = Run::new(prober, job.spec, job.seed);
    run.hint = job.hint;
    for m in &job.measured {
        run.store.add(m.clone());
    }
    let preloaded = run.store.raw.len();
    if job.parts.iter().flatten().any(|&b| b >= job.blocks.len()) {
        return Err(InferError::Internal(
            "a part names a block the job does not have".into(),
        ));
    }
    let (mains, report) = super::grow_and_refine(&mut run, &job.blocks, &job.parts, job.far_cut_s)?;
    Ok(PartOutcome {
        trees: mains.into_iter().map(|b: Builder| b.tree).collect(),
        measured: run.store.raw[preloaded..].to_vec(),
        bad: run.store.bad_pairs(),
        report,
        counters: run.counters.clone(),
    })
}

/// [`run`] on encoded bytes: the [`crate::probe::PartWork`] every prober runs. An inference
/// error travels inside the outcome (so the coordinator reports it); only the prober's own
/// errors are errors here.
pub fn work(prober: &mut dyn Prober, job: &[u8]) -> Result<Vec<u8>, ProbeError> {
    let outcome: Result<PartOutcome, String> = match postcard::from_bytes::<PartJob>(job) {
        Ok(job) => match run(prober, &job) {
            Ok(o) => Ok(o),
            Err(InferError::Probe(e)) => return Err(e),
            Err(e) => Err(e.to_string()),
        },
        Err(e) => Err(format!("unreadable part job: {e}")),
    };
    postcard::to_stdvec(&outcome).map_err(|e| ProbeError::Transport(format!("part outcome not encodable: {e}")))
}

/// Decode what [`work`] returned.
pub(crate) fn decode(bytes: &[u8]) -> Result<PartOutcome, InferError> {
    let r: Result<PartOutcome, String> =
        postcard::from_bytes(bytes).map_err(|e| InferError::Internal(format!("unreadable part outcome: {e}")))?;
    r.map_err(|e| InferError::Internal(format!("a far-apart part failed: {e}")))
}

/// Run every part's job: under its own leader where the prober has coordinators per part,
/// else in turn on the one prober.
pub(crate) fn run_all(
    prober: &mut dyn Prober,
    leaders: &[usize],
    jobs: &[PartJob],
) -> Result<Vec<PartOutcome>, InferError> {
    let encoded = jobs
        .iter()
        .map(postcard::to_stdvec)
        .collect::<Result<Vec<Vec<u8>>, _>>()
        .map_err(|e| InferError::Internal(format!("part job not encodable: {e}")))?;
    let outs = match prober.run_parts(leaders, &encoded, work) {
        Some(r) => r?,
        None => encoded.iter().map(|j| work(prober, j)).collect::<Result<Vec<_>, _>>()?,
    };
    if outs.len() != jobs.len() {
        return Err(InferError::Internal(format!(
            "{} part outcomes for {} parts",
            outs.len(),
            jobs.len()
        )));
    }
    outs.iter().map(|o| decode(o)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::{NoiseModel, SimProber};
    use crate::topology::gen::Clusters;

    #[test]
    fn a_job_and_its_outcome_travel_as_bytes() {
        // One cluster of 16 hosts (two leaves) as a job of one part in two blocks.
        let t = Clusters::spread(1, 16, 8, 1e-4, 1e-4).build().unwrap();
        let mut p = SimProber::new(&t, NoiseModel::default(), 3).unwrap();
        let job = PartJob {
            blocks: vec![(0..8).collect(), (8..16).collect()],
            parts: vec![vec![0, 1]],
            measured: Vec::new(),
            spec: PingSpec::default(),
            far_cut_s: f64::INFINITY,
            seed: 3,
            hint: true,
        };
        let out = decode(&work(&mut p, &postcard::to_stdvec(&job).unwrap()).unwrap()).unwrap();
        assert_eq!(out.trees.len(), 1);
        let t = &out.trees[0];
        assert_eq!(t.num_hosts_in(), 16);
        // Two leaf switches of 8 joined by one link (their common parent joins nothing else,
        // so RTTs cannot show it).
        let mut leaves: Vec<Vec<usize>> = t
            .switches()
            .map(|v| {
                t.children(v)
                    .iter()
                    .filter_map(|&c| t.host_of(c))
                    .collect::<Vec<usize>>()
            })
            .filter(|h| !h.is_empty())
            .collect();
        for l in &mut leaves {
            l.sort_unstable();
        }
        leaves.sort();
        let (a, b): (Vec<usize>, Vec<usize>) = ((0..8).collect(), (8..16).collect());
        assert_eq!(leaves, vec![a, b]);
        assert_eq!(t.switches().count(), 2, "{leaves:?}");
        assert!(!out.measured.is_empty());
        assert_eq!(out.measured.len(), p.stats().ping_measurements as usize);
        // The coordinator's check of a tree that arrived as bytes.
        let all: Vec<usize> = (0..16).collect();
        assert!(t.holds_exactly(16, &all));
        assert!(!t.holds_exactly(17, &all), "other host slots");
        assert!(!t.holds_exactly(16, &all[..15]), "a host too many");
        let mut pair = WorkTree::new(16);
        pair.init_pair(3, 5, 25e-6);
        assert!(pair.holds_exactly(16, &[3, 5]) && !pair.holds_exactly(16, &[3, 4]));
    }

    #[test]
    fn a_bad_job_is_an_error_that_names_it() {
        let t = Clusters::spread(1, 8, 8, 1e-4, 1e-4).build().unwrap();
        let mut p = SimProber::new(&t, NoiseModel::default(), 1).unwrap();
        let e = decode(&work(&mut p, b"not a job").unwrap()).unwrap_err();
        assert!(e.to_string().contains("unreadable part job"), "{e}");
        let job = PartJob {
            blocks: vec![vec![0, 1, 99]],
            parts: vec![vec![0]],
            measured: Vec::new(),
            spec: PingSpec::default(),
            far_cut_s: f64::INFINITY,
            seed: 1,
            hint: true,
        };
        let e = decode(&work(&mut p, &postcard::to_stdvec(&job).unwrap()).unwrap()).unwrap_err();
        assert!(e.to_string().contains("beyond the 8 probed"), "{e}");
        let job = PartJob {
            blocks: vec![vec![0, 1]],
            parts: vec![vec![3]],
            ..job
        };
        let e = decode(&work(&mut p, &postcard::to_stdvec(&job).unwrap()).unwrap()).unwrap_err();
        assert!(e.to_string().contains("block the job does not have"), "{e}");
        assert!(decode(b"garbage")
            .unwrap_err()
            .to_string()
            .contains("unreadable part outcome"));
    }
}
