//! Human-readable byte sizes for command lines and `TREECAST_*` variables: `4MiB`, `64KiB`,
//! `1000`, `1.5GiB`, `16k`, `2M`.
//!
//! Every suffix is a power of 1024 (`k`, `kb`, `KiB` alike), as MPI benchmarks print message
//! sizes; case is ignored.

use std::fmt;

/// Why a text is not a size. Each variant keeps the text as given; [`Display`](fmt::Display)
/// gives the line the CLI and the runtime's warnings print.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SizeError {
    /// No leading number, or a number that does not parse.
    NotASize(String),
    /// A suffix that is not a power of 1024 this parser knows.
    UnknownUnit { input: String, unit: String },
    /// A whole number whose product with the unit overflows u64.
    TooLarge(String),
    /// A fractional number outside 0..=u64::MAX once scaled.
    OutOfRange(String),
    /// A fractional number that is not a whole number of bytes once scaled.
    NotWhole(String),
}

impl fmt::Display for SizeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SizeError::NotASize(s) => write!(f, "'{s}' is not a size (expected e.g. 4096, 64KiB, 4MiB)"),
            SizeError::UnknownUnit { input, unit } => {
                write!(f, "'{input}': unknown size unit '{unit}' (use B, KiB, MiB, GiB, TiB)")
            }
            SizeError::TooLarge(s) => write!(f, "'{s}' is too large"),
            SizeError::OutOfRange(s) => write!(f, "'{s}' is out of range"),
            SizeError::NotWhole(s) => write!(f, "'{s}' is not a whole number of bytes"),
        }
    }
}

impl std::error::Error for SizeError {}

/// Parse a size in bytes. The result must be a whole number of bytes.
pub fn parse_size(s: &str) -> Result<u64, SizeError> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    if num.is_empty() {
        return Err(SizeError::NotASize(s.into()));
    }
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        u => {
            return Err(SizeError::UnknownUnit {
                input: s.into(),
                unit: u.into(),
            })
        }
    };
    if let Ok(v) = num.parse::<u64>() {
        return v.checked_mul(mult).ok_or_else(|| SizeError::TooLarge(s.into()));
    }
    let v: f64 = num.parse().map_err(|_| SizeError::NotASize(s.into()))?;
    let bytes = v * mult as f64;
    if !(bytes.is_finite() && bytes >= 0.0 && bytes <= u64::MAX as f64) {
        return Err(SizeError::OutOfRange(s.into()));
    }
    if bytes.fract() != 0.0 {
        return Err(SizeError::NotWhole(s.into()));
    }
    Ok(bytes as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64KiB"), Ok(65536));
        assert_eq!(parse_size("4MiB"), Ok(4 << 20));
        assert_eq!(parse_size("4M"), Ok(4 << 20));
        assert_eq!(parse_size("1.5KiB"), Ok(1536));
        assert_eq!(parse_size("10MB"), Ok(10 << 20));
        assert_eq!(parse_size("12 kb"), Ok(12 << 10));
        assert_eq!(parse_size(" 2 GiB "), Ok(2 << 30));
        assert_eq!(parse_size("0"), Ok(0));
        assert!(parse_size("1.3B").unwrap_err().to_string().contains("whole number"));
        assert!(parse_size("MiB").is_err());
        assert!(parse_size("4XB").unwrap_err().to_string().contains("unknown size unit"));
        assert!(parse_size("99999999999TiB")
            .unwrap_err()
            .to_string()
            .contains("too large"));
        assert!(parse_size("-4").is_err());
    }
}
