"""The SES v2 SendEmail document (the subset tidings sends), parsed into an `EmailMessage`.

One parser for every way in: the email schedule target's input, the SES universal target
`arn:aws:scheduler:::aws-sdk:sesv2:sendEmail` (which carries the same document), the
native API and the CLI. Field names and nesting follow the SES v2 API reference
(SendEmail): FromEmailAddress, Destination.{To,Cc,Bcc}Addresses, ReplyToAddresses,
Content.Template.{TemplateName,TemplateData} or Content.Simple.{Subject,Body}, EmailTags,
ListManagementOptions, ConfigurationSetName, and Content.Raw.{Data} (base64 of a whole MIME
message).

Content.Raw: the bytes are sent as they are (a Message-ID is added only when the message
has none; see `RawEmailMessage`). The envelope sender is FromEmailAddress, else the
message's From; the recipients are Destination's, else the message's To, Cc and Bcc
headers, as SES does. The raw message travels base64-encoded inside the delivery queue's
job, whose body is at most 1 MiB: hence `MAX_RAW_BYTES`.

Content.Template.TemplateArn names the template by its ARN (`...:template/NAME`: the name
is what counts here). Headers are accepted in Content.Simple, Content.Template and, for
older callers, at the top. ConfigurationSetName becomes the `X-SES-CONFIGURATION-SET`
header SES itself reads, so the sent mail records it. Inline TemplateContent and
Attachments are refused with a message saying so.
"""

from __future__ import annotations

import base64
import binascii
import email.parser
import email.policy
import email.utils
import json
import re
from dataclasses import dataclass
from typing import Any

from tidings.email.templates import parse_template_data
from tidings.errors import ValidationError
from tidings.model.email import EmailMessage, check_address

#: Decoded Content.Raw size limit: its base64 (4/3 of it) plus the job's envelope must fit
#: the delivery queue's 1 MiB message limit.
MAX_RAW_BYTES = 640 * 1024
CONFIGURATION_SET_HEADER = "X-SES-CONFIGURATION-SET"
_CONFIGURATION_SET = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_TEMPLATE_ARN = re.compile(r"^arn:aws[a-z-]*:ses:[a-z0-9-]*:\d*:template/(?P<name>[^/]+)$")
_HEADER_PARSER = email.parser.BytesHeaderParser(policy=email.policy.compat32)


@dataclass(frozen=True)
class RawEmailMessage(EmailMessage):
    """A message whose MIME bytes the sender wrote (SES Content.Raw). `to`, `cc` and
    `bcc` hold the envelope recipients; nothing is rendered and no List-Unsubscribe is
    added, since the bytes are not ours to change."""

    raw: bytes = b""
    raw_message_id: str | None = None  # the message's own Message-ID, without <>

    def validated(self) -> RawEmailMessage:
        # The address rules are EmailMessage's; only the content rules differ.
        EmailMessage(from_address=self.from_address, to=self.to, cc=self.cc, bcc=self.bcc,
                     subject="", text="-").validated()
        if len(self.raw) > MAX_RAW_BYTES:
            raise ValidationError("Content.Raw.Data",
                                  f"the message must be at most {MAX_RAW_BYTES} bytes")
        return self

    def bytes_to_send(self, message_id: str) -> bytes:
        """The raw bytes, with `Message-ID: <message_id>` first when they have none."""
        if self.raw_message_id is not None:
            return self.raw
        return f"Message-ID: <{message_id}>\r\n".encode("ascii") + self.raw


def _obj(doc: Any, name: str) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise ValidationError(name, "must be a JSON object")
    return doc


def _addresses(doc: dict[str, Any], key: str, name: str) -> tuple[str, ...]:
    value = doc.get(key) or []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValidationError(name, "must be a list of email addresses")
    return tuple(value)


def _data(doc: Any, name: str) -> str | None:
    if doc is None:
        return None
    value = _obj(doc, name).get("Data")
    if not isinstance(value, str):
        raise ValidationError(f"{name}.Data", "must be a string")
    return value


_decode = json.JSONDecoder().raw_decode


def _document(text: str) -> Any:
    """`json.loads(text)`, at half its cost for a document that is one JSON value and
    nothing else (every email delivery parses one: bench/email.py): `raw_decode` skips
    the whitespace regexes around the value. Anything else (whitespace around it,
    trailing text, bad JSON) goes to `json.loads`, which accepts or rejects it as ever."""
    try:
        value, end = _decode(text)
    except ValueError:
        end = -1
    return value if end == len(text) else json.loads(text)


