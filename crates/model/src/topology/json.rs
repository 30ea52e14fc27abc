//! Topology JSON (docs/design.md §4.1), the lossless format.
//!
//! ```json
//! {
//!   "vertices": [
//!     {"id": "sw0", "kind": "switch"},
//!     {"id": "n0", "kind": "node"},
//!     {"id": "r0", "kind": "rank", "rank": 0}
//!   ],
//!   "links": [
//!     {"a": "r0", "b": "n0", "latency_us": 0.3, "bandwidth_gbps": 40},
//!     {"a": "n0", "b": "sw0", "latency_us": 2, "bandwidth_gbps": 10, "latency_us_ba": 3, "duplex": "half",
//!      "latency_fit": {"pareto": [1.8, 3.5], "normal": [2.1, 0.2], "samples": 30}}
//!   ]
//! }
//! ```
//!
//! - `vertices[]`: `id` (unique, non-empty, no whitespace, control characters or any of `, [ ] = #`
//!   so every id is also a valid Slurm host name and groups word), `kind` (`rank`, `node`,
//!   `switch`), `rank` (required for ranks only: 0..n-1, each once).
//! - `links[]`: `a`, `b` (vertex ids), `latency_us` (one-way, finite, >= 0), `bandwidth_gbps`
//!   (Gbit/s, 10^9 bits/s, > 0; the string `"inf"` means an ideal link). Optional
//!   `latency_us_ba`, `bandwidth_gbps_ba` override the b->a direction; `duplex` is `"full"`
//!   (default) or `"half"`. Optional `latency_fit` ([`LatencyFit`]): `pareto: [k_us, alpha]`
//!   (alpha may be `"inf"`), `normal: [mean_us, sd_us]`, `samples`.
//! - Optional `confidence` on a link (a number in 0..1): for an inferred switch-to-switch link,
//!   the confidence that it is real; optional top-level `confidence`: that of the inferred
//!   tree's least certain link decision.
//! - The links must form one tree over all vertices; rank vertices are leaves.
//! - Unknown keys inside a vertex or link are errors (a misspelt `bandwidth_gpbs` must not silently
//!   fall back to a default); unknown top-level keys (e.g. `"description"`) are ignored.
//!
//! Numbers convert exactly (see `decimal`): writing then reading gives bit-identical `f64`s.
//! Output is deterministic: vertices and links in the topology's order, one per line, optional
//! fields only when they differ from their defaults.

use super::decimal::{bps_to_gbps_text, gbps_text_to_bps, s_to_us_text, us_text_to_s, Dec};
use super::jsontext::{self, JKind, JVal};
use super::{Duplex, LatencyFit, Link, LinkDir, Topology, TopologyBuilder, TopologyError, Vertex, VertexKind};
use std::collections::HashMap;
use std::fmt::Write as _;

type Members = [(String, JVal)];

fn err(line: usize, field: &str, msg: impl Into<String>) -> TopologyError {
    TopologyError::new(msg).at_line(line).field(field)
}

fn object<'a>(v: &'a JVal, what: &str) -> Result<&'a Members, TopologyError> {
    match &v.kind {
        JKind::Obj(m) => Ok(m),
        _ => Err(TopologyError::new(format!("{what} must be an object, found {}", v.type_name())).at_line(v.line)),
    }
}

fn array<'a>(v: &'a JVal, field: &str) -> Result<&'a [JVal], TopologyError> {
    match &v.kind {
        JKind::Arr(a) => Ok(a),
        _ => Err(err(v.line, field, format!("must be an array, found {}", v.type_name()))),
    }
}

fn get<'a>(m: &'a Members, key: &str) -> Option<&'a JVal> {
    m.iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

fn require<'a>(m: &'a Members, key: &str, line: usize, what: &str) -> Result<&'a JVal, TopologyError> {
    get(m, key).ok_or_else(|| err(line, key, format!("missing in this {what}")))
}

fn check_keys(m: &Members, allowed: &[&str], what: &str) -> Result<(), TopologyError> {
    for (k, v) in m {
        if !allowed.contains(&k.as_str()) {
            return Err(err(
                v.line,
                k,
                format!("unknown key in a {what} (expected one of: {})", allowed.join(", ")),
            ));
        }
    }
    Ok(())
}

fn string<'a>(v: &'a JVal, field: &str) -> Result<&'a str, TopologyError> {
    match &v.kind {
        JKind::Str(s) => Ok(s),
        _ => Err(err(v.line, field, format!("must be a string, found {}", v.type_name()))),
    }
}

