"""The forecast's limited keys: when a burst held back by a limit drains.

The forecast counts the firings due in each bucket; for each limit key that some of them
count against (a queue's, a webhook host's, a function's, the SMTP relay's, a recipient
domain's: `tidings.limits`) and that a rate, a concurrency or a pause holds, what the key
lets start in each bucket, the excess carried to the next, and the end of the bucket in
which the last one starts.

What a key lets start in a bucket is the lowest of:

- its rate's share of the bucket (N per period: N × bucket / period);
- its concurrency over the mean time a start holds a slot (C slots, each freed after the
  mean duration: C × bucket / duration). The forecast cannot know how long each delivery
  will take: it assumes every start holds its slot for the mean duration it is given
  (`mean_duration_ms`, one second unless stated), the same for every key;
- nothing while the key (or its name) is paused: a bucket before the pause ends lets
  nothing start, the bucket in which it ends only its part after the end.

A recipient domain's key (`email-domain:<domain>`) is the first recipient's domain of each
email firing's input, so those are read one input at a time (grouped by bucket and input
text), and only while a limit or a pause exists for the name `email-domain` or one of its
keys (`Target.input_limits` says which kinds read which keys from their input)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from tidings.model.limits import LimitSetting
from tidings.model.schedules import Target, TargetKind
from tidings.store.base import LimitStore, ScheduleStore
from tidings.targets.base import TARGET_LIMITS, LimitPlace
from tidings.targets.registry import TARGETS

#: How long a start holds a concurrency slot, when the caller does not say.
DEFAULT_MEAN_DURATION_MS = 1000


@dataclass(frozen=True)
class LimitedKey:
    key: str
    rate: str | None
    concurrency: int | None
    paused_until_ms: int | None  # nothing starts before (None: not paused)
    mean_duration_ms: int | None  # what the concurrency's estimate assumed (None: none)
    firings: int  # due within the horizon and counting against the key
    started: list[int]  # per bucket: what the key lets start
    drains_at_ms: int | None  # the end of the bucket of the last start (None: later)

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "rate": self.rate, "concurrency": self.concurrency,
                "paused_until_ms": self.paused_until_ms,
                "mean_duration_ms": self.mean_duration_ms, "firings": self.firings,
                "started": self.started, "drains_at_ms": self.drains_at_ms}


@dataclass(frozen=True)
class KeyLimits:
    """The limits as stored: settings by key or name, pauses in force (until, epoch ms)."""

    settings: Mapping[str, LimitSetting]
    pauses: Mapping[str, int]
    mean_duration_ms: int = DEFAULT_MEAN_DURATION_MS

    @property
    def names(self) -> set[str]:
        """The names some setting limits or some pause holds."""
        return {k.partition(":")[0] for k, s in self.settings.items() if s.limits_anything} \
            | {k.partition(":")[0] for k in self.pauses}

    def of(self, key: str, name: str) -> tuple[LimitSetting | None, int]:
        setting = self.settings.get(key) or self.settings.get(name)
        if setting is not None and not setting.limits_anything:
            setting = None
        return setting, max(self.pauses.get(key, 0), self.pauses.get(name, 0))


class ForecastStore(LimitStore, ScheduleStore, Protocol):
    """What the forecast reads: the limits and the due firings."""


def forecast_limited(store: ForecastStore, place: LimitPlace, *, now_ms: int, start_ms: int,
                     bucket_ms: int, buckets: int, group: str | None = None,
                     mean_duration_ms: int = DEFAULT_MEAN_DURATION_MS) -> list[LimitedKey]:
    """The limited keys of the firings due in the horizon (of one group: a campaign's)."""
    limits = KeyLimits({s.key: s for s in store.limit_settings()},
                       store.limit_pauses(now_ms), mean_duration_ms)
    names = limits.names
    if not names & set(TARGET_LIMITS):
        return []
    end = start_ms + buckets * bucket_ms
    counts = store.firing_counts_by_destination(start_ms, end, bucket_ms, group=group)
    inputs = [(at, kind.kind.value, text, n) for kind in TARGETS.kinds()
              if names & set(kind.input_limits)
              for at, text, n in store.firing_inputs(start_ms, end, bucket_ms,
                                                     kind=kind.kind.value, group=group)]
    return limited_keys(counts, limits, start_ms=start_ms, bucket_ms=bucket_ms,
                        buckets=buckets, place=place, inputs=inputs)


def limited_keys(counts: Sequence[tuple[int, str, str, int]], limits: KeyLimits, *,
                 start_ms: int, bucket_ms: int, buckets: int, place: LimitPlace,
                 inputs: Sequence[tuple[int, str, str, int]] = ()) -> list[LimitedKey]:
    """`counts`: (bucket start, target kind, destination, firings) due in the horizon;
    `inputs`: (bucket start, target kind, a firing's input, firings), for the keys a
    kind reads from the input (`Target.input_limits`)."""
    names = limits.names
    wanted = [n for n in TARGET_LIMITS if n in names]
    due: dict[str, list[int]] = {}

    def count(kind: str, spec: Target, body: str | None, want: Sequence[str], at: int,
              n: int) -> None:
        for name, value in TARGETS.get(kind).limit_keys(spec, body, place, want).items():
            key = f"{name}:{value}"
            setting, paused = limits.of(key, name)
            if setting is None and paused <= start_ms:
                continue
            due.setdefault(key, [0] * buckets)[(at - start_ms) // bucket_ms] += n

    for at, kind, destination, n in counts:
        try:
            spec = Target(TargetKind(kind), destination)
        except ValueError:
            continue  # a kind this release does not know
        from_input = TARGETS.get(kind).input_limits
        count(kind, spec, None, [w for w in wanted if w not in from_input], at, n)
    for at, kind, text, n in inputs:
        from_input = TARGETS.get(kind).input_limits
        count(kind, Target(TargetKind(kind), "", input=text), text,
              [w for w in wanted if w in from_input], at, n)
    return [_drain(key, due[key], limits, start_ms, bucket_ms) for key in sorted(due)]


def _drain(key: str, counts: list[int], limits: KeyLimits, start_ms: int,
           bucket_ms: int) -> LimitedKey:
    setting, paused = limits.of(key, key.partition(":")[0])
    cap = math.inf
    rate = concurrency = duration = None
    if setting is not None and setting.rate is not None:
        rate = setting.rate
        cap = rate.count * bucket_ms / rate.period_ms
    if setting is not None and setting.concurrency is not None:
        concurrency, duration = setting.concurrency, limits.mean_duration_ms
        cap = min(cap, concurrency * bucket_ms / max(duration, 1))
    capacities = []
    for i in range(len(counts)):
        begin = start_ms + i * bucket_ms
        after_pause = min(max(begin + bucket_ms - paused, 0), bucket_ms) / bucket_ms
        capacities.append(cap if after_pause == 1 else
                          0.0 if after_pause == 0 else
                          cap * after_pause if cap != math.inf else math.inf)
    started = spread(counts, capacities)
    total = sum(counts)
    last = max((i for i, c in enumerate(started) if c), default=-1)
    drains = (start_ms + (last + 1) * bucket_ms
              if sum(started) == total and last >= 0 else None)
    return LimitedKey(key, None if rate is None else str(rate), concurrency,
                      paused if paused > start_ms else None, duration, total, started,
                      drains)


def spread(counts: Sequence[int], capacities: Sequence[float]) -> list[int]:
    """What a sender allowed `capacities[i]` starts in bucket i (inf: any number) starts
    in each bucket: the excess waits for the next one (a backlog carried forward). Unused
    capacity is not banked (a limit, not a quota), except the fraction of a start a slow
    rate needs to reach the next whole one; a bucket that lets nothing start (paused)
    carries nothing over."""
    out, backlog, credit = [], 0, 0.0
    for c, cap in zip(counts, capacities, strict=True):
        backlog += c
        if cap == math.inf:
            sent, credit = backlog, 0.0
        elif cap <= 0:
            sent, credit = 0, 0.0
        else:
            credit += cap
            sent = min(backlog, int(credit))
            credit = min(credit - sent, 1.0 if cap < 1 else cap % 1)
        backlog -= sent
        out.append(sent)
    return out


def spread_by_rate(counts: list[int], per_bucket: float) -> list[int]:
    """`spread` at one rate throughout: `per_bucket` starts in every bucket."""
    return spread(counts, [per_bucket] * len(counts))
