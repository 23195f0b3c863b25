"""The composition root: what one `tidings serve` (or `tidings worker`) process builds.

It stands above both the services and `server/` and is the only module that knows both: it
opens the database, makes the bridge, the group commit and the engine loops once, and hands
them to the HTTP app, so no lower layer needs to import upward or keep process-wide state.

Each service has `run()` and `stop()`. If one dies, the node stops loudly rather than
limping on with, say, no consumer. Shutdown gives consumers `shutdown_grace_s` to finish.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import importlib
import logging
import signal
import sys
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any, NoReturn

from tidings.client import Tidings
from tidings.dispatch_process import DispatcherProcess, runs_apart
from tidings.email.inbound import BounceListener
from tidings.email_process import EmailProcess, sends_apart, split
from tidings.errors import SchemaTooNew, ValidationError
from tidings.jobs.consumers import Consumer
from tidings.jobs.deliveries import Targets, delivery_consumer
from tidings.jobs.handlers import Handlers
from tidings.limits.book import LimitBook
from tidings.ops.nodes import Heartbeat
from tidings.ops.schema_guard import SchemaGuard
from tidings.ops.sweeper import Sweeper
from tidings.push.pushers import Pushers
from tidings.queues.coalesce import Coalescer
from tidings.queues.internal import DELIVERY_QUEUE, EMAIL_QUEUE, ensure_internal_queues
from tidings.runtime.bridge import Bridge
from tidings.runtime.collector import settle_after_startup
from tidings.runtime.health import Health
from tidings.runtime.service import Service
from tidings.schedules.dispatcher import Dispatcher
from tidings.server.exposure import (
    check_exposure,
    check_unsubscribe_links,
    describe,
    uvicorn_security,
)
from tidings.settings import Settings
from tidings.store import DEFAULT_URL, Create
from tidings.targets.email import EmailDelivery
from tidings.tasks.app import App
from tidings.version import VERSION

if TYPE_CHECKING:
    from fastapi import FastAPI

log = logging.getLogger("tidings")


def load_app(spec: str) -> Handlers:
    """Import `module:attribute` and check it is a tidings App."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ValidationError("app", "must look like module:attribute, e.g. myproject.jobs:app")
    if "" not in sys.path:
        sys.path.insert(0, "")  # like uvicorn: the current directory is importable
    try:
        obj = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ValidationError("app", f"cannot load {spec!r}: {exc}") from exc
    if not isinstance(obj, Handlers):
        raise ValidationError("app", f"{spec!r} is a {type(obj).__name__}, not a tidings.App")
    return obj


