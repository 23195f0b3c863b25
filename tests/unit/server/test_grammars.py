"""The native API's grammars (server/native/grammars.py) against the engine's parsers:
whatever a pattern generates, the engine takes (but for the rules the module names), and
the patterns compile in pydantic's regex dialect as they do in Python's."""

from __future__ import annotations

import re
from typing import Annotated

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import StringConstraints, TypeAdapter, ValidationError

from tidings.errors import ValidationError as TidingsValidationError
from tidings.model.limits import Rate
from tidings.model.push import parse_rate, parse_timeout_ms
from tidings.server.native import grammars as g
from tidings.triggers import validate_expression

EXAMPLES = settings(max_examples=300, deadline=None)


def _backwards(expression: str) -> bool:
    return "runs backwards" in _engine_error(expression)


def _engine_error(expression: str) -> str:
    try:
        validate_expression(expression)
    except TidingsValidationError as exc:
        return exc.message
    return ""


@EXAMPLES
@given(st.from_regex(g.EXPRESSION, fullmatch=True).filter(lambda s: len(s) <= 256))
def test_every_expression_the_pattern_allows_the_engine_takes(expression: str) -> None:
    error = _engine_error(expression)
    assert error == "" or "runs backwards" in error, (expression, error)


@pytest.mark.parametrize("expression", [
    "cron(0 9 ? * MON-FRI *)", "cron(0/15 * * * ? *)", "cron(0 0 L * ? *)",
    "cron(0 0 ? * 3#2 *)", "cron(0 0 15W * ? 2030)", "cron(5 4 ? jan-mar 6L 1970-2199)",
    "rate(1 minute)", "rate(5 hours)", "rate(30 days)", "at(2030-01-01T09:00:00)",
    "at(2028-02-29T23:59:59.250)", "at(2000-02-29T00:00:00)"])
def test_what_users_write_is_in_the_grammar(expression: str) -> None:
    assert re.match(g.EXPRESSION, expression), expression
    validate_expression(expression)


@pytest.mark.parametrize("expression", [
    "cron(0 9 * * MON-FRI *)", "cron(0 9 ? * ? *)", "cron(60 * * * ? *)", "rate(1 hours)",
    "rate(2 hour)", "rate(0 minutes)", "at(2030-02-29T00:00:00)", "at(1900-02-29T00:00:00)",
    "at(2030-01-01T24:00:00)", "at(0000-01-01T00:00:00)", "cron(0 0 ? * 1/2 *)", ""])
def test_what_the_engine_refuses_the_pattern_refuses(expression: str) -> None:
    assert not re.match(g.EXPRESSION, expression), expression
    with pytest.raises(TidingsValidationError):
        validate_expression(expression)


@EXAMPLES
@given(st.from_regex(g.LIMIT_RATE, fullmatch=True))
def test_limit_rates(text: str) -> None:
    Rate.parse(text)


@EXAMPLES
@given(st.from_regex(g.PUSH_RATE, fullmatch=True), st.from_regex(g.PUSH_TIMEOUT, fullmatch=True))
def test_push_rates_and_timeouts(rate: str, timeout: str) -> None:
    parse_rate(rate)
    parse_timeout_ms(timeout)


PATTERNS = [g.EXPRESSION, g.LIMIT_RATE, g.PUSH_RATE, g.PUSH_TIMEOUT, g.DATE, g.TIME_OF_DAY,
            g.QUIET_HOURS, g.STEP]


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_pydantic_reads_each_pattern_as_python_does(data: st.DataObject) -> None:
    pattern = data.draw(st.sampled_from(PATTERNS))
    sample = data.draw(st.from_regex(pattern, fullmatch=True) | st.text(max_size=30))
    adapter = TypeAdapter(Annotated[str, StringConstraints(pattern=pattern)])
    ours = re.search(pattern, sample) is not None
    try:
        adapter.validate_python(sample)
        theirs = True
    except ValidationError:
        theirs = False
    assert ours == theirs, (pattern, sample)