def parse_send_email(doc: Any) -> EmailMessage:
    """Validate a SendEmail document (a dict, or its JSON text) and return the message."""
    if isinstance(doc, str):
        try:
            doc = _document(doc)
        except ValueError as exc:
            raise ValidationError("Input", f"must be a JSON SendEmail document ({exc})") from None
    doc = _obj(doc, "Input")
    sender = doc.get("FromEmailAddress")
    raw = isinstance(doc.get("Content"), dict) and "Raw" in doc["Content"]
    if not isinstance(sender, str) and not raw:  # Raw: the message's own From will do
        raise ValidationError("FromEmailAddress", "is required")
    dest = _obj(doc.get("Destination") or {}, "Destination")
    content = _obj(doc.get("Content"), "Content")
    if sum(k in content for k in ("Raw", "Template", "Simple")) != 1:
        raise ValidationError("Content", "must have exactly one of Simple, Template or Raw")
    if raw:
        return _parse_raw(doc, dest, _obj(content["Raw"], "Content.Raw"))
    assert isinstance(sender, str)
    template = subject = text = html = None
    data: dict[str, Any] = {}
    part = _obj(content["Template"] if "Template" in content else content["Simple"],
                "Content.Template" if "Template" in content else "Content.Simple")
    if part.get("Attachments"):
        raise ValidationError("Content.Attachments",
                              "are not supported: send a Raw message with its attachments")
    headers = _headers(part.get("Headers"), "Content.Headers") + \
        _headers(doc.get("Headers"), "Headers")
    config_set = doc.get("ConfigurationSetName")
    if config_set is not None:
        if not isinstance(config_set, str) or not _CONFIGURATION_SET.match(config_set):
            raise ValidationError("ConfigurationSetName",
                                  "must be 1-64 letters, digits, '_' and '-'")
        headers = [h for h in headers if h[0].lower() != CONFIGURATION_SET_HEADER.lower()]
        headers.append((CONFIGURATION_SET_HEADER, config_set))
    if "Template" in content:
        tpl = _obj(content["Template"], "Content.Template")
        if tpl.get("TemplateContent") is not None:
            raise ValidationError("Content.Template.TemplateContent",
                                  "inline templates are not supported: create the template "
                                  "and name it")
        template = tpl.get("TemplateName")
        arn = tpl.get("TemplateArn")
        if template is None and isinstance(arn, str):
            m = _TEMPLATE_ARN.match(arn)
            if m is None:
                raise ValidationError("Content.Template.TemplateArn",
                                      "must be arn:aws:ses:REGION:ACCOUNT:template/NAME")
            template = m.group("name")
        if not isinstance(template, str) or not template:
            raise ValidationError("Content.Template.TemplateName",
                                  "is required (or TemplateArn)")
        given = tpl.get("TemplateData", "{}")
        if isinstance(given, dict):  # tolerated: a decoded object instead of its JSON text
            data = given
        elif isinstance(given, str):
            data = parse_template_data(given)
        else:
            raise ValidationError("Content.Template.TemplateData", "must be a JSON string")
    else:
        simple = _obj(content["Simple"], "Content.Simple")
        subject = _data(simple.get("Subject"), "Content.Simple.Subject")
        body = _obj(simple.get("Body") or {}, "Content.Simple.Body")
        text = _data(body.get("Text"), "Content.Simple.Body.Text")
        html = _data(body.get("Html"), "Content.Simple.Body.Html")
    list_id = None
    lmo = doc.get("ListManagementOptions")
    if lmo is not None:
        lmo = _obj(lmo, "ListManagementOptions")
        contact_list = lmo.get("ContactListName")
        if not isinstance(contact_list, str) or not contact_list:
            raise ValidationError("ListManagementOptions.ContactListName", "is required")
        topic = lmo.get("TopicName")
        list_id = contact_list if not topic else f"{contact_list}/{topic}"
    return EmailMessage(
        from_address=sender, to=_addresses(dest, "ToAddresses", "Destination.ToAddresses"),
        cc=_addresses(dest, "CcAddresses", "Destination.CcAddresses"),
        bcc=_addresses(dest, "BccAddresses", "Destination.BccAddresses"),
        reply_to=_addresses(doc, "ReplyToAddresses", "ReplyToAddresses"),
        template=template, template_data=data, subject=subject, text=text, html=html,
        headers=tuple(headers), tags=_tags(doc), list_id=list_id,
    ).validated()


def _headers(items: Any, name: str) -> list[tuple[str, str]]:
    headers: list[tuple[str, str]] = []
    if items is not None and not isinstance(items, list):
        raise ValidationError(name, "must be a list of {\"Name\": str, \"Value\": str}")
    for item in items or []:
        item = _obj(item, name)
        key, value = item.get("Name"), item.get("Value")
        if not isinstance(key, str) or not isinstance(value, str):
            raise ValidationError(name, "each header is {\"Name\": str, \"Value\": str}")
        headers.append((key, value))
    return headers


