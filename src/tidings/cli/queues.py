"""`tidings queue …`: manage queues and their messages from a shell."""

from __future__ import annotations

import sys
import time
from typing import Annotated, Any

import typer

from tidings.cli import push
from tidings.cli.options import (
    DEFAULT_DB,
    CreateOption,
    DbOption,
    JsonOption,
    TagOption,
    UrlOption,
    creating,
    key_values,
)
from tidings.cli.output import (
    EXIT_USAGE,
    all_pages,
    emit_json,
    errors_handled,
    fail,
    instant_option,
    line,
    report,
    table,
)
from tidings.cli.where import on_node_or_db
from tidings.client import Tidings
from tidings.model.digests import MessageAttributeValue
from tidings.model.queues import MAX_RETENTION_S, RedrivePolicy, check_range
from tidings.remote import RemoteTidings
from tidings.server.native.views import message_json, peeked_json, queue_json, send_json

app = typer.Typer(help="Create, inspect and use queues.", no_args_is_help=True)
app.command("subscribe")(push.subscribe)
app.add_typer(push.app, name="subscription")

Name = Annotated[str, typer.Argument(help="Queue name (FIFO queues end with .fifo).",
                                     show_default=False)]


def _describe(t: Tidings, name: str) -> dict[str, Any]:
    info = t.queues.describe(name)
    return queue_json(info.record, info.counts)


def _print_queue(doc: dict[str, Any], as_json: bool) -> None:
    if as_json:
        emit_json(doc)
        return
    attrs = doc["attributes"]
    rows: list[tuple[str, Any]] = [("name", doc["name"]), ("fifo", doc["fifo"])]
    rows += [(k, _attr_text(k, v)) for k, v in attrs.items() if k != "fifo" and v is not None]
    rows += [("tags", ", ".join(f"{k}={v}" for k, v in doc["tags"].items()) or "-")]
    rows += [(f"messages {k}", v) for k, v in doc.get("counts", {}).items()]
    rows += [("created_at", doc["created_at"]), ("modified_at", doc["modified_at"])]
    table(None, ["attribute", "value"], rows)


def _attr_text(key: str, value: Any) -> Any:
    if key == "redrive_policy":
        return f"{value['dead_letter_queue']} after {value['max_receive_count']} receives"
    if key == "redrive_allow_policy":
        return " ".join([value["permission"], *value["source_queues"]])
    return value


@app.command()
def create(
    name: Name,
    visibility_timeout: Annotated[int | None, typer.Option(
        help="Seconds a received message stays invisible (0-43200; default 30).")] = None,
    delay: Annotated[int | None, typer.Option(
        help="Default delay of new messages in seconds (0-900; default 0).")] = None,
    retention: Annotated[int | None, typer.Option(
        help="Seconds a message is kept (60-1209600; default 4 days).")] = None,
    max_message_size: Annotated[int | None, typer.Option(
        help="Largest message in bytes (1024-1048576).")] = None,
    receive_wait: Annotated[int | None, typer.Option(
        help="Default long-poll wait of a receive in seconds (0-20).")] = None,
    dlq: Annotated[str | None, typer.Option(
        help="Dead-letter queue (must exist); needs --max-receive-count.")] = None,
    max_receive_count: Annotated[int | None, typer.Option(
        help="Receives before a message moves to the dead-letter queue (1-1000).")] = None,
    content_based_dedup: Annotated[bool, typer.Option(
        "--content-based-dedup", help="FIFO: deduplicate by a SHA-256 of the body.")] = False,
    tag: TagOption = None,
    db: DbOption = DEFAULT_DB,
    url: UrlOption = None,
    create_folders: CreateOption = False,
    as_json: JsonOption = False,
) -> None:
    """Create a queue (creating it again with the same settings is fine). The first
    queue may make a new database (see --create)."""
    if (dlq is None) != (max_receive_count is None):
        raise fail("--dlq/--max-receive-count: give both or neither", EXIT_USAGE)
    given = {
        "visibility_timeout_s": visibility_timeout, "delay_s": delay,
        "retention_s": retention, "max_message_bytes": max_message_size,
        "receive_wait_s": receive_wait,
    }
    attrs: dict[str, Any] = {k: v for k, v in given.items() if v is not None}
    if content_based_dedup:
        attrs["content_based_deduplication"] = True

    def on_node(node: RemoteTidings) -> dict[str, Any]:
        policy = None if dlq is None else {"dead_letter_queue": dlq,
                                           "max_receive_count": max_receive_count}
        return node.create_queue(name, tags=key_values(tag, "--tag"), **attrs,
                                 **({"redrive_policy": policy} if policy else {}))

    def on_db(t: Tidings) -> dict[str, Any]:
        policy = None if dlq is None or max_receive_count is None else RedrivePolicy(
            dlq, max_receive_count)
        t.queues.create_queue(name, **attrs, **({"redrive_policy": policy} if policy else {}),
                              tags=key_values(tag, "--tag"))
        return _describe(t, name)

    _print_queue(on_node_or_db(url, db, on_node, on_db, create=creating(create_folders)),
                 as_json)


