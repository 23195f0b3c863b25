"""Testing tidings apps without waiting: `time_travel` (a context manager) and the pytest
fixture `tidings_time_travel` (registered as a pytest plugin when tidings is installed).

    from datetime import UTC, datetime
    from tidings.testing import time_travel

    with time_travel(app, start=datetime(2026, 3, 1, 8, tzinfo=UTC)) as tt:
        signup.send(user="ada")
        tt.advance(days=7)
        assert [e.subject for e in tt.sent_emails] == [...]
"""

from tidings.testing.mail import SentEmail
from tidings.testing.runner import JobRun
from tidings.testing.time_travel import QueuedMessage, QueueView, TimeTravel, time_travel

__all__ = ["JobRun", "QueueView", "QueuedMessage", "SentEmail", "TimeTravel", "time_travel"]
