"""A backup of a big SQLite file while a node writes it, and the check at a node's start.

    python bench/backup.py [--schedules 1000000] [--messages 1000000] [--before 5]

Fills a database with SQL (bench/console.py's `fill`), drops the file from the OS cache
(as after a reboot: the node's start reads it from disk), starts `tidings serve` on it
and reads how long its `quick_check` took from its log. Then a client sends one message
at a time through the native API and times each send, for `--before` seconds, then while
`tidings backup` runs (its time and MB/s, the `-wal` file's peak size meanwhile), then a
`tidings restore` of that backup into a new file is timed.
Final line: {"db_mb", "start_check_s", "backup_s", "backup_mb_per_s", "restore_s",
"send_p50_ms_before", "send_p99_ms_before", "send_p50_ms_during", "send_p99_ms_during",
"send_max_ms_during", "sends_during", "wal_peak_mb"}.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time

from _common import percentile, report, scratch_dir  # noqa: I001  (first: see _common)
from console import fill  # noqa: E402

from tidings.client import Tidings  # noqa: E402
from tidings.settings import Settings  # noqa: E402


def evict(path: str) -> None:
    """Drop the file's pages from the OS cache (this file only)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tidings(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tidings", *args], capture_output=True,
                          text=True, check=True)


def main() -> None:
    import httpx  # (after _common: see there)

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--schedules", type=int, default=1_000_000)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--before", type=float, default=5.0)
    args = parser.parse_args()
    folder = scratch_dir()
    path = os.path.join(folder, "big.db")
    url = f"sqlite:///{path}"
    print(f"filling {path}", file=sys.stderr)
    with Tidings(settings=Settings(db=url)) as t:
        fill(t, args.schedules, args.messages)
    evict(path)

    port = free_port()
    log_path = os.path.join(folder, "serve.log")
    with open(log_path, "wb") as log:
        node = subprocess.Popen([sys.executable, "-m", "tidings", "serve", "--db", url,
                                 "--port", str(port)], stdout=log, stderr=log)
    base = f"http://127.0.0.1:{port}"
    try:
        while True:
            assert node.poll() is None, open(log_path).read()
            try:
                if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        checked = re.search(r"checked .* in ([\d.]+) s: ok", open(log_path).read())
        assert checked, open(log_path).read()
        httpx.post(f"{base}/v1/queues", json={"name": "bench-backup"}).raise_for_status()

        phase = ["before"]
        waits: dict[str, list[float]] = {"before": [], "during": [], "after": []}
        stop = threading.Event()

        def send() -> None:
            with httpx.Client(base_url=base, timeout=30) as http:
                while not stop.is_set():
                    started = time.perf_counter()
                    http.post("/v1/queues/bench-backup/messages",
                              json={"body": "x" * 200}).raise_for_status()
                    waits[phase[0]].append((time.perf_counter() - started) * 1000)

        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        time.sleep(args.before)
        wal_peak = [0]

        def watch_wal() -> None:
            while phase[0] == "during":
                try:
                    wal_peak[0] = max(wal_peak[0], os.path.getsize(f"{path}-wal"))
                except FileNotFoundError:
                    pass
                time.sleep(0.02)

        phase[0] = "during"
        watcher = threading.Thread(target=watch_wal, daemon=True)
        watcher.start()
        dest = os.path.join(folder, "backup.db")
        done = json.loads(tidings("backup", dest, "--db", url, "--json").stdout)
        phase[0] = "after"
        watcher.join()
        stop.set()
        sender.join(30)
    finally:
        node.terminate()
        node.wait(60)
    started = time.perf_counter()
    tidings("restore", dest, "--db", f"sqlite:///{folder}/restored.db", "--json")
    restore_s = time.perf_counter() - started

    before, during = sorted(waits["before"]), sorted(waits["during"])
    report({
        "db_mb": round(done["bytes"] / 1e6, 1),
        "start_check_s": float(checked.group(1)),
        "backup_s": done["seconds"],
        "backup_mb_per_s": round(done["bytes"] / 1e6 / done["seconds"], 1),
        "restore_s": round(restore_s, 2),
        "send_p50_ms_before": round(percentile(before, 50), 2),
        "send_p99_ms_before": round(percentile(before, 99), 2),
        "send_p50_ms_during": round(percentile(during, 50), 2),
        "send_p99_ms_during": round(percentile(during, 99), 2),
        "send_max_ms_during": round(during[-1], 2) if during else 0.0,
        "sends_during": len(during),
        "wal_peak_mb": round(wal_peak[0] / 1e6, 1),
    })


if __name__ == "__main__":
    main()
