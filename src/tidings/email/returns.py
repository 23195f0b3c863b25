"""Returned mail, parsed: DSNs (RFC 3464), ARF complaint reports (RFC 5965) and the JSON of
relay webhooks (Amazon SES notifications, bare or in their SNS envelope; Postmark's bounce
and spam-complaint webhooks) become `Returned` records, matched later to a delivery.

A DSN is `multipart/report; report-type=delivery-status`: a human part, a
`message/delivery-status` part (per-message fields, then one block per recipient with
Final-Recipient, Action and Status) and, usually, the original message or its headers.
`Action: failed` with a 5.x.x Status is a hard bounce; a 4.x.x Status, or `Action:
delayed`, a soft one; `delivered`, `relayed` and `expanded` are not bounces at all. An ARF
report is `multipart/report; report-type=feedback-report` whose `message/feedback-report`
part says Feedback-Type (abuse, fraud, …) and Original-Rcpt-To; the complained-of address
is that, else the original message's To.

What identifies the delivery: the VERP recipient the report came back to
(`bounces+<delivery id>@…`, see `verp_address`), else the original Message-ID, whose
left-hand side is the delivery id for mail tidings rendered.
"""

from __future__ import annotations

import email.parser
import email.policy
import email.utils
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from email.message import Message
from typing import Any

from tidings.errors import ValidationError
from tidings.model.email import normalise_address
from tidings.model.email_events import EventKind

_PARSER = email.parser.BytesParser(policy=email.policy.compat32)
_STATUS = re.compile(r"^\s*([245])\.\d{1,3}\.\d{1,3}")
_ID = re.compile(r"^[A-Za-z0-9-]{1,80}$")


@dataclass(frozen=True)
class Returned:
    """One bounced or complaining address, as a report or webhook gave it."""

    address: str  # normalised
    kind: EventKind
    source: str  # dsn, arf, ses, postmark
    detail: str
    delivery_id: str | None = None  # from the VERP address, when the report came to one
    message_id: str | None = None  # the original Message-ID, without <>


def verp_address(bounce_address: str, delivery_id: str) -> str:
    """The envelope sender of one delivery: `bounces@x` → `bounces+<id>@x`, so whatever
    comes back names the delivery whatever the report's format (VERP)."""
    local, _, domain = bounce_address.rpartition("@")
    return f"{local}+{delivery_id}@{domain}"


def delivery_of_verp(recipient: str) -> str | None:
    local = recipient.rpartition("@")[0]
    _, plus, tag = local.partition("+")
    return tag if plus and _ID.match(tag) else None


def _address(value: str | None) -> str | None:
    """`rfc822; a@b` or `<a@b>` or `a@b` → "a@b" (normalised); None if not an address."""
    if not value:
        return None
    value = value.split(";", 1)[1] if ";" in value else value
    addr = email.utils.parseaddr(value.strip())[1]
    return normalise_address(addr) if "@" in addr else None


def _original_headers(report: Message) -> Message | None:
    for part in report.walk():
        kind = part.get_content_type()
        if kind == "message/rfc822":
            inner = part.get_payload()
            if isinstance(inner, list) and inner and isinstance(inner[0], Message):
                return inner[0]
        if kind == "text/rfc822-headers":
            raw = part.get_payload(decode=True)
            if isinstance(raw, bytes):
                return _PARSER.parsebytes(raw, headersonly=True)
    return None


def _message_id(headers: Message | None) -> str | None:
    value = headers.get("Message-ID") if headers is not None else None
    return str(value).strip().strip("<>") or None if value else None


def _blocks(part: Message) -> list[Message]:
    """The field blocks of a message/delivery-status or message/feedback-report part."""
    payload = part.get_payload()
    if isinstance(payload, list):
        return [p for p in payload if isinstance(p, Message)]
    text = payload if isinstance(payload, str) else ""
    return [_PARSER.parsebytes(block.strip().encode() + b"\n\n", headersonly=True)
            for block in re.split(r"\r?\n\s*\r?\n", text) if block.strip()]


def parse_report(data: bytes, verp_id: str | None = None) -> list[Returned]:
    """The bounces or complaint a DSN or an ARF report carries (empty: neither, e.g. an
    auto-reply or a `delayed`-only notice with nothing to count)."""
    report = _PARSER.parsebytes(data)
    if report.get_content_type() != "multipart/report":
        return []
    kind = str(report.get_param("report-type") or "").lower()
    original = _message_id(_original_headers(report))
    if kind == "delivery-status":
        return list(_dsn(report, verp_id, original))
    if kind == "feedback-report":
        return list(_arf(report, verp_id, original))
    return []


