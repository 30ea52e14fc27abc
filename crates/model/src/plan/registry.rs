//! The one registry of broadcast algorithms: every name `treecast plan --algorithm`,
//! `treecast simulate --algorithm` and `TREECAST_ALGORITHM` accept, and every name a report
//! prints, with its parameters, family and one line of help.
//!
//! In the spirit of Open MPI's `{id, name}` table of `coll/tuned` and SimGrid's name ->
//! {description, function} map: a name means one algorithm wherever it is used, so what a
//! report prints can be passed back to run the same plan again, and an unknown name is
//! answered with the valid ones.
//!
//! Spelling: `NAME[:KEY=VALUE,...]`. A bare value sets the first parameter (`k-chains:3` is
//! `k-chains:k=3`). The chooser lists the MPI libraries' algorithms it ranks as `mpi:NAME`;
//! the `mpi:` prefix is accepted on input and only allows the [`Family::Library`] names.
//!
//! The table is [`ALGORITHMS`]; [`Algorithm`] is a parsed name. Plans are built by
//! [`crate::plan::plan_detailed`] (which dispatches on the family) or, for the MPI libraries'
//! algorithms, [`Baseline::build`].

use super::baselines::{Baseline, HAN_SEGMENT_BYTES, KNOMIAL_RADIX};
use super::pipeline::HostScheme;
use super::DEFAULT_SEGMENT_BYTES;
use crate::util::bytes::parse_size;
use std::fmt;
use std::str::FromStr;

/// Where an algorithm comes from, which decides what it needs to build a plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// `auto`: predicts every candidate of the other families and takes the fastest.
    Chooser,
    /// treecast's own planners: they need the network topology.
    Treecast,
    /// The MPI libraries' algorithms (Open MPI, MPICH, SMPI): rank-order shapes, except HAN and
    /// the topology wave, which need to know where ranks run.
    Library,
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Family::Chooser => "chooser",
            Family::Treecast => "treecast",
            Family::Library => "mpi",
        })
    }
}

/// One parameter of an algorithm: its key, what its value is, and the default (a value, or
/// words saying who chooses it).
#[derive(Clone, Copy, Debug)]
pub struct Param {
    pub key: &'static str,
    pub value: &'static str,
    pub default: &'static str,
}

/// One registered algorithm.
pub struct Entry {
    pub name: &'static str,
    pub params: &'static [Param],
    pub family: Family,
    pub help: &'static str,
    /// Builds the [`Algorithm`] from the name's parameters.
    make: fn(&mut Args) -> Result<Algorithm, NameError>,
}

const SEG: Param = Param {
    key: "seg",
    value: "SIZE",
    default: "0",
};
const SEGS: Param = Param {
    key: "segs",
    value: "S",
    default: "chosen by the segment-count model",
};

