"""The garbage collector of a long-running node process, set once its start-up is over.

Two things, both measured:
- What a process imported and built before serving lives as long as the process: moved
  out of the collector's reach (`gc.freeze`), a full collection no longer walks it each
  time. Those walks took 80-380 ms on a loaded 2-core machine mid-burst
  (bench/delayed_jobs.py), stalling the event loop and every handler with it.
- Each job, email or request allocates a few hundred short-lived containers (futures,
  records, dicts), nearly all gone before a collection could find them in a cycle. At
  CPython's default (a young collection every 700 net allocations) an email delivery
  paid for one every few emails: ~11 µs of collector time an email, ~4 % of the node
  (bench/email.py's handler). A young generation of `YOUNG_THRESHOLD` is collected 30
  times less often, each collection walking a few thousand more objects (~1 ms at most:
  a pause well under the 20 ms a firing may be late); bench/email.py, run alternately,
  six runs each on SQLite: median 4,725 → 5,088 emails/s, 0.345 → 0.318 ms of CPU an
  email. Cycles are still collected, a little later; the older generations keep their
  default pace relative to the young one.
"""

from __future__ import annotations

import gc

#: Net allocations of container objects between two young-generation collections.
YOUNG_THRESHOLD = 20_000


def settle_after_startup() -> None:
    """Freeze what start-up built and space out young collections (see above)."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
