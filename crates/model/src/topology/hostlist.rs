//! Slurm hostlist expressions: `h[00-15]`, `login1,g[1,3-5]`, `r[1-2]n[01-04]`.
//!
//! Grammar (as Slurm reads host lists in `topology.conf`):
//! - a list is comma-separated items (commas inside brackets belong to the bracket);
//! - an item is literal text with any number of bracket groups; the item stands for the cartesian
//!   product of its groups, the first group varying slowest (`r[1-2]n[1-2]` = r1n1 r1n2 r2n1 r2n2);
//! - a group is comma-separated numbers `n` or ranges `lo-hi` (lo <= hi); the zero padding width
//!   is the number of digits written for `n` or `lo` (`[08-10]` = 08 09 10, `[8-10]` = 8 9 10).
//!
//! [`compress`] is the inverse used when writing: names that end in digits and share a prefix
//! become one bracket group of runs, so 256 hosts take a few characters.

use super::TopologyError;

/// Upper bound on the names one expression may expand to; guards memory on hostile input
/// (`h[0-99999999999]`). Far above any real cluster.
pub const MAX_HOSTS: usize = 1 << 20;

/// Expand a hostlist expression into host names, in the order written.
/// Errors are one line naming the offending part (no file or line; callers add those).
pub fn expand(expr: &str) -> Result<Vec<String>, TopologyError> {
    let mut out = Vec::new();
    for item in split_top_level(expr)? {
        if item.is_empty() {
            return Err(TopologyError::new(format!("empty host name in hostlist '{expr}'")));
        }
        expand_item(item, &mut out)?;
    }
    Ok(out)
}

/// Split at commas outside brackets, checking bracket balance.
fn split_top_level(expr: &str) -> Result<Vec<&str>, TopologyError> {
    let mut items = Vec::new();
    let mut depth = 0;
    let mut start = 0;
    for (i, c) in expr.char_indices() {
        match c {
            '[' if depth == 0 => depth = 1,
            '[' => return Err(TopologyError::new(format!("nested '[' in hostlist '{expr}'"))),
            ']' if depth == 1 => depth = 0,
            ']' => return Err(TopologyError::new(format!("unmatched ']' in hostlist '{expr}'"))),
            ',' if depth == 0 => {
                items.push(&expr[start..i]);
                start = i + 1;
            }
            c if c.is_whitespace() || c.is_control() => {
                return Err(TopologyError::new(format!("whitespace in hostlist '{expr}'")))
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(TopologyError::new(format!("unclosed '[' in hostlist '{expr}'")));
    }
    items.push(&expr[start..]);
    Ok(items)
}

/// One element of a bracket group: numbers `lo..=hi`, each printed with at least `width` digits.
struct Span {
    lo: u64,
    hi: u64,
    width: usize,
}

fn parse_group(spec: &str, item: &str) -> Result<Vec<Span>, TopologyError> {
    let bad = |why: &str| TopologyError::new(format!("malformed range '[{spec}]' in '{item}': {why}"));
    if spec.is_empty() {
        return Err(bad("empty brackets"));
    }
    let num = |s: &str| -> Result<u64, TopologyError> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad(&format!("'{s}' is not a number")));
        }
        if s.len() > 18 {
            return Err(bad(&format!("'{s}' has too many digits")));
        }
        s.parse().map_err(|_| bad(&format!("'{s}' is not a number")))
    };
    let mut spans = Vec::new();
    for part in spec.split(',') {
        let (lo_s, hi_s) = part.split_once('-').unwrap_or((part, part));
        let (lo, hi) = (num(lo_s)?, num(hi_s)?);
        if lo > hi {
            return Err(bad(&format!("{lo_s} > {hi_s}")));
        }
        spans.push(Span {
            lo,
            hi,
            width: lo_s.len(),
        });
    }
    Ok(spans)
}

fn expand_item(item: &str, out: &mut Vec<String>) -> Result<(), TopologyError> {
    // Alternate literal text and groups: item = lit0 [g0] lit1 [g1] ... litN.
    let mut lits = Vec::new();
    let mut groups: Vec<Vec<Span>> = Vec::new();
    let mut rest = item;
    while let Some(open) = rest.find('[') {
        let close = rest[open..].find(']').map(|c| open + c).expect("balance checked");
        lits.push(&rest[..open]);
        groups.push(parse_group(&rest[open + 1..close], item)?);
        rest = &rest[close + 1..];
    }
    lits.push(rest);
    let mut count: usize = 1;
    for g in &groups {
        let n = g
            .iter()
            .map(|s| (s.hi - s.lo) as usize + 1)
            .fold(0usize, |a, b| a.saturating_add(b));
        count = count.saturating_mul(n);
    }
    if count.saturating_add(out.len()) > MAX_HOSTS {
        return Err(TopologyError::new(format!(
            "hostlist '{item}' expands to more than {MAX_HOSTS} names"
        )));
    }
    // Odometer over the groups, last group fastest.
    let mut prefixes = vec![lits[0].to_string()];
    for (g, lit) in groups.iter().zip(&lits[1..]) {
        let mut next = Vec::with_capacity(prefixes.len());
        for p in &prefixes {
            for s in g {
                for n in s.lo..=s.hi {
                    next.push(format!("{p}{n:0w$}{lit}", w = s.width));
                }
            }
        }
        prefixes = next;
    }
    out.extend(prefixes);
    Ok(())
}

