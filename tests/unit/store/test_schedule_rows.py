"""A schedule row built without the dataclasses' `__init__` (the dispatcher's claim)
holds exactly what `__init__` would have made of the same columns."""

from __future__ import annotations

import dataclasses

from tidings.model.schedules import (
    ActionAfterCompletion,
    Schedule,
    ScheduleSpec,
    ScheduleState,
    Target,
    TargetKind,
    target_text,
)
from tidings.store import rows


def test_a_schedule_row_makes_the_schedule_init_would() -> None:
    target = Target(TargetKind.QUEUE, "jobs", input='{"a": 1}')
    row = (7, "g", "n", "DISABLED", "rate(5 minutes)", "Europe/Paris", 1, 2, 15,
           target_text(target), "DELETE", "about", "tok", 100, 105, 90, 10, 20)
    spec = ScheduleSpec("n", "rate(5 minutes)", target, group="g", timezone="Europe/Paris",
                        start_ms=1, end_ms=2, state=ScheduleState.DISABLED,
                        flexible_window_minutes=15,
                        action_after_completion=ActionAfterCompletion.DELETE,
                        description="about", client_token="tok")
    expected = Schedule(spec, 7, 100, 105, 90, 10, 20)
    got = rows.schedule(row)
    assert got == expected
    for cls, made, want in ((Schedule, got, expected), (ScheduleSpec, got.spec, spec)):
        assert set(vars(made)) == {f.name for f in dataclasses.fields(cls)}
        for f in dataclasses.fields(cls):
            assert getattr(made, f.name) == getattr(want, f.name), f.name
    assert got.spec.state is ScheduleState.DISABLED
    assert got.spec.action_after_completion is ActionAfterCompletion.DELETE
