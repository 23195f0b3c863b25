"""A crash loop: `tidings serve` killed with SIGKILL at random instants, again and again,
while it fires schedules into queues, posts webhooks, sends email and runs handlers, then
restarted. What must hold at the end:

- every schedule fired exactly once into its queue;
- every webhook and every email arrived at least once, and its copies carry one execution
  id (webhooks: the `X-Tidings-Execution-Id` header; email: the Message-ID), so a
  receiver can drop the repeats;
- a handler whose done record had committed never ran again.

`TIDINGS_CRASH_RUNS` (default 20) sets the number of kills and `TIDINGS_CRASH_SEED` the
random instants (the seed is printed, so a failure can be replayed); e.g.
`TIDINGS_CRASH_RUNS=200 pytest tests/integration/test_crash_loop.py` is the long variant.
"""

from __future__ import annotations

import json
import os
import random
import textwrap
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from email_relay import Relay, running_relay
from faults import (
    Serve,
    WebhookReceiver,
    backlog,
    done_keys,
    queue_bodies,
    schedules_left,
)

from tidings.client import Tidings
from tidings.model.schedules import ActionAfterCompletion, ScheduleSpec, Target, TargetKind
from tidings.queues.internal import DELIVERY_QUEUE, EMAIL_QUEUE, RETENTION_S
from tidings.settings import Settings

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

RUNS = int(os.environ.get("TIDINGS_CRASH_RUNS", "20"))

APP = textwrap.dedent("""
    import os
    from tidings import App
    app = App(queue="work")

    @app.handler("task")
    def task(job):
        # one line per run, on disk before the handler returns: the log outlives a kill
        with open(os.environ["JOB_LOG"], "a") as f:
            f.write(job.key + "\\n")
            f.flush()
            os.fsync(f.fileno())
""")


def _at(epoch_s: float) -> str:
    return time.strftime("at(%Y-%m-%dT%H:%M:%S)", time.gmtime(epoch_s))


PER_RUN = {"queue": 150, "work": 30, "webhook": 15, "email": 15}


def _prepare(url: str) -> None:
    with Tidings(settings=Settings(db=url)) as t:
        # Short leases: what a killed node held comes back within seconds, not a minute.
        t.queues.create_queue("jobs", retention_s=86400)
        t.queues.create_queue("work", visibility_timeout_s=3)
        for internal in (DELIVERY_QUEUE, EMAIL_QUEUE):
            t.queues.ops.ensure_internal(internal, visibility_timeout_s=3,
                                     retention_s=RETENTION_S)
        t.email.create_template("hello", "Hi {{name}}", text="Hello {{name}}")


def _add_schedules(url: str, run: int, hook: str) -> None:
    """One-shot schedules of each kind, due over the next few seconds: some fire before
    this run's kill, the rest in a later run."""
    start = time.time() + 1
    specs: list[ScheduleSpec] = []
    for kind, count in PER_RUN.items():
        for k in range(count):
            name = f"{kind}-{run * count + k}"
            when = _at(start + 4 * k / count)
            if kind == "queue":
                target = Target(TargetKind.QUEUE, "jobs", input=name)
            elif kind == "work":
                target = Target(TargetKind.QUEUE, "work",
                                input=json.dumps({"type": "task", "id": name}))
            elif kind == "webhook":
                target = Target(TargetKind.WEBHOOK, hook, input=json.dumps({"s": name}))
            else:
                target = Target(TargetKind.EMAIL, "", input=json.dumps({
                    "FromEmailAddress": "news@example.com",
                    "Destination": {"ToAddresses": [f"{name}@example.org"]},
                    "Content": {"Template": {"TemplateName": "hello",
                                             "TemplateData": json.dumps({"name": name})}}}))
            specs.append(ScheduleSpec(name, when, target,
                                      action_after_completion=ActionAfterCompletion.DELETE))
    with Tidings(settings=Settings(db=url)) as t:
        created = t.schedules.create_many(specs, chunk=5000)
        assert sum(r.created for r in created) == len(specs)


