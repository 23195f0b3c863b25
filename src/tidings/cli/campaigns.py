"""`tidings fanout`, `tidings campaign …` and `tidings forecast`.

Same conventions as the other commands: `--db` or `--url`, `--json`, exit codes 0/1/2. A fan-out
whose tolerated failure threshold was exceeded exits 1 (what it created stays; a re-run
after fixing the rows resumes).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
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

from tidings.campaigns.fanout import FanoutOptions, FanoutProgress
from tidings.campaigns.fanout_source import Columns
from tidings.campaigns.fanout_timing import parse_date, parse_step
from tidings.campaigns.service import CampaignService, CampaignView, Forecast
from tidings.cli.options import DEFAULT_DB, DbOption, JsonOption, UrlOption
from tidings.cli.output import (
    EXIT_FAILURE,
    emit_json,
    errors_handled,
    fail,
    line,
    report,
    stderr,
    table,
)
from tidings.cli.where import on_node_or_db
from tidings.client import Tidings
from tidings.errors import NotFoundError, ValidationError
from tidings.remote import RemoteTidings
from tidings.server.native.campaign_views import campaign_json, recipient_json

app = typer.Typer(help="Campaigns made by fan-out: status, pause, resume, cancel.",
                  no_args_is_help=True)

CampaignArg = Annotated[str, typer.Argument(help="Campaign name (its schedule group).",
                                            show_default=False)]
RecipientArg = Annotated[str, typer.Argument(help="The recipient's id in the fan-out.",
                                             show_default=False)]


def _print_view(doc: dict[str, Any], as_json: bool) -> None:
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


def _acting(action: Callable[[CampaignService, str], CampaignView], verb: str | None,
            doc: str) -> Callable[..., None]:
    """status, pause, resume and cancel: one campaign in, its view out (`verb`: the
    node's action path, None for the status)."""
    def command(name: CampaignArg, db: DbOption = DEFAULT_DB, url: UrlOption = None,
                as_json: JsonOption = False) -> None:
        _print_view(on_node_or_db(url, db, lambda node: node.campaign(name, verb),
                                  lambda t: action(t.campaigns, name).to_json()), as_json)
    command.__doc__ = doc
    return command


app.command("status")(_acting(
    CampaignService.status, None,
    "Counts by status: scheduled, fired, sent, suppressed, failed, cancelled."))
app.command("pause")(_acting(
    CampaignService.pause, "pause", "Disable every remaining schedule of the campaign."))
app.command("resume")(_acting(
    CampaignService.resume, "resume",
    "Enable the campaign's schedules again (steps whose time passed fire at once)."))
app.command("cancel")(_acting(
    CampaignService.cancel, "cancel",
    "Delete every remaining schedule of the campaign (final)."))


@app.command("cancel-recipient")
def cancel_recipient(
    name: CampaignArg,
    recipient_id: RecipientArg,
    db: DbOption = DEFAULT_DB, url: UrlOption = None, as_json: JsonOption = False,
) -> None:
    """Delete one recipient's remaining steps (e.g. they converted)."""
    removed = on_node_or_db(
        url, db, lambda node: int(node.cancel_recipient(name, recipient_id)["removed"]),
        lambda t: t.campaigns.cancel_recipient(name, recipient_id))
    if not removed:
        raise fail(f"recipient {recipient_id!r} has no pending step in campaign {name!r} (an "
                   "unknown id, or every step already fired)", EXIT_FAILURE)
    report(as_json, {"campaign": name, "recipient": recipient_id, "removed": removed},
           f"removed {removed} pending step(s) of {recipient_id} in {name}")


@app.command("show")
def show_recipient(
    name: CampaignArg,
    recipient_id: RecipientArg,
    db: DbOption = DEFAULT_DB, url: UrlOption = None, as_json: JsonOption = False,
) -> None:
    """One recipient's steps: when each pending one fires and what each fired one
    delivered. The id is matched exactly (u1 is not u10)."""
    def on_db(t: Tidings) -> dict[str, Any]:
        steps = t.campaigns.recipient(name, recipient_id)
        if not steps:
            raise NotFoundError(recipient_id, f"campaign {name!r} has no recipient "
                                f"{recipient_id!r} (no pending step, no delivery)")
        return recipient_json(name, recipient_id, steps)

    doc = on_node_or_db(url, db, lambda node: node.campaign_recipient(name, recipient_id),
                        on_db)
    if as_json:
        emit_json(doc)
        return
    table(None, ["step", "state", "due (UTC)", "deliveries"],
          [(d["step"], d["state"], d["due_at"] or "-",
            "; ".join(f"{x['state']} {x['updated_at']} {','.join(x['recipients'])}"
                      for x in d["deliveries"]) or "-") for d in doc["steps"]])


@app.command("list")
def list_campaigns(db: DbOption = DEFAULT_DB, url: UrlOption = None,
                   as_json: JsonOption = False) -> None:
    """Every campaign, with its status and how many schedules it made."""
    docs = on_node_or_db(url, db, lambda node: node.list_campaigns(),
                         lambda t: [campaign_json(r) for r in t.campaigns.list(limit=1000)])
    if as_json:
        emit_json({"campaigns": docs})
        return
    table(None, ["campaign", "status", "steps", "schedules created", "row errors"],
          [(d["name"], d["status"], ", ".join(s["name"] for s in d["steps"]),
            d["schedules_created"], d["row_errors"]) for d in docs])


def _summary_rows(s: dict[str, Any]) -> list[tuple[str, Any]]:
    rate = round(s["schedules_created"] / s["elapsed_s"]) if s["elapsed_s"] else 0
    rows: list[tuple[str, Any]] = [
        ("campaign", s["campaign"]), ("rows read", s["rows_read"]),
        ("schedules created", s["schedules_created"]),
        ("already there (skipped)", s["schedules_existing"]),
        ("steps already due (skipped)", s["skipped_past"]), ("row errors", s["errors"]),
        ("seconds", round(s["elapsed_s"], 1)), ("schedules per second", rate)]
    if s["stopped"]:
        rows.append(("stopped", s["stop_reason"]))
    return rows


#: Bytes of the recipient list sent to a remote node at a time.
CHUNK = 64 * 1024


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
        metavar="FILE", show_default=False,
        help="Write bad rows here (JSON Lines; not with a remote node, which answers a "
        "sample of them: error_sample in --json).")] = None,
    max_error_percent: Annotated[float | None, typer.Option(
        metavar="P", show_default=False, help="Stop when more rows than this % are bad.")
    ] = None,
    max_errors: Annotated[int | None, typer.Option(
        metavar="N", show_default=False, help="Stop after more than N bad rows.")] = None,
    fmt: Annotated[str | None, typer.Option(
        "--format", metavar="csv|jsonl", show_default=False,
        help="Input format (default: from the file name, else csv).")] = None,
    contact_list: Annotated[str | None, typer.Option(
        "--list", metavar="LIST", show_default=False,
        help="The contact list the mail is for: an unsubscribe leaves it (or --topic), "
        "and contacts who left are skipped.")] = None,
    topic: Annotated[str | None, typer.Option(
        metavar="TOPIC", show_default=False, help="The list's topic the mail is about.")
    ] = None,
    db: DbOption = DEFAULT_DB, url: UrlOption = None, as_json: JsonOption = False,
) -> None:
    """Create one self-deleting email schedule per recipient and step, at each
    recipient's local time. Resumable: a re-run creates only what is missing. With a
    remote node, the list streams to it and it does the fan-out."""
    fmt = fmt or ("jsonl" if source.endswith((".jsonl", ".ndjson")) else "csv")

    def options() -> FanoutOptions:  # checked before anything is read, sent or written
        return FanoutOptions(
            campaign=campaign, template=template, sender=sender,
            steps=tuple(parse_step(s) for s in step or ()),
            on=parse_date("--on", on) if on else None, local_time=local_time,
            next_time=next_time,
            columns=Columns(id=id_column, email=email_column, timezone=tz_column,
                            at=at_column),
            quiet_hours=quiet_hours, flexible_window_minutes=flexible_window,
            max_errors=max_errors, max_error_percent=max_error_percent, format=fmt,
            contact_list=contact_list, topic=topic)

    def on_node(node: RemoteTidings) -> dict[str, Any]:
        options()
        if errors:
            raise ValidationError("--errors", "a remote node answers a sample of the bad "
                                  "rows (error_sample, with --json), not a file of them all")
        with _progress(as_json) as (show, stack):
            stream, total = _source(source, stack)

            def chunks() -> Iterator[bytes]:
                sent = 0
                while chunk := stream.read(CHUNK):
                    sent += len(chunk)
                    show(sent, total, "")
                    yield chunk

            return node.fanout(
                campaign, chunks(),
                content_type="application/x-ndjson" if fmt == "jsonl" else "text/csv",
                template=template, **{"from": sender}, local_time=local_time, on=on,
                next=next_time, at_column=at_column, step=list(step or ()) or None,
                tz_column=tz_column, id_column=id_column, email_column=email_column,
                quiet_hours=quiet_hours, flexible_window=flexible_window,
                max_error_percent=max_error_percent, max_errors=max_errors, format=fmt,
                contact_list=contact_list, topic=topic)

    def on_db(t: Tidings) -> dict[str, Any]:
        opts = options()
        with _progress(as_json) as (show, stack):
            stream, total = _source(source, stack)
            sink = stack.enter_context(open(errors, "a", encoding="utf-8")) if errors else None

            def progress(p: FanoutProgress) -> None:
                rate = p.schedules_created / p.elapsed_s if p.elapsed_s else 0
                show(p.bytes_read, total, f"{p.rows_read:,} rows · {p.schedules_created:,} "
                     f"created · {p.errors:,} errors · {rate:,.0f}/s")

            return t.campaigns.fanout(stream, opts, errors=sink, on_progress=progress,
                                      bytes_total=total).to_json()

    summary = on_node_or_db(url, db, on_node, on_db)
    if as_json:
        emit_json(summary)
    else:
        table(None, ["fan-out", "value"], _summary_rows(summary))
        if errors and summary["errors"]:
            line(f"bad rows written to {errors}")
    if summary["stopped"]:
        raise typer.Exit(EXIT_FAILURE)


