//! Slurm `topology.conf` (topology/tree plugin), read and written.
//!
//! ```text
//! # comment
//! SwitchName=s0 Nodes=h[00-15] LinkSpeed=1000
//! SwitchName=s1 Nodes=h[16-31]
//! SwitchName=top Switches=s[0-1] LinkSpeed=10000
//! ```
//!
//! Reading:
//! - one switch per line, `Key=Value` pairs separated by blanks, keys case-insensitive as in Slurm
//!   (`SwitchName`, `Switches`, `Nodes`, `LinkSpeed`); `#` starts a comment; blank lines are
//!   ignored; lines may come in any order (a switch may be referenced before it is defined);
//! - `Nodes=` and `Switches=` take hostlist expressions ([`super::hostlist`]);
//! - hosts become `node` leaves (no ranks); the tree must have exactly one top switch (one not
//!   listed in any `Switches=`), every other switch exactly one parent, every host one switch;
//! - **LinkSpeed unit**: Slurm leaves its unit to the site (it stores an integer and does not use
//!   it); treecast reads it as the bandwidth in **Mbit/s** (10^6 bit/s) of every link from that
//!   switch down to its children (hosts and switches), both directions, full duplex. Mbit/s keeps
//!   the common speeds integers, as Slurm requires (100 Mbit/s = 100, GbE = 1000, 100 GbE = 100000).
//!   Without `LinkSpeed=` the links get [`DEFAULT_BANDWIDTH_BPS`];
//! - topology.conf has no latencies: every link gets [`DEFAULT_LATENCY_S`].
//!
//! Writing roots the tree at its anchor switch ([`Topology::anchor`], the first switch; reading a
//! file puts its top switch first, so read -> write keeps the top), lists switches top-down, each
//! with its child switches and hosts as compact hostlists. What topology.conf cannot express is
//! dropped: latencies, asymmetric and half-duplex links, ranks below a host (the host is written),
//! and anything below a non-switch vertex. When a switch's child links differ in bandwidth its
//! `LinkSpeed` is the slowest of them.

use super::decimal::{bps_to_mbps_text, mbps_text_to_bps};
use super::hostlist;
use super::json::bad_id;
use super::{Topology, TopologyBuilder, TopologyError, VertexId, VertexKind};
use std::collections::{HashMap, VecDeque};
use std::fmt::Write as _;

/// One-way latency given to every link read from topology.conf, which has no latencies: 2 us,
/// the order of one switch hop plus NIC on current Ethernet/InfiniBand clusters. Only relative
/// latencies matter to the planner when all links share one value.
pub const DEFAULT_LATENCY_S: f64 = 2e-6;
/// Bandwidth of links below a switch without `LinkSpeed=`: 10 Gbit/s (1.25e9 bytes/s), a common
/// cluster Ethernet speed.
pub const DEFAULT_BANDWIDTH_BPS: f64 = 1.25e9;

struct SwitchDef {
    name: String,
    line: usize,
    switches: Vec<String>,
    nodes: Vec<String>,
    speed_bps: Option<f64>,
}

fn err(line: usize, field: &str, msg: impl Into<String>) -> TopologyError {
    TopologyError::new(msg).at_line(line).field(field)
}

