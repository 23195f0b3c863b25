"""`tidings email …` (templates, previews, sends, the log, suppression) and
`tidings smtp-sink` (a local SMTP server that keeps what it receives)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from tidings.cli.email_lists import contacts_app, events, lists_app
from tidings.cli.options import (
    DEFAULT_DB,
    CreateOption,
    DbOption,
    JsonOption,
    UrlOption,
    creating,
    without_create,
)
from tidings.cli.output import (
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
from tidings.clock import iso, to_ms
from tidings.email.service import EmailService
from tidings.email.sesv2 import send_email_document
from tidings.email.templates import RenderingError, parse_template_data
from tidings.errors import ValidationError
from tidings.model.email import EmailMessage, StoredTemplate
from tidings.remote import RemoteTidings
from tidings.server.native.email_views import delivery_json, suppression_json, template_json
from tidings.settings import Settings
from tidings.store import Create

app = typer.Typer(help="Email templates, sending, the delivery log and suppression.",
                  no_args_is_help=True)
templates_app = typer.Typer(help="Stored templates (subject, HTML and text parts).",
                            no_args_is_help=True)
suppress_app = typer.Typer(help="The account-level suppression list.", no_args_is_help=True)
app.add_typer(templates_app, name="template")
app.add_typer(suppress_app, name="suppress")
app.add_typer(lists_app, name="list")
app.add_typer(contacts_app, name="contact")
app.command("events")(events)

Name = Annotated[str, typer.Argument(help="Template name (letters, digits, _ and -).",
                                     show_default=False)]
Subject = Annotated[str, typer.Option(help="Subject line (may use {{placeholders}}).",
                                      show_default=False)]
HtmlFile = Annotated[Path | None, typer.Option("--html", metavar="FILE", exists=True,
                                               dir_okay=False, help="HTML part, from a file.")]
TextFile = Annotated[Path | None, typer.Option("--text", metavar="FILE", exists=True,
                                               dir_okay=False, help="Text part, from a file.")]
Address = Annotated[str, typer.Argument(help="Email address.", show_default=False)]


def _read(path: Path | None) -> str | None:
    return path.read_text(encoding="utf-8") if path is not None else None


def _print_template(doc: dict[str, Any]) -> None:
    table(None, ["field", "value"], [(k, v) for k, v in doc.items()])


# templates --------------------------------------------------------------------------------

def _template_saving(save: Callable[[EmailService, str, str, str | None, str | None],
                                   StoredTemplate], done: str, doc: str) -> Callable[..., None]:
    """create and update take the same parts (SES UpdateEmailTemplate replaces them all)."""
    def command(name: Name, subject: Subject, html: HtmlFile = None, text: TextFile = None,
                db: DbOption = DEFAULT_DB, url: UrlOption = None,
                create_folders: CreateOption = False, as_json: JsonOption = False) -> None:
        opening = creating(create_folders) if done == "created" else Create.NOTHING
        parts = (subject, _read(html), _read(text))
        saved = on_node_or_db(
            url, db, lambda node: node.put_template(name, *parts, replace=done == "updated"),
            lambda t: template_json(save(t.email, name, *parts)), create=opening)
        emit_json(saved) if as_json else line(f"{done} template {name}")
    command.__doc__ = doc
    return command if done == "created" else without_create(command)


templates_app.command("create")(_template_saving(
    EmailService.create_template, "created",
    "Store a new template; it needs --html, --text or both."))
templates_app.command("update")(_template_saving(
    EmailService.update_template, "updated",
    "Replace every part of a template (parts not given are removed, as in SES)."))


@templates_app.command("get")
def template_get(name: Name, db: DbOption = DEFAULT_DB, url: UrlOption = None,
                 as_json: JsonOption = False) -> None:
    doc = on_node_or_db(url, db, lambda node: node.get_template(name),
                        lambda t: template_json(t.email.get_template(name)))
    emit_json(doc) if as_json else _print_template(doc)


@templates_app.command("list")
def template_list(db: DbOption = DEFAULT_DB, url: UrlOption = None,
                  as_json: JsonOption = False) -> None:
    docs = on_node_or_db(url, db, lambda node: node.list_templates(), lambda t: [
        template_json(r) for r in all_pages(
            lambda token: t.email.list_templates(limit=1000, next_token=token))])
    if as_json:
        emit_json(docs)
    else:
        table(None, ["name", "subject", "parts", "modified_at"],
              [(d["name"], d["subject"], "+".join(p for p in ("html", "text") if d[p]),
                d["modified_at"]) for d in docs])


@templates_app.command("delete")
def template_delete(name: Name, db: DbOption = DEFAULT_DB, url: UrlOption = None) -> None:
    on_node_or_db(url, db, lambda node: node.delete_template(name),
                  lambda t: t.email.delete_template(name))
    line(f"deleted template {name}")


# render and send -------------------------------------------------------------------------------

@app.command()
def render(
    template: Name,
    data: Annotated[str, typer.Option(help="Template data: a JSON object.")] = "{}",
    db: DbOption = DEFAULT_DB,
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Render a stored template with data, as it would be sent (nothing is sent)."""
    def on_db(t: Tidings) -> dict[str, Any]:
        try:
            out = t.email.render(template, parse_template_data(data))
        except RenderingError as exc:
            raise fail(f"rendering failed: {exc.message}", 1) from None
        return {"subject": out.subject, "text": out.text, "html": out.html}

    doc = on_node_or_db(url, db, lambda node: node.render(template, parse_template_data(data)),
                        on_db)
    if as_json:
        emit_json(doc)
        return
    line(f"Subject: {doc['subject']}")
    if doc["text"] is not None:
        line("\n--- text ---")
        line(doc["text"])
    if doc["html"] is not None:
        line("\n--- html ---")
        line(doc["html"])


