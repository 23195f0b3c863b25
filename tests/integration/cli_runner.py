"""Run the `tidings` CLI as users do: a real subprocess, its environment limited to the
database under test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any


class Cli:
    def __init__(self, db: str, cwd: Path) -> None:
        self.db = db
        self.cwd = cwd

    def run(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TIDINGS_")}
        env["TIDINGS_DB"] = self.db
        env["COLUMNS"] = "200"
        return subprocess.run([sys.executable, "-m", "tidings", *args], input=stdin,
                              capture_output=True, text=True, env=env, cwd=self.cwd,
                              timeout=60, check=False)

    def ok(self, *args: str, stdin: str | None = None) -> str:
        r = self.run(*args, stdin=stdin)
        assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
        return r.stdout

    def json(self, *args: str, stdin: str | None = None) -> Any:
        return json.loads(self.ok(*args, "--json", stdin=stdin))
