"""`tidings serve --help` and `tidings worker --help` show every setting's variable."""

from __future__ import annotations

from dataclasses import fields

import pytest
from typer.testing import CliRunner

from tidings.cli.main import app
from tidings.settings import Settings, variable


@pytest.mark.parametrize("command", ["serve", "worker"])
def test_help_shows_every_setting(command: str) -> None:
    result = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    missing = [variable(f.name) for f in fields(Settings) if variable(f.name) not in result.output]
    assert missing == []


def test_a_bad_variable_is_a_usage_error_naming_it() -> None:
    result = CliRunner().invoke(app, ["worker", "--app", "x:y"],
                                env={"TIDINGS_SQLITE_SYNCHRONOUS": "FUL"})
    assert result.exit_code == 2
    assert "TIDINGS_SQLITE_SYNCHRONOUS: must be one of NORMAL, FULL, EXTRA" in result.output
