//! Human-readable byte sizes for command lines and `TREECAST_*` variables: `4MiB`, `64KiB`,
//! `1000`, `1.5GiB`, `16k`, `2M`.
//!
//! Every suffix is a power of 1024 (`k`, `kb`, `KiB` alike), as MPI benchmarks print message
//! sizes; case is ignored.

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
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        u => return Err(format!("'{s}': unknown size unit '{u}' (use B, KiB, MiB, GiB, TiB)")),
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
        assert_eq!(parse_size("10MB"), Ok(10 << 20));
        assert_eq!(parse_size("12 kb"), Ok(12 << 10));
        assert_eq!(parse_size(" 2 GiB "), Ok(2 << 30));
        assert_eq!(parse_size("0"), Ok(0));
        assert!(parse_size("1.3B").unwrap_err().contains("whole number"));
        assert!(parse_size("MiB").is_err());
        assert!(parse_size("4XB").unwrap_err().contains("unknown size unit"));
        assert!(parse_size("99999999999TiB").unwrap_err().contains("too large"));
        assert!(parse_size("-4").is_err());
    }
}
