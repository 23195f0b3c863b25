"""`Settings`: every `TIDINGS_*` variable, typed and checked once, naming the variable."""

from __future__ import annotations

import json
import re
from dataclasses import MISSING, dataclass, fields
from pathlib import Path

import pytest

from tidings import settings as settings_module
from tidings.client import Tidings
from tidings.errors import ValidationError
from tidings.model.receipts import ReceiptSigner
from tidings.settings import Settings, unknown_variables, variable


def test_every_field_is_read_from_its_variable() -> None:
    env = {
        "TIDINGS_DB": "sqlite:///x.db", "TIDINGS_PORT": "8080", "TIDINGS_CONCURRENCY": "3",
        "TIDINGS_SHUTDOWN_GRACE_S": "2.5", "TIDINGS_APP": "jobs:app",
        "TIDINGS_SECRET": "receipts", "TIDINGS_WEBHOOK_SECRET": "hooks",
        "TIDINGS_LAMBDA_WEBHOOKS": '{"notify": "https://hooks.example/n"}',
        "TIDINGS_SQLITE_SYNCHRONOUS": "full", "TIDINGS_LOG_LEVEL": "WARNING",
        "TIDINGS_SMTP_SINK_DIR": "/tmp/sink", "TIDINGS_SQLITE_CACHE_MB": "400",
    }
    s = Settings.from_env(env)
    assert (s.db, s.port, s.concurrency, s.shutdown_grace_s, s.app) == (
        "sqlite:///x.db", 8080, 3, 2.5, "jobs:app")
    assert (s.secret, s.webhook_secret, s.smtp_sink_dir) == ("receipts", "hooks", "/tmp/sink")
    assert dict(s.lambda_webhooks) == {"notify": "https://hooks.example/n"}
    assert (s.sqlite_synchronous, s.log_level) == ("FULL", "warning")  # normalised case
    assert s.sqlite_cache_mb == 400


def test_the_sqlite_page_cache_is_the_setting(tmp_path: Path) -> None:
    for env, pages_kib in (({}, 32 * 1024), ({"TIDINGS_SQLITE_CACHE_MB": "400"}, 400 * 1024)):
        settings = Settings.from_env({"TIDINGS_DB": f"sqlite:///{tmp_path}/t.db", **env})
        with Tidings(settings=settings) as t:
            with t.store.driver.auto() as conn:  # type: ignore[attr-defined]
                assert conn.execute("PRAGMA cache_size").fetchone()[0] == -pages_kib
    with pytest.raises(ValidationError, match="TIDINGS_SQLITE_CACHE_MB"):
        Settings.from_env({"TIDINGS_SQLITE_CACHE_MB": "0"})


def test_defaults_without_variables() -> None:
    assert Settings.from_env({}) == Settings()
    assert Settings().sqlite_synchronous == "NORMAL" and dict(Settings().lambda_webhooks) == {}


def test_a_flag_beats_its_variable_and_an_absent_flag_does_not() -> None:
    env = {"TIDINGS_PORT": "8080", "TIDINGS_HOST": "0.0.0.0"}
    s = Settings.from_env(env, port=9000, host=None)
    assert (s.port, s.host) == (9000, "0.0.0.0")


def test_an_empty_optional_variable_means_unset() -> None:
    s = Settings.from_env({"TIDINGS_SECRET": "", "TIDINGS_APP": " ", "TIDINGS_LAMBDA_WEBHOOKS": ""})
    assert (s.secret, s.app, dict(s.lambda_webhooks)) == (None, None, {})