class Node:
    """The engine loops of one process over `t`, and what its HTTP app shares with them.

    `settings.poll_fallback_s` bounds how long the dispatcher and the consumers miss work
    no wake-up announced; tests raise it to prove that wake-ups, not polling, woke them.
    Only schedules due within twice it are announced (`notify.base.wake_horizon_ms`).

    `dispatcher_process` fires schedules in a child process (dispatch_process.py) instead
    of this one; `email_process` sends email from a child process as well as this one,
    each with its share of the relay (email_process.py). `serve` and `work` choose them
    by `settings.dispatcher` and `settings.email_sender`."""

    def __init__(self, t: Tidings, settings: Settings, *, app: Handlers | None = None,
                 serve_consumers: bool = True, dispatcher_process: bool = False,
                 email_process: bool = False) -> None:
        self.t = t
        self.settings = settings
        self.bridge = Bridge.for_store(t.store)
        self.health = Health()  # what its loops cannot do now: GET /health/ready
        self.coalescer = Coalescer(t.queues, self.bridge,
                                  max_long_polls=settings.max_long_polls)
        self.services: list[Service] = [
            Sweeper(t.queues, self.bridge, interval_s=settings.sweep_interval_s,
                    job_memory_s=settings.job_memory_s, firings=t.firing_log,
                    health=self.health)
        ]
        ensure_internal_queues(t.queues)
        if isinstance(app, App):
            app.start(t)  # its queues and periodic schedules; its sends go to this node
        # One copy of the limits for the whole node, woken when they change.
        self.book = LimitBook(t.store, t.clock, self.bridge, t.notifier,
                              fallback_s=settings.poll_fallback_s)
        self.dispatcher: Dispatcher | None = None
        self.dispatcher_process: DispatcherProcess | None = None
        firing: Service
        if dispatcher_process:
            firing = self.dispatcher_process = DispatcherProcess(
                settings, t.notifier, health=self.health)
        else:
            firing = self.dispatcher = Dispatcher(t.schedules, t.queues, t.store, t.clock,
                                                  t.notifier, self.bridge,
                                                  idle_poll_s=settings.poll_fallback_s,
                                                  health=self.health, book=self.book,
                                                  place=t.campaigns.limit_place)
        sending = settings  # what this process sends email with
        self.email_process: EmailProcess | None = None
        if email_process and settings.smtp_url:
            sending, apart = split(settings)
            self.email_process = EmailProcess(apart, t.notifier, health=self.health)
        self.targets = Targets(t.queues, self.bridge, app.functions if app else {},
                               t.webhook_secret(),
                               email=EmailDelivery(t.email, self.bridge, sending),
                               webhook_guard=t.schedules.webhook_guard)
        def deliveries(queue: str) -> Consumer:
            return delivery_consumer(self.targets, t.queues, t.clock, self.bridge,
                                     t.firing_log, queue=queue,
                                     concurrency=settings.concurrency,
                                     grace_s=settings.shutdown_grace_s,
                                     poll_fallback_s=settings.poll_fallback_s,
                                     health=self.health, book=self.book)

        self.deliveries = deliveries(DELIVERY_QUEUE)
        self.heartbeat = Heartbeat(t.store, t.clock, self.bridge, VERSION)
        self.schema_guard = SchemaGuard(t.store, self.bridge,
                                        warned_at_open=t.schema_status().database)
        self.pushers = Pushers(t.push, self.bridge, grace_s=settings.shutdown_grace_s,
                               refresh_s=settings.poll_fallback_s, health=self.health,
                               book=self.book)
        self.services += [self.book, firing, self.deliveries, self.heartbeat,
                          self.schema_guard, self.pushers]
        self.mailer: Consumer | None = None  # this process's consumer of the email queue
        if settings.smtp_url:
            self.mailer = deliveries(EMAIL_QUEUE)
            self.services.append(self.mailer)
            if self.email_process is not None:
                self.services.append(self.email_process)
        else:
            log.warning("no SMTP relay (--smtp-url or TIDINGS_SMTP_URL): this node sends no "
                        "email; accepted email waits in the %s queue for a node with a relay",
                        EMAIL_QUEUE)
        self.bounces: BounceListener | None = None
        if settings.bounce_listen:
            self.bounces = BounceListener(t.email.returns, self.bridge, settings)
            self.services.append(self.bounces)
        if settings.insecure_no_auth and not settings.loopback_only:
            from tidings.server.exposure import OpenNodeWarning

            self.services.append(OpenNodeWarning(settings.host))
        self.consumer: Consumer | None = None
        if app is not None and serve_consumers and app.handlers:
            self.consumer = Consumer(app, t.queues, self.bridge,
                                     concurrency=settings.concurrency,
                                     grace_s=settings.shutdown_grace_s, health=self.health,
                                     poll_fallback_s=settings.poll_fallback_s, book=self.book)
            self.services.append(self.consumer)
        self._stopped = asyncio.Event()

    async def run(self) -> None:
        tasks = [asyncio.create_task(s.run(), name=type(s).__name__) for s in self.services]
        stopper = asyncio.create_task(self._stopped.wait())
        try:
            done, _ = await asyncio.wait([*tasks, stopper], return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                if task is not stopper and task.exception() is not None:
                    await self._died(task.get_name(), task.exception())
        finally:
            for s in self.services:
                s.stop()
            results = await asyncio.gather(*tasks, return_exceptions=True)
            stopper.cancel()
            for r in results:
                if isinstance(r, BaseException) and r is not self._reported and not \
                        isinstance(r, asyncio.CancelledError | SchemaTooNew):
                    log.error("service stopped with an error: %r", r)
            await self.targets.close()

    async def _died(self, name: str, exc: BaseException | None) -> NoReturn:
        """Stop the node for a service that died: cleanly, naming the newer release, when
        a newer node migrated the database (the schema guard said so, or the service
        failed on a table that changed under it); loudly otherwise."""
        self._reported = exc
        try:
            await self.schema_guard.check()  # (the full story, whoever noticed first)
        except SchemaTooNew as newer:
            if not isinstance(exc, SchemaTooNew):
                log.error("service %s failed (%s) on a database a newer node migrated",
                          name, exc)
            exc = newer
        if isinstance(exc, SchemaTooNew):
            log.error("%s. This node stops.", exc)
            self.too_new = exc
            raise exc
        log.critical("service %s died; stopping the node", name, exc_info=exc)
        raise RuntimeError(f"service {name} died") from exc

    def stop(self) -> None:
        self._stopped.set()

    def http_app(self) -> FastAPI:
        """The HTTP API sharing this node's bridge and group commit; its lifespan runs the
        node, so the engine loops start and stop with the server."""
        from tidings.server.app import create_app

        return create_app(self.t, bridge=self.bridge, coalescer=self.coalescer,
                          lifespan=self.lifespan, node_health=self.health)

    @contextlib.asynccontextmanager
    async def lifespan(self, _app: Any) -> AsyncIterator[None]:
        task = asyncio.create_task(self.run(), name="node")
        task.add_done_callback(self._ended)
        try:
            yield
        finally:
            self.stop()
            with contextlib.suppress(Exception):
                await task

    def _ended(self, task: asyncio.Task[None]) -> None:
        if not self._stopped.is_set() and not task.cancelled() and task.exception():
            if self.too_new is not None and self.shut_down is not None:
                self.shut_down()  # a clean stop: the server exits, then `serve` says why
                return
            log.critical("the node stopped unexpectedly; shutting the server down")
            self.failed = True
            signal.raise_signal(signal.SIGTERM)

    failed = False
    _reported: BaseException | None = None  # the death `_died` logged
    #: Stops the HTTP server gracefully without a signal (uvicorn re-raises a signal it
    #: caught once it has stopped, so the process would end by it, not by its exit code).
    shut_down: Callable[[], None] | None = None
    #: Why the node stopped when a newer node migrated its database (the CLI exits 3).
    too_new: SchemaTooNew | None = None


def with_app_db(settings: Settings, app: Handlers | None) -> Settings:
    """The app's `db` unless `--db` or `TIDINGS_DB` named another database."""
    db = getattr(app, "db", None)
    if db and settings.db == DEFAULT_URL:
        return dataclasses.replace(settings, db=db)
    return settings


def freeze_startup_objects() -> None:
    """What a node imported and built before serving lives as long as the process, and
    its jobs' garbage is young: the collector set for both (runtime/collector.py)."""
    settle_after_startup()


def _setup_logging(level: str) -> None:
    logging.basicConfig(level=level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def serve(settings: Settings, *, create: Create = Create.DATABASE) -> None:
    """`tidings serve`: the HTTP API plus every engine loop, in one process."""
    import uvicorn

    _setup_logging(settings.log_level)
    check_exposure(settings)  # before anything opens: a refused node touches nothing
    check_unsubscribe_links(settings)
    security = uvicorn_security(settings)
    app = load_app(settings.app) if settings.app else None
    settings = with_app_db(settings, app)
    apart, sends = runs_apart(settings), sends_apart(settings)
    t = Tidings(settings=settings, create=create, check=settings.sqlite_check)
    node = Node(t, settings, app=app, dispatcher_process=apart, email_process=sends)
    asgi = node.http_app()
    scheme = "https" if settings.tls_cert else "http"
    log.info("tidings serving %s on %s://%s:%d%s", t.database_url, scheme, settings.host,
             settings.port, f" with app {settings.app}" if settings.app else "")
    for line in describe(settings):
        log.info("security: %s", line)
    # Access lines are logged at info: above it uvicorn would still work out each request's
    # client address and path for a line nobody sees (~1 % of an SQS request's time).
    access_log = settings.log_level in ("info", "debug", "trace")
    # One socket write per response (server/wire.py): the head and body of an SQS answer
    # went out in two. No timer ticking while idle (server/quiet.py).
    from tidings.server.quiet import QuietHttpToolsProtocol, QuietServer

    config = uvicorn.Config(asgi, host=settings.host, port=settings.port,
                            http=QuietHttpToolsProtocol,
                            log_level=settings.log_level, lifespan="on", access_log=access_log,
                            timeout_graceful_shutdown=int(settings.shutdown_grace_s) + 5,
                            **security)
    server = QuietServer(config)
    node.shut_down = lambda: setattr(server, "should_exit", True)
    try:
        freeze_startup_objects()
        server.run()
    finally:
        node.bridge.close()
        t.close()
    if node.too_new is not None:
        raise node.too_new
    if node.failed:
        raise SystemExit(1)


def work(settings: Settings, *, create: Create = Create.DATABASE) -> None:
    """`tidings worker`: consumers (and maintenance) without the HTTP API."""
    _setup_logging(settings.log_level)
    if not settings.app:
        raise ValidationError("app", "tidings worker needs --app module:app")
    app = load_app(settings.app)
    settings = with_app_db(settings, app)
    apart, sends = runs_apart(settings), sends_apart(settings)
    t = Tidings(settings=settings, create=create, check=settings.sqlite_check)
    node = Node(t, settings, app=app, dispatcher_process=apart, email_process=sends)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, node.stop)
        log.info("tidings worker on %s: queues %s", t.database_url,
                 ", ".join(node.consumer.app.queues() if node.consumer else []))
        await node.run()

    try:
        freeze_startup_objects()
        asyncio.run(main())
    finally:
        node.bridge.close()
        t.close()
