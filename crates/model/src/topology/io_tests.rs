//! Tests of the file formats: hand-written bad files (the error names line and field), exact
//! round trips of random trees, and parsers fed garbage.

use super::*;
use crate::util::rng::Rng;
use proptest::prelude::*;

/// Parameters for a random tree.
#[derive(Clone, Debug)]
struct Shape {
    levels: usize,
    max_fan: usize,
    max_ranks: usize,
    /// Anything JSON can hold (asymmetric, half duplex, odd names, fits), else only what Slurm can.
    rich: bool,
}

fn random_dir(rng: &mut Rng) -> LinkDir {
    let latency_s = match rng.below(4) {
        0 => 0.0,
        1 => rng.below(100) as f64 * 1e-6,
        _ => rng.f64() * 1e-3,
    };
    let bandwidth_bps = match rng.below(8) {
        0 => f64::INFINITY,
        1 => 1.25e8,
        _ => 1e6 + rng.f64() * 1e11,
    };
    LinkDir::new(latency_s, bandwidth_bps)
}

fn random_name(rng: &mut Rng, base: String, rich: bool) -> String {
    if rich && rng.below(4) == 0 {
        const ODD: [&str; 6] = ["é", "\"", "\\", "λ", "_x.y-z", "'"];
        format!("{base}{}", ODD[rng.below(ODD.len() as u64) as usize])
    } else {
        base
    }
}

/// A random tree: switches down to `levels - 1`, hosts (nodes) hanging off any switch (always at
/// the last level), ranks below hosts numbered in a shuffled order. Rich trees have their vertex
/// order shuffled and links in random orientation.
fn random_tree(seed: u64, shape: &Shape) -> Topology {
    let mut rng = Rng::new(seed);
    let mut b = TopologyBuilder::new();
    let root = b.vertex("s0", VertexKind::Switch);
    let mut frontier = vec![root];
    let mut hosts = Vec::new();
    let (mut ns, mut nh) = (1, 0);
    for level in 1..shape.levels {
        let mut next = Vec::new();
        for &p in &frontier {
            // Slurm: all links below one switch share its LinkSpeed (integer Mbit/s).
            let slurm_bw = (1 + rng.below(100_000)) as f64 * 125_000.0;
            for _ in 0..1 + rng.below(shape.max_fan as u64) {
                let is_switch = level + 1 < shape.levels && rng.below(3) != 0;
                let v = if is_switch {
                    ns += 1;
                    let name = random_name(&mut rng, format!("s{}", ns - 1), shape.rich);
                    b.vertex(name, VertexKind::Switch)
                } else {
                    nh += 1;
                    let name = random_name(&mut rng, format!("h{:03}", nh - 1), shape.rich);
                    b.vertex(name, VertexKind::Node)
                };
                if shape.rich {
                    let (ab, ba) = if rng.below(3) == 0 {
                        (random_dir(&mut rng), random_dir(&mut rng))
                    } else {
                        let d = random_dir(&mut rng);
                        (d, d)
                    };
                    let duplex = if rng.below(4) == 0 { Duplex::Half } else { Duplex::Full };
                    let l = if rng.below(2) == 0 {
                        b.link_full(p, v, ab, ba, duplex)
                    } else {
                        b.link_full(v, p, ba, ab, duplex)
                    };
                    if rng.below(5) == 0 {
                        b.links[l].latency_fit = Some(LatencyFit {
                            pareto: (rng.below(2) == 0).then(|| {
                                let alpha = if rng.below(3) == 0 {
                                    f64::INFINITY
                                } else {
                                    0.5 + rng.f64() * 5.0
                                };
                                (1e-6 + rng.f64() * 1e-4, alpha)
                            }),
                            normal: (rng.below(2) == 0).then(|| (rng.f64() * 1e-4, rng.f64() * 1e-5)),
                            samples: rng.below(1000) as u32,
                        });
                    }
                } else {
                    b.link(p, v, slurm::DEFAULT_LATENCY_S, slurm_bw);
                }
                if is_switch {
                    next.push(v);
                } else {
                    hosts.push(v);
                }
            }
        }
        frontier = next;
    }
    let mut ranks: Vec<u32> = Vec::new();
    let mut rank_hosts = Vec::new();
    for &h in &hosts {
        for _ in 0..rng.below(shape.max_ranks as u64 + 1) {
            ranks.push(ranks.len() as u32);
            rank_hosts.push(h);
        }
    }
    rng.shuffle(&mut ranks);
    for (&r, &h) in ranks.iter().zip(&rank_hosts) {
        let v = b.rank(r);
        let d = random_dir(&mut rng);
        b.link(v, h, d.latency_s, d.bandwidth_bps);
    }
    if shape.rich {
        // Shuffle vertex order, remapping links.
        let n = b.vertices.len();
        let mut perm: Vec<usize> = (0..n).collect();
        rng.shuffle(&mut perm);
        let mut vertices = vec![b.vertices[0].clone(); n];
        for (old, &new) in perm.iter().enumerate() {
            vertices[new] = b.vertices[old].clone();
        }
        b.vertices = vertices;
        for l in &mut b.links {
            l.a = perm[l.a];
            l.b = perm[l.b];
        }
        rng.shuffle(&mut b.links);
    }
    b.build().expect("random tree is valid")
}

