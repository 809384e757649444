#!/usr/bin/env python3
"""Draws tools/soak.sh's CSV as one SVG: a small line chart per column.

  python3 tools/soak-plot.py soak.csv soak.svg

Standard library only. The shaded band on each chart is ±10% of the value at
the 10-minute mark (the long-run test's flatness bound), drawn from 10 min on.
"""
import csv
import sys


def main(src, dst):
    rows = list(csv.DictReader(open(src)))
    if not rows:
        sys.exit("no samples in " + src)
    cols = [c for c in rows[0] if c != "t_s"]
    t = [float(r["t_s"]) / 60 for r in rows]
    w, h, pad, per_row = 360, 170, 40, 3
    nrows = (len(cols) + per_row - 1) // per_row
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">'
           % (w * per_row, h * nrows + 30),
           '<text x="8" y="18" font-size="13">lkscore soak: %s (%d samples, %.0f min)</text>' % (src.split("/")[-1], len(rows), t[-1])]
    for i, c in enumerate(cols):
        v = [float(r[c] or 0) for r in rows]
        x0, y0 = (i % per_row) * w, 30 + (i // per_row) * h
        lo, hi = min(v + [0]), max(v) * 1.1 or 1
        sx = lambda x: x0 + pad + (x / (t[-1] or 1)) * (w - pad - 10)
        sy = lambda y: y0 + h - 25 - (y - lo) / (hi - lo) * (h - 50)
        out.append('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#ccc"/>' % (x0 + pad, y0 + 15, w - pad - 10, h - 40))
        out.append('<text x="%d" y="%d">%s (max %.1f, last %.1f)</text>' % (x0 + pad, y0 + 11, c, max(v), v[-1]))
        ten = [j for j, x in enumerate(t) if x >= 10]
        if ten and t[-1] > 10:
            ref = v[ten[0]]
            out.append('<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#2a7" fill-opacity="0.12"/>'
                       % (sx(10), sy(min(hi, ref * 1.1)), sx(t[-1]) - sx(10), max(0, sy(max(lo, ref * 0.9)) - sy(min(hi, ref * 1.1)))))
        pts = " ".join("%.1f,%.1f" % (sx(x), sy(y)) for x, y in zip(t, v))
        out.append('<polyline fill="none" stroke="#36c" stroke-width="1.5" points="%s"/>' % pts)
        out.append('<text x="%d" y="%d" fill="#666">0</text><text x="%d" y="%d" fill="#666" text-anchor="end">%.0f min</text>'
                   % (x0 + pad, y0 + h - 12, x0 + w - 10, y0 + h - 12, t[-1]))
        out.append('<text x="%d" y="%.1f" fill="#666" text-anchor="end">%.4g</text>' % (x0 + pad - 3, sy(hi) + 4, hi))
    out.append("</svg>")
    open(dst, "w").write("\n".join(out) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
