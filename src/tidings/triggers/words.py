"""A schedule expression in words, for people reading a console: `cron(0 9 ? * MON-FRI *)`
→ "at 09:00, Monday to Friday". Pure and forgiving: what it cannot put better it says
field by field, never wrongly."""

from __future__ import annotations

import re

DAYS = {"SUN": "Sunday", "MON": "Monday", "TUE": "Tuesday", "WED": "Wednesday",
        "THU": "Thursday", "FRI": "Friday", "SAT": "Saturday"}
DAY_NUMBERS = {str(i + 1): d for i, d in enumerate(DAYS.values())}  # AWS: 1 = Sunday
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December"]
MONTH_NAMES = {m[:3].upper(): m for m in MONTHS} | {str(i + 1): m for i, m in enumerate(MONTHS)}


def describe(expression: str, timezone: str = "UTC") -> str:
    text = expression.strip()
    zone = "" if timezone == "UTC" else f" ({timezone})"
    if text.startswith("at(") and text.endswith(")"):
        return f"once, at {text[3:-1].replace('T', ' ')}{zone or ' UTC'}"
    if text.startswith("rate(") and text.endswith(")"):
        value, _, unit = text[5:-1].strip().partition(" ")
        unit = unit.rstrip("s") if value == "1" else unit
        return f"every {unit}" if value == "1" else f"every {value} {unit}"
    if text.startswith("cron(") and text.endswith(")"):
        fields = text[5:-1].split()
        if len(fields) == 6:
            return _cron(*fields) + zone
    return text


def _list(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _time(minutes: str, hours: str) -> str:
    if re.fullmatch(r"\d+", minutes) and re.fullmatch(r"\d+(,\d+)*", hours):
        return "at " + _list([f"{int(h):02d}:{int(minutes):02d}" for h in hours.split(",")])
    if minutes.startswith("0/") or minutes.startswith("*/"):
        part = f"every {minutes[2:]} minutes"
    elif minutes == "*":
        part = "every minute"
    else:
        part = f"at minute {minutes}"
    if hours == "*":
        return part + (" of every hour" if part.startswith("at") else "")
    if re.fullmatch(r"\d+-\d+", hours):
        start, end = hours.split("-")
        return f"{part} from {int(start):02d}:00 to {int(end):02d}:59"
    return f"{part} of hour {hours}"


def _weekdays(field: str) -> str:
    def day(token: str) -> str:
        return DAYS.get(token.upper()) or DAY_NUMBERS.get(token) or token

    if "#" in field:
        name, _, nth = field.partition("#")
        order = {"1": "first", "2": "second", "3": "third", "4": "fourth", "5": "fifth"}
        return f"on the {order.get(nth, nth)} {day(name)} of the month"
    if field.upper().endswith("L") and len(field) > 1:
        return f"on the last {day(field[:-1])} of the month"
    parts = []
    for piece in field.split(","):
        if "-" in piece:
            a, b = piece.split("-", 1)
            parts.append(f"{day(a)} to {day(b)}")
        else:
            parts.append(day(piece))
    return _list(parts)


def _cron(minutes: str, hours: str, dom: str, month: str, dow: str, year: str) -> str:
    out = [_time(minutes, hours)]
    if dow not in ("?", "*"):
        out.append(_weekdays(dow))
    elif dom == "L":
        out.append("on the last day of the month")
    elif dom.endswith("W"):
        out.append(f"on the weekday nearest day {dom[:-1]} of the month")
    elif dom not in ("?", "*"):
        out.append(f"on day {dom} of the month")
    else:
        out.append("every day")
    if month != "*":
        out.append("in " + _list([MONTH_NAMES.get(m.upper(), m) for m in month.split(",")]))
    if year != "*":
        out.append(f"in {year}")
    return ", ".join(out)
