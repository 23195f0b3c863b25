"""Fan-out and campaigns over a real store (SQLite and PostgreSQL)."""

from __future__ import annotations

import io
import json
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tidings.campaigns.fanout import FanoutOptions, FanoutProgress
from tidings.campaigns.fanout_source import Columns
from tidings.client import Tidings
from tidings.clock import FrozenClock
from tidings.errors import TemplateNotFound, ValidationError
from tidings.model.campaigns import CampaignStatus, Step, recipient_key
from tidings.model.schedules import ActionAfterCompletion
from tidings.schedules.service import flex_offset_ms
from tidings.store.base import Firing

ZONES = ["America/New_York", "Europe/London", "Asia/Kolkata", "Australia/Sydney",
         "America/Los_Angeles", "Africa/Nairobi"]


def utc(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)


def csv_source(rows: list[tuple[str, str, str]], extra: str = "first_name") -> io.BytesIO:
    lines = [f"id,email,timezone,{extra}"]
    lines += [f"{rid},{email},{zone},Name {i}" for i, (rid, email, zone) in enumerate(rows)]
    return io.BytesIO(("\n".join(lines) + "\n").encode())


def recipients(n: int) -> list[tuple[str, str, str]]:
    return [(f"r{i}", f"user{i}@example.com", ZONES[i % len(ZONES)]) for i in range(n)]


def options(**kw: object) -> FanoutOptions:
    base: dict[str, object] = {
        "campaign": "spring", "template": "welcome", "sender": "news@example.com",
        "steps": (Step("welcome", 0, "09:00"), Step("nudge", 2, "10:00", "nudge")),
        "on": datetime(2027, 3, 1).date(), "local_time": "09:00", "chunk": 7}
    base.update(kw)
    return FanoutOptions(**base)  # type: ignore[arg-type]


@pytest.fixture
def tc(t: Tidings) -> Tidings:
    t.email.create_template("welcome", "Welcome {{first_name}}", text="Hi {{first_name}}")
    t.email.create_template("nudge", "Still there?", text="Hello again {{first_name}}")
    return t


def names(t: Tidings, group: str = "spring") -> list[str]:
    out, token = [], None
    while True:
        page, token = t.schedules.list(group=group, limit=1000, next_token=token)
        out += [s.name for s in page]
        if token is None:
            return sorted(out)


def test_fanout_creates_one_schedule_per_recipient_and_step(tc: Tidings) -> None:
    seen: list[FanoutProgress] = []
    summary = tc.campaigns.fanout(csv_source(recipients(30)), options(),
                                  on_progress=lambda p: seen.append(p))
    assert (summary.rows_read, summary.schedules_created, summary.errors) == (30, 60, 0)
    assert seen and seen[-1].schedules_created == 60
    assert len(names(tc)) == 60
    ny = tc.schedules.get("welcome-r0", "spring")  # r0 is in New York
    assert ny.spec.expression == "at(2027-03-01T09:00:00)"
    assert ny.spec.timezone == "America/New_York" and ny.next_fire_at == utc("2027-03-01T14:00")
    assert ny.spec.action_after_completion is ActionAfterCompletion.DELETE
    doc = json.loads(ny.spec.target.input or "")
    assert doc["Destination"]["ToAddresses"] == ["user0@example.com"]
    assert doc["Content"]["Template"]["TemplateName"] == "welcome"
    assert json.loads(doc["Content"]["Template"]["TemplateData"]) == {
        "id": "r0", "email": "user0@example.com", "timezone": "America/New_York",
        "first_name": "Name 0"}  # what tidings provides, then the row's own columns
    nudge = tc.schedules.get("nudge-r1", "spring")  # London, day 2 at 10:00 (GMT)
    assert nudge.next_fire_at == utc("2027-03-03T10:00")
    assert json.loads(nudge.spec.target.input or "")["Content"]["Template"]["TemplateName"] \
        == "nudge"
    view = tc.campaigns.status("spring")
    assert view.record.status is CampaignStatus.ACTIVE
    assert (view.record.rows_read, view.record.schedules_created) == (30, 60)
    assert (view.counts.scheduled, view.counts.enabled, view.counts.fired) == (60, 60, 0)


