#!/usr/bin/env python3
"""Tally `predict_bench` outputs: how often the profile's predictions meet issue 23's goal.

    predict_stats_report.py FILE ...

Each FILE is one job's standard output of `target/release/examples/predict_bench` (the table,
the line of sizes whose calls moved, the verdict line). Per message size it prints:
- together / entries: jobs within 25% and the range of errors, for the prediction with all ranks
  entering together and for each call predicted from its ranks' entries;
- moved: jobs whose latest calls' median lay more than a factor of 1.25 from all the size's
  calls' (the job's own variation, as much as a prediction may be off);
- measured: the range of the entries column's measured median over the jobs (us), and
  `r`, the correlation over jobs between that measured median and its prediction: near 1 the
  predictions follow what differs from job to job, near 0 they do not;
- best constant: in how many jobs the one number that fits most of them (chosen after the fact)
  would be within 25% of the entries column's measured median: a reference for how far the
  job-to-job variation alone lets any prediction go that does not follow it.
- placed: jobs whose calls of the size ran mostly in another grouping of ranks by CPU than the
  set-up's calls of that size (where ranks outnumber cores the scheduler picks which share one).
- off: jobs whose calls of the size ran more than a factor of 1.25 slower or faster than the
  set-up timed the same broadcasts (one host, where the predictions reproduce those timings).
Then the jobs in which the goal was met (every size within 25%), both ways, and from the entries
the jobs whose every miss is at a size that moved within the job; then how many of the cells
missed from the entries ran in another grouping than the set-up's, and the jobs whose every miss
did; the same for the sizes that ran off the set-up's timing; then the jobs whose profile found
a host shared with another program (its line "hosts shared with other programs", from
`treecast::profile::host_load`), the misses in them, and the goal in the others. Last, a what-if: each size's
prediction from the entries rescaled by the median, over the job's other sizes, of their
measured / predicted (leave-one-out, from the printed medians), the cells and jobs it would put
within 25%: if a job's calls ran at one speed against its set-up across sizes, this would
recover what the set-up missed; where it does no better, the misses are each size's own. The
same again from the next smaller and larger size only, for a change that moves neighbouring
sizes together (small messages under a CPU hog) but not all.

Standard library only, so it runs wherever python3 does. Exit code 1 when no file held a result.
"""

import math
import re
import statistics
import sys
from collections import namedtuple

ROW = re.compile(
    r"\s+(\d+)\s+\d+\s+([\d.]+)\s+([\d.]+|-)\s+([+-]\d+%|-)\s+(yes|no)\s+\d+\s+([\d.]+)\s+([\d.]+)\s+([+-]\d+%|-)"
    r"\s+(yes|no)"
)
MOVED = re.compile(r"^sizes whose latest calls .*: (.*)$")
PLACED = re.compile(r"^sizes whose calls ran mostly in another grouping .*?: (.*)$")
OFF = re.compile(r"^sizes whose calls ran more than a factor of 1.25 off .*?: (.*)$")
SHARED = re.compile(r"^hosts shared with other programs while the job ran: (.*)$")
GOAL = 0.25

# One job: its rows by size, and the sets of sizes that moved, ran placed otherwise, ran off
# the set-up's timing; and whether the profile found a host shared with another program.
Job = namedtuple("Job", "rows moved placed off shared")


def within(cell, column):
    """The benchmark's own verdict (its exact error against 25%), not the rounded percentage it
    prints: -25.4% prints as -25% and is a miss."""
    return cell[column + "_ok"]


def pct(s):
    return None if s == "-" else int(s.rstrip("%")) / 100.0


def corr(xs, ys):
    if len(xs) < 3:
        return None
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    return sxy / math.sqrt(sxx * syy) if sxx > 0 and syy > 0 else None


def best_constant(measured):
    """Most jobs one number can be within 25% of: p/m - 1 in [-0.25, 0.25] for p in [0.75m, 1.25m]."""
    best = 0
    for m in measured:
        for p in (0.75 * m, 1.25 * m):
            best = max(best, sum(abs(p / x - 1) <= GOAL + 1e-9 for x in measured))
    return best


def rescaled_within(rows, neighbours=False):
    """Per size of one job, whether its entries prediction, scaled by the median of the other
    sizes' measured / predicted (with `neighbours`, of the next smaller and larger size's only),
    lies within 25% of its measured median (`None`: no other size or no prediction)."""
    sizes = sorted(s for s, r in rows.items() if r["predicted"] > 0)
    ratios = [rows[s]["measured"] / rows[s]["predicted"] for s in sizes]
    out = {s: None for s in rows}
    for i, s in enumerate(sizes):
        picked = (i - 1, i + 1) if neighbours else range(len(sizes))
        others = [ratios[k] for k in picked if 0 <= k < len(sizes) and k != i]
        if others and rows[s]["measured"] > 0:
            out[s] = abs(rows[s]["predicted"] * statistics.median(others) / rows[s]["measured"] - 1) <= GOAL + 1e-9
    return out


