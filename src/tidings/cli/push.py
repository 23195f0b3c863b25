"""`tidings queue subscribe …` and `tidings queue subscription …`: push subscriptions
from a shell, on a database or (with --url / TIDINGS_URL) on a node's native API."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import typer

from tidings.cli.options import DEFAULT_DB, DbOption, JsonOption, UrlOption
from tidings.cli.output import emit_json, report, table
from tidings.cli.where import on_node_or_db
from tidings.client import Tidings
from tidings.model.push import DEFAULT_CONCURRENCY
from tidings.push.trial import send_test_push
from tidings.remote import RemoteTidings

app = typer.Typer(help="A queue's push subscription: list, show, update, pause, resume, "
                  "delete, rotate its secret, test it.", no_args_is_help=True)

Queue = Annotated[str, typer.Argument(help="The queue.", show_default=False)]
Endpoint = Annotated[str | None, typer.Option(help="The http(s) URL messages are POSTed to.")]
Concurrency = Annotated[int | None, typer.Option(
    help="Pushes at once, every node together (1-1000).")]
Rate = Annotated[str | None, typer.Option(
    help="At most this many pushes: 100/s, 600/m, 3600/h (`none`: no limit).")]
Timeout = Annotated[str | None, typer.Option(help="Per push: 30s, 500ms, 2m.")]


def _path(queue: str, action: str = "") -> str:
    return f"/v1/queues/{queue}/subscription{action}"


def _show(doc: dict[str, Any], as_json: bool) -> None:
    if as_json:
        emit_json(doc)
        return
    rows = [(k, "-" if v is None else v) for k, v in doc.items() if k != "secret"]
    table(None, ["subscription", "value"], rows)
    if doc.get("secret"):
        print(f"signing secret (shown once; keep it): {doc['secret']}")


def subscribe(
    queue: Queue,
    endpoint: Annotated[str, typer.Option(help="The http(s) URL messages are POSTed to.")],
    concurrency: Annotated[int, typer.Option(
        help="Pushes at once, every node together (1-1000).")] = DEFAULT_CONCURRENCY,
    rate: Rate = None,
    timeout: Annotated[str, typer.Option(help="Per push: 30s, 500ms, 2m.")] = "30s",
    paused: Annotated[bool, typer.Option(help="Create it paused.")] = False,
    db: DbOption = DEFAULT_DB, url: UrlOption = None, as_json: JsonOption = False,
) -> None:
    """Push the queue's messages to an HTTP endpoint (signed as Standard Webhooks sign);
    the signing secret is shown once."""
    options: dict[str, Any] = {"concurrency": concurrency, "rate": rate, "timeout": timeout,
               "paused": paused}
    doc = on_node_or_db(
        url, db, lambda node: node.request("POST", _path(queue),
                                           json={"endpoint": endpoint, **options}),
        lambda t: t.push.subscribe(queue, endpoint, **options).to_json(secret=True))
    _show(doc, as_json)


@app.command("list")
def list_(db: DbOption = DEFAULT_DB, url: UrlOption = None,
          as_json: JsonOption = False) -> None:
    """Every push subscription."""
    docs = on_node_or_db(url, db, lambda node: node.request("GET", "/v1/subscriptions")[
        "subscriptions"], lambda t: [v.to_json() for v in t.push.subscriptions()])
    if as_json:
        emit_json({"subscriptions": docs})
        return
    table(None, ["queue", "endpoint", "state", "concurrency", "rate", "timeout ms"], [
        (d["queue"], d["endpoint"], d["state"], d["concurrency"], d["rate"] or "-",
         d["timeout_ms"]) for d in docs])


@app.command()
def get(queue: Queue, db: DbOption = DEFAULT_DB, url: UrlOption = None,
        as_json: JsonOption = False) -> None:
    """Show a queue's push subscription (never its secret)."""
    _show(on_node_or_db(url, db, lambda node: node.request("GET", _path(queue)),
                        lambda t: t.push.get(queue).to_json()), as_json)


