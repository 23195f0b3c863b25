"""Data the browser tests find in the console, hostile names and bodies included."""

from __future__ import annotations

from tidings.client import Tidings
from tidings.clock import Clock
from tidings.model.queues import RedrivePolicy
from tidings.model.schedules import ScheduleSpec, Target, TargetKind
from tidings.model.states import ScheduleState
from tidings.schedules.firing_log import Outcome

#: Shown as text wherever they appear, never run: the tests check no script ran.
XSS_BODY = "<script>window.pwned = 1</script>"
XSS_IMG = "<img src=x onerror=\"window.pwned = 2\">"


def queues(t: Tidings) -> None:
    """orders and refunds (each → its DLQ after one receive) with three dead letters each,
    emails with 25 messages, purge-me with 5. Tests that change a queue have their own."""
    q = t.queues
    for source in ("orders", "refunds"):
        q.create_queue(f"{source}-dlq")
        q.create_queue(source, redrive_policy=RedrivePolicy(f"{source}-dlq", 1))
        for body in (XSS_BODY, XSS_IMG, '{"order": 3}'):
            q.send(source, body)
        for _ in range(2):  # the second receive moves each message to the DLQ
            for m in q.receive(source, 10, visibility_s=30):
                error = "ValueError: order 3 has no customer" if "3" in m.body else None
                q.change_visibility(source, m.receipt_handle, 0, error=error)
    q.create_queue("emails")
    q.create_queue("purge-me")
    for i in range(25):
        q.send("emails", f'{{"n": {i}}}')
    for i in range(5):
        q.send("purge-me", f'{{"n": {i}}}')


def schedules(t: Tidings) -> None:
    """billing/invoice-daily (a weekday cron in Paris, hostile description and input),
    120 schedules in the group bulk (three pages), and one each to disable, enable, delete."""
    s = t.schedules
    t.queues.create_queue("ticks")  # what the schedules fire into
    s.create_group("billing")
    s.create_group("bulk")
    s.create(ScheduleSpec(name="invoice-daily", group="billing",
                          expression="cron(0 9 ? * MON-FRI *)", timezone="Europe/Paris",
                          target=Target(TargetKind.QUEUE, "ticks", input=XSS_IMG,
                                        dead_letter_queue="orders-dlq"),
                          description=XSS_BODY))
    hook = s.create(ScheduleSpec(name="hook", expression="rate(1 day)",
                                 target=Target(TargetKind.WEBHOOK, "https://hooks.example.com/t")))
    # Its last firings: one delivered, one given up (the reason is hostile text).
    day = 86_400_000
    t.firing_log.record(hook.id, hook.created_at - 2 * day, Outcome.DELIVERED, 1)
    t.firing_log.record(hook.id, hook.created_at - day, Outcome.DROPPED, 3,
                        f"HTTP500: {XSS_IMG}")
    for name in ("to-disable", "to-delete"):
        s.create(ScheduleSpec(name=name, expression="rate(1 day)",
                              target=Target(TargetKind.QUEUE, "ticks")))
    s.create(ScheduleSpec(name="to-enable", expression="rate(1 day)", state=ScheduleState.DISABLED,
                          target=Target(TargetKind.QUEUE, "ticks")))
    list(s.create_many(ScheduleSpec(name=f"bulk-{i:03d}", group="bulk", expression="rate(7 days)",
                               target=Target(TargetKind.QUEUE, "ticks"))
                       for i in range(120)))


#: A template that tries everything a preview must not let it do.
HOSTILE_HTML = ("<h1 style=\"color:#2f6fde\">Hello {{name}}</h1>"
                "<script>parent.pwned = 3</script>"
                "<img src=\"http://198.51.100.7/track.png\" alt=\"tracker\">"
                "{{#if order}}<p>Order {{order.id}}</p>{{/if}}")


def campaigns(t: Tidings) -> None:
    """Templates (one hostile), and campaigns spring, autumn, winter (12 recipients, two
    steps each, on 1 March next year) plus summer, whose first step is due within the hour,
    for its forecast. Every time is read from `t.clock`, the clock the seed was given."""
    import io
    from datetime import date, timedelta
    from zoneinfo import ZoneInfo

    from tidings.campaigns.fanout import FanoutOptions
    from tidings.clock import from_ms
    from tidings.model.campaigns import Step

    t.email.create_template("welcome", "Welcome {{name}}", html=HOSTILE_HTML,
                            text="Hi {{name}}{{#if order}}, order {{order.id}}{{/if}}")
    # (#if: the campaigns below fan this template out to a list without an order column,
    # and fan-out refuses a template some row cannot render)
    t.email.create_template("nudge", "Still there?", text="Hello again {{name}}")
    zones = ["America/New_York", "Europe/London", "Asia/Kolkata", "Australia/Sydney"]
    now = from_ms(t.clock.now_ms())
    # Summer's forecast must have a bar in the console's next 6 hours at whatever hour the
    # suite runs. Its welcome step has no time of its own, so it takes the run's (a fixed
    # 09:00 overrode it and left 14:00-22:00 UTC empty in December), and that time is an
    # hour from now in Kolkata, which has kept UTC+05:30 all year since 1945: no DST gap or
    # repeated hour can move it, so Kolkata's recipients get it 59-60 minutes from now
    # (later today, or, when the hour crosses midnight there, tomorrow: the same instant).
    soon = (now + timedelta(hours=1)).astimezone(ZoneInfo("Asia/Kolkata")).strftime("%H:%M")
    steps = (Step("welcome", 0), Step("nudge", 2, "10:00", "nudge"))
    for campaign in ("spring", "autumn", "winter", "summer"):
        rows = ["id,email,timezone,name"] + [
            f"r{i},user{i}@example.com,{zones[i % 4]},Name {i}" for i in range(12)]
        timing: dict[str, object] = (
            {"next_time": soon} if campaign == "summer"
            else {"on": date(now.year + 1, 3, 1), "local_time": "09:00"})
        t.campaigns.fanout(io.BytesIO(("\n".join(rows) + "\n").encode()), FanoutOptions(
            campaign=campaign, template="welcome", sender="news@example.com", steps=steps,
            **timing))  # type: ignore[arg-type]


def email(t: Tidings) -> None:
    """Deliveries waiting for a relay, and a suppression list."""
    for who in ("ada@example.com", "grace@example.com"):
        t.email.send({"FromEmailAddress": "news@example.com",
                      "Destination": {"ToAddresses": [who]},
                      "Content": {"Simple": {"Subject": {"Data": XSS_BODY},
                                             "Body": {"Text": {"Data": "hello"}}}}})
    t.email.suppress("bounced@example.com", "BOUNCE")
    t.email.suppress("remove-me@example.com")


def everything(url: str, clock: Clock | None = None) -> None:
    """Everything above, written with `clock` (the system clock when None)."""
    with Tidings(url, clock=clock) as t:
        queues(t)
        schedules(t)
        campaigns(t)
        email(t)
