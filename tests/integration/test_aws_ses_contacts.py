"""SES v2 contact lists, topics and contacts through boto3 `sesv2`, against a real
`tidings serve` and SMTP relay, on both backends: the operations' shapes and errors, and
what they change about sending (an unsubscribe opts out of a topic or list, never the
account; a send to a topic skips opted-out contacts; transactional mail still goes)."""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from email_relay import Relay
from test_aws_ses import SENDER, Served, fails, serve

from conftest import BACKENDS, module_backend
from tidings.model.email import DeliveryState

SIMPLE = {"Simple": {"Subject": {"Data": "Hello"}, "Body": {"Text": {"Data": "Body"}}}}


@pytest.fixture(scope="module", params=BACKENDS)
def served(request: pytest.FixtureRequest,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    yield from module_backend(request.param, tmp_path_factory.mktemp("ses-contacts"),
                              lambda db: serve(db, Relay()), "AWS_ENDPOINT_URL_SESV2")


@pytest.fixture(scope="module")
def ses(served: Served) -> Any:
    return served.client()


def topic(name: str, default: str = "OPT_IN") -> dict[str, str]:
    return {"TopicName": name, "DisplayName": name.title(), "Description": f"about {name}",
            "DefaultSubscriptionStatus": default}


def test_contact_list_and_contact_operations(ses: Any) -> None:
    ses.create_contact_list(ContactListName="crud", Topics=[topic("deals")],
                            Description="the crud list", Tags=[{"Key": "k", "Value": "v"}])
    got = ses.get_contact_list(ContactListName="crud")
    assert got["ContactListName"] == "crud" and got["Description"] == "the crud list"
    assert got["Topics"] == [topic("deals")]
    assert got["CreatedTimestamp"] <= got["LastUpdatedTimestamp"]
    assert "crud" in [c["ContactListName"] for c in ses.list_contact_lists()["ContactLists"]]
    ses.update_contact_list(ContactListName="crud", Topics=[topic("deals"),
                                                            topic("tips", "OPT_OUT")])
    assert [t["TopicName"] for t in ses.get_contact_list(ContactListName="crud")["Topics"]] \
        == ["deals", "tips"]

    ses.create_contact(ContactListName="crud", EmailAddress="Ana@Example.org",
                       TopicPreferences=[{"TopicName": "deals",
                                          "SubscriptionStatus": "OPT_OUT"}],
                       AttributesData='{"name": "Ana"}')
    ana = ses.get_contact(ContactListName="crud", EmailAddress="ana@example.org")
    assert ana["EmailAddress"] == "ana@example.org" and ana["UnsubscribeAll"] is False
    assert ana["TopicPreferences"] == [{"TopicName": "deals", "SubscriptionStatus": "OPT_OUT"}]
    assert ana["TopicDefaultPreferences"] == [{"TopicName": "tips",
                                               "SubscriptionStatus": "OPT_OUT"}]
    assert ana["AttributesData"] == '{"name": "Ana"}'
    ses.update_contact(ContactListName="crud", EmailAddress="ana@example.org",
                       TopicPreferences=[{"TopicName": "tips", "SubscriptionStatus": "OPT_IN"}],
                       UnsubscribeAll=True)
    ana = ses.get_contact(ContactListName="crud", EmailAddress="ana@example.org")
    assert ana["UnsubscribeAll"] is True and ana["AttributesData"] == '{"name": "Ana"}'
    assert ana["TopicPreferences"] == [{"TopicName": "tips", "SubscriptionStatus": "OPT_IN"}]

    # the errors, as SES names them
    assert fails(ses.create_contact_list, ContactListName="crud")[:2] == \
        (400, "AlreadyExistsException")
    assert fails(ses.create_contact, ContactListName="crud",
                 EmailAddress="ana@example.org")[:2] == (400, "AlreadyExistsException")
    assert fails(ses.get_contact_list, ContactListName="nope")[:2] == (404, "NotFoundException")
    assert fails(ses.create_contact, ContactListName="nope",
                 EmailAddress="x@example.org")[:2] == (404, "NotFoundException")
    assert fails(ses.get_contact, ContactListName="crud",
                 EmailAddress="bo@example.org")[:2] == (404, "NotFoundException")
    unknown_topic = fails(ses.create_contact, ContactListName="crud",
                          EmailAddress="bo@example.org",
                          TopicPreferences=[{"TopicName": "nope",
                                             "SubscriptionStatus": "OPT_IN"}])
    assert unknown_topic[:2] == (400, "BadRequestException") and "nope" in unknown_topic[2]
    bad = fails(ses.create_contact_list, ContactListName="bad name!")
    assert bad[:2] == (400, "BadRequestException") and "ContactListName" in bad[2]
    assert fails(ses.create_contact, ContactListName="crud", EmailAddress="not-an-address"
                 )[:2] == (400, "BadRequestException")
    assert fails(ses.create_contact, ContactListName="crud", EmailAddress="c@example.org",
                 AttributesData="[1]")[:2] == (400, "BadRequestException")

    ses.delete_contact(ContactListName="crud", EmailAddress="ana@example.org")
    assert fails(ses.delete_contact, ContactListName="crud",
                 EmailAddress="ana@example.org")[:2] == (404, "NotFoundException")
    ses.create_contact(ContactListName="crud", EmailAddress="bo@example.org")
    ses.delete_contact_list(ContactListName="crud")
    assert fails(ses.delete_contact_list, ContactListName="crud")[:2] == \
        (404, "NotFoundException")
    ses.create_contact_list(ContactListName="crud")  # its contacts went with it
    assert ses.list_contacts(ContactListName="crud")["Contacts"] == []


def test_list_contacts_filters_and_pages(ses: Any) -> None:
    ses.create_contact_list(ContactListName="filters",
                            Topics=[topic("deals"), topic("tips", "OPT_OUT")])
    for i in range(5):
        ses.create_contact(ContactListName="filters", EmailAddress=f"p{i}@example.org")
    ses.update_contact(ContactListName="filters", EmailAddress="p1@example.org",
                       TopicPreferences=[{"TopicName": "deals", "SubscriptionStatus": "OPT_OUT"}])
    ses.update_contact(ContactListName="filters", EmailAddress="p2@example.org",
                       TopicPreferences=[{"TopicName": "tips", "SubscriptionStatus": "OPT_IN"}])
    ses.update_contact(ContactListName="filters", EmailAddress="p3@example.org",
                       UnsubscribeAll=True)

    def addresses(**kwargs: Any) -> list[str]:
        out, token = [], None
        while True:
            page = ses.list_contacts(ContactListName="filters", PageSize=2,
                                     **({"NextToken": token} if token else {}), **kwargs)
            assert len(page["Contacts"]) <= 2
            out += [c["EmailAddress"] for c in page["Contacts"]]
            if not (token := page.get("NextToken")):
                return out

    assert addresses() == [f"p{i}@example.org" for i in range(5)]
    deals_in = {"FilteredStatus": "OPT_IN",
                "TopicFilter": {"TopicName": "deals", "UseDefaultIfPreferenceUnavailable": True}}
    assert addresses(Filter=deals_in) == ["p0@example.org", "p2@example.org", "p4@example.org"]
    tips_in = {"FilteredStatus": "OPT_IN", "TopicFilter": {"TopicName": "tips"}}
    assert addresses(Filter=tips_in) == ["p2@example.org"]
    assert addresses(Filter={"FilteredStatus": "OPT_OUT"}) == ["p3@example.org"]
    assert fails(ses.list_contacts, ContactListName="filters",
                 Filter={"TopicFilter": {"TopicName": "nope"}})[:2] == \
        (400, "BadRequestException")
    assert fails(ses.list_contacts, ContactListName="nope")[:2] == (404, "NotFoundException")


def send(ses: Any, to: str, **extra: Any) -> str:
    sent: str = ses.send_email(FromEmailAddress=SENDER, Destination={"ToAddresses": [to]},
                               Content=SIMPLE, **extra)["MessageId"]
    return sent


def final(served: Served, delivery_id: str) -> tuple[DeliveryState, str]:
    deadline = time.monotonic() + 20
    while True:
        d = served.t.email.get_delivery(delivery_id)
        if d.state is not DeliveryState.QUEUED or time.monotonic() > deadline:
            return d.state, d.detail or ""
        time.sleep(0.05)


def test_a_send_to_a_topic_skips_opted_out_contacts(served: Served, ses: Any) -> None:
    ses.create_contact_list(ContactListName="promo",
                            Topics=[topic("deals"), topic("tips", "OPT_OUT")])
    ses.create_contact(ContactListName="promo", EmailAddress="out@example.org",
                       TopicPreferences=[{"TopicName": "deals", "SubscriptionStatus": "OPT_OUT"}])
    ses.create_contact(ContactListName="promo", EmailAddress="all-out@example.org",
                       UnsubscribeAll=True)
    ses.create_contact(ContactListName="promo", EmailAddress="tips-in@example.org",
                       TopicPreferences=[{"TopicName": "tips", "SubscriptionStatus": "OPT_IN"}])
    deals = {"ListManagementOptions": {"ContactListName": "promo", "TopicName": "deals"}}
    tips = {"ListManagementOptions": {"ContactListName": "promo", "TopicName": "tips"}}

    state, detail = final(served, send(ses, "out@example.org", **deals))
    assert state is DeliveryState.SUPPRESSED and "opted out of the topic promo/deals" in detail
    state, detail = final(served, send(ses, "all-out@example.org", **deals))
    assert state is DeliveryState.SUPPRESSED and "unsubscribed from the list promo" in detail
    state, detail = final(served, send(ses, "stranger@example.org", **tips))
    assert state is DeliveryState.SUPPRESSED and "default is OPT_OUT" in detail
    assert final(served, send(ses, "tips-in@example.org", **tips))[0] is DeliveryState.SENT
    assert final(served, send(ses, "stranger@example.org", **deals))[0] is DeliveryState.SENT

    # several recipients: the opted-out one is dropped and named, the others get it
    mixed = ses.send_email(FromEmailAddress=SENDER, Content=SIMPLE, **deals,
                           Destination={"ToAddresses": ["mixed@example.org"],
                                        "CcAddresses": ["out@example.org"]})["MessageId"]
    state, detail = final(served, mixed)
    assert state is DeliveryState.SENT and "out@example.org: opted out" in detail
    [got] = served.mail_to("mixed@example.org")
    assert got.rcpt_tos == ["mixed@example.org"]

    # transactional mail (no ListManagementOptions) is stopped only by the suppression list
    for address in ("out@example.org", "all-out@example.org"):
        assert final(served, send(ses, address))[0] is DeliveryState.SENT

    # a list or topic that does not exist: refused at once, as SES does
    assert fails(ses.send_email, FromEmailAddress=SENDER, Content=SIMPLE,
                 Destination={"ToAddresses": ["x@example.org"]},
                 ListManagementOptions={"ContactListName": "nope"})[:2] == \
        (404, "NotFoundException")
    no_topic = fails(ses.send_email, FromEmailAddress=SENDER, Content=SIMPLE,
                     Destination={"ToAddresses": ["x@example.org"]},
                     ListManagementOptions={"ContactListName": "promo", "TopicName": "nope"})
    assert no_topic[:2] == (400, "BadRequestException") and "nope" in no_topic[2]


def test_one_click_unsubscribe_opts_out_of_the_topic_not_the_account(served: Served,
                                                                      ses: Any) -> None:
    ses.create_contact_list(ContactListName="club", Topics=[topic("events"), topic("offers")])
    address = "member@example.org"
    events = {"ListManagementOptions": {"ContactListName": "club", "TopicName": "events"}}
    assert final(served, send(ses, address, **events))[0] is DeliveryState.SENT
    [mail] = served.mail_to(address)
    url = mail.message["List-Unsubscribe"].split(",")[0].strip("<> ")
    token = url.rsplit("/", 1)[1]
    # opaque: no readable address in the link, however it is decoded
    assert "member" not in url
    raw = base64.urlsafe_b64decode(token[1:] + "=" * (-len(token[1:]) % 4))
    assert b"member" not in raw and b"example" not in raw

    page = httpx.get(url.replace("https://mail.example.test", served.url))
    assert page.status_code == 200 and "Events" in page.text
    assert "member@example.org" not in page.text  # the page masks it too
    r = httpx.post(url.replace("https://mail.example.test", served.url),
                   content="List-Unsubscribe=One-Click",
                   headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert r.status_code == 200

    contact = ses.get_contact(ContactListName="club", EmailAddress=address)
    assert contact["TopicPreferences"] == [{"TopicName": "events",
                                            "SubscriptionStatus": "OPT_OUT"}]
    assert contact["UnsubscribeAll"] is False
    assert served.t.email.suppression(address) is None  # not the account-wide list
    state, detail = final(served, send(ses, address, **events))
    assert state is DeliveryState.SUPPRESSED and "opted out of the topic club/events" in detail
    offers = {"ListManagementOptions": {"ContactListName": "club", "TopicName": "offers"}}
    assert final(served, send(ses, address, **offers))[0] is DeliveryState.SENT
    assert final(served, send(ses, address))[0] is DeliveryState.SENT  # a password reset

    # mail that named the list and no topic: the unsubscribe leaves the whole list
    whole = {"ListManagementOptions": {"ContactListName": "club"}}
    assert final(served, send(ses, "whole@example.org", **whole))[0] is DeliveryState.SENT
    [mail] = served.mail_to("whole@example.org")
    url = mail.message["List-Unsubscribe"].split(",")[0].strip("<> ")
    assert httpx.post(url.replace("https://mail.example.test", served.url),
                      content="List-Unsubscribe=One-Click").status_code == 200
    assert ses.get_contact(ContactListName="club",
                           EmailAddress="whole@example.org")["UnsubscribeAll"] is True
    assert final(served, send(ses, "whole@example.org", **offers))[0] is \
        DeliveryState.SUPPRESSED
    assert final(served, send(ses, "whole@example.org"))[0] is DeliveryState.SENT