fn shape_strategy(rich: bool) -> impl Strategy<Value = (u64, Shape)> {
    (any::<u64>(), 2..=5usize, 1..=4usize, 0..=3usize).prop_map(move |(seed, levels, max_fan, max_ranks)| {
        (
            seed,
            Shape {
                levels,
                max_fan,
                max_ranks: if rich { max_ranks } else { 0 },
                rich,
            },
        )
    })
}

/// Random edits of a valid text: delete, duplicate or replace a few characters.
fn mutate(text: &str, seed: u64) -> String {
    let mut rng = Rng::new(seed);
    let mut chars: Vec<char> = text.chars().collect();
    const ALPHABET: &[char] = &[
        '{', '}', '[', ']', ',', ':', '"', '-', '=', '#', '\n', ' ', '0', '9', '.', 'e', 'x', '\\', 'é',
    ];
    for _ in 0..1 + rng.below(4) {
        if chars.is_empty() {
            break;
        }
        let i = rng.below(chars.len() as u64) as usize;
        match rng.below(3) {
            0 => {
                chars.remove(i);
            }
            1 => {
                let c = chars[i];
                chars.insert(i, c);
            }
            _ => chars[i] = ALPHABET[rng.below(ALPHABET.len() as u64) as usize],
        }
    }
    chars.into_iter().collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn json_round_trip_is_exact((seed, shape) in shape_strategy(true)) {
        let t = random_tree(seed, &shape);
        let text = json::to_string(&t);
        let back = json::from_str(&text, "t.json").map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        // JSON keeps vertex and link order too.
        prop_assert_eq!(&back, &t);
        prop_assert!(back.canonical_eq(&t));
        prop_assert_eq!(json::to_string(&back), text);
    }

    #[test]
    fn slurm_round_trip_for_what_slurm_expresses((seed, shape) in shape_strategy(false)) {
        let t = random_tree(seed, &shape);
        let text = slurm::to_string(&t);
        let back = slurm::from_str(&text, "topology.conf")
            .map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert!(back.canonical_eq(&t), "{}", text);
        prop_assert_eq!(slurm::to_string(&back), text);
        prop_assert_eq!(groups_string(&back), groups_string(&t));
    }

    #[test]
    fn slurm_keeps_the_structure_of_any_host_level_tree((seed, shape) in shape_strategy(true)) {
        // Rich trees lose parameters in Slurm, but switches, hosts and adjacency survive.
        let t = random_tree(seed, &Shape { max_ranks: 0, ..shape });
        let back = slurm::from_str(&slurm::to_string(&t), "x.conf").unwrap();
        let names = |t: &Topology| {
            let mut e: Vec<(String, String)> = t.canonical_form().links.into_iter().map(|l| (l.a, l.b)).collect();
            e.sort();
            e
        };
        prop_assert_eq!(names(&back), names(&t));
    }

    #[test]
    fn rtt_csv_round_trip(seed in any::<u64>(), n in 1..12usize) {
        let mut rng = Rng::new(seed);
        let hosts: Vec<String> = (0..n).map(|i| format!("h{i}")).collect();
        let mut rtt = vec![vec![None; n]; n];
        #[allow(clippy::needless_range_loop)] // filling (i, j) and (j, i) together needs both indices
        for i in 0..n {
            rtt[i][i] = Some(0.0);
            for j in 0..i {
                let v = 1.0 + rng.f64() * 500.0;
                let w = v * (1.0 + 0.3 * (rng.f64() - 0.5));
                rtt[i][j] = (rng.below(5) != 0).then_some(v);
                rtt[j][i] = (rng.below(5) != 0).then_some(w);
            }
        }
        let m = RttMatrix { hosts, rtt_us: rtt };
        let text = rtt_csv::to_string(&m);
        prop_assert_eq!(rtt_csv::from_str(&text, "m.csv").unwrap(), m);
    }

    #[test]
    fn parsers_never_panic_on_mutated_files((seed, shape) in shape_strategy(true), mseed in any::<u64>()) {
        let t = random_tree(seed, &shape);
        for text in [json::to_string(&t), slurm::to_string(&t), rtt_csv_of(&t)] {
            let bad = mutate(&text, mseed);
            let _ = json::from_str(&bad, "f");
            let _ = slurm::from_str(&bad, "f");
            let _ = rtt_csv::from_str(&bad, "f");
            let _ = io::from_str_auto(&bad, "f");
        }
    }

    #[test]
    fn parsers_never_panic_on_garbage(s in "(?s).{0,200}", t in "[{}\\[\\],:\"=#a-z0-9 \\n.-]{0,200}") {
        for text in [&s, &t] {
            let _ = json::from_str(text, "f");
            let _ = slurm::from_str(text, "f");
            let _ = rtt_csv::from_str(text, "f");
            let _ = hostlist::expand(text);
        }
    }
}

