"""`tidings email list …` (contact lists and their topics) and `tidings email contact …`
(a list's contacts and their topic preferences). Each command works on the node `--url`
(or TIDINGS_URL) names, through its native API, or else on the database; both answer the
same documents (`--json`)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from tidings.cli.options import (
    DEFAULT_DB,
    CreateOption,
    DbOption,
    JsonOption,
    UrlOption,
    creating,
)
from tidings.cli.output import all_pages, emit_json, line, table
from tidings.cli.where import on_node_or_db
from tidings.client import Tidings
from tidings.email.contacts import ContactFilter
from tidings.errors import ValidationError
from tidings.model.contacts import subscription_status
from tidings.server.native.contact_views import (
    contact_json,
    contact_list_json,
    event_json,
    preferences_in,
    topics_in,
)

lists_app = typer.Typer(help="Contact lists and their topics (what list mail is sent to and "
                             "unsubscribed from).", no_args_is_help=True)
contacts_app = typer.Typer(help="A contact list's contacts and their topic preferences.",
                           no_args_is_help=True)

ListName = Annotated[str, typer.Argument(help="Contact list name (letters, digits, _ and -).",
                                         show_default=False)]
Address = Annotated[str, typer.Argument(help="Email address.", show_default=False)]
Topics = Annotated[list[str] | None, typer.Option(
    "--topic", metavar="NAME[:OPT_IN|OPT_OUT[:DISPLAY NAME]]",
    help="A topic of the list (repeatable); its default status is OPT_IN unless given.")]
Description = Annotated[str | None, typer.Option(help="What the list is for.")]
Prefs = Annotated[list[str] | None, typer.Option(
    "--topic", metavar="TOPIC=OPT_IN|OPT_OUT",
    help="The contact's preference for a topic (repeatable).")]


def _topics(specs: list[str] | None) -> list[dict[str, Any]]:
    out = []
    for spec in specs or []:
        name, _, rest = spec.partition(":")
        default, _, display = rest.partition(":")
        out.append({"name": name, "display_name": display or name,
                    "default": (default or "OPT_IN").upper()})
    return out


def _prefs(specs: list[str] | None) -> dict[str, str] | None:
    if specs is None:
        return None
    out = {}
    for spec in specs:
        topic, eq, status = spec.partition("=")
        if not eq:
            raise ValidationError("--topic", f"{spec!r} is not TOPIC=OPT_IN or TOPIC=OPT_OUT")
        out[topic] = subscription_status("--topic", status).value
    return out


def _print_list(doc: dict[str, Any]) -> None:
    line(f"{doc['name']}: {doc['description'] or '-'} (updated {doc['updated_at']})")
    table(None, ["topic", "display name", "default"],
          [(t["name"], t["display_name"], t["default"]) for t in doc["topics"]])


def _print_contact(doc: dict[str, Any]) -> None:
    table(None, ["field", "value"], [(k, v) for k, v in doc.items()])


# lists ---------------------------------------------------------------------------------------

def _save_list(name: str, topics: list[str] | None, description: str | None, db: str | None,
               url: str | None, create_folders: bool, as_json: bool, replace: bool) -> None:
    native = _topics(topics)

    def on_db(t: Tidings) -> dict[str, Any]:
        save = t.email.contacts.update_list if replace else t.email.contacts.create_list
        return contact_list_json(save(name, topics_in(native), description))

    doc = on_node_or_db(url, db, lambda node: node.put_contact_list(
        name, native, description, replace=replace), on_db,
        create=creating(create_folders))
    emit_json(doc) if as_json else line(f"{'updated' if replace else 'created'} "
                                        f"contact list {name}")


@lists_app.command("create")
def list_create(name: ListName, topic: Topics = None, description: Description = None,
                db: DbOption = DEFAULT_DB, url: UrlOption = None,
                create_folders: CreateOption = False, as_json: JsonOption = False) -> None:
    """Make a contact list with its topics, e.g. --topic weekly:OPT_IN:'Weekly news'."""
    _save_list(name, topic, description, db, url, create_folders, as_json, replace=False)


@lists_app.command("update")
def list_update(name: ListName, topic: Topics = None, description: Description = None,
                db: DbOption = DEFAULT_DB, url: UrlOption = None,
                as_json: JsonOption = False) -> None:
    """Replace a list's topics and description (topics not given are removed, as in SES)."""
    _save_list(name, topic, description, db, url, False, as_json, replace=True)


@lists_app.command("get")
def list_get(name: ListName, db: DbOption = DEFAULT_DB, url: UrlOption = None,
             as_json: JsonOption = False) -> None:
    doc = on_node_or_db(url, db, lambda node: node.contact_list(name),
                        lambda t: contact_list_json(t.email.contacts.get_list(name)))
    emit_json(doc) if as_json else _print_list(doc)


@lists_app.command("list")
def list_list(db: DbOption = DEFAULT_DB, url: UrlOption = None,
              as_json: JsonOption = False) -> None:
    """Every contact list."""
    docs = on_node_or_db(url, db, lambda node: node.contact_lists(), lambda t: [
        contact_list_json(r) for r in all_pages(
            lambda token: t.email.contacts.lists(limit=1000, next_token=token))])
    if as_json:
        emit_json(docs)
    else:
        table(None, ["name", "topics", "description", "updated_at"],
              [(d["name"], ", ".join(t["name"] for t in d["topics"]), d["description"],
                d["updated_at"]) for d in docs])


