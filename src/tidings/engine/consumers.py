"""Consumers: handlers registered by job type, run by tidings itself (no worker fleet).

A message is a job when its body is JSON `{"type": …, "id": …, …}`. The same queue takes
jobs sent by an API call and jobs a schedule fires, so one handler serves both.

Guarantees, built on the queue's SQS semantics:
- *Idempotent*: a job's key (`type:id`, or the message id when the body has no id) is
  recorded as done in the same transaction that deletes its message. A redelivered job
  whose key is recorded is acknowledged without running the handler again.
- *Heartbeat*: while a handler runs past half its visibility timeout, the lease is
  extended, so a long job is not handed to someone else mid-flight.
- *Retries*: a failure makes the message visible again after an exponential backoff
  with jitter (via the visibility timeout), its error recorded on the message; after the
  queue's maxReceiveCount the next receive moves it to the dead-letter queue.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import random
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from tidings.engine.backoff import Backoff
from tidings.engine.bridge import Bridge
from tidings.engine.queues import QueueService
from tidings.errors import QueueNotFound, StoreUnavailable, TidingsError, ValidationError
from tidings.model.messages import ReceivedMessage

log = logging.getLogger("tidings.consumers")

Handler = Callable[["Job"], Any]


@dataclass(frozen=True)
class Job:
    """What a handler receives."""

    id: str
    type: str
    payload: dict[str, Any]
    queue: str
    attempt: int  # 1 on the first delivery
    message_id: str
    sent_at: int

    @property
    def key(self) -> str:
        return f"{self.type}:{self.id}"


@dataclass(frozen=True)
class Registration:
    job_type: str
    queue: str
    fn: Handler
    is_async: bool


@dataclass
class App:
    """A set of job handlers. `tidings serve --app module:app` runs them.

    >>> app = App(queue="jobs")
    >>> @app.handler("invoice.generate")
    ... def generate(job: Job) -> None: ...
    """

    queue: str = "jobs"
    concurrency: int | None = None  # default: Settings.concurrency
    retry_base_s: float = 1.0
    retry_max_s: float = 900.0
    create_queues: bool = True  # create missing queues at start with default attributes
    handlers: dict[tuple[str, str], Registration] = field(default_factory=dict)
    functions: dict[str, Callable[..., Any]] = field(default_factory=dict)

    def function(self, name: str | None = None) -> Callable[[Callable[..., Any]],
                                                             Callable[..., Any]]:
        """Register a function target: a schedule with target `function:<name>` calls it
        at the due time (see `tidings.targets.function`)."""

        def register(fn: Callable[..., Any]) -> Callable[..., Any]:
            key = name or fn.__name__
            if key in self.functions:
                raise ValidationError("function", f"{key!r} is already registered")
            self.functions[key] = fn
            return fn

        return register

    def handler(self, job_type: str, *, queue: str | None = None) -> Callable[[Handler], Handler]:
        if not job_type:
            raise ValidationError("job_type", "must be a non-empty string")

        def register(fn: Handler) -> Handler:
            target = queue or self.queue
            if (target, job_type) in self.handlers:
                raise ValidationError("job_type",
                                      f"{job_type!r} already has a handler on queue {target!r}")
            self.handlers[(target, job_type)] = Registration(
                job_type, target, fn, inspect.iscoroutinefunction(fn))
            return fn

        return register

    def queues(self) -> list[str]:
        return sorted({r.queue for r in self.handlers.values()})

    def backoff_s(self, attempt: int) -> int:
        """Exponential with "equal jitter": half fixed, half random, so retries of many jobs
        that failed together spread out instead of returning in lockstep."""
        ceiling = min(self.retry_max_s, self.retry_base_s * 2 ** max(attempt - 1, 0))
        return max(int(round(ceiling / 2 + random.uniform(0, ceiling / 2))), 0)


def parse_job(queue: str, msg: ReceivedMessage) -> Job:
    try:
        payload = json.loads(msg.body)
    except json.JSONDecodeError:
        raise ValidationError("MessageBody", "is not JSON: a job is {\"type\": …, \"id\": …}")\
            from None
    if not isinstance(payload, dict) or not isinstance(payload.get("type"), str):
        raise ValidationError("MessageBody.type", "a job body is a JSON object with a string type")
    job_id = payload.get("id")
    return Job(
        id=str(job_id) if job_id is not None else msg.message_id,
        type=payload["type"], payload=payload, queue=queue, attempt=msg.receive_count,
        message_id=msg.message_id, sent_at=msg.sent_at)


class Consumer:
    """Receives from every queue the app handles and runs handlers, `concurrency` at once."""

    def __init__(self, app: App, queues: QueueService, bridge: Bridge, *, concurrency: int,
                 grace_s: float) -> None:
        self.app = app
        self.queues = queues
        self.bridge = bridge
        self.concurrency = app.concurrency or concurrency
        self.grace_s = grace_s
        self._slots = asyncio.Semaphore(self.concurrency)
        self._threads = ThreadPoolExecutor(self.concurrency, thread_name_prefix="tidings-job")
        self._stopping = asyncio.Event()
        self._running: set[asyncio.Task[None]] = set()
        self._held: dict[str, tuple[str, ReceivedMessage]] = {}  # receipt → (queue, msg)
        self.handled = 0
        self.failed = 0

    async def run(self) -> None:
        if self.app.create_queues:
            for name in self.app.queues():
                await self.bridge.run(self._ensure_queue, name)
        pollers = [asyncio.create_task(self._poll(q), name=f"poll:{q}")
                   for q in self.app.queues()]
        try:
            await self._stopping.wait()
        finally:
            for p in pollers:
                p.cancel()
            await asyncio.gather(*pollers, return_exceptions=True)
            await self._drain()

    def stop(self) -> None:
        self._stopping.set()

    def _ensure_queue(self, name: str) -> None:
        try:
            self.queues.get_queue(name)
        except QueueNotFound:
            self.queues.create_queue(name)

    async def _poll(self, queue: str) -> None:
        backoff = Backoff()
        while not self._stopping.is_set():
            await self._slots.acquire()
            free = 1
            while free < 10 and not self._slots.locked():
                await self._slots.acquire()
                free += 1
            try:
                msgs = await self.queues.receive_async(self.bridge, queue, free, wait_s=20)
                backoff.reset()
            except StoreUnavailable as exc:
                for _ in range(free):
                    self._slots.release()
                await backoff.wait(log, f"consumer of {queue}", exc, self._stopping)
                continue
            except BaseException:
                for _ in range(free):
                    self._slots.release()
                raise
            for _ in range(free - len(msgs)):
                self._slots.release()
            for msg in msgs:
                task = asyncio.create_task(self._process(queue, msg))
                self._running.add(task)
                task.add_done_callback(self._running.discard)

    async def _drain(self) -> None:
        """Graceful stop: let running jobs finish up to the deadline, release the rest."""
        if self._running:
            await asyncio.wait(set(self._running), timeout=self.grace_s)
        for receipt, (queue, _msg) in list(self._held.items()):
            try:  # visible again at once: nothing is lost, someone else takes it
                await self.bridge.run(self.queues.change_visibility, queue, receipt, 0)
            except TidingsError:
                pass
        for task in list(self._running):
            task.cancel()
        self._threads.shutdown(wait=False, cancel_futures=True)

    async def _process(self, queue: str, msg: ReceivedMessage) -> None:
        self._held[msg.receipt_handle] = (queue, msg)
        try:
            record = await self.bridge.run(self.queues.get_queue_cached, queue)
            heartbeat = asyncio.create_task(self._heartbeat(queue, msg, record.attributes
                                                            .visibility_timeout_s))
            try:
                job = parse_job(queue, msg)
                if await self.bridge.run(self.queues.job_done, record.id, job.key):
                    log.info("job %s already done; acknowledging duplicate", job.key)
                else:
                    await self._call(queue, job)
                    self.handled += 1
            except StoreUnavailable:
                raise
            except Exception as exc:  # noqa: BLE001 - any handler failure is a retry
                self.failed += 1
                await self._failed(queue, msg, exc)
                return
            finally:
                heartbeat.cancel()
            await self.bridge.run(self.queues.complete_job, record.id, msg.receipt_handle,
                                  job.key)
        except StoreUnavailable as exc:
            # The lease runs out and the job comes back: at-least-once, nothing lost.
            log.warning("store unavailable while handling a job on %s: %s", queue, exc)
        finally:
            self._held.pop(msg.receipt_handle, None)
            self._slots.release()

    async def _call(self, queue: str, job: Job) -> None:
        reg = self.app.handlers.get((queue, job.type))
        if reg is None:
            raise LookupError(f"no handler registered for job type {job.type!r} on {queue!r}")
        if reg.is_async:
            await reg.fn(job)
        else:
            loop = asyncio.get_running_loop()
            result = await loop.run_in_executor(self._threads, reg.fn, job)
            if inspect.isawaitable(result):
                await result

    async def _failed(self, queue: str, msg: ReceivedMessage, exc: BaseException) -> None:
        error = f"{type(exc).__name__}: {exc}"
        log.warning("job on %s failed (attempt %d): %s\n%s", queue, msg.receive_count, error,
                    "".join(traceback.format_exception(exc)[-3:]))
        delay = self.app.backoff_s(msg.receive_count)
        try:
            await self.bridge.run(self.queues.change_visibility, queue, msg.receipt_handle,
                                  delay, error=error[:4000])
        except TidingsError:
            pass  # lease already lost: the message is visible again anyway

    async def _heartbeat(self, queue: str, msg: ReceivedMessage, timeout_s: int) -> None:
        if timeout_s <= 1:
            return
        while True:
            await asyncio.sleep(timeout_s / 2)
            try:
                await self.bridge.run(self.queues.change_visibility, queue, msg.receipt_handle,
                                      timeout_s)
            except TidingsError:
                return


