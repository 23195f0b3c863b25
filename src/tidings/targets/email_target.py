"""The email target's rules: what a schedule's email target must be, and where its
deliveries go. The sending itself is `targets/email.py` (`EmailDelivery`, over the SMTP
client), which only a node delivering mail loads: the faces that check a target (the CLI,
the native API) do not load an SMTP client to do so.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Container, Sequence
from typing import ClassVar

from tidings.email.domain_holds import domain_of
from tidings.email.sesv2 import parse_send_email
from tidings.errors import TemplateNotFound, ValidationError
from tidings.model.email import EmailMessage
from tidings.model.firings import FiringContext, delivery_job, render_input
from tidings.model.queues import EMAIL_QUEUE
from tidings.model.schedules import Target, TargetKind
from tidings.store.base import EmailStore
from tidings.targets.base import (
    Attempt,
    DeliveryError,
    LimitPlace,
    Outcomes,
    Reach,
    TargetChecks,
    one_by_one,
)


def check_email_target(store: EmailStore, target: Target,
                       known_templates: set[str] | None = None,
                       sender_check: Callable[[EmailMessage], None] | None = None, *,
                       template_must_exist: bool = True) -> None:
    """The input must be a SendEmail document (checked with sample context values, which
    are only known at firing) naming a template that exists, unless `template_must_exist`
    is False (the Scheduler API: a template missing at firing is that delivery's
    failure). `known_templates` remembers templates already found, so a bulk creation
    looks each one up once."""
    if not target.input:
        raise ValidationError("Target.Input", "an email target needs a SendEmail document")
    sample = FiringContext("arn:aws:scheduler:::schedule/default/sample", "default", "sample",
                           0, "00000000-0000-0000-0000-000000000000")
    msg = parse_send_email(render_input(target.input, sample, 1))
    if sender_check is not None:
        sender_check(msg)  # a verified identity (email/identities.py)
    if msg.template is not None and template_must_exist and (
            known_templates is None or msg.template not in known_templates):
        try:
            store.get_template(msg.template)
        except TemplateNotFound:
            raise ValidationError("Target.Input.Content.Template.TemplateName",
                                  f"template {msg.template!r} does not exist") from None
        if known_templates is not None:
            known_templates.add(msg.template)


#: The limit name of email deliveries keyed by recipient domain (`email-domain:<domain>`,
#: one of TARGET_LIMITS): what a relay's "slow down" for a domain pauses
#: (email/domain_holds.py) and an operator may set a rate for
#: (`tidings limit set email-domain:gmail.com --rate 20/s`).
EMAIL_DOMAIN_LIMIT = "email-domain"
#: The first To address of a SendEmail document's JSON text, when it has no escapes.
_FIRST_TO = re.compile(r'"ToAddresses"\s*:\s*\[\s*"([^"\\]+)"')


def email_domain(text: str) -> str | None:
    """The first recipient's domain of a SendEmail document's text (None: none), read
    without parsing the whole document when it can be (a third of a parse's time)."""
    if (m := _FIRST_TO.search(text)) and "@" in m.group(1):
        return domain_of(m.group(1).rstrip("> ")) or None
    try:
        dest = json.loads(text)["Destination"]
        first = (dest.get("ToAddresses") or dest.get("CcAddresses")
                 or dest.get("BccAddresses"))[0]
    except (ValueError, KeyError, TypeError, IndexError, AttributeError):
        return None  # the delivery will say what is wrong with it
    return domain_of(str(first).rstrip("> ")) or None


class EmailTarget:
    """Email over the node's SMTP relay (`EmailDelivery` above does the work)."""

    kind: ClassVar[TargetKind] = TargetKind.EMAIL
    writes_queue: ClassVar[bool] = False
    #: Its own queue: only a node with an SMTP relay consumes it, so accepted mail waits
    #: there (it is never failed) until such a node takes it.
    delivery_queue: ClassVar[str] = EMAIL_QUEUE
    checks_input: ClassVar[bool] = True
    input_limits: ClassVar[tuple[str, ...]] = (EMAIL_DOMAIN_LIMIT,)
    logs_deliveries: ClassVar[bool] = True
    native_fields: ClassVar[bool] = False

    def validate(self, target: Target, checks: TargetChecks) -> bool:
        check_email_target(checks.store, target, checks.known_templates, checks.sender_check,
                           template_must_exist=checks.must_exist)
        return True

    def limit_keys(self, target: Target, body: str | None, place: LimitPlace,
                   wanted: Container[str]) -> dict[str, str]:
        """The node's relay (TIDINGS_SMTP_URL's host: every sender's mail goes through it)
        and the first recipient's domain (a message to several domains counts against the
        first one's)."""
        keys = {}
        if "smtp" in wanted and place.smtp_relay:
            keys["smtp"] = place.smtp_relay
        if EMAIL_DOMAIN_LIMIT in wanted and body and (domain := email_domain(body)):
            keys[EMAIL_DOMAIN_LIMIT] = domain
        return keys

    def aws_arn(self, target: Target, region: str, account: str) -> str:
        return "arn:aws:scheduler:::aws-sdk:sesv2:sendEmail"  # the universal target

    async def deliver(self, batch: Sequence[Attempt], reach: Reach) -> Outcomes:
        async def send(a: Attempt) -> str:
            if reach.email is not None and reach.email.relay:
                return await reach.email.deliver(a.target, a.body, a.ctx, a.attempt)
            # Routed here by a function: to the email queue, for a node with a relay.
            await reach.bridge.run(reach.queues.ops.enqueue_internal, EMAIL_QUEUE,
                                   json.dumps(delivery_job(a.ctx, a.target, a.body)))
            return "queued"

        return await one_by_one(batch, send)

    async def gave_up(self, attempt: Attempt, failure: DeliveryError, reach: Reach) -> None:
        if reach.email is not None:
            await reach.email.gave_up(attempt.ctx, failure, attempt.attempt)
