"""Every ```python block of the task, job, queue, periodic-job, transactional-enqueue,
testing and migration pages (and the README's tasks tour) runs, in order, as one script in
a real Python process: documentation that no longer works fails the suite. Blocks fenced
with another info string (```python notrun, ```sh, other libraries' snippets) are prose."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from tests.conftest import pg_url

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


#: All that each page's script prints (a regular expression). Nothing runs the tasks the
#: tasks page sends, so only its own prints show: the delayed job's due time, message id and
#: schedule, the error the page quotes, the async send's job id. The testing page and the
#: README run their handlers in time travel, in order: the README's reports on Thursday and
#: Friday, its invoice on Saturday the 24th, then reports Monday to Wednesday.
PRINTED = {
    "docs/tasks.md": (r"(?P<due>\S+ \S+) \S+ \S+\n"
                      r"invoice_id: Input should be a valid integer, .+\n\S+\n"),
    "docs/periodic.md": "",  # it declares its jobs: nothing runs them
    "docs/testing.md": r"welcome ada\n",
    "docs/migrating.md": "",
    "docs/jobs.md": "",  # it declares handlers: nothing sends them a job
    "docs/queues.md": r"QueueCounts\(visible=0, in_flight=0, delayed=0\)\n",
    "README.md": r"report\nreport\ninvoice 7\nreport\nreport\nreport\n",
}


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
                                  "docs/migrating.md", "docs/jobs.md", "docs/queues.md",
                                  "README.md"])
def test_page_examples_run(page: str, tmp_path: Path) -> None:
    text = (ROOT / page).read_text()
    script = readme_tasks_section() if page == "README.md" else text
    started = datetime.now(UTC)
    out = run(python_blocks(script), tmp_path,
              {"TIDINGS_DB": f"sqlite:///{tmp_path}/docs.db"})
    printed = re.fullmatch(PRINTED[page], out)
    assert printed, out
    if page == "docs/tasks.md":  # send_in(timedelta(minutes=5)), within the run's 120 s
        due = datetime.fromisoformat(printed["due"]) - started
        assert timedelta(minutes=5) <= due <= timedelta(minutes=7), due


def test_transactional_page_runs_against_postgres(tmp_path: Path, pg_schema: str) -> None:
    out = run(python_blocks((ROOT / "docs/transactional.md").read_text()), tmp_path,
              {"DATABASE_URL": pg_url(pg_schema)})
    assert out == ""  # nothing ran the task: only sent (and one rolled back)
