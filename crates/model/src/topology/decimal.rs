//! Exact decimal unit conversion for the file formats.
//!
//! Files store microseconds and Gbit/s (or Mbit/s); the library stores seconds and bytes/s.
//! Converting with floating-point multiplications (`us * 1e-6`) rounds twice and a written file
//! would not read back to the same `f64`. Instead a number is handled as the exact decimal
//! `digits x 10^exp`: the shortest decimal that round-trips an `f64` (Rust's `{:e}`) is scaled by
//! a power of ten and a small integer (8 or 125, since 1 byte = 8 bits and 1000 = 8 x 125) without
//! any rounding, and only the final decimal -> `f64` parse rounds (correctly). So
//! write -> read is the identity on every finite `f64`, and round values stay round
//! (1.25e8 bytes/s is written as `1` Gbit/s, 2.5e-5 s as `25` us).

/// A non-negative or negative decimal `digits x 10^exp`; `digits` has no leading zeros.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Dec {
    neg: bool,
    /// ASCII digits, most significant first; "0" for zero.
    digits: Vec<u8>,
    exp: i64,
}

/// Exponents beyond this are far outside `f64` range; clamping keeps arithmetic overflow-free.
const EXP_CLAMP: i64 = 100_000;

impl Dec {
    /// The shortest decimal that parses back to `x` (which must be finite).
    pub fn from_f64(x: f64) -> Dec {
        let s = format!("{:e}", x);
        Dec::parse(&s).expect("Rust's {:e} output is a valid decimal")
    }

    /// Parse a JSON-style number `-?digits(.digits)?([eE][+-]?digits)?` (a leading `+` is also
    /// accepted). Returns `None` if `s` is not such a number.
    pub fn parse(s: &str) -> Option<Dec> {
        let b = s.as_bytes();
        let mut i = 0;
        let mut neg = false;
        if i < b.len() && (b[i] == b'-' || b[i] == b'+') {
            neg = b[i] == b'-';
            i += 1;
        }
        let mut digits = Vec::new();
        let int_start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            digits.push(b[i]);
            i += 1;
        }
        let n_int = i - int_start;
        let mut frac = 0i64;
        if i < b.len() && b[i] == b'.' {
            i += 1;
            let fs = i;
            while i < b.len() && b[i].is_ascii_digit() {
                digits.push(b[i]);
                i += 1;
            }
            frac = (i - fs) as i64;
            if frac == 0 {
                return None;
            }
        }
        if n_int == 0 {
            return None;
        }
        let mut exp = 0i64;
        if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
            i += 1;
            let mut eneg = false;
            if i < b.len() && (b[i] == b'-' || b[i] == b'+') {
                eneg = b[i] == b'-';
                i += 1;
            }
            let es = i;
            while i < b.len() && b[i].is_ascii_digit() {
                exp = (exp * 10 + (b[i] - b'0') as i64).min(EXP_CLAMP);
                i += 1;
            }
            if i == es {
                return None;
            }
            if eneg {
                exp = -exp;
            }
        }
        if i != b.len() {
            return None;
        }
        let mut d = Dec {
            neg,
            digits,
            exp: exp - frac,
        };
        d.normalize();
        Some(d)
    }

    fn normalize(&mut self) {
        let lead = self.digits.iter().take_while(|&&c| c == b'0').count();
        self.digits.drain(..lead);
        if self.digits.is_empty() {
            self.digits.push(b'0');
            self.exp = 0;
            self.neg = false;
            return;
        }
        while self.digits.len() > 1 && self.digits.last() == Some(&b'0') {
            self.digits.pop();
            self.exp += 1;
        }
        self.exp = self.exp.clamp(-EXP_CLAMP, EXP_CLAMP);
    }

    /// Multiply exactly by a small integer.
    pub fn mul(mut self, m: u32) -> Dec {
        let mut carry: u64 = 0;
        for c in self.digits.iter_mut().rev() {
            let v = (*c - b'0') as u64 * m as u64 + carry;
            *c = b'0' + (v % 10) as u8;
            carry = v / 10;
        }
        while carry > 0 {
            self.digits.insert(0, b'0' + (carry % 10) as u8);
            carry /= 10;
        }
        self.normalize();
        self
    }

    /// Multiply exactly by `10^k`.
    pub fn shift(mut self, k: i64) -> Dec {
        self.exp = (self.exp + k).clamp(-EXP_CLAMP, EXP_CLAMP);
        self.normalize();
        self
    }

    /// The nearest `f64` (may be infinite or zero when out of range).
    pub fn to_f64(&self) -> f64 {
        let s = format!(
            "{}{}e{}",
            if self.neg { "-" } else { "" },
            std::str::from_utf8(&self.digits).unwrap_or("0"),
            self.exp
        );
        s.parse().unwrap_or(f64::NAN)
    }

    /// Plain decimal text (`25`, `0.3`, `1200`) when short, else scientific (`1.5e-30`); always a
    /// valid JSON number.
    pub fn to_text(&self) -> String {
        let ds = std::str::from_utf8(&self.digits).unwrap_or("0");
        let sign = if self.neg { "-" } else { "" };
        let n = ds.len() as i64;
        if self.exp >= 0 && self.exp + n <= 21 {
            format!("{sign}{ds}{}", "0".repeat(self.exp as usize))
        } else if self.exp < 0 && -self.exp < n {
            let p = (n + self.exp) as usize;
            format!("{sign}{}.{}", &ds[..p], &ds[p..])
        } else if self.exp < 0 && -self.exp - n <= 6 {
            format!("{sign}0.{}{ds}", "0".repeat((-self.exp - n) as usize))
        } else {
            let e = self.exp + n - 1;
            if n == 1 {
                format!("{sign}{ds}e{e}")
            } else {
                format!("{sign}{}.{}e{e}", &ds[..1], &ds[1..])
            }
        }
    }
}