/// Every algorithm, in the order help texts list them. The MPI libraries' algorithms keep the
/// order in which the chooser ranks them (ties go to the earlier).
pub const ALGORITHMS: &[Entry] = &[
    Entry {
        name: "auto",
        params: &[],
        family: Family::Chooser,
        help: "predict every candidate below (simulator or cost model) and run the fastest",
        make: |_| Ok(Algorithm::Auto),
    },
    Entry {
        name: "optimal",
        params: &[],
        family: Family::Treecast,
        help: "branch and bound on the [Hourai2004] model: proven-optimal unsegmented schedule",
        make: |_| Ok(Algorithm::Optimal),
    },
    Entry {
        name: "greedy",
        params: &[],
        family: Family::Treecast,
        help: "earliest-completion greedy schedule, unsegmented",
        make: |_| Ok(Algorithm::Greedy),
    },
    Entry {
        name: "hier",
        params: &[],
        family: Family::Treecast,
        help: "hierarchical relay tree ([Takizawa2009]), unsegmented",
        make: |_| Ok(Algorithm::Hier),
    },
    Entry {
        name: "dfs-binomial",
        params: &[],
        family: Family::Treecast,
        help: "binomial tree over the topology's depth-first order, unsegmented",
        make: |_| Ok(Algorithm::DfsBinomial),
    },
    Entry {
        name: "dfs-chain",
        params: &[SEGS],
        family: Family::Treecast,
        help: "chain in the topology's depth-first order, pipelined ([Shirai2007] §6.2)",
        make: |a| Ok(Algorithm::DfsChain { segs: a.segs()? }),
    },
    Entry {
        name: "two-tree",
        params: &[
            Param {
                key: "hosts",
                value: "chain|two-tree",
                default: "chain",
            },
            SEGS,
        ],
        family: Family::Treecast,
        help: "two trees over the hosts, each carrying half the segments, pipelined",
        make: |a| {
            let hosts = match a.take("hosts").as_deref() {
                None | Some("chain") => HostScheme::Chain,
                Some("two-tree") => HostScheme::TwoTree,
                Some(v) => return Err(a.bad("hosts", format!("'{v}' is neither chain nor two-tree"))),
            };
            Ok(Algorithm::TwoTree { hosts, segs: a.segs()? })
        },
    },
    Entry {
        name: "hier-pipeline",
        params: &[SEGS],
        family: Family::Treecast,
        help: "the hierarchical relay tree, pipelined",
        make: |a| Ok(Algorithm::HierPipeline { segs: a.segs()? }),
    },
    Entry {
        name: "k-chains",
        params: &[
            Param {
                key: "k",
                value: "K",
                default: "2",
            },
            SEGS,
        ],
        family: Family::Treecast,
        help: "k chains from the root over the depth-first order, pipelined",
        make: |a| {
            let k = a.int("k", 1)?.unwrap_or(2);
            Ok(Algorithm::KChains { k, segs: a.segs()? })
        },
    },
    Entry {
        name: "flat",
        params: &[],
        family: Family::Library,
        help: "the root sends to every rank in rank order (Open MPI basic_linear, SMPI flattree)",
        make: |_| Ok(Algorithm::Library(Baseline::Flat)),
    },
    Entry {
        name: "binomial",
        params: &[SEG],
        family: Family::Library,
        help: "binomial tree, largest subtree first (MPICH, SMPI binomial_tree)",
        make: |a| Ok(Algorithm::Library(Baseline::Binomial { seg: a.seg(0)? })),
    },
    Entry {
        name: "ompi-binomial",
        params: &[SEG],
        family: Family::Library,
        help: "binomial tree, smallest subtree first (Open MPI bmtree)",
        make: |a| Ok(Algorithm::Library(Baseline::OmpiBinomial { seg: a.seg(0)? })),
    },
    Entry {
        name: "binary",
        params: &[SEG],
        family: Family::Library,
        help: "binary tree, level order (Open MPI bintree)",
        make: |a| Ok(Algorithm::Library(Baseline::Binary { seg: a.seg(0)? })),
    },
    Entry {
        name: "knomial",
        params: &[
            Param {
                key: "k",
                value: "K",
                default: "4",
            },
            SEG,
        ],
        family: Family::Library,
        help: "k-nomial tree (Open MPI kmtree)",
        make: |a| {
            let k = a.int("k", 2)?.unwrap_or(KNOMIAL_RADIX);
            Ok(Algorithm::Library(Baseline::Knomial { k, seg: a.seg(0)? }))
        },
    },
    Entry {
        name: "chain",
        params: &[SEG],
        family: Family::Library,
        help: "chain in rank order (Open MPI chain with fan-out 1)",
        make: |a| Ok(Algorithm::Library(Baseline::Chain { seg: a.seg(0)? })),
    },
    Entry {
        name: "pipeline",
        params: &[Param {
            key: "seg",
            value: "SIZE",
            default: "128KiB",
        }],
        family: Family::Library,
        help: "chain in rank order, pipelined in segments (Open MPI pipeline)",
        make: |a| {
            Ok(Algorithm::Library(Baseline::Chain {
                seg: a.seg(DEFAULT_SEGMENT_BYTES)?,
            }))
        },
    },
    Entry {
        name: "split-binary",
        params: &[],
        family: Family::Library,
        help: "halves down a binary tree, then a pairwise swap (Open MPI split_bintree)",
        make: |_| Ok(Algorithm::Library(Baseline::SplitBinary)),
    },
    Entry {
        name: "scatter-ring",
        params: &[],
        family: Family::Library,
        help: "binomial scatter + ring allgather (Open MPI alg 9, MPICH)",
        make: |_| Ok(Algorithm::Library(Baseline::ScatterRing)),
    },
    Entry {
        name: "scatter-rd",
        params: &[],
        family: Family::Library,
        help: "binomial scatter + recursive-doubling allgather (Open MPI alg 8, MPICH)",
        make: |_| Ok(Algorithm::Library(Baseline::ScatterRd)),
    },
    Entry {
        name: "ompi",
        params: &[],
        family: Family::Library,
        help: "what Open MPI 4.1's fixed decision picks for the ranks and bytes",
        make: |_| Ok(Algorithm::Library(Baseline::Ompi)),
    },
    Entry {
        name: "han",
        params: &[Param {
            key: "seg",
            value: "SIZE",
            default: "64KiB",
        }],
        family: Family::Library,
        help: "two levels: node leaders, then within nodes, pipelined (Open MPI coll/han)",
        make: |a| {
            Ok(Algorithm::Library(Baseline::Han {
                seg: a.seg(HAN_SEGMENT_BYTES)?,
            }))
        },
    },
    Entry {
        name: "topo-wave",
        params: &[],
        family: Family::Library,
        help: "greedy earliest-arrival tree, switch by switch (MPICH topology_wave)",
        make: |_| Ok(Algorithm::Library(Baseline::TopoWave)),
    },
];

