"""The email service (`t.email`): templates, previews, sends, suppression and the log.

A send is accepted, logged as QUEUED and handed to the internal delivery queue as a job:
it then gets the queue engine's retries, leases and crash safety, exactly like a
schedule's email target, and the same code (`tidings.targets.email`) delivers both.
Templates are compiled once per (name, modified time): an edit misses the cache, no
restart needed.
"""

from __future__ import annotations

import json
import re
import secrets
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from tidings.clock import Clock
from tidings.email.bounces import ReturnedMail
from tidings.email.contacts import ContactLists
from tidings.email.daily_cap import over_daily_cap
from tidings.email.identities import Identities
from tidings.email.mime import Unsubscribe
from tidings.email.resend import DeliveryFilter, Resent, resend
from tidings.email.sesv2 import RawEmailMessage, parse_send_email, send_email_document
from tidings.email.sns import SnsVerifier
from tidings.email.suppression import reason_of, suppression_key
from tidings.email.templates import (
    CompiledEmailTemplate,
    RenderedEmail,
    TemplateCache,
    compile_email_template,
    parse_template_data,
)
from tidings.email.unsubscribe import UnsubscribeRequest, UnsubscribeTokens
from tidings.errors import NotFoundError, TidingsError, ValidationError
from tidings.model.email import (
    Delivery,
    DeliveryState,
    EmailMessage,
    StoredTemplate,
    Suppression,
    SuppressionReason,
    bare_address,
    normalise_address,
)
from tidings.model.firings import FiringContext, delivery_job
from tidings.model.paging import page_after, page_token
from tidings.model.queues import check_range
from tidings.model.schedules import Target, TargetKind
from tidings.queues.internal import EMAIL_QUEUE, backlog, ensure_internal_queues
from tidings.queues.service import QueueService
from tidings.settings import Settings
from tidings.store.base import (
    ContactStore,
    EmailStore,
    QueueStore,
    SecurityStore,
)


class EmailServiceStore(EmailStore, ContactStore, QueueStore, SecurityStore, Protocol):
    """What this module asks of the store: the templates, the delivery log and the queues
    deliveries travel on."""

TEMPLATE_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # SES: letters, digits, _ and -, ≤ 64


def _no_nul(subject: str, html: str | None, text: str | None) -> None:
    """PostgreSQL text cannot hold U+0000 (and no mail part needs one): refused on every
    backend alike, instead of stored on SQLite and a 500 on PostgreSQL (found by
    tests/integration/test_fuzz_aws.py)."""
    for part, value in (("Subject", subject), ("Html", html), ("Text", text)):
        if isinstance(value, str) and "\x00" in value:
            raise ValidationError(f"TemplateContent.{part}",
                                  "cannot contain the NUL character (U+0000)")


def check_template_name(name: str) -> str:
    if not isinstance(name, str) or not TEMPLATE_NAME.match(name):
        raise ValidationError("TemplateName",
                              "must be 1-64 characters of letters, digits, '_' and '-'")
    return name


@dataclass(frozen=True)
class Prepared:
    """What a delivery attempt reads from the store, in one trip."""

    template: CompiledEmailTemplate | None
    suppressed: dict[str, Suppression]
    existing: Delivery | None  # the log row of this delivery, if an attempt made one
    capped: frozenset[str] = frozenset()  # over the daily cap (deliverability.py)
    #: recipients a send to a contact list skips (opted out), with why: the log says
    skipped: Mapping[str, str] = field(default_factory=dict)

    def held_back(self, recipients: Sequence[str]) -> tuple[list[str], str]:
        """The recipients to send to, and what the log says of the others."""
        go, notes = [], []
        for r in recipients:
            key = normalise_address(r)
            if key in self.suppressed:
                notes.append(f"{r}: on the suppression list ({self.suppressed[key].reason})")
            elif key in self.skipped:
                notes.append(f"{r}: {self.skipped[key]}")
            else:
                go.append(r)
        return go, "; ".join(notes)


