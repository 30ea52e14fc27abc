//! `treecast report`: an mpiP-style text table and SVG charts of a profile.

use super::report::{CommReport, ProfileReport, SampleCall, SiteReport};
use crate::util::svg::{fmt_time, ticks, Stroke, Svg};
use std::fmt::Write;

fn us(s: f64) -> String {
    if s.is_finite() {
        format!("{:.2}", s * 1e6)
    } else {
        "-".into()
    }
}

fn opt_us(s: Option<f64>) -> String {
    s.map(us).unwrap_or_else(|| "-".into())
}

/// The text report: per communicator, one row per call site (times in microseconds), then
/// the MPI_Bcast comparison and the slowest ranks of each site's sample call.
pub fn text(report: &ProfileReport) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "treecast profile: {} ranks, {} communicators",
        report.world_size,
        report.communicators.len()
    );
    for c in &report.communicators {
        let _ = writeln!(o, "\n@--- {} ({} ranks) ---", c.label, c.size);
        let _ = writeln!(
            o,
            "{:<40} {:>8} {:>12} {:>10} {:>10} {:>10} {:>10} {:>12} {:>7}",
            "Call site", "Calls", "Bytes", "Min us", "Median us", "P99 us", "Max us", "Predicted us", "Errors"
        );
        for s in &c.sites {
            let _ = writeln!(
                o,
                "{:<40} {:>8} {:>12} {:>10} {:>10} {:>10} {:>10} {:>12} {:>7}",
                shorten(&s.site, 40),
                s.calls,
                s.bytes,
                us(s.time.min_s),
                us(s.time.median_s),
                us(s.time.p99_s),
                us(s.time.max_s),
                opt_us(s.predicted.map(|p| p.deterministic_s)),
                s.failures
            );
        }
        let with_model: Vec<&SiteReport> = c
            .sites
            .iter()
            .filter(|s| s.predicted.is_some_and(|p| p.pareto_mean_s.is_some()))
            .collect();
        if !with_model.is_empty() {
            let _ = writeln!(o, "\nPredicted from latency distributions (mean / p99, us):");
            for s in with_model {
                let p = s.predicted.unwrap();
                let _ = writeln!(
                    o,
                    "  {:<40} pareto {} / {}   normal {} / {}",
                    shorten(&s.site, 40),
                    opt_us(p.pareto_mean_s),
                    opt_us(p.pareto_p99_s),
                    opt_us(p.normal_mean_s),
                    opt_us(p.normal_p99_s)
                );
            }
        }
        let compared: Vec<&SiteReport> = c.sites.iter().filter(|s| s.compare.is_some()).collect();
        if !compared.is_empty() {
            let _ = writeln!(o, "\nMPI_Bcast on the same data (every Nth call):");
            let _ = writeln!(
                o,
                "  {:<40} {:>8} {:>14} {:>14} {:>9}",
                "Call site", "Calls", "MPI_Bcast us", "topo_bcast us", "topo/MPI"
            );
            for s in compared {
                let cmp = s.compare.unwrap();
                let _ = writeln!(
                    o,
                    "  {:<40} {:>8} {:>14} {:>14} {:>9.3}",
                    shorten(&s.site, 40),
                    cmp.calls,
                    us(cmp.mpi_bcast_median_s),
                    us(cmp.topo_bcast_median_s),
                    cmp.ratio
                );
            }
        }
        for s in &c.sites {
            if let Some(sc) = &s.sample_call {
                let _ = writeln!(
                    o,
                    "\nLast call from {} (root {}, {} bytes, plan {}): completion per rank, us after the root's entry",
                    shorten(&s.site, 60),
                    sc.root,
                    sc.bytes,
                    sc.algorithm
                );
                let mut ranks = sc.ranks.clone();
                ranks.sort_by(|a, b| b.done_s.total_cmp(&a.done_s));
                for r in ranks.iter().take(8) {
                    let host = c.hosts.get(r.rank as usize).map(String::as_str).unwrap_or("?");
                    let _ = writeln!(
                        o,
                        "  rank {:>5} {:<20} done {:>10}  predicted {:>10}",
                        r.rank,
                        shorten(host, 20),
                        us(r.done_s),
                        opt_us(r.predicted_done_s)
                    );
                }
                if ranks.len() > 8 {
                    let _ = writeln!(o, "  ... {} more ranks", ranks.len() - 8);
                }
            }
        }
    }
    o
}

