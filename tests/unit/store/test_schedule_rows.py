"""A schedule row built without the dataclasses' `__init__` (the dispatcher's claim)
holds exactly what `__init__` would have made of the same columns."""

from __future__ import annotations

import dataclasses

from tidings.model.schedules import (
    ActionAfterCompletion,
    RetryPolicy,
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
           target_text(target), "DELETE", "about", "tok", 100, 105, 90, 10, 20, 3)
    spec = ScheduleSpec("n", "rate(5 minutes)", target, group="g", timezone="Europe/Paris",
                        start_ms=1, end_ms=2, state=ScheduleState.DISABLED,
                        flexible_window_minutes=15,
                        action_after_completion=ActionAfterCompletion.DELETE,
                        description="about", client_token="tok")
    expected = Schedule(spec, 7, 100, 105, 90, 10, 20, 3)
    got = rows.schedule(row)
    assert got == expected
    for cls, made, want in ((Schedule, got, expected), (ScheduleSpec, got.spec, spec)):
        assert set(vars(made)) == {f.name for f in dataclasses.fields(cls)}
        for f in dataclasses.fields(cls):
            assert getattr(made, f.name) == getattr(want, f.name), f.name
    assert got.spec.state is ScheduleState.DISABLED
    assert got.spec.action_after_completion is ActionAfterCompletion.DELETE


def test_a_stored_target_makes_the_target_init_would() -> None:
    targets = [
        Target(TargetKind.QUEUE, "jobs"),
        Target(TargetKind.QUEUE, "jobs.fifo", input='{"b": 2}', message_group_id="g",
               dead_letter_queue="dlq", role_arn="arn:aws:iam::1:role/r",
               arn="arn:aws:sqs:us-east-1:1:jobs.fifo"),
        Target(TargetKind.WEBHOOK, "https://example.com/hook", input="x",
               retry_policy=RetryPolicy(3, 120),
               options={"headers": {"X-A": "1"}, "timeout_s": 5}),
        Target(TargetKind.EMAIL, "", input='{"Content": {}}', options={"unsubscribe": True}),
    ]
    for target in targets:
        got = rows.target_of(target_text(target))
        assert got == target
        assert set(vars(got)) == {f.name for f in dataclasses.fields(Target)}
        for f in dataclasses.fields(Target):
            assert getattr(got, f.name) == getattr(target, f.name), f.name
        assert got.kind is target.kind
        assert got.options is not target.options  # its own dict, as from_json makes