def test_dst_change_between_steps_is_stored_as_local_wall_time(tc: Tidings) -> None:
    # New York falls back on 2027-11-07, London on 2027-10-31: both inside the drip.
    rows = [("ny", "ny@example.com", "America/New_York"), ("ldn", "l@example.com",
                                                            "Europe/London")]
    tc.campaigns.fanout(csv_source(rows), options(
        steps=(Step("first", 0), Step("last", 7)), on=datetime(2027, 10, 29).date()))
    got = {n: tc.schedules.get(n, "spring").next_fire_at for n in names(tc)}
    assert got == {"first-ny": utc("2027-10-29T13:00"), "last-ny": utc("2027-11-05T13:00"),
                   "first-ldn": utc("2027-10-29T08:00"), "last-ldn": utc("2027-11-05T09:00")}


def test_flexible_window_uses_the_schedulers_offset(tc: Tidings) -> None:
    tc.campaigns.fanout(csv_source(recipients(12)), options(flexible_window_minutes=30))
    for name in names(tc):
        s = tc.schedules.get(name, "spring")
        assert s.next_fire_at is not None and s.spec.flexible_window_minutes == 30
        assert s.due_at == s.next_fire_at + flex_offset_ms("spring", name, s.next_fire_at, 30)


def test_rerunning_a_fanout_creates_nothing_twice(tc: Tidings) -> None:
    first = tc.campaigns.fanout(csv_source(recipients(20)), options())
    again = tc.campaigns.fanout(csv_source(recipients(25)), options())
    assert first.schedules_created == 40
    assert (again.schedules_created, again.schedules_existing) == (10, 40)
    assert len(names(tc)) == 50
    assert tc.campaigns.get("spring").schedules_created == 50


def test_bad_rows_land_in_the_error_file_and_the_run_goes_on(tc: Tidings,
                                                              tmp_path: Path) -> None:
    rows = recipients(5) + [("bad-zone", "z@example.com", "Mars/Base"),
                            ("bad-mail", "not-an-address", "UTC"), ("", "e@example.com", "UTC")]
    source = csv_source(rows)
    source = io.BytesIO(source.getvalue() + b"short,only@example.com\n")
    sink = io.StringIO()
    summary = tc.campaigns.fanout(source, options(), errors=sink)
    assert (summary.rows_read, summary.errors, summary.schedules_created) == (9, 4, 10)
    lines = [json.loads(x) for x in sink.getvalue().splitlines()]
    assert [(x["row"], x["id"]) for x in lines] == [(6, "bad-zone"), (7, "bad-mail"), (8, ""),
                                                   (9, "short")]
    assert "not a known IANA" in lines[0]["error"]
    assert "valid email address" in lines[1]["error"]
    assert "missing column 'timezone'" in lines[3]["error"]
    assert tc.campaigns.get("spring").row_errors == 4


def test_jsonl_with_an_instant_column_and_custom_columns(tc: Tidings) -> None:
    rows = [{"uid": 7, "mail": "seven@example.com", "tz": "Asia/Tokyo",
             "send_at": "2027-05-01T03:00:00Z", "plan": {"tier": "pro"}},
            {"uid": 8, "mail": "eight@example.com", "tz": "Asia/Tokyo",
             "send_at": "2027-05-01T03:00:00"}]  # no offset: a bad row
    source = io.BytesIO("".join(json.dumps(r) + "\n" for r in rows).encode())
    summary = tc.campaigns.fanout(source, options(
        steps=(), on=None, local_time=None, format="jsonl",
        columns=Columns(id="uid", email="mail", timezone="tz", at="send_at")))
    assert (summary.schedules_created, summary.errors) == (1, 1)
    s = tc.schedules.get("send-7", "spring")
    assert (s.spec.expression, s.spec.timezone) == ("at(2027-05-01T03:00:00)", "UTC")
    data = json.loads(json.loads(s.spec.target.input or "")["Content"]["Template"]
                      ["TemplateData"])
    assert data == {"id": "7", "email": "seven@example.com", "timezone": "Asia/Tokyo",
                    "plan": {"tier": "pro"}}


