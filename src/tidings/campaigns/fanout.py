"""Fan-out: a recipient list becomes one self-deleting email schedule per (step, recipient).

Rules (documented for users in docs/campaigns.md):
- The schedules go into the schedule group named after the campaign, as one-shot `at()`
  schedules with ActionAfterCompletion=DELETE, named `{step}-{recipient}` (see
  `model/campaigns.py`). Rows go to the store's bulk path (`insert_schedule_rows`, beside
  the `insert_schedules` that `create_many` uses), which skips names that exist: a re-run
  after a crash or Ctrl-C creates only what is missing. Fan-out builds the rows itself
  rather than through `create_many`: every field is valid by construction (names from a
  checked step name and a sanitised id, one checked group, window and document shape), the
  email document is checked against the SendEmail parser and the template once per
  template rather than once per recipient, and the instant is the one `at()` gives
  (`fanout_timing.py`), with the same flexible offset (`flex_offset_ms`). Rows are
  `ScheduleRow` NamedTuples built through their constructor, with the target's JSON
  written around each document, which keeps a row at a few microseconds.
- A step whose time is less than `PAST_MARGIN_MS` away is not created (`skipped_past`):
  a self-deleting schedule that already fired no longer exists, so creating it again on a
  re-run would send the same email twice.
- A bad row (unknown zone, bad address, missing column, bad instant, input too long) is
  written to the errors sink as a JSON line {"row", "id", "error"} and the run goes on.
- The run stops reading when errors exceed `max_errors`, or exceed `max_error_percent` of
  the rows read once `PERCENT_MIN_ROWS` rows are in (so one early bad row does not stop a
  large run). Schedules of rows already read are still created.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import date
from hashlib import blake2b
from typing import IO, Any, Protocol

from tidings.campaigns.fanout_check import (
    check_contact_list,
    check_templates,
    list_management,
    peek_header,
)
from tidings.campaigns.fanout_source import Columns, read_rows, text_stream
from tidings.campaigns.fanout_timing import Planned, Planner, QuietHours, parse_instant
from tidings.errors import TidingsError, ValidationError
from tidings.model.campaigns import (
    CampaignRecord,
    CampaignStatus,
    Step,
    check_campaign_name,
    recipient_key,
)
from tidings.model.email import check_address
from tidings.model.schedules import (
    MAX_INPUT_CHARS,
    ActionAfterCompletion,
    ScheduleRow,
    ScheduleSpec,
    ScheduleState,
    Target,
    TargetKind,
    target_text,
)
from tidings.notify.base import SCHEDULES_CHANNEL
from tidings.runtime.bridge import bulk_writer
from tidings.schedules.service import (
    ScheduleService,
    check_email_target,
)
from tidings.store.base import (
    CampaignStore,
    ContactStore,
    EmailStore,
    ScheduleStore,
    StoreRuntime,
)


class FanoutStore(CampaignStore, ContactStore, EmailStore, ScheduleStore, StoreRuntime, Protocol):
    """What this module asks of the store: the campaign, its schedules, the templates it
    checks, and how the store runs."""

PAST_MARGIN_MS = 2_000
# The stored form of a campaign's email target is '{"destination":"","input":<doc>,
# "kind":"email","options":{"unsubscribe":true}}' (`target_text`, keys sorted): each row's
# is written around its own document. A campaign is bulk mail: every message carries the
# one-click unsubscribe, which a SendEmail without ListManagementOptions would not.
CAMPAIGN_OPTIONS = {"unsubscribe": True}
TARGET_HEAD = '{"destination":"","input":'
TARGET_TAIL = ',"kind":"email","options":{"unsubscribe":true}}'
PERCENT_MIN_ROWS = 100
ERROR_SAMPLE = 20


@dataclass(frozen=True)
class FanoutOptions:
    campaign: str
    template: str
    sender: str
    steps: tuple[Step, ...] = ()  # empty: one step "send" at the run's time
    on: date | None = None  # wall-time mode: this local date …
    local_time: str | None = None  # … at this local time
    next_time: str | None = None  # or: the next time this local time comes
    columns: Columns = Columns()
    quiet_hours: str | None = None  # "21:00-08:00"
    flexible_window_minutes: int | None = None
    max_errors: int | None = None
    max_error_percent: float | None = None
    format: str = "csv"
    chunk: int = 20_000
    #: The contact list (and topic) the mail is about: each message names it in its
    #: ListManagementOptions, so an unsubscribe opts out of that topic (or list) and a
    #: contact who opted out is skipped at send time. None: the one-click unsubscribe of
    #: campaign mail puts the address on the account suppression list.
    contact_list: str | None = None
    topic: str | None = None


@dataclass
class FanoutProgress:
    rows_read: int = 0
    schedules_created: int = 0
    schedules_existing: int = 0  # already there (a re-run): left untouched
    skipped_past: int = 0
    errors: int = 0
    bytes_read: int = 0
    bytes_total: int | None = None
    elapsed_s: float = 0.0


@dataclass
class FanoutSummary(FanoutProgress):
    campaign: str = ""
    stopped: bool = False  # the tolerated failure threshold was exceeded
    stop_reason: str | None = None
    error_sample: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


Progress = Callable[[FanoutProgress], None]


def _steps(opts: FanoutOptions) -> tuple[Step, ...]:
    if opts.steps:
        names = [s.name for s in opts.steps]
        if len(set(names)) != len(names):
            raise ValidationError("Step", "step names must be unique")
        return opts.steps
    return (Step("send"),)


def _planner(opts: FanoutOptions, steps: Sequence[Step], now: int) -> Planner:
    from tidings.campaigns.fanout_timing import parse_date, parse_time

    modes = [m for m in (opts.on or opts.local_time, opts.next_time, opts.columns.at) if m]
    if len(modes) != 1:
        raise ValidationError("Timing", "give one of: --local-time with --on, --next, "
                              "or --at-column")
    quiet = QuietHours.parse(opts.quiet_hours) if opts.quiet_hours else None
    common: dict[str, Any] = {"quiet": quiet, "flex_minutes": opts.flexible_window_minutes,
                              "now_ms": now}
    if opts.columns.at:
        return Planner(steps, **common)
    if opts.next_time:
        return Planner(steps, time=parse_time("next_time", opts.next_time), next_time=True,
                       **common)
    if opts.on is None or opts.local_time is None:
        raise ValidationError("Timing", "--local-time and --on go together")
    on = opts.on if isinstance(opts.on, date) else parse_date("on", str(opts.on))
    time_ = parse_time("local_time", opts.local_time)
    return Planner(steps, on=on, time=time_, **common)


@dataclass(eq=False)
class _Run:
    """One fan-out run: turns rows into the store's schedule rows."""

    service: ScheduleService
    opts: FanoutOptions
    steps: Sequence[Step]
    planner: Planner
    errors: IO[str] | None
    s: FanoutSummary

    def __post_init__(self) -> None:
        opts, steps = self.opts, self.steps
        # Every row is valid by construction: the parts shared by a step are made once.
        for step in steps:  # the same checks a ScheduleSpec makes, once per step
            ScheduleSpec(name=step.name + "-x", expression="at(2000-01-01T00:00:00)",
                         target=Target(TargetKind.EMAIL, "", input="{}"), group=opts.campaign,
                         flexible_window_minutes=opts.flexible_window_minutes).validated()
        probe = target_text(Target(TargetKind.EMAIL, "", input="\u0000",
                                   options=CAMPAIGN_OPTIONS))
        if not (probe.startswith(TARGET_HEAD) and probe.endswith(TARGET_TAIL)):
            raise AssertionError("the stored form of Target changed: update TARGET_HEAD/TAIL")
        self._prefix = [step.name + "-" for step in steps]
        self._description = [f"campaign {opts.campaign}, step {step.name}" for step in steps]
        self._step_tpl = [step.template or opts.template for step in steps]
        self._head = ('{"FromEmailAddress":' + json.dumps(opts.sender) + ","
                      + list_management(opts.contact_list, opts.topic)
                      + '"Destination":{"ToAddresses":[')
        self._middle = {tpl: '"Content":{"Template":{"TemplateName":' + json.dumps(tpl)
                        + ',"TemplateData":' for tpl in self._step_tpl}
        self.stop = False

    def error(self, row: int, rid: str, message: str) -> None:
        s = self.s
        s.errors += 1
        doc = {"row": row, "id": rid, "error": message}
        if self.errors is not None:
            self.errors.write(json.dumps(doc) + "\n")
        if len(s.error_sample) < ERROR_SAMPLE:
            s.error_sample.append(doc)
        self._check_threshold()

    def _check_threshold(self, final: bool = False) -> None:
        s, o = self.s, self.opts
        if o.max_errors is not None and s.errors > o.max_errors:
            self._halt(f"{s.errors} errors: more than the {o.max_errors} tolerated")
        elif (o.max_error_percent is not None and (final or s.rows_read >= PERCENT_MIN_ROWS)
              and s.errors * 100 > o.max_error_percent * s.rows_read):
            self._halt(f"{s.errors} errors in {s.rows_read} rows: more than the "
                       f"{o.max_error_percent}% tolerated")

    def _halt(self, reason: str) -> None:
        if not self.stop:
            self.stop = True
            self.s.stopped = True
            self.s.stop_reason = reason

    def schedules(self, rows: Iterator[Any]) -> Iterator[ScheduleRow]:
        """The store rows of the campaign's schedules, built as tuples in the store's column
        order: no object per schedule (a dataclass costs more than the rest of a row), and
        the target's JSON written by concatenation around each recipient's document."""
        s = self.s
        planner = self.planner
        at_column = self.opts.columns.at
        dumps = json.dumps
        now_ms = self.service.clock.now_ms
        limit = now_ms() + PAST_MARGIN_MS
        numbered = list(enumerate(self._step_tpl))
        head, middle = self._head, self._middle
        group = self.opts.campaign
        flex = self.opts.flexible_window_minutes
        window_ms = (flex or 0) * 60_000
        enabled, delete = ScheduleState.ENABLED.value, ActionAfterCompletion.DELETE.value
        for row in rows:
            if self.stop:
                break
            s.rows_read += 1
            if s.rows_read % 1000 == 0:
                limit = now_ms() + PAST_MARGIN_MS
                self._check_threshold()
            if len(row) == 3:
                self.error(*row)
                continue
            n, rid, email, zone, at, data = row
            try:
                if not rid:
                    raise ValidationError(self.opts.columns.id, "is empty")
                check_address(self.opts.columns.email, email)
                if at_column is not None:
                    if not at:
                        raise ValidationError(at_column, "is empty")
                    plan: list[Planned] = planner.instant_plan(
                        parse_instant(at_column, at), zone)
                else:
                    plan = planner.zone_plan(zone)
            except TidingsError as exc:
                self.error(n, rid, exc.message)
                continue
            key = recipient_key(rid)
            email_text = head + dumps(email) + "]},"
            # the variables tidings provides (PROVIDED), then the row's own columns
            data_text = dumps(dumps({"id": rid, "email": email, "timezone": zone, **data})) \
                + "}}}"
            targets: dict[str, str] = {}
            out: list[ScheduleRow] = []
            created = now_ms()
            for i, tpl in numbered:
                expression, tz, instant = plan[i]
                if instant < limit:
                    s.skipped_past += 1
                    continue
                target = targets.get(tpl)
                if target is None:
                    text = email_text + middle[tpl] + data_text
                    if len(text) > MAX_INPUT_CHARS:
                        out = []
                        self.error(n, rid, "the email document is longer than "
                                   f"{MAX_INPUT_CHARS} characters")
                        break
                    target = targets[tpl] = TARGET_HEAD + dumps(text) + TARGET_TAIL
                name = self._prefix[i] + key
                # flex_offset_ms, inlined (the same hash: tests check they agree)
                due = instant + (int.from_bytes(blake2b(
                    f"{group}/{name}/{instant}".encode(), digest_size=8).digest(), "big")
                    % window_ms if window_ms else 0)
                out.append(ScheduleRow(
                    group, name, enabled, expression, tz, None, None, flex, target, delete,
                    self._description[i], None, instant, due, created, created))
            yield from out


