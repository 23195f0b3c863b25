"""The forecast's limited keys: when a burst held back by a rate drains.

The forecast counts the firings due in each bucket; for each limit key with a rate
(`tidings.limits`) that some of them count against (a queue's, a webhook host's, a
function's, the SMTP relay's: the keys a target names from its destination alone), what
the rate lets start in each bucket, the excess carried to the next, and the end of the
bucket in which the last one starts. A recipient domain's key needs each message's input
and a concurrency needs each delivery's duration: neither is forecast."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tidings.model.limits import LimitSetting
from tidings.model.schedules import Target, TargetKind
from tidings.targets.base import TARGET_LIMITS, LimitPlace
from tidings.targets.registry import TARGETS


@dataclass(frozen=True)
class LimitedKey:
    key: str
    rate: str
    firings: int  # due within the horizon and counting against the key
    started: list[int]  # per bucket: what the rate lets start
    drains_at_ms: int | None  # the end of the bucket of the last start (None: later)

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "rate": self.rate, "firings": self.firings,
                "started": self.started, "drains_at_ms": self.drains_at_ms}


def limited_keys(counts: Sequence[tuple[int, str, str, int]],
                 settings: Mapping[str, LimitSetting], *, start_ms: int, bucket_ms: int,
                 buckets: int, place: LimitPlace) -> list[LimitedKey]:
    """`counts`: (bucket start, target kind, destination, firings) due in the horizon."""
    names = {k.partition(":")[0] for k, s in settings.items() if s.rate is not None}
    wanted = [n for n in TARGET_LIMITS if n in names]
    if not wanted:
        return []
    due: dict[str, list[int]] = {}
    rated: dict[str, LimitSetting] = {}
    for at, kind, destination, n in counts:
        try:
            spec = Target(TargetKind(kind), destination)
        except ValueError:
            continue  # a kind this release does not know
        for name, value in TARGETS.get(kind).limit_keys(spec, None, place, wanted).items():
            key = f"{name}:{value}"
            setting = settings.get(key) or settings.get(name)
            if setting is None or setting.rate is None:
                continue
            rated[key] = setting
            due.setdefault(key, [0] * buckets)[(at - start_ms) // bucket_ms] += n
    out = []
    for key in sorted(due):
        setting = rated[key]
        assert setting.rate is not None
        per_bucket = setting.rate.count * bucket_ms / setting.rate.period_ms
        started = spread_by_rate(due[key], per_bucket)
        total = sum(due[key])
        last = max((i for i, c in enumerate(started) if c), default=-1)
        drains = (start_ms + (last + 1) * bucket_ms
                  if sum(started) == total and last >= 0 else None)
        out.append(LimitedKey(key, str(setting.rate), total, started, drains))
    return out


def spread_by_rate(counts: list[int], per_bucket: float) -> list[int]:
    """What a sender limited to `per_bucket` messages per bucket sends in each bucket: the
    excess waits for the next one (a backlog carried forward). Unused capacity is not
    banked (a rate limit, not a quota), except the fraction of a message a slow rate
    needs to reach the next whole one."""
    keep = 1.0 if per_bucket < 1 else per_bucket % 1
    out, backlog, credit = [], 0, 0.0
    for c in counts:
        backlog += c
        credit += per_bucket
        sent = min(backlog, int(credit))
        credit = min(credit - sent, keep)
        backlog -= sent
        out.append(sent)
    return out
