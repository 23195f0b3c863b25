"""`tidings schedule …` and `tidings schedule-group …`: manage schedules from a shell.

Same conventions as `tidings queue`: `--db` or `--url`, `--json`, exit codes 0/1/2. The JSON printed
is the native API's (server/native/schedule_views.py), so scripts can use either.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import typer

from tidings.cli.options import (
    DEFAULT_DB,
    CreateOption,
    DbOption,
    JsonOption,
    TagOption,
    UrlOption,
    creating,
    key_values,
    without_create,
)
from tidings.cli.output import all_pages, emit_json, errors_handled, line, report, table
from tidings.cli.where import node_url, on_node_or_db, remote
from tidings.client import Tidings
from tidings.clock import SystemClock
from tidings.errors import ValidationError
from tidings.model.schedules import DEFAULT_GROUP, Schedule, ScheduleSpec, ScheduleState, Target
from tidings.remote import RemoteTidings
from tidings.server.native.schedule_views import (
    group_json,
    make_spec,
    make_target,
    occurrences_json,
    parse_instant,
    schedule_json,
    spec_json,
)
from tidings.store import Create

app = typer.Typer(help="Create, inspect and preview schedules.", no_args_is_help=True)
groups_app = typer.Typer(help="Create, list and delete schedule groups.", no_args_is_help=True)

Name = Annotated[str, typer.Argument(help="Schedule name (unique in its group).",
                                     show_default=False)]
GroupOpt = Annotated[str, typer.Option("--group", "-g", help="Schedule group.")]
Expression = Annotated[str, typer.Option(
    "--expression", "-e", show_default=False,
    help="at(2030-01-01T09:00:00), rate(5 minutes) or cron(0 9 ? * MON-FRI *).")]
Tz = Annotated[str, typer.Option("--tz", help="IANA zone the expression is read in.")]
Start = Annotated[str | None, typer.Option(
    "--start", show_default=False, help="ISO 8601 with a UTC offset: no occurrence before it.")]
End = Annotated[str | None, typer.Option(
    "--end", show_default=False, help="ISO 8601 with a UTC offset: no occurrence after it.")]
FlexWindow = Annotated[int | None, typer.Option(
    "--flexible-window", metavar="MIN", show_default=False,
    help="Fire within this many minutes after each occurrence (1-1440); default: on time.")]
Disabled = Annotated[bool, typer.Option(
    "--disabled", help="The schedule keeps its settings but does not fire.")]
DeleteAfter = Annotated[bool, typer.Option(
    "--delete-after-completion", help="Delete the schedule after its last occurrence.")]
Description = Annotated[str | None, typer.Option(show_default=False,
                                                 help="Up to 512 characters.")]
QueueTarget = Annotated[str | None, typer.Option(
    "--queue", show_default=False, help="Target: send each occurrence to this queue.")]
WebhookTarget = Annotated[str | None, typer.Option(
    "--webhook", metavar="URL", show_default=False, help="Target: POST each occurrence here.")]
FunctionTarget = Annotated[str | None, typer.Option(
    "--function", metavar="NAME", show_default=False,
    help="Target: call this function registered on the node's app.")]
Input = Annotated[str | None, typer.Option(
    "--input", metavar="JSON|-", show_default=False,
    help="Payload sent to the target as written (- reads stdin); default: an event document.")]
GroupId = Annotated[str | None, typer.Option(
    "--group-id", show_default=False, help="Message group id (required for a FIFO queue).")]
MaxRetries = Annotated[int | None, typer.Option(
    "--max-retries", show_default=False, help="Delivery retries (0-185; default 185).")]
MaxAge = Annotated[int | None, typer.Option(
    "--max-event-age", metavar="S", show_default=False,
    help="Give up on an occurrence this many seconds late (60-86400; default 86400).")]
Dlq = Annotated[str | None, typer.Option(
    "--dlq", metavar="QUEUE", show_default=False,
    help="Standard queue receiving occurrences whose delivery failed for good.")]


def _target(queue: str | None, webhook: str | None, function: str | None, input_: str | None,
            group_id: str | None, max_retries: int | None, max_age: int | None,
            dlq: str | None) -> Target:
    chosen = [(kind, dest) for kind, dest in
              (("queue", queue), ("webhook", webhook), ("function", function)) if dest]
    if len(chosen) != 1:
        raise ValidationError("--queue/--webhook/--function", "give exactly one target")
    kind, destination = chosen[0]
    text = sys.stdin.read() if input_ == "-" else input_
    return make_target(kind, destination, input=text, message_group_id=group_id,
                       max_retries=max_retries, max_event_age_s=max_age,
                       dead_letter_queue=dlq)


def _spec(name: str, group: str, expression: str, tz: str, start: str | None,
          end: str | None, flex: int | None, disabled: bool, delete_after: bool,
          description: str | None, target: Target) -> ScheduleSpec:
    return make_spec(name, group, expression, target, timezone=tz, start=start, end=end,
                     state="DISABLED" if disabled else "ENABLED",
                     flexible_window_minutes=flex,
                     action_after_completion="DELETE" if delete_after else "NONE",
                     description=description, start_field="--start", end_field="--end")


def _print_schedule(doc: dict[str, Any], as_json: bool) -> None:
    if as_json:
        emit_json(doc)
        return
    target = doc["target"]
    retry = target["retry_policy"]
    rows: list[tuple[str, Any]] = [
        ("name", doc["name"]), ("group", doc["group"]), ("arn", doc["arn"]),
        ("state", doc["state"]), ("expression", doc["expression"]),
        ("timezone", doc["timezone"]), ("start", doc["start"] or "-"),
        ("end", doc["end"] or "-"),
        ("flexible window", f"{doc['flexible_window_minutes']} min"
         if doc["flexible_window_minutes"] else "off"),
        ("after completion", doc["action_after_completion"]),
        ("description", doc["description"] or "-"),
        ("target", f"{target['kind']} {target['destination']}"),
        ("input", target["input"] or "-"),
        ("retries", f"{retry['maximum_retry_attempts']} within "
         f"{retry['maximum_event_age_s']} s"),
        ("dead-letter queue", target["dead_letter_queue"] or "-"),
        ("next fire (UTC)", doc["next_fire_at"] or "-"),
        ("due at (UTC)", doc["due_at"] or "-"),
        ("last fired", doc["last_fired_at"] or "-"),
        ("created", doc["created_at"]), ("modified", doc["modified_at"]),
    ]
    table(None, ["attribute", "value"], rows)


def _saving(how: str, doc: str) -> Callable[..., None]:
    """`create` and `update` take the same options (AWS UpdateSchedule is a full replace);
    `update` changes what exists, so it has no `--create`."""
    def command(
        name: Name, expression: Expression, tz: Tz = "UTC", group: GroupOpt = DEFAULT_GROUP,
        start: Start = None, end: End = None, flexible_window: FlexWindow = None,
        disabled: Disabled = False, delete_after_completion: DeleteAfter = False,
        description: Description = None, queue: QueueTarget = None,
        webhook: WebhookTarget = None, function: FunctionTarget = None, input_: Input = None,
        group_id: GroupId = None, max_retries: MaxRetries = None,
        max_event_age: MaxAge = None, dlq: Dlq = None,
        db: DbOption = DEFAULT_DB, url: UrlOption = None, create_folders: CreateOption = False,
        as_json: JsonOption = False,
    ) -> None:
        opening = Create.NOTHING if how == "update" else creating(create_folders)
        _save(db, url, opening, as_json, how, lambda: _spec(
            name, group, expression, tz, start, end, flexible_window, disabled,
            delete_after_completion, description,
            _target(queue, webhook, function, input_, group_id, max_retries, max_event_age,
                    dlq)))
    command.__doc__ = doc
    return without_create(command) if how == "update" else command


app.command("create")(_saving(
    "create", "Create a schedule with one target (--queue, --webhook or --function)."))
app.command("apply")(_saving(
    "apply", """Create the schedule, or replace it if it exists (the same options as create):
    what a setup script re-run wants. A schedule already stored exactly so is left as it
    is, its next occurrence not recomputed."""))
app.command("update")(_saving(
    "update", """Replace a schedule's settings: a FULL replace, as AWS UpdateSchedule. Options
    you leave out take their defaults, not their old values (give the target and input again).
    The next occurrence is computed afresh from now."""))


def _save(db: str | None, url: str | None, opening: Create, as_json: bool, how: str,
          make: Callable[[], ScheduleSpec]) -> None:
    """Create or (fully) replace, then print the schedule as stored. The spec is built
    (and checked) here, before anything is sent or written: bad input is exit code 2
    with the field named, the same on a node and on a database."""
    def on_node(node: RemoteTidings) -> dict[str, Any]:
        spec = make()
        fields = spec_json(spec)
        if how == "create":
            return node.create_schedule({"name": spec.name, "group": spec.group, **fields})
        if how == "update":
            return node.update_schedule(spec.group, spec.name, fields)
        return node.apply_schedule(spec.group, spec.name, fields)

    def on_db(t: Tidings) -> dict[str, Any]:
        spec = make()
        save = {"create": t.schedules.create, "update": t.schedules.update,
                "apply": t.schedules.put}[how]
        return schedule_json(save(spec), t.schedules.schedule_arn(spec.group, spec.name))

    _print_schedule(on_node_or_db(url, db, on_node, on_db, create=opening), as_json)


def _arn_json(t: Tidings, schedule: Schedule) -> dict[str, Any]:
    return schedule_json(schedule, t.schedules.schedule_arn(schedule.group, schedule.name))


@app.command()
def get(name: Name, group: GroupOpt = DEFAULT_GROUP, db: DbOption = DEFAULT_DB,
        url: UrlOption = None, as_json: JsonOption = False) -> None:
    """Show a schedule and its next occurrence."""
    _print_schedule(on_node_or_db(url, db, lambda node: node.get_schedule(group, name),
                                  lambda t: _arn_json(t, t.schedules.get(name, group))),
                    as_json)


@app.command()
def delete(name: Name, group: GroupOpt = DEFAULT_GROUP, db: DbOption = DEFAULT_DB,
           url: UrlOption = None, as_json: JsonOption = False) -> None:
    """Delete a schedule."""
    on_node_or_db(url, db, lambda node: node.delete_schedule(group, name),
                  lambda t: t.schedules.delete(name, group))
    report(as_json, {"deleted": name, "group": group}, f"deleted schedule {group}/{name}")


def _set_state(name: str, group: str, state: ScheduleState, db: str | None, url: str | None,
               as_json: bool) -> None:
    doc = on_node_or_db(
        url, db, lambda node: node.set_schedule_state(group, name,
                                                      state is ScheduleState.ENABLED),
        lambda t: _arn_json(t, t.schedules.set_state(name, state, group)))
    report(as_json, doc, f"{group}/{name} is {doc['state']}; next fire: {doc['due_at'] or '-'}")


@app.command()
def enable(name: Name, group: GroupOpt = DEFAULT_GROUP, db: DbOption = DEFAULT_DB,
           url: UrlOption = None, as_json: JsonOption = False) -> None:
    """Enable a schedule: it fires from its next occurrence after now."""
    _set_state(name, group, ScheduleState.ENABLED, db, url, as_json)


@app.command()
def disable(name: Name, group: GroupOpt = DEFAULT_GROUP, db: DbOption = DEFAULT_DB,
            url: UrlOption = None, as_json: JsonOption = False) -> None:
    """Disable a schedule: it keeps its settings and does not fire."""
    _set_state(name, group, ScheduleState.DISABLED, db, url, as_json)


@app.command("list")
def list_(
    group: Annotated[str | None, typer.Option(
        "--group", "-g", show_default=False, help="Only this group (default: all).")] = None,
    prefix: Annotated[str, typer.Option(help="Only names starting with this.")] = "",
    state: Annotated[str | None, typer.Option(
        show_default=False, help="ENABLED or DISABLED.")] = None,
    limit: Annotated[int, typer.Option(help="At most this many (1-1000).")] = 100,
    next_token: Annotated[str | None, typer.Option(
        show_default=False, help="Continue a listing cut at --limit.")] = None,
    db: DbOption = DEFAULT_DB,
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """List schedules by group and name, with their next fire time."""
    wanted = state.upper() if state else None

    def on_db(t: Tidings) -> dict[str, Any]:
        rows, token = t.schedules.list(group=group, prefix=prefix, state=wanted, limit=limit,
                                       next_token=next_token)
        return {"schedules": [_arn_json(t, r) for r in rows], "next_token": token}

    page = on_node_or_db(url, db, lambda node: node.list_schedules(
        group=group, prefix=prefix, state=wanted, limit=limit, next_token=next_token), on_db)
    if as_json:
        emit_json(page)
        return
    table(None, ["group", "name", "state", "expression", "timezone", "next fire (UTC)",
                 "next fire (local)", "target"],
          [(d["group"], d["name"], d["state"], d["expression"], d["timezone"],
            d["due_at"] or "-", _local(d["due_at"], d["timezone"]),
            f"{d['target']['kind']} {d['target']['destination']}")
           for d in page["schedules"]])
    if page["next_token"]:
        line(f"more: --next-token {page['next_token']}")


def _local(instant: str | None, zone: str) -> str:
    """An instant as the wall clock of the schedule's own zone shows it."""
    if instant is None:
        return "-"
    try:
        when = datetime.fromisoformat(instant.replace("Z", "+00:00"))
        return when.astimezone(ZoneInfo(zone)).strftime("%Y-%m-%d %H:%M:%S %Z")
    except (ZoneInfoNotFoundError, ValueError):
        return "-"


