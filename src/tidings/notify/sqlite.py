"""SQLite notifier: wake-ups between the processes that share one database file.

PostgreSQL carries wake-ups with LISTEN/NOTIFY; a SQLite file has nothing of the kind, so
a job sent by a web process (or a CLI, a cron script, the API of another app) was found
by the node only at its next poll, up to a second later. Here every process that waits
(a node's consumers and dispatcher, a long poll) binds a Unix datagram socket in a
directory beside the database file (`<file>-notify/`, or one under the temporary
directory named after the file when that path is too long for a socket); every process
that writes sends the channel it notified (`queue:12`, `schedules`) to each socket there
after its commit, to the processes that wait on that channel. The listener thread turns a
datagram into a local notification. A process says which channels it waits on with one
hard link to its socket per channel (`<socket>=<channel>`, made at its first wait on it):
a send reaches only the processes waiting on its channel (the node's dispatcher process
is not woken by every message sent through the node, only by schedules due soon).

What it costs: a process that never waits binds nothing and starts no thread; a
notification is one `sendto` (~2 µs) per other process waiting on its channel, none where
no other process waits on it, and a `stat` of the folder at most every 5 ms (its listing
is read again only when it changed). Idle, nothing runs: the listener blocks in
`recv`. A datagram lost (a full socket buffer, a listener starting late) costs latency
only, as any lost wake-up: every waiter still looks again after its timeout. A socket
left by a process killed -9 is removed by the first sender that finds nobody reading it.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import logging
import os
import secrets
import socket
import tempfile
import threading
import time
from pathlib import Path

from tidings.notify.local import ListeningNotifier

log = logging.getLogger("tidings.notify")

#: AF_UNIX paths are limited to 108 bytes on Linux (104 on macOS), the terminator included.
MAX_SOCKET_PATH = 100
MAX_DATAGRAM = 256  # a channel name: `queue:<id>` or `schedules`
#: How often a sender looks at the folder for processes that started or stopped
#: waiting: a subscription younger than this can miss a wake-up (latency only).
STAT_EVERY_S = 0.005


def notify_dir(db_path: str) -> Path:
    """Where the listening processes of the file `db_path` keep their sockets."""
    real = os.path.realpath(db_path)
    beside = Path(real + "-notify")
    if len(str(beside)) + 40 <= MAX_SOCKET_PATH:
        return beside
    digest = hashlib.sha256(real.encode()).hexdigest()[:24]
    return Path(tempfile.gettempdir()) / f"tidings-notify-{digest}"


class SqliteNotifier(ListeningNotifier):
    def __init__(self, db_path: str) -> None:
        super().__init__()
        self.directory = notify_dir(db_path)
        self._send = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._send.setblocking(False)
        self._peers: dict[str, list[str]] = {}  # channel -> other processes' links
        self._peers_mtime: int | None = None
        self._peers_read_at = -1.0  # monotonic: when the folder was last looked at
        self._peers_lock = threading.Lock()
        self._own: str | None = None
        self._interest: set[str] = set()  # channels this process has a link for
        self._recv: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._tried = False  # to listen: once, whatever came of it
        self._closed = False

    # waiting ----------------------------------------------------------------------------

    def _ensure_listening(self, channel: str) -> None:
        if not self._tried:
            self._start()
        if channel not in self._interest and self._own is not None:
            with self._start_lock:
                if channel in self._interest or self._closed:
                    return
                try:
                    os.link(self._own, f"{self._own}={channel}")
                except FileExistsError:
                    pass
                except OSError as exc:
                    log.debug("cannot subscribe to %s wake-ups: %s", channel, exc)
                    return
                self._interest.add(channel)

    def _start(self) -> None:
        with self._start_lock:
            if self._tried or self._closed:
                return
            self._tried = True
            try:
                self.directory.mkdir(mode=0o700, exist_ok=True)
                path = str(self.directory / f"{os.getpid()}-{secrets.token_hex(4)}.sock")
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
                sock.bind(path)
            except OSError as exc:
                # A read-only folder, say: this process is woken by its own writes only,
                # and finds other processes' work by its polls, as before.
                log.warning("cannot listen for other processes' wake-ups in %s (%s); "
                            "their work is found by polling", self.directory, exc)
                return
            self._recv, self._own = sock, path
            self._thread = threading.Thread(target=self._listen, name="tidings-wakeups",
                                            daemon=True)
            self._thread.start()

    def _listen(self) -> None:
        sock = self._recv
        assert sock is not None
        while True:
            try:
                data = sock.recv(MAX_DATAGRAM)
            except OSError:
                return  # closed
            if not data:  # close() wakes the thread with an empty datagram
                if self._closed:
                    return
                continue
            super().notify(data.decode("utf-8", "replace"))

    # notifying --------------------------------------------------------------------------

    def notify(self, channel: str) -> None:
        super().notify(channel)
        peers = self._current_peers().get(channel)
        if not peers:
            return
        data = channel.encode()
        for peer in peers:
            try:
                self._send.sendto(data, peer)
            except BlockingIOError:
                pass  # its buffer is full: it has wake-ups to read already
            except (ConnectionRefusedError, FileNotFoundError):
                self._forget(peer)  # nobody reads it: its process is gone
            except OSError as exc:
                if exc.errno not in (errno.ENOBUFS, errno.EAGAIN):
                    log.debug("wake-up to %s not sent: %s", peer, exc)

    def _current_peers(self) -> dict[str, list[str]]:
        now = time.monotonic()
        if now - self._peers_read_at < STAT_EVERY_S:
            return self._peers
        self._peers_read_at = now
        try:
            mtime = os.stat(self.directory).st_mtime_ns
        except OSError:
            self._peers = {}
            return self._peers  # no process listens on this file
        if mtime != self._peers_mtime:
            with self._peers_lock:
                try:
                    names = sorted(os.listdir(self.directory))
                except OSError:
                    names = []
                peers: dict[str, list[str]] = {}
                own = os.path.basename(self._own) if self._own else None
                for name in names:
                    sock, sep, channel = name.partition("=")
                    if sep and sock != own:
                        peers.setdefault(channel, []).append(str(self.directory / name))
                self._peers, self._peers_mtime = peers, mtime
        return self._peers

    def _forget(self, peer: str) -> None:
        """A socket nobody reads (its process was killed): its name and its links go,
        which moves the folder's mtime, so every sender lists it again."""
        sock = os.path.basename(peer).partition("=")[0]
        with contextlib.suppress(OSError):
            for name in os.listdir(self.directory):
                if name == sock or name.startswith(sock + "="):
                    with contextlib.suppress(OSError):
                        os.unlink(self.directory / name)
        with self._peers_lock:
            self._peers = {c: [p for p in ps if os.path.basename(p).partition("=")[0] != sock]
                           for c, ps in self._peers.items()}

    def close(self) -> None:
        with self._start_lock:
            self._closed = True
        if self._own is not None:
            for channel in self._interest:
                with contextlib.suppress(OSError):
                    os.unlink(f"{self._own}={channel}")
            with contextlib.suppress(OSError):
                self._send.sendto(b"", self._own)  # the listener's last datagram
            if self._thread is not None:
                self._thread.join(timeout=2)
            with contextlib.suppress(OSError):
                os.unlink(self._own)
        if self._recv is not None:
            self._recv.close()
        self._send.close()