/// Other spellings accepted on input (never printed).
const ALIASES: &[(&str, &str)] = &[("linear", "flat")];

/// The names of `family` (every family: `None`), in table order.
pub fn names(family: Option<Family>) -> Vec<&'static str> {
    ALGORITHMS
        .iter()
        .filter(|e| family.is_none_or(|f| e.family == f))
        .map(|e| e.name)
        .collect()
}

/// The registry entry named `name`.
pub fn entry(name: &str) -> Option<&'static Entry> {
    let name = ALIASES.iter().find(|(a, _)| *a == name).map_or(name, |(_, n)| n);
    ALGORITHMS.iter().find(|e| e.name == name)
}

/// One line per algorithm: name with parameters, family, help and defaults (for
/// `treecast algorithms` and docs). A segment size of 0 is unsegmented.
pub fn help_table() -> String {
    let rows: Vec<(String, &Entry)> = ALGORITHMS
        .iter()
        .map(|e| {
            let params: Vec<String> = e.params.iter().map(|p| format!("{}={}", p.key, p.value)).collect();
            let name = if params.is_empty() {
                e.name.to_string()
            } else {
                format!("{}[:{}]", e.name, params.join(","))
            };
            (name, e)
        })
        .collect();
    let width = rows.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
    let mut s = String::new();
    for (name, e) in rows {
        let defaults: Vec<String> = e
            .params
            .iter()
            .map(|p| match p.default.contains(' ') {
                true => format!("{} {}", p.key, p.default),
                false => format!("{}={}", p.key, p.default),
            })
            .collect();
        let defaults = match defaults.is_empty() {
            true => String::new(),
            false => format!("; default {}", defaults.join(", ")),
        };
        s.push_str(&format!(
            "{name:<width$}  {:<8}  {}{defaults}\n",
            e.family.to_string(),
            e.help
        ));
    }
    s
}

/// A broadcast algorithm with its parameters: a parsed registry name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    /// Predict every candidate, take the fastest.
    Auto,
    /// Branch and bound ([Hourai2004]), unsegmented.
    Optimal,
    /// Greedy earliest completion, unsegmented.
    Greedy,
    /// Hierarchical relay tree, unsegmented.
    Hier,
    /// Binomial tree over the depth-first order of the topology, unsegmented.
    DfsBinomial,
    /// Depth-first pipelined chain ([Shirai2007] §6.2); `segs` forces the segment count.
    DfsChain { segs: Option<u32> },
    /// Two-tree over hosts, pipelined.
    TwoTree { hosts: HostScheme, segs: Option<u32> },
    /// The hierarchical relay tree, pipelined.
    HierPipeline { segs: Option<u32> },
    /// k chains from the root, pipelined.
    KChains { k: u32, segs: Option<u32> },
    /// One of the MPI libraries' algorithms.
    Library(Baseline),
}

impl Algorithm {
    /// The registry entry's family.
    pub fn family(&self) -> Family {
        match self {
            Algorithm::Auto => Family::Chooser,
            Algorithm::Library(_) => Family::Library,
            _ => Family::Treecast,
        }
    }

    /// The segment count the name forces, if any (treecast's pipelined planners).
    pub fn segments(&self) -> Option<u32> {
        match *self {
            Algorithm::DfsChain { segs }
            | Algorithm::TwoTree { segs, .. }
            | Algorithm::HierPipeline { segs }
            | Algorithm::KChains { segs, .. } => segs,
            _ => None,
        }
    }

    /// The same algorithm with its segment count forced to `segs` (the chooser names each
    /// pipelined candidate by the count it chose).
    pub fn with_segments(self, s: u32) -> Algorithm {
        match self {
            Algorithm::DfsChain { .. } => Algorithm::DfsChain { segs: Some(s) },
            Algorithm::TwoTree { hosts, .. } => Algorithm::TwoTree { hosts, segs: Some(s) },
            Algorithm::HierPipeline { .. } => Algorithm::HierPipeline { segs: Some(s) },
            Algorithm::KChains { k, .. } => Algorithm::KChains { k, segs: Some(s) },
            other => other,
        }
    }
}

