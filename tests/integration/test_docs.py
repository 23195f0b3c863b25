"""Every ```python block of the task, periodic-job, transactional-enqueue, testing and
migration pages (and the README's tasks tour) runs, in order, as one script in a real
Python process: documentation that no longer works fails the suite. Blocks fenced with
another info string (```python notrun, ```sh, other libraries' snippets) are prose."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from tests.conftest import pg_url

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def python_blocks(text: str) -> str:
    return "\n".join(m.group(1) for m in BLOCK.finditer(text))


def readme_tasks_section() -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index("### Tasks, periodic jobs and tests")
    return text[start:text.index("\n### ", start + 10)]


def run(script: str, cwd: Path, env: dict[str, str]) -> str:
    assert script.strip(), "no python blocks found"
    (cwd / "doc_script.py").write_text(script)
    done = subprocess.run([sys.executable, "doc_script.py"], cwd=cwd, capture_output=True,
                          text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **env})
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stdout


@pytest.mark.parametrize("page", ["docs/tasks.md", "docs/periodic.md", "docs/testing.md",
                                  "docs/migrating.md",
                                  "README.md"])
def test_page_examples_run(page: str, tmp_path: Path) -> None:
    text = (ROOT / page).read_text()
    script = readme_tasks_section() if page == "README.md" else text
    out = run(python_blocks(script), tmp_path,
              {"TIDINGS_DB": f"sqlite:///{tmp_path}/docs.db"})
    assert out is not None


def test_transactional_page_runs_against_postgres(tmp_path: Path, pg_schema: str) -> None:
    out = run(python_blocks((ROOT / "docs/transactional.md").read_text()), tmp_path,
              {"DATABASE_URL": pg_url(pg_schema)})
    assert out == ""  # nothing ran the task: only sent (and one rolled back)
