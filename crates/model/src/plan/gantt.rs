//! Pictures and reports of a plan: a per-rank Gantt chart (SVG) of its predicted messages.

use super::cost_replay::SegTransfer;
use super::Plan;
use crate::util::svg::{fmt_time, ticks, Stroke, Svg};

/// Above this many ranks the chart draws one bar per rank (first receive to completion).
pub const GANTT_DETAIL_RANKS: usize = 128;

/// Gantt chart of `timing` (from a replay of `plan`): one row per rank; a blue bar while a
/// message is arriving at the rank, an orange bar while it sends one, a black tick when it
/// holds the whole message. Large plans are summarised per rank.
pub fn gantt_svg(plan: &Plan, timing: &[SegTransfer], title: &str) -> String {
    let n = plan.nranks as usize;
    let end = timing.iter().map(|t| t.end_s).fold(0.0f64, f64::max).max(1e-12);
    let row = if n <= GANTT_DETAIL_RANKS {
        14.0
    } else {
        (1200.0 / n as f64).max(0.5)
    };
    let (left, top, width) = (70.0, 40.0, 900.0);
    let height = top + row * n as f64 + 40.0;
    let mut svg = Svg::new(left + width + 20.0, height);
    svg.text(left, 20.0, 14.0, "start", title);
    let x = |t: f64| left + width * t / end;
    let mut done = vec![0.0f64; n];
    let mut first = vec![f64::INFINITY; n];
    for t in timing {
        done[t.dst as usize] = done[t.dst as usize].max(t.end_s);
        first[t.dst as usize] = first[t.dst as usize].min(t.start_s);
    }
    if n <= GANTT_DETAIL_RANKS {
        for t in timing {
            let yd = top + row * t.dst as f64;
            let label = format!(
                "{} -> {} segs {}..{}: {} - {}",
                t.src,
                t.dst,
                t.segs.start,
                t.segs.end,
                fmt_time(t.start_s),
                fmt_time(t.end_s)
            );
            svg.rect(
                x(t.start_s),
                yd + 2.0,
                x(t.end_s) - x(t.start_s),
                row - 4.0,
                "#4a7fd4",
                Some(&label),
            );
            let ys = top + row * t.src as f64;
            svg.rect(
                x(t.start_s),
                ys + 4.0,
                x(t.end_s) - x(t.start_s),
                row - 8.0,
                "#e8953a",
                Some(&label),
            );
        }
        for r in 0..n {
            svg.text(
                left - 6.0,
                top + row * r as f64 + row - 3.0,
                10.0,
                "end",
                &format!("r{r}"),
            );
        }
    } else {
        for r in 0..n {
            if first[r].is_finite() {
                svg.rect(
                    x(first[r]),
                    top + row * r as f64,
                    x(done[r]) - x(first[r]),
                    row,
                    "#4a7fd4",
                    None,
                );
            }
        }
        svg.text(left - 6.0, top + 10.0, 10.0, "end", "r0");
        svg.text(left - 6.0, top + row * n as f64, 10.0, "end", &format!("r{}", n - 1));
    }
    for (r, &d) in done.iter().enumerate() {
        if r as u32 != plan.root && d > 0.0 {
            let y = top + row * r as f64;
            svg.line((x(d), y), (x(d), y + row), Stroke::solid("black", 1.0));
        }
    }
    let base = top + row * n as f64 + 5.0;
    for t in ticks(0.0, end, 6) {
        svg.line((x(t), base), (x(t), base + 5.0), Stroke::solid("black", 1.0));
        svg.text(x(t), base + 18.0, 10.0, "middle", &fmt_time(t));
    }
    svg.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::cost::CostModel;
    use crate::plan::cost_replay::replay;
    use crate::plan::trees;
    use crate::topology::gen::Star;

    #[test]
    fn gantt_has_a_bar_per_message_side() {
        let t = Star::paper_star(4).build().unwrap();
        let plan = Plan::from_tree(0, &trees::binomial(4, 0), 2, "binomial");
        let m = CostModel::new(&t, 1 << 20);
        let r = replay(&m, &plan, 1 << 20).unwrap();
        let svg = gantt_svg(&plan, &r.transfers, "test");
        assert!(svg.starts_with("<svg"));
        // Two bars (receiver and sender side) per message, plus the background.
        assert_eq!(svg.matches("<rect").count(), 1 + 2 * r.transfers.len());
        assert!(svg.contains("0 -&gt; 2 segs 0..1"));
    }
}
