"""The Python API: `tidings.connect()` gives one object with every service on it."""

from __future__ import annotations

import os
import secrets
from typing import Any

from tidings.clock import Clock, SystemClock
from tidings.engine.queues import QueueService
from tidings.engine.schedules import ScheduleService
from tidings.model.receipts import ReceiptSigner
from tidings.notify.base import Notifier
from tidings.notify.local import LocalNotifier
from tidings.settings import Settings
from tidings.store import open_store
from tidings.store.base import Store


class Tidings:
    """A handle on one tidings database: `t.queues`, `t.schedules`.

    Thread-safe. Close it (or use `with`) to release the database.
    """

    def __init__(self, url: str | None = None, *, clock: Clock | None = None,
                 notifier: Notifier | None = None, settings: Settings | None = None) -> None:
        self.settings = settings or Settings.from_env(db=url)
        self.clock: Clock = clock or SystemClock()
        self.store: Store = open_store(self.settings.db, now=self.clock.now_ms())
        self.notifier: Notifier = notifier or LocalNotifier()
        secret = os.environ.get("TIDINGS_SECRET")
        key = secret.encode() if secret else self.store.get_or_create_secret(
            "receipt-secret", secrets.token_bytes(32))
        self.signer = ReceiptSigner(key)
        self.queues = QueueService(self.store, self.clock, self.notifier, self.signer)
        self.schedules = ScheduleService(
            self.store, self.clock, self.notifier,
            arn_prefix=f"arn:aws:scheduler:{self.settings.region}:{self.settings.account_id}")

    def webhook_secret(self) -> bytes:
        env = os.environ.get("TIDINGS_WEBHOOK_SECRET")
        if env:
            return env.encode()
        return self.store.get_or_create_secret("webhook-secret", secrets.token_bytes(32))

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Tidings:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def connect(url: str | None = None, **kwargs: Any) -> Tidings:
    """Open the database at `url` (default: `TIDINGS_DB` or `sqlite:///tidings.db`)."""
    return Tidings(url, **kwargs)
