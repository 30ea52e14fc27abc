//! Human-readable byte sizes for command lines: `4MiB`, `64KiB`, `1000`, `1.5GiB`, `10MB`.
//!
//! IEC suffixes (`KiB`, `MiB`, `GiB`, `TiB`) and bare `K`/`M`/`G`/`T` are powers of 1024, as in
//! MPI benchmarks; SI suffixes with a `B` (`kB`/`KB`, `MB`, `GB`, `TB`) are powers of 1000. Case
//! of the unit is ignored except that the `i` marks IEC.

/// Parse a size in bytes. The result must be a whole number of bytes.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    if num.is_empty() {
        return Err(format!("'{s}' is not a size (expected e.g. 4096, 64KiB, 4MiB)"));
    }
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        u => {
            return Err(format!(
                "'{s}': unknown size unit '{u}' (use B, KiB, MiB, GiB, kB, MB, GB)"
            ))
        }
    };
    if let Ok(v) = num.parse::<u64>() {
        return v.checked_mul(mult).ok_or_else(|| format!("'{s}' is too large"));
    }
    let v: f64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a size (expected e.g. 4096, 64KiB, 4MiB)"))?;
    let bytes = v * mult as f64;
    if !(bytes.is_finite() && bytes >= 0.0 && bytes <= u64::MAX as f64) {
        return Err(format!("'{s}' is out of range"));
    }
    if bytes.fract() != 0.0 {
        return Err(format!("'{s}' is not a whole number of bytes"));
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
        assert_eq!(parse_size("10MB"), Ok(10_000_000));
        assert_eq!(parse_size(" 2 GiB "), Ok(2 << 30));
        assert_eq!(parse_size("0"), Ok(0));
        assert!(parse_size("1.3B").unwrap_err().contains("whole number"));
        assert!(parse_size("MiB").is_err());
        assert!(parse_size("4XB").unwrap_err().contains("unknown size unit"));
        assert!(parse_size("99999999999TiB").unwrap_err().contains("too large"));
        assert!(parse_size("-4").is_err());
    }
}
