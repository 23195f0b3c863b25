"""What a fan-out checks before it creates anything: the campaign's contact list and
topic exist, and every step's template renders with the variables each row will give it
(the CSV header's columns plus those tidings provides), so no recipient's mail can fail
at its due time for a variable the list never had. A refusal names the variable and the
template, and nothing is created."""

from __future__ import annotations

import csv
import itertools
import json
from collections.abc import Iterable, Iterator, Sequence
from typing import IO

from tidings.campaigns.fanout_source import Columns
from tidings.email.templates import RenderingError, compile_email_template
from tidings.errors import ValidationError
from tidings.store.base import ContactStore, EmailStore

#: The template variables tidings gives every recipient, whatever the list's columns are
#: called: its id, its address and its time zone (docs/campaigns.md).
PROVIDED = ("id", "email", "timezone")


def list_management(contact_list: str | None, topic: str | None) -> str:
    """The ListManagementOptions member of each document (with its comma), or nothing."""
    if contact_list is None:
        return ""
    lmo = {"ContactListName": contact_list, **({"TopicName": topic} if topic else {})}
    return '"ListManagementOptions":' + json.dumps(lmo, separators=(",", ":")) + ","


def check_contact_list(store: ContactStore, contact_list: str | None, topic: str | None) -> None:
    """The campaign's list and topic exist before anything is created (a send naming
    either would be refused at every recipient's due time)."""
    if contact_list is None:
        if topic is not None:
            raise ValidationError("topic", "needs the contact list it belongs to")
        return
    found = store.get_contact_list(contact_list)
    if found is None:
        raise ValidationError("contact_list", f"no contact list is named {contact_list!r}")
    if topic is not None and found.topic(topic) is None:
        raise ValidationError("topic", f"{topic!r} is not a topic of the contact list "
                              f"{contact_list}")


def peek_header(stream: IO[str], fmt: str) -> tuple[Iterable[str], list[str] | None]:
    """The stream's lines (all of them still to read) and, for CSV, its header's columns
    (JSON Lines has none: each row brings its own keys)."""
    if fmt != "csv":
        return stream, None
    first = stream.readline()
    lines: Iterator[str] = itertools.chain([first], stream)
    header = next(csv.reader([first]), [])
    return lines, [h.strip() for h in header]


def check_templates(store: EmailStore, templates: Sequence[str], columns: Columns,
                    header: list[str] | None) -> None:
    """Render each template once with every variable a row will have (a placeholder
    value each); `ValidationError` naming the first one it uses that no row has."""
    if not header:
        return
    special = {columns.id, columns.email, columns.timezone, columns.at}
    given = [h for h in header if h not in special]
    sample = {name: "x" for name in (*given, *PROVIDED)}
    for name in dict.fromkeys(templates):
        row = store.get_template(name)
        try:
            compile_email_template(row.name, row.subject, row.html, row.text).render(sample)
        except RenderingError as exc:
            raise ValidationError("template", (
                f"template {name!r} uses {{{{{exc.path}}}}}, which is neither a column of "
                f"the list ({', '.join(given) or 'none besides id, email and time zone'}) "
                f"nor a variable tidings provides ({', '.join(PROVIDED)}): nothing was "
                "created")) from None