impl FromStr for Algorithm {
    type Err = NameError;
    fn from_str(s: &str) -> Result<Self, NameError> {
        let s = s.trim();
        let (library_only, s) = match s.strip_prefix("mpi:") {
            Some(rest) => (true, rest),
            None => (false, s),
        };
        let (name, params) = match s.split_once(':') {
            Some((n, p)) => (n.trim(), p.trim()),
            None => (s, ""),
        };
        let unknown = || NameError::Unknown {
            name: name.to_string(),
            expected: names(library_only.then_some(Family::Library)).join(", "),
        };
        let e = entry(name).ok_or_else(unknown)?;
        if library_only && e.family != Family::Library {
            return Err(unknown());
        }
        let mut args = Args::parse(e, params)?;
        let a = (e.make)(&mut args)?;
        args.finish()?;
        Ok(a)
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let segs = |s: Option<u32>| s.map(|s| format!("segs={s}"));
        let (name, params): (&str, Vec<String>) = match *self {
            Algorithm::Library(b) => return b.fmt(f),
            Algorithm::Auto => ("auto", vec![]),
            Algorithm::Optimal => ("optimal", vec![]),
            Algorithm::Greedy => ("greedy", vec![]),
            Algorithm::Hier => ("hier", vec![]),
            Algorithm::DfsBinomial => ("dfs-binomial", vec![]),
            Algorithm::DfsChain { segs: s } => ("dfs-chain", segs(s).into_iter().collect()),
            Algorithm::TwoTree { hosts, segs: s } => {
                let h = (hosts == HostScheme::TwoTree).then(|| "hosts=two-tree".to_string());
                ("two-tree", h.into_iter().chain(segs(s)).collect())
            }
            Algorithm::HierPipeline { segs: s } => ("hier-pipeline", segs(s).into_iter().collect()),
            Algorithm::KChains { k, segs: s } => {
                ("k-chains", std::iter::once(format!("k={k}")).chain(segs(s)).collect())
            }
        };
        if params.is_empty() {
            f.write_str(name)
        } else {
            write!(f, "{name}:{}", params.join(","))
        }
    }
}

/// Parsing and listing the MPI libraries' algorithms live here, beside the names, so that
/// [`super::baselines`] (which the registry names) does not depend on the registry.
impl Baseline {
    /// Every algorithm of the `mpi` family with its default parameters, in the registry's order
    /// (what `bench_plan` compares against and what the planner's `auto` chooser ranks).
    pub fn all() -> Vec<Baseline> {
        ALGORITHMS
            .iter()
            .filter(|e| e.family == Family::Library)
            .map(|e| {
                match (e.make)(&mut Args {
                    entry: e,
                    kv: Vec::new(),
                }) {
                    Ok(Algorithm::Library(b)) => b,
                    _ => unreachable!("every name of the mpi family makes a baseline"),
                }
            })
            .collect()
    }
}

/// An MPI library's algorithm by name (`mpi:` prefix optional); names of treecast's own
/// planners are refused.
impl FromStr for Baseline {
    type Err = NameError;
    fn from_str(s: &str) -> Result<Self, NameError> {
        match s.parse::<Algorithm>()? {
            Algorithm::Library(b) => Ok(b),
            _ => Err(NameError::Unknown {
                name: s.trim().to_string(),
                expected: names(Some(Family::Library)).join(", "),
            }),
        }
    }
}

/// Why a name is not an algorithm.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NameError {
    /// No algorithm has this name; `expected` lists the valid ones.
    Unknown { name: String, expected: String },
    /// A parameter the algorithm does not take; `takes` lists those it does.
    Parameter { name: String, key: String, takes: String },
    /// A parameter that is not `key=value` or whose value is wrong.
    Value { name: String, key: String, why: String },
}

impl fmt::Display for NameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NameError::Unknown { name, expected } => {
                write!(f, "unknown algorithm '{name}' (expected one of: {expected})")
            }
            NameError::Parameter { name, key, takes } if takes.is_empty() => {
                write!(f, "algorithm '{name}' takes no parameters (got '{key}')")
            }
            NameError::Parameter { name, key, takes } => {
                write!(f, "algorithm '{name}' has no parameter '{key}' (it takes {takes})")
            }
            NameError::Value { name, key, why } => write!(f, "algorithm '{name}', parameter {key}: {why}"),
        }
    }
}

impl std::error::Error for NameError {}

/// The parameters of one name, taken one by one by the entry's `make`; what is left over is
/// an error.
struct Args {
    entry: &'static Entry,
    kv: Vec<(String, String)>,
}