def _dsn(report: Message, verp_id: str | None, original: str | None) -> Iterator[Returned]:
    for part in report.walk():
        if part.get_content_type() != "message/delivery-status":
            continue
        for block in _blocks(part)[1:]:  # the first block is about the whole message
            address = _address(block.get("Final-Recipient") or block.get("Original-Recipient"))
            action = (block.get("Action") or "").strip().lower()
            status = (block.get("Status") or "").strip()
            m = _STATUS.match(status)
            if address is None or action not in ("failed", "delayed") or m is None:
                continue
            hard = action == "failed" and m.group(1) == "5"
            why = " ".join(str(block.get("Diagnostic-Code") or "").split())
            detail = f"{action} {status}" + (f": {why}" if why else "")
            yield Returned(address, EventKind.HARD_BOUNCE if hard else EventKind.SOFT_BOUNCE,
                           "dsn", detail[:1000], verp_id, original)


def _arf(report: Message, verp_id: str | None, original: str | None) -> Iterator[Returned]:
    headers = _original_headers(report)
    for part in report.walk():
        if part.get_content_type() != "message/feedback-report":
            continue
        fields = _blocks(part)
        if not fields:
            return
        info = fields[0]
        address = _address(info.get("Original-Rcpt-To")) or \
            _address(str(headers.get("To")) if headers is not None and headers.get("To")
                     else None)
        if address is None:
            return
        feedback = str(info.get("Feedback-Type") or "abuse").strip().lower()
        agent = " ".join(str(info.get("User-Agent") or "").split())
        yield Returned(address, EventKind.COMPLAINT, "arf",
                       f"feedback {feedback}" + (f" from {agent}" if agent else ""),
                       verp_id, original)
        return


# relay webhooks --------------------------------------------------------------------------

def _json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        raise ValidationError("body", "must be a JSON document") from None


def parse_ses(body: bytes) -> list[Returned]:
    """An Amazon SES notification (`notificationType`, or `eventType` for event
    publishing), bare or inside an SNS `Notification` envelope. Bounce types: Permanent
    is hard; Transient and Undetermined are soft. Other notification types (Delivery,
    Send, Open …) carry nothing to record."""
    doc = _json(body)
    if not isinstance(doc, dict):
        raise ValidationError("body", "must be an SES notification object")
    if doc.get("Type") == "Notification" and "Message" in doc:
        try:
            doc = json.loads(str(doc["Message"]))
        except ValueError:
            return []  # an SNS message that is no SES notification: nothing to record
        if not isinstance(doc, dict):
            return []
    kind = doc.get("notificationType") or doc.get("eventType")
    mail = doc.get("mail")
    mail = mail if isinstance(mail, dict) else {}
    common = mail.get("commonHeaders")
    common = common if isinstance(common, dict) else {}
    original = str(common.get("messageId") or "").strip().strip("<>") or None
    out = []
    if kind == "Bounce" and isinstance(doc.get("bounce"), dict):
        bounce = doc["bounce"]
        hard = bounce.get("bounceType") == "Permanent"
        for r in bounce.get("bouncedRecipients") or []:
            address = _address(r.get("emailAddress")) if isinstance(r, dict) else None
            if address is None:
                continue
            detail = " ".join(str(x) for x in (
                bounce.get("bounceType"), bounce.get("bounceSubType"), r.get("status"),
                r.get("diagnosticCode")) if x)
            out.append(Returned(address, EventKind.HARD_BOUNCE if hard
                                else EventKind.SOFT_BOUNCE, "ses", detail[:1000],
                                message_id=original))
    elif kind == "Complaint" and isinstance(doc.get("complaint"), dict):
        complaint = doc["complaint"]
        for r in complaint.get("complainedRecipients") or []:
            address = _address(r.get("emailAddress")) if isinstance(r, dict) else None
            if address is not None:
                out.append(Returned(address, EventKind.COMPLAINT, "ses", "feedback " + str(
                    complaint.get("complaintFeedbackType") or "abuse"), message_id=original))
    return out


POSTMARK_HARD = frozenset({"HardBounce", "BadEmailAddress", "ManuallyDeactivated"})
POSTMARK_SOFT = frozenset({"SoftBounce", "Transient", "DnsError", "Blocked", "SMTPApiError",
                           "ContentRelated", "MailFrontier", "Undeliverable"})


def parse_postmark(body: bytes) -> list[Returned]:
    """A Postmark bounce webhook (`RecordType: Bounce`, its `Type` says hard or soft; an
    auto-responder or a subscribe request is not a bounce) or spam-complaint webhook
    (`RecordType: SpamComplaint`)."""
    doc = _json(body)
    if not isinstance(doc, dict):
        raise ValidationError("body", "must be a Postmark webhook object")
    address = _address(doc.get("Email"))
    if address is None:
        return []  # no bounced address: another kind of webhook (Delivery, Open …)
    record, kind = doc.get("RecordType"), str(doc.get("Type") or "")
    detail = " ".join(str(x) for x in (kind, doc.get("Description"), doc.get("Details")) if x)
    if record == "SpamComplaint" or kind == "SpamComplaint":
        return [Returned(address, EventKind.COMPLAINT, "postmark", detail[:1000])]
    if kind in POSTMARK_HARD:
        return [Returned(address, EventKind.HARD_BOUNCE, "postmark", detail[:1000])]
    if kind in POSTMARK_SOFT:
        return [Returned(address, EventKind.SOFT_BOUNCE, "postmark", detail[:1000])]
    return []