fn number<'a>(v: &'a JVal, field: &str) -> Result<&'a str, TopologyError> {
    match &v.kind {
        JKind::Num(s) => Ok(s),
        _ => Err(err(v.line, field, format!("must be a number, found {}", v.type_name()))),
    }
}

/// Microseconds -> seconds, finite and >= 0.
fn micros(v: &JVal, field: &str) -> Result<f64, TopologyError> {
    let t = number(v, field)?;
    match us_text_to_s(t) {
        Some(x) if x.is_finite() && x >= 0.0 => Ok(x),
        _ => Err(err(v.line, field, format!("must be a finite number >= 0, got {t}"))),
    }
}

/// Gbit/s -> bytes/s, > 0; `"inf"` is an ideal link.
fn gbps(v: &JVal, field: &str) -> Result<f64, TopologyError> {
    if let JKind::Str(s) = &v.kind {
        if s == "inf" {
            return Ok(f64::INFINITY);
        }
    }
    let t = number(v, field).map_err(|_| err(v.line, field, "must be a number > 0 or \"inf\""))?;
    match gbps_text_to_bps(t) {
        Some(x) if x.is_finite() && x > 0.0 => Ok(x),
        _ => Err(err(v.line, field, format!("must be a number > 0 (Gbit/s), got {t}"))),
    }
}

fn unsigned(v: &JVal, field: &str) -> Result<u32, TopologyError> {
    let t = number(v, field)?;
    t.parse::<u32>()
        .map_err(|_| err(v.line, field, format!("must be an integer in 0..=4294967295, got {t}")))
}

/// Why an id cannot be used, if it cannot.
pub(crate) fn bad_id(id: &str) -> Option<&'static str> {
    if id.is_empty() {
        Some("must not be empty")
    } else if id.chars().any(|c| c.is_whitespace() || c.is_control()) {
        Some("must not contain whitespace or control characters")
    } else if id.contains([',', '[', ']', '=', '#']) {
        Some("must not contain any of , [ ] = #")
    } else {
        None
    }
}

fn latency_fit(v: &JVal) -> Result<LatencyFit, TopologyError> {
    let m = object(v, "latency_fit")?;
    check_keys(m, &["pareto", "normal", "samples"], "latency_fit")?;
    let pair = |key: &str| -> Result<Option<(&JVal, &JVal)>, TopologyError> {
        match get(m, key) {
            None => Ok(None),
            Some(p) => match array(p, key)? {
                [x, y] => Ok(Some((x, y))),
                _ => Err(err(p.line, key, "must be an array of two numbers")),
            },
        }
    };
    let mut fit = LatencyFit::default();
    if let Some((k, a)) = pair("pareto")? {
        let k_s = micros(k, "pareto")?;
        let alpha = match &a.kind {
            JKind::Str(s) if s == "inf" => f64::INFINITY,
            _ => {
                let t = number(a, "pareto")?;
                match Dec::parse(t).map(|d| d.to_f64()) {
                    Some(x) if x > 0.0 => x,
                    _ => return Err(err(a.line, "pareto", format!("alpha must be > 0 or \"inf\", got {t}"))),
                }
            }
        };
        if k_s <= 0.0 {
            return Err(err(k.line, "pareto", "k must be > 0"));
        }
        fit.pareto = Some((k_s, alpha));
    }
    if let Some((mean, sd)) = pair("normal")? {
        fit.normal = Some((micros(mean, "normal")?, micros(sd, "normal")?));
    }
    if let Some(n) = get(m, "samples") {
        fit.samples = unsigned(n, "samples")?;
    }
    Ok(fit)
}

/// Parse topology JSON. `file` names the source in errors.
pub fn from_str(text: &str, file: &str) -> Result<Topology, TopologyError> {
    parse(text).map_err(|e| e.in_file(file))
}

