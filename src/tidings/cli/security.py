"""`tidings token new`, `tidings audit` and `tidings api`: credentials, the audit log, and
any native API call to a remote node (`--url`/`TIDINGS_URL` with `TIDINGS_TOKEN`)."""

from __future__ import annotations

import json
from typing import Annotated, Any, TypeVar

import typer

from tidings.cli.options import DEFAULT_DB, DbOption, JsonOption, UrlOption
from tidings.cli.output import EXIT_USAGE, emit_json, errors_handled, fail, table
from tidings.cli.where import on_node_or_db, remote
from tidings.clock import iso
from tidings.server.access import Scope, hash_token, new_token

T = TypeVar("T")

token_app = typer.Typer(help="Make API tokens.", no_args_is_help=True)


@token_app.command("new")
def new(
    scope: Annotated[str, typer.Option(help="read, operate or admin.")] = "admin",
    name: Annotated[str | None, typer.Option(
        help="A name for the audit log (letters, digits, - and _).")] = None,
    bare: Annotated[bool, typer.Option("--bare", help="Print the token only.")] = False,
) -> None:
    """Make a random token: give the token to the client, the line to the node's
    TIDINGS_API_TOKENS_FILE (which then holds only its hash)."""
    with errors_handled():
        checked = Scope.parse(scope, "--scope")
    if name is not None and (not name or not all(c.isalnum() or c in "-_" for c in name)):
        raise fail("--name: letters, digits, - and _ only", EXIT_USAGE)
    token = new_token()
    if bare:
        print(token)
        return
    file_line = " ".join([checked.label, hash_token(token), *([name] if name else [])])
    print(f"token:            {token}")
    print(f"tokens-file line: {file_line}")
    print(f"environment:      TIDINGS_API_TOKENS={checked.label}:{token}")


def audit(
    db: DbOption = DEFAULT_DB,
    url: UrlOption = None,
    actor: Annotated[str | None, typer.Option(help="Only this token or key id.")] = None,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="Entries (newest first).")]
    = 50,
    as_json: JsonOption = False,
) -> None:
    """Show the audit log: destructive and administrative actions, who and when (of the
    database, or of a remote node with --url / TIDINGS_URL)."""
    entries = on_node_or_db(
        url, db, lambda node: node.audit(actor=actor, limit=limit),
        lambda t: [{"seq": e.seq, "at": iso(e.at), "actor": e.actor, "face": e.face,
                    "action": e.action, "resource": e.resource}
                   for e in t.audit.list(actor=actor, limit=limit)])
    if as_json:
        emit_json({"entries": entries})
        return
    table(None, ["at", "actor", "face", "action", "resource"],
          [(e["at"], e["actor"], e["face"], e["action"], e["resource"]) for e in entries])


def api(
    method: Annotated[str, typer.Argument(help="GET, POST, PUT, PATCH or DELETE.")],
    path: Annotated[str, typer.Argument(help="A native API path, e.g. /v1/queues.")],
    url: UrlOption = None,
    data: Annotated[str | None, typer.Option(
        "--data", "-d", help="JSON request body.")] = None,
) -> None:
    """Call the native API of a remote node with TIDINGS_TOKEN; prints the JSON answer."""
    body: Any = None
    if data is not None:
        try:
            body = json.loads(data)
        except ValueError:
            raise fail("--data: must be a JSON document", EXIT_USAGE) from None
    if method.upper() not in ("GET", "POST", "PUT", "PATCH", "DELETE"):
        raise fail("METHOD: must be GET, POST, PUT, PATCH or DELETE", EXIT_USAGE)
    with remote(url) as node:
        answer = node.request(method.upper(), "/" + path.lstrip("/"),
                              **({} if body is None else {"json": body}))
    if answer is not None:
        emit_json(answer)