/// A plausible RTT matrix for the hosts of `t` (2 x path latency), to feed the mutation test.
fn rtt_csv_of(t: &Topology) -> String {
    let hosts = t.vertices_of_kind(VertexKind::Node);
    let m = RttMatrix {
        hosts: hosts.iter().map(|&h| t.vertex(h).name.clone()).collect(),
        rtt_us: hosts
            .iter()
            .map(|&a| hosts.iter().map(|&b| Some(t.rtt(a, b) * 1e6)).collect())
            .collect(),
    };
    rtt_csv::to_string(&m)
}

// ---------------------------------------------------------------------------------------------
// JSON

fn json_err(text: &str) -> String {
    json::from_str(text, "bad.json").unwrap_err().to_string()
}

const GOOD_JSON: &str = r#"{
  "vertices": [
    {"id": "sw0", "kind": "switch"},
    {"id": "n0", "kind": "node"},
    {"id": "r0", "kind": "rank", "rank": 0},
    {"id": "r1", "kind": "rank", "rank": 1}
  ],
  "links": [
    {"a": "r0", "b": "n0", "latency_us": 0.3, "bandwidth_gbps": 40},
    {"a": "r1", "b": "n0", "latency_us": 0.3, "bandwidth_gbps": 40},
    {"a": "n0", "b": "sw0", "latency_us": 2.0, "bandwidth_gbps": 10.0, "latency_us_ba": 3, "bandwidth_gbps_ba": 1, "duplex": "half"}
  ]
}"#;

