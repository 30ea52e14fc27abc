#!/usr/bin/env python3
"""Replays `estimate::send_curve::lower_lone_bumps` on logged set-up curves.

    python3 scripts/curve_bumps.py DIR/job-*.err

Each FILE is a job's log with `TREECAST_LOG=info` (as `scripts/predict-stats.sh --env
TREECAST_LOG=info --keep DIR` keeps it): its "calibration between ranks ..." line holds the
one-host curve as measured, before the curve's rules. For every set-up, the readings the rule
lowers by more than 10%; where the job also timed that size (`job-K.txt` beside the log, the
benchmark's rows), the late receive's prediction from the entries before and, scaled by the
lowered reading, after: meant for jobs of a build without the rule (`--against` a build from
before b10561d), whose predictions do not include it yet. Then how many set-ups the rule
lowered per size.

The rule, as in the Rust: a time that costs more per byte than both sizes beside it, where
those two agree within NEIGHBOURS_AGREE and all three wait for their receiver alike, is lowered
to the higher neighbour's cost per byte. Kept in step with the Rust by hand; the README's
replay numbers come from here.
"""

import os
import re
import sys

NEIGHBOURS_AGREE = 1.2
SHOWN = 1.1
POINT = re.compile(r"(\d+) B: send ([\d.]+) one way ([\d.]+) late receive ([\d.]+)( \(waits)?")
FIELDS = ((1, "send"), (2, "one way"), (3, "late receive"))


def curve(text):
    m = re.search(r"calibration between[^\n]*", text)
    if not m:
        return None
    return [(int(b), float(s), float(o), float(l), bool(w)) for b, s, o, l, w in POINT.findall(m.group(0))]


def lowered(points):
    """(index, field, old, new) for each reading the rule lowers."""
    out = []
    for k, name in FIELDS:
        for i in range(1, len(points) - 1):
            if not points[i - 1][4] == points[i][4] == points[i + 1][4]:
                continue
            left, own, right = (points[j][k] / points[j][0] for j in (i - 1, i, i + 1))
            if left > 0 and right > 0 and max(left, right) <= NEIGHBOURS_AGREE * min(left, right):
                if own > max(left, right):
                    out.append((i, name, points[i][k], max(left, right) * points[i][0]))
    return out


def rows(path):
    """size -> (measured, predicted) from the entries column of a predict_bench output."""
    out = {}
    if not os.path.exists(path):
        return out
    with open(path, errors="replace") as f:
        for line in f:
            x = line.split()
            if len(x) >= 11 and x[0].isdigit() and x[1].isdigit():
                out[int(x[0])] = (float(x[7]), float(x[8]))
    return out


def main(paths):
    setups, per_size = 0, {}
    for p in paths:
        with open(p, errors="replace") as f:
            points = curve(f.read())
        if not points:
            continue
        setups += 1
        timed = rows(p[: -len(".err")] + ".txt") if p.endswith(".err") else {}
        for i, name, old, new in lowered(points):
            if old / new <= SHOWN:
                continue
            size = points[i][0]
            per_size.setdefault(size, set()).add(p)
            line = f"{p}: {size} B {name} {old:.2f} -> {new:.2f} us"
            if name == "late receive" and size in timed:
                meas, pred = timed[size]
                after = pred * new / old
                line += f"; calls {meas} us, predicted {pred} ({pred / meas - 1:+.0%}) -> {after:.1f} ({after / meas - 1:+.0%})"
            print(line)
    print(f"{setups} set-ups read")
    for size in sorted(per_size):
        print(f"{size} B: lowered by more than {SHOWN - 1:.0%} in {len(per_size[size])}")
    return 0 if setups else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