@app.command("next")
def next_(
    expression: Annotated[str, typer.Argument(
        help="at(...), rate(...) or cron(...).", show_default=False)],
    tz: Tz = "UTC",
    n: Annotated[int, typer.Option("-n", help="How many occurrences (1-100).")] = 5,
    after: Annotated[str | None, typer.Option(
        show_default=False, help="ISO 8601 with a UTC offset; default now.")] = None,
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Print the next occurrences of an expression in UTC and local time (no database; on
    a remote node, by its clock and its zone database, those its schedules fire by)."""
    where = node_url(url)
    if where is not None:
        with remote(where) as node:
            doc = node.next_occurrences(expression, tz, n, after)
    else:
        with errors_handled():
            after_ms = parse_instant(after, "--after")
            start = SystemClock().now_ms() if after_ms is None else after_ms
            doc = occurrences_json(expression, tz, start, n)
    if as_json:
        emit_json(doc)
        return
    table(None, ["UTC", f"local ({tz})"],
          [(o["utc"], o["local"]) for o in doc["occurrences"]])
    if not doc["occurrences"]:
        line("no occurrences: the expression has none after that instant")


# groups ---------------------------------------------------------------------------------

GroupName = Annotated[str, typer.Argument(help="Group name.", show_default=False)]


@groups_app.command("create")
def group_create(
    name: GroupName,
    tag: TagOption = None,
    db: DbOption = DEFAULT_DB,
    url: UrlOption = None,
    create_folders: CreateOption = False,
    as_json: JsonOption = False,
) -> None:
    """Create a schedule group (the first may make a new database: see --create)."""
    tags = key_values(tag, "--tag")
    doc = on_node_or_db(
        url, db, lambda node: node.create_group(name, tags),
        lambda t: group_json(t.schedules.create_group(name, tags), t.schedules.group_arn(name)),
        create=creating(create_folders))
    report(as_json, doc, f"created schedule group {name}")


@groups_app.command("list")
def group_list(
    prefix: Annotated[str, typer.Option(help="Only groups starting with this.")] = "",
    db: DbOption = DEFAULT_DB,
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """List schedule groups."""
    docs = on_node_or_db(url, db, lambda node: node.list_groups(prefix), lambda t: [
        group_json(g, t.schedules.group_arn(g.name)) for g in all_pages(
            lambda token: t.schedules.list_groups(prefix, next_token=token))])
    if as_json:
        emit_json({"groups": docs})
        return
    table(None, ["name", "tags", "created"],
          [(d["name"], ", ".join(f"{k}={v}" for k, v in d["tags"].items()) or "-",
            d["created_at"]) for d in docs])


@groups_app.command("delete")
def group_delete(name: GroupName, db: DbOption = DEFAULT_DB, url: UrlOption = None,
                 as_json: JsonOption = False) -> None:
    """Delete a schedule group and every schedule in it."""
    doc = on_node_or_db(url, db, lambda node: node.delete_group(name),
                        lambda t: {"name": name,
                                   "deleted_schedules": t.schedules.delete_group(name)})
    report(as_json, doc,
           f"deleted schedule group {name} and {doc['deleted_schedules']} schedule(s)")
