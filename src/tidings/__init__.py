"""tidings: durable queues, schedules and per-recipient delivery in one process.

    import tidings
    t = tidings.connect("sqlite:///tidings.db")
    t.queues.create_queue("jobs")
    t.queues.send("jobs", '{"type": "invoice.generate", "id": 42}')
"""

from tidings.client import Tidings, connect
from tidings.engine.consumers import App, Job
from tidings.errors import TidingsError, ValidationError
from tidings.model.digests import MessageAttributeValue
from tidings.model.messages import OutgoingMessage
from tidings.model.queues import RedriveAllowPolicy, RedrivePolicy

__all__ = [
    "App",
    "Job",
    "MessageAttributeValue",
    "OutgoingMessage",
    "RedriveAllowPolicy",
    "RedrivePolicy",
    "Tidings",
    "TidingsError",
    "ValidationError",
    "connect",
]
__version__ = "0.1.0"