def test_tolerated_failures_stop_the_run(tc: Tidings) -> None:
    rows = [(f"r{i}", "oops" if i % 2 else f"u{i}@example.com", "UTC") for i in range(400)]
    by_count = tc.campaigns.fanout(csv_source(rows), options(max_errors=10))
    assert by_count.stopped and "10 tolerated" in (by_count.stop_reason or "")
    assert by_count.errors == 11 and by_count.rows_read < 400
    by_pct = tc.campaigns.fanout(csv_source(rows), options(campaign="pct",
                                                          max_error_percent=20))
    assert by_pct.stopped and by_pct.rows_read == 100  # checked from 100 rows on
    small = tc.campaigns.fanout(csv_source(rows[:4]), options(campaign="small",
                                                              max_error_percent=20))
    assert small.stopped and small.schedules_created == 4  # judged at the end
    fine = tc.campaigns.fanout(csv_source(rows[:4]), options(campaign="fine", max_errors=2))
    assert not fine.stopped


def test_steps_already_due_are_not_created(tc: Tidings, clock: FrozenClock) -> None:
    clock.set(utc("2027-03-02T00:00"))  # welcome (day 0) has passed, nudge (day 2) has not
    summary = tc.campaigns.fanout(csv_source(recipients(6)), options())
    assert (summary.schedules_created, summary.skipped_past) == (6, 6)
    assert all(n.startswith("nudge-") for n in names(tc))


def test_cancel_recipient_removes_only_their_pending_steps(tc: Tidings) -> None:
    rows = recipients(4) + [("ana@example.com", "ana@example.com", "UTC")]
    tc.campaigns.fanout(csv_source(rows), options())
    assert tc.campaigns.cancel_recipient("spring", "r2") == 2
    assert tc.campaigns.cancel_recipient("spring", "ana@example.com") == 2
    assert tc.campaigns.cancel_recipient("spring", "r2") == 0
    left = names(tc)
    assert len(left) == 6 and not any(n.endswith(("-r2", recipient_key("ana@example.com")))
                                      for n in left)
    view = tc.campaigns.status("spring")
    assert (view.counts.scheduled, view.counts.cancelled) == (6, 4)


def test_pause_resume_and_cancel(tc: Tidings, clock: FrozenClock) -> None:
    tc.campaigns.fanout(csv_source(recipients(10)), options(flexible_window_minutes=15))
    before = {n: tc.schedules.get(n, "spring").due_at for n in names(tc)}
    paused = tc.campaigns.pause("spring")
    assert paused.record.status is CampaignStatus.PAUSED
    assert (paused.counts.enabled, paused.counts.disabled) == (0, 20)
    assert tc.store.firing_counts(0, 2**62, 60_000) == []
    with pytest.raises(ValidationError, match="PAUSED"):
        tc.campaigns.fanout(csv_source(recipients(1)), options())
    resumed = tc.campaigns.resume("spring")
    assert (resumed.record.status, resumed.counts.enabled) == (CampaignStatus.ACTIVE, 20)
    assert {n: tc.schedules.get(n, "spring").due_at for n in names(tc)} == before
    cancelled = tc.campaigns.cancel("spring")
    assert cancelled.record.status is CampaignStatus.CANCELLED
    assert (cancelled.counts.scheduled, cancelled.counts.cancelled) == (0, 20)
    with pytest.raises(ValidationError, match="CANCELLED"):
        tc.campaigns.resume("spring")


def test_a_campaign_paused_while_a_pass_plans_its_firing_is_serialised_with_it(
        tc: Tidings, clock: FrozenClock) -> None:
    # SQLite: the pass read the schedule before the pause, unlocked; its completion must
    # neither fire nor delete it: the pause changed the row, so the compare-and-set
    # refuses. PostgreSQL: the pass locked the row, so the pause waits for the pass's
    # commit; the firing goes first, and the pause then finds the schedule fired.
    tc.campaigns.fanout(csv_source(recipients(1)), options(steps=(Step("only", 0),)))
    [name] = names(tc)
    due = tc.schedules.get(name, "spring").due_at
    assert due is not None
    clock.set(due + 1)
    locking = tc.store.inline_lock is None
    pausing = threading.Thread(target=lambda: tc.campaigns.pause("spring"))
    with tc.store.firing_pass(clock.now_ms(), 10, 10_000) as p:
        [s] = p.schedules
        clock.advance(1)
        pausing.start()
        pausing.join(0.5 if locking else 10)
        assert pausing.is_alive() is locking  # PostgreSQL: waiting on the row lock
        assert s.next_fire_at is not None
        firing = Firing(schedule_id=s.id, occurrence=s.next_fire_at,
                        next_fire_at=None, due_at=None, delete=True, fired=True)
        assert p.complete([firing], clock.now_ms()) == [locking]
    pausing.join(10)
    assert not pausing.is_alive()
    if locking:  # fired and deleted, once, before the pause
        assert names(tc) == []
        assert tc.campaigns.resume("spring").counts.enabled == 0
        return
    paused = tc.schedules.get(name, "spring")
    assert paused.spec.state.value == "DISABLED" and paused.due_at is None
    resumed = tc.campaigns.resume("spring")
    assert resumed.counts.enabled == 1  # it fires after the resume, once


