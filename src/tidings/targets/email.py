"""The email target: render, check suppression, send through the relay, log the outcome.

It runs as a job of the internal delivery queue (like webhooks), so its retries follow the
target's retry policy. Outcomes, as SES reports them:
- every recipient suppressed, or (mail naming a contact list) opted out of its list or
  topic → SUPPRESSED with who and why, nothing sent, no retry (such recipients are
  otherwise dropped from the envelope, named in the log, and the others get the message);
- template data missing → RENDERING_FAILURE, nothing sent, no retry (the same data would
  fail again);
- the template does not exist (a schedule of the Scheduler API may name one not created
  yet: targets are checked at invocation) → RENDERING_FAILURE, nothing sent, no retry:
  SES answers SendEmail with NotFoundException, a client error EventBridge Scheduler does
  not retry, so the delivery goes to the target's dead-letter queue at once with
  ERROR_CODE=NotFoundException;
- the relay answers 4xx, or cannot be reached → stays QUEUED with the reply, retried;
  FAILED once the retry policy is exhausted;
- the relay answers RCPT with a 4xx "slow down" → stays QUEUED, the recipients' domains
  are held (`email/domain_holds.py`) and the delivery waits for the hold without an
  attempt counted; a 421 or a "slow down" to MAIL or DATA holds the whole relay
  (`email/relay.py`), the mail waiting in its line, also without an attempt;
- the sending domain's warm-up cap for today is reached (`email/warmup.py`) → stays QUEUED
  with the reason, paced to the next UTC day without an attempt counted;
- the relay answers 5xx → BOUNCED with the reply, the refused addresses suppressed
  (reason BOUNCE), no retry;
- 250 after DATA → SENT with the reply.
A delivery whose log row is already final is not sent again: a job redelivered after
a crash between the send and its acknowledgement finds its row and stops there.
The Message-ID derives from the delivery id, so even a duplicate is recognisable.
A Raw message (SES Content.Raw) is sent as its sender wrote it: not rendered, no
List-Unsubscribe; only a Message-ID is added when it has none, and a DKIM signature when
signing is configured (both prepend a header and change nothing else).
List-Unsubscribe (one-click, RFC 8058) is added, as SES adds it, only to a message whose
SendEmail names a contact list (ListManagementOptions), unless the target's option
`unsubscribe` says otherwise: campaigns set it to true, transactional mail may set false.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol

from tidings.email.deliverability import SendingLimits, sending_limits
from tidings.email.domain_holds import DomainHolds
from tidings.email.mime import DkimSigner, Outgoing, message_bytes
from tidings.email.returns import verp_address
from tidings.email.service import EmailService, Prepared
from tidings.email.sesv2 import RawEmailMessage, parse_send_email
from tidings.email.smtp import (
    SendResult,
    SmtpPermanentError,
    SmtpSender,
    SmtpSlowDown,
    SmtpTemporaryError,
)
from tidings.email.templates import RenderingError
from tidings.email.warmup import WarmUp, parse_ladder
from tidings.errors import TemplateNotFound, TidingsError, ValidationError
from tidings.model.email import (
    FINAL_STATES,
    Delivery,
    DeliveryState,
    EmailMessage,
    bare_address,
    normalise_address,
)
from tidings.model.firings import FiringContext, delivery_job
from tidings.model.schedules import Target
from tidings.runtime.batching import Batcher
from tidings.runtime.bridge import Bridge
from tidings.settings import Settings
from tidings.targets.base import DeliveryError
from tidings.targets.email_target import EMAIL_DOMAIN_LIMIT

log = logging.getLogger("tidings.email")

NO_RELAY = "no SMTP relay configured (TIDINGS_SMTP_URL)"


class Relay(Protocol):
    """What sends a rendered message: the pooled SMTP sender, or a test's capture."""

    async def send(self, url: str, sender: str, recipients: Sequence[str],
                   data: bytes) -> SendResult: ...

    async def close(self) -> None: ...