/// Seconds -> microseconds text.
pub(crate) fn s_to_us_text(s: f64) -> String {
    Dec::from_f64(s).shift(6).to_text()
}

/// Microseconds text -> seconds.
pub(crate) fn us_text_to_s(t: &str) -> Option<f64> {
    Dec::parse(t).map(|d| d.shift(-6).to_f64())
}

/// Bytes/s -> Gbit/s text (x 8 / 1e9).
pub(crate) fn bps_to_gbps_text(bps: f64) -> String {
    Dec::from_f64(bps).mul(8).shift(-9).to_text()
}

/// Gbit/s text -> bytes/s (x 125 x 1e6).
pub(crate) fn gbps_text_to_bps(t: &str) -> Option<f64> {
    Dec::parse(t).map(|d| d.mul(125).shift(6).to_f64())
}

/// Bytes/s -> Mbit/s text (x 8 / 1e6).
pub(crate) fn bps_to_mbps_text(bps: f64) -> String {
    Dec::from_f64(bps).mul(8).shift(-6).to_text()
}

/// Mbit/s text -> bytes/s (x 125 x 1e3).
pub(crate) fn mbps_text_to_bps(t: &str) -> Option<f64> {
    Dec::parse(t).map(|d| d.mul(125).shift(3).to_f64())
}

/// Microseconds -> seconds, rounded once from the decimal value (`0.3` us -> `3e-7` s exactly as
/// a file would read it, where `0.3 * 1e-6` would be one ulp off).
pub(crate) fn us_to_s(us: f64) -> f64 {
    if us.is_finite() {
        Dec::from_f64(us).shift(-6).to_f64()
    } else {
        us
    }
}

/// Gbit/s -> bytes/s, rounded once like [`us_to_s`].
pub(crate) fn gbps_to_bps(gbps: f64) -> f64 {
    if gbps.is_finite() {
        Dec::from_f64(gbps).mul(125).shift(6).to_f64()
    } else {
        gbps
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn round_values_stay_round() {
        assert_eq!(s_to_us_text(25e-6), "25");
        assert_eq!(s_to_us_text(0.3e-6), "0.3");
        assert_eq!(s_to_us_text(2.5e-3), "2500");
        assert_eq!(s_to_us_text(0.0), "0");
        assert_eq!(bps_to_gbps_text(1.25e8), "1");
        assert_eq!(bps_to_gbps_text(1.25e7), "0.1");
        assert_eq!(bps_to_gbps_text(5e9), "40");
        assert_eq!(bps_to_mbps_text(3.75e7), "300");
        assert_eq!(us_text_to_s("25"), Some(25e-6));
        assert_eq!(us_text_to_s("2.5e1"), Some(25e-6));
        assert_eq!(gbps_text_to_bps("1"), Some(1.25e8));
        assert_eq!(gbps_text_to_bps("0.1"), Some(1.25e7));
        assert_eq!(mbps_text_to_bps("300"), Some(3.75e7));
        assert_eq!(Dec::from_f64(1.5e-30).to_text(), "1.5e-30");
        assert_eq!(Dec::from_f64(-0.001).to_text(), "-0.001");
        assert_eq!(Dec::from_f64(1e22).to_text(), "1e22");
        assert_eq!(us_to_s(2.5), 2.5e-6);
        assert_ne!(2.5 * 1e-6, 2.5e-6, "the reason us_to_s exists");
        assert_eq!(gbps_to_bps(0.3), 3.75e7);
        assert!(us_to_s(f64::NAN).is_nan());
    }

    #[test]
    fn rejects_non_numbers() {
        for s in [
            "", "-", ".5", "5.", "1e", "1e+", "abc", "1.2.3", "0x10", "inf", "NaN", "1 ",
        ] {
            assert_eq!(Dec::parse(s), None, "{s:?}");
        }
        // Absurd exponents clamp instead of overflowing.
        assert_eq!(us_text_to_s("1e99999999999999999999"), Some(f64::INFINITY));
        assert_eq!(us_text_to_s("1e-99999999999999999999"), Some(0.0));
    }

    proptest! {
        #[test]
        fn conversions_round_trip_exactly(bits in any::<u64>()) {
            let x = f64::from_bits(bits).abs();
            prop_assume!(x.is_finite());
            prop_assert_eq!(us_text_to_s(&s_to_us_text(x)), Some(x));
            prop_assert_eq!(gbps_text_to_bps(&bps_to_gbps_text(x)), Some(x));
            prop_assert_eq!(mbps_text_to_bps(&bps_to_mbps_text(x)), Some(x));
            // The text is a JSON number.
            let t = bps_to_gbps_text(x);
            prop_assert!(serde_json::from_str::<serde::de::IgnoredAny>(&t).is_ok(), "{}", t);
        }
    }
}
