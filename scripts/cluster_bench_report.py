#!/usr/bin/env python3
"""Combine `treecast bench --format json` runs of scripts/cluster-bench.sh into one table and an SVG.

    cluster_bench_report.py --out DIR --uplink-bytes-per-s R [--title T] LABEL=FILE ...

LABEL is `<collective>/<placement>` (e.g. `tuned/block`, `han/round-robin`); FILE is that run's JSON
(`{"ranks": N, "rows": [{"bytes", "iterations", "mpi_bcast_median_us", "topo_bcast_median_us",
"ratio"}, ...]}`). Each run timed MPI_Bcast (with that collective component) and topo_bcast side by
side, so a ratio topo/MPI always compares numbers of one run.

Writes DIR/table.txt (also printed), DIR/summary.json and DIR/plot.svg (log-log: one line per
variant, the bound as a dashed line). The bound is bytes / uplink rate: every leaf switch but the
root's must receive the message through its uplink at least once.

Standard library only (no third-party modules), so it runs wherever python3 does.
"""

import argparse
import json
import math
import os
import sys


def load(spec):
    label, sep, path = spec.partition("=")
    if not sep or "/" not in label:
        sys.exit(f"cluster_bench_report: expected COLLECTIVE/PLACEMENT=FILE, got '{spec}'")
    coll, placement = label.split("/", 1)
    try:
        with open(path) as f:
            data = json.load(f)
        rows = {int(r["bytes"]): r for r in data["rows"]}
    except (OSError, ValueError, KeyError, TypeError) as e:
        sys.exit(f"cluster_bench_report: {path}: not a treecast bench JSON result ({e})")
    return coll, placement, data.get("ranks"), rows


def fmt_ms(us):
    if us is None or not math.isfinite(us):
        return "-"
    ms = us / 1000.0
    return f"{ms:.3f}" if ms < 10 else f"{ms:.1f}"


def fmt_ratio(a, b):
    if a is None or b is None or not b:
        return "-"
    return f"{a / b:.2f}"


def table(runs, sizes, rate, placements, colls):
    """Text table: per placement, per size: bound, then per collective MPI / topo / ratio."""
    head = ["bytes", "bound ms"]
    for c in colls:
        head += [f"MPI {c} ms", f"topo ms ({c} run)", f"topo/{c}"]
    head.append(f"topo/bound ({colls[0]} run)")
    lines = []
    for p in placements:
        ranks = {runs[(c, p)][0] for c in colls if (c, p) in runs}
        lines.append(f"placement {p} ({', '.join(str(r) for r in sorted(ranks, key=str))} ranks)")
        body = [head]
        for b in sizes:
            row = [str(b), fmt_ms(b / rate * 1e6)]
            for c in colls:
                r = runs.get((c, p), (None, {}))[1].get(b)
                m = r["mpi_bcast_median_us"] if r else None
                t = r["topo_bcast_median_us"] if r else None
                row += [fmt_ms(m), fmt_ms(t), fmt_ratio(t, m)]
            r0 = runs.get((colls[0], p), (None, {}))[1].get(b)
            row.append(fmt_ratio(r0["topo_bcast_median_us"], b / rate * 1e6) if r0 else "-")
            body.append(row)
        widths = [max(len(r[i]) for r in body) for i in range(len(head))]
        for r in body:
            lines.append("  " + "  ".join(x.rjust(w) for x, w in zip(r, widths)))
        lines.append("")
    return "\n".join(lines)


