"""A node's limit book reads the limits when a change wakes it, from another process too
(a CLI, a web process): its own reads are a minute away here, so what it sees comes from
the wake-up (the store's NOTIFY on PostgreSQL, the file's wake-up sockets on SQLite).
Idle with no limit, it reads only every TIDINGS_POLL_FALLBACK_S."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from push_receiver import wait_until

from tidings.client import Tidings
from tidings.clock import FrozenClock
from tidings.limits.book import REFRESH_S, LimitBook
from tidings.runtime.bridge import Bridge
from tidings.settings import Settings


@contextmanager
def running_book(t: Tidings, wait_s: float = 60.0) -> Iterator[LimitBook]:
    """The node's limit book over `t`, on its own event loop in a thread, reading on its
    own only every `wait_s`."""
    bridge = Bridge.for_store(t.store)
    book = LimitBook(t.store, t.clock, bridge, t.notifier, fallback_s=wait_s, refresh_s=wait_s)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=lambda: loop.run_until_complete(book.run()),
                              daemon=True, name="book")
    thread.start()
    try:
        wait_until(lambda: book.reads >= 1, timeout_s=10, what="the first read")
        yield book
    finally:
        loop.call_soon_threadsafe(book.stop)
        thread.join(30)
        loop.close()
        bridge.close()


def other_process(db_url: str, code: str) -> None:
    subprocess.run([sys.executable, "-c",
                    "import sys, time; from tidings.client import Tidings\n"
                    "from tidings.settings import Settings\n"
                    "with Tidings(settings=Settings(db=sys.argv[1])) as t:\n    " + code,
                    db_url], check=True, timeout=60)


def test_a_change_from_another_process_reaches_the_book_at_once(db_url: str) -> None:
    with Tidings(settings=Settings(db=db_url)) as t, running_book(t) as book:
        def sees(check: Callable[[LimitBook], bool], what: str) -> None:
            wait_until(lambda: check(book), timeout_s=10, what=what)

        other_process(db_url, "t.limits.set('partner', rate='5/s', concurrency=2)")
        sees(lambda b: "partner" in b.settings, "the new limit")
        assert book.rule("partner", "partner") is not None
        other_process(db_url, "t.limits.set('partner', concurrency=7)")
        sees(lambda b: b.settings["partner"].concurrency == 7, "the changed limit")
        other_process(db_url, "t.limits.pause('tenant:a', int(time.time() * 1000) + 600_000)")
        sees(lambda b: "tenant:a" in b.pauses, "the pause")
        # a key no setting limits is asked about only while it is paused
        assert book.rule("tenant:a", "tenant") is not None
        other_process(db_url, "t.limits.resume('tenant:a')")
        sees(lambda b: "tenant:a" not in b.pauses, "the resume")
        assert book.rule("tenant:a", "tenant") is None
        other_process(db_url, "t.limits.delete('partner')")
        sees(lambda b: not b.settings, "the deletion")


def test_a_pushback_written_by_a_store_call_wakes_the_book(db_url: str) -> None:
    """The pause a node's consumer writes when a handler raises RetryAfter (on PostgreSQL
    the store's own NOTIFY carries it, on SQLite the consumer's notifier)."""
    with Tidings(settings=Settings(db=db_url)) as t, running_book(t) as book:
        other_process(db_url, "t.store.pause_limit('webhook:example.org', "
                      "int(time.time() * 1000) + 600_000, extend=True); "
                      "from tidings.notify.base import LIMITS_CHANNEL; "
                      "t.notifier.notify(LIMITS_CHANNEL)")
        wait_until(lambda: "webhook:example.org" in book.pauses, timeout_s=10,
                   what="the pushback")


def test_the_book_reads_often_only_while_limits_exist(t: Tidings, clock: FrozenClock) -> None:
    bridge = Bridge.for_store(t.store)
    try:
        book = LimitBook(t.store, t.clock, bridge, t.notifier, fallback_s=5.0)
        book.refresh()
        assert book.next_read_in() == 5.0  # idle, no limit: the node's fallback poll
        t.limits.pause("k", clock.now_ms() + 1000)
        book.refresh()
        assert book.next_read_in() == REFRESH_S
        clock.advance(1000)  # the pause ran out: idle again without a read
        assert book.next_read_in() == 5.0
        t.limits.set("k", rate="1/s")
        book.refresh()
        assert book.next_read_in() == REFRESH_S < 1.0  # a lost wake-up: within a second
    finally:
        bridge.close()
