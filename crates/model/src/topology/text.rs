//! A tree drawn as indented text (for `treecast probe` and the demo).
//!
//! Each vertex is one line with the parameters of the link to its parent; a node's rank leaves
//! are folded into one line (`ranks 0-3 7`) so a 16-rank host is not 16 lines.

use super::{LinkDir, Topology, VertexId, VertexKind};
use std::fmt::Write;

fn fmt_link(d: LinkDir) -> String {
    let bw = d.bandwidth_bps * 8.0;
    let bw_s = if bw.is_infinite() {
        "inf".to_string()
    } else if bw >= 1e9 {
        format!("{:.3} Gbit/s", bw / 1e9)
    } else {
        format!("{:.1} Mbit/s", bw / 1e6)
    };
    format!("{:.1} us, {bw_s}", d.latency_s * 1e6)
}

/// Compress sorted rank numbers into ranges: `0-3 7 9-10`.
pub fn rank_ranges(ranks: &[u32]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < ranks.len() {
        let mut j = i;
        while j + 1 < ranks.len() && ranks[j + 1] == ranks[j] + 1 {
            j += 1;
        }
        out.push(if j > i {
            format!("{}-{}", ranks[i], ranks[j])
        } else {
            ranks[i].to_string()
        });
        i = j + 1;
    }
    out.join(" ")
}

/// Draw the tree from its anchor (after a line with the tree's confidence, when inferred).
pub fn to_string(t: &Topology) -> String {
    let mut out = String::new();
    if let Some(c) = t.confidence() {
        let _ = writeln!(
            out,
            "# inferred tree, confidence {c:.3} (its least certain link decision)"
        );
    }
    draw(t, t.anchor(), "", true, true, &mut out);
    out
}

fn draw(t: &Topology, v: VertexId, prefix: &str, last: bool, top: bool, out: &mut String) {
    let vert = t.vertex(v);
    let link = t.parent(v).map(|(_, l)| {
        let link = t.link(l);
        // Direction from parent down to v; an inferred link's confidence after it.
        let conf = link
            .confidence
            .map_or(String::new(), |c| format!(", confidence {c:.3}"));
        format!("{}{conf}", fmt_link(link.dir(link.b == v)))
    });
    let children = t.children(v);
    let (rank_kids, other_kids): (Vec<VertexId>, Vec<VertexId>) = children
        .into_iter()
        .partition(|&c| t.vertex(c).kind == VertexKind::Rank);
    let branch = if top {
        ""
    } else if last {
        "└── "
    } else {
        "├── "
    };
    let _ = write!(out, "{prefix}{branch}{} ({})", vert.name, vert.kind);
    if let Some(r) = vert.rank {
        let _ = write!(out, " rank {r}");
    }
    if !rank_kids.is_empty() {
        let mut ranks: Vec<u32> = rank_kids.iter().filter_map(|&c| t.vertex(c).rank).collect();
        ranks.sort_unstable();
        let _ = write!(out, " ranks {}", rank_ranges(&ranks));
    }
    if let Some(l) = link {
        let _ = write!(out, "  [{l}]");
    }
    out.push('\n');
    let child_prefix = if top {
        prefix.to_string()
    } else {
        format!("{prefix}{}", if last { "    " } else { "│   " })
    };
    for (i, &c) in other_kids.iter().enumerate() {
        draw(t, c, &child_prefix, i + 1 == other_kids.len(), false, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::TopologyBuilder;

    #[test]
    fn draws_switches_hosts_and_folded_ranks() {
        let mut b = TopologyBuilder::new();
        let top = b.vertex("top", VertexKind::Switch);
        let s0 = b.vertex("s0", VertexKind::Switch);
        let h1 = b.vertex("h1", VertexKind::Node);
        let h2 = b.vertex("h2", VertexKind::Node);
        b.link(s0, top, 5e-6, 37.5e6);
        b.link(h1, s0, 2e-6, 1.25e9);
        b.link(h2, top, 2e-6, 1.25e9);
        for r in 0..4 {
            let rv = b.rank(r);
            b.link(rv, if r < 3 { h1 } else { h2 }, 1e-7, 1e10);
        }
        let t = b.build().unwrap();
        let s = to_string(&t);
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines.len(), 4, "{s}");
        assert_eq!(lines[0], "top (switch)");
        assert!(
            lines
                .iter()
                .any(|l| l.contains("h1 (node) ranks 0-2  [2.0 us, 10.000 Gbit/s]")),
            "{s}"
        );
        assert!(
            lines.iter().any(|l| l.contains("s0 (switch)  [5.0 us, 300.0 Mbit/s]")),
            "{s}"
        );
        assert_eq!(rank_ranges(&[0, 1, 2, 5, 7, 8]), "0-2 5 7-8");
    }
}