def _source(source: str, stack: ExitStack) -> tuple[IO[bytes], int | None]:
    """The recipient list (stdin for -) and its size when known."""
    if source == "-":
        return sys.stdin.buffer, None
    return stack.enter_context(open(source, "rb")), os.path.getsize(source)


Show = Callable[[int, "int | None", str], None]


@contextmanager
def _progress(as_json: bool) -> Iterator[tuple[Show, ExitStack]]:
    """A progress bar on stderr for people (none with --json), and the files to close."""
    with ExitStack() as stack:
        bar = stack.enter_context(Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), TaskProgressColumn(),
            TextColumn("{task.fields[stats]}"), TimeElapsedColumn(), TimeRemainingColumn(),
            console=stderr, transient=True, disable=as_json))
        task = bar.add_task("fan-out", total=None, stats="")

        def show(done: int, total: int | None, stats: str) -> None:
            bar.update(task, completed=done, total=total, stats=stats)

        yield show, stack


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
    mean_duration: Annotated[float, typer.Option(
        metavar="SECONDS", min=0.001, max=86_400.0,
        help="How long each start holds a limit's concurrency slot, for the estimate of "
             "when a key with a concurrency drains.")] = 1.0,
    db: DbOption = DEFAULT_DB, url: UrlOption = None, as_json: JsonOption = False,
) -> None:
    """Planned firings per minute over the next hours: see spikes before they happen, and
    when the firings a limit holds back (a rate, a concurrency, a pause) drain."""
    from tidings.cli.forecast_chart import render, write_png

    if per not in (None, "target"):
        raise typer.BadParameter("only --per target is supported", param_hint="--per")
    duration_ms = max(round(mean_duration * 1000), 1)
    fc = Forecast(**on_node_or_db(
        url, db, lambda node: node.forecast(hours, bucket, duration_ms),
        lambda t: t.campaigns.forecast(hours, bucket_minutes=bucket,
                                       mean_duration_ms=duration_ms).to_json()))
    if png:
        with errors_handled():
            write_png(fc, png, per_target=per == "target")
    if as_json:
        emit_json(fc.to_json())
        return
    for text in render(fc, per_target=per == "target", width=width):
        line(text)
    if png:
        line(f"chart written to {png}")


__all__ = ["app", "fanout", "forecast"]