@pytest.mark.parametrize(("env", "variable_name", "rule"), [
    ({"TIDINGS_SQLITE_SYNCHRONOUS": "FUL"}, "TIDINGS_SQLITE_SYNCHRONOUS",
     "must be one of NORMAL, FULL, EXTRA"),
    ({"TIDINGS_LOG_LEVEL": "loud"}, "TIDINGS_LOG_LEVEL", "must be one of critical, error"),
    ({"TIDINGS_PORT": "http"}, "TIDINGS_PORT", "must be an integer"),
    ({"TIDINGS_PORT": "70000"}, "TIDINGS_PORT", "must be from 0 to 65535"),
    ({"TIDINGS_CONCURRENCY": "0"}, "TIDINGS_CONCURRENCY", "must be 1 or more"),
    ({"TIDINGS_SMTP_MAX_RATE": "fast"}, "TIDINGS_SMTP_MAX_RATE", "must be a number"),
    ({"TIDINGS_SMTP_MAX_RATE": "-1"}, "TIDINGS_SMTP_MAX_RATE", "must be 0 or more"),
    ({"TIDINGS_SWEEP_INTERVAL_S": "0"}, "TIDINGS_SWEEP_INTERVAL_S", "must be more than 0"),
    ({"TIDINGS_LAMBDA_WEBHOOKS": "{nope"}, "TIDINGS_LAMBDA_WEBHOOKS", "must be a JSON object"),
    ({"TIDINGS_LAMBDA_WEBHOOKS": '{"f": "ftp://x"}'}, "TIDINGS_LAMBDA_WEBHOOKS",
     "must map function names to http:// or https:// URLs"),
])
def test_a_bad_value_names_the_variable_and_the_rule(env: dict[str, str], variable_name: str,
                                                      rule: str) -> None:
    with pytest.raises(ValidationError) as caught:
        Settings.from_env(env)
    assert caught.value.field == variable_name
    assert rule in caught.value.rule


def test_values_given_in_python_are_checked_too() -> None:
    with pytest.raises(ValidationError, match="TIDINGS_SQLITE_SYNCHRONOUS"):
        Settings(sqlite_synchronous="OFF")
    with pytest.raises(ValidationError, match="TIDINGS_PORT"):
        Settings(port=-1)


def test_booleans_take_the_usual_spellings() -> None:
    @dataclass(frozen=True)
    class WithFlag(Settings):
        verbose: bool = False

    for raw, expected in [("true", True), ("YES", True), ("1", True), ("false", False),
                          ("no", False), ("0", False)]:
        assert WithFlag.from_env({"TIDINGS_VERBOSE": raw}).verbose is expected
    with pytest.raises(ValidationError) as caught:
        WithFlag.from_env({"TIDINGS_VERBOSE": "maybe"})
    assert caught.value.field == "TIDINGS_VERBOSE"
    assert caught.value.rule == "must be one of true, false, 1, 0, yes, no"


def test_secrets_stay_out_of_repr() -> None:
    shown = repr(Settings(secret="s3cret", webhook_secret="w3bhook", aws_keys="AK:sk3y",
                          smtp_url="smtp://u:pw@relay", db="postgresql://u:dbpw@h/d"))
    for secret in ("s3cret", "w3bhook", "sk3y", "pw@relay", "dbpw"):
        assert secret not in shown


def test_every_setting_is_described() -> None:
    described = dict(Settings.described())
    assert list(described) == [variable(f.name) for f in fields(Settings)]
    assert all(text.strip() for text in described.values())


def test_the_secrets_reach_the_services(tmp_path: Path) -> None:
    settings = Settings(db=f"sqlite:///{tmp_path}/t.db", secret="receipt-key",
                        webhook_secret="hook-key")
    with Tidings(settings=settings) as t:
        record = t.queues.create_queue("q")
        t.queues.send("q", "x")
        handle = t.queues.receive("q")[0].receipt_handle
        assert ReceiptSigner(b"receipt-key").open(handle, record.id)
        assert t.webhook_secret() == b"hook-key"


def test_a_misspelt_synchronous_mode_stops_the_client(tmp_path: Path) -> None:
    """It used to become NORMAL without a word."""
    env = {"TIDINGS_DB": f"sqlite:///{tmp_path}/t.db", "TIDINGS_SQLITE_SYNCHRONOUS": "FUL"}
    with pytest.raises(ValidationError, match="TIDINGS_SQLITE_SYNCHRONOUS"):
        Tidings(settings=Settings.from_env(env))
    assert not (tmp_path / "t.db").exists()


