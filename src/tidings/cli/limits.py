"""`tidings limit …`: see and change downstream limits live. With `--url` (or
TIDINGS_URL) the command goes to that node's native API; otherwise to the database. Every
node obeys a change within a second."""

from __future__ import annotations

import re
import time
from typing import Annotated, Any
from urllib.parse import quote

import typer

from tidings.cli.options import DEFAULT_DB, DbOption, JsonOption, UrlOption
from tidings.cli.output import EXIT_USAGE, emit_json, fail, instant_option, report, table
from tidings.cli.where import on_node_or_db
from tidings.clock import iso, to_ms

app = typer.Typer(help="See and change downstream limits (rates, concurrency, pauses).",
                  no_args_is_help=True)

Key = Annotated[str, typer.Argument(
    help="A limit's name (every key under it) or one key, name:value (e.g. export:c-42, "
    "webhook:api.example.com).", show_default=False)]
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h|d)$")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}


def _path(key: str) -> str:
    return f"/v1/limits/{quote(key, safe=':@')}"


@app.command("list")
def list_(db: DbOption = DEFAULT_DB, url: UrlOption = None,
          as_json: JsonOption = False) -> None:
    """Every limit: its setting, slots in use, starts within its window, pause."""
    doc = on_node_or_db(url, db, lambda node: node.request("GET", "/v1/limits"),
                        lambda t: {"limits": [v.as_json() for v in t.limits.list()]})
    if as_json:
        emit_json(doc)
        return
    table(None, ["key", "rate", "burst", "concurrency", "in use", "recent starts",
                 "paused until", "from"],
          [(d["key"], d["rate"], d["burst"], d["concurrency"], d["in_use"],
            d["recent_starts"], d["paused_until"], d["source"]) for d in doc["limits"]])


@app.command("set")
def set_(key: Key,
         rate: Annotated[str | None, typer.Option(
             help="N per period, a sliding window: 200/s, 1000/min, 20/h, 5/10s.")] = None,
         concurrency: Annotated[int | None, typer.Option(
             help="At most this many jobs at once.", min=1)] = None,
         burst: Annotated[int | None, typer.Option(
             help="With --rate: a bucket of this size refilled at the rate.", min=1)] = None,
         db: DbOption = DEFAULT_DB, url: UrlOption = None, as_json: JsonOption = False,
         ) -> None:
    """Set a limit (replacing its rate, concurrency and burst)."""
    body = {"rate": rate, "concurrency": concurrency, "burst": burst}
    doc = on_node_or_db(url, db, lambda node: node.request("PUT", _path(key), json=body),
                        lambda t: t.limits.set(key, rate=rate, concurrency=concurrency,
                                               burst=burst).as_json())
    report(as_json, doc, f"limit {key}: rate {doc['rate'] or '-'}, concurrency "
           f"{doc['concurrency'] or '-'}" + (f", burst {doc['burst']}" if doc["burst"] else ""))


@app.command()
def delete(key: Key, db: DbOption = DEFAULT_DB, url: UrlOption = None,
           as_json: JsonOption = False) -> None:
    """Delete a limit's setting (an app declaring it writes it again at its start)."""
    on_node_or_db(url, db, lambda node: node.request("DELETE", _path(key)),
                  lambda t: t.limits.delete(key))
    report(as_json, {"key": key, "deleted": True}, f"limit {key} deleted")


def _until(text: str) -> int:
    """`--until`: an ISO 8601 instant with its offset, or a duration from now (30s, 5m,
    2h, 1d)."""
    match = _DURATION.match(text.strip())
    if match:
        return int((time.time() + float(match.group(1)) * _UNITS[match.group(2)]) * 1000)
    when = instant_option("until", text)
    assert when is not None
    return to_ms(when)


@app.command()
def pause(key: Key,
          until: Annotated[str, typer.Option(
              help="An ISO 8601 instant with its offset, or a duration: 30s, 5m, 2h, 1d.",
              show_default=False)],
          db: DbOption = DEFAULT_DB, url: UrlOption = None, as_json: JsonOption = False,
          ) -> None:
    """Hold back every job of the key (of a name: of all its keys) until then."""
    at = _until(until)
    if at <= time.time() * 1000:
        raise fail("--until: must be in the future", EXIT_USAGE)

    def on_db(t: Any) -> dict[str, Any]:
        return {"key": key, "paused_until": iso(t.limits.pause(key, at))}

    doc = on_node_or_db(url, db, lambda node: node.request(
        "POST", f"{_path(key)}/pause", json={"until": iso(at)}), on_db)
    report(as_json, doc, f"limit {key} paused until {doc['paused_until']}")


@app.command()
def resume(key: Key, db: DbOption = DEFAULT_DB, url: UrlOption = None,
           as_json: JsonOption = False) -> None:
    """End a pause now."""
    on_node_or_db(url, db, lambda node: node.request("POST", f"{_path(key)}/resume"),
                  lambda t: t.limits.resume(key))
    report(as_json, {"key": key, "resumed": True}, f"limit {key} resumed")