#[test]
fn json_reads_units_directions_and_defaults() {
    let t = json::from_str(GOOD_JSON, "good.json").unwrap();
    assert_eq!(t.num_ranks(), 2);
    let up = t.link(2);
    assert_eq!(up.ab, LinkDir::new(2e-6, 1.25e9));
    assert_eq!(up.ba, LinkDir::new(3e-6, 1.25e8));
    assert_eq!(up.duplex, Duplex::Half);
    let shm = t.link(0);
    assert_eq!(shm.ab, LinkDir::new(0.3e-6, 5e9));
    assert_eq!(shm.ab, shm.ba);
    assert_eq!(shm.duplex, Duplex::Full);
    // Written back: round numbers, defaults omitted.
    let text = json::to_string(&t);
    assert!(
        text.contains(r#"{"a": "r0", "b": "n0", "latency_us": 0.3, "bandwidth_gbps": 40}"#),
        "{text}"
    );
    assert!(
        text.contains(
            r#""latency_us": 2, "bandwidth_gbps": 10, "latency_us_ba": 3, "bandwidth_gbps_ba": 1, "duplex": "half"}"#
        ),
        "{text}"
    );
}

#[test]
fn json_errors_name_file_line_and_field() {
    let with = |from: &str, to: &str| {
        assert!(GOOD_JSON.contains(from), "{from}");
        json_err(&GOOD_JSON.replacen(from, to, 1))
    };
    // Unknown vertex in a link: line 9 holds the second link.
    assert_eq!(
        with(r#""a": "r1""#, r#""a": "r9""#),
        "bad.json:10: field 'a': unknown vertex 'r9'"
    );
    assert_eq!(
        with(r#"{"id": "n0""#, r#"{"id": "sw0""#),
        "bad.json:4: field 'id': duplicate vertex id 'sw0' (first at line 3)"
    );
    assert_eq!(
        with(r#""latency_us": 2.0"#, r#""latency_us": -2.0"#),
        "bad.json:11: field 'latency_us': must be a finite number >= 0, got -2.0"
    );
    assert_eq!(
        with(r#""bandwidth_gbps": 10.0"#, r#""bandwidth_gbps": 0"#),
        "bad.json:11: field 'bandwidth_gbps': must be a number > 0 (Gbit/s), got 0"
    );
    assert_eq!(
        with(r#""bandwidth_gbps": 10.0"#, r#""bandwidth_gbps": 1e999"#),
        "bad.json:11: field 'bandwidth_gbps': must be a number > 0 (Gbit/s), got 1e999"
    );
    assert_eq!(
        with(
            r#", "latency_us": 0.3, "bandwidth_gbps": 40}"#,
            r#", "bandwidth_gbps": 40}"#
        ),
        "bad.json:9: field 'latency_us': missing in this link"
    );
    assert_eq!(
        with(r#""bandwidth_gbps": 40}"#, r#""bandwidth_gpbs": 40}"#),
        "bad.json:9: field 'bandwidth_gpbs': unknown key in a link (expected one of: a, b, latency_us, \
         bandwidth_gbps, latency_us_ba, bandwidth_gbps_ba, duplex, latency_fit, confidence)"
    );
    assert_eq!(
        with(r#""duplex": "half""#, r#""duplex": "simplex""#),
        "bad.json:11: field 'duplex': 'simplex' is not \"full\" or \"half\""
    );
    assert_eq!(
        with(r#""kind": "node""#, r#""kind": "router""#),
        "bad.json:4: field 'kind': 'router' is not one of rank, node, switch"
    );
    assert_eq!(
        with(r#""rank": 1}"#, r#""rank": 0}"#),
        "bad.json:6: field 'rank': rank 0 appears twice (first at line 5)"
    );
    assert_eq!(
        with(r#""rank": 1}"#, r#""rank": 2}"#),
        "bad.json:2: field 'rank': ranks must be numbered 0..1 without gaps; rank 1 is missing"
    );
    assert_eq!(
        with(r#""rank": 1}"#, r#""rank": 1.5}"#),
        "bad.json:6: field 'rank': must be an integer in 0..=4294967295, got 1.5"
    );
    assert_eq!(
        with(r#""a": "n0", "b": "sw0""#, r#""a": "n0", "b": "r1""#),
        "bad.json:11: field 'b': rank vertex 'r1' has a second link (ranks are leaves)"
    );
    assert_eq!(
        with(r#""a": "n0", "b": "sw0""#, r#""a": "sw0", "b": "sw0""#),
        "bad.json:11: field 'b': link joins 'sw0' to itself"
    );
    // Syntax errors carry serde_json's line.
    let e = with(r#""links": ["#, r#""links": [,"#);
    assert!(e.starts_with("bad.json:8: invalid JSON: "), "{e}");
    assert_eq!(
        json_err(r#"{"vertices": [{"id": "a b", "kind": "node"}]}"#),
        "bad.json:1: field 'id': 'a b' must not contain whitespace or control characters"
    );
    assert_eq!(
        json_err(r#"{"links": []}"#),
        "bad.json:1: field 'vertices': missing in this file"
    );
    assert_eq!(
        json_err("[]"),
        "bad.json:1: a topology file must be an object, found an array"
    );
}

#[test]
fn json_rejects_cycles_and_disconnected_vertices_with_lines() {
    let cycle = r#"{"vertices": [
  {"id": "a", "kind": "switch"},
  {"id": "b", "kind": "switch"},
  {"id": "c", "kind": "switch"}],
 "links": [
  {"a": "a", "b": "b", "latency_us": 1, "bandwidth_gbps": 1},
  {"a": "b", "b": "c", "latency_us": 1, "bandwidth_gbps": 1},
  {"a": "c", "b": "a", "latency_us": 1, "bandwidth_gbps": 1}]}"#;
    assert_eq!(
        json_err(cycle),
        "bad.json:8: link c-a closes a cycle (the topology must be a tree)"
    );
    let apart = r#"{"vertices": [
  {"id": "a", "kind": "switch"},
  {"id": "b", "kind": "switch"},
  {"id": "c", "kind": "node"}],
 "links": [
  {"a": "a", "b": "b", "latency_us": 1, "bandwidth_gbps": 1}]}"#;
    assert_eq!(
        json_err(apart),
        "bad.json:4: vertex 'c' is not connected to 'a' (the links must join all vertices into one tree)"
    );
    // A lone vertex needs no links.
    let one = json::from_str(r#"{"vertices": [{"id": "h", "kind": "node"}]}"#, "one.json").unwrap();
    assert_eq!(one.num_vertices(), 1);
}

#[test]
fn json_latency_fit_and_ideal_links() {
    let text = r#"{"vertices": [{"id": "s", "kind": "switch"}, {"id": "h", "kind": "node"}],
 "links": [{"a": "s", "b": "h", "latency_us": 5, "bandwidth_gbps": "inf",
   "latency_fit": {"pareto": [4.5, "inf"], "normal": [5, 0.25], "samples": 30}}]}"#;
    let t = json::from_str(text, "fit.json").unwrap();
    let l = t.link(0);
    assert_eq!(l.ab.bandwidth_bps, f64::INFINITY);
    assert_eq!(
        l.latency_fit,
        Some(LatencyFit {
            pareto: Some((4.5e-6, f64::INFINITY)),
            normal: Some((5e-6, 0.25e-6)),
            samples: 30
        })
    );
    assert!(
        json::to_string(&t).contains(r#""latency_fit": {"pareto": [4.5, "inf"], "normal": [5, 0.25], "samples": 30}"#)
    );
    let bad = text.replace("[4.5, \"inf\"]", "[4.5, -1]");
    assert_eq!(
        json::from_str(&bad, "fit.json").unwrap_err().to_string(),
        "fit.json:3: field 'pareto': alpha must be > 0 or \"inf\", got -1"
    );
}

#[test]
fn json_confidence_of_links_and_tree_round_trips_and_is_checked() {
    let text = r#"{"vertices": [{"id": "s", "kind": "switch"}, {"id": "t", "kind": "switch"},
  {"id": "h", "kind": "node"}, {"id": "g", "kind": "node"}],
 "links": [{"a": "s", "b": "t", "latency_us": 2, "bandwidth_gbps": 10, "confidence": 0.9731},
  {"a": "h", "b": "s", "latency_us": 1, "bandwidth_gbps": 10},
  {"a": "g", "b": "t", "latency_us": 1, "bandwidth_gbps": 10}],
 "confidence": 0.5}"#;
    let t = json::from_str(text, "c.json").unwrap();
    assert_eq!(t.link(0).confidence, Some(0.9731));
    assert_eq!(t.link(1).confidence, None);
    assert_eq!(t.confidence(), Some(0.5));
    let again = json::from_str(&json::to_string(&t), "again.json").unwrap();
    assert!(again.canonical_eq(&t));
    assert_eq!(again.confidence(), Some(0.5));
    let bad = text.replace("0.9731", "1.5");
    assert_eq!(
        json::from_str(&bad, "c.json").unwrap_err().to_string(),
        "c.json:3: field 'confidence': 1.5 is not a number between 0 and 1"
    );
}

// ---------------------------------------------------------------------------------------------
// Slurm

fn slurm_err(text: &str) -> String {
    slurm::from_str(text, "topology.conf").unwrap_err().to_string()
}

#[test]
fn slurm_reads_hostlists_comments_case_and_linkspeed() {
    let text = "# a comment\n\
                \n\
                switchname=s0 nodes=h[00-02] LINKSPEED=1000   # GbE\n\
                SwitchName=s1 Nodes=h[03-04],login LinkSpeed=300\n\
                SwitchName=top Switches=s[0-1]\n";
    let t = slurm::from_str(text, "topology.conf").unwrap();
    assert_eq!(t.vertex(t.anchor()).name, "top");
    assert_eq!(t.vertices_of_kind(VertexKind::Node).len(), 6);
    assert_eq!(t.num_ranks(), 0);
    let link = |a: &str, b: &str| {
        let (va, vb) = (t.find(a).unwrap(), t.find(b).unwrap());
        t.path(va, vb).iter().map(|&d| t.dir_params(d)).collect::<Vec<_>>()
    };
    assert_eq!(link("s0", "h01"), [LinkDir::new(2e-6, 1.25e8)]);
    assert_eq!(link("login", "s1"), [LinkDir::new(2e-6, 3.75e7)]);
    assert_eq!(link("top", "s1"), [LinkDir::new(2e-6, slurm::DEFAULT_BANDWIDTH_BPS)]);
    assert_eq!(groups_string(&t), "h00 h01 h02\nh03 h04 login\n");
    // Written back compactly, top first.
    let out = slurm::to_string(&t);
    let lines: Vec<&str> = out.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(
        lines,
        [
            "SwitchName=top Switches=s[0-1] LinkSpeed=10000",
            "SwitchName=s0 Nodes=h[00-02] LinkSpeed=1000",
            "SwitchName=s1 Nodes=h[03-04],login LinkSpeed=300",
        ]
    );
}

#[test]
fn slurm_errors_name_line_and_field() {
    assert_eq!(
        slurm_err("SwitchName=s0 Nodes=a\nSwitchName=top Switches=s0,s9\n"),
        "topology.conf:2: field 'Switches': unknown switch 's9' (no SwitchName=s9 line)"
    );
    assert_eq!(
        slurm_err("SwitchName=s0 Nodes=h[1-4]\nSwitchName=s1 Nodes=h[4-5]\nSwitchName=t Switches=s[0-1]"),
        "topology.conf:2: field 'Nodes': host 'h4' is already below switch 's0' (line 1); a host hangs below one switch"
    );
    assert_eq!(
        slurm_err("SwitchName=a Switches=b\nSwitchName=b Switches=a\n"),
        "topology.conf:1: field 'Switches': no top-level switch: every switch is listed in some Switches= (a cycle)"
    );
    assert_eq!(
        slurm_err("SwitchName=t Switches=a\nSwitchName=a Nodes=x\nSwitchName=b Switches=c\nSwitchName=c Switches=b\n"),
        "topology.conf:3: field 'Switches': switch 'b' is in a cycle of Switches= and not below the top switch 't'"
    );
    assert_eq!(
        slurm_err("SwitchName=a Nodes=x\n# two roots\nSwitchName=b Nodes=y\n"),
        "topology.conf:3: field 'SwitchName': more than one top-level switch: 'a' (line 1), 'b' (line 3); \
         join them under one switch"
    );
    assert_eq!(
        slurm_err("SwitchName=a Nodes=x[3-1]\n"),
        "topology.conf:1: field 'Nodes': malformed range '[3-1]' in 'x[3-1]': 3 > 1"
    );
    assert_eq!(
        slurm_err("SwitchName=a Nodes=x[1-2\n"),
        "topology.conf:1: field 'Nodes': unclosed '[' in hostlist 'x[1-2'"
    );
    assert_eq!(
        slurm_err("SwitchName=a Nodes=x LinkSpeed=fast\n"),
        "topology.conf:1: field 'LinkSpeed': must be a number > 0 (Mbit/s), got 'fast'"
    );
    assert_eq!(
        slurm_err("SwitchName=a Nodes=x\nSwitchName=a Nodes=y\n"),
        "topology.conf:2: field 'SwitchName': switch 'a' defined twice (first at line 1)"
    );
    assert_eq!(
        slurm_err("\n\nNodes=x\n"),
        "topology.conf:3: field 'SwitchName': missing on this line"
    );
    assert_eq!(
        slurm_err("SwitchName=a Nodes=x Bandwidth=3\n"),
        "topology.conf:1: field 'Bandwidth': unknown key (topology/tree knows SwitchName, Switches, Nodes, LinkSpeed)"
    );
    assert_eq!(
        slurm_err("SwitchName=a Nodes\n"),
        "topology.conf:1: expected Key=Value, got 'Nodes'"
    );
    assert_eq!(
        slurm_err("SwitchName=a Switches=a\n"),
        "topology.conf:1: field 'Switches': switch 'a' lists itself (a cycle)"
    );
    assert_eq!(
        slurm_err("SwitchName=a Nodes=b\nSwitchName=b Nodes=c\n"),
        "topology.conf:1: field 'Nodes': 'b' is a switch name, not a host"
    );
    let huge = "SwitchName=a Nodes=x[0-999999]\nSwitchName=b Nodes=y[0-999999]\n";
    assert_eq!(
        slurm_err(huge),
        "topology.conf:2: field 'Nodes': the file names more than 1048576 hosts and switches"
    );
    assert_eq!(
        slurm_err("# nothing\n"),
        "topology.conf: no SwitchName= lines: a topology needs at least one switch"
    );
}

// ---------------------------------------------------------------------------------------------
// RTT CSV

fn csv_err(text: &str) -> String {
    rtt_csv::from_str(text, "rtt.csv").unwrap_err().to_string()
}

#[test]
fn rtt_csv_reads_missing_cells_and_spaces() {
    let m = rtt_csv::from_str("host, a, b, c\na, 0, 20.5,\nb, 21, 0, 40\nc, , 41, 0\n", "rtt.csv").unwrap();
    assert_eq!(m.hosts, ["a", "b", "c"]);
    assert_eq!(
        m.rtt_us,
        [
            [Some(0.0), Some(20.5), None],
            [Some(21.0), Some(0.0), Some(40.0)],
            [None, Some(41.0), Some(0.0)]
        ]
    );
    assert_eq!(rtt_csv::to_string(&m), "host,a,b,c\na,0,20.5,\nb,21,0,40\nc,,41,0\n");
}

#[test]
fn rtt_csv_errors_name_line_and_column() {
    assert_eq!(
        csv_err("host,a,b\na,0,1\nb,1\n"),
        "rtt.csv:3: row has 2 cells, the header has 3 (ragged row)"
    );
    assert_eq!(
        csv_err("host,a,b\na,0,1\n"),
        "rtt.csv: 1 rows for 2 hosts (the matrix must be square)"
    );
    assert_eq!(
        csv_err("host,a\na,0\nb,0\n"),
        "rtt.csv:3: more rows than the 1 hosts of the header (the matrix must be square)"
    );
    assert_eq!(
        csv_err("host,a,b\nb,0,1\na,1,0\n"),
        "rtt.csv:2: field 'column 1 (row name)': row 1 is named 'b' but column 2 is 'a'"
    );
    assert_eq!(
        csv_err("host,a,b\na,0,-1\nb,1,0\n"),
        "rtt.csv:2: field 'column 3 (b)': RTT must be a finite number >= 0 (us), got '-1'"
    );
    assert_eq!(
        csv_err("host,a,b\na,0,NaN\nb,1,0\n"),
        "rtt.csv:2: field 'column 3 (b)': RTT must be a finite number >= 0 (us), got 'NaN'"
    );
    assert_eq!(
        csv_err("host,a,b\na,0,inf\nb,1,0\n"),
        "rtt.csv:2: field 'column 3 (b)': RTT must be a finite number >= 0 (us), got 'inf'"
    );
    assert_eq!(
        csv_err("host,a,b\na,0,1x\nb,1,0\n"),
        "rtt.csv:2: field 'column 3 (b)': '1x' is not a number"
    );
    assert_eq!(
        csv_err("host,a,b\na,0,1\nb,1,3\n"),
        "rtt.csv:3: field 'column 3 (b)': the diagonal must be 0, got '3'"
    );
    assert_eq!(
        csv_err("host,a,a\na,0,1\na,1,0\n"),
        "rtt.csv:1: field 'column 3 (a)': duplicate host name (also column 2)"
    );
    assert_eq!(
        csv_err("h,a\na,0\n"),
        "rtt.csv:1: field 'column 1 (h)': the header row must start with 'host' followed by the host names"
    );
    // 20 vs 45 us: more than a factor 2 apart.
    assert_eq!(
        csv_err("host,a,b\na,0,20\nb,45,0\n"),
        "rtt.csv:3: field 'column 2 (a)': asymmetric pair: b->a is 45 us but a->b is 20 us (line 2); \
         the two directions may differ by at most 50%"
    );
    assert_eq!(
        csv_err(""),
        "rtt.csv: empty RTT matrix (expected a header row 'host,<name>,...')"
    );
}

#[test]
fn rtt_csv_symmetry_tolerance_admits_measurement_noise() {
    // The emulated cluster of docs/design.md §5.3: same-switch minima 19-25 us, cross-switch 33-55 us.
    assert!(rtt_csv::from_str("host,a,b\na,0,19\nb,25,0\n", "m").is_ok());
    assert!(rtt_csv::from_str("host,a,b\na,0,33\nb,55,0\n", "m").is_ok());
    // Loopback-scale values get the absolute slack.
    assert!(rtt_csv::from_str("host,a,b\na,0,0.5\nb,2.4,0\n", "m").is_ok());
    // A descheduled measurement (ms against us) is rejected.
    assert!(rtt_csv::from_str("host,a,b\na,0,30\nb,12000,0\n", "m").is_err());
}

// ---------------------------------------------------------------------------------------------
// DOT, groups, load/save

#[test]
fn dot_shapes_and_labels() {
    let t = json::from_str(GOOD_JSON, "good.json").unwrap();
    let d = dot::to_string(&t);
    assert!(d.starts_with("graph topology {"), "{d}");
    assert!(d.contains("\"sw0\" [shape=box, style=filled"), "{d}");
    assert!(d.contains("\"n0\" [shape=box, style=rounded];"), "{d}");
    assert!(d.contains("\"r0\" [shape=ellipse];"), "{d}");
    assert!(d.contains("\"n0\" -- \"r0\" [label=\"0.3 us, 40 Gb/s\"];"), "{d}");
    // The asymmetric half-duplex uplink, drawn from the switch down.
    assert!(
        d.contains("\"sw0\" -- \"n0\" [label=\"v 3 us, 1 Gb/s\\n^ 2 us, 10 Gb/s\\nhalf duplex\"];"),
        "{d}"
    );
    assert!(d.trim_end().ends_with('}'));
}

#[test]
fn groups_for_host_and_rank_level_trees() {
    // Rank level with nodes: hosts are the nodes, ranks not listed.
    let t = json::from_str(GOOD_JSON, "good.json").unwrap();
    assert_eq!(groups_string(&t), "n0\n");
    // Ranks directly on switches; an inner switch with hosts of its own; a switch with none.
    let mut b = TopologyBuilder::new();
    let top = b.vertex("top", VertexKind::Switch);
    let mid = b.vertex("mid", VertexKind::Switch);
    let lo = b.vertex("lo", VertexKind::Switch);
    b.link(top, mid, 1e-6, 1e9);
    b.link(mid, lo, 1e-6, 1e9);
    for (r, s) in [(0, lo), (1, mid), (2, lo), (3, lo)] {
        let v = b.rank(r);
        b.link(v, s, 1e-6, 1e9);
    }
    let t = b.build().unwrap();
    assert_eq!(groups_string(&t), "r0 r2 r3\nr1\n");
    // No switches: one group.
    let mut b = TopologyBuilder::new();
    let n = b.vertex("n", VertexKind::Node);
    let r = b.rank(0);
    b.link(n, r, 0.0, 1e9);
    assert_eq!(groups_string(&b.build().unwrap()), "n\n");
}

#[test]
fn load_by_content_and_save_by_extension() {
    let dir = std::env::temp_dir().join(format!("treecast-io-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let t = json::from_str(GOOD_JSON, "good.json").unwrap();
    // Content decides, not the name: JSON saved under .json, read back; Slurm text under any name.
    let pj = dir.join("t.json");
    save_file(&pj, &t).unwrap();
    assert_eq!(load_file(&pj).unwrap(), t);
    let ps = dir.join("t.conf");
    save_file(&ps, &t).unwrap();
    let odd = dir.join("slurm.txt");
    std::fs::copy(&ps, &odd).unwrap();
    let s = load_file(&odd).unwrap();
    assert_eq!(s.vertex(s.anchor()).name, "sw0");
    assert_eq!(groups_string(&s), "n0\n");
    // Leading whitespace and a byte-order mark still mean JSON.
    std::fs::write(&odd, format!("\u{feff}\n  {GOOD_JSON}")).unwrap();
    assert_eq!(load_file(&odd).unwrap(), t);
    let e = load_file(&dir.join("missing.json")).unwrap_err().to_string();
    assert!(e.contains("missing.json: cannot read"), "{e}");
    std::fs::write(&odd, "{\"vertices\": 3}").unwrap();
    let e = load_file(&odd).unwrap_err().to_string();
    assert_eq!(
        e,
        format!(
            "{}:1: field 'vertices': must be an array, found a number",
            odd.display()
        )
    );
    let e = save_file(&dir.join("t.xml"), &t).unwrap_err().to_string();
    assert!(e.contains("t.xml: unknown extension"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}
