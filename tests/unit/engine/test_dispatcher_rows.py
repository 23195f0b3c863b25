"""The dispatcher builds each planned firing and its target message without the frozen
dataclasses' `__init__`: they must hold exactly what `__init__` would have made."""

from __future__ import annotations

import dataclasses

from tidings.client import Tidings
from tidings.clock import FrozenClock, from_ms
from tidings.engine.bridge import Bridge
from tidings.engine.dispatcher import Dispatcher, _Batch, _PlannedFiring
from tidings.model.schedules import ActionAfterCompletion, ScheduleSpec, Target
from tidings.store.base import TargetMessage


def _same_as_init(made: object, cls: type) -> None:
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    assert type(made) is cls
    assert set(vars(made)) == {f.name for f in fields}
    assert made == cls(**{f.name: getattr(made, f.name) for f in fields})


def test_a_planned_firing_is_what_its_init_would_make(t: Tidings,
                                                      clock: FrozenClock) -> None:
    t.queues.create_queue("jobs")
    now = clock.now_ms()
    t.schedules.create(ScheduleSpec.once("one", from_ms(now + 1_000), Target.queue("jobs", "a"),
                                         action_after_completion=ActionAfterCompletion.DELETE))
    t.schedules.create(ScheduleSpec("every", "rate(1 minute)", Target.queue("jobs", "b")))
    bridge = Bridge(1)
    try:
        d = Dispatcher(t.schedules, t.queues, t.store, clock, t.notifier, bridge)
        clock.advance(120_000)
        with t.store.firing_pass(clock.now_ms(), 10, 10_000) as p:
            assert len(p.schedules) == 2
            batch = _Batch(clock.now_ms(), {})
            planned = {s.name: d._plan(s, batch) for s in p.schedules}
    finally:
        bridge.close()
    for firing in planned.values():
        _same_as_init(firing, _PlannedFiring)
        assert firing.fired and firing.in_target and len(firing.messages) == 1
        _same_as_init(firing.messages[0], TargetMessage)
    assert planned["one"].delete and planned["one"].next_fire_at is None
    assert planned["one"].occurrence_due == now + 1_000
    assert planned["every"].outcome is not None and planned["every"].due_at is not None
    assert planned["every"].messages[0].message.body == "b"
