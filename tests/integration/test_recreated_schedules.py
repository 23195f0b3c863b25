"""Schedules fired, deleted and created again for the same instant, through a real node.

The report behind this test: six one-shot schedules `at(<a second ago>)` with
ActionAfterCompletion DELETE, created 250 ms apart with distinct names and inputs, into a
FIFO queue: two messages arrived. Each new schedule took the id of the one just deleted
(SQLite's rowid), and so the same execution id: the FIFO queue dropped the firing as a
copy (the same deduplication id), the delivery queue's consumer acknowledged the webhook,
function and email deliveries as duplicates of jobs already done, the email log found the
mail already SENT. Nothing said so.

Here one `tidings serve` process fires what another process (this test, through the
Python API and through boto3's Scheduler client) creates, for every target kind, in
sequence (create, wait until it fired and deleted itself, create the next) and on several
threads at once, and every firing must be delivered exactly once.
"""

from __future__ import annotations

import json
import textwrap
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import boto3
import pytest
from email_relay import Relay, running_relay
from faults import Serve, WebhookReceiver

from tidings.client import Tidings
from tidings.errors import ScheduleNotFound
from tidings.model.schedules import ActionAfterCompletion, ScheduleSpec, Target, TargetKind
from tidings.settings import Settings

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

ROUNDS = 6  # per kind and thread, as in the report
THREADS = 3

APP = textwrap.dedent("""
    import os
    from tidings import App
    app = App(queue="work")

    @app.function("record")
    def record(event):
        with open(os.environ["FN_LOG"], "a") as f:
            f.write(event.raw_input + "\\n")
""")


@pytest.fixture
def node(db_url: str, tmp_path: Path) -> Iterator[tuple[Serve, WebhookReceiver, Relay, str]]:
    (tmp_path / "recreate_app.py").write_text(APP)
    receiver, relay = WebhookReceiver(), Relay()
    with receiver.running() as hook, running_relay(relay) as smtp:
        with Tidings(settings=Settings(db=db_url)) as t:
            t.queues.create_queue("jobs")
            t.queues.create_queue("orders.fifo")
            t.email.create_template("hello", "Hi {{name}}", text="Hello {{name}}")
        serve = Serve(db_url, tmp_path, "--app", "recreate_app:app", "--smtp-url", smtp,
                      env={"FN_LOG": str(tmp_path / "functions.log")})
        try:
            serve.wait_ready()
            yield serve, receiver, relay, hook
        finally:
            serve.stop()


def _a_second_ago() -> str:
    return time.strftime("at(%Y-%m-%dT%H:%M:%S)", time.gmtime(time.time() - 1))


def _targets(hook: str) -> dict[str, Callable[[str], Target]]:
    return {
        "queue": lambda s: Target(TargetKind.QUEUE, "jobs", input=s),
        "fifo": lambda s: Target(TargetKind.QUEUE, "orders.fifo", input=s,
                                 message_group_id=s),
        "webhook": lambda s: Target(TargetKind.WEBHOOK, hook, input=json.dumps({"s": s})),
        "function": lambda s: Target(TargetKind.FUNCTION, "record", input=json.dumps({"s": s})),
        "email": lambda s: Target(TargetKind.EMAIL, "", input=json.dumps({
            "FromEmailAddress": "news@example.com",
            "Destination": {"ToAddresses": [f"{s}@example.org"]},
            "Content": {"Template": {"TemplateName": "hello",
                                     "TemplateData": json.dumps({"name": s})}}})),
    }


