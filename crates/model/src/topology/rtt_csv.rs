//! RTT matrix CSV (docs/design.md §4.3).
//!
//! ```text
//! host,h0,h1,h2
//! h0,0,21.5,40
//! h1,21.5,0,
//! h2,40,,0
//! ```
//!
//! Square; first row `host,<name>,...`; row i starts with the i-th column's name; values are
//! round-trip times in microseconds; the diagonal is 0; an empty cell means "not measured".
//! Host names follow the rules of topology JSON ids (no blanks, commas, brackets, `=` or `#`).
//! Cells may be padded with blanks; blank lines (e.g. a trailing one) are ignored; `\r\n` is fine.
//!
//! **Symmetry.** An RTT is a property of the pair, so `rtt[i][j]` and `rtt[j][i]` should agree.
//! Tools that measure each pair from both ends get two independent min-of-k estimates, which
//! differ by noise: on the emulated cluster of docs/design.md §5.3 pair minima of the same class
//! spread over 19-25 us (same switch) and 33-55 us (across switches), i.e. up to ~40% apart. A pair
//! is therefore accepted when `|a - b| <= max(SYMMETRY_REL_TOL * max(a, b), SYMMETRY_ABS_TOL_US)`
//! (a factor of 2 at most, or 2 us for loopback-scale values), which admits honest re-measurements
//! but rejects what they cannot explain: transposed or shifted rows, unit mix-ups, and the
//! millisecond descheduling artefacts docs/design.md §5.3 reports (12-16 ms against 20-40 us). Both values
//! are kept as written; consumers average or take the minimum as they need. A pair measured in one
//! direction only is fine.

use super::json::bad_id;
use super::{RttMatrix, TopologyError};
use std::collections::HashMap;
use std::fmt::Write as _;

/// Relative tolerance between `rtt[i][j]` and `rtt[j][i]` (see the module docs).
pub const SYMMETRY_REL_TOL: f64 = 0.5;
/// Absolute tolerance in microseconds, for very small RTTs.
pub const SYMMETRY_ABS_TOL_US: f64 = 2.0;

fn err(line: usize, col: usize, what: &str, msg: impl Into<String>) -> TopologyError {
    TopologyError::new(msg)
        .at_line(line)
        .field(format!("column {col} ({what})"))
}

/// Parse an RTT matrix. `file` names the source in errors.
pub fn from_str(text: &str, file: &str) -> Result<RttMatrix, TopologyError> {
    parse(text).map_err(|e| e.in_file(file))
}

fn parse(text: &str) -> Result<RttMatrix, TopologyError> {
    let mut rows = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l))
        .filter(|(_, l)| !l.trim().is_empty());
    let Some((hline, header)) = rows.next() else {
        return Err(TopologyError::new(
            "empty RTT matrix (expected a header row 'host,<name>,...')",
        ));
    };
    let head: Vec<&str> = header.split(',').map(str::trim).collect();
    if !head[0].eq_ignore_ascii_case("host") {
        return Err(err(
            hline,
            1,
            head[0],
            "the header row must start with 'host' followed by the host names",
        ));
    }
    let hosts: Vec<String> = head[1..].iter().map(|s| s.to_string()).collect();
    if hosts.is_empty() {
        return Err(TopologyError::new("the header row names no hosts").at_line(hline));
    }
    let mut first_col: HashMap<&str, usize> = HashMap::new();
    for (j, h) in hosts.iter().enumerate() {
        if let Some(why) = bad_id(h) {
            return Err(err(hline, j + 2, "host name", format!("host name '{h}' {why}")));
        }
        if let Some(k) = first_col.insert(h, j) {
            return Err(err(
                hline,
                j + 2,
                h,
                format!("duplicate host name (also column {})", k + 2),
            ));
        }
    }
    let n = hosts.len();
    let mut rtt: Vec<Vec<Option<f64>>> = Vec::with_capacity(n);
    let mut row_lines = Vec::with_capacity(n);
    for (line, row) in rows {
        let cells: Vec<&str> = row.split(',').map(str::trim).collect();
        let i = rtt.len();
        if i >= n {
            return Err(TopologyError::new(format!(
                "more rows than the {n} hosts of the header (the matrix must be square)"
            ))
            .at_line(line));
        }
        if cells.len() != n + 1 {
            return Err(TopologyError::new(format!(
                "row has {} cells, the header has {} (ragged row)",
                cells.len(),
                n + 1
            ))
            .at_line(line));
        }
        if cells[0] != hosts[i] {
            return Err(err(
                line,
                1,
                "row name",
                format!(
                    "row {} is named '{}' but column {} is '{}'",
                    i + 1,
                    cells[0],
                    i + 2,
                    hosts[i]
                ),
            ));
        }
        let mut vals = Vec::with_capacity(n);
        for (j, c) in cells[1..].iter().enumerate() {
            if c.is_empty() {
                vals.push(None);
                continue;
            }
            let v: f64 = c
                .parse()
                .map_err(|_| err(line, j + 2, &hosts[j], format!("'{c}' is not a number")))?;
            if !v.is_finite() || v < 0.0 {
                return Err(err(
                    line,
                    j + 2,
                    &hosts[j],
                    format!("RTT must be a finite number >= 0 (us), got '{c}'"),
                ));
            }
            if i == j && v != 0.0 {
                return Err(err(
                    line,
                    j + 2,
                    &hosts[j],
                    format!("the diagonal must be 0, got '{c}'"),
                ));
            }
            vals.push(Some(v));
        }
        rtt.push(vals);
        row_lines.push(line);
    }
    if rtt.len() != n {
        return Err(TopologyError::new(format!(
            "{} rows for {n} hosts (the matrix must be square)",
            rtt.len()
        )));
    }
    for i in 0..n {
        if rtt[i][i].is_none() {
            rtt[i][i] = Some(0.0);
        }
        for j in 0..i {
            if let (Some(a), Some(b)) = (rtt[i][j], rtt[j][i]) {
                if (a - b).abs() > (SYMMETRY_REL_TOL * a.max(b)).max(SYMMETRY_ABS_TOL_US) {
                    return Err(err(
                        row_lines[i],
                        j + 2,
                        &hosts[j],
                        format!(
                            "asymmetric pair: {}->{} is {a} us but {}->{} is {b} us (line {}); \
                             the two directions may differ by at most {}%",
                            hosts[i],
                            hosts[j],
                            hosts[j],
                            hosts[i],
                            row_lines[j],
                            SYMMETRY_REL_TOL * 100.0
                        ),
                    ));
                }
            }
        }
    }
    Ok(RttMatrix { hosts, rtt_us: rtt })
}

/// Write an RTT matrix (values in their shortest exact decimal form, empty for `None`).
pub fn to_string(m: &RttMatrix) -> String {
    let mut out = String::from("host");
    for h in &m.hosts {
        out.push(',');
        out.push_str(h);
    }
    out.push('\n');
    for (h, row) in m.hosts.iter().zip(&m.rtt_us) {
        out.push_str(h);
        for v in row {
            out.push(',');
            if let Some(v) = v {
                let _ = write!(out, "{v}");
            }
        }
        out.push('\n');
    }
    out
}
