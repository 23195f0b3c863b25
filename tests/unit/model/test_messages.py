"""`prepare` builds its NewMessage without the frozen dataclass's `__init__`: it must hold
exactly what `__init__` would have made of the same values."""

from __future__ import annotations

import dataclasses

from tidings.model.digests import MessageAttributeValue
from tidings.model.messages import NewMessage, OutgoingMessage, prepare


def _limits(fifo: bool) -> dict[str, object]:
    return {"fifo": fifo, "content_based_dedup": fifo, "default_delay_s": 0,
            "max_delay_s": 900, "max_bytes": 262_144, "retention_s": 60}


def test_a_prepared_message_is_what_its_init_would_make() -> None:
    cases = [
        (OutgoingMessage("hello", delay_s=5), False, 7),
        (OutgoingMessage("x", attributes={"a": MessageAttributeValue("String", "v")},
                         group_id="g"), True, None),
    ]
    for msg, fifo, scheduled_at in cases:
        got = prepare(msg, now=1_000, scheduled_at=scheduled_at,
                      **_limits(fifo))  # type: ignore[arg-type]
        want = NewMessage(**{f.name: getattr(got, f.name)
                             for f in dataclasses.fields(NewMessage)})
        assert set(vars(got)) == {f.name for f in dataclasses.fields(NewMessage)}
        assert got == want
        assert got.sent_at == 1_000 and got.expires_at == 61_000
        assert got.scheduled_at == scheduled_at
    assert got.deduplication_id is not None and got.md5_attributes is not None
    assert cases[0][0].delay_s == 5
