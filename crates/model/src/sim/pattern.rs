//! Message patterns as the CLI names them: `bcast:root=R,bytes=N` and
//! `alltoall:algo=pairwise|simple-spread,bytes=N` (sizes like `4MiB`, `64KiB` accepted).

use super::alltoall::{AlltoallAlgo, UnknownAlltoallAlgo};
use crate::util::bytes::{parse_size, SizeError};
use std::fmt;
use std::str::FromStr;

/// What to simulate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// Broadcast `bytes` from `root`.
    Bcast { root: u32, bytes: u64 },
    /// Every rank sends `bytes` to every other; `algo` fixes the send order (None: not given).
    Alltoall { algo: Option<AlltoallAlgo>, bytes: u64 },
}

/// Why a text is not a [`Pattern`]. Each variant keeps the part at fault;
/// [`Display`](fmt::Display) gives the line the CLI prints after `--pattern`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PatternError {
    /// A parameter without `=`.
    NotKeyValue(String),
    /// `bytes=` is not a size.
    Bytes(SizeError),
    /// `root=` is not a rank number (the value as given).
    Root(String),
    /// `algo=` is not an all-to-all algorithm.
    Algo(UnknownAlltoallAlgo),
    /// A field the pattern `kind` does not have.
    NoField { kind: String, field: String },
    /// No `bytes=` (the whole pattern as given).
    NeedsBytes(String),
    /// A pattern kind other than bcast or alltoall.
    UnknownKind(String),
}

impl fmt::Display for PatternError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PatternError::NotKeyValue(kv) => write!(f, "pattern parameter '{kv}' must be key=value"),
            PatternError::Bytes(e) => write!(f, "pattern field bytes: {e}"),
            PatternError::Root(v) => write!(f, "pattern field root: '{v}' is not a rank number"),
            PatternError::Algo(e) => e.fmt(f),
            PatternError::NoField { kind, field } => write!(f, "pattern '{kind}' has no field '{field}'"),
            PatternError::NeedsBytes(s) => write!(f, "pattern '{s}' needs bytes=N"),
            PatternError::UnknownKind(k) => write!(f, "unknown pattern '{k}' (expected bcast or alltoall)"),
        }
    }
}

impl std::error::Error for PatternError {}

impl FromStr for Pattern {
    type Err = PatternError;
    fn from_str(s: &str) -> Result<Self, PatternError> {
        let (kind, params) = s.split_once(':').unwrap_or((s, ""));
        let mut root = None;
        let mut bytes = None;
        let mut algo = None;
        for kv in params.split(',').map(str::trim).filter(|x| !x.is_empty()) {
            let (k, v) = kv.split_once('=').ok_or_else(|| PatternError::NotKeyValue(kv.into()))?;
            match (kind.trim(), k.trim()) {
                (_, "bytes") => bytes = Some(parse_size(v).map_err(PatternError::Bytes)?),
                ("bcast", "root") => root = Some(v.trim().parse::<u32>().map_err(|_| PatternError::Root(v.into()))?),
                ("alltoall", "algo") => algo = Some(v.trim().parse::<AlltoallAlgo>().map_err(PatternError::Algo)?),
                (kd, other) => {
                    return Err(PatternError::NoField {
                        kind: kd.into(),
                        field: other.into(),
                    })
                }
            }
        }
        let bytes = bytes.ok_or_else(|| PatternError::NeedsBytes(s.into()))?;
        match kind.trim() {
            "bcast" => Ok(Pattern::Bcast {
                root: root.unwrap_or(0),
                bytes,
            }),
            "alltoall" => Ok(Pattern::Alltoall { algo, bytes }),
            other => Err(PatternError::UnknownKind(other.into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse() {
        assert_eq!(
            "bcast:root=3,bytes=4MiB".parse::<Pattern>(),
            Ok(Pattern::Bcast {
                root: 3,
                bytes: 4 << 20
            })
        );
        assert_eq!(
            "alltoall:algo=pairwise,bytes=64KiB".parse::<Pattern>(),
            Ok(Pattern::Alltoall {
                algo: Some(AlltoallAlgo::Pairwise),
                bytes: 65536
            })
        );
        assert!("bcast:root=1"
            .parse::<Pattern>()
            .unwrap_err()
            .to_string()
            .contains("bytes"));
        assert!("bcast:root=x,bytes=1"
            .parse::<Pattern>()
            .unwrap_err()
            .to_string()
            .contains("root"));
        assert!("bcast:algo=pairwise,bytes=1"
            .parse::<Pattern>()
            .unwrap_err()
            .to_string()
            .contains("no field 'algo'"));
        assert!("gather:bytes=1"
            .parse::<Pattern>()
            .unwrap_err()
            .to_string()
            .contains("unknown pattern"));
        assert!("alltoall:algo=ring,bytes=1".parse::<Pattern>().is_err());
        assert!("bcast:bytes=lots"
            .parse::<Pattern>()
            .unwrap_err()
            .to_string()
            .contains("bytes"));
    }
}
