"""SES-compatible email templates: the subject, HTML and text parts, compiled once.

Only the HTML part is HTML-escaped; subject and text get values verbatim, so "C&A" stays
"C&A" there. The template language and its rendering rules are described in
`template_parser` (syntax) and `template_engine` (values, missing data, escaping).
"""

from __future__ import annotations

import json
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from tidings.email.template_engine import RenderingError, Template
from tidings.email.template_parser import TemplateSyntaxError
from tidings.errors import ValidationError

__all__ = [
    "CompiledEmailTemplate",
    "EmailTemplate",
    "RenderedEmail",
    "RenderingError",
    "Template",
    "TemplateCache",
    "TemplateSyntaxError",
    "compile_email_template",
    "parse_template_data",
]

_NEWLINES = re.compile(r"[\r\n]+")


@dataclass(frozen=True)
class RenderedEmail:
    subject: str
    html: str | None
    text: str | None


@dataclass(frozen=True)
class CompiledEmailTemplate:
    name: str
    subject: Template
    html: Template | None
    text: Template | None

    @property
    def variables(self) -> frozenset[str]:
        parts = [p for p in (self.subject, self.html, self.text) if p is not None]
        return frozenset().union(*(p.variables for p in parts))

    def render(self, data: Mapping[str, object]) -> RenderedEmail:
        # A subject is one header line: a newline from the data would break the header.
        subject = _NEWLINES.sub(" ", self.subject.render(data, escape_html=False))
        return RenderedEmail(
            subject=subject,
            html=self.html.render(data, escape_html=True) if self.html else None,
            text=self.text.render(data, escape_html=False) if self.text else None,
        )


@dataclass(frozen=True)
class EmailTemplate:
    """A stored template as SES defines it: a subject and an HTML part, a text part, or both."""

    name: str
    subject: str
    html: str | None
    text: str | None

    def compile(self) -> CompiledEmailTemplate:
        return compile_email_template(self.name, self.subject, self.html, self.text)


def compile_email_template(
    name: str, subject: str, html: str | None, text: str | None
) -> CompiledEmailTemplate:
    """Validate and compile all parts. An empty Html or Text counts as absent."""
    if not html and not text:
        # SES: "composed of a subject line and either an HTML part or a text-only part".
        raise ValidationError("TemplateContent", "must include an Html part, a Text part or both")
    return CompiledEmailTemplate(
        name=name,
        subject=Template.compile(subject, "Subject"),
        html=Template.compile(html, "Html") if html else None,
        text=Template.compile(text, "Text") if text else None,
    )


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not valid JSON")


#: One decoder for every TemplateData: `json.loads` with `parse_constant` builds a decoder
#: and its scanner at each call, which took 60 % of a small document's parse (every
#: templated email's delivery parses one: bench/email.py).
_DATA_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def parse_template_data(text: str) -> dict[str, object]:
    """Parse SES TemplateData: a JSON object (NaN and Infinity are not JSON)."""
    try:
        data = _DATA_DECODER.decode(text)
    except (ValueError, RecursionError) as exc:
        raise ValidationError("TemplateData", f"must be valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ValidationError("TemplateData", "must be a JSON object")
    return data


K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class TemplateCache(Generic[K, V]):
    """LRU of compiled templates keyed by e.g. (name, updated_at), so edits miss the cache.

    The factory runs outside the lock: two threads may compile the same template once
    each, which is harmless, and a slow compile never blocks lookups of other templates.
    """

    def __init__(self, max_size: int = 256) -> None:
        if max_size < 1:
            raise ValueError("max_size must be at least 1")
        self.max_size = max_size
        self._items: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def get_or_compile(self, key: K, factory: Callable[[], V]) -> V:
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        value = factory()
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.max_size:
                self._items.popitem(last=False)
        return value

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