fn parse_line(text: &str, line: usize) -> Result<Option<SwitchDef>, TopologyError> {
    let body = text.split('#').next().unwrap_or("");
    let mut name: Option<String> = None;
    let mut def = SwitchDef {
        name: String::new(),
        line,
        switches: Vec::new(),
        nodes: Vec::new(),
        speed_bps: None,
    };
    let mut seen: Vec<&'static str> = Vec::new();
    for tok in body.split_whitespace() {
        let Some((key, value)) = tok.split_once('=') else {
            return Err(TopologyError::new(format!("expected Key=Value, got '{tok}'")).at_line(line));
        };
        let field: &'static str = match key.to_ascii_lowercase().as_str() {
            "switchname" => "SwitchName",
            "switches" => "Switches",
            "nodes" => "Nodes",
            "linkspeed" => "LinkSpeed",
            _ => {
                return Err(err(
                    line,
                    key,
                    "unknown key (topology/tree knows SwitchName, Switches, Nodes, LinkSpeed)",
                ))
            }
        };
        if seen.contains(&field) {
            return Err(err(line, field, "given twice on one line"));
        }
        seen.push(field);
        if value.is_empty() {
            return Err(err(line, field, "empty value"));
        }
        let list = |v: &str| hostlist::expand(v).map_err(|e| err(line, field, e.message));
        match field {
            "SwitchName" => {
                if let Some(why) = bad_id(value) {
                    return Err(err(line, field, format!("'{value}' {why}")));
                }
                name = Some(value.to_string());
            }
            "Switches" => def.switches = list(value)?,
            "Nodes" => def.nodes = list(value)?,
            _ => match mbps_text_to_bps(value) {
                Some(x) if x.is_finite() && x > 0.0 => def.speed_bps = Some(x),
                _ => {
                    return Err(err(
                        line,
                        field,
                        format!("must be a number > 0 (Mbit/s), got '{value}'"),
                    ))
                }
            },
        }
    }
    match name {
        Some(n) => {
            def.name = n;
            Ok(Some(def))
        }
        None if seen.is_empty() => Ok(None),
        None => Err(err(line, "SwitchName", "missing on this line")),
    }
}

/// Parse a topology.conf. `file` names the source in errors.
pub fn from_str(text: &str, file: &str) -> Result<Topology, TopologyError> {
    parse(text).map_err(|e| e.in_file(file))
}

fn parse(text: &str) -> Result<Topology, TopologyError> {
    let mut defs: Vec<SwitchDef> = Vec::new();
    let mut by_name: HashMap<String, usize> = HashMap::new();
    let mut names = 0usize;
    for (i, l) in text.lines().enumerate() {
        if let Some(d) = parse_line(l, i + 1)? {
            names += d.nodes.len() + d.switches.len();
            if names > hostlist::MAX_HOSTS {
                return Err(err(
                    d.line,
                    "Nodes",
                    format!("the file names more than {} hosts and switches", hostlist::MAX_HOSTS),
                ));
            }
            if let Some(&first) = by_name.get(&d.name) {
                return Err(err(
                    d.line,
                    "SwitchName",
                    format!("switch '{}' defined twice (first at line {})", d.name, defs[first].line),
                ));
            }
            by_name.insert(d.name.clone(), defs.len());
            defs.push(d);
        }
    }
    if defs.is_empty() {
        return Err(TopologyError::new(
            "no SwitchName= lines: a topology needs at least one switch",
        ));
    }
    // Parents: every switch and host at most once.
    let mut switch_parent: Vec<Option<usize>> = vec![None; defs.len()];
    let mut host_parent: HashMap<&str, usize> = HashMap::new();
    for (p, d) in defs.iter().enumerate() {
        for c in &d.switches {
            let &ci = by_name.get(c).ok_or_else(|| {
                err(
                    d.line,
                    "Switches",
                    format!("unknown switch '{c}' (no SwitchName={c} line)"),
                )
            })?;
            if ci == p {
                return Err(err(d.line, "Switches", format!("switch '{c}' lists itself (a cycle)")));
            }
            if let Some(q) = switch_parent[ci] {
                return Err(err(
                    d.line,
                    "Switches",
                    format!(
                        "switch '{c}' is already below '{}' (line {}); a tree gives each switch one parent",
                        defs[q].name, defs[q].line
                    ),
                ));
            }
            switch_parent[ci] = Some(p);
        }
        for h in &d.nodes {
            if by_name.contains_key(h) {
                return Err(err(d.line, "Nodes", format!("'{h}' is a switch name, not a host")));
            }
            if let Some(why) = bad_id(h) {
                return Err(err(d.line, "Nodes", format!("host name '{h}' {why}")));
            }
            if let Some(q) = host_parent.insert(h, p) {
                return Err(err(
                    d.line,
                    "Nodes",
                    format!(
                        "host '{h}' is already below switch '{}' (line {}); a host hangs below one switch",
                        defs[q].name, defs[q].line
                    ),
                ));
            }
        }
    }
    let tops: Vec<usize> = (0..defs.len()).filter(|&i| switch_parent[i].is_none()).collect();
    let top = match tops.as_slice() {
        [t] => *t,
        [] => {
            return Err(err(
                defs[0].line,
                "Switches",
                "no top-level switch: every switch is listed in some Switches= (a cycle)",
            ))
        }
        many => {
            let names: Vec<String> = many
                .iter()
                .map(|&i| format!("'{}' (line {})", defs[i].name, defs[i].line))
                .collect();
            return Err(err(
                defs[many[1]].line,
                "SwitchName",
                format!(
                    "more than one top-level switch: {}; join them under one switch",
                    names.join(", ")
                ),
            ));
        }
    };
    // Build top-down (breadth first) so the top switch is the anchor.
    let mut b = TopologyBuilder::new();
    let mut vid: Vec<Option<VertexId>> = vec![None; defs.len()];
    vid[top] = Some(b.vertex(defs[top].name.clone(), VertexKind::Switch));
    let mut queue = VecDeque::from([top]);
    while let Some(p) = queue.pop_front() {
        let d = &defs[p];
        let pv = vid[p].expect("queued switches have vertices");
        let bw = d.speed_bps.unwrap_or(DEFAULT_BANDWIDTH_BPS);
        for c in &d.switches {
            let ci = by_name[c];
            let cv = b.vertex(c.clone(), VertexKind::Switch);
            vid[ci] = Some(cv);
            b.link(pv, cv, DEFAULT_LATENCY_S, bw);
            queue.push_back(ci);
        }
        for h in &d.nodes {
            let hv = b.vertex(h.clone(), VertexKind::Node);
            b.link(pv, hv, DEFAULT_LATENCY_S, bw);
        }
    }
    if let Some(i) = (0..defs.len()).find(|&i| vid[i].is_none()) {
        return Err(err(
            defs[i].line,
            "Switches",
            format!(
                "switch '{}' is in a cycle of Switches= and not below the top switch '{}'",
                defs[i].name, defs[top].name
            ),
        ));
    }
    b.build()
}