def test_forecast_counts_planned_firings_per_minute(tc: Tidings, clock: FrozenClock) -> None:
    clock.set(utc("2027-03-01T08:00"))
    rows = [(f"r{i}", f"u{i}@example.com", "Europe/London") for i in range(40)]
    tc.campaigns.fanout(csv_source(rows), options(steps=(Step("only", 0),),
                                                  flexible_window_minutes=10))
    fc = tc.campaigns.forecast(hours=2)
    assert fc.buckets == 120 and fc.start_ms == utc("2027-03-01T08:00")
    occ = fc.occurrences["email"]
    assert occ[60] == 40 and sum(occ) == 40  # every one at 09:00 London
    due = fc.firings["email"]
    assert sum(due) == 40 and sum(due[60:70]) == 40 and max(due) < 40  # spread over 10 min
    tc.campaigns.email_rate_per_s = 0.1  # 6 per minute
    limited = tc.campaigns.forecast(hours=2)
    assert max(limited.email_sent) <= 6 and sum(limited.email_sent) == 40
    hourly = tc.campaigns.forecast(hours=2, bucket_minutes=60)
    assert hourly.firings["email"] == [0, 40]


def test_fanout_checks_before_reading(tc: Tidings) -> None:
    with pytest.raises(TemplateNotFound):
        tc.campaigns.fanout(csv_source(recipients(1)), options(template="nope", steps=()))
    with pytest.raises(ValidationError, match="Campaign"):
        tc.campaigns.fanout(csv_source(recipients(1)), options(campaign="no spaces"))
    with pytest.raises(ValidationError, match="header has no column 'tz'"):
        tc.campaigns.fanout(csv_source(recipients(1)),
                            options(columns=Columns(timezone="tz")))
    with pytest.raises(ValidationError, match="Timing"):
        tc.campaigns.fanout(csv_source(recipients(1)), options(next_time="09:00"))


def test_fanout_test_renders_every_template_before_creating_anything(tc: Tidings) -> None:
    """A template variable that no row will have is refused before anything is created,
    naming the variable and the template; id, email and timezone are always there."""
    tc.email.create_template("late", "Hi {{first_name}}", text="Your plan: {{plan}}")
    with pytest.raises(ValidationError) as err:
        tc.campaigns.fanout(csv_source(recipients(3)), options(
            steps=(Step("welcome", 0, "09:00"), Step("later", 1, "09:00", "late"))))
    assert err.value.field == "template"
    assert "'late'" in err.value.message and "{{plan}}" in err.value.message
    assert tc.campaigns.list() == [] and names(tc) == []  # nothing created
    tc.email.create_template("mine", "For {{email}} ({{id}})", text="Your zone: {{timezone}}")
    summary = tc.campaigns.fanout(csv_source(recipients(3)), options(template="mine",
                                                                     steps=()))
    assert (summary.schedules_created, summary.errors) == (3, 0)


def test_cancelled_schedules_are_counted_per_step(tc: Tidings) -> None:
    tc.campaigns.fanout(csv_source(recipients(5)), options())
    assert tc.campaigns.cancel_recipient("spring", "r2") == 2
    tc.schedules.delete(f"welcome-{recipient_key('r3')}", "spring")  # as if it had fired
    progress = {p.step: p for p in tc.campaign_views.steps("spring")}
    assert {s: (p.scheduled, p.cancelled) for s, p in progress.items()} == {
        "welcome": (3, 1), "nudge": (4, 1)}
    assert tc.campaigns.cancel("spring").counts.cancelled == 2 + 7
    progress = {p.step: p for p in tc.campaign_views.steps("spring")}
    assert {s: (p.scheduled, p.cancelled) for s, p in progress.items()} == {
        "welcome": (0, 4), "nudge": (0, 5)}
    assert tc.campaigns.cancel_recipient("spring", "r4") == 0  # nothing left: no change
    assert tc.store.campaign_step_cancelled("spring") == {"welcome": 4, "nudge": 5}