@app.command()
def update(queue: Queue, endpoint: Endpoint = None, concurrency: Concurrency = None,
           rate: Rate = None, timeout: Timeout = None, db: DbOption = DEFAULT_DB,
           url: UrlOption = None, as_json: JsonOption = False) -> None:
    """Change the endpoint, concurrency, rate or timeout."""
    body = {k: v for k, v in {"endpoint": endpoint, "concurrency": concurrency, "rate": rate,
                              "timeout": timeout}.items() if v is not None}

    def on_db(t: Tidings) -> dict[str, Any]:
        clear = rate == "none"
        return t.push.update(queue, endpoint=endpoint, concurrency=concurrency,
                             rate=None if clear else rate, timeout=timeout,
                             clear_rate=clear).to_json()

    _show(on_node_or_db(url, db, lambda node: node.request("PATCH", _path(queue), json=body),
                        on_db), as_json)


@app.command()
def pause(queue: Queue, db: DbOption = DEFAULT_DB, url: UrlOption = None,
          as_json: JsonOption = False) -> None:
    """Stop pushing (messages wait in the queue)."""
    _show(on_node_or_db(url, db, lambda node: node.request("POST", _path(queue, "/pause")),
                        lambda t: t.push.pause(queue).to_json()), as_json)


@app.command()
def resume(queue: Queue, db: DbOption = DEFAULT_DB, url: UrlOption = None,
           as_json: JsonOption = False) -> None:
    """Push again (also lifts an endpoint's Retry-After hold)."""
    _show(on_node_or_db(url, db, lambda node: node.request("POST", _path(queue, "/resume")),
                        lambda t: t.push.resume(queue).to_json()), as_json)


@app.command()
def delete(queue: Queue, db: DbOption = DEFAULT_DB, url: UrlOption = None,
           as_json: JsonOption = False) -> None:
    """Delete the subscription (the queue and its messages stay)."""
    on_node_or_db(url, db, lambda node: node.request("DELETE", _path(queue)),
                  lambda t: t.push.delete(queue))
    report(as_json, {"deleted": queue}, f"deleted the push subscription of {queue}")


@app.command("rotate-secret")
def rotate_secret(
    queue: Queue,
    grace: Annotated[float | None, typer.Option(
        help="Seconds the old secret still signs beside the new one (default 86400).")] = None,
    db: DbOption = DEFAULT_DB, url: UrlOption = None, as_json: JsonOption = False,
) -> None:
    """A new signing secret, shown once; the old one keeps signing for the grace period."""
    _show(on_node_or_db(
        url, db, lambda node: node.request("POST", _path(queue, "/rotate-secret"),
                                           json={"grace_s": grace}),
        lambda t: t.push.rotate_secret(queue, grace_s=grace).to_json(secret=True)), as_json)


@app.command()
def failures(queue: Queue, limit: Annotated[int, typer.Option(help="At most (1-50).")] = 20,
             db: DbOption = DEFAULT_DB, url: UrlOption = None,
             as_json: JsonOption = False) -> None:
    """The last failed pushes, the most recent first."""
    docs = on_node_or_db(
        url, db, lambda node: node.request("GET", _path(queue, "/failures"),
                                           params={"limit": limit})["failures"],
        lambda t: [{"at": f.at, "message_id": f.message_id, "status": f.status,
                    "error": f.error} for f in t.push.failures(queue, limit)])
    if as_json:
        emit_json({"failures": docs})
        return
    table(None, ["at", "message", "status", "error"], [
        (d["at"], d["message_id"], d["status"] or "-", d["error"][:120]) for d in docs])


@app.command()
def test(queue: Queue, db: DbOption = DEFAULT_DB, url: UrlOption = None,
         as_json: JsonOption = False) -> None:
    """POST a made-up, signed message to the endpoint once and show its answer."""

    def on_node(node: RemoteTidings) -> dict[str, Any]:
        return dict(node.request("POST", _path(queue, "/test")))

    def on_db(t: Tidings) -> dict[str, Any]:
        answer = asyncio.run(send_test_push(t.push, queue))
        return {"ok": answer.ok, "status": answer.status, "error": answer.error}

    doc = on_node_or_db(url, db, on_node, on_db)
    report(as_json, doc, f"{'ok' if doc['ok'] else 'failed'}: {doc['status'] or '-'} "
           f"{doc['error']}".rstrip())
