"""The text grammars of the native API as regular expressions: schedule expressions
(`at()`, `rate()`, `cron()`), limit and push rates, durations, times of day, campaign steps.

A grammar here is a pattern both pydantic enforces (before the engine sees the value) and
the OpenAPI document states, so a client generated from the document writes only what the
server takes. Each pattern is written in the common subset of ECMA 262 (JSON Schema's
dialect), Rust's `regex` (pydantic's) and Python's `re` (the tests'): character classes
spelt out, no `\\s`, no lookaround. Where the engine is more lenient (a tab between cron
fields, `RATE(…)` in capitals, "0.5s"), the native API takes the plain form the engine's
own messages teach; the Python API and the CLI keep the lenient reading.

Two rules a pattern cannot state at a sane size stay with the engine, and the fuzzer's
hooks name them: a cron range must not run backwards (`5-3`), and a cron that names no
existing day (`cron(0 0 31 2 ? *)`) is valid but never fires.
"""

from __future__ import annotations

from functools import cache
from zoneinfo import available_timezones


def _ci(word: str) -> str:
    """A word in either letter case: `[Jj][Aa][Nn]`."""
    return "".join(f"[{c.upper()}{c.lower()}]" if c.isalpha() else c for c in word)


def _names(words: str) -> str:
    return "|".join(_ci(w) for w in words.split())


# Numbers as the cron parser reads them: ASCII digits, leading zeros allowed, in range.
_MINUTE = "0*(?:[1-5]?[0-9])"
_HOUR = "0*(?:1?[0-9]|2[0-3])"
_DOM = "0*(?:[1-9]|[12][0-9]|3[01])"
_MONTH = "(?:0*(?:[1-9]|1[0-2])|" + _names("JAN FEB MAR APR MAY JUN JUL AUG SEP OCT NOV DEC") + ")"
_DOW = "(?:0*[1-7]|" + _names("SUN MON TUE WED THU FRI SAT") + ")"
_YEAR = "0*(?:19[7-9][0-9]|2[01][0-9][0-9])"
_STEP = "/0*[1-9][0-9]{0,3}"


def _list(value: str, slash: bool = True) -> str:
    item = rf"(?:\*|{value}(?:-{value})?)" + (f"(?:{_STEP})?" if slash else "")
    return f"{item}(?:,{item})*"


_DOM_FIELD = f"(?:{_ci('L')}|{_ci('LW')}|{_DOM}{_ci('W')}|{_list(_DOM)})"
_DOW_FIELD = f"(?:{_ci('L')}|{_DOW}{_ci('L')}|{_DOW}#0*[1-5]|{_list(_DOW, slash=False)})"
_CRON = (rf"cron\({_list(_MINUTE)} +{_list(_HOUR)} +"
         rf"(?:\? +{_list(_MONTH)} +{_DOW_FIELD}|{_DOM_FIELD} +{_list(_MONTH)} +\?)"
         rf" +{_list(_YEAR)}\)")

# rate(value unit): singular for 1, plural above; a value of up to 6 digits (about 2
# years in minutes, 2,700 years in days) keeps every period a 64-bit count of ms.
_RATE = r"rate\((?:0*1 (?:minute|hour|day)|0*(?:[2-9]|[1-9][0-9]{1,5}) (?:minutes|hours|days))\)"

# at(yyyy-mm-ddThh:mm:ss[.fff]), a day the calendar has, in years 0001-9999.
_YEAR4 = "(?:[0-9]{3}[1-9]|[0-9]{2}[1-9]0|[0-9][1-9]00|[1-9]000)"
_LEAP = "(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)"
_DATE = (f"(?:{_YEAR4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"
         "|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))"
         f"|{_LEAP}-02-29)")
_AT = rf"at\({_DATE}T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{{1,3}})?\)"

#: A schedule expression: at(...), rate(...) or cron(...), as in EventBridge Scheduler.
EXPRESSION = f"^(?:{_AT}|{_RATE}|{_CRON})$"

#: A date YYYY-MM-DD the calendar has.
DATE = f"^{_DATE}$"
#: A time of day, HH:MM or HH:MM:SS.
_TIME = "(?:[01][0-9]|2[0-3]):[0-5][0-9]"
TIME_OF_DAY = f"^{_TIME}(?::[0-5][0-9])?$"
#: Quiet hours: HH:MM-HH:MM (that the two differ is the engine's to say).
QUIET_HOURS = f"^{_TIME}-{_TIME}$"
#: A campaign step: name:day, name:day:HH:MM or name:day:HH:MM:template.
STEP = (r"^[0-9A-Za-z_.]{1,20}:0*(?:[0-9]{1,2}|[12][0-9]{2}|3[0-5][0-9]|36[0-6])"
        rf"(?::{_TIME}(?::[A-Za-z0-9_-]{{0,64}})?)?$")

# A limit's rate: N/unit or N/Tunit, a period of at most 7 days (the engine's bound).
_PERIODS = {
    "ms": "[1-9][0-9]{0,7}|[1-5][0-9]{8}|60[0-3][0-9]{6}|604[0-7][0-9]{5}|604800000",
    "s|sec|second": "[1-9][0-9]{0,4}|[1-5][0-9]{5}|60[0-3][0-9]{3}|604[0-7][0-9]{2}|604800",
    "m|min|minute": "[1-9][0-9]{0,3}|100[0-7][0-9]|10080",
    "h|hour": "[1-9][0-9]?|1[0-5][0-9]|16[0-8]",
    "d|day": "[1-7]",
}
#: `200/s`, `1000/min`, `20/h`, `5/10s`: starts per period, a period of 1 ms to 7 days.
LIMIT_RATE = "^[1-9][0-9]{0,8}/(?:" + "|".join(
    f"(?:{times})?(?:{units})" for units, times in _PERIODS.items()) + ")$"

#: A push rate: pushes per second (`5`), or per unit (`100/s`, `600/m`, `3600/h`).
PUSH_RATE = "^[1-9][0-9]{0,5}(?:/(?:s|sec|second|m|min|minute|h|hour))?$"
#: A push timeout: `30s`, `500ms`, `2m` or seconds, from 1 ms to 15 minutes.
PUSH_TIMEOUT = ("^(?:(?:[1-9][0-9]{0,4}|[1-8][0-9]{5}|900000)ms"
                "|(?:[1-9][0-9]?|[1-8][0-9]{2}|900)s?|(?:[1-9]|1[0-5])m)$")


@cache
def time_zones() -> tuple[str, ...]:
    """The IANA zones a schedule may name: the tz database's names, as the engine's
    `resolve_zone` takes them (without the host's `localtime` and tzdata's placeholders)."""
    return tuple(sorted(available_timezones() - {"localtime", "Factory", "posixrules"}))