def _header_addresses(values: list[str], name: str) -> tuple[str, ...]:
    found = [addr for _, addr in email.utils.getaddresses(values) if addr]
    return tuple(check_address(name, addr) for addr in found)


def _parse_raw(doc: dict[str, Any], dest: dict[str, Any], raw: dict[str, Any],
               ) -> RawEmailMessage:
    data = raw.get("Data")
    try:
        if not isinstance(data, str) or not data:
            raise ValueError
        body = base64.b64decode(data, validate=True)
    except (ValueError, binascii.Error):
        raise ValidationError("Content.Raw", "Data must be the base64 of a MIME message")\
            from None
    if len(body) > MAX_RAW_BYTES:  # before parsing a large message's headers
        raise ValidationError("Content.Raw.Data",
                              f"the message must be at most {MAX_RAW_BYTES} bytes")
    head = _HEADER_PARSER.parsebytes(body)
    if not head.keys():
        raise ValidationError("Content.Raw.Data", "is not a MIME message: it has no headers")
    sender = doc.get("FromEmailAddress")
    if sender is None:
        senders = _header_addresses([str(v) for v in head.get_all("From", [])],
                                    "Content.Raw.Data From")
        if not senders:
            raise ValidationError("Content.Raw.Data",
                                  "has no From header, and FromEmailAddress is not given")
        sender = senders[0]
    if not isinstance(sender, str):
        raise ValidationError("FromEmailAddress", "must be an email address")
    to = _addresses(dest, "ToAddresses", "Destination.ToAddresses")
    cc = _addresses(dest, "CcAddresses", "Destination.CcAddresses")
    bcc = _addresses(dest, "BccAddresses", "Destination.BccAddresses")
    if not (to or cc or bcc):
        to, cc, bcc = (_header_addresses([str(v) for v in head.get_all(h, [])],
                                         f"Content.Raw.Data {h}") for h in ("To", "Cc", "Bcc"))
        if not (to or cc or bcc):
            raise ValidationError("Content.Raw.Data", "has no To, Cc or Bcc header, and "
                                  "Destination names no recipient")
    message_id = head.get("Message-ID")
    return RawEmailMessage(
        from_address=sender, to=to, cc=cc, bcc=bcc, unsubscribe=False, raw=body,
        raw_message_id=str(message_id).strip().strip("<>") if message_id else None,
        tags=_tags(doc),
    ).validated()


def _tags(doc: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    tags: list[tuple[str, str]] = []
    for item in doc.get("EmailTags") or []:
        item = _obj(item, "EmailTags")
        name, value = item.get("Name"), item.get("Value", "")
        if not isinstance(name, str) or not isinstance(value, str):
            raise ValidationError("EmailTags", "each tag is {\"Name\": str, \"Value\": str}")
        tags.append((name, value))
    return tuple(tags)


def send_email_document(msg: EmailMessage) -> dict[str, Any]:
    """The inverse of `parse_send_email`: what the CLI and API enqueue."""
    doc: dict[str, Any] = {"FromEmailAddress": msg.from_address,
                           "Destination": {"ToAddresses": list(msg.to)}}
    if msg.cc:
        doc["Destination"]["CcAddresses"] = list(msg.cc)
    if msg.bcc:
        doc["Destination"]["BccAddresses"] = list(msg.bcc)
    if msg.reply_to:
        doc["ReplyToAddresses"] = list(msg.reply_to)
    if isinstance(msg, RawEmailMessage):
        doc["Content"] = {"Raw": {"Data": base64.b64encode(msg.raw).decode("ascii")}}
    elif msg.template is not None:
        doc["Content"] = {"Template": {"TemplateName": msg.template,
                                       "TemplateData": json.dumps(msg.template_data)}}
    else:
        body: dict[str, Any] = {}
        if msg.text is not None:
            body["Text"] = {"Data": msg.text}
        if msg.html is not None:
            body["Html"] = {"Data": msg.html}
        doc["Content"] = {"Simple": {"Subject": {"Data": msg.subject or ""}, "Body": body}}
    if msg.tags:
        doc["EmailTags"] = [{"Name": n, "Value": v} for n, v in msg.tags]
    if msg.headers:
        doc["Headers"] = [{"Name": n, "Value": v} for n, v in msg.headers]
    if msg.list_id:
        contact, _, topic = msg.list_id.partition("/")
        doc["ListManagementOptions"] = {"ContactListName": contact,
                                        **({"TopicName": topic} if topic else {})}
    return doc
