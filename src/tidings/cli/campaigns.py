"""`tidings fanout`, `tidings campaign …` and `tidings forecast`.

Same conventions as the other commands: `--db`, `--json`, exit codes 0/1/2. A fan-out
whose tolerated failure threshold was exceeded exits 1 (what it created stays; a re-run
after fixing the rows resumes).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from contextlib import ExitStack
from typing import IO, Annotated, Any

import typer
from rich.progress import (
    BarColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from tidings.cli.options import DEFAULT_DB, DbOption, JsonOption
from tidings.cli.output import EXIT_FAILURE, emit_json, fail, line, report, stderr, table, tidings
from tidings.clock import iso
from tidings.engine.campaigns import CampaignService, CampaignView, RecipientStep
from tidings.engine.fanout import FanoutOptions, FanoutProgress, FanoutSummary
from tidings.engine.fanout_source import Columns
from tidings.engine.fanout_timing import parse_date, parse_step
from tidings.model.states import ScheduleState

app = typer.Typer(help="Campaigns made by fan-out: status, pause, resume, cancel.",
                  no_args_is_help=True)

CampaignArg = Annotated[str, typer.Argument(help="Campaign name (its schedule group).",
                                            show_default=False)]
RecipientArg = Annotated[str, typer.Argument(help="The recipient's id in the fan-out.",
                                             show_default=False)]


def _print_view(view: CampaignView, as_json: bool) -> None:
    doc = view.to_json()
    if as_json:
        emit_json(doc)
        return
    c = doc["counts"]
    steps = ", ".join(f"{s['name']} (day {s['day']}"
                      + (f" {s['time']}" if s["time"] else "")
                      + (f", {s['template']}" if s["template"] else "") + ")"
                      for s in doc["steps"])
    table(None, ["attribute", "value"], [
        ("campaign", doc["name"]), ("status", doc["status"]), ("steps", steps),
        ("rows read", doc["rows_read"]), ("row errors", doc["row_errors"]),
        ("schedules created", doc["schedules_created"]),
        ("scheduled", f"{c['scheduled']} ({c['enabled']} enabled, {c['disabled']} disabled)"),
        ("fired", c["fired"]), ("sent", c["sent"]), ("suppressed", c["suppressed"]),
        ("failed", c["failed"]), ("cancelled", c["cancelled"]),
    ])


def _acting(action: Callable[[CampaignService, str], CampaignView],
            doc: str) -> Callable[..., None]:
    """status, pause, resume and cancel: one campaign in, its view out."""
    def command(name: CampaignArg, db: DbOption = DEFAULT_DB,
                as_json: JsonOption = False) -> None:
        with tidings(db) as t:
            view = action(t.campaigns, name)
        _print_view(view, as_json)
    command.__doc__ = doc
    return command


app.command("status")(_acting(
    CampaignService.status,
    "Counts by status: scheduled, fired, sent, suppressed, failed, cancelled."))
app.command("pause")(_acting(
    CampaignService.pause, "Disable every remaining schedule of the campaign."))
app.command("resume")(_acting(
    CampaignService.resume,
    "Enable the campaign's schedules again (steps whose time passed fire at once)."))
app.command("cancel")(_acting(
    CampaignService.cancel, "Delete every remaining schedule of the campaign (final)."))


@app.command("cancel-recipient")
def cancel_recipient(
    name: CampaignArg,
    recipient_id: RecipientArg,
    db: DbOption = DEFAULT_DB, as_json: JsonOption = False,
) -> None:
    """Delete one recipient's remaining steps (e.g. they converted)."""
    with tidings(db) as t:
        removed = t.campaigns.cancel_recipient(name, recipient_id)
    if not removed:
        raise fail(f"recipient {recipient_id!r} has no pending step in campaign {name!r} (an "
                   "unknown id, or every step already fired)", EXIT_FAILURE)
    report(as_json, {"campaign": name, "recipient": recipient_id, "removed": removed},
           f"removed {removed} pending step(s) of {recipient_id} in {name}")


