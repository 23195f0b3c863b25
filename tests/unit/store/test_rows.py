"""stored_message builds the record its dataclass constructor would."""

from __future__ import annotations

from dataclasses import FrozenInstanceError, asdict

import pytest

from tidings.model.messages import StoredMessage
from tidings.store.rows import stored_message

ROW = (7, 9, "m-1", "body", "md5", '{"a": 1}', "md5a", 3, 1000, 900, 2000, "g", "d", 4,
       "err", 1234)


@pytest.mark.parametrize("fifo", [False, True])
def test_stored_message_equals_the_constructed_record(fifo: bool) -> None:
    want = StoredMessage(
        row_id=7, lease_token=9, message_id="m-1", body="body", md5_body="md5",
        attributes_json='{"a": 1}', md5_attributes="md5a", receive_count=3,
        first_received_at=1000, sent_at=900, visible_at=2000, group_id="g",
        deduplication_id="d", sequence_number=7 if fifo else None, source_queue_id=4,
        last_error="err", scheduled_at=1234)
    got = stored_message(ROW, fifo)
    assert got == want and repr(got) == repr(want) and asdict(got) == asdict(want)
    assert hash(got) == hash(want)
    with pytest.raises(FrozenInstanceError):
        got.body = "other"  # type: ignore[misc]


def test_a_row_of_the_wrong_width_is_an_error() -> None:
    with pytest.raises(ValueError):
        stored_message(ROW[:-1], False)
