"""Helpers shared by the benchmarks: peak RSS and the final JSON line."""

from __future__ import annotations

import json
import resource
import sys
from typing import Any


def peak_rss_mb() -> float:
    # ru_maxrss is in KiB on Linux
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    k = min(int(round(q / 100 * (len(sorted_values) - 1))), len(sorted_values) - 1)
    return sorted_values[k]


def report(figures: dict[str, Any]) -> None:
    """Human-readable lines to stderr, then the figures as the last line on stdout."""
    for key, value in figures.items():
        print(f"  {key:>24}: {value}", file=sys.stderr)
    print(json.dumps(figures), flush=True)