def run_fanout(service: ScheduleService, store: FanoutStore, source: IO[bytes],
               opts: FanoutOptions, *,
               errors: IO[str] | None = None, on_progress: Progress | None = None,
               bytes_total: int | None = None) -> FanoutSummary:
    """Fan `source` (binary CSV or JSON Lines) out into the campaign's schedules, written
    to `store` (the schedule service's own, seen as what a fan-out writes)."""
    check_campaign_name(opts.campaign)
    check_address("--from", opts.sender)
    steps = _steps(opts)
    now = service.clock.now_ms()
    planner = _planner(opts, steps, now)
    for tpl in {s.template or opts.template for s in steps}:
        store.get_template(tpl)  # TemplateNotFound before any row is read
    check_contact_list(store, opts.contact_list, opts.topic)
    stream, counter = text_stream(source)
    lines, header = peek_header(stream, opts.format)
    check_templates(store, [s.template or opts.template for s in steps], opts.columns,
                    header)  # every variable is in each row: or nothing
    store.create_group(opts.campaign, {"tidings:campaign": opts.campaign}, now)
    record = CampaignRecord(opts.campaign, tuple(steps), opts.template, CampaignStatus.ACTIVE,
                            0, 0, 0, 0, now, now)
    if not store.create_campaign(record):
        existing = store.get_campaign(opts.campaign)
        if existing.status is not CampaignStatus.ACTIVE:
            raise ValidationError("Campaign", f"campaign {opts.campaign} is "
                                  f"{existing.status.value}: resume it before a fan-out")
        merged = {s.name: s for s in existing.steps}
        merged.update({s.name: s for s in steps})
        store.update_campaign_steps(opts.campaign, list(merged.values()), now)

    summary = FanoutSummary(campaign=opts.campaign, bytes_total=bytes_total)
    run = _Run(service, opts, steps, planner, errors, summary)
    started = time.perf_counter()

    def progress() -> None:
        # Filled in whether anyone watches: the summary a Python caller gets back reports
        # them too (it used to say 0 bytes in 0.0 s without a progress callback).
        summary.bytes_read = counter.bytes_read
        summary.elapsed_s = time.perf_counter() - started
        if on_progress is not None:
            on_progress(summary)

    def written(done: Future[tuple[int, int]]) -> None:
        created, total = done.result()
        summary.schedules_created += created
        summary.schedules_existing += total - created
        # created schedules were counted with their insert (`insert_schedule_rows`)
        store.add_campaign_progress(opts.campaign, summary.rows_read, summary.errors, 0,
                                    service.clock.now_ms())
        if created:
            service.notifier.notify(SCHEDULES_CHANNEL)
        progress()

    checked: set[str] = set()
    rows = read_rows(lines, opts.format, opts.columns)
    # Pipelined as create_many is (on PostgreSQL the store writes one chunk in its own
    # thread while the next one is built here; on SQLite inline: see `bulk_writer`).
    # Each chunk goes in due order, so the due index takes it in page-local runs rather
    # than one random page per row.
    with bulk_writer(store.max_concurrency) as writer:
        pending: Future[tuple[int, int]] | None = None
        batch: list[ScheduleRow] = []
        for item in run.schedules(rows):
            batch.append(item)
            if len(batch) >= opts.chunk:
                _check_documents(service, batch, checked)
                batch.sort(key=_due)
                nxt = writer.submit(_insert, store, batch)
                if pending is not None:
                    written(pending)
                pending, batch = nxt, []
        if batch:
            _check_documents(service, batch, checked)
            batch.sort(key=_due)
            nxt = writer.submit(_insert, store, batch)
            if pending is not None:
                written(pending)
            pending = nxt
        if pending is not None:
            written(pending)
    store.add_campaign_progress(opts.campaign, summary.rows_read, summary.errors, 0,
                                service.clock.now_ms())
    if not summary.stopped:
        run._check_threshold(final=True)  # a small run can exceed the percentage only now
    progress()
    return summary


def _due(row: ScheduleRow) -> int:
    return row.due_at or 0


def _insert(store: FanoutStore, batch: Sequence[ScheduleRow]) -> tuple[int, int]:
    return store.insert_schedule_rows(batch, campaign=batch[0].group), len(batch)


def _check_documents(service: ScheduleService, batch: Sequence[ScheduleRow],
                     checked: set[str]) -> None:
    """The first document of each template goes through the full email-target check (the
    SendEmail parser, the template's existence): the others share its shape."""
    for row in batch:
        step = row.description or ""  # one description per step, so per template
        if step not in checked:
            check_email_target(service.store, Target.from_json(json.loads(row.target)),
                               sender_check=service.sender_check)
            checked.add(step)
