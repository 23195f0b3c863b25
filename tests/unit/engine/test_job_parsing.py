"""How a message becomes a job: parse_job (its fast path, `raw_decode` alone) reads every
body exactly as `json.loads` would, and what is not a job body is poison."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tidings.jobs.handlers import Job, PoisonMessage, occurrence_text, parse_job
from tidings.store.rows import stored_message


def message(body: str, scheduled_at: int | None = None) -> Any:
    return stored_message((7, 9, "m-1", body, "md5", None, None, 3, 1000, 900, 2000, None,
                           None, None, None, scheduled_at), False)


def reference(body: str, scheduled_at: int | None = None) -> Job:
    payload = json.loads(body)
    job_id = payload.get("id")
    return Job(id=str(job_id) if job_id is not None else "m-1", type=payload["type"],
               payload=payload, queue="q", attempt=3, message_id="m-1", sent_at=900,
               scheduled_time=None if scheduled_at is None else occurrence_text(scheduled_at))


@pytest.mark.parametrize("body", [
    '{"type": "noop", "id": "a-1"}',
    '  {"type": "noop", "id": 12}  ',
    '{"type": "noop"}\n',
    '{"type": "t", "id": "x", "n": NaN, "deep": {"a": [1, 2.5, null, true]}}',
    '{"type": "caf\\u00e9", "id": "\u00e9\u00e8", "once": true}',
])
def test_job_bodies_parse_as_json_loads_reads_them(body: str) -> None:
    got = parse_job("q", message(body))
    want = reference(body)
    assert got == want and got.key == want.key


def test_a_scheduled_job_keeps_its_occurrence() -> None:
    got = parse_job("q", message('{"type": "t", "id": "x"}', scheduled_at=1_700_000_000_250))
    assert got == reference('{"type": "t", "id": "x"}', scheduled_at=1_700_000_000_250)
    assert got.key == f"t:x@{occurrence_text(1_700_000_000_250)}"


@pytest.mark.parametrize("body", [
    "", "   ", "not json", '{"type": "t"} trailing', '{"type": "t",}', '{"type": 1}',
    '["type", "t"]', '"t"', '{"type": "t"', "{}",
])
def test_what_is_not_a_job_body_is_poison(body: str) -> None:
    with pytest.raises(PoisonMessage) as err:
        parse_job("q", message(body))
    assert err.value.code == "NotAJob"


def test_a_body_nested_too_deep_to_read_is_poison_not_a_crash() -> None:
    body = '{"type": "t", "x": ' + "[" * 100_000 + "]" * 100_000 + "}"
    with pytest.raises(PoisonMessage) as err:
        parse_job("q", message(body))
    assert err.value.code == "NotAJob"
