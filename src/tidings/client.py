"""The Python API: `tidings.connect()` gives one object with every service on it."""

from __future__ import annotations

import secrets
import threading
from contextlib import AbstractContextManager
from typing import Any
from urllib.parse import urlsplit

from tidings.campaigns.service import CampaignService
from tidings.campaigns.views import CampaignViews
from tidings.clock import Clock, SteppedClock, SystemClock
from tidings.email.service import EmailService
from tidings.limits.service import LimitService
from tidings.model.receipts import ReceiptSigner
from tidings.notify.base import Notifier, wake_horizon_ms
from tidings.notify.local import LocalNotifier
from tidings.ops.audit import AuditService
from tidings.ops.overview import OverviewService
from tidings.push.queues import PushQueues
from tidings.queues.receiving import CROSS_PROCESS_POLL_S
from tidings.runtime.bridge import Bridge
from tidings.schedules.firing_log import FiringLog
from tidings.schedules.search import ScheduleSearch
from tidings.schedules.service import ScheduleService
from tidings.settings import Settings
from tidings.store import Create, open_store, sqlite_path
from tidings.store.base import Store
from tidings.store.migrate import SchemaStatus
from tidings.targets.base import LimitPlace
from tidings.targets.guard import WebhookGuard


class Tidings(AbstractContextManager["Tidings"]):
    """A handle on one tidings database: `t.queues`, `t.schedules`, `t.email`, `t.campaigns`.

    Thread-safe. Close it (or use `with`) to release the database.
    """

    def __init__(self, url: str | None = None, *, clock: Clock | None = None,
                 notifier: Notifier | None = None, settings: Settings | None = None,
                 fallback_poll_s: float = CROSS_PROCESS_POLL_S,
                 create: Create = Create.DATABASE, check: str = "off") -> None:
        """`fallback_poll_s` bounds how long a long poll misses a message no notification
        announced; tests raise it to prove that notifications, not polling, woke them.

        `create` says what opening may do: make a new database in an existing folder and
        migrate an older one (the default), also make missing folders (`Create.FOLDERS`),
        or nothing at all (`Create.NOTHING`: the database must exist, at this release's
        schema). `check` ("quick" or "full") reads a SQLite file whole for damage before
        anything writes to it, and raises `StoreCorrupt` naming it: what a node does at
        start (`TIDINGS_SQLITE_CHECK`), not every short-lived handle (a CLI command, your
        web process)."""
        self.settings = settings or Settings.from_env(db=url)
        self._bridge: Bridge | None = None
        self._bridge_lock = threading.Lock()
        # Schedules due within it wake the dispatchers (notify.base.wake_horizon_ms).
        self.wake_horizon_ms = wake_horizon_ms(self.settings.poll_fallback_s)
        self.clock: Clock = clock or (SteppedClock(self.settings.clock_offset_file)
                                      if self.settings.clock_offset_file else SystemClock())
        self.store: Store = open_store(self.settings.db, now=self.clock.now_ms(),
                                       sqlite_synchronous=self.settings.sqlite_synchronous,
                                       sqlite_cache_mb=self.settings.sqlite_cache_mb,
                                       create=create, check=check,
                                       wake_horizon_ms=self.wake_horizon_ms)
        self.notifier: Notifier = notifier or default_notifier(self.settings.db)
        secret = self.settings.secret
        key = secret.encode() if secret else self.store.get_or_create_secret(
            "receipt-secret", secrets.token_bytes(32))
        self.signer = ReceiptSigner(key)
        guard = WebhookGuard.from_settings(self.settings)
        self.queues = PushQueues(
            self.store, self.clock, self.notifier, self.signer, guard=guard,
            arn_prefix=f"arn:aws:sqs:{self.settings.region}:{self.settings.account_id}",
            fallback_poll_s=fallback_poll_s)
        self.push = self.queues.push
        self.email = EmailService(self.store, self.clock, self.queues, self.settings)
        self.schedules = ScheduleService(
            self.store, self.clock, self.notifier,
            arn_prefix=f"arn:aws:scheduler:{self.settings.region}:{self.settings.account_id}",
            queue_lookup=self.queues.get_queue_cached,
            webhook_guard=guard,
            sender_check=self.email.identities.check_sender,
            wake_horizon_ms=self.wake_horizon_ms)
        relay = self.settings.smtp_url
        relay_host = (urlsplit(relay).hostname or relay) if relay else None
        self.campaigns = CampaignService(self.store, self.clock, self.notifier, self.schedules,
                                         email_rate_per_s=self.settings.smtp_max_rate,
                                         smtp_relay=relay_host)
        self.overview = OverviewService(self.store, self.clock, self.queues)
        self.audit = AuditService(self.store, self.clock)
        self.limits = LimitService(self.store, self.clock, self.notifier)
        self.schedule_search = ScheduleSearch(self.store, self.clock)
        self.campaign_views = CampaignViews(self.store, self.clock, LimitPlace(relay_host))
        self.firing_log = FiringLog(self.store, self.clock,
                                    keep_ms=self.settings.firing_history_s * 1000)

    @property
    def database_url(self) -> str:
        """The database in use, for display: what `open_store` made of the setting."""
        return self.store.url

    def schema_status(self) -> SchemaStatus:
        """The database's migrations against this release's (`tidings migrate`)."""
        return self.store.schema_status()

    @property
    def max_concurrency(self) -> int:
        """How many store calls may usefully run at once (1 on SQLite: one writer)."""
        return max(self.store.max_concurrency, 1)

    @property
    def bridge(self) -> Bridge:
        """How async code on this handle reaches the store (`send_async` of a task): a
        bridge sized by the store, made on first use. A node builds its own for its loops
        and HTTP API (node.py)."""
        with self._bridge_lock:
            if self._bridge is None:
                self._bridge = Bridge.for_store(self.store)
            return self._bridge

    def webhook_secret(self) -> bytes:
        if self.settings.webhook_secret:
            return self.settings.webhook_secret.encode()
        return self.store.get_or_create_secret("webhook-secret", secrets.token_bytes(32))

    def close(self) -> None:
        with self._bridge_lock:
            bridge, self._bridge = self._bridge, None
        if bridge is not None:
            bridge.close()
        close = getattr(self.notifier, "close", None)
        if close is not None:
            close()
        self.store.close()

    def __exit__(self, *exc: object) -> None:
        self.close()


def default_notifier(url: str) -> Notifier:
    """What wakes this process when another one writes: LISTEN/NOTIFY on PostgreSQL, Unix
    datagrams between the processes of one SQLite file (`notify/sqlite.py`); in-process
    only for an in-memory database."""
    if url.startswith(("postgresql:", "postgres:")):
        from tidings.notify.postgres import PostgresNotifier

        return PostgresNotifier(url)
    path = sqlite_path(url) if url.startswith("sqlite:") else ":memory:"
    if path == ":memory:":
        return LocalNotifier()
    from tidings.notify.sqlite import SqliteNotifier

    return SqliteNotifier(path)


def connect(url: str | None = None, **kwargs: Any) -> Tidings:
    """Open the database at `url` (default: `TIDINGS_DB` or `sqlite:///tidings.db`)."""
    return Tidings(url, **kwargs)