def svg_plot(series, bound, title):
    """Hand-written log-log SVG. series: [(label, color, dash, [(bytes, us)])]; bound the same."""
    W, H = 860, 540
    left, right, top, bottom = 80, 250, 40, 60
    pw, ph = W - left - right, H - top - bottom
    xs = [x for _, _, _, pts in series + [bound] for x, _ in pts]
    ys = [y for _, _, _, pts in series + [bound] for _, y in pts if y and y > 0]
    x0, x1 = math.log10(min(xs)), math.log10(max(xs))
    y0, y1 = math.floor(math.log10(min(ys) / 1000.0)), math.ceil(math.log10(max(ys) / 1000.0))
    if x1 <= x0:
        x1 = x0 + 1
    if y1 <= y0:
        y1 = y0 + 1

    def px(b):
        return left + (math.log10(b) - x0) / (x1 - x0) * pw

    def py(us):
        return top + ph - (math.log10(us / 1000.0) - y0) / (y1 - y0) * ph

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
        'font-family="sans-serif" font-size="12">',
        f'<rect width="{W}" height="{H}" fill="white"/>',
        f'<text x="{W / 2}" y="22" text-anchor="middle" font-size="14">{esc(title)}</text>',
        f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#333"/>',
    ]
    # x ticks at powers of 4 from 1 KiB.
    b = 1024
    while b <= 10 ** x1 * 1.0001:
        if b >= 10 ** x0 * 0.9999:
            x = px(b)
            out.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + ph}" stroke="#ddd"/>')
            out.append(f'<text x="{x:.1f}" y="{top + ph + 18}" text-anchor="middle">{size_label(b)}</text>')
        b *= 4
    for e in range(y0, y1 + 1):
        y = py(10 ** e * 1000.0)
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + pw}" y2="{y:.1f}" stroke="#ddd"/>')
        label = f"{10.0 ** e:g}"
        out.append(f'<text x="{left - 8}" y="{y + 4:.1f}" text-anchor="end">{label}</text>')
    out.append(f'<text x="{left + pw / 2}" y="{H - 15}" text-anchor="middle">message size (bytes)</text>')
    out.append(
        f'<text x="20" y="{top + ph / 2}" text-anchor="middle" '
        f'transform="rotate(-90 20 {top + ph / 2})">median broadcast time (ms)</text>'
    )
    for i, (label, color, dash, pts) in enumerate(series + [bound]):
        pts = [(x, y) for x, y in pts if y and y > 0]
        if not pts:
            continue
        d = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
        dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
        out.append(f'<polyline points="{d}" fill="none" stroke="{color}" stroke-width="2"{dash_attr}/>')
        for x, y in pts:
            out.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="2.5" fill="{color}"/>')
        ly = top + 10 + i * 20
        lx = left + pw + 15
        out.append(
            f'<line x1="{lx}" y1="{ly}" x2="{lx + 30}" y2="{ly}" stroke="{color}" stroke-width="2"{dash_attr}/>'
        )
        out.append(f'<text x="{lx + 36}" y="{ly + 4}">{esc(label)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def esc(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def size_label(b):
    for unit, f in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= f and b % f == 0:
            return f"{b // f} {unit}"
    return f"{b} B"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--uplink-bytes-per-s", type=float, required=True, help="uplink rate, bytes per second")
    ap.add_argument("--title", default="topo_bcast vs MPI_Bcast on the emulated cluster")
    ap.add_argument("--note", action="append", default=[], help="a line printed under the title (repeatable)")
    ap.add_argument("runs", nargs="+", metavar="COLL/PLACEMENT=FILE")
    a = ap.parse_args()
    if not a.uplink_bytes_per_s > 0:
        sys.exit("cluster_bench_report: --uplink-bytes-per-s must be > 0")
    runs = {}
    colls, placements = [], []
    for spec in a.runs:
        coll, placement, ranks, rows = load(spec)
        runs[(coll, placement)] = (ranks, rows)
        if coll not in colls:
            colls.append(coll)
        if placement not in placements:
            placements.append(placement)
    sizes = sorted({b for _, rows in runs.values() for b in rows})
    rate = a.uplink_bytes_per_s

    text = (
        f"{a.title}\nmedian times in ms; bound = bytes / uplink rate ({rate * 8 / 1e6:g} Mbit/s); "
        "ratios < 1 mean topo_bcast is faster\n"
        + "".join(f"note: {n}\n" for n in a.note)
        + "\n"
        + table(runs, sizes, rate, placements, colls)
    )
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "table.txt"), "w") as f:
        f.write(text)
    print(text)

    summary = {
        "uplink_bytes_per_s": rate,
        "notes": a.note,
        "rows": [
            {
                "bytes": b,
                "placement": p,
                "collective": c,
                "ranks": runs[(c, p)][0],
                "bound_us": b / rate * 1e6,
                "mpi_bcast_median_us": r["mpi_bcast_median_us"],
                "topo_bcast_median_us": r["topo_bcast_median_us"],
                "topo_over_mpi": r["topo_bcast_median_us"] / r["mpi_bcast_median_us"],
                "mpi_over_bound": r["mpi_bcast_median_us"] / (b / rate * 1e6),
                "topo_over_bound": r["topo_bcast_median_us"] / (b / rate * 1e6),
            }
            for (c, p), (_, rows) in runs.items()
            for b, r in sorted(rows.items())
        ],
    }
    with open(os.path.join(a.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
        f.write("\n")

    colors = {"tuned": "#d62728", "han": "#ff7f0e"}
    dashes = {0: "", 1: "2 3"}
    series = []
    for pi, p in enumerate(placements):
        for c in colls:
            if (c, p) not in runs:
                continue
            rows = runs[(c, p)][1]
            pts = [(b, rows[b]["mpi_bcast_median_us"]) for b in sorted(rows)]
            series.append((f"MPI_Bcast {c}, {p}", colors.get(c, "#9467bd"), dashes.get(pi, "6 2 2 2"), pts))
        # topo_bcast: from the first collective's run of this placement (the others agree up to noise
        # and are in the table).
        first = next((c for c in colls if (c, p) in runs), None)
        if first is not None:
            rows = runs[(first, p)][1]
            pts = [(b, rows[b]["topo_bcast_median_us"]) for b in sorted(rows)]
            series.append((f"topo_bcast, {p}", "#1f77b4" if pi == 0 else "#2ca02c", dashes.get(pi, "6 2 2 2"), pts))
    bound = ("bound: bytes / uplink", "#555", "8 4", [(b, b / rate * 1e6) for b in sizes])
    with open(os.path.join(a.out, "plot.svg"), "w") as f:
        f.write(svg_plot(series, bound, a.title))


if __name__ == "__main__":
    main()