fn parse(text: &str) -> Result<Topology, TopologyError> {
    let root = jsontext::parse(text)?;
    let top = object(&root, "a topology file")?;
    let vertices_v = require(top, "vertices", root.line, "file")?;
    let vertices_a = array(vertices_v, "vertices")?;
    if vertices_a.is_empty() {
        return Err(err(vertices_v.line, "vertices", "no vertices"));
    }
    let mut b = TopologyBuilder::new();
    let mut lines: Vec<usize> = Vec::with_capacity(vertices_a.len());
    let mut by_id: HashMap<String, usize> = HashMap::with_capacity(vertices_a.len());
    let mut rank_line: HashMap<u32, usize> = HashMap::new();
    for v in vertices_a {
        let m = object(v, "a vertex")?;
        check_keys(m, &["id", "kind", "rank"], "vertex")?;
        let id_v = require(m, "id", v.line, "vertex")?;
        let id = string(id_v, "id")?;
        if let Some(why) = bad_id(id) {
            return Err(err(id_v.line, "id", format!("'{id}' {why}")));
        }
        if let Some(&first) = by_id.get(id) {
            return Err(err(
                id_v.line,
                "id",
                format!("duplicate vertex id '{id}' (first at line {})", lines[first]),
            ));
        }
        let kind_v = require(m, "kind", v.line, "vertex")?;
        let kind = match string(kind_v, "kind")? {
            "rank" => VertexKind::Rank,
            "node" => VertexKind::Node,
            "switch" => VertexKind::Switch,
            k => {
                return Err(err(
                    kind_v.line,
                    "kind",
                    format!("'{k}' is not one of rank, node, switch"),
                ))
            }
        };
        let rank = match (kind, get(m, "rank")) {
            (VertexKind::Rank, None) => return Err(err(v.line, "rank", "missing in this rank vertex")),
            (VertexKind::Rank, Some(r)) => {
                let n = unsigned(r, "rank")?;
                if let Some(first) = rank_line.insert(n, r.line) {
                    return Err(err(
                        r.line,
                        "rank",
                        format!("rank {n} appears twice (first at line {first})"),
                    ));
                }
                Some(n)
            }
            (_, Some(r)) => {
                return Err(err(
                    r.line,
                    "rank",
                    format!("only rank vertices carry a rank, not a {kind}"),
                ))
            }
            (_, None) => None,
        };
        by_id.insert(id.to_string(), b.vertices.len());
        lines.push(v.line);
        b.vertices.push(Vertex {
            name: id.to_string(),
            kind,
            rank,
        });
    }
    let n_ranks = rank_line.len() as u32;
    if let Some(missing) = (0..n_ranks).find(|r| !rank_line.contains_key(r)) {
        return Err(err(
            vertices_v.line,
            "rank",
            format!(
                "ranks must be numbered 0..{} without gaps; rank {missing} is missing",
                n_ranks - 1
            ),
        ));
    }

    let links_a = match get(top, "links") {
        Some(l) => array(l, "links")?,
        None if vertices_a.len() == 1 => &[],
        None => return Err(err(root.line, "links", "missing in this file")),
    };
    // Union-find catches the first link that closes a cycle, with its line.
    let mut comp = crate::util::dsu::Dsu::new(b.vertices.len());
    let mut degree = vec![0usize; b.vertices.len()];
    for l in links_a {
        let m = object(l, "a link")?;
        check_keys(
            m,
            &[
                "a",
                "b",
                "latency_us",
                "bandwidth_gbps",
                "latency_us_ba",
                "bandwidth_gbps_ba",
                "duplex",
                "latency_fit",
                "confidence",
            ],
            "link",
        )?;
        let mut end = |key: &str| -> Result<usize, TopologyError> {
            let v = require(m, key, l.line, "link")?;
            let id = string(v, key)?;
            let &i = by_id
                .get(id)
                .ok_or_else(|| err(v.line, key, format!("unknown vertex '{id}'")))?;
            degree[i] += 1;
            if b.vertices[i].kind == VertexKind::Rank && degree[i] > 1 {
                return Err(err(
                    v.line,
                    key,
                    format!("rank vertex '{id}' has a second link (ranks are leaves)"),
                ));
            }
            Ok(i)
        };
        let a = end("a")?;
        let bv = end("b")?;
        if a == bv {
            return Err(err(
                l.line,
                "b",
                format!("link joins '{}' to itself", b.vertices[a].name),
            ));
        }
        let lat = micros(require(m, "latency_us", l.line, "link")?, "latency_us")?;
        let bw = gbps(require(m, "bandwidth_gbps", l.line, "link")?, "bandwidth_gbps")?;
        let lat_ba = get(m, "latency_us_ba")
            .map(|v| micros(v, "latency_us_ba"))
            .transpose()?;
        let bw_ba = get(m, "bandwidth_gbps_ba")
            .map(|v| gbps(v, "bandwidth_gbps_ba"))
            .transpose()?;
        let duplex = match get(m, "duplex") {
            None => Duplex::Full,
            Some(d) => match string(d, "duplex")? {
                "full" => Duplex::Full,
                "half" => Duplex::Half,
                x => return Err(err(d.line, "duplex", format!("'{x}' is not \"full\" or \"half\""))),
            },
        };
        let fit = get(m, "latency_fit").map(latency_fit).transpose()?;
        let confidence = get(m, "confidence")
            .map(|v| unit_interval(v, "confidence"))
            .transpose()?;
        if !comp.union(a, bv) {
            return Err(TopologyError::new(format!(
                "link {}-{} closes a cycle (the topology must be a tree)",
                b.vertices[a].name, b.vertices[bv].name
            ))
            .at_line(l.line));
        }
        let ab = LinkDir::new(lat, bw);
        let ba = LinkDir::new(lat_ba.unwrap_or(lat), bw_ba.unwrap_or(bw));
        b.links.push(Link {
            a,
            b: bv,
            ab,
            ba,
            duplex,
            latency_fit: fit,
            confidence,
        });
    }
    b.confidence = get(top, "confidence")
        .map(|v| unit_interval(v, "confidence"))
        .transpose()?;
    let r0 = comp.find(0);
    if let Some(v) = (1..b.vertices.len()).find(|&v| comp.find(v) != r0) {
        return Err(TopologyError::new(format!(
            "vertex '{}' is not connected to '{}' (the links must join all vertices into one tree)",
            b.vertices[v].name, b.vertices[0].name
        ))
        .at_line(lines[v]));
    }
    b.build()
}

