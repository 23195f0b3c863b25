"""A serving process moves what it built at startup out of the garbage collector's
reach, so full collections mid-burst walk only what was made since."""

from __future__ import annotations

import gc

from tidings.node import freeze_startup_objects


def _collected(obj: object) -> bool:
    """Whether a collection would walk `obj` (the permanent generation is not listed)."""
    return any(o is obj for o in gc.get_objects())


def test_startup_objects_are_frozen_and_later_ones_are_not() -> None:
    gc.unfreeze()
    try:
        startup: list[list[int]] = [[1]]
        assert _collected(startup)
        freeze_startup_objects()
        assert gc.get_freeze_count() > 0
        assert not _collected(startup)
        later: list[list[int]] = [[2]]
        assert _collected(later)
    finally:
        gc.unfreeze()