@lists_app.command("delete")
def list_delete(name: ListName, db: DbOption = DEFAULT_DB, url: UrlOption = None) -> None:
    """Delete a list and every contact in it."""
    on_node_or_db(url, db, lambda node: node.delete_contact_list(name),
                  lambda t: t.email.contacts.delete_list(name))
    line(f"deleted contact list {name}")


# contacts ------------------------------------------------------------------------------------

UnsubscribeAll = Annotated[bool | None, typer.Option(
    "--unsubscribe-all/--subscribed",
    help="Whether the contact left the whole list.", show_default=False)]
Attributes = Annotated[str | None, typer.Option(help="A JSON object kept with the contact.")]


@contacts_app.command("create")
def contact_create(list_name: ListName, address: Address, topic: Prefs = None,
                   unsubscribe_all: UnsubscribeAll = None, attributes: Attributes = None,
                   db: DbOption = DEFAULT_DB, url: UrlOption = None,
                   as_json: JsonOption = False) -> None:
    """Add a contact to a list, e.g. --topic weekly=OPT_OUT."""
    prefs = _prefs(topic)
    doc = on_node_or_db(url, db, lambda node: node.put_contact(
        list_name, address, topics=prefs, unsubscribe_all=unsubscribe_all,
        attributes=attributes), lambda t: contact_json(t.email.contacts.create_contact(
            list_name, address, preferences_in(prefs), bool(unsubscribe_all), attributes)))
    emit_json(doc) if as_json else line(f"added {doc['address']} to {list_name}")


@contacts_app.command("update")
def contact_update(list_name: ListName, address: Address, topic: Prefs = None,
                   unsubscribe_all: UnsubscribeAll = None, attributes: Attributes = None,
                   db: DbOption = DEFAULT_DB, url: UrlOption = None,
                   as_json: JsonOption = False) -> None:
    """Set a contact's topic preferences (those given replace all of them, as in SES),
    whether it left the whole list, or its attributes."""
    prefs = _prefs(topic)
    doc = on_node_or_db(url, db, lambda node: node.put_contact(
        list_name, address, replace=True, topics=prefs, unsubscribe_all=unsubscribe_all,
        attributes=attributes), lambda t: contact_json(t.email.contacts.update_contact(
            list_name, address, preferences_in(prefs), unsubscribe_all, attributes)))
    emit_json(doc) if as_json else line(f"updated {doc['address']} in {list_name}")


@contacts_app.command("get")
def contact_get(list_name: ListName, address: Address, db: DbOption = DEFAULT_DB,
                url: UrlOption = None, as_json: JsonOption = False) -> None:
    doc = on_node_or_db(url, db, lambda node: node.contact(list_name, address),
                        lambda t: contact_json(t.email.contacts.get_contact(list_name, address)))
    emit_json(doc) if as_json else _print_contact(doc)


@contacts_app.command("list")
def contact_list(
    list_name: ListName,
    status: Annotated[str | None, typer.Option(help="OPT_IN or OPT_OUT (for --topic, or "
                                               "of the whole list).")] = None,
    topic: Annotated[str | None, typer.Option(help="The topic --status is about.")] = None,
    use_default: Annotated[bool, typer.Option(
        help="A contact with no preference for --topic counts with its default.")] = False,
    db: DbOption = DEFAULT_DB, url: UrlOption = None, as_json: JsonOption = False,
) -> None:
    """A list's contacts, by address (filtered as SES ListContacts does)."""
    where = ContactFilter(subscription_status("--status", status) if status else None, topic,
                          use_default)
    docs = on_node_or_db(
        url, db, lambda node: node.contacts(list_name, status=where.status, topic=topic,
                                            use_default=use_default or None),
        lambda t: [contact_json(c) for c in all_pages(lambda token: t.email.contacts.contacts(
            list_name, where=where, limit=1000, next_token=token))])
    if as_json:
        emit_json(docs)
    else:
        table(None, ["address", "topics", "unsubscribe_all", "updated_at"],
              [(d["address"], ", ".join(f"{k}={v}" for k, v in d["topics"].items()),
                d["unsubscribe_all"], d["updated_at"]) for d in docs])


@contacts_app.command("delete")
def contact_delete(list_name: ListName, address: Address, db: DbOption = DEFAULT_DB,
                   url: UrlOption = None) -> None:
    on_node_or_db(url, db, lambda node: node.delete_contact(list_name, address),
                  lambda t: t.email.contacts.delete_contact(list_name, address))
    line(f"removed {address} from {list_name}")



# returned mail ---------------------------------------------------------------------------

def events(
    address: Annotated[str | None, typer.Option(help="Only events of this address.")] = None,
    delivery: Annotated[str | None, typer.Option(help="Only events of this delivery id.")
                        ] = None,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="How many (newest first).")] = 50,
    db: DbOption = DEFAULT_DB, url: UrlOption = None, as_json: JsonOption = False,
) -> None:
    """Bounces and complaints that came back (DSNs, ARF reports, relay webhooks), newest
    first, with the delivery each was matched to."""
    docs = on_node_or_db(
        url, db, lambda node: node.email_events(address=address, delivery_id=delivery,
                                                limit=limit),
        lambda t: [event_json(e) for e in t.email.returns.events(
            address=address, delivery_id=delivery, limit=limit)[0]])
    if as_json:
        emit_json(docs)
        return
    table(None, ["time", "kind", "address", "source", "delivery", "detail"],
          [(d["at"], d["kind"], d["address"], d["source"], d["delivery_id"] or "-",
            d["detail"]) for d in docs])