/// A number in 0..1 (a confidence).
fn unit_interval(v: &JVal, field: &str) -> Result<f64, TopologyError> {
    match &v.kind {
        JKind::Num(text) => match text.parse::<f64>() {
            Ok(x) if (0.0..=1.0).contains(&x) => Ok(x),
            _ => Err(err(v.line, field, format!("{text} is not a number between 0 and 1"))),
        },
        _ => Err(err(
            v.line,
            field,
            format!("must be a number between 0 and 1, found {}", v.type_name()),
        )),
    }
}

fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

fn gbps_text(bps: f64) -> String {
    if bps.is_infinite() {
        "\"inf\"".into()
    } else {
        bps_to_gbps_text(bps)
    }
}

/// Write topology JSON (one vertex or link per line; see the module docs).
pub fn to_string(t: &Topology) -> String {
    let mut out = String::from("{\n  \"vertices\": [\n");
    let nv = t.vertices().len();
    for (i, v) in t.vertices().iter().enumerate() {
        let _ = write!(out, "    {{\"id\": {}, \"kind\": \"{}\"", quote(&v.name), v.kind);
        if let Some(r) = v.rank {
            let _ = write!(out, ", \"rank\": {r}");
        }
        out.push('}');
        out.push_str(if i + 1 < nv { ",\n" } else { "\n" });
    }
    out.push_str("  ],\n  \"links\": [\n");
    let nl = t.links().len();
    for (i, l) in t.links().iter().enumerate() {
        let _ = write!(
            out,
            "    {{\"a\": {}, \"b\": {}, \"latency_us\": {}, \"bandwidth_gbps\": {}",
            quote(&t.vertex(l.a).name),
            quote(&t.vertex(l.b).name),
            s_to_us_text(l.ab.latency_s),
            gbps_text(l.ab.bandwidth_bps)
        );
        if l.ba.latency_s != l.ab.latency_s {
            let _ = write!(out, ", \"latency_us_ba\": {}", s_to_us_text(l.ba.latency_s));
        }
        if l.ba.bandwidth_bps != l.ab.bandwidth_bps {
            let _ = write!(out, ", \"bandwidth_gbps_ba\": {}", gbps_text(l.ba.bandwidth_bps));
        }
        if l.duplex == Duplex::Half {
            out.push_str(", \"duplex\": \"half\"");
        }
        if let Some(f) = &l.latency_fit {
            let mut parts = Vec::new();
            if let Some((k, a)) = f.pareto {
                let alpha = if a.is_infinite() {
                    "\"inf\"".to_string()
                } else {
                    Dec::from_f64(a).to_text()
                };
                parts.push(format!("\"pareto\": [{}, {alpha}]", s_to_us_text(k)));
            }
            if let Some((m, sd)) = f.normal {
                parts.push(format!("\"normal\": [{}, {}]", s_to_us_text(m), s_to_us_text(sd)));
            }
            parts.push(format!("\"samples\": {}", f.samples));
            let _ = write!(out, ", \"latency_fit\": {{{}}}", parts.join(", "));
        }
        if let Some(c) = l.confidence {
            let _ = write!(out, ", \"confidence\": {}", Dec::from_f64(c).to_text());
        }
        out.push('}');
        out.push_str(if i + 1 < nl { ",\n" } else { "\n" });
    }
    out.push_str("  ]");
    if let Some(c) = t.confidence() {
        let _ = write!(out, ",\n  \"confidence\": {}", Dec::from_f64(c).to_text());
    }
    out.push_str("\n}\n");
    out
}
