"""Drawing a load forecast: a compact terminal chart, or a PNG with matplotlib.

The terminal chart folds the horizon into at most `width` columns; each column shows the
busiest minute it covers (a peak hidden in an hourly sum would be the spike users need to
see), drawn with the eight block characters ▁▂▃▄▅▆▇█.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from tidings.campaigns.service import Forecast

BLOCKS = " ▁▂▃▄▅▆▇█"


def fold(counts: list[int], width: int) -> list[int]:
    if not counts:
        return []
    per = -(-len(counts) // width)
    return [max(counts[i:i + per]) for i in range(0, len(counts), per)]


def bars(values: list[int], top: int, rows: int = 4) -> list[str]:
    """`rows` text lines, top line first; each column's height is value/top of the chart."""
    out = []
    for r in range(rows - 1, -1, -1):
        line = []
        for v in values:
            eighths = round(v / top * rows * 8) if top else 0
            level = max(0, min(8, eighths - r * 8))
            line.append(BLOCKS[level])
        out.append("".join(line))
    return out


def _clock(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%m-%d %H:%M")


def render(fc: Forecast, *, per_target: bool = False, width: int = 96) -> list[str]:
    """Lines of text: one chart per series (per target kind, or all together)."""
    per_minute = fc.bucket_ms // 60_000
    unit = "minute" if per_minute == 1 else f"{per_minute} minutes"
    span = fold(list(range(fc.buckets)), width)
    cols = len(span)
    lines = [f"planned firings per {unit}, {_clock(fc.start_ms)} → "
             f"{_clock(fc.start_ms + fc.buckets * fc.bucket_ms)} UTC "
             f"({fc.buckets * fc.bucket_ms // 3_600_000} h, one column ≈ "
             f"{-(-fc.buckets // max(cols, 1)) * per_minute} min, busiest minute shown)"]
    series: list[tuple[str, list[int]]] = []
    if per_target:
        for kind in sorted(set(fc.firings) | set(fc.occurrences)):
            series.append((f"{kind}: at occurrence", fc.occurrences.get(kind, [0] * fc.buckets)))
            series.append((f"{kind}: due (flexible windows)", fc.firings.get(kind,
                                                                              [0] * fc.buckets)))
    else:
        series.append(("at occurrence", fc.total(fc.occurrences)))
        series.append(("due (after flexible windows)", fc.total(fc.firings)))
    if fc.email_sent:
        series.append((f"email sent at {fc.email_rate_per_s:g}/s", fc.email_sent))
    for limited in fc.limited:
        series.append((f"{limited['key']} started ({held_by(limited)})", limited["started"]))
    top = max((max(s) for _, s in series if s), default=0)
    if top == 0:
        lines.append("nothing planned in this horizon")
        return lines
    for title, counts in series:
        folded = fold(counts, width)
        peak = max(counts)
        at = fc.start_ms + counts.index(peak) * fc.bucket_ms
        lines.append("")
        lines.append(f"{title}: peak {peak} at {_clock(at)} UTC, total {sum(counts)}")
        lines.extend("│" + b for b in bars(folded, top))
        lines.append("└" + "─" * len(folded))
    if fc.limited:
        lines.append("")
    for limited in fc.limited:
        drains = limited["drains_at_ms"]
        lines.append(f"{limited['key']} ({held_by(limited)}): {limited['firings']} firings, "
                     + (f"drained by {_clock(drains)} UTC" if drains is not None
                        else "not drained within the horizon"))
    return lines


def held_by(limited: dict[str, Any]) -> str:
    """What holds a limited key back, in words: its rate, its concurrency (with the
    mean duration the estimate assumed), its pause."""
    parts = []
    if limited.get("rate"):
        parts.append(f"rate {limited['rate']}")
    if limited.get("concurrency") is not None:
        duration = limited.get("mean_duration_ms") or 0
        parts.append(f"concurrency {limited['concurrency']}, {duration / 1000:g} s each")
    if limited.get("paused_until_ms") is not None:
        parts.append(f"paused until {_clock(limited['paused_until_ms'])} UTC")
    return "; ".join(parts) or "unlimited"


def write_png(fc: Forecast, path: str, *, per_target: bool = False) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        from tidings.errors import TidingsError

        raise TidingsError("--png needs matplotlib: pip install 'tidings[plot]'") from None
    times: Any = [datetime.fromtimestamp((fc.start_ms + i * fc.bucket_ms) / 1000, UTC)
             for i in range(fc.buckets)]
    fig, ax = plt.subplots(figsize=(12, 4))
    if per_target:
        for kind, counts in sorted(fc.firings.items()):
            ax.step(times, counts, where="post", label=f"{kind} (due)")
    else:
        ax.step(times, fc.total(fc.occurrences), where="post", label="at occurrence",
                alpha=0.5)
        ax.step(times, fc.total(fc.firings), where="post", label="due (flexible windows)")
    if fc.email_sent:
        ax.step(times, fc.email_sent, where="post", label=f"email sent at "
                f"{fc.email_rate_per_s:g}/s")
    ax.set_ylabel(f"firings per {fc.bucket_ms // 60_000} min")
    ax.set_xlabel("UTC")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