class EmailDelivery:
    def __init__(self, service: EmailService, bridge: Bridge, settings: Settings,
                 relay: Relay | None = None) -> None:
        self.service = service
        self.bridge = bridge
        self.relay = settings.smtp_url
        self.bounce_address = settings.bounce_address
        self.smtp: Relay = relay or SmtpSender(max_connections=settings.smtp_max_connections,
                                               max_rate=settings.smtp_max_rate,
                                               backoff_max_s=settings.smtp_backoff_max_s,
                                               wait_s=settings.smtp_relay_wait_s)
        self.limits: SendingLimits = sending_limits(settings.smtp_domain_rates)
        self.holds = DomainHolds(max_s=settings.smtp_backoff_max_s)
        ladder = parse_ladder(settings.email_warmup)
        self.warmup = WarmUp(service.store, bridge, service.clock, ladder) if ladder else None
        self.daily_cap = settings.email_daily_cap
        # Concurrent deliveries share one store trip for their reads and one transaction
        # for their outcomes (group commit); each still waits for its own result. Short
        # calls (at most `concurrency` deliveries a group): on SQLite they run on the
        # loop's thread when the connection is free, rather than trading the GIL with the
        # store's thread at every statement (bench/email.py, run alternately: ~7 % less
        # node CPU an email).
        self._prepare: Batcher[None, tuple[EmailMessage, str], Prepared] = Batcher(
            bridge, lambda _, requests: service.prepare_many(requests,
                                                             daily_cap=self.daily_cap),
            short=True)
        self._record: Batcher[None, tuple[Delivery, tuple[str, ...]], bool] = Batcher(
            bridge, lambda _, outcomes: service.record_many(outcomes), short=True)
        self.dkim: DkimSigner | None = None
        if settings.dkim_key_file:
            if not settings.dkim_selector or not settings.dkim_domain:
                raise TidingsError("DKIM signing needs TIDINGS_DKIM_SELECTOR and "
                                   "TIDINGS_DKIM_DOMAIN beside TIDINGS_DKIM_KEY_FILE")
            self.dkim = DkimSigner(settings.dkim_key_file, settings.dkim_selector,
                                   settings.dkim_domain)

    async def deliver(self, target: Target, body: str, ctx: FiringContext,
                      attempt: int) -> str:
        try:
            msg = parse_send_email(body)
        except TidingsError as exc:
            raise DeliveryError("InvalidInput", exc.message, retryable=False) from None
        choice = target.options.get("unsubscribe")
        if isinstance(choice, bool) and not isinstance(msg, RawEmailMessage):
            msg = replace(msg, unsubscribe=choice)  # the target overrides the document's rule
        try:
            prep = await self._prepare.submit(None, (msg, ctx.execution_id))
        except (TemplateNotFound, ValidationError) as exc:
            # the template is missing (never made, or deleted since) or no longer valid:
            # permanent. A store outage is not caught here: the consumer retries the job
            # as for any failure.
            prep = Prepared(None, {}, None)
            failure: TidingsError | None = exc
        else:
            failure = None
        now = self.service.clock.now_ms()
        delivery_id = ctx.execution_id
        message_id = self.service.message_id(delivery_id, msg)
        schedule = f"{ctx.group}/{ctx.name}" if ctx.schedule_arn else None
        created_at = prep.existing.created_at if prep.existing else now

        def row(state: DeliveryState, detail: str, *, resendable: bool = False) -> Delivery:
            """The log row of this attempt's outcome, built once (a `replace` of a draft
            row cost a construction and a walk of the fields more: ~3 % of the node's
            time an email in bench/email.py); updated_at is when the outcome was known
            (after any wait for the relay). `resendable`: with what a resend needs (the
            delivery job), written only with the outcomes an operator may resend, or a
            retry may end in (FAILED, RENDERING_FAILURE, QUEUED). Its JSON was a tenth
            of this method's time for a SENT delivery, which never needs it."""
            return Delivery(
                id=delivery_id, message_id=message_id, sender=msg.from_address,
                recipients=msg.recipients, state=state, created_at=created_at,
                updated_at=self.service.clock.now_ms(),
                execution_id=delivery_id if ctx.schedule_arn else None,
                schedule=schedule, template=msg.template, detail=detail, attempts=attempt,
                document=json.dumps(delivery_job(ctx, target, body), ensure_ascii=False)
                if resendable else None)

        if prep.existing is not None and prep.existing.state in FINAL_STATES:
            # A redelivery after a crash between the send and its acknowledgement: the log
            # row of this execution id is final, so the mail is not sent twice.
            log.warning("email delivery %s (schedule %s) is already %s in the delivery log; "
                        "not sent again", delivery_id, schedule or "-",
                        prep.existing.state)
            return "duplicate"
        if isinstance(failure, TemplateNotFound):
            # What SES's SendEmail answers, and its code, which the DLQ event carries
            await self._final(row(DeliveryState.RENDERING_FAILURE, failure.message[:2000],
                                  resendable=True))
            raise DeliveryError("NotFoundException", failure.message, retryable=False)
        if failure is not None:
            await self._final(row(DeliveryState.FAILED, failure.message[:2000],
                                  resendable=True))
            raise DeliveryError(type(failure).__name__, failure.message, retryable=False)
        recipients, held_back = prep.held_back(msg.recipients)
        if prep.capped and recipients:
            recipients = [r for r in recipients if normalise_address(r) not in prep.capped]
            if not recipients:
                await self._final(row(DeliveryState.SUPPRESSED,
                                      f"daily cap: {self.daily_cap} list emails to this "
                                      "recipient today already (TIDINGS_EMAIL_DAILY_CAP)"))
                return "suppressed"
        if not recipients:  # suppressed, or opted out of the list or topic the mail names
            await self._final(row(DeliveryState.SUPPRESSED, held_back[:2000]))
            return "suppressed"
        try:
            data = self._message_bytes(msg, prep, message_id, now)
        except RenderingError as exc:
            await self._final(row(DeliveryState.RENDERING_FAILURE, str(exc)[:2000],
                                  resendable=True))
            raise DeliveryError("RenderingFailure", str(exc), retryable=False) from None
        if not self.relay:  # only nodes with a relay consume the email queue
            raise DeliveryError("NoRelay", NO_RELAY)
        if (held := self.holds.held(recipients)) is not None:
            domain, left, why = held  # not offered to the relay: no attempt counted
            raise DeliveryError("DomainHeld", f"the relay asked to slow down for {domain} "
                                f"({why}); waiting {left:.3g} s", retry_after_s=left,
                                hold_key=f"{EMAIL_DOMAIN_LIMIT}:{domain}")
        if self.warmup is not None and (
                wait := await self.warmup.pace(msg.from_address)) is not None:
            why = self.warmup.cap_today(msg.from_address)
            await self._final(row(DeliveryState.QUEUED, why, resendable=True))
            raise DeliveryError("WarmUpCap", why, retry_after_s=wait, hold_key="", paced=True)
        await self.limits.before_send(recipients)
        try:
            result = await self.smtp.send(self.relay, self._return_path(msg, delivery_id),
                                          recipients, data)
        except SmtpSlowDown as exc:
            wait = self.holds.hold(exc.domains, str(exc))
            await self._final(row(
                DeliveryState.QUEUED, f"{exc}; {', '.join(exc.domains)} held for {wait:g} s",
                resendable=True))
            raise DeliveryError(f"SMTP{exc.code}", str(exc), retry_after_s=wait,
                                hold_key=f"{EMAIL_DOMAIN_LIMIT}:{exc.domains[0]}") from None
        except SmtpTemporaryError as exc:
            await self._final(row(DeliveryState.QUEUED, str(exc)[:2000], resendable=True))
            raise DeliveryError(f"SMTP{exc.code}" if exc.code else "SMTPConnection",
                                str(exc)) from None
        except SmtpPermanentError as exc:
            await self._final(row(DeliveryState.BOUNCED, str(exc)[:2000]), exc.refused)
            raise DeliveryError(f"SMTP{exc.code}", str(exc), retryable=False) from None
        self.holds.took(recipients)
        detail = result.reply + (f"; not sent to {held_back}" if held_back else "")
        if result.refused:
            detail += "; refused: " + json.dumps(result.refused)
        await self._final(row(DeliveryState.SENT, detail[:2000]),
                          tuple(a for a, reply in result.refused.items()
                                if reply.startswith("5")))
        return "delivered"

    def _return_path(self, msg: EmailMessage, delivery_id: str) -> str:
        """The envelope sender: VERP-tagged with the delivery id when a bounce address is
        set (TIDINGS_BOUNCE_ADDRESS), so returned mail names its delivery."""
        if self.bounce_address:
            return verp_address(self.bounce_address, delivery_id)
        return bare_address(msg.from_address)

    def _message_bytes(self, msg: EmailMessage, prep: Prepared, message_id: str,
                       now: int) -> bytes:
        if isinstance(msg, RawEmailMessage):
            # the sender's bytes as they are; a DKIM signature only prepends a header
            data = msg.bytes_to_send(message_id)
            return self.dkim.sign(data) if self.dkim is not None else data
        rendered = self.service.render_message(msg, prep.template)
        return message_bytes(Outgoing(
            from_address=msg.from_address, to=msg.to, cc=msg.cc, reply_to=msg.reply_to,
            subject=rendered.subject, text=rendered.text, html=rendered.html,
            message_id=message_id, date_ms=now, headers=msg.headers, tags=msg.tags,
            unsubscribe=self.service.unsubscribe_for(msg)), self.dkim)

    async def _final(self, record: Delivery, bounced: tuple[str, ...] = ()) -> None:
        """Write an attempt's log row (and suppress the addresses that bounced) in the
        next group commit."""
        await self._record.submit(None, (record, bounced))

    async def gave_up(self, ctx: FiringContext, failure: DeliveryError, attempts: int) -> None:
        """The retry policy ran out: a delivery still QUEUED is FAILED for good."""
        await self.bridge.run(self.service.mark_failed, ctx.execution_id,
                              f"{failure.code}: {failure.message}", attempts)

    async def close(self) -> None:
        await self.smtp.close()
