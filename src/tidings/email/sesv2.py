"""The SES v2 SendEmail document (the subset tidings sends), parsed into an `EmailMessage`.

One parser for every way in: the email schedule target's input, the SES universal target
`arn:aws:scheduler:::aws-sdk:sesv2:sendEmail` (which carries the same document), the
native API and the CLI. Field names and nesting follow the SES v2 API reference
(SendEmail): FromEmailAddress, Destination.{To,Cc,Bcc}Addresses, ReplyToAddresses,
Content.Template.{TemplateName,TemplateData} or Content.Simple.{Subject,Body}, EmailTags,
ListManagementOptions. Content.Raw is not supported (tidings builds the MIME itself).
"""

from __future__ import annotations

import json
from typing import Any

from tidings.email.templates import parse_template_data
from tidings.errors import ValidationError
from tidings.model.email import EmailMessage


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


def parse_send_email(doc: Any) -> EmailMessage:
    """Validate a SendEmail document (a dict, or its JSON text) and return the message."""
    if isinstance(doc, str):
        try:
            doc = json.loads(doc)
        except ValueError as exc:
            raise ValidationError("Input", f"must be a JSON SendEmail document ({exc})") from None
    doc = _obj(doc, "Input")
    sender = doc.get("FromEmailAddress")
    if not isinstance(sender, str):
        raise ValidationError("FromEmailAddress", "is required")
    dest = _obj(doc.get("Destination") or {}, "Destination")
    content = _obj(doc.get("Content"), "Content")
    template = subject = text = html = None
    data: dict[str, Any] = {}
    if "Raw" in content:
        raise ValidationError("Content.Raw", "is not supported: use Template or Simple")
    if ("Template" in content) == ("Simple" in content):
        raise ValidationError("Content", "must have exactly one of Template or Simple")
    if "Template" in content:
        tpl = _obj(content["Template"], "Content.Template")
        template = tpl.get("TemplateName")
        if not isinstance(template, str) or not template:
            raise ValidationError("Content.Template.TemplateName", "is required")
        raw = tpl.get("TemplateData", "{}")
        if isinstance(raw, dict):  # tolerated: a decoded object instead of its JSON text
            data = raw
        elif isinstance(raw, str):
            data = parse_template_data(raw)
        else:
            raise ValidationError("Content.Template.TemplateData", "must be a JSON string")
    else:
        simple = _obj(content["Simple"], "Content.Simple")
        subject = _data(simple.get("Subject"), "Content.Simple.Subject")
        body = _obj(simple.get("Body") or {}, "Content.Simple.Body")
        text = _data(body.get("Text"), "Content.Simple.Body.Text")
        html = _data(body.get("Html"), "Content.Simple.Body.Html")
    tags: list[tuple[str, str]] = []
    for item in doc.get("EmailTags") or []:
        item = _obj(item, "EmailTags")
        name, value = item.get("Name"), item.get("Value", "")
        if not isinstance(name, str) or not isinstance(value, str):
            raise ValidationError("EmailTags", "each tag is {\"Name\": str, \"Value\": str}")
        tags.append((name, value))
    headers: list[tuple[str, str]] = []
    for item in doc.get("Headers") or []:  # SES v2 Simple.Headers, accepted at the top too
        item = _obj(item, "Headers")
        name, value = item.get("Name"), item.get("Value")
        if not isinstance(name, str) or not isinstance(value, str):
            raise ValidationError("Headers", "each header is {\"Name\": str, \"Value\": str}")
        headers.append((name, value))
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
        headers=tuple(headers), tags=tuple(tags), list_id=list_id,
    ).validated()


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
    if msg.template is not None:
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