def test_the_configuration_page_lists_every_variable_with_its_default() -> None:
    """docs/configuration.md has one table row per setting, none for a setting that is
    gone, and each row's default is the one `Settings` has (— where there is none)."""
    page = (Path(__file__).parents[2] / "docs" / "configuration.md").read_text(encoding="utf-8")
    rows = {m["var"]: m["default"].strip() for m in re.finditer(
        r"^\| `(?P<var>TIDINGS_\w+)` \| (?P<default>[^|]*) \|", page, re.M)}
    assert sorted(rows) == sorted(variable(f.name) for f in fields(Settings))
    for f in fields(Settings):
        default = f.default if f.default_factory is MISSING else f.default_factory()
        cell = rows[variable(f.name)]
        if default in (None, "", {}):
            assert cell.startswith("—"), (f.name, cell)
        else:
            shown = int(default) if isinstance(default, float) and default.is_integer() \
                else default
            assert cell.lower().startswith(f"`{shown}`".lower()), (f.name, cell)


def test_settings_cross_a_pipe_as_json_whole() -> None:
    # How a node hands its settings to its dispatcher process: secrets and mappings too.
    s = Settings(db="sqlite:///x.db", secret="receipts", port=8080, shutdown_grace_s=2.5,
                 lambda_webhooks={"notify": "https://hooks.example/n"}, dispatcher="inline")
    back = Settings.from_values(json.loads(json.dumps(s.values())))
    assert back == s and back.secret == "receipts"
    assert dict(back.lambda_webhooks) == {"notify": "https://hooks.example/n"}


@pytest.mark.parametrize(("db", "dispatcher", "apart"), [
    ("sqlite:///x.db", "auto", True), ("sqlite:////abs/x.db", "auto", True),
    ("sqlite://:memory:", "auto", False), ("postgresql://h/db", "auto", False),
    ("sqlite:///x.db", "inline", False), ("postgresql://h/db", "process", True),
])
def test_where_schedules_fire(db: str, dispatcher: str, apart: bool) -> None:
    from tidings.dispatch_process import runs_apart

    assert runs_apart(Settings(db=db, dispatcher=dispatcher)) is apart


def test_a_dispatcher_process_cannot_share_an_in_memory_database() -> None:
    from tidings.dispatch_process import runs_apart

    with pytest.raises(ValidationError, match="TIDINGS_DISPATCHER.*in-memory"):
        runs_apart(Settings(db="sqlite://:memory:", dispatcher="process"))
    with pytest.raises(ValidationError, match="TIDINGS_DISPATCHER.*must be one of"):
        Settings.from_env({"TIDINGS_DISPATCHER": "thread"})


def test_unknown_variables_are_named_with_the_nearest_setting() -> None:
    env = {"TIDINGS_PROT": "8080", "TIDINGS_CONCURENCY": "3", "TIDINGS_PORT": "1",
           "TIDINGS_XYZZY": "1", "PATH": "/bin", "TIDINGSDB": "x",
           # the suite's and the benchmarks' own, which the nodes they start inherit
           "TIDINGS_TEST_NOW": "x", "TIDINGS_BENCH_KEEP": "1", "TIDINGS_CRASH_RUNS": "2"}
    assert unknown_variables(env) == [("TIDINGS_CONCURENCY", "TIDINGS_CONCURRENCY"),
                                      ("TIDINGS_PROT", "TIDINGS_PORT"),
                                      ("TIDINGS_XYZZY", None)]


def test_unknown_variables_are_warned_about_once_per_process(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(settings_module, "_warned_unknown", False)
    monkeypatch.setenv("TIDINGS_SQLITE_SYNCRONOUS", "FULL")
    Settings.from_env()
    Settings.from_env()
    [warning] = [r for r in caplog.records
                 if r.name == "tidings.settings" and "SYNCRONOUS" in r.getMessage()]
    assert warning.levelname == "WARNING"
    assert warning.getMessage() == ("TIDINGS_SQLITE_SYNCRONOUS is not a tidings setting and "
                                    "is ignored: did you mean TIDINGS_SQLITE_SYNCHRONOUS?")