/// Write a topology.conf (see the module docs for what is kept).
pub fn to_string(t: &Topology) -> String {
    let mut out = String::from(
        "# Slurm topology.conf written by treecast.\n\
         # LinkSpeed = Mbit/s of the links from a switch to its children. Latencies are not\n\
         # stored (read back as 2 us per link); the topology JSON format keeps everything.\n",
    );
    let anchor = t.anchor();
    if t.vertex(anchor).kind != VertexKind::Switch {
        out.push_str("# (this topology has no switch)\n");
        return out;
    }
    let mut queue = VecDeque::from([anchor]);
    while let Some(s) = queue.pop_front() {
        let children = t.children(s);
        let mut switches = Vec::new();
        let mut hosts = Vec::new();
        let mut speed = f64::INFINITY;
        for &c in &children {
            let (_, l) = t.parent(c).expect("a child has a parent link");
            let link = t.link(l);
            speed = speed.min(link.dir(link.a == s).bandwidth_bps);
            if t.vertex(c).kind == VertexKind::Switch {
                switches.push(t.vertex(c).name.as_str());
                queue.push_back(c);
            } else {
                hosts.push(t.vertex(c).name.as_str());
            }
        }
        let _ = write!(out, "SwitchName={}", t.vertex(s).name);
        if !switches.is_empty() {
            let _ = write!(out, " Switches={}", hostlist::compress(&switches));
        }
        if !hosts.is_empty() {
            let _ = write!(out, " Nodes={}", hostlist::compress(&hosts));
        }
        if speed.is_finite() {
            let _ = write!(out, " LinkSpeed={}", bps_to_mbps_text(speed));
        }
        out.push('\n');
    }
    out
}
