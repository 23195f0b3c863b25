"""The SendEmail document: parsed, validated field by field, and written back."""

from __future__ import annotations

import json

import pytest

from tidings.email.sesv2 import parse_send_email, send_email_document
from tidings.errors import ValidationError

DOC = {
    "FromEmailAddress": "News <news@example.com>",
    "Destination": {"ToAddresses": ["a@example.org"], "CcAddresses": ["b@example.org"],
                    "BccAddresses": ["A@example.org", "c@example.org"]},
    "ReplyToAddresses": ["r@example.com"],
    "Content": {"Template": {"TemplateName": "welcome", "TemplateData": '{"name": "Ana"}'}},
    "EmailTags": [{"Name": "campaign", "Value": "spring"}],
    "ListManagementOptions": {"ContactListName": "news", "TopicName": "weekly"},
}


def test_send_email_document_round_trips() -> None:
    msg = parse_send_email(json.dumps(DOC))
    assert msg.template == "welcome" and msg.template_data == {"name": "Ana"}
    assert msg.recipients == ("a@example.org", "b@example.org", "A@example.org",
                              "c@example.org")
    assert msg.tags == (("campaign", "spring"),) and msg.list_id == "news/weekly"
    assert parse_send_email(send_email_document(msg)) == msg
    simple = {**DOC, "Content": {"Simple": {"Subject": {"Data": "Hi"},
                                            "Body": {"Html": {"Data": "<p>x</p>"}}}}}
    parsed = parse_send_email(simple)
    assert (parsed.subject, parsed.html, parsed.text) == ("Hi", "<p>x</p>", None)


@pytest.mark.parametrize(("change", "field"), [
    ({"FromEmailAddress": None}, "FromEmailAddress"),
    ({"FromEmailAddress": "Evil\r\nBcc: x@y.z <a@b.c>"}, "FromEmailAddress"),
    ({"Destination": {}}, "Destination"),
    ({"Destination": {"ToAddresses": "a@example.org"}}, "Destination.ToAddresses"),
    ({"Destination": {"ToAddresses": [f"u{i}@example.org" for i in range(51)]}},
     "Destination"),
    ({"Destination": {"ToAddresses": ["ünï@example.org"]}}, "Destination.ToAddresses"),
    ({"Content": {}}, "Content"),
    ({"Content": {"Raw": {"Data": "x"}}}, "Content.Raw"),
    ({"Content": {"Template": {"TemplateName": "t", "TemplateData": "[1]"}}}, "TemplateData"),
    ({"Content": {"Simple": {"Subject": {"Data": "s"}, "Body": {}}}}, "Content.Simple.Body"),
    ({"EmailTags": [{"Name": "bad name", "Value": "v"}]}, "EmailTags"),
    ({"ListManagementOptions": {}}, "ListManagementOptions.ContactListName"),
])
def test_invalid_documents_name_the_field(change: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        parse_send_email({**DOC, **change})
    assert info.value.field == field


@pytest.mark.parametrize("text", [json.dumps(DOC), f"  {json.dumps(DOC)}\n",
                                  json.dumps(DOC, indent=2)])
def test_document_text_is_read_whole_with_or_without_whitespace(text: str) -> None:
    assert parse_send_email(text) == parse_send_email(DOC)


@pytest.mark.parametrize("text", [json.dumps(DOC) + " {}", json.dumps(DOC) + "x",
                                  json.dumps(DOC)[:-1], "", " ", "NaN"])
def test_document_text_that_is_not_one_json_value_is_refused(text: str) -> None:
    with pytest.raises(ValidationError) as info:
        parse_send_email(text)
    assert info.value.field == "Input"
