"""Data the browser tests find in the console, hostile names and bodies included."""

from __future__ import annotations

from tidings.client import Tidings
from tidings.model.queues import RedrivePolicy

#: Shown as text wherever they appear, never run: the tests check no script ran.
XSS_BODY = "<script>window.pwned = 1</script>"
XSS_IMG = "<img src=x onerror=\"window.pwned = 2\">"


def queues(t: Tidings) -> None:
    """orders and refunds (each → its DLQ after one receive) with three dead letters each,
    emails with 25 messages, purge-me with 5. Tests that change a queue have their own."""
    q = t.queues
    for source in ("orders", "refunds"):
        q.create_queue(f"{source}-dlq")
        q.create_queue(source, redrive_policy=RedrivePolicy(f"{source}-dlq", 1))
        for body in (XSS_BODY, XSS_IMG, '{"order": 3}'):
            q.send(source, body)
        for _ in range(2):  # the second receive moves each message to the DLQ
            for m in q.receive(source, 10, visibility_s=30):
                error = "ValueError: order 3 has no customer" if "3" in m.body else None
                q.change_visibility(source, m.receipt_handle, 0, error=error)
    q.create_queue("emails")
    q.create_queue("purge-me")
    for i in range(25):
        q.send("emails", f'{{"n": {i}}}')
    for i in range(5):
        q.send("purge-me", f'{{"n": {i}}}')


def everything(url: str) -> None:
    with Tidings(url) as t:
        queues(t)