fn shorten(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let tail: String = s
            .chars()
            .rev()
            .take(n - 1)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        format!("…{tail}")
    }
}

/// Histogram of one site's call durations (log-spaced bins as recorded).
pub fn histogram_svg(title: &str, s: &SiteReport) -> String {
    let (w, h, ml, mb, mt) = (640.0, 320.0, 60.0, 50.0, 30.0);
    let mut svg = Svg::new(w, h);
    svg.text(w / 2.0, 18.0, 13.0, "middle", title);
    let bins = &s.histogram;
    if bins.is_empty() {
        svg.text(w / 2.0, h / 2.0, 12.0, "middle", "no calls");
        return svg.finish();
    }
    let lo = bins.first().unwrap().0.log10();
    let hi = bins.last().unwrap().1.log10();
    let span = (hi - lo).max(1e-9);
    let maxc = bins.iter().map(|b| b.2).max().unwrap_or(1) as f64;
    let pw = w - ml - 20.0;
    let ph = h - mb - mt;
    let x = |t: f64| ml + (t.log10() - lo) / span * pw;
    for &(a, b, c) in bins {
        let bh = c as f64 / maxc * ph;
        svg.rect(
            x(a),
            mt + ph - bh,
            (x(b) - x(a)).max(1.0),
            bh,
            "#4477aa",
            Some(&format!("{} .. {}: {c}", fmt_time(a), fmt_time(b))),
        );
    }
    svg.line((ml, mt + ph), (ml + pw, mt + ph), Stroke::solid("black", 1.0));
    for m in [s.time.median_s, s.time.p99_s] {
        if m.is_finite() && m > 0.0 {
            svg.line((x(m), mt), (x(m), mt + ph), Stroke::dashed("#cc3311", 1.0));
        }
    }
    svg.text(x(s.time.median_s), mt - 4.0, 10.0, "middle", "median");
    for d in (lo.floor() as i32)..=(hi.ceil() as i32) {
        let t = 10f64.powi(d);
        if t.log10() >= lo && t.log10() <= hi {
            svg.line((x(t), mt + ph), (x(t), mt + ph + 5.0), Stroke::solid("black", 1.0));
            svg.text(x(t), mt + ph + 18.0, 10.0, "middle", &fmt_time(t));
        }
    }
    svg.text(w / 2.0, h - 8.0, 11.0, "middle", "call duration (per rank, log scale)");
    svg.text(14.0, mt + ph / 2.0, 11.0, "middle", "calls");
    svg.finish()
}

/// Predicted vs measured median time per call site of one communicator (bars).
pub fn predicted_vs_measured_svg(c: &CommReport) -> String {
    let n = c.sites.len().max(1) as f64;
    let (w, ml, mb, mt) = (120.0 + 110.0 * n, 70.0, 90.0, 30.0);
    let h = 340.0;
    let mut svg = Svg::new(w, h);
    svg.text(
        w / 2.0,
        18.0,
        13.0,
        "middle",
        &format!("{}: measured median vs predicted", c.label),
    );
    let vals: Vec<(f64, Option<f64>)> = c
        .sites
        .iter()
        .map(|s| (s.time.median_s, s.predicted.map(|p| p.deterministic_s)))
        .collect();
    let maxv = vals
        .iter()
        .flat_map(|(m, p)| [*m, p.unwrap_or(0.0)])
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max)
        .max(1e-9);
    let ph = h - mb - mt;
    let y = |v: f64| mt + ph - v / maxv * ph;
    for t in ticks(0.0, maxv, 5) {
        svg.line((ml - 4.0, y(t)), (w - 20.0, y(t)), Stroke::solid("#dddddd", 1.0));
        svg.text(ml - 6.0, y(t) + 3.0, 10.0, "end", &fmt_time(t));
    }
    for (i, (s, (m, p))) in c.sites.iter().zip(&vals).enumerate() {
        let x0 = ml + 10.0 + i as f64 * 110.0;
        if m.is_finite() {
            svg.rect(
                x0,
                y(*m),
                40.0,
                mt + ph - y(*m),
                "#4477aa",
                Some(&format!("measured {}", fmt_time(*m))),
            );
        }
        if let Some(p) = p {
            svg.rect(
                x0 + 44.0,
                y(*p),
                40.0,
                mt + ph - y(*p),
                "#ee7733",
                Some(&format!("predicted {}", fmt_time(*p))),
            );
        }
        svg.text(x0 + 42.0, mt + ph + 16.0, 9.0, "middle", &shorten(&s.site, 22));
    }
    svg.rect(ml, h - 30.0, 12.0, 12.0, "#4477aa", None);
    svg.text(ml + 16.0, h - 20.0, 11.0, "start", "measured median");
    svg.rect(ml + 140.0, h - 30.0, 12.0, 12.0, "#ee7733", None);
    svg.text(ml + 156.0, h - 20.0, 11.0, "start", "predicted (contention-free)");
    svg.finish()
}

