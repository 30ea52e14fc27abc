//! Optimal search on seed 004's four model families (draft).
use std::time::Duration;
use treecast::plan::optimal::{solve, OptimalOptions};
use treecast::plan::testnets;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let fam = args.get(1).map(|s| s.as_str()).unwrap_or("all");
    let size: u32 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(0);
    let limit: f64 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(10.0);
    let cases: Vec<(String, treecast::topology::Topology)> = match fam {
        "star" => vec![(format!("star {size}"), testnets::star(size))],
        "dual" => vec![(format!("dual 2x{size}"), testnets::dual_cpu(size))],
        "uni" => vec![(format!("uni 2x{size}x2"), testnets::two_clusters(size))],
        "non" => vec![(format!("non 2x{size}x(1+1)"), testnets::two_nonuniform(size))],
        _ => vec![],
    };
    for (name, t) in cases {
        let opts = OptimalOptions {
            time_limit: Some(Duration::from_secs_f64(limit)),
            ..Default::default()
        };
        let r = solve(&t, 0, 1 << 20, &opts).unwrap();
        println!(
            "{name}: ms {:.6} heur {:.6} lb0 {:.6} proven {} nodes {} hits {} time {:.4}s",
            r.timeline.makespan * 1e3,
            r.heuristic_s * 1e3,
            r.lower_bound_s * 1e3,
            r.proven,
            r.nodes_explored,
            r.memo_hits,
            r.search_time_s
        );
    }
}