def test_crash_loop_fires_once_delivers_at_least_once_and_never_reruns_done_jobs(
    db_url: str, tmp_path: Path
) -> None:
    seed = int(os.environ.get("TIDINGS_CRASH_SEED", str(time.time_ns() % 1_000_000)))
    rng = random.Random(seed)
    print(f"crash loop: {RUNS} runs, TIDINGS_CRASH_SEED={seed}")
    (tmp_path / "crashloop.py").write_text(APP)
    job_log = tmp_path / "jobs.log"
    job_log.touch()
    receiver, relay = WebhookReceiver(), Relay()
    with receiver.running() as hook, running_relay(relay) as smtp:
        _prepare(db_url)
        n = {kind: count * RUNS for kind, count in PER_RUN.items()}
        args = ("--app", "crashloop:app", "--smtp-url", smtp, "--concurrency", "8")
        env = {"JOB_LOG": str(job_log)}
        # (log length, done keys) right after each kill: nothing can write in between
        snapshots: list[tuple[int, set[str]]] = []
        mid_firing = 0
        began = time.monotonic()
        for run in range(RUNS):
            _add_schedules(db_url, run, hook)
            before = schedules_left(db_url)
            t_start = time.monotonic()
            node = Serve(db_url, tmp_path, *args, env=env)
            if rng.random() < 0.25:  # during start-up: migrations, queues, first claims
                time.sleep(rng.uniform(0.05, 1.5))
            else:
                node.wait_ready()
                time.sleep(rng.uniform(0.0, 1.5))
            t_ready = time.monotonic()
            node.kill()
            if os.environ.get("TIDINGS_CRASH_TRACE"):
                print(f"run {run}: ready after {t_ready - t_start:.2f} s")
            mid_firing += schedules_left(db_url) < before
            snapshots.append((len(job_log.read_text().split()), done_keys(db_url)))
        print(f"{mid_firing} of {RUNS} kills landed while schedules were firing "
              f"({time.monotonic() - began:.1f} s)")
        node = Serve(db_url, tmp_path, *args, env=env)
        try:
            node.wait_ready()
            total = sum(n.values())
            deadline = time.monotonic() + 120
            while True:
                left = schedules_left(db_url)
                pending = backlog(db_url, ["work", DELIVERY_QUEUE, EMAIL_QUEUE])
                if left == 0 and pending == 0:
                    break
                assert node.alive(), "the last node died"
                assert time.monotonic() < deadline, (
                    f"{left} of {total} schedules never fired, {pending} jobs still queued")
                time.sleep(0.25)
        finally:
            node.stop()  # once it is gone, nothing more can land: count now
    assert mid_firing > 0, "no kill landed while schedules were firing"

    # every schedule fired exactly once into its queue
    bodies = Counter(queue_bodies(db_url, "jobs"))
    assert set(bodies) == {f"queue-{i}" for i in range(n["queue"])}
    assert max(bodies.values()) == 1, [b for b, c in bodies.items() if c > 1][:5]

    # every webhook arrived, its copies share one execution id, distinct per schedule
    ids: dict[str, set[str]] = defaultdict(set)
    for body, execution_id in receiver.got:
        ids[json.loads(body)["s"]].add(execution_id)
    assert set(ids) == {f"webhook-{i}" for i in range(n["webhook"])}
    assert all(len(v) == 1 and "" not in v for v in ids.values())
    assert len(set().union(*ids.values())) == n["webhook"]

    # every email arrived, its copies share one Message-ID (the execution id), distinct
    mail: dict[str, set[str]] = defaultdict(set)
    for received in relay.received:
        msg = received.message
        mail[str(msg["Subject"]).removeprefix("Hi ")].add(str(msg["Message-ID"]))
    assert set(mail) == {f"email-{i}" for i in range(n["email"])}
    assert all(len(v) == 1 for v in mail.values())
    assert len(set().union(*mail.values())) == n["email"]

    # every handler ran to success, and none ran again after its done record committed
    runs = job_log.read_text().split()
    ran = {key.split(":", 1)[1].split("@", 1)[0] for key in runs}
    assert ran == {f"work-{i}" for i in range(n["work"])}
    for position, done in snapshots:
        again = [key for key in runs[position:] if key in done]
        assert not again, f"done jobs ran again: {again[:5]}"
    print(f"re-runs after kills: {len(runs) - n['work']}, webhook copies: "
          f"{len(receiver.got) - n['webhook']}, email copies: "
          f"{len(relay.received) - n['email']}")