/// Gantt chart of one call per rank: entry to completion, with the predicted completion.
pub fn gantt_svg(title: &str, sc: &SampleCall, hosts: &[String]) -> String {
    let rows = sc.ranks.len().max(1) as f64;
    let row_h = if rows > 64.0 { 6.0 } else { 16.0 };
    let (w, ml, mt, mb) = (760.0, 150.0, 34.0, 40.0);
    let h = mt + mb + rows * row_h;
    let mut svg = Svg::new(w, h);
    svg.text(w / 2.0, 18.0, 13.0, "middle", title);
    let tmin = sc.ranks.iter().map(|r| r.enter_s).fold(0.0, f64::min);
    let tmax = sc
        .ranks
        .iter()
        .flat_map(|r| [r.done_s, r.predicted_done_s.unwrap_or(0.0)])
        .fold(1e-9, f64::max);
    let pw = w - ml - 20.0;
    let x = |t: f64| ml + (t - tmin) / (tmax - tmin).max(1e-12) * pw;
    for (i, r) in sc.ranks.iter().enumerate() {
        let y0 = mt + i as f64 * row_h;
        if row_h >= 10.0 {
            let host = hosts.get(r.rank as usize).map(String::as_str).unwrap_or("");
            svg.text(
                ml - 6.0,
                y0 + row_h * 0.75,
                9.0,
                "end",
                &format!("{} {}", r.rank, shorten(host, 14)),
            );
        }
        let color = if r.rank == sc.root { "#228833" } else { "#4477aa" };
        svg.rect(
            x(r.enter_s),
            y0 + 1.0,
            x(r.done_s) - x(r.enter_s),
            row_h - 2.0,
            color,
            Some(&format!(
                "rank {}: {} .. {}",
                r.rank,
                fmt_time(r.enter_s),
                fmt_time(r.done_s)
            )),
        );
        if let Some(p) = r.predicted_done_s {
            svg.line((x(p), y0), (x(p), y0 + row_h), Stroke::solid("#cc3311", 2.0));
        }
    }
    let axis_y = mt + rows * row_h + 4.0;
    svg.line((ml, axis_y), (ml + pw, axis_y), Stroke::solid("black", 1.0));
    for t in ticks(tmin, tmax, 6) {
        svg.line((x(t), axis_y), (x(t), axis_y + 4.0), Stroke::solid("black", 1.0));
        svg.text(x(t), axis_y + 16.0, 10.0, "middle", &fmt_time(t));
    }
    svg.text(
        ml,
        h - 6.0,
        10.0,
        "start",
        "bars: entry to completion per rank (root green); red ticks: predicted completion; time from the root's entry",
    );
    svg.finish()
}

/// File-name-safe slug of a site.
pub fn slug(s: &str) -> String {
    let mut o: String = s
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    o.truncate(60);
    o
}