class EmailService:
    def __init__(self, store: EmailServiceStore, clock: Clock, queues: QueueService,
                 settings: Settings) -> None:
        self.store = store
        self.clock = clock
        self.queues = queues
        self.settings = settings
        self._compiled: TemplateCache[tuple[str, int], CompiledEmailTemplate] = TemplateCache()
        self._tokens: UnsubscribeTokens | None = None
        self.identities = Identities(store, clock, settings)
        self.contacts = ContactLists(store, clock)
        self.sns = SnsVerifier(settings.sns_cert_host, settings.sns_ca_file)
        self.returns = ReturnedMail(store, clock, soft_bounces=settings.email_soft_bounces,
                                    soft_bounce_days=settings.email_soft_bounce_days)

    # templates ------------------------------------------------------------------------------

    def create_template(self, name: str, subject: str, html: str | None = None,
                        text: str | None = None) -> StoredTemplate:
        check_template_name(name)
        _no_nul(subject, html, text)
        compile_email_template(name, subject, html, text)  # rejects bad syntax up front
        now = self.clock.now_ms()
        row = StoredTemplate(name, subject, html or None, text or None, now, now)
        self.store.create_template(row)
        return row

    def update_template(self, name: str, subject: str, html: str | None = None,
                        text: str | None = None) -> StoredTemplate:
        """Full replace of the template's parts (as SES UpdateEmailTemplate)."""
        _no_nul(subject, html, text)
        compile_email_template(name, subject, html, text)
        # modified_at is the cache key: make sure an edit within the same ms still misses
        now = max(self.clock.now_ms(), self.store.get_template(name).modified_at + 1)
        return self.store.update_template(name, subject, html or None, text or None, now)

    def get_template(self, name: str) -> StoredTemplate:
        return self.store.get_template(name)

    def list_templates(self, *, limit: int = 100, next_token: str | None = None,
                       ) -> tuple[list[StoredTemplate], str | None]:
        check_range("PageSize", limit, 1, 1000)
        rows = self.store.list_templates(page_after(next_token), limit + 1)
        more = len(rows) > limit
        rows = rows[:limit]
        return rows, (page_token(rows[-1].name) if more else None)

    def delete_template(self, name: str) -> None:
        self.store.delete_template(name)

    def compiled(self, name: str) -> CompiledEmailTemplate:
        row = self.store.get_template(name)
        return self._compiled.get_or_compile(
            (name, row.modified_at),
            lambda: compile_email_template(row.name, row.subject, row.html, row.text))

    def render(self, name: str, data: Mapping[str, Any] | str) -> RenderedEmail:
        """Preview (SES TestRenderEmailTemplate): raises `RenderingError` on missing data."""
        values = parse_template_data(data) if isinstance(data, str) else dict(data)
        return self.compiled(name).render(values)

    @staticmethod
    def render_message(msg: EmailMessage,
                       template: CompiledEmailTemplate | None) -> RenderedEmail:
        if msg.template is None:
            return RenderedEmail(subject=re.sub(r"[\r\n]+", " ", msg.subject or ""),
                                 html=msg.html, text=msg.text)
        assert template is not None
        return template.render(msg.template_data)

    # unsubscribe ------------------------------------------------------------------------------

    def tokens(self) -> UnsubscribeTokens:
        if self._tokens is None:
            self._tokens = UnsubscribeTokens(self.store.get_or_create_secret(
                "unsubscribe-secret", secrets.token_bytes(32)))
        return self._tokens

    def base_url(self) -> str:
        if self.settings.public_url:
            return self.settings.public_url.rstrip("/")
        return f"http://{self.settings.host}:{self.settings.port}"

    def unsubscribe_for(self, msg: EmailMessage) -> Unsubscribe | None:
        """The List-Unsubscribe of a message that carries one (`carries_unsubscribe`: it
        names a contact list, or its sender asked), and only for exactly one To address,
        since a one-click unsubscribe must name one person (a token per recipient)."""
        if not msg.carries_unsubscribe or len(msg.to) != 1:
            return None
        token = self.tokens().make(bare_address(msg.to[0]), msg.list_id)
        domain = bare_address(msg.from_address).rpartition("@")[2]
        return Unsubscribe(url=f"{self.base_url()}/unsubscribe/{token}",
                           mailto=f"unsubscribe@{domain}?subject={token}")

    def check_unsubscribe(self, token: str) -> UnsubscribeRequest:
        return self.tokens().verify(token)

    def unsubscribe(self, token: str) -> UnsubscribeRequest:
        """Verify the token and opt its address out of the list or topic the mail named
        (SES's topic preferences), so transactional mail still reaches it; only mail that
        named no contact list (a sender's own `unsubscribe` choice) falls back to the
        account suppression list (reason UNSUBSCRIBE), as does mail naming a list that no
        longer exists. Idempotent."""
        request = self.tokens().verify(token)
        # A list that does not exist (deleted, or named by mail sent before tidings kept
        # contact lists): nothing to opt out of, so the address is suppressed as before.
        if request.list_id is None or not self.contacts.opt_out(request.list_id,
                                                                request.address):
            self.store.add_suppressions([normalise_address(request.address)],
                                        SuppressionReason.UNSUBSCRIBE, self.clock.now_ms())
        return request

    # suppression list ----------------------------------------------------------------------

    def suppress(self, address: str, reason: SuppressionReason | str = "MANUAL") -> bool:
        """Add an address; False when it was already suppressed (its first reason stays)."""
        why = reason if isinstance(reason, SuppressionReason) else reason_of(reason)
        return self.store.add_suppressions([suppression_key(address)], why,
                                           self.clock.now_ms()) > 0

    def unsuppress(self, address: str) -> bool:
        return self.store.remove_suppression(suppression_key(address))

    def suppression(self, address: str) -> Suppression | None:
        key = suppression_key(address)
        return self.store.suppressed_among([key]).get(key)

    def list_suppressions(self, *, reason: str | None = None, limit: int = 100,
                          next_token: str | None = None) -> tuple[list[Suppression], str | None]:
        check_range("PageSize", limit, 1, 1000)
        why = reason_of(reason) if reason else None
        rows = self.store.list_suppressions(why, page_after(next_token), limit + 1)
        more = len(rows) > limit
        rows = rows[:limit]
        return rows, (page_token(rows[-1].address) if more else None)

    def scan_suppressions(self, reason: SuppressionReason | None, after: str | None,
                          limit: int) -> list[Suppression]:
        """Up to `limit` entries after the address `after`, in address order: for faces
        that filter and page by rules of their own (the SES API's date ranges and sets of
        reasons, with its own tokens)."""
        return self.store.list_suppressions(reason, after, limit)

    # sending ----------------------------------------------------------------------------------

    def send(self, message: EmailMessage | Mapping[str, Any] | str) -> Delivery:
        """Accept a message (an `EmailMessage` or a SES v2 SendEmail document), log it as
        QUEUED and enqueue its delivery. A named template must exist now."""
        msg = message if isinstance(message, EmailMessage) else parse_send_email(message)
        msg = msg.validated()
        self.identities.check_sender(msg)
        if msg.template is not None:
            self.compiled(msg.template)  # TemplateNotFound / a stale bad template, now
        if msg.list_id is not None:
            self.contacts.check_send(msg.list_id)  # the list and topic exist, as in SES
        delivery_id = str(uuid.uuid4())
        now = self.clock.now_ms()
        ctx = FiringContext("", "", "", now, delivery_id)
        # The document says whether the message names a contact list; a caller's explicit
        # choice (EmailMessage.unsubscribe) travels as the target's option, as a schedule's.
        options = {} if msg.unsubscribe is None else {"unsubscribe": msg.unsubscribe}
        job = json.dumps(delivery_job(ctx, Target(TargetKind.EMAIL, "", options=options),
                                      json.dumps(send_email_document(msg), ensure_ascii=False)),
                         ensure_ascii=False)
        delivery = Delivery(id=delivery_id, message_id=self.message_id(delivery_id, msg),
                            sender=msg.from_address, recipients=msg.recipients,
                            state=DeliveryState.QUEUED, created_at=now, updated_at=now,
                            template=msg.template, document=job)
        self.store.insert_delivery(delivery)
        ensure_internal_queues(self.queues)
        try:
            self.queues.ops.enqueue_internal(EMAIL_QUEUE, job)
        except Exception as exc:
            self.store.update_delivery(delivery_id, DeliveryState.QUEUED, DeliveryState.FAILED,
                                       f"could not be queued: {exc}", 0, self.clock.now_ms())
            raise
        return delivery

    @staticmethod
    def message_id(delivery_id: str, msg: EmailMessage) -> str:
        if isinstance(msg, RawEmailMessage) and msg.raw_message_id:
            return msg.raw_message_id  # the sender's own, kept: the log names what was sent
        domain = bare_address(msg.from_address).rpartition("@")[2] or "tidings.invalid"
        return f"{delivery_id}@{domain}"

    # what a delivery attempt needs (the email target's batch read and write, run on the
    # store's thread by its group commits) ------------------------------------------------

    def prepare_many(self, requests: Sequence[tuple[EmailMessage, str]], *,
                     daily_cap: int = 0) -> list[Prepared | TidingsError]:
        """For each (message, delivery id): its compiled template, which recipients are
        suppressed, and its log row; one store trip for many concurrent deliveries."""
        templates: dict[str, CompiledEmailTemplate | TidingsError] = {}
        keys: set[str] = set()
        for msg, _ in requests:
            if msg.template is not None and msg.template not in templates:
                try:
                    templates[msg.template] = self.compiled(msg.template)
                except TidingsError as exc:
                    templates[msg.template] = exc
            keys.update(normalise_address(a) for a in msg.recipients)
            if msg.carries_unsubscribe:
                self.tokens()  # the secret is read here, on the store's thread, once
        suppressed = self.store.suppressed_among(sorted(keys))
        existing = self.store.get_deliveries([d for _, d in requests])
        capped = over_daily_cap(self.store, self.clock.now_ms(), [m for m, _ in requests],
                                suppressed, daily_cap)
        opted_out = self.contacts.skipped(
            [(m.list_id, [normalise_address(a) for a in m.recipients]) for m, _ in requests])
        out: list[Prepared | TidingsError] = []
        for (msg, delivery_id), skipped in zip(requests, opted_out, strict=True):
            try:  # an identity removed since the message was accepted: it is not sent
                self.identities.check_sender(msg)
            except ValidationError as exc:
                out.append(exc)
                continue
            template = templates.get(msg.template) if msg.template is not None else None
            if isinstance(template, TidingsError):
                out.append(template)
                continue
            mine = {k: suppressed[k] for k in (normalise_address(a) for a in msg.recipients)
                    if k in suppressed}
            if isinstance(skipped, TidingsError):  # the list or topic was deleted since
                out.append(skipped)
                continue
            over = frozenset(k for k in (normalise_address(a) for a in msg.recipients)
                             if (id(msg), k) in capped)
            out.append(Prepared(template, mine, existing.get(delivery_id), over, skipped))
        return out

    def record_many(self, items: Sequence[tuple[Delivery, tuple[str, ...]]]) -> list[bool]:
        """Log attempts' outcomes in one transaction; bounced addresses are suppressed."""
        bounced = [(normalise_address(a), d.updated_at) for d, refused in items for a in refused]
        if bounced:
            self.store.add_suppressions([a for a, _ in bounced], SuppressionReason.BOUNCE,
                                        bounced[0][1])
        return self.store.record_deliveries([d for d, _ in items])

    def mark_failed(self, delivery_id: str, detail: str, attempts: int) -> bool:
        """Retries ran out: a delivery still QUEUED becomes FAILED (final states stay)."""
        return self.store.update_delivery(delivery_id, DeliveryState.QUEUED,
                                          DeliveryState.FAILED, detail[:2000], attempts,
                                          self.clock.now_ms())

    # resending and status ----------------------------------------------------------------

    def resend(self, *, message_id: str | None = None, recipient: str | None = None,
               campaign: str | None = None, state: str | None = None,
               since: int | None = None, until: int | None = None) -> Resent:
        """Put failed deliveries back in line (`email/resend.py`)."""
        return resend(self.store, self.clock, self.queues, DeliveryFilter(
            message_id, recipient, campaign, state, since, until))

    def waiting(self) -> int:
        """Emails accepted and not yet taken by a node with a relay (or being retried)."""
        return backlog(self.queues, EMAIL_QUEUE)

    # the log ------------------------------------------------------------------------------------

    def get_delivery(self, delivery_id: str) -> Delivery:
        d = self.store.get_delivery(delivery_id)
        if d is None:
            raise NotFoundError(delivery_id, f"Delivery {delivery_id} does not exist.")
        return d

    def log(self, *, recipient: str | None = None, state: str | None = None, limit: int = 50,
            next_token: str | None = None) -> tuple[list[Delivery], str | None]:
        check_range("limit", limit, 1, 1000)
        try:
            wanted = DeliveryState(state.upper()) if state else None
        except ValueError:
            raise ValidationError("state", "must be one of " + ", ".join(DeliveryState))\
                from None
        before = None
        if (after := page_after(next_token)) is not None:
            if not after.isdigit():
                raise ValidationError("NextToken", "is not a token this API returned")
            before = int(after)
        who = normalise_address(recipient) if recipient else None
        rows = self.store.list_deliveries(who, wanted, before, limit + 1)
        more = len(rows) > limit
        rows = rows[:limit]
        return rows, (page_token(str(rows[-1].seq)) if more else None)
