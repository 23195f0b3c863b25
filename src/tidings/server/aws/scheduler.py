"""The Amazon EventBridge Scheduler wire API (REST-JSON), for the AWS SDKs and CLI.

Paths, methods and error names are those of the `scheduler/2021-06-30` service model:
`/schedules/{Name}` (POST create, GET, PUT update, DELETE), `GET /schedules`,
`/schedule-groups/{Name}` (POST, GET, DELETE), `GET /schedule-groups` and
`/tags/{ResourceArn}` (POST tag, GET, DELETE untag; only schedule groups carry tags).
Plain Starlette routes, not FastAPI models: the bodies are AWS's exact shapes, translated
in `scheduler_shapes.py`, and every store call goes through the bridge.

Errors are REST-JSON's: the HTTP status, an `x-amzn-ErrorType` header (what botocore and
the JavaScript SDK read the code from) and a `{"Message": ...}` body. Every operation of
the API is served; another method or path under its prefixes is
`UnknownOperationException` (404). The status comes
from the one error table (`server/errors.py`); the code is Scheduler's name for it.
Requests are checked with SigV4 (service `scheduler`) whenever access keys are configured.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tidings.client import Tidings
from tidings.errors import TidingsError, ValidationError
from tidings.model.queues import check_range
from tidings.model.schedules import DEFAULT_GROUP, Schedule
from tidings.runtime.bridge import Bridge
from tidings.server.aws.arns import Naming
from tidings.server.aws.auth import Authenticator
from tidings.server.aws.grants import action_name, scheduler_names
from tidings.server.aws.restjson import (
    AWS_KEY,
    RestJsonError,
    catch_all_routes,
    endpoint,
    unknown_operation,
)
from tidings.server.aws.scheduler_shapes import (
    Shapes,
    group_from_arn,
    group_out,
    parse_body,
    tags_in,
    tags_out,
)
from tidings.server.errors import error_info
from tidings.server.limits import SCHEDULER_MAX_BODY
from tidings.targets.registry import target_of

log = logging.getLogger("tidings.scheduler")

MAX_REQUEST_BYTES = SCHEDULER_MAX_BODY  # a schedule is a few KiB (Input: at most 8192 chars)

#: Scheduler's error names, by the status the error table gives a tidings error.
_CODES = {400: "ValidationException", 402: "ServiceQuotaExceededException",
          403: "ValidationException", 404: "ResourceNotFoundException",
          409: "ConflictException", 429: "ThrottlingException",
          503: "ServiceUnavailable"}  # the store cannot write now (disk full): retryable

Doc = dict[str, Any]
Operation = Callable[[Request, Doc], Awaitable[Doc]]


class SchedulerError(RestJsonError):
    """An error of this API, answered as is."""


def _aws_error(exc: TidingsError) -> SchedulerError:
    status, _sqs_code, message = error_info(exc)
    code = _CODES.get(status, "InternalServerException")
    return SchedulerError(status, code, message)



class SchedulerApi:
    """The Scheduler operations over one `Tidings`."""

    def __init__(self, t: Tidings, bridge: Bridge) -> None:
        s = t.settings
        self.bridge = bridge
        self.schedules = t.schedules
        self.shapes = Shapes(Naming(s.region, s.account_id, s.public_url), s.lambda_webhooks)
        self.auth = Authenticator.from_settings(s, t.clock, "scheduler")
        self.audit = t.audit

    def routes(self) -> list[Route]:
        """Separate routes per method: Starlette falls through to the one whose method
        matches, and answers 405 only when none does."""
        table: dict[str, dict[str, Operation]] = {
            "/schedules": {"GET": self.list_schedules},
            "/schedules/{Name}": {
                "POST": self.create_schedule, "GET": self.get_schedule,
                "PUT": self.update_schedule, "DELETE": self.delete_schedule},
            "/schedule-groups": {"GET": self.list_groups},
            "/schedule-groups/{Name}": {
                "POST": self.create_group, "GET": self.get_group, "DELETE": self.delete_group},
            # An ARN holds '/' (schedule-group/name), which arrives decoded in the path.
            "/tags/{ResourceArn:path}": {
                "POST": self.tag_resource, "GET": self.list_tags, "DELETE": self.untag_resource},
        }
        routes = [Route(path, self._endpoint(op), methods=[method])
                  for path, ops in table.items() for method, op in ops.items()]
        # Last, so every route above wins where it matches.
        refuse = endpoint(unknown_operation("EventBridge Scheduler"), self.auth,
                          service="Scheduler", message_key="Message",
                          limit=MAX_REQUEST_BYTES, too_long_code="ValidationException",
                          to_aws=_aws_error, internal_code="InternalServerException")
        return routes + catch_all_routes(["/schedules", "/schedule-groups", "/tags"], refuse)

    def _endpoint(self, op: Operation) -> Callable[[Request], Awaitable[Response]]:
        op_name = op.__name__
        action = f"scheduler:{action_name(op_name)}"

        async def call(request: Request, body: bytes) -> Doc:
            doc = parse_body(body)
            akid = request.scope.get(AWS_KEY)
            grant = self.auth.grant(akid)
            names = scheduler_names(request.path_params, request.query_params, doc,
                                    request.url.path, op_name)
            if grant.prefixes is not None:
                self.auth.check_names(akid, action_name(op_name), names)
            result = await op(request, doc)
            if grant.prefixes is not None:  # listings: only what the key may see
                for key, field in (("Schedules", "GroupName"), ("ScheduleGroups", "Name")):
                    if isinstance(result.get(key), list):
                        result[key] = [x for x in result[key] if grant.allows_name(x[field])]
            if request.method != "GET":
                await self.bridge.run(self.audit.record, akid or "anonymous", "scheduler",
                                      action, ",".join(names) or "-")
            return result

        return endpoint(call, self.auth, service="Scheduler", message_key="Message",
                        limit=MAX_REQUEST_BYTES, too_long_code="ValidationException",
                        to_aws=_aws_error, internal_code="InternalServerException")

    # schedules ----------------------------------------------------------------------------

    async def create_schedule(self, request: Request, body: Doc) -> Doc:
        return await self._save(self.schedules.create, request, body)

    async def update_schedule(self, request: Request, body: Doc) -> Doc:
        return await self._save(self.schedules.update, request, body)

    async def _save(self, save: Callable[..., Schedule], request: Request,
                    body: Doc) -> Doc:
        spec = self.shapes.spec(request.path_params["Name"], body)
        try:
            # Scheduler does not check what a target names (a queue, an email's template):
            # invocations do, and a missing one fails that invocation (retry policy, DLQ).
            schedule = await self.bridge.run(functools.partial(save, target_must_exist=False),
                                             spec)
        except ValidationError as exc:
            if not target_of(spec.target).checks_input or exc.field.startswith("Target."):
                raise
            # The SendEmail document is checked on its own terms (FromEmailAddress, ...);
            # here it is the schedule's Target.Input, and the message says so.
            field = "Target.Input" if exc.field == "Input" else f"Target.Input.{exc.field}"
            raise ValidationError(field, exc.rule) from None
        return {"ScheduleArn": self.schedules.schedule_arn(schedule.group, schedule.name)}

    async def get_schedule(self, request: Request, _body: Doc) -> Doc:
        group = request.query_params.get("groupName") or DEFAULT_GROUP
        s = await self.bridge.run(self.schedules.get, request.path_params["Name"], group)
        return self.shapes.schedule_out(s, self.schedules.schedule_arn(s.group, s.name))

    async def delete_schedule(self, request: Request, _body: Doc) -> Doc:
        # clientToken is accepted and unused: a repeated delete answers ResourceNotFound.
        group = request.query_params.get("groupName") or DEFAULT_GROUP
        await self.bridge.run(self.schedules.delete, request.path_params["Name"], group)
        return {}

    async def list_schedules(self, request: Request, _body: Doc) -> Doc:
        q = request.query_params
        limit = _max_results(q.get("MaxResults"))
        group = q.get("ScheduleGroup") or None

        def page() -> tuple[list[Any], str | None]:
            if group is not None:
                self.schedules.get_group(group)  # an unknown group is ResourceNotFound
            return self.schedules.list(group=group, prefix=q.get("NamePrefix") or "",
                                       state=q.get("State") or None, limit=limit,
                                       next_token=q.get("NextToken") or None)

        rows, token = await self.bridge.run(page)
        out: Doc = {"Schedules": [self.shapes.summary_out(
            s, self.schedules.schedule_arn(s.group, s.name)) for s in rows]}
        if token:
            out["NextToken"] = token
        return out

    # groups -------------------------------------------------------------------------------

    async def create_group(self, request: Request, body: Doc) -> Doc:
        name = request.path_params["Name"]
        token = body.get("ClientToken")
        if token is not None and not isinstance(token, str):
            raise ValidationError("ClientToken", "must be a string")
        group = await self.bridge.run(functools.partial(
            self.schedules.create_group, name, tags_in(body), client_token=token))
        return {"ScheduleGroupArn": self.schedules.group_arn(group.name)}

    async def get_group(self, request: Request, _body: Doc) -> Doc:
        group = await self.bridge.run(self.schedules.get_group, request.path_params["Name"])
        return group_out(group, self.schedules.group_arn(group.name))

    async def delete_group(self, request: Request, _body: Doc) -> Doc:
        # AWS deletes a group's schedules asynchronously; here they go in the same
        # transaction as the group, so nothing of it fires after the answer.
        await self.bridge.run(self.schedules.delete_group, request.path_params["Name"])
        return {}

    async def list_groups(self, request: Request, _body: Doc) -> Doc:
        q = request.query_params
        groups, token = await self.bridge.run(
            self.schedules.list_groups, q.get("NamePrefix") or "",
            limit=_max_results(q.get("MaxResults")), next_token=q.get("NextToken") or None)
        out: Doc = {"ScheduleGroups": [group_out(g, self.schedules.group_arn(g.name))
                                       for g in groups]}
        if token:
            out["NextToken"] = token
        return out

    # tags ---------------------------------------------------------------------------------

    async def tag_resource(self, request: Request, body: Doc) -> Doc:
        if not isinstance(body.get("Tags"), list):
            raise ValidationError("Tags", "is required: a list of {Key, Value} objects")
        name = group_from_arn(request.path_params["ResourceArn"])
        await self.bridge.run(self.schedules.tag_group, name, tags_in(body))
        return {}

    async def untag_resource(self, request: Request, _body: Doc) -> Doc:
        name = group_from_arn(request.path_params["ResourceArn"])
        keys = request.query_params.getlist("TagKeys")
        await self.bridge.run(self.schedules.untag_group, name, keys)
        return {}

    async def list_tags(self, request: Request, _body: Doc) -> Doc:
        name = group_from_arn(request.path_params["ResourceArn"])
        group = await self.bridge.run(self.schedules.get_group, name)
        return {"Tags": tags_out(group.tags)}


def _max_results(raw: str | None) -> int:
    # Scheduler pages hold at most 100, whatever the store could return.
    return 100 if raw is None else check_range("MaxResults", raw, 1, 100)



def scheduler_routes(t: Tidings, bridge: Bridge) -> list[Route]:
    """The Scheduler API's routes. Mount them before the SQS routes, whose
    `POST /{account}/{queue}` would otherwise take `POST /schedules/{Name}`."""
    return SchedulerApi(t, bridge).routes()