@app.command()
def send(
    sender: Annotated[str, typer.Option("--from", help="From address.", show_default=False)],
    to: Annotated[list[str], typer.Option(help="To address (repeatable).", show_default=False)],
    cc: Annotated[list[str] | None, typer.Option(help="Cc address (repeatable).")] = None,
    bcc: Annotated[list[str] | None, typer.Option(help="Bcc address (repeatable).")] = None,
    template: Annotated[str | None, typer.Option(help="Stored template to render.")] = None,
    data: Annotated[str, typer.Option(help="Template data: a JSON object.")] = "{}",
    subject: Annotated[str | None, typer.Option(help="Subject, without a template.")] = None,
    text: TextFile = None,
    html: HtmlFile = None,
    db: DbOption = DEFAULT_DB,
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Queue one message; `tidings serve` (or a worker) delivers it through the relay."""
    def message() -> EmailMessage:
        if template is None and subject is None:
            raise ValidationError("--template", "give --template, or --subject with "
                                  "--text and/or --html")
        return EmailMessage(from_address=sender, to=tuple(to), cc=tuple(cc or ()),
                            bcc=tuple(bcc or ()), template=template,
                            template_data=parse_template_data(data) if template else {},
                            subject=subject, text=_read(text), html=_read(html)).validated()

    def on_node(node: RemoteTidings) -> dict[str, Any]:
        accepted = node.send_email(send_email_document(message()))
        return node.delivery(str(accepted["id"]))

    doc = on_node_or_db(url, db, on_node, lambda t: delivery_json(t.email.send(message())))
    report(as_json, doc, f"queued {doc['id']} (Message-ID <{doc['message_id']}>)")


@app.command("status")
def email_status(db: DbOption = DEFAULT_DB, url: UrlOption = None,
                 as_json: JsonOption = False) -> None:
    """How much accepted email waits to be sent (for a node with an SMTP relay, or a
    retry)."""
    doc = on_node_or_db(url, db, lambda node: node.email_status(),
                        lambda t: {"waiting": t.email.waiting()})
    relay = "" if doc.get("relay", True) else " (this node has no SMTP relay)"
    report(as_json, doc, f"{doc['waiting']} emails waiting to be sent{relay}")


@app.command("resend")
def resend(
    message_id: Annotated[str | None, typer.Option(
        "--message-id", help="The Message-ID the delivery log shows.")] = None,
    to: Annotated[str | None, typer.Option("--to", metavar="ADDRESS",
                                           help="A recipient's deliveries.")] = None,
    campaign: Annotated[str | None, typer.Option(help="A campaign's deliveries.")] = None,
    state: Annotated[str | None, typer.Option(
        help="FAILED or RENDERING_FAILURE (default: both).")] = None,
    since: Annotated[str | None, typer.Option(
        metavar="ISO", help="Accepted at or after (e.g. 2026-12-01T09:00:00Z).")] = None,
    until: Annotated[str | None, typer.Option(metavar="ISO",
                                              help="Accepted before.")] = None,
    db: DbOption = DEFAULT_DB, url: UrlOption = None, as_json: JsonOption = False,
) -> None:
    """Put failed deliveries back in line, once each (after a relay outage, or a fixed
    template). Bounced addresses are suppressed: they are not resent."""
    after, before = instant_option("since", since), instant_option("until", until)

    def on_db(t: Tidings) -> dict[str, Any]:
        outcome = t.email.resend(message_id=message_id, recipient=to, campaign=campaign,
                                 state=state, since=_ms(after), until=_ms(before))
        return {"resent": outcome.resent,
                "skipped": [{"id": i, "reason": why} for i, why in outcome.skipped]}

    doc = on_node_or_db(url, db, lambda node: node.resend(
        message_id=message_id, recipient=to, campaign=campaign, state=state,
        since=after.isoformat() if after else None,
        until=before.isoformat() if before else None), on_db)
    if as_json:
        emit_json(doc)
        return
    line(f"resent {doc['resent']} deliveries")
    for skipped in doc["skipped"]:
        line(f"skipped {skipped['id']}: {skipped['reason']}")


def _ms(when: datetime | None) -> int | None:
    return None if when is None else to_ms(when)


@app.command("log")
def log_cmd(
    recipient: Annotated[str | None, typer.Option(help="Only deliveries to this address.")] = None,
    state: Annotated[str | None, typer.Option(
        help="QUEUED, SENT, SUPPRESSED, BOUNCED, FAILED or RENDERING_FAILURE.")] = None,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="How many (newest first).")] = 50,
    db: DbOption = DEFAULT_DB,
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """The delivery log, newest first."""
    docs = on_node_or_db(
        url, db, lambda node: node.deliveries(recipient=recipient, state=state, limit=limit),
        lambda t: [delivery_json(d) for d in t.email.log(recipient=recipient, state=state,
                                                         limit=limit)[0]])
    if as_json:
        emit_json(docs)
        return
    table(None, ["time", "state", "to", "template", "detail", "id"],
          [(d["created_at"], d["state"], ", ".join(d["recipients"]), d["template"] or "-",
            d["detail"] or "", d["id"]) for d in docs])


# suppression -------------------------------------------------------------------------------------

@suppress_app.command("add")
def suppress_add(
    address: Address,
    reason: Annotated[str, typer.Option(
        help="BOUNCE, COMPLAINT, UNSUBSCRIBE or MANUAL.")] = "MANUAL",
    db: DbOption = DEFAULT_DB,
    url: UrlOption = None,
    create_folders: CreateOption = False,
) -> None:
    """Suppress an address (the first may make a new database: see --create)."""
    def on_node(node: RemoteTidings) -> bool:
        # An address already listed keeps its first reason: the PUT changes nothing then.
        listed = node.suppression(address) is not None
        node.suppress(address, reason)
        return not listed

    added = on_node_or_db(url, db, on_node, lambda t: t.email.suppress(address, reason),
                          create=creating(create_folders))
    line(f"suppressed {address}" if added else f"{address} was already suppressed")


@suppress_app.command("remove")
def suppress_remove(address: Address, db: DbOption = DEFAULT_DB,
                    url: UrlOption = None) -> None:
    def on_node(node: RemoteTidings) -> bool:
        node.unsuppress(address)  # 404 NotFound when not listed
        return True

    if not on_node_or_db(url, db, on_node, lambda t: t.email.unsuppress(address)):
        raise fail(f"{address} is not on the suppression list", 1)
    line(f"removed {address}")


@suppress_app.command("list")
def suppress_list(
    reason: Annotated[str | None, typer.Option(help="Only this reason.")] = None,
    db: DbOption = DEFAULT_DB,
    url: UrlOption = None,
    as_json: JsonOption = False,
) -> None:
    docs = on_node_or_db(url, db, lambda node: node.list_suppressions(reason), lambda t: [
        suppression_json(s) for s in all_pages(
            lambda token: t.email.list_suppressions(reason=reason, limit=1000,
                                                    next_token=token))])
    if as_json:
        emit_json(docs)
    else:
        table(None, ["address", "reason", "since"],
              [(d["address"], d["reason"], d["created_at"]) for d in docs])


# smtp-sink ---------------------------------------------------------------------------------------

SinkDir = Annotated[Path | None, typer.Option(
    "--dir", metavar="DIR", show_default=False,
    help="Where messages are stored (env TIDINGS_SMTP_SINK_DIR; default smtp-sink).")]


def _sink_dir(flag: Path | None) -> Path:
    with errors_handled():
        return flag if flag is not None else Path(Settings.from_env().smtp_sink_dir)
sink_app = typer.Typer(help="A local SMTP server (loopback) that stores every message: "
                       "`tidings smtp-sink --port 1025`, then `tidings smtp-sink list`.",
                       invoke_without_command=True)


@sink_app.callback()
def smtp_sink(
    ctx: typer.Context,
    port: Annotated[int, typer.Option(min=0, max=65535, help="TCP port on 127.0.0.1.")] = 1025,
    directory: SinkDir = None,
) -> None:
    """Run the sink until Ctrl-C (or run `list`)."""
    if ctx.invoked_subcommand is not None:
        return
    from tidings.email.sink import run_sink

    try:
        run_sink(_sink_dir(directory), port)
    except OSError as exc:
        raise fail(f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}", 1) from None


@sink_app.command("list")
def smtp_sink_list(directory: SinkDir = None, as_json: JsonOption = False) -> None:
    """Messages the sink received, oldest first."""
    from tidings.email.sink import list_messages

    entries = list_messages(_sink_dir(directory))
    if as_json:
        print(json.dumps(entries, indent=2, ensure_ascii=False))
        return
    table(None, ["received", "from", "to", "subject", "file"],
          [(iso(e["received_at"]), e["mail_from"], ", ".join(e["rcpt_tos"]), e["subject"],
            e["file"]) for e in entries])