def _wait_gone(t: Tidings, name: str, serve: Serve, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            t.schedules.get(name)
        except ScheduleNotFound:
            return
        assert serve.alive(), "tidings serve died"
        assert time.monotonic() < deadline, f"schedule {name} never fired"
        time.sleep(0.02)


def _received(db_url: str, queue: str) -> list[str]:
    out: list[str] = []
    with Tidings(settings=Settings(db=db_url)) as t:
        while msgs := t.queues.receive(queue, 10, wait_s=0, visibility_s=3600):
            out += [m.body for m in msgs]
    return out


def _until(check: Callable[[], bool], serve: Serve, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert serve.alive(), "tidings serve died"
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_every_kind_recreated_for_the_same_instant_is_delivered_once(
        db_url: str, tmp_path: Path,
        node: tuple[Serve, WebhookReceiver, Relay, str]) -> None:
    serve, receiver, relay, hook = node
    targets = _targets(hook)
    errors: list[BaseException] = []

    def worker(thread: int) -> None:
        try:
            with Tidings(settings=Settings(db=db_url)) as t:
                instant = _a_second_ago()  # one instant for every round of this thread
                for rnd in range(ROUNDS):
                    for kind, make in targets.items():
                        name = f"{kind}-{thread}-{rnd}"
                        t.schedules.create(ScheduleSpec(
                            name, instant, make(name),
                            action_after_completion=ActionAfterCompletion.DELETE))
                        _wait_gone(t, name, serve)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    expected = {kind: {f"{kind}-{i}-{r}" for i in range(THREADS) for r in range(ROUNDS)}
                for kind in targets}
    fn_log = tmp_path / "functions.log"

    def functions() -> list[str]:
        return [json.loads(line)["s"] for line in fn_log.read_text().splitlines()] \
            if fn_log.exists() else []

    def mails() -> list[str]:
        return [str(r.message["Subject"]).removeprefix("Hi ") for r in relay.received]

    n = THREADS * ROUNDS
    _until(lambda: len(receiver.got) >= n and len(functions()) >= n and len(mails()) >= n,
           serve, f"deliveries missing: {len(receiver.got)} webhooks, {len(functions())} "
           f"function calls, {len(mails())} emails of {n} each")
    serve.stop()  # nothing more can land: count now
    got = {
        "queue": _received(db_url, "jobs"),
        "fifo": _received(db_url, "orders.fifo"),
        "webhook": [json.loads(body)["s"] for body, _ in receiver.got],
        "function": functions(),
        "email": mails(),
    }
    for kind, names in expected.items():
        counts = Counter(got[kind])
        assert set(counts) == names, (kind, sorted(names - set(counts)))
        assert max(counts.values()) == 1, (kind, [k for k, c in counts.items() if c > 1])
    execution_ids = [eid for _, eid in receiver.got]
    assert len(set(execution_ids)) == n


def test_the_reported_fifo_sequence_through_boto3(
        node: tuple[Serve, WebhookReceiver, Relay, str], db_url: str) -> None:
    """The report, verbatim: six schedules 250 ms apart, distinct names and inputs,
    `at(<one second ago>)`, ActionAfterCompletion DELETE, into a FIFO queue with distinct
    MessageGroupIds, created with boto3's Scheduler client; six messages arrive."""
    serve = node[0]
    endpoint = f"http://127.0.0.1:{serve.port}"
    creds = {"region_name": "us-east-1", "aws_access_key_id": "x",
             "aws_secret_access_key": "x", "endpoint_url": endpoint}
    scheduler, sqs = boto3.client("scheduler", **creds), boto3.client("sqs", **creds)
    url = sqs.get_queue_url(QueueName="orders.fifo")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"]
    for i in range(6):
        scheduler.create_schedule(
            Name=f"reminder-{i}", ScheduleExpression=_a_second_ago(),
            FlexibleTimeWindow={"Mode": "OFF"}, ActionAfterCompletion="DELETE",
            Target={"Arn": arn, "RoleArn": "arn:aws:iam::000000000000:role/x",
                    "Input": json.dumps({"reminder": i}),
                    "SqsParameters": {"MessageGroupId": f"user-{i}"}})
        time.sleep(0.25)  # the report's pace; the firing is awaited below, not slept on
    bodies: list[str] = []
    deadline = time.monotonic() + 30
    while len(bodies) < 6 and time.monotonic() < deadline:
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1)
        for m in got.get("Messages", []):
            bodies.append(m["Body"])
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    assert sorted(json.loads(b)["reminder"] for b in bodies) == list(range(6))
