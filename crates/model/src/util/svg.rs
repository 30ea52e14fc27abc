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

/// Human-readable duration for axis labels and tooltips: the unit that keeps the number at or
/// above 1 (s, ms, us, ns), at most 4 significant digits with trailing zeros dropped, so a
/// log axis reads "10 ms, 1 ms, 100 us, 10 us" rather than "10.000 ms .. 100.00 us", and its
/// bottom decade "10 ns" rather than "0.01 us" (or "0.00 us" below). Exactly 0 (and a value
/// that rounds to it, such as the -0.0 a shifted axis starts at) reads "0".
pub fn fmt_time(s: f64) -> String {
    let a = s.abs();
    if !s.is_finite() {
        return format!("{s}");
    }
    if a < 1e-12 {
        return "0".into();
    }
    let (v, unit) = if a >= 1.0 {
        (s, "s")
    } else if a >= 1e-3 {
        (s * 1e3, "ms")
    } else if a >= 1e-6 {
        (s * 1e6, "us")
    } else {
        (s * 1e9, "ns")
    };
    // Decimals for 4 significant digits, at most 3 (below 1 ns: 0.xxx ns).
    let int_digits = (v.abs().log10().floor() as i32 + 1).max(1);
    let decimals = (4 - int_digits).clamp(0, 3) as usize;
    let mut t = format!("{v:.decimals$}");
    if t.contains('.') {
        t = t.trim_end_matches('0').trim_end_matches('.').to_string();
    }
    if t == "-0" {
        t = "0".into();
    }
    format!("{t} {unit}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_in_the_unit_that_fits_without_padding() {
        assert_eq!(fmt_time(0.0), "0");
        assert_eq!(fmt_time(-0.0), "0");
        assert_eq!(fmt_time(1e-8), "10 ns");
        assert_eq!(fmt_time(1e-7), "100 ns");
        assert_eq!(fmt_time(1e-6), "1 us");
        assert_eq!(fmt_time(2.5e-6), "2.5 us");
        assert_eq!(fmt_time(530.04e-6), "530 us");
        assert_eq!(fmt_time(1e-2), "10 ms");
        assert_eq!(fmt_time(1.23456e-3), "1.235 ms");
        assert_eq!(fmt_time(-5e-6), "-5 us");
        assert_eq!(fmt_time(12.5), "12.5 s");
        assert_eq!(fmt_time(4e-13), "0");
    }

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
