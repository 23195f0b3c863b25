"""tidings: durable queues, schedules and per-recipient delivery in one process.

    import tidings
    app = tidings.App(queue="jobs", db="sqlite:///tidings.db")

    @app.task
    def generate(invoice_id: int) -> None: ...

    generate.send(invoice_id=42)   # `tidings serve --app module:app` runs it
"""

from tidings.campaigns.fanout import FanoutOptions, FanoutSummary
from tidings.campaigns.fanout_source import Columns
from tidings.client import Tidings, connect
from tidings.errors import TidingsError, ValidationError
from tidings.jobs.consumers import Job
from tidings.model.campaigns import Step
from tidings.model.digests import MessageAttributeValue
from tidings.model.limits import Limit, RetryAfter
from tidings.model.messages import OutgoingMessage
from tidings.model.queues import RedriveAllowPolicy, RedrivePolicy
from tidings.model.schedules import ScheduleSpec, Target
from tidings.tasks.app import App
from tidings.tasks.sending import JobHandle
from tidings.tasks.task import Task
from tidings.version import VERSION as __version__  # noqa: F401 (the package's version)

__all__ = [
    "App",
    "Columns",
    "FanoutOptions",
    "FanoutSummary",
    "Job",
    "JobHandle",
    "Limit",
    "ScheduleSpec",
    "Step",
    "Target",
    "Task",
    "MessageAttributeValue",
    "OutgoingMessage",
    "RedriveAllowPolicy",
    "RedrivePolicy",
    "RetryAfter",
    "Tidings",
    "TidingsError",
    "ValidationError",
    "connect",
]