/// Compress host names into a hostlist expression: names sharing a prefix and ending in a number
/// become `prefix[runs]`, runs of consecutive numbers `lo-hi` keeping their zero padding; other
/// names are listed as they are. Duplicates are dropped; the output is sorted by prefix, then
/// number, so it is deterministic. `expand(compress(x))` yields the same set of names provided no
/// name contains `[`, `]`, `,` or whitespace (which no hostlist can express).
pub fn compress<S: AsRef<str>>(names: &[S]) -> String {
    // (prefix, value, digits) for names with a numeric suffix; literal names otherwise.
    let mut numbered: Vec<(&str, u64, &str)> = Vec::new();
    let mut literal: Vec<&str> = Vec::new();
    for name in names {
        let name = name.as_ref();
        let digits = name.bytes().rev().take_while(|b| b.is_ascii_digit()).count();
        let (prefix, num) = name.split_at(name.len() - digits);
        match num.parse::<u64>() {
            Ok(v) if digits > 0 && digits <= 18 => numbered.push((prefix, v, num)),
            _ => literal.push(name),
        }
    }
    numbered.sort_unstable();
    numbered.dedup();
    literal.sort_unstable();
    literal.dedup();

    let mut out: Vec<String> = literal.iter().map(|l| l.to_string()).collect();
    let mut i = 0;
    while i < numbered.len() {
        let prefix = numbered[i].0;
        let mut runs: Vec<String> = Vec::new();
        let mut count = 0;
        while i < numbered.len() && numbered[i].0 == prefix {
            let (_, lo, lo_s) = numbered[i];
            let width = lo_s.len();
            let mut hi = lo;
            let mut hi_s = lo_s;
            i += 1;
            while i < numbered.len()
                && numbered[i].0 == prefix
                && Some(numbered[i].1) == hi.checked_add(1)
                && format!("{:0width$}", numbered[i].1) == numbered[i].2
            {
                hi = numbered[i].1;
                hi_s = numbered[i].2;
                i += 1;
            }
            count += (hi - lo) as usize + 1;
            runs.push(if lo == hi {
                lo_s.to_string()
            } else {
                format!("{lo_s}-{hi_s}")
            });
        }
        out.push(if count == 1 {
            format!("{prefix}{}", runs[0])
        } else {
            format!("{prefix}[{}]", runs.join(","))
        });
    }
    out.sort();
    out.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ex(s: &str) -> Vec<String> {
        expand(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn expands_ranges_lists_padding_and_products() {
        assert_eq!(ex("h[00-03]"), ["h00", "h01", "h02", "h03"]);
        assert_eq!(ex("h[8-10]"), ["h8", "h9", "h10"]);
        assert_eq!(ex("h[08-10]"), ["h08", "h09", "h10"]);
        assert_eq!(ex("login1,g[1,3-4]"), ["login1", "g1", "g3", "g4"]);
        assert_eq!(ex("r[1-2]n[01-02]"), ["r1n01", "r1n02", "r2n01", "r2n02"]);
        assert_eq!(ex("s[0-1]-ib"), ["s0-ib", "s1-ib"]);
        assert_eq!(ex("single"), ["single"]);
        assert_eq!(ex("[1-2]"), ["1", "2"]);
    }

    #[test]
    fn malformed_expressions_name_the_problem() {
        let err = |s: &str| expand(s).unwrap_err().to_string();
        assert!(err("h[3-1]").contains("3 > 1"), "{}", err("h[3-1]"));
        assert!(err("h[1-2").contains("unclosed"));
        assert!(err("h1-2]").contains("unmatched"));
        assert!(err("h[[1]]").contains("nested"));
        assert!(err("h[]").contains("empty brackets"));
        assert!(err("h[a-b]").contains("'a' is not a number"));
        assert!(err("h[1-]").contains("'' is not a number"));
        assert!(err("a,,b").contains("empty host name"));
        assert!(err("h[0-99999999999]").contains("more than"));
        assert!(err("h[0-9999]x[0-9999]").contains("more than"));
        assert!(err("h[1234567890123456789]").contains("too many digits"));
    }

    #[test]
    fn compresses_into_runs() {
        let names: Vec<String> = (0..16).map(|i| format!("h{i:02}")).collect();
        assert_eq!(compress(&names), "h[00-15]");
        assert_eq!(compress(&["h8", "h9", "h10", "h12"]), "h[8-10,12]");
        assert_eq!(compress(&["h8", "h09"]), "h[8,09]");
        assert_eq!(compress(&["b2", "login", "a1", "b1", "b1"]), "a1,b[1-2],login");
        assert_eq!(compress(&["r1n01", "r1n02", "r2n01"]), "r1n[01-02],r2n01");
        assert_eq!(compress::<&str>(&[]), "");
    }

    proptest! {
        #[test]
        fn compress_then_expand_gives_the_same_set(
            names in prop::collection::vec("[a-c]{0,2}[0-9]{0,3}[a-c]?[0-9]{0,2}", 1..40)
        ) {
            let names: Vec<String> = names.into_iter().filter(|n| !n.is_empty()).collect();
            prop_assume!(!names.is_empty());
            let text = compress(&names);
            let mut back = expand(&text).unwrap();
            let mut want = names.clone();
            back.sort();
            want.sort();
            want.dedup();
            prop_assert_eq!(back, want, "{}", text);
        }

        #[test]
        fn garbage_never_panics(s in "[a-z0-9\\[\\],\\- ]{0,30}") {
            let _ = expand(&s);
        }
    }
}
