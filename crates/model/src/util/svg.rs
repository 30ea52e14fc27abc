//! A minimal SVG writer for the charts treecast draws (profiles, plans, benchmarks).
//!
//! Hand-written rather than a plotting crate: our charts are bars, lines and labels, and the
//! output must be deterministic, dependency-free text that diffs well in tests.

use std::fmt::Write;

/// How a line is drawn.
#[derive(Clone, Copy, Debug)]
pub struct Stroke<'a> {
    pub color: &'a str,
    pub width: f64,
    pub dashed: bool,
}

impl<'a> Stroke<'a> {
    pub fn solid(color: &'a str, width: f64) -> Self {
        Stroke {
            color,
            width,
            dashed: false,
        }
    }
    pub fn dashed(color: &'a str, width: f64) -> Self {
        Stroke {
            color,
            width,
            dashed: true,
        }
    }
    fn attrs(&self) -> String {
        let dash = if self.dashed { r#" stroke-dasharray="6,4""# } else { "" };
        format!(r#"stroke="{}" stroke-width="{}"{dash}"#, self.color, self.width)
    }
}

/// An SVG document under construction.
pub struct Svg {
    width: f64,
    height: f64,
    body: String,
}

/// Escape text for XML.
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

impl Svg {
    pub fn new(width: f64, height: f64) -> Svg {
        Svg {
            width,
            height,
            body: String::new(),
        }
    }

    pub fn rect(&mut self, x: f64, y: f64, w: f64, h: f64, fill: &str, title: Option<&str>) {
        let _ = write!(
            self.body,
            r#"<rect x="{x:.2}" y="{y:.2}" width="{:.2}" height="{:.2}" fill="{fill}""#,
            w.max(0.0),
            h.max(0.0)
        );
        match title {
            Some(t) => {
                let _ = writeln!(self.body, "><title>{}</title></rect>", escape(t));
            }
            None => self.body.push_str("/>\n"),
        }
    }

    pub fn line(&mut self, (x1, y1): (f64, f64), (x2, y2): (f64, f64), stroke: Stroke) {
        let _ = writeln!(
            self.body,
            r#"<line x1="{x1:.2}" y1="{y1:.2}" x2="{x2:.2}" y2="{y2:.2}" {}/>"#,
            stroke.attrs()
        );
    }

    pub fn polyline(&mut self, points: &[(f64, f64)], stroke: Stroke) {
        if points.is_empty() {
            return;
        }
        let pts: Vec<String> = points.iter().map(|(x, y)| format!("{x:.2},{y:.2}")).collect();
        let _ = writeln!(
            self.body,
            r#"<polyline points="{}" fill="none" {}/>"#,
            pts.join(" "),
            stroke.attrs()
        );
    }

    pub fn circle(&mut self, x: f64, y: f64, r: f64, fill: &str) {
        let _ = writeln!(self.body, r#"<circle cx="{x:.2}" cy="{y:.2}" r="{r}" fill="{fill}"/>"#);
    }

    /// Text; `anchor` is `start`, `middle` or `end`.
    pub fn text(&mut self, x: f64, y: f64, size: f64, anchor: &str, s: &str) {
        let _ = writeln!(
            self.body,
            r#"<text x="{x:.2}" y="{y:.2}" font-size="{size}" text-anchor="{anchor}" font-family="sans-serif">{}</text>"#,
            escape(s)
        );
    }

    pub fn finish(self) -> String {
        format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\">\n\
             <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n{}</svg>\n",
            self.body,
            w = self.width,
            h = self.height
        )
    }
}

/// "Nice" tick values covering [lo, hi] (about `n` of them).
pub fn ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    if hi.partial_cmp(&lo) != Some(std::cmp::Ordering::Greater) || !lo.is_finite() || !hi.is_finite() {
        return vec![lo];
    }
    let raw = (hi - lo) / n.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| raw <= *s)
        .unwrap_or(10.0 * mag);
    let mut v = Vec::new();
    let mut t = (lo / step).ceil() * step;
    while t <= hi + step * 1e-9 {
        v.push(t);
        t += step;
    }
    v
}

/// Human-readable duration for axis labels.
pub fn fmt_time(s: f64) -> String {
    let a = s.abs();
    if a >= 1.0 {
        format!("{s:.3} s")
    } else if a >= 1e-3 {
        format!("{:.3} ms", s * 1e3)
    } else {
        format!("{:.2} us", s * 1e6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_nice_and_cover() {
        assert_eq!(ticks(0.0, 10.0, 5), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        let t = ticks(0.0, 0.37, 4);
        assert!((t[1] - 0.1).abs() < 1e-12 && *t.last().unwrap() <= 0.37 + 1e-12);
        assert_eq!(ticks(3.0, 3.0, 4), vec![3.0]);
    }

    #[test]
    fn svg_is_well_formed_and_escaped() {
        let mut s = Svg::new(100.0, 50.0);
        s.rect(1.0, 2.0, 3.0, 4.0, "red", Some("a<b"));
        s.text(5.0, 6.0, 10.0, "start", "x & y");
        let out = s.finish();
        assert!(out.starts_with("<svg") && out.trim_end().ends_with("</svg>"));
        assert!(out.contains("a&lt;b") && out.contains("x &amp; y"));
    }
}
