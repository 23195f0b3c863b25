"""Amazon SES v2's REST-JSON shapes, to and from tidings templates, suppressions and sends.

Field names and nesting follow botocore's `sesv2/2019-09-27` model, the authority the tests
check against. Timestamps are epoch seconds (JSON numbers) in bodies, as REST-JSON sends
them, and ISO 8601 (or epoch seconds) in query strings; epoch milliseconds inside.

Suppression reasons: SES knows BOUNCE and COMPLAINT; tidings also records UNSUBSCRIBE
(one-click or page unsubscribe) and MANUAL (added by an operator). They are reported as
they are (the SDKs pass an enum value they do not know through as a string), accepted by
PutSuppressedDestination and usable as a `Reasons` filter; a reason that is none of the
four is a BadRequestException.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from tidings.email.mime import CRLF, Outgoing, message_text
from tidings.email.service import EmailService
from tidings.email.sesv2 import parse_send_email
from tidings.email.suppression import reason_of
from tidings.email.templates import RenderedEmail, parse_template_data
from tidings.errors import ValidationError
from tidings.model.email import EmailMessage, StoredTemplate, Suppression, SuppressionReason
from tidings.model.paging import page_token

Doc = dict[str, Any]

MAX_BULK_ENTRIES = 50  # SES: at most 50 destinations per SendBulkEmail
_SCAN = 1000  # suppression rows read per store trip when filtering beyond one reason
#: Only validates the request-wide parts of a bulk send (each entry brings its own).
_PLACEHOLDER = "placeholder@tidings.invalid"


def seconds(ms: int) -> float:
    return ms / 1000


def template_out(row: StoredTemplate) -> Doc:
    content: Doc = {"Subject": row.subject}
    if row.text is not None:
        content["Text"] = row.text
    if row.html is not None:
        content["Html"] = row.html
    return {"TemplateName": row.name, "TemplateContent": content}


def template_in(body: Doc) -> tuple[str, str | None, str | None]:
    """(subject, html, text) of a TemplateContent. A missing Subject is an empty one."""
    content = body.get("TemplateContent")
    if not isinstance(content, dict):
        raise ValidationError("TemplateContent", "is required: {Subject, Text, Html}")
    parts = []
    for key in ("Subject", "Html", "Text"):
        value = content.get(key)
        if value is not None and not isinstance(value, str):
            raise ValidationError(f"TemplateContent.{key}", "must be a string")
        parts.append(value)
    return parts[0] or "", parts[1], parts[2]


def suppression_out(row: Suppression) -> Doc:
    return {"EmailAddress": row.address, "Reason": str(row.reason),
            "LastUpdateTime": seconds(row.created_at)}


def reasons_in(values: Iterable[str]) -> frozenset[SuppressionReason] | None:
    """The `Reason` query filter; None (no filter) when absent or naming every reason."""
    reasons = frozenset(reason_of(v) for v in values if v)
    return reasons if reasons and reasons != frozenset(SuppressionReason) else None


def time_in(name: str, raw: str | None) -> int | None:
    """A query-string timestamp: ISO 8601 with a zone (what botocore sends) or epoch s."""
    if not raw:
        return None
    try:
        return round(float(raw) * 1000)
    except ValueError:
        pass
    try:
        when = datetime.fromisoformat(raw)
    except ValueError:
        raise ValidationError(name, "must be an ISO 8601 date-time or epoch seconds") from None
    if when.tzinfo is None:
        raise ValidationError(name, "must name its time zone (e.g. a trailing Z)")
    return round(when.timestamp() * 1000)


def _after(token: str | None) -> str | None:
    if not token:
        return None
    try:
        after = base64.b64decode(token.encode(), altchars=b"-_", validate=True).decode()
    except (ValueError, UnicodeDecodeError, binascii.Error):
        after = ""
    if not after:
        raise ValidationError("NextToken", "is not a token this API returned")
    return after


def page_suppressions(email: EmailService, reasons: frozenset[SuppressionReason] | None,
                      start_ms: int | None, end_ms: int | None, limit: int,
                      next_token: str | None) -> tuple[list[Suppression], str | None]:
    """One page of the list, in address order. One reason is the store's own filter;
    several, or a date range, are applied here while scanning (run on the store's thread).
    The token is the last address returned, so a page never skips or repeats a row."""
    after = _after(next_token)
    single = next(iter(reasons)) if reasons is not None and len(reasons) == 1 else None
    found: list[Suppression] = []
    while len(found) <= limit:
        rows = email.scan_suppressions(single, after, _SCAN)
        for row in rows:
            if (reasons is None or row.reason in reasons) and \
                    (start_ms is None or row.created_at >= start_ms) and \
                    (end_ms is None or row.created_at <= end_ms):
                found.append(row)
                if len(found) > limit:
                    break
        if len(rows) < _SCAN:
            break
        after = rows[-1].address
    more = len(found) > limit
    found = found[:limit]
    return found, (page_token(found[-1].address) if more else None)


def rendered_mime(rendered: RenderedEmail, now_ms: int, message_id: str) -> str:
    """TestRenderEmailTemplate's answer: the whole MIME message, as SES gives it, without
    From or To (a template has no sender or recipient)."""
    text = message_text(Outgoing(
        from_address=_PLACEHOLDER, to=(), cc=(), reply_to=(), subject=rendered.subject,
        text=rendered.text, html=rendered.html, message_id=message_id, date_ms=now_ms))
    return text.split(CRLF, 1)[1]  # the first line is the one-address From


def _data(raw: Any, name: str) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, str):
        raise ValidationError(name, "must be a JSON object in a string")
    try:
        return parse_template_data(raw)
    except ValidationError as exc:
        raise ValidationError(name, exc.rule) from None


def _tags(items: Any) -> dict[Any, Any]:
    return {t.get("Name"): t for t in items or [] if isinstance(t, dict)}


def bulk_messages(body: Doc) -> tuple[str, list[EmailMessage | ValidationError]]:
    """(template name, one message or entry error per BulkEmailEntries item).

    Each entry is the default template with its own destination; its ReplacementTemplateData
    is merged over the default TemplateData (its keys win), its ReplacementTags over the
    DefaultEmailTags (by name) and its ReplacementHeaders follow the template's Headers. A
    problem with the request as a whole raises; one with an entry is that entry's result.
    """
    default = body.get("DefaultContent")
    template = default.get("Template") if isinstance(default, dict) else None
    if not isinstance(template, dict):
        raise ValidationError("DefaultContent.Template", "is required")
    entries = body.get("BulkEmailEntries")
    if not isinstance(entries, list) or not 1 <= len(entries) <= MAX_BULK_ENTRIES:
        raise ValidationError("BulkEmailEntries",
                              f"must be a list of 1 to {MAX_BULK_ENTRIES} entries")
    data = _data(template.get("TemplateData"), "DefaultContent.Template.TemplateData")
    common: Doc = {k: body[k] for k in ("FromEmailAddress", "ReplyToAddresses",
                                        "ConfigurationSetName") if k in body}

    def document(destination: Any, entry: Doc) -> Doc:
        tpl = {k: v for k, v in template.items() if k != "TemplateData"}
        replacement = entry.get("ReplacementEmailContent")
        more = replacement.get("ReplacementTemplate") if isinstance(replacement, dict) else None
        own = more.get("ReplacementTemplateData") if isinstance(more, dict) else None
        values = {**data, **_data(own, "ReplacementTemplateData")}
        tpl["TemplateData"] = json.dumps(values)
        if entry.get("ReplacementHeaders"):
            tpl["Headers"] = [*(template.get("Headers") or []), *entry["ReplacementHeaders"]]
        tags = {**_tags(body.get("DefaultEmailTags")), **_tags(entry.get("ReplacementTags"))}
        return {**common, "Destination": destination, "Content": {"Template": tpl},
                **({"EmailTags": list(tags.values())} if tags else {})}

    # The request-wide parts, checked once: an error there is the whole request's.
    first = parse_send_email(document({"ToAddresses": [_PLACEHOLDER]}, {}))
    assert first.template is not None
    out: list[EmailMessage | ValidationError] = []
    for entry in entries:
        try:
            if not isinstance(entry, dict):
                raise ValidationError("BulkEmailEntries", "each entry must be an object")
            if not isinstance(entry.get("Destination"), dict):
                raise ValidationError("Destination", "is required")
            out.append(parse_send_email(document(entry["Destination"], entry)))
        except ValidationError as exc:
            out.append(exc)
    return first.template, out