/// Write all charts of a report into `dir`; returns the files written.
pub fn write_svgs(report: &ProfileReport, dir: &std::path::Path) -> std::io::Result<Vec<std::path::PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut out = Vec::new();
    for (ci, c) in report.communicators.iter().enumerate() {
        let p = dir.join(format!("comm{ci}-predicted-vs-measured.svg"));
        std::fs::write(&p, predicted_vs_measured_svg(c))?;
        out.push(p);
        for (si, s) in c.sites.iter().enumerate() {
            let base = format!("comm{ci}-site{si}-{}", slug(&s.site));
            let p = dir.join(format!("{base}-histogram.svg"));
            std::fs::write(&p, histogram_svg(&format!("{} — {}", c.label, s.site), s))?;
            out.push(p);
            if let Some(sc) = &s.sample_call {
                let p = dir.join(format!("{base}-gantt.svg"));
                std::fs::write(
                    &p,
                    gantt_svg(&format!("{} — last call from {}", c.label, s.site), sc, &c.hosts),
                )?;
                out.push(p);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::report::*;
    use super::*;

    fn sample() -> ProfileReport {
        ProfileReport {
            version: PROFILE_VERSION,
            world_size: 2,
            communicators: vec![CommReport {
                label: "MPI_COMM_WORLD".into(),
                size: 2,
                hosts: vec!["a".into(), "b".into()],
                world_ranks: vec![0, 1],
                sites: vec![SiteReport {
                    site: "src/main.rs:10".into(),
                    calls: 5,
                    mpi_bcast_calls: 0,
                    bytes: 5000,
                    ranks: 2,
                    rank_calls: 10,
                    failures: 0,
                    time: TimeStats {
                        min_s: 1e-5,
                        median_s: 2e-5,
                        p99_s: 5e-5,
                        max_s: 6e-5,
                        mean_s: 2.5e-5,
                    },
                    histogram: vec![(1e-5, 1.1e-5, 4), (2e-5, 2.1e-5, 6)],
                    roots: vec![(0, 5)],
                    predicted: Some(Predicted {
                        deterministic_s: 1.5e-5,
                        ..Default::default()
                    }),
                    compare: Some(Compare {
                        calls: 2,
                        mpi_bcast_median_s: 2e-5,
                        topo_bcast_median_s: 1e-5,
                        ratio: 0.5,
                    }),
                    sample_call: Some(SampleCall {
                        seq: 4,
                        root: 0,
                        bytes: 1000,
                        algorithm: "binomial".into(),
                        ranks: vec![
                            RankTiming {
                                rank: 0,
                                enter_s: 0.0,
                                done_s: 1e-5,
                                predicted_done_s: Some(0.0),
                            },
                            RankTiming {
                                rank: 1,
                                enter_s: -2e-6,
                                done_s: 1.8e-5,
                                predicted_done_s: Some(1.5e-5),
                            },
                        ],
                    }),
                }],
            }],
        }
    }

    #[test]
    fn text_table_has_the_numbers() {
        let t = text(&sample());
        assert!(t.contains("MPI_COMM_WORLD (2 ranks)"));
        let row = t.lines().find(|l| l.starts_with("src/main.rs:10")).expect("site row");
        let cols: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cols[1..6], ["5", "5000", "10.00", "20.00", "50.00"]);
        assert!(t.contains("0.500"), "compare ratio printed");
        assert!(t.contains("rank     1 b"), "{t}");
    }

    #[test]
    fn charts_are_written() {
        let dir = std::env::temp_dir().join(format!("treecast-render-{}", std::process::id()));
        let files = write_svgs(&sample(), &dir).unwrap();
        assert_eq!(files.len(), 3);
        for f in &files {
            let s = std::fs::read_to_string(f).unwrap();
            assert!(s.starts_with("<svg") && s.contains("<rect"), "{}", f.display());
        }
        let g = std::fs::read_to_string(
            files
                .iter()
                .find(|f| f.to_string_lossy().ends_with("gantt.svg"))
                .unwrap(),
        )
        .unwrap();
        assert_eq!(
            g.matches("stroke=\"#cc3311\"").count(),
            2,
            "one predicted tick per rank"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
