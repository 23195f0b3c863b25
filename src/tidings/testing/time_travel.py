"""`time_travel`: an isolated tidings on a temporary SQLite file whose clock moves only
when the test says so.

`tt.advance(days=7)` walks simulated time from one due instant to the next: at each, the
engine's dispatcher fires every schedule due (periodic jobs, jobs sent for later, campaign
steps), then every job visible in the app's queues and tidings' delivery queues runs
(tasks, handlers, function and email targets, rendered and kept instead of sent), until
nothing more is due at that instant; then the clock steps on. Handlers see `now` as the
simulated instant, and so does everything they send. Nothing else differs from
production: the same store, dispatcher, job parsing, job-key reservations, retries with
backoff and dead-lettering.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from tidings.client import Tidings
from tidings.clock import FrozenClock, from_ms, to_ms
from tidings.errors import QueueNotFound
from tidings.jobs.batches import Jobs
from tidings.jobs.declare import declare_queues
from tidings.jobs.deliveries import Targets, delivery_app
from tidings.jobs.handlers import Handlers
from tidings.model.states import MessageState
from tidings.queues.internal import DELIVERY_QUEUE, EMAIL_QUEUE, ensure_internal_queues
from tidings.runtime.bridge import Bridge
from tidings.schedules.dispatcher import Dispatcher
from tidings.settings import Settings
from tidings.targets.email import EmailDelivery
from tidings.tasks.app import App
from tidings.tasks.periodic import sync_periodic
from tidings.testing.mail import CapturingRelay, SentEmail
from tidings.testing.runner import JobRun, Runner

P = ParamSpec("P")
T = TypeVar("T")
#: Rounds of "fire, then run" at one instant before giving up: a job that sends a job due
#: at once, which sends another, … forever, is a bug worth an error, not a hang.
MAX_ROUNDS = 10_000
#: The relay URL the email target is given; nothing connects to it (the capture sends).
CAPTURE_RELAY = "smtp://time-travel.invalid:25"


@dataclass(frozen=True)
class QueuedMessage:
    body: str
    state: MessageState
    visible_at: datetime
    receive_count: int

    def json(self) -> Any:
        return json.loads(self.body)


class InlineBridge(Bridge):
    """Store calls on the loop's own thread: simulated time has no concurrency to win, and
    a thread hop per group commit would cost more than the SQLite write it carries."""

    def __init__(self) -> None:
        super().__init__(1)

    async def run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        return fn(*args, **kwargs)


class QueueView:
    def __init__(self, t: Tidings, name: str) -> None:
        self.t = t
        self.name = name

    @property
    def messages(self) -> list[QueuedMessage]:
        """Every message in the queue now (delayed, visible, in flight), in receive order."""
        out: list[QueuedMessage] = []
        token = None
        while True:
            views, token = self.t.queues.peek(self.name, limit=1000, next_token=token)
            out += [QueuedMessage(v.message.body, v.state, from_ms(v.message.visible_at),
                                  v.message.receive_count) for v in views]
            if token is None:
                return out


class TimeTravel:
    def __init__(self, app: Handlers | None, start: datetime, directory: Path,
                 settings: Settings | None = None) -> None:
        self.clock = FrozenClock(to_ms(start, "start"))
        base = settings or Settings()
        self.settings = dataclasses.replace(base, db=f"sqlite:///{directory}/tidings.db",
                                            smtp_url=CAPTURE_RELAY, smtp_max_rate=0.0)
        self.tidings = Tidings(settings=self.settings, clock=self.clock)
        self.jobs_run: list[JobRun] = []
        self.relay = CapturingRelay(self.clock.now_ms)
        self.app = app
        self._bridge = InlineBridge()
        self._loop = asyncio.new_event_loop()
        self._previous: Tidings | None = None
        t = self.tidings
        # The services a test drives, as on a Tidings.
        self.queues, self.schedules, self.email = t.queues, t.schedules, t.email
        self.campaigns = t.campaigns
        ensure_internal_queues(t.queues)
        email = EmailDelivery(t.email, self._bridge, self.settings, relay=self.relay)
        self.targets = Targets(t.queues, self._bridge, app.functions if app else {},
                               t.webhook_secret(), email=email,
                               webhook_guard=t.schedules.webhook_guard)
        self._dispatcher = Dispatcher(t.schedules, t.queues, t.store, self.clock, t.notifier,
                                      self._bridge)
        self._internal = [delivery_app(self.targets, t.queues, self.clock, self._bridge,
                                       firings=t.firing_log),
                          delivery_app(self.targets, t.queues, self.clock, self._bridge,
                                       queue=EMAIL_QUEUE, firings=t.firing_log)]
        self._user_runner = Runner(Jobs(t.queues), on_run=self.jobs_run.append)
        self._internal_runner = Runner(Jobs(t.queues))
        if isinstance(app, App):
            self._previous = app.bind(t)
            app.declare(t)
            sync_periodic(t, app)
        elif app is not None:
            declare_queues(t.queues, app)

    # what a test reads -----------------------------------------------------------------

    @property
    def now(self) -> datetime:
        """The simulated instant (aware, UTC)."""
        return from_ms(self.clock.now_ms())

    @property
    def sent_emails(self) -> list[SentEmail]:
        return self.relay.sent

    def queue(self, name: str) -> QueueView:
        return QueueView(self.tidings, name)

    # moving time -----------------------------------------------------------------------

    def advance(self, delta: timedelta | None = None, *, days: float = 0, hours: float = 0,
                minutes: float = 0, seconds: float = 0, milliseconds: float = 0) -> None:
        """Move the clock forward, running everything that falls due on the way, each at
        its own instant, in order."""
        step = (delta or timedelta()) + timedelta(days=days, hours=hours, minutes=minutes,
                                                  seconds=seconds, milliseconds=milliseconds)
        if step < timedelta():
            raise ValueError("time travel goes forward only")
        self.advance_to(self.now + step)

    def advance_to(self, when: datetime) -> None:
        until = to_ms(when, "when")
        if until < self.clock.now_ms():
            raise ValueError("time travel goes forward only")
        self._loop.run_until_complete(self._travel(until))

    def run_pending(self) -> None:
        """Run what is due at the current instant (e.g. right after sending a job)."""
        self.advance_to(self.now)

    async def _travel(self, until: int) -> None:
        while True:
            await self._settle()
            nxt = self._next_event()
            if nxt is None or nxt > until:
                break
            self.clock.set(max(nxt, self.clock.now_ms()))
        self.clock.set(until)
        await self._settle()
        self.tidings.queues.ops.sweep(self.settings.job_memory_s)

    async def _settle(self) -> None:
        for _ in range(MAX_ROUNDS):
            fired = 0
            while (n := self._dispatcher.fire_due()) > 0:
                fired += n
            ran = 0
            if self.app is not None:
                ran += await self._user_runner.run_visible(self.app)
            for app in self._internal:
                ran += await self._internal_runner.run_visible(app)
            if not fired and not ran:
                return
        raise RuntimeError(f"jobs kept falling due at {self.now.isoformat()}: a job that "
                           "sends itself for now, forever?")

    def _next_event(self) -> int | None:
        t, now = self.tidings, self.clock.now_ms()
        names = {DELIVERY_QUEUE, EMAIL_QUEUE, *(self.app.queues() if self.app else [])}
        instants = [t.store.next_due_at()]
        for name in names:
            try:
                record = t.queues.get_queue_cached(name)
            except QueueNotFound:
                continue
            instants.append(t.store.next_visible_at(record.id, now))
        found = [i for i in instants if i is not None]
        return min(found) if found else None

    def close(self) -> None:
        if isinstance(self.app, App):
            self.app.bind(self._previous)
        try:
            self._loop.run_until_complete(self.relay.close())
        finally:
            self._loop.close()
            self._bridge.close()
            self.tidings.close()


@contextlib.contextmanager
def time_travel(app: Handlers | None = None, *, start: datetime | None = None,
                directory: str | Path | None = None,
                settings: Settings | None = None) -> Iterator[TimeTravel]:
    """An isolated tidings at `start` (an aware datetime; default: now) for `app`: its
    tasks send into it while the block runs, its queues and periodic jobs are set up in
    it. The database is a temporary SQLite file (in `directory` if given), removed after."""
    when = start or datetime.now(UTC)
    with contextlib.ExitStack() as stack:
        folder = Path(directory) if directory is not None else Path(
            stack.enter_context(tempfile.TemporaryDirectory(prefix="tidings-tt-")))
        tt = TimeTravel(app, when, folder, settings)
        stack.callback(tt.close)
        yield tt
