//! Graphviz DOT for pictures (`dot -Tsvg topo.dot > topo.svg`). Write-only.
//!
//! Switches are grey boxes, nodes (hosts) rounded boxes, ranks ellipses. Edges run from parent to
//! child in the anchor rooting so `dot` draws the tree top-down, each labelled with its latency
//! (us) and bandwidth (Gbit/s); an asymmetric link shows both directions (`v` down, `^` up), a
//! half-duplex link says so.

use super::decimal::{bps_to_gbps_text, s_to_us_text};
use super::{Duplex, LinkDir, Topology, VertexKind};
use std::fmt::Write as _;

fn quote(s: &str) -> String {
    let escaped = s.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n");
    format!("\"{escaped}\"")
}

fn params(d: LinkDir) -> String {
    let bw = if d.bandwidth_bps.is_infinite() {
        "inf".to_string()
    } else {
        bps_to_gbps_text(d.bandwidth_bps)
    };
    format!("{} us, {} Gb/s", s_to_us_text(d.latency_s), bw)
}

/// Write the topology as an undirected Graphviz graph.
pub fn to_string(t: &Topology) -> String {
    let mut out = String::from("graph topology {\n  node [fontname=\"Helvetica\", fontsize=10];\n");
    out.push_str("  edge [fontname=\"Helvetica\", fontsize=8];\n");
    for v in t.vertices() {
        let attrs = match v.kind {
            VertexKind::Switch => "shape=box, style=filled, fillcolor=\"#d9d9d9\"".to_string(),
            VertexKind::Node => "shape=box, style=rounded".to_string(),
            VertexKind::Rank => {
                let r = v.rank.unwrap_or(0);
                if v.name == format!("r{r}") {
                    "shape=ellipse".to_string()
                } else {
                    format!("shape=ellipse, label={}", quote(&format!("{}\nrank {r}", v.name)))
                }
            }
        };
        let _ = writeln!(out, "  {} [{attrs}];", quote(&v.name));
    }
    for (id, l) in t.links().iter().enumerate() {
        // Orient parent -> child for a top-down drawing.
        let a_is_parent = t.parent(l.b).map(|(p, pl)| p == l.a && pl == id).unwrap_or(false);
        let (p, c, down, up) = if a_is_parent {
            (l.a, l.b, l.ab, l.ba)
        } else {
            (l.b, l.a, l.ba, l.ab)
        };
        let mut label = if down == up {
            params(down)
        } else {
            format!("v {}\n^ {}", params(down), params(up))
        };
        if l.duplex == Duplex::Half {
            label.push_str("\nhalf duplex");
        }
        let _ = writeln!(
            out,
            "  {} -- {} [label={}];",
            quote(&t.vertex(p).name),
            quote(&t.vertex(c).name),
            quote(&label)
        );
    }
    out.push_str("}\n");
    out
}
