#!/usr/bin/env python3
"""Plot the `scaling` criterion benchmarks: nanoseconds per frame against concurrent flows
(with and without RSS sorting) and against burst size, as one SVG (standard library only).

    cargo bench --bench scaling -- --noplot
    python3 scripts/plot-scaling.py [CRITERION_DIR] [OUT.svg]

Defaults: target/criterion and target/criterion/scaling.svg. Also prints the medians as a
table. Exits 1 when no scaling results are found.
"""
import json
import math
import os
import sys

root = sys.argv[1] if len(sys.argv) > 1 else "target/criterion"
out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(root, "scaling.svg")


def series(group, function):
    """[(parameter, ns per frame)] of one benchmark function, sorted by parameter."""
    base = os.path.join(root, group, function)
    points = []
    if not os.path.isdir(base):
        return points
    for param in os.listdir(base):
        d = os.path.join(base, param, "new")
        try:
            with open(os.path.join(d, "estimates.json")) as f:
                median = json.load(f)["median"]["point_estimate"]
            with open(os.path.join(d, "benchmark.json")) as f:
                elements = json.load(f)["throughput"]["Elements"]
        except (OSError, KeyError, ValueError, TypeError):
            continue
        points.append((int(param), median / elements))
    return sorted(points)


panels = [
    (
        "Cost per frame against concurrent flows (burst 32, 1,024-entry table)",
        "concurrent flows",
        [
            ("plain", series("scaling_flows", "plain"), "#1f77b4"),
            ("RSS-sorted", series("scaling_flows", "rss_sorted"), "#d62728"),
        ],
    ),
    (
        "Cost per frame against burst size (64 flows)",
        "frames per burst",
        [("plain", series("scaling_burst", "plain"), "#1f77b4")],
    ),
]

if not any(points for _, _, lines in panels for _, points, _ in lines):
    print(f"no scaling results under {root}: run cargo bench --bench scaling first",
          file=sys.stderr)
    sys.exit(1)

for title, xlabel, lines in panels:
    print(title)
    for name, points, _ in lines:
        print(f"  {name:<11}" + "  ".join(f"{x}: {y:.1f} ns" for x, y in points))

W, H, PAD_L, PAD_R, PAD_T, PAD_B = 720, 300, 70, 150, 40, 50
svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H * len(panels)}" '
       'font-family="sans-serif" font-size="12">',
       f'<rect width="{W}" height="{H * len(panels)}" fill="white"/>']
for i, (title, xlabel, lines) in enumerate(panels):
    top = i * H
    xs = [x for _, pts, _ in lines for x, _ in pts]
    ys = [y for _, pts, _ in lines for _, y in pts]
    if not xs:
        continue
    x0, x1 = math.log2(min(xs)), math.log2(max(xs))
    if x1 == x0:
        x1 = x0 + 1
    y1 = max(ys) * 1.1
    pw, ph = W - PAD_L - PAD_R, H - PAD_T - PAD_B

    def px(x):
        return PAD_L + (math.log2(x) - x0) / (x1 - x0) * pw

    def py(y):
        return top + PAD_T + ph - y / y1 * ph

    svg.append(f'<text x="{PAD_L}" y="{top + 22}" font-size="14">{title}</text>')
    svg.append(f'<line x1="{PAD_L}" y1="{top + PAD_T + ph}" x2="{PAD_L + pw}" '
               f'y2="{top + PAD_T + ph}" stroke="black"/>')
    svg.append(f'<line x1="{PAD_L}" y1="{top + PAD_T}" x2="{PAD_L}" '
               f'y2="{top + PAD_T + ph}" stroke="black"/>')
    for x in sorted(set(xs)):
        svg.append(f'<text x="{px(x):.1f}" y="{top + PAD_T + ph + 16}" '
                   f'text-anchor="middle">{x}</text>')
    step = 10 ** math.floor(math.log10(y1 / 4)) if y1 > 0 else 1
    while y1 / step > 6:
        step *= 2
    y = 0.0
    while y <= y1:
        svg.append(f'<line x1="{PAD_L - 4}" y1="{py(y):.1f}" x2="{PAD_L + pw}" y2="{py(y):.1f}" '
                   'stroke="#ddd"/>')
        svg.append(f'<text x="{PAD_L - 8}" y="{py(y) + 4:.1f}" text-anchor="end">{y:g}</text>')
        y += step
    svg.append(f'<text x="{PAD_L + pw / 2}" y="{top + H - 8}" text-anchor="middle">'
               f'{xlabel} (log scale)</text>')
    svg.append(f'<text x="16" y="{top + PAD_T + ph / 2}" transform="rotate(-90 16 '
               f'{top + PAD_T + ph / 2})" text-anchor="middle">ns per frame</text>')
    for j, (name, points, colour) in enumerate(lines):
        if not points:
            continue
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in points)
        svg.append(f'<polyline points="{path}" fill="none" stroke="{colour}" '
                   'stroke-width="2"/>')
        for x, y in points:
            svg.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{colour}"/>')
        ly = top + PAD_T + 10 + 18 * j
        svg.append(f'<line x1="{W - PAD_R + 15}" y1="{ly}" x2="{W - PAD_R + 40}" y2="{ly}" '
                   f'stroke="{colour}" stroke-width="2"/>')
        svg.append(f'<text x="{W - PAD_R + 46}" y="{ly + 4}">{name}</text>')
svg.append("</svg>")
os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
with open(out, "w") as f:
    f.write("\n".join(svg) + "\n")
print(f"wrote {out}")