def parse(path):
    rows, moved, placed, off, shared, verdict = {}, set(), set(), set(), False, None
    with open(path, errors="replace") as f:
        for line in f:
            m = ROW.match(line)
            if m:
                size = int(m.group(1))
                rows[size] = {
                    "together": pct(m.group(4)),
                    "together_ok": m.group(5) == "yes",
                    "measured": float(m.group(6)),
                    "predicted": float(m.group(7)),
                    "entries": pct(m.group(8)),
                    "entries_ok": m.group(9) == "yes",
                }
                continue
            m = MOVED.match(line.strip())
            if m and m.group(1) != "none":
                moved = {int(x.split()[0]) for x in m.group(1).split(", ")}
            m = PLACED.match(line.strip())
            if m and m.group(1) != "none":
                placed = {int(x) for x in re.findall(r"(?:^|, )(\d+) B \(", m.group(1))}
            m = OFF.match(line.strip())
            if m:
                off = {int(x) for x in re.findall(r"(?:^|, )(\d+) B x", m.group(1))}
            m = SHARED.match(line.strip())
            if m:
                shared = not m.group(1).startswith(("none", "(not read)"))
            if line.startswith("median prediction within 25%"):
                verdict = line
    return Job(rows, moved, placed, off, shared) if verdict and rows else None


def span(errs):
    errs = [e for e in errs if e is not None]
    return f"{min(errs) * 100:+.0f} .. {max(errs) * 100:+.0f}%" if errs else "-"


def main(paths):
    jobs = []
    for p in paths:
        r = parse(p)
        if r is None:
            print(f"predict_stats_report: no result in {p}", file=sys.stderr)
        else:
            jobs.append(r)
    if not jobs:
        return 1
    sizes = sorted({s for j in jobs for s in j.rows})
    n = len(jobs)
    print(f"{n} jobs")
    print(
        f"{'size':>9}  {'together':<18} {'entries':<18} {'moved':>5} {'placed':>6} {'off':>4}  {'measured us (entries)':<24} {'r':>5}  best constant"
    )
    for s in sizes:
        have = [j.rows[s] for j in jobs if s in j.rows]
        tog = [h["together"] for h in have]
        ent = [h["entries"] for h in have]
        meas = [h["measured"] for h in have]
        pred = [h["predicted"] for h in have]
        moved, placed, off = (
            sum(s in getattr(j, field) for j in jobs if s in j.rows) for field in ("moved", "placed", "off")
        )
        r = corr(meas, pred)
        print(
            f"{s:>9}  {sum(within(h, 'together') for h in have):>2}/{len(have):<2} {span(tog):<12} "
            f"{sum(within(h, 'entries') for h in have):>2}/{len(have):<2} {span(ent):<12} {moved:>5} {placed:>6} {off:>4}  "
            f"{min(meas):>9.1f} .. {max(meas):<11.1f} {'-' if r is None else f'{r:+.2f}':>5}  "
            f"{best_constant(meas)}/{len(have)}"
        )
    cells = [(s, j.rows[s]) for j in jobs for s in j.rows]
    tog_cells = sum(within(c, "together") for _, c in cells)
    ent_cells = sum(within(c, "entries") for _, c in cells)
    met_tog = sum(all(within(c, "together") for c in j.rows.values()) for j in jobs)
    met_ent = sum(all(within(c, "entries") for c in j.rows.values()) for j in jobs)

    def met(j):
        return all(within(c, "entries") for c in j.rows.values())

    def explained_by(field):
        """Jobs that missed, every miss at a size in the job's set `field`."""
        return sum(
            all(within(c, "entries") or s in getattr(j, field) for s, c in j.rows.items())
            and not all(within(c, "entries") for c in j.rows.values())
            for j in jobs
        )

    def missed_at(field):
        """For each cell missed from the entries, whether its size is in the job's set `field`."""
        return [s in getattr(j, field) for j in jobs for s, c in j.rows.items() if not within(c, "entries")]

    explained, by_cpus, by_host = (explained_by(f) for f in ("moved", "placed", "off"))
    missed, missed_off = missed_at("placed"), missed_at("off")
    print(
        f"cells within 25%: together {tog_cells}/{len(cells)}, entries {ent_cells}/{len(cells)}; "
        f"goal met: together {met_tog}/{n}, entries {met_ent}/{n}; "
        f"missed from the entries only at sizes that moved within the job: {explained}/{n}"
    )
    print(
        f"cells missed from the entries whose calls ran in another grouping of ranks by CPU than "
        f"the set-up's: {sum(missed)}/{len(missed)}; jobs that missed only at such sizes: {by_cpus}/{n}"
    )
    print(
        f"cells missed from the entries whose calls ran more than a factor of 1.25 off the set-up's "
        f"timing of the same broadcasts: {sum(missed_off)}/{len(missed_off)}; "
        f"jobs that missed only at such sizes: {by_host}/{n}"
    )
    shared = [j for j in jobs if j.shared]
    alone = [j for j in jobs if not j.shared]
    missed_shared = [j.shared for j in jobs for c in j.rows.values() if not within(c, "entries")]
    print(
        f"jobs whose hosts the profile found shared with other programs (at least 0.2 CPU): "
        f"{len(shared)}/{n}, goal met from the entries in {sum(met(j) for j in shared)} of them; "
        f"cells missed from the entries in such jobs: {sum(missed_shared)}/{len(missed_shared)}; "
        f"goal met in the other jobs: {sum(met(j) for j in alone)}/{len(alone)}"
    )
    for neighbours, which in ((False, "the job's other sizes"), (True, "the next smaller and larger size")):
        rescaled = [rescaled_within(j.rows, neighbours) for j in jobs]
        told = [v for r in rescaled for v in r.values() if v is not None]
        met_rescaled = sum(bool(r) and all(v for v in r.values()) for r in rescaled)
        print(
            f"what-if, each size's entries prediction rescaled by {which} "
            f"(median measured / predicted, leave-one-out): cells within 25% {sum(told)}/{len(told)}, "
            f"goal met {met_rescaled}/{n}"
        )
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0 if len(sys.argv) > 1 else 2)
    sys.exit(main(sys.argv[1:]))
