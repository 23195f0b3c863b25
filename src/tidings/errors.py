"""One exception root for tidings; the class docstring is the default message.

The server maps each class to an HTTP status and an AWS error code in one table
(`server/errors.py`), so raising the right class here is all a service needs to do.
"""

from __future__ import annotations


class TidingsError(Exception):
    """Something went wrong in tidings."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (self.__class__.__doc__ or "").strip())

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""


class ValidationError(TidingsError):
    """A value is not valid."""

    def __init__(self, field: str, rule: str) -> None:
        self.field = field
        self.rule = rule
        super().__init__(f"{field}: {rule}")


class NotFoundError(TidingsError):
    """The resource does not exist."""

    kind = "resource"
    #: The message, from `kind` and the id; AWS's own words where an AWS API reports it.
    wording = "{kind} {ident!r} does not exist"

    def __init__(self, ident: str, message: str | None = None) -> None:
        self.ident = ident
        super().__init__(message or self.wording.format(kind=self.kind, ident=ident))


class QueueNotFound(NotFoundError):
    """The queue does not exist."""

    kind = "queue"


class ScheduleNotFound(NotFoundError):
    """The schedule does not exist."""

    kind = "schedule"


class GroupNotFound(NotFoundError):
    """The schedule group does not exist."""

    kind = "schedule group"


class TemplateNotFound(NotFoundError):
    """The template does not exist."""

    kind = "template"
    wording = "Template {ident} does not exist."  # SES v2's NotFoundException


class DatabaseNotFound(NotFoundError):
    """There is no tidings database there."""

    kind = "database"


class ConflictError(TidingsError):
    """The resource already exists with different settings, or is in use."""


class ReceiptHandleInvalid(TidingsError):
    """The receipt handle is not valid: it was altered, or belongs to another queue."""


class MessageNotInflight(TidingsError):
    """The message referred to is not in flight."""


class BatchError(TidingsError):
    """A batch request is malformed as a whole."""

    def __init__(self, code: str, message: str) -> None:
        self.code = code
        super().__init__(message)


class PurgeInProgress(TidingsError):
    """Only one purge of a queue is allowed every 60 seconds."""


class StoreUnavailable(TidingsError):
    """The database could not be reached; the operation may be retried."""


class StoreCorrupt(StoreUnavailable):
    """The database file is damaged: restore it from a backup (docs/operations.md).

    A `StoreUnavailable`, so every face answers 503 rather than 500 and the engine's loops
    back off and say why (the readiness probe); unlike a full disk it does not pass by
    itself, so the store refuses every later call instead of touching the file again."""


class SchemaTooNew(TidingsError):
    """The database was migrated by a newer tidings than this one, which cannot use it."""


class SchemaTooOld(TidingsError):
    """The database predates this release, and was not migrated."""


class Unauthorized(TidingsError):
    """No valid credentials: send `Authorization: Bearer <token>`."""


class Forbidden(TidingsError):
    """The credentials are valid but their scope does not allow this action."""


class InternalQueueAccess(Forbidden):
    """The queue is tidings' own: it can be looked at, not changed or consumed."""

    def __init__(self, name: str, action: str) -> None:
        self.name = name
        super().__init__(f"queue {name!r} carries tidings' own deliveries and cannot be "
                         f"{action} by a client (it is shown by `tidings queue list --all` "
                         "and in the console)")


class PayloadTooLarge(TidingsError):
    """The request is larger than this API accepts."""


class TooManyLongPolls(TidingsError):
    """Too many long-poll receives are waiting on this node; retry shortly."""
