//! Message patterns as the CLI names them: `bcast:root=R,bytes=N` and
//! `alltoall:algo=pairwise|simple-spread,bytes=N` (sizes like `4MiB`, `64KiB` accepted).

use super::alltoall::AlltoallAlgo;
use crate::util::bytes::parse_size;
use std::str::FromStr;

/// What to simulate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// Broadcast `bytes` from `root`.
    Bcast { root: u32, bytes: u64 },
    /// Every rank sends `bytes` to every other; `algo` fixes the send order (None: not given).
    Alltoall { algo: Option<AlltoallAlgo>, bytes: u64 },
}

impl FromStr for Pattern {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (kind, params) = s.split_once(':').unwrap_or((s, ""));
        let mut root = None;
        let mut bytes = None;
        let mut algo = None;
        for kv in params.split(',').map(str::trim).filter(|x| !x.is_empty()) {
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| format!("pattern parameter '{kv}' must be key=value"))?;
            match (kind.trim(), k.trim()) {
                (_, "bytes") => bytes = Some(parse_size(v).map_err(|e| format!("pattern field bytes: {e}"))?),
                ("bcast", "root") => {
                    root = Some(
                        v.trim()
                            .parse::<u32>()
                            .map_err(|_| format!("pattern field root: '{v}' is not a rank number"))?,
                    )
                }
                ("alltoall", "algo") => algo = Some(v.trim().parse::<AlltoallAlgo>()?),
                (kd, other) => return Err(format!("pattern '{kd}' has no field '{other}'")),
            }
        }
        let bytes = bytes.ok_or_else(|| format!("pattern '{s}' needs bytes=N"))?;
        match kind.trim() {
            "bcast" => Ok(Pattern::Bcast {
                root: root.unwrap_or(0),
                bytes,
            }),
            "alltoall" => Ok(Pattern::Alltoall { algo, bytes }),
            other => Err(format!("unknown pattern '{other}' (expected bcast or alltoall)")),
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
        assert!("bcast:root=1".parse::<Pattern>().unwrap_err().contains("bytes"));
        assert!("bcast:root=x,bytes=1".parse::<Pattern>().unwrap_err().contains("root"));
        assert!("bcast:algo=pairwise,bytes=1"
            .parse::<Pattern>()
            .unwrap_err()
            .contains("no field 'algo'"));
        assert!("gather:bytes=1"
            .parse::<Pattern>()
            .unwrap_err()
            .contains("unknown pattern"));
        assert!("alltoall:algo=ring,bytes=1".parse::<Pattern>().is_err());
        assert!("bcast:bytes=lots".parse::<Pattern>().unwrap_err().contains("bytes"));
    }
}