@app.command("list")
def list_(
    prefix: Annotated[str, typer.Option(help="Only queues whose name starts with this.")] = "",
    all_: Annotated[bool, typer.Option(
        "--all", help="Also tidings' own queues (tidings-deliveries, tidings-email): "
        "read-only, shown for their backlog.")] = False,
    db: DbOption = DEFAULT_DB,
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """List queues with their approximate message counts."""
    docs = on_node_or_db(
        url, db, lambda node: [node.get_queue(q["name"])
                               for q in node.list_queues(prefix, include_internal=all_)],
        lambda t: [queue_json(r, t.queues.describe_record(r).counts) for r in all_pages(
            lambda token: t.queues.list_queues(prefix, next_token=token,
                                               include_internal=all_))])
    if as_json:
        emit_json({"queues": docs})
        return
    table(None, ["name", "visible", "in flight", "delayed", "dead-letter queue"], [
        (d["name"], d["counts"]["visible"], d["counts"]["in_flight"], d["counts"]["delayed"],
         (d["attributes"]["redrive_policy"] or {}).get("dead_letter_queue"))
        for d in docs])


@app.command()
def get(name: Name, db: DbOption = DEFAULT_DB, url: UrlOption = None,
        as_json: JsonOption = False) -> None:
    """Show a queue's settings, tags and approximate message counts."""
    doc = on_node_or_db(url, db, lambda node: node.get_queue(name), lambda t: _describe(t, name))
    _print_queue(doc, as_json)


@app.command()
def delete(name: Name, db: DbOption = DEFAULT_DB, url: UrlOption = None,
           as_json: JsonOption = False) -> None:
    """Delete a queue and every message in it."""
    on_node_or_db(url, db, lambda node: node.delete_queue(name),
                  lambda t: t.queues.delete_queue(name))
    report(as_json, {"deleted": name}, f"deleted queue {name}")


@app.command()
def purge(name: Name, db: DbOption = DEFAULT_DB, url: UrlOption = None,
          as_json: JsonOption = False) -> None:
    """Delete every message of a queue (at most once a minute, as SQS)."""
    n = on_node_or_db(url, db, lambda node: int(node.purge(name).get("purged", 0)),
                      lambda t: t.queues.purge_queue(name))
    report(as_json, {"queue": name, "purged": n}, f"purged {n} message(s) from {name}")


@app.command()
def send(
    name: Name,
    body: Annotated[str, typer.Argument(help="Message body, or - to read it from stdin.",
                                        show_default=False)],
    delay: Annotated[int | None, typer.Option(
        help="Seconds before it can be received (up to the queue's retention).")] = None,
    deliver_at: Annotated[str | None, typer.Option(
        metavar="ISO", help="Receivable from this instant, to the millisecond (e.g. "
        "2026-12-01T09:00:03.250Z); instead of --delay.")] = None,
    group_id: Annotated[str | None, typer.Option(help="Message group (FIFO).")] = None,
    dedup_id: Annotated[str | None, typer.Option(help="Deduplication id (FIFO).")] = None,
    attr: Annotated[list[str] | None, typer.Option(
        help="A String message attribute name=value (repeatable).")] = None,
    db: DbOption = DEFAULT_DB,
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Send one message."""
    text = sys.stdin.read() if body == "-" else body
    at = instant_option("deliver-at", deliver_at)
    pairs = key_values(attr, "--attr")

    def on_node(node: RemoteTidings) -> dict[str, Any]:
        options: dict[str, Any] = {
            "delay_seconds": delay, "deliver_at": at.isoformat() if at else None,
            "group_id": group_id, "deduplication_id": dedup_id,
            "attributes": {k: {"data_type": "String", "string_value": v}
                           for k, v in pairs.items()} or None}
        return node.send(name, text, **{k: v for k, v in options.items() if v is not None})

    def on_db(t: Tidings) -> dict[str, Any]:
        attributes = {k: MessageAttributeValue("String", v) for k, v in pairs.items()}
        return send_json(t.queues.send(name, text, delay_s=delay, attributes=attributes,
                                       group_id=group_id, deduplication_id=dedup_id,
                                       max_delay_s=MAX_RETENTION_S, deliver_at=at))

    doc = on_node_or_db(url, db, on_node, on_db)
    report(as_json, doc, f"sent {doc['message_id']}")


@app.command()
def receive(
    name: Name,
    n: Annotated[int, typer.Option("-n", "--max", help="Up to this many messages (1-10).")] = 1,
    wait: Annotated[int | None, typer.Option(
        help="Long poll: seconds to wait for a message (0-20; default: the queue's).")] = None,
    visibility_timeout: Annotated[int | None, typer.Option(
        help="Seconds the messages stay invisible (default: the queue's).")] = None,
    delete: Annotated[bool, typer.Option(
        "--delete", help="Delete the messages after printing them.")] = False,
    db: DbOption = DEFAULT_DB,
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Receive messages and print them."""
    # --delete deletes after printing, so an interrupted print never loses a message.

    def on_node(node: RemoteTidings) -> None:
        docs = node.receive(name, n, wait_s=wait, visibility_s=visibility_timeout)
        _print_received(docs, as_json)
        for d in docs if delete else ():
            node.delete(name, d["receipt_handle"])

    def on_db(t: Tidings) -> None:
        got = t.queues.receive(name, n, wait_s=wait, visibility_s=visibility_timeout)
        _print_received([message_json(m) for m in got], as_json)
        for m in got if delete else ():
            t.queues.delete(name, m.receipt_handle)

    on_node_or_db(url, db, on_node, on_db)


def _print_received(docs: list[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        emit_json({"messages": docs})
    elif docs:
        table(None, ["message id", "receives", "body", "error"],
              [(d["message_id"], d["receive_count"], d["body"], d["last_error"] or "")
               for d in docs])
    else:
        line("no messages")


@app.command()
def peek(
    name: Name,
    n: Annotated[int, typer.Option("-n", "--max", help="Up to this many (1-1000).")] = 10,
    db: DbOption = DEFAULT_DB,
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show messages without receiving them (no visibility change, no receive counted):
    what a dead-letter queue holds and why each message is there."""
    docs: list[dict[str, Any]] = on_node_or_db(
        url, db, lambda node: node.peek(name, n)["messages"],
        lambda t: [peeked_json(v) for v in t.queues.peek(name, limit=n)[0]])
    if as_json:
        emit_json({"messages": docs})
    elif docs:
        table(None, ["message id", "state", "receives", "body", "error", "from"],
              [(d["message_id"], d["state"], d["receive_count"], d["body"],
                d["last_error"] or "", d["dead_letter_source"] or "") for d in docs])
    else:
        line("no messages")


@app.command()
def redrive(
    dlq: Annotated[str, typer.Argument(help="The dead-letter queue to empty.",
                                       show_default=False)],
    to: Annotated[str | None, typer.Option(
        "--to", help="Queue to move to (default: each message back to its source queue).")]
    = None,
    max_per_second: Annotated[int | None, typer.Option(
        help="Move at most this many messages per second (1-500), printing progress.")]
    = None,
    db: DbOption = DEFAULT_DB,
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Move messages out of a dead-letter queue, in the foreground (on a remote node, a
    rate-limited move is the node's move task, followed until it ends; Ctrl-C cancels it)."""
    if max_per_second is not None:
        with errors_handled():
            check_range("--max-per-second", max_per_second, 1, 500)

    def on_node(node: RemoteTidings) -> int:
        started = node.redrive(dlq, to, max_per_second=max_per_second)
        if max_per_second is None:
            return int(started["moved"])
        return _follow_move_task(node, dlq, str(started["task_handle"]), progress=not as_json)

    def on_db(t: Tidings) -> int:
        if max_per_second is None:
            return t.queues.redrive(dlq, to)
        return _redrive_at_rate(t, dlq, to, max_per_second, progress=not as_json)

    moved = on_node_or_db(url, db, on_node, on_db)
    report(as_json, {"queue": dlq, "destination": to, "moved": moved},
           f"moved {moved} message(s) out of {dlq}")


def _redrive_at_rate(t: Tidings, dlq: str, to: str | None, rate: int, *,
                     progress: bool) -> int:
    """One second's worth per step, then sleep out the rest of the second: the rate holds
    over any window of a second, not just on average."""
    moved = 0
    while True:
        started = time.monotonic()
        n = t.queues.redrive(dlq, to, limit=rate)
        moved += n
        if progress and n:
            line(f"moved {moved} so far")
        if n < rate:
            return moved
        time.sleep(max(0.0, 1.0 - (time.monotonic() - started)))


#: How often a remote move task is looked at: its progress line changes about this often.
MOVE_TASK_POLL_S = 0.5


def _follow_move_task(node: RemoteTidings, dlq: str, handle: str, *, progress: bool) -> int:
    """Wait for the node's move task to end, printing its progress; interrupted (Ctrl-C),
    it is cancelled, as the local foreground move stops with the command."""
    shown = 0
    try:
        while True:
            task = next((x for x in node.move_tasks(dlq) if x["task_handle"] == handle), None)
            if task is None:
                raise fail(f"the move task {handle} of {dlq} is gone from the node", 1)
            if progress and task["moved"] != shown:
                shown = task["moved"]
                line(f"moved {shown} so far")
            if task["status"] == "COMPLETED":
                return int(task["moved"])
            if task["status"] != "RUNNING":
                raise fail(f"the move task of {dlq} ended {task['status']} after moving "
                           f"{task['moved']}: {task['failure_reason'] or 'no reason given'}", 1)
            time.sleep(MOVE_TASK_POLL_S)
    except KeyboardInterrupt:
        node.cancel_move_task(handle)
        raise
