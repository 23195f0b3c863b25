"""The time-travel kit: days pass in milliseconds, every due schedule fires in order at
its own simulated instant, tasks and handlers run there, emails are rendered and kept."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

import tidings
from tidings.campaigns.fanout import FanoutOptions
from tidings.model.campaigns import Step
from tidings.testing import time_travel

START = datetime(2026, 10, 22, 6, 0, tzinfo=UTC)


def test_tasks_sent_for_later_run_at_their_instant_in_order() -> None:
    app = tidings.App(queue="jobs")
    ran: list[tuple[str, datetime]] = []

    @app.task
    def remind(user: str) -> None:
        ran.append((user, tt.now))
        if user == "a":
            remind.send_in(timedelta(days=10), user="a-again")  # a schedule, from a task

    with time_travel(app, start=START) as tt:
        remind.send_in(timedelta(hours=2), user="b")
        remind.send_in(timedelta(minutes=5), user="a")
        h = remind.send_in(timedelta(days=1), user="cancelled")
        assert h.cancel()
        remind.send(user="now")
        tt.advance(days=2)
        assert ran == [("now", START), ("a", START + timedelta(minutes=5)),
                       ("b", START + timedelta(hours=2))]
        assert tt.now == START + timedelta(days=2)
        tt.advance(days=30)
        assert ran[-1] == ("a-again", START + timedelta(minutes=5, days=10))
        assert [(r.type, r.args, r.at) for r in tt.jobs_run][:1] == [
            ("remind", {"user": "now"}, START)]
    assert app._client is None  # the app is unbound again


def test_a_failing_job_retries_with_backoff_then_dead_letters() -> None:
    app = tidings.App(queue="jobs")

    @app.task(max_attempts=3)
    def flaky(n: int) -> None:
        raise RuntimeError(f"boom {n}")

    with time_travel(app, start=START) as tt:
        flaky.send(n=1)
        tt.advance(hours=1)
        runs = [r for r in tt.jobs_run if r.type == "flaky"]
        assert [r.attempt for r in runs] == [1, 2, 3]
        assert all(not r.ok and r.error == "RuntimeError: boom 1" for r in runs)
        assert runs[0].at <= runs[1].at <= runs[2].at
        assert tt.queue("jobs").messages == []
        [dead] = tt.queue("jobs-dlq").messages
        assert dead.json()["args"] == {"n": 1}


def test_a_daily_cron_keeps_its_local_hour_through_a_dst_change() -> None:
    """Paris leaves summer time on 2026-10-25: 09:00 local is 07:00Z before, 08:00Z after."""
    app = tidings.App(queue="jobs")

    @app.cron("0 9 * * *", tz="Europe/Paris")
    def report() -> None: ...

    with time_travel(app, start=START) as tt:
        tt.advance(days=6)
        times = [r.at for r in tt.jobs_run]
        paris = [t.astimezone(ZoneInfo("Europe/Paris")).hour for t in times]
        assert [t.strftime("%m-%d %H:%M") for t in times] == [
            "10-22 07:00", "10-23 07:00", "10-24 07:00", "10-25 08:00", "10-26 08:00",
            "10-27 08:00"]
        assert set(paris) == {9}


def test_handlers_and_raw_jobs_run_too_and_queues_can_be_read() -> None:
    app = tidings.App(queue="jobs")
    seen: list[object] = []

    @app.handler("legacy.job")
    def legacy(job: tidings.Job) -> None:
        seen.append(job.payload)

    with time_travel(app, start=START) as tt:
        tt.queues.send("jobs", {"type": "legacy.job", "id": 1, "x": 2},
                       deliver_at=START + timedelta(hours=1))
        assert [m.state for m in tt.queue("jobs").messages] == ["delayed"]
        tt.advance(minutes=59)
        assert seen == []
        tt.advance(minutes=1)
        assert seen == [{"type": "legacy.job", "id": 1, "x": 2}]


ZONES = ["Europe/Paris", "America/New_York", "Asia/Tokyo", "Australia/Sydney",
         "America/Los_Angeles", "Europe/London", "Asia/Kolkata", "America/Sao_Paulo",
         "Africa/Lagos", "Pacific/Auckland"]


def test_a_seven_day_drip_to_1000_recipients_in_10_zones() -> None:
    """Its real-time cost is measured by bench/time_travel_drip.py (the same run)."""
    with time_travel(start=START) as tt:
        tt.email.create_template("welcome", "Welcome {{name}}", text="Hi {{name}}, welcome.")
        tt.email.create_template("tips", "Tips for {{name}}", text="Three tips, {{name}}.")
        tt.email.create_template("offer", "An offer for {{name}}", text="10% off, {{name}}.")
        rows = "id,email,timezone,name\n" + "".join(
            f"u{i},u{i}@example.com,{ZONES[i % 10]},User {i}\n" for i in range(1000))
        summary = tt.campaigns.fanout(io.BytesIO(rows.encode()), FanoutOptions(
            campaign="drip", template="welcome", sender="news@example.com",
            steps=(Step("welcome", 0), Step("tips", 2, template="tips"),
                   Step("offer", 5, template="offer")),
            on=date(2026, 10, 23), local_time="09:00"))
        assert summary.schedules_created == 3000
        # the summary a Python caller gets reports its reading and timing too
        assert summary.bytes_read == len(rows.encode()) and summary.elapsed_s > 0
        tt.advance(days=7)
        sent = tt.sent_emails
        assert len(sent) == 3000
        u7 = [e for e in sent if e.recipients == ("u7@example.com",)]
        assert [e.subject for e in u7] == ["Welcome User 7", "Tips for User 7",
                                           "An offer for User 7"]
        assert "10% off, User 7." in u7[2].body()
        zone = ZoneInfo(ZONES[7])
        assert [e.at.astimezone(zone).strftime("%d %H:%M") for e in u7] == [
            "23 09:00", "25 09:00", "28 09:00"]
        assert [e.at for e in sent] == sorted(e.at for e in sent)  # in order


def test_a_naive_start_is_refused() -> None:
    with pytest.raises(tidings.ValidationError, match="start"):
        with time_travel(start=datetime(2026, 1, 1)):
            pass


def test_jobs_run_records_are_json_friendly() -> None:
    app = tidings.App(queue="jobs")

    @app.task
    def hello(name: str) -> None: ...

    with time_travel(app, start=START) as tt:
        hello.send(name="x", job_id="j1")
        tt.run_pending()
        [run] = tt.jobs_run
        assert json.dumps(run.args) == '{"name": "x"}' and run.id == "j1" and run.ok


def test_the_pytest_fixture_works_in_a_users_own_suite(tmp_path: Path) -> None:
    """A user's project (a module and its tests, nothing of ours on its path but the
    installed tidings) gets `tidings_time_travel` from the plugin tidings registers."""
    (tmp_path / "signup.py").write_text(
        "import tidings\n"
        "app = tidings.App(queue='jobs')\n\n"
        "@app.task\n"
        "def welcome(user: str) -> None:\n"
        "    print('welcome', user)\n\n"
        "@app.task\n"
        "def signup(user: str) -> None:\n"
        "    welcome.send_in(3 * 86400, user=user)\n")
    (tmp_path / "test_signup.py").write_text(
        "from datetime import UTC, datetime\n"
        "from signup import app, signup\n\n"
        "def test_welcome_after_three_days(tidings_time_travel):\n"
        "    tt = tidings_time_travel(app, start=datetime(2026, 3, 1, tzinfo=UTC))\n"
        "    signup.send(user='ada')\n"
        "    tt.advance(days=2)\n"
        "    assert [r.type for r in tt.jobs_run] == ['signup']\n"
        "    tt.advance(days=1)\n"
        "    assert [(r.type, r.at.day) for r in tt.jobs_run] == [('signup', 1), ('welcome', 4)]\n")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "test_signup.py"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, env={k: v for k, v in os.environ.items()
                                            if k != "PYTHONPATH"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "1 passed" in done.stdout