impl Args {
    fn parse(entry: &'static Entry, params: &str) -> Result<Args, NameError> {
        let mut kv = Vec::new();
        for (i, p) in params.split(',').map(str::trim).filter(|p| !p.is_empty()).enumerate() {
            let (k, v) = match p.split_once('=') {
                Some((k, v)) => (k.trim(), v.trim()),
                // A bare value is the first parameter.
                None if i == 0 && !entry.params.is_empty() => (entry.params[0].key, p),
                None => {
                    return Err(NameError::Value {
                        name: entry.name.into(),
                        key: p.into(),
                        why: "must be key=value".into(),
                    })
                }
            };
            kv.push((k.to_string(), v.to_string()));
        }
        Ok(Args { entry, kv })
    }

    fn take(&mut self, key: &str) -> Option<String> {
        let i = self.kv.iter().position(|(k, _)| k == key)?;
        Some(self.kv.remove(i).1)
    }

    fn bad(&self, key: &str, why: String) -> NameError {
        NameError::Value {
            name: self.entry.name.into(),
            key: key.into(),
            why,
        }
    }

    /// A segment size in bytes (`64KiB`, `1000`, ...).
    fn seg(&mut self, default: u64) -> Result<u64, NameError> {
        match self.take("seg") {
            None => Ok(default),
            Some(v) => parse_size(&v).map_err(|e| self.bad("seg", e.to_string())),
        }
    }

    /// A forced segment count, at least 1.
    fn segs(&mut self) -> Result<Option<u32>, NameError> {
        self.int("segs", 1)
    }

    /// An integer of at least `min`.
    fn int(&mut self, key: &str, min: u32) -> Result<Option<u32>, NameError> {
        let Some(v) = self.take(key) else { return Ok(None) };
        match v.parse::<u32>() {
            Ok(x) if x >= min => Ok(Some(x)),
            Ok(_) => Err(self.bad(key, format!("must be >= {min}, got {v}"))),
            Err(_) => Err(self.bad(key, format!("'{v}' is not an integer"))),
        }
    }

    fn finish(self) -> Result<(), NameError> {
        match self.kv.first() {
            None => Ok(()),
            Some((k, _)) => Err(NameError::Parameter {
                name: self.entry.name.into(),
                key: k.clone(),
                takes: self.entry.params.iter().map(|p| p.key).collect::<Vec<_>>().join(", "),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_round_trips_with_its_defaults() {
        for e in ALGORITHMS {
            let a: Algorithm = e.name.parse().unwrap();
            assert_eq!(a.family(), e.family, "{}", e.name);
            assert_eq!(a.to_string().parse::<Algorithm>(), Ok(a), "{}", e.name);
        }
    }

    #[test]
    fn parameters_round_trip() {
        for s in [
            "dfs-chain:segs=8",
            "two-tree:hosts=two-tree,segs=4",
            "two-tree:segs=4",
            "hier-pipeline:segs=16",
            "k-chains:k=4,segs=8",
            "knomial:k=3,seg=65536",
            "pipeline:seg=4096",
            "han:seg=65536",
        ] {
            let a: Algorithm = s.parse().unwrap();
            assert_eq!(a.to_string(), s);
        }
        assert_eq!("k-chains:3".parse(), Ok(Algorithm::KChains { k: 3, segs: None }));
        assert_eq!(
            "mpi:knomial:k=4".parse(),
            Ok(Algorithm::Library(Baseline::Knomial { k: 4, seg: 0 }))
        );
        assert_eq!("linear".parse(), Ok(Algorithm::Library(Baseline::Flat)));
    }

    #[test]
    fn errors_name_what_is_valid() {
        let e = "warp".parse::<Algorithm>().unwrap_err().to_string();
        assert!(e.contains("unknown algorithm 'warp'") && e.contains("dfs-chain") && e.contains("topo-wave"));
        // `mpi:` admits the libraries' algorithms only.
        let e = "mpi:optimal".parse::<Algorithm>().unwrap_err().to_string();
        assert!(e.contains("unknown algorithm") && !e.contains("dfs-chain"), "{e}");
        let e = "flat:seg=1".parse::<Algorithm>().unwrap_err().to_string();
        assert!(e.contains("takes no parameters"), "{e}");
        let e = "binomial:k=2".parse::<Algorithm>().unwrap_err().to_string();
        assert!(e.contains("no parameter 'k'") && e.contains("seg"), "{e}");
        assert!("dfs-chain:segs=0".parse::<Algorithm>().is_err());
        assert!("two-tree:hosts=ring".parse::<Algorithm>().is_err());
    }

    #[test]
    fn help_lists_every_algorithm() {
        let h = help_table();
        for e in ALGORITHMS {
            assert!(h.contains(e.name));
        }
    }
}
