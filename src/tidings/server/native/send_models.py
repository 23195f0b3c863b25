"""The SES v2 SendEmail document the native API takes (`POST /v1/email/send`), typed.

The fields are SES's own names and nesting (the SES v2 API reference, SendEmail), limited
to what tidings sends: an unknown field is refused rather than silently dropped. The
model checks the document's shape and every rule of one field (addresses, header names,
tags, exactly one kind of content); the engine (`email/sesv2.py`) parses it again, as it
does for the CLI, the email schedule target and the SES face, and decides what depends on
more than the document: the template exists, the sender is one of the node's identities,
To, Cc and Bcc hold 1-50 recipients together, a Raw message's own headers.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import ConfigDict, Field, JsonValue, StringConstraints, model_validator

from tidings.email.sesv2 import MAX_RAW_BYTES
from tidings.model.email import MAX_RECIPIENTS
from tidings.server.errors import FieldRule
from tidings.server.native.rules import (
    EMAIL_PATTERN,
    Base64,
    In,
    any_of,
    exactly_one_of,
    say,
)
from tidings.server.native.rules import ContactListName as ListName
from tidings.server.native.rules import TemplateName as TemplateNameText

#: An address, bare or with a display name (`Ana <ana@example.com>`), on one line.
_BARE = EMAIL_PATTERN[1:-1]
SesAddress = Annotated[str, StringConstraints(max_length=254, pattern=say(
    rf'^(?:{_BARE}|[^<>"\x00-\x1f\x7f]*<{_BARE}>)$',
    "must be an email address (ASCII, a domain with a dot), bare or as Name <address>"))]
Addresses = Annotated[list[SesAddress], Field(max_length=MAX_RECIPIENTS)]
#: One line of text: no line break can smuggle in a header.
OneLine = Annotated[str, StringConstraints(pattern=r"^[^\r\n]*$")]
#: Base64 of up to MAX_RAW_BYTES bytes.
RawData = Annotated[Base64, StringConstraints(max_length=4 * -(-MAX_RAW_BYTES // 3))]


class Header(In):
    Name: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9-]{1,76}$")]
    Value: OneLine


class Tag(In):
    Name: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_-]{1,256}$")]
    Value: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.@-]{0,256}$")] = ""


class DestinationIn(In):
    ToAddresses: Addresses | None = None
    CcAddresses: Addresses | None = None
    BccAddresses: Addresses | None = None


class SubjectIn(In):
    Data: OneLine
    Charset: str | None = Field(None, description="Accepted; tidings always sends UTF-8.")


class PartIn(In):
    Data: str
    Charset: str | None = Field(None, description="Accepted; tidings always sends UTF-8.")


def _a_part(name: str) -> dict[str, Any]:
    return {"required": [name], "properties": {name: {
        "type": "object", "required": ["Data"],
        "properties": {"Data": {"type": "string", "minLength": 1}}}}}


class BodyIn(In):
    model_config = ConfigDict(json_schema_extra={"anyOf": [_a_part("Text"), _a_part("Html")]})

    Text: PartIn | None = None
    Html: PartIn | None = None

    @model_validator(mode="after")
    def _has_a_part(self) -> BodyIn:
        if not (self.Text and self.Text.Data) and not (self.Html and self.Html.Data):
            raise FieldRule("Text", "give Text, Html or both, not empty")
        return self


class SimpleIn(In):
    Subject: SubjectIn
    Body: BodyIn
    Headers: list[Header] | None = None


class TemplateIn(In):
    model_config = ConfigDict(json_schema_extra=any_of("TemplateName", "TemplateArn"))

    TemplateName: TemplateNameText | None = None
    TemplateArn: Annotated[str, StringConstraints(
        pattern=r"^arn:aws[a-z-]*:ses:[a-z0-9-]*:[0-9]*:template/[A-Za-z0-9_-]{1,64}$")] | \
        None = Field(None, description="Names the template instead of TemplateName.")
    TemplateData: str | dict[str, JsonValue] = Field(
        "{}", description="The data: a JSON object's text (or the object itself).")
    Headers: list[Header] | None = None

    @model_validator(mode="after")
    def _named(self) -> TemplateIn:
        if self.TemplateName is None and self.TemplateArn is None:
            raise FieldRule("TemplateName", "is required (or TemplateArn)")
        return self


class RawIn(In):
    Data: RawData = Field(description="Base64 of a whole MIME message (up to 640 KiB).")


class ContentIn(In):
    model_config = ConfigDict(json_schema_extra=exactly_one_of("Simple", "Template", "Raw"))

    Simple: SimpleIn | None = None
    Template: TemplateIn | None = None
    Raw: RawIn | None = None

    @model_validator(mode="after")
    def _one(self) -> ContentIn:
        if sum(x is not None for x in (self.Simple, self.Template, self.Raw)) != 1:
            raise FieldRule("Simple", "give exactly one of Simple, Template or Raw")
        return self


class ListManagementIn(In):
    ContactListName: ListName
    TopicName: ListName | None = None


def _from_or_raw() -> dict[str, Any]:
    # A Raw message may leave the sender to its own From header.
    return {"anyOf": [any_of("FromEmailAddress")["anyOf"][0],
                      {"required": ["Content"],
                       "properties": {"Content": any_of("Raw")["anyOf"][0]}}]}


class SendEmailIn(In):
    """An SES v2 SendEmail request (the fields tidings sends)."""

    model_config = ConfigDict(json_schema_extra=_from_or_raw())

    FromEmailAddress: SesAddress | None = Field(
        None, description="Required, but for a Raw message with a From header.")
    Destination: DestinationIn | None = Field(
        None, description="1-50 recipients in To, Cc and Bcc together (a Raw message may "
        "name them in its headers instead).")
    ReplyToAddresses: Addresses | None = None
    Content: ContentIn
    EmailTags: list[Tag] | None = None
    ListManagementOptions: ListManagementIn | None = Field(
        None, description="Send to a contact list (and topic): its opt-outs apply, and the "
        "message gets one-click unsubscribe headers.")
    ConfigurationSetName: Annotated[str, StringConstraints(
        pattern=r"^[A-Za-z0-9_-]{1,64}$")] | None = None
    Headers: list[Header] | None = Field(None, description="As Content's Headers (older "
                                         "callers).")

    @model_validator(mode="after")
    def _sender(self) -> SendEmailIn:
        if self.FromEmailAddress is None and self.Content.Raw is None:
            raise FieldRule("FromEmailAddress", "is required")
        return self

    def document(self) -> dict[str, Any]:
        """The document as the engine parses it (what the client sent, nulls left out)."""
        out: dict[str, Any] = self.model_dump(exclude_none=True)
        return out
