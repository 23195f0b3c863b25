"""`tidings fanout`, `tidings campaign …` and `tidings forecast` as users run them (real
subprocesses), including kill -9 of a fan-out mid-run and the re-run that resumes it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tidings.client import Tidings
from tidings.settings import Settings

ZONES = ["America/New_York", "Europe/London", "Asia/Kolkata", "Australia/Sydney"]


def env(db: str) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith("TIDINGS_")}
    out.update(TIDINGS_DB=db, COLUMNS="200")
    return out


def run(db: str, cwd: Path, *args: str, stdin: str | None = None,
        code: int = 0) -> subprocess.CompletedProcess[str]:
    r = subprocess.run([sys.executable, "-m", "tidings", *args], input=stdin,
                       capture_output=True, text=True, env=env(db), cwd=cwd, timeout=120,
                       check=False)
    assert r.returncode == code, (r.returncode, r.stdout, r.stderr)
    return r


def as_json(db: str, cwd: Path, *args: str, stdin: str | None = None, code: int = 0) -> Any:
    return json.loads(run(db, cwd, *args, "--json", stdin=stdin, code=code).stdout)


def write_csv(path: Path, n: int, bad: int = 0) -> None:
    with path.open("w") as f:
        f.write("id,email,timezone,first_name\n")
        for i in range(n):
            f.write(f"r{i},user{i}@example.com,{ZONES[i % len(ZONES)]},N{i}\n")
        for i in range(bad):
            f.write(f"bad{i},user{i}@example.com,Nowhere/City,N{i}\n")


@pytest.fixture
def db(db_url: str) -> str:
    with Tidings(settings=Settings(db=db_url)) as t:
        t.email.create_template("welcome", "Welcome {{first_name}}", text="Hi {{first_name}}")
        t.email.create_template("nudge", "Still there?", text="Hello {{first_name}}")
    return db_url


FANOUT = ["fanout", "--campaign", "spring", "--template", "welcome", "--from",
          "news@example.com", "--local-time", "09:00", "--on", "2031-03-01",
          "--step", "welcome:0", "--step", "nudge:2:10:00:nudge"]


def test_fanout_and_campaign_commands(db: str, tmp_path: Path) -> None:
    write_csv(tmp_path / "people.csv", 20, bad=2)
    summary = as_json(db, tmp_path, *FANOUT, "people.csv", "--errors", "bad.jsonl",
                      "--flexible-window", "20", "--quiet-hours", "21:00-08:00")
    assert (summary["rows_read"], summary["schedules_created"], summary["errors"]) == (22, 40, 2)
    bad = [json.loads(x) for x in (tmp_path / "bad.jsonl").read_text().splitlines()]
    assert [(b["row"], b["id"]) for b in bad] == [(21, "bad0"), (22, "bad1")]
    human = run(db, tmp_path, *FANOUT, "people.csv").stdout  # re-run: nothing new
    assert "schedules created" in human and "40" in human
    status = as_json(db, tmp_path, "campaign", "status", "spring")
    assert status["counts"]["scheduled"] == 40 and status["schedules_created"] == 40
    shown = as_json(db, tmp_path, "campaign", "show", "spring", "r1")
    assert [(x["step"], x["state"], x["schedule"]) for x in shown["steps"]] == [
        ("welcome", "scheduled", "welcome-r1"), ("nudge", "scheduled", "nudge-r1")]  # not r10
    assert shown["steps"][1]["due_at"].startswith("2031-03-0")
    unknown = run(db, tmp_path, "campaign", "show", "spring", "nobody", code=1)
    assert "no recipient 'nobody'" in unknown.stderr
    removed = as_json(db, tmp_path, "campaign", "cancel-recipient", "spring", "r3")
    assert removed["removed"] == 2
    again = run(db, tmp_path, "campaign", "cancel-recipient", "spring", "r3", code=1)
    assert "no pending step" in again.stderr  # an unknown id (or nothing left) is told
    assert as_json(db, tmp_path, "campaign", "pause", "spring")["counts"]["disabled"] == 38
    assert as_json(db, tmp_path, "campaign", "resume", "spring")["counts"]["enabled"] == 38
    listed = as_json(db, tmp_path, "campaign", "list")["campaigns"]
    assert [c["name"] for c in listed] == ["spring"]
    cancelled = as_json(db, tmp_path, "campaign", "cancel", "spring")
    assert cancelled["status"] == "CANCELLED" and cancelled["counts"]["cancelled"] == 40
    missing = run(db, tmp_path, "campaign", "status", "autumn", code=1)
    assert "Campaign autumn does not exist" in missing.stderr
    bad_step = run(db, tmp_path, *FANOUT[:-4], "--step", "x:1:99:00", "people.csv", code=2)
    assert "error: Step:" in bad_step.stderr


def test_fanout_from_stdin_stops_at_the_tolerated_errors(db: str, tmp_path: Path) -> None:
    rows = "".join(json.dumps({"id": i, "email": f"u{i}@example.com",
                               "timezone": "Mars/X" if i % 3 else "UTC"}) + "\n"
                   for i in range(60))
    out = as_json(db, tmp_path, *FANOUT, "-", "--format", "jsonl", "--max-errors", "5",
                  stdin=rows, code=1)
    assert out["stopped"] and out["errors"] == 6


def test_forecast_prints_a_chart_and_writes_a_png(db: str, tmp_path: Path) -> None:
    soon = time.strftime("%H:%M", time.gmtime(time.time() + 3 * 3600))
    write_csv(tmp_path / "people.csv", 30)
    run(db, tmp_path, "fanout", "people.csv", "--campaign", "c1", "--template", "welcome",
        "--from", "news@example.com", "--next", soon, "--tz-column", "timezone",
        "--flexible-window", "15")
    chart = run(db, tmp_path, "forecast", "--hours", "48", "--png", "load.png").stdout
    assert "planned firings per minute" in chart and "peak" in chart
    assert any(ch in chart for ch in "▁▂▃▄▅▆▇█")
    assert (tmp_path / "load.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    doc = as_json(db, tmp_path, "forecast", "--hours", "48", "--per", "target")
    assert sum(doc["occurrences"]["email"]) == 30 and sum(doc["firings"]["email"]) == 30


@pytest.mark.slow
def test_kill_9_mid_fanout_then_rerun_creates_each_schedule_once(db: str,
                                                                  tmp_path: Path) -> None:
    n = 150_000
    write_csv(tmp_path / "many.csv", n)
    proc = subprocess.Popen([sys.executable, "-m", "tidings", *FANOUT, "many.csv"],
                            cwd=tmp_path, env=env(db), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    with Tidings(settings=Settings(db=db)) as t:
        while True:
            assert time.monotonic() < deadline and proc.poll() is None, "finished too soon"
            try:
                done = t.campaigns.get("spring").schedules_created
            except Exception:
                done = 0
            if done >= 2 * n // 5:
                break
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        partial = t.store.schedule_state_counts("spring").get("ENABLED", 0)
    assert 0 < partial < 2 * n
    summary = as_json(db, tmp_path, *FANOUT, "many.csv")
    assert summary["schedules_created"] + summary["schedules_existing"] == 2 * n
    assert summary["schedules_existing"] == partial
    with Tidings(settings=Settings(db=db)) as t:
        assert t.store.schedule_state_counts("spring") == {"ENABLED": 2 * n}
        assert t.campaigns.get("spring").schedules_created == 2 * n
