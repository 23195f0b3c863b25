"""What an operator's typo in the environment gets, from real `tidings` processes: a
variable that is no setting is named once, with the setting it most resembles."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from faults import Serve


def test_misspelled_variables_are_warned_with_the_nearest_setting(tmp_path: Path) -> None:
    typos = {"TIDINGS_PROT": "9999", "TIDINGS_CONCURENCY": "3"}
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIDINGS_")}
    cli = subprocess.run([sys.executable, "-m", "tidings", "queue", "create", "jobs",
                          "--db", f"sqlite:///{tmp_path}/t.db"], cwd=tmp_path,
                         env={**env, **typos}, capture_output=True, text=True, timeout=60)
    assert cli.returncode == 0, cli.stderr
    assert ("TIDINGS_PROT is not a tidings setting and is ignored: did you mean "
            "TIDINGS_PORT?") in cli.stderr
    assert ("TIDINGS_CONCURENCY is not a tidings setting and is ignored: did you mean "
            "TIDINGS_CONCURRENCY?") in cli.stderr
    assert cli.stderr.count("TIDINGS_PROT") == 1

    node = Serve(f"sqlite:///{tmp_path}/t.db", tmp_path, env=typos)
    try:
        node.wait_ready()
    finally:
        node.stop()
    log = (tmp_path / "serve.log").read_text()
    assert log.count("TIDINGS_PROT is not a tidings setting and is ignored: did you mean "
                     "TIDINGS_PORT?") == 1
