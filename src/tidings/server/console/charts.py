"""Charts as SVG drawn on the server: no charting library, no script, nothing to load.

Colours come from CSS classes (`series-0`, `series-1`, …), so the light and dark themes
colour them; every text that reaches the SVG is escaped here.
"""

from __future__ import annotations

from collections.abc import Sequence

from markupsafe import Markup, escape

WIDTH, HEIGHT = 640, 180
LEFT, RIGHT, TOP, BOTTOM = 48, 8, 10, 22


def _nice_max(value: float) -> float:
    """The axis top: 1, 2 or 5 times a power of ten at or above the highest value."""
    if value <= 0:
        return 1.0
    magnitude = 10 ** (len(str(int(value))) - 1)
    for step in (1, 2, 5, 10):
        if step * magnitude >= value:
            return float(step * magnitude)
    return float(10 * magnitude)


def _label(value: float) -> str:
    if value >= 1_000_000:
        return f"{value / 1_000_000:g}M"
    if value >= 1000:
        return f"{value / 1000:g}k"
    return f"{value:g}"


def chart(title: str, labels: Sequence[str], series: Sequence[tuple[str, Sequence[float]]],
          *, kind: str = "line", unit: str = "") -> Markup:
    """A line or stacked-bar chart of `series` (name, one value per label)."""
    n = len(labels)
    if kind == "bar":
        tops = [sum(s[1][i] for s in series) for i in range(n)]
    else:
        tops = [max((s[1][i] for s in series), default=0) for i in range(n)]
    top = _nice_max(max(tops, default=0))
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(i: float) -> float:
        return LEFT + (plot_w * i / max(n - 1, 1) if kind == "line" else plot_w * i / max(n, 1))

    def y(v: float) -> float:
        return TOP + plot_h - plot_h * v / top

    parts = [f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
             f'aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg">',
             f"<title>{escape(title)}</title>"]
    for frac in (0, 0.5, 1):
        yy = y(top * frac)
        parts.append(f'<line class="grid" x1="{LEFT}" y1="{yy:.1f}" x2="{WIDTH - RIGHT}" '
                     f'y2="{yy:.1f}"/>')
        parts.append(f'<text class="axis" x="{LEFT - 6}" y="{yy + 4:.1f}" text-anchor="end">'
                     f"{escape(_label(top * frac))}{escape(unit)}</text>")
    if n:
        for i in sorted({0, n // 2, n - 1}):
            anchor = "start" if i == 0 else "end" if i == n - 1 else "middle"
            parts.append(f'<text class="axis" x="{x(i):.1f}" y="{HEIGHT - 6}" '
                         f'text-anchor="{anchor}">{escape(labels[i])}</text>')
    if kind == "bar":
        bar_w = max(plot_w / max(n, 1) - 1, 1)
        base = [0.0] * n
        for k, (name, values) in enumerate(series):
            for i, v in enumerate(values):
                if v:
                    parts.append(
                        f'<rect class="series-{k}" x="{x(i):.1f}" y="{y(base[i] + v):.1f}" '
                        f'width="{bar_w:.1f}" height="{y(base[i]) - y(base[i] + v):.1f}">'
                        f"<title>{escape(labels[i])}: {escape(name)} {v:g}</title></rect>")
                base[i] += v
    else:
        for k, (name, values) in enumerate(series):
            points = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(values))
            parts.append(f'<polyline class="series-{k}" points="{points}">'
                         f"<title>{escape(name)}</title></polyline>")
    parts.append("</svg>")
    legend = "".join(f'<span class="key series-{k}">{escape(name)}</span>'
                     for k, (name, _) in enumerate(series))
    return Markup(f'<figure class="chart-box"><figcaption>{escape(title)} {legend}'
                  f"</figcaption>{''.join(parts)}</figure>")
