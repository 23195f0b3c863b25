"""What `@app.cron(...)` and `@app.rate(...)` accept, as EventBridge expressions: a cron or
rate expression as it is, or the short forms people write (a crontab line, "5 minutes").
Kept with the parser, the one place that knows the expressions' syntax."""

from __future__ import annotations

import re

from tidings.errors import ValidationError


def cron_expression(text: str) -> str:
    """EventBridge's `cron(m h dom mon dow year)` as it is (with or without `cron(…)`),
    or a standard 5-field crontab line (`m h dom mon dow`, Sunday 0 or 7) turned into it."""
    text = text.strip()
    if text.startswith("cron(") and text.endswith(")"):
        return text
    fields = text.split()
    if len(fields) == 6:
        return f"cron({text})"
    if len(fields) != 5:
        raise ValidationError("cron", "must be EventBridge's 6 fields (m h dom mon dow year) "
                              "or a standard 5-field crontab line (m h dom mon dow)")
    minute, hour, dom, month, dow = fields
    if dom == "*" and dow in ("*", "?"):
        dom, dow = "*", "?"
    elif dow in ("*", "?"):
        dow = "?"
    elif dom in ("*", "?"):
        dom, dow = "?", _aws_days(dow)
    else:
        raise ValidationError("cron", "a standard cron line with both a day of month and a "
                              "day of week (run on either) has no EventBridge equivalent: "
                              "use two periodic jobs")
    return f"cron({minute} {hour} {dom} {month} {dow} *)"


def _aws_days(field: str) -> str:
    """Standard day-of-week (0-7, Sunday 0 and 7, steps allowed) as AWS's (1-7, Sunday 1,
    no steps): numeric parts become an explicit list; names pass through."""
    if re.search(r"[A-Za-z#L]", field):
        return field.upper()
    days: set[int] = set()
    for part in field.split(","):
        m = re.fullmatch(r"(\*|\d+)(?:-(\d+))?(?:/(\d+))?", part)
        if m is None:
            raise ValidationError("cron", f"day-of-week part {part!r} is not valid")
        lo, hi = (0, 6) if m[1] == "*" else (int(m[1]), int(m[2] or m[1]))
        step = int(m[3] or 1)
        if not (0 <= lo <= 7 and 0 <= hi <= 7 and lo <= hi and step >= 1):
            raise ValidationError("cron", f"day-of-week part {part!r} is out of 0-7")
        days.update(d % 7 for d in range(lo, hi + 1, step))
    return ",".join(str(d + 1) for d in sorted(days))


def rate_expression(text: str) -> str:
    text = text.strip()
    if text.startswith("rate(") and text.endswith(")"):
        return text
    return f"rate({text})"
