"""`tidings schedule …` and `tidings schedule-group …` as users run them: a real subprocess
against a SQLite file."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest
from cli_runner import Cli


@pytest.fixture
def cli(tmp_path: Path, db_url: str) -> Cli:
    c = Cli(db_url, tmp_path)
    c.ok("queue", "create", "jobs")
    return c


def test_schedule_lifecycle(cli: Cli) -> None:
    created = cli.json("schedule", "create", "daily", "--expression", "cron(0 9 * * ? *)",
                       "--tz", "Europe/Paris", "--queue", "jobs", "--input", "-",
                       "--max-retries", "3", "--description", "morning",
                       stdin='{"report": "daily"}')
    assert created["name"] == "daily" and created["group"] == "default"
    assert created["timezone"] == "Europe/Paris"
    assert created["target"]["destination"] == "jobs"
    assert created["target"]["input"] == '{"report": "daily"}'
    assert created["target"]["retry_policy"]["maximum_retry_attempts"] == 3
    assert created["arn"].endswith(":schedule/default/daily")
    # 09:00 in Paris is 07:00Z or 08:00Z depending on the season
    assert created["next_fire_at"][11:] in ("07:00:00.000Z", "08:00:00.000Z")
    assert cli.json("schedule", "get", "daily") == created
    assert "Europe/Paris" in cli.ok("schedule", "get", "daily")  # the human table

    updated = cli.json("schedule", "update", "daily", "-e", "rate(1 hour)", "--queue", "jobs",
                       "--disabled")
    assert updated["expression"] == "rate(1 hour)"
    assert updated["timezone"] == "UTC" and updated["description"] is None  # full replace
    assert updated["target"]["input"] is None
    assert updated["state"] == "DISABLED" and updated["due_at"] is None
    assert "full replace" in cli.ok("schedule", "update", "--help").lower()

    assert cli.json("schedule", "enable", "daily")["state"] == "ENABLED"
    assert cli.json("schedule", "disable", "daily")["state"] == "DISABLED"
    assert "is DISABLED" in cli.ok("schedule", "disable", "daily")

    assert cli.json("schedule", "delete", "daily") == {"deleted": "daily", "group": "default"}
    r = cli.run("schedule", "get", "daily")
    assert r.returncode == 1 and r.stderr.strip() == "error: Schedule daily does not exist."


def test_list_filters_and_pages(cli: Cli) -> None:
    for name in ("a-1", "a-2", "b-1"):
        cli.ok("schedule", "create", name, "-e", "rate(5 minutes)", "--queue", "jobs",
               *(["--disabled"] if name == "a-2" else []))
    listed = cli.json("schedule", "list")
    assert [s["name"] for s in listed["schedules"]] == ["a-1", "a-2", "b-1"]
    assert listed["next_token"] is None
    assert [s["name"] for s in cli.json("schedule", "list", "--prefix", "a-")["schedules"]] \
        == ["a-1", "a-2"]
    assert [s["name"] for s in cli.json("schedule", "list", "--state", "disabled")["schedules"]]\
        == ["a-2"]
    page = cli.json("schedule", "list", "--limit", "2")
    assert len(page["schedules"]) == 2
    rest = cli.json("schedule", "list", "--limit", "2", "--next-token", page["next_token"])
    assert [s["name"] for s in rest["schedules"]] == ["b-1"]
    human = cli.ok("schedule", "list", "--limit", "2")
    assert "a-1" in human and "more: --next-token" in human


def test_groups(cli: Cli) -> None:
    group = cli.json("schedule-group", "create", "team", "--tag", "owner=ops")
    assert group["tags"] == {"owner": "ops"}
    assert group["arn"].endswith(":schedule-group/team")
    assert [g["name"] for g in cli.json("schedule-group", "list")["groups"]] \
        == ["default", "team"]
    cli.ok("schedule", "create", "s1", "-e", "rate(1 day)", "--queue", "jobs", "-g", "team")
    cli.ok("schedule", "create", "s2", "-e", "rate(1 day)", "--queue", "jobs", "-g", "team")
    assert cli.json("schedule", "get", "s1", "--group", "team")["group"] == "team"
    assert cli.json("schedule-group", "delete", "team") == {"name": "team",
                                                           "deleted_schedules": 2}
    assert cli.json("schedule", "list")["schedules"] == []
    r = cli.run("schedule-group", "delete", "default")
    assert r.returncode == 2 and "error: Name:" in r.stderr


def test_bad_values_exit_2_naming_the_field(cli: Cli) -> None:
    base = ("schedule", "create", "x", "-e", "cron(0 9 * * ? *)")
    cases = [
        ((*base, "--queue", "jobs", "--flexible-window", "2000"),
         "error: FlexibleTimeWindow.MaximumWindowInMinutes: "),
        ((*base, "--queue", "jobs", "--tz", "Mars/Olympus_Mons"),
         "error: ScheduleExpressionTimezone: "),
        (("schedule", "create", "x", "-e", "cron(0 9 * * * *)", "--queue", "jobs"),
         "error: ScheduleExpression: "),
        ((*base, "--queue", "jobs", "--start", "2030-01-01T09:00:00"), "error: --start: "),
        ((*base,), "error: --queue/--webhook/--function: give exactly one target"),
        ((*base, "--queue", "jobs", "--webhook", "https://x.test"),
         "error: --queue/--webhook/--function: "),
        ((*base, "--queue", "missing"), "error: Target.Arn: queue 'missing' does not exist"),
        ((*base, "--queue", "jobs", "--max-retries", "500"),
         "error: RetryPolicy.MaximumRetryAttempts: "),
    ]
    for args, expected in cases:
        r = cli.run(*args)
        assert r.returncode == 2, (args, r.stderr)
        assert r.stderr.startswith(expected), (args, r.stderr)
        assert r.stdout == ""
    assert cli.json("schedule", "list")["schedules"] == []
    r = cli.run("schedule", "create", "x", "--queue", "jobs")  # click's own usage error
    assert r.returncode == 2 and "--expression" in r.stderr


def test_conflicts_and_missing_exit_1(cli: Cli) -> None:
    cli.ok("schedule", "create", "dup", "-e", "rate(1 day)", "--queue", "jobs")
    r = cli.run("schedule", "create", "dup", "-e", "rate(1 day)", "--queue", "jobs")
    assert r.returncode == 1 and r.stderr.strip() == "error: Schedule dup already exists."
    for args in (("schedule", "enable", "ghost"), ("schedule", "delete", "ghost"),
                 ("schedule", "create", "s", "-e", "rate(1 day)", "--queue", "jobs",
                  "--group", "nope"), ("schedule-group", "delete", "nope")):
        r = cli.run(*args)
        assert r.returncode == 1, (args, r.stderr)
        assert r.stderr.startswith("error: ")


def test_next_prints_occurrences_without_a_database(cli: Cli, tmp_path: Path) -> None:
    args = ("schedule", "next", "cron(0 9 ? * MON-FRI *)", "--tz", "America/New_York",
            "-n", "3", "--after", "2027-01-15T12:00:00Z")  # a Friday, 07:00 in New York
    doc = cli.json(*args)
    assert doc["occurrences"] == [
        {"utc": "2027-01-15T14:00:00.000Z", "local": "2027-01-15T09:00:00-05:00"},
        {"utc": "2027-01-18T14:00:00.000Z", "local": "2027-01-18T09:00:00-05:00"},
        {"utc": "2027-01-19T14:00:00.000Z", "local": "2027-01-19T09:00:00-05:00"},
    ]
    human = cli.ok(*args)
    assert human.count("T09:00:00-05:00") == 3 and "2027-01-18T14:00:00.000Z" in human
    # across the March DST change, 09:00 New York moves from 14:00Z to 13:00Z
    dst = cli.json("schedule", "next", "cron(0 9 ? * MON-FRI *)", "--tz", "America/New_York",
                   "-n", "2", "--after", "2027-03-12T15:00:00Z")
    assert [o["utc"] for o in dst["occurrences"]] == ["2027-03-15T13:00:00.000Z",
                                                      "2027-03-16T13:00:00.000Z"]

    nodb = Cli(f"sqlite:///{tmp_path}/never/created.db", tmp_path)
    assert "2027-01-15T14:00:00.000Z" in nodb.ok(*args)
    assert not (tmp_path / "never").exists()
    r = cli.run("schedule", "next", "rate(1 day)", "--after", "2027-01-15T12:00:00")
    assert r.returncode == 2 and r.stderr.startswith("error: --after: ")


def test_help_lists_the_commands(cli: Cli) -> None:
    top = cli.ok("--help")
    assert "schedule" in top and "schedule-group" in top
    sub = cli.ok("schedule", "--help")
    for command in ("create", "get", "update", "delete", "list", "enable", "disable", "next"):
        assert command in sub
    groups = cli.ok("schedule-group", "--help")
    for command in ("create", "list", "delete"):
        assert command in groups


def test_apply_creates_then_replaces_and_list_shows_local_time(cli: Cli) -> None:
    args = ["schedule", "apply", "standup", "--expression", "cron(0 9 ? * MON-FRI *)",
            "--tz", "Europe/Paris", "--queue", "jobs", "--input", '{"type": "standup"}']
    first = cli.json(*args)
    again = cli.json(*args)  # a setup script re-run: no "already exists"
    assert again["modified_at"] == first["modified_at"]
    moved = cli.json(*args[:4], "cron(0 10 ? * MON-FRI *)", *args[5:])
    assert moved["expression"] == "cron(0 10 ? * MON-FRI *)"
    listing = cli.ok("schedule", "list")
    assert "next fire (local)" in listing and "10:00:00 CE" in listing  # CET or CEST


def test_version(cli: Cli) -> None:
    # pyproject.toml's number, single-sourced through the installed package's metadata
    assert cli.ok("--version").strip() == f"tidings {importlib.metadata.version('tidings')}"