@app.command("show")
def show_recipient(
    name: CampaignArg,
    recipient_id: RecipientArg,
    db: DbOption = DEFAULT_DB, as_json: JsonOption = False,
) -> None:
    """One recipient's steps: when each pending one fires and what each fired one
    delivered. The id is matched exactly (u1 is not u10)."""
    with tidings(db) as t:
        steps = t.campaigns.recipient(name, recipient_id)
    if not steps:
        raise fail(f"campaign {name!r} has no recipient {recipient_id!r} (no pending step, "
                   "no delivery)", EXIT_FAILURE)
    docs = [_recipient_step(s) for s in steps]
    if as_json:
        emit_json({"campaign": name, "recipient": recipient_id, "steps": docs})
        return
    table(None, ["step", "state", "due (UTC)", "deliveries"],
          [(d["step"], d["state"], d["due_at"] or "-",
            "; ".join(f"{x['state']} {x['updated_at']} {','.join(x['recipients'])}"
                      for x in d["deliveries"]) or "-") for d in docs])


def _recipient_step(step: RecipientStep) -> dict[str, Any]:
    s = step.schedule
    return {
        "step": step.step, "schedule": step.schedule_name,
        "state": ("fired" if s is None else
                  "paused" if s.spec.state is ScheduleState.DISABLED else "scheduled"),
        "due_at": None if s is None or s.due_at is None else iso(s.due_at),
        "deliveries": [{"id": d.id, "state": d.state.value, "recipients": list(d.recipients),
                        "updated_at": iso(d.updated_at), "detail": d.detail}
                       for d in step.deliveries]}


@app.command("list")
def list_campaigns(db: DbOption = DEFAULT_DB, as_json: JsonOption = False) -> None:
    """Every campaign, with its status and how many schedules it made."""
    with tidings(db) as t:
        records = t.campaigns.list(limit=1000)
    if as_json:
        emit_json({"campaigns": [{"name": r.name, "status": r.status.value,
                                  "steps": [s.name for s in r.steps],
                                  "schedules_created": r.schedules_created,
                                  "row_errors": r.row_errors} for r in records]})
        return
    table(None, ["campaign", "status", "steps", "schedules created", "row errors"],
          [(r.name, r.status.value, ", ".join(s.name for s in r.steps), r.schedules_created,
            r.row_errors) for r in records])


def _summary_rows(s: FanoutSummary) -> list[tuple[str, Any]]:
    rate = round(s.schedules_created / s.elapsed_s) if s.elapsed_s else 0
    rows: list[tuple[str, Any]] = [
        ("campaign", s.campaign), ("rows read", s.rows_read),
        ("schedules created", s.schedules_created),
        ("already there (skipped)", s.schedules_existing),
        ("steps already due (skipped)", s.skipped_past), ("row errors", s.errors),
        ("seconds", round(s.elapsed_s, 1)), ("schedules per second", rate)]
    if s.stopped:
        rows.append(("stopped", s.stop_reason))
    return rows


