"""Options many commands share, declared once so that their flags and help read the same
in every command, and the parsing of repeated `key=value` options."""

from __future__ import annotations

from typing import Annotated

import typer

from tidings.errors import ValidationError
from tidings.store import DEFAULT_URL

# The default (None) lets `Settings` read TIDINGS_DB, like every other variable.
DbOption = Annotated[str | None, typer.Option(
    "--db", metavar="URL", show_default=False,
    help="Database: sqlite:///path.db or postgresql://… "
    f"(env TIDINGS_DB; default {DEFAULT_URL}).")]
JsonOption = Annotated[bool, typer.Option(
    "--json", help="Print one JSON document on stdout instead of tables.")]

TagOption = Annotated[list[str] | None, typer.Option(help="A tag key=value (repeatable).")]

DEFAULT_DB: str | None = None  # the flag's default: TIDINGS_DB, else DEFAULT_URL

UrlOption = Annotated[str | None, typer.Option(
    "--url", metavar="URL", show_default=False,
    help="A remote node (env TIDINGS_URL); its token comes from TIDINGS_TOKEN.")]


def key_values(values: list[str] | None, option: str) -> dict[str, str]:
    """Repeated `key=value` options (tags, attributes) as a mapping; the last one wins."""
    out: dict[str, str] = {}
    for item in values or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValidationError(option, f"must look like key=value, got {item!r}")
        out[key] = value
    return out