def fanout(
    source: Annotated[str, typer.Argument(metavar="FILE|-", help="CSV or JSON Lines; - = stdin.",
                                          show_default=False)],
    campaign: Annotated[str, typer.Option(help="Campaign name (schedule group).",
                                          show_default=False)],
    template: Annotated[str, typer.Option(help="Stored email template of the steps.",
                                          show_default=False)],
    sender: Annotated[str, typer.Option("--from", help="From address.", show_default=False)],
    local_time: Annotated[str | None, typer.Option(
        "--local-time", metavar="HH:MM", help="Local time of day in each row's zone (with --on).",
        show_default=False)] = None,
    on: Annotated[str | None, typer.Option(metavar="YYYY-MM-DD", show_default=False,
                                           help="The local date of day 0.")] = None,
    next_time: Annotated[str | None, typer.Option(
        "--next", metavar="HH:MM", show_default=False,
        help="Day 0 is the next time this local time comes, per row.")] = None,
    at_column: Annotated[str | None, typer.Option(
        metavar="COL", show_default=False,
        help="Column with an ISO 8601 instant (with offset) per row.")] = None,
    step: Annotated[list[str] | None, typer.Option(
        metavar="NAME:DAY[:HH:MM[:TEMPLATE]]", show_default=False,
        help="A drip step; repeat, e.g. --step welcome:0:09:00 --step nudge:2:10:00.")] = None,
    tz_column: Annotated[str, typer.Option(help="Time-zone column.")] = "timezone",
    id_column: Annotated[str, typer.Option(help="Recipient-id column.")] = "id",
    email_column: Annotated[str, typer.Option(help="Email-address column.")] = "email",
    quiet_hours: Annotated[str | None, typer.Option(
        metavar="HH:MM-HH:MM", show_default=False,
        help="Never fire in these local hours: move to their end.")] = None,
    flexible_window: Annotated[int | None, typer.Option(
        metavar="MIN", show_default=False, help="Spread each step over this many minutes.")
    ] = None,
    errors: Annotated[str | None, typer.Option(
        metavar="FILE", show_default=False, help="Write bad rows here (JSON Lines).")] = None,
    max_error_percent: Annotated[float | None, typer.Option(
        metavar="P", show_default=False, help="Stop when more rows than this % are bad.")
    ] = None,
    max_errors: Annotated[int | None, typer.Option(
        metavar="N", show_default=False, help="Stop after more than N bad rows.")] = None,
    fmt: Annotated[str | None, typer.Option(
        "--format", metavar="csv|jsonl", show_default=False,
        help="Input format (default: from the file name, else csv).")] = None,
    db: DbOption = DEFAULT_DB, as_json: JsonOption = False,
) -> None:
    """Create one self-deleting email schedule per recipient and step, at each
    recipient's local time. Resumable: a re-run creates only what is missing."""
    if fmt is None:
        fmt = "jsonl" if source.endswith((".jsonl", ".ndjson")) else "csv"
    with tidings(db) as t, ExitStack() as stack:
        opts = FanoutOptions(
            campaign=campaign, template=template, sender=sender,
            steps=tuple(parse_step(s) for s in step or ()),
            on=parse_date("--on", on) if on else None, local_time=local_time,
            next_time=next_time,
            columns=Columns(id=id_column, email=email_column, timezone=tz_column,
                            at=at_column),
            quiet_hours=quiet_hours, flexible_window_minutes=flexible_window,
            max_errors=max_errors, max_error_percent=max_error_percent, format=fmt)
        stream: IO[bytes] = (sys.stdin.buffer if source == "-"
                             else stack.enter_context(open(source, "rb")))
        total = None if source == "-" else os.path.getsize(source)
        sink = stack.enter_context(open(errors, "a", encoding="utf-8")) if errors else None
        progress = stack.enter_context(Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), TaskProgressColumn(),
            TextColumn("{task.fields[stats]}"), TimeElapsedColumn(), TimeRemainingColumn(),
            console=stderr, transient=True, disable=as_json))
        task = progress.add_task("fan-out", total=total, stats="")

        def show(p: FanoutProgress) -> None:
            rate = p.schedules_created / p.elapsed_s if p.elapsed_s else 0
            progress.update(task, completed=p.bytes_read, stats=(
                f"{p.rows_read:,} rows · {p.schedules_created:,} created · "
                f"{p.errors:,} errors · {rate:,.0f}/s"))

        summary = t.campaigns.fanout(stream, opts, errors=sink, on_progress=show,
                                     bytes_total=total)
    if as_json:
        emit_json(summary.to_json())
    else:
        table(None, ["fan-out", "value"], _summary_rows(summary))
        if errors and summary.errors:
            line(f"bad rows written to {errors}")
    if summary.stopped:
        raise typer.Exit(EXIT_FAILURE)


def forecast(
    hours: Annotated[int, typer.Option(help="Horizon from now.")] = 48,
    per: Annotated[str | None, typer.Option(
        metavar="target", show_default=False, help="'target': one chart per target kind.")
    ] = None,
    bucket: Annotated[int, typer.Option(metavar="MIN", help="Minutes per bucket.")] = 1,
    png: Annotated[str | None, typer.Option(metavar="FILE", show_default=False,
                                            help="Also draw it into a PNG (needs matplotlib).")
                   ] = None,
    width: Annotated[int, typer.Option(help="Chart columns.")] = 96,
    db: DbOption = DEFAULT_DB, as_json: JsonOption = False,
) -> None:
    """Planned firings per minute over the next hours: see spikes before they happen."""
    from tidings.cli.forecast_chart import render, write_png

    if per not in (None, "target"):
        raise typer.BadParameter("only --per target is supported", param_hint="--per")
    with tidings(db) as t:
        fc = t.campaigns.forecast(hours, bucket_minutes=bucket)
        if png:
            write_png(fc, png, per_target=per == "target")
    if as_json:
        emit_json(fc.to_json())
        return
    for text in render(fc, per_target=per == "target", width=width):
        line(text)
    if png:
        line(f"chart written to {png}")


__all__ = ["app", "fanout", "forecast"]
