"""`tidings.remote`: a client of a remote node's native API, with a bearer token.

`tidings.connect()` opens a database; a machine that may only reach a node over HTTP (a
node with tokens beyond loopback) uses this instead. It covers what the CLI does remotely
(queues and messages, schedules and groups, email, campaigns, the audit log); `request()`
reaches any other native path:

    from tidings.remote import RemoteTidings
    with RemoteTidings("https://queue.example.com:9324", token="tdg_…") as node:
        node.create_queue("jobs")
        node.send("jobs", {"order": 17})
        for m in node.receive("jobs", wait_s=20):
            ...; node.delete("jobs", m["receipt_handle"])

`url` and `token` default to `TIDINGS_URL` and `TIDINGS_TOKEN`. Errors come back as
`RemoteError` with the HTTP status and the native error code (Unauthorized, Forbidden,
QueueNotFound, InvalidParameterValue, …); the token is never part of an error or a repr.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterable
from contextlib import AbstractContextManager
from typing import Any
from urllib.parse import quote

from tidings.errors import TidingsError, ValidationError
from tidings.settings import Settings


class RemoteError(TidingsError):
    """The remote node refused the request."""

    def __init__(self, status: int, code: str, message: str) -> None:
        self.status = status
        self.code = code
        super().__init__(f"{code}: {message}" if code else message)


class RemoteTidings(AbstractContextManager["RemoteTidings"]):
    def __init__(self, url: str | None = None, *, token: str | None = None,
                 timeout_s: float = 30.0, verify: bool | ssl.SSLContext = True,
                 settings: Settings | None = None) -> None:
        s = settings or Settings.from_env(url=url, token=token)
        if not s.url:
            raise ValidationError("url", "the remote node's URL is needed (--url or "
                                  "TIDINGS_URL), e.g. https://queue.example.com:9324")
        import httpx  # here: every CLI command imports this module, a node's too

        headers = {"Authorization": f"Bearer {s.token}"} if s.token else {}
        self.url = s.url.rstrip("/")
        self._http = httpx.Client(base_url=self.url, headers=headers,
                                  timeout=timeout_s + 25, verify=verify)

    def __repr__(self) -> str:
        return f"RemoteTidings({self.url!r})"

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """Any native API call (`/v1/…`); the decoded JSON answer, None for a 204."""
        import httpx

        try:
            r = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise RemoteError(0, "ConnectionError", f"{self.url}: {exc}") from None
        if r.status_code >= 400:
            try:
                err = r.json()["error"]
                code, message = str(err.get("code", "")), str(err.get("message", ""))
            except (ValueError, KeyError, TypeError, AttributeError):
                code, message = f"HTTP{r.status_code}", r.text[:300]
            raise RemoteError(r.status_code, code, message)
        return None if r.status_code == 204 or not r.content else r.json()

    # queues and messages ------------------------------------------------------------------

    def list_queues(self, prefix: str = "", *,
                    include_internal: bool = False) -> list[dict[str, Any]]:
        """Every queue (all pages) whose name starts with `prefix`; tidings' own queues
        only with `include_internal`."""
        return self._all("/v1/queues", "queues", {"prefix": prefix, **(
            {"all": "true"} if include_internal else {})})

    def get_queue(self, name: str) -> dict[str, Any]:
        """The queue's settings, tags and approximate counts."""
        doc: dict[str, Any] = self.request("GET", f"/v1/queues/{_seg(name)}")
        return doc

    def create_queue(self, name: str, *, tags: dict[str, str] | None = None,
                     **attributes: Any) -> dict[str, Any]:
        """Create a queue (attributes by their native names, `redrive_policy` as
        `{"dead_letter_queue", "max_receive_count"}`); the same again is fine."""
        return self._doc("POST", "/v1/queues", json={"name": name, "attributes": attributes,
                                                     "tags": tags or {}})

    def delete_queue(self, name: str) -> None:
        self.request("DELETE", f"/v1/queues/{_seg(name)}")

    def purge(self, name: str) -> dict[str, Any]:
        doc: dict[str, Any] = self.request("POST", f"/v1/queues/{_seg(name)}/purge")
        return doc

    def send(self, queue: str, body: Any, **options: Any) -> dict[str, Any]:
        doc: dict[str, Any] = self.request("POST", f"/v1/queues/{_seg(queue)}/messages",
                                           json={"body": body, **options})
        return doc

    def receive(self, queue: str, max_messages: int = 1, *, wait_s: int | None = None,
                visibility_s: int | None = None) -> list[dict[str, Any]]:
        params: dict[str, Any] = {"max": max_messages}
        if wait_s is not None:
            params["wait"] = wait_s
        if visibility_s is not None:
            params["visibility_timeout"] = visibility_s
        out: list[dict[str, Any]] = self.request(
            "GET", f"/v1/queues/{_seg(queue)}/messages", params=params)["messages"]
        return out

    def delete(self, queue: str, receipt_handle: str) -> None:
        self.request("DELETE", f"/v1/queues/{_seg(queue)}/messages/{_seg(receipt_handle)}")

    def peek(self, queue: str, limit: int = 10, *,
             next_token: str | None = None) -> dict[str, Any]:
        """Messages in receive order without receiving them: `messages`, `next_token`."""
        return self._doc("GET", f"/v1/queues/{_seg(queue)}/peek",
                         params=_given(limit=limit, next_token=next_token))

    def redrive(self, dlq: str, destination: str | None = None, *,
                max_per_second: int | None = None) -> dict[str, Any]:
        """Move messages out of a dead-letter queue now (`moved`), or with
        `max_per_second` start a move task on the node (`task_handle`)."""
        return self._doc("POST", f"/v1/queues/{_seg(dlq)}/redrive",
                         json=_given(destination=destination, max_per_second=max_per_second))

    def move_tasks(self, dlq: str, limit: int = 10) -> list[dict[str, Any]]:
        """The dead-letter queue's move tasks, newest first."""
        out: list[dict[str, Any]] = self._doc(
            "GET", f"/v1/queues/{_seg(dlq)}/move-tasks", params={"limit": limit})["tasks"]
        return out

    def cancel_move_task(self, handle: str) -> dict[str, Any]:
        return self._doc("POST", f"/v1/move-tasks/{_seg(handle)}/cancel")

    # schedules ----------------------------------------------------------------------------

    def create_schedule(self, schedule: dict[str, Any]) -> dict[str, Any]:
        """`schedule`: the native document (name, group, expression, target, …)."""
        return self._doc("POST", "/v1/schedules", json=schedule)

    def apply_schedule(self, group: str, name: str, fields: dict[str, Any]) -> dict[str, Any]:
        """Create the schedule, or replace it when it differs (left as it is when not)."""
        return self._doc("POST", f"{_schedule(group, name)}:apply", json=fields)

    def update_schedule(self, group: str, name: str, fields: dict[str, Any]) -> dict[str, Any]:
        """A full replace, as EventBridge Scheduler's UpdateSchedule."""
        return self._doc("PUT", _schedule(group, name), json=fields)

    def get_schedule(self, group: str, name: str) -> dict[str, Any]:
        return self._doc("GET", _schedule(group, name))

    def delete_schedule(self, group: str, name: str) -> None:
        self.request("DELETE", _schedule(group, name))

    def set_schedule_state(self, group: str, name: str, enabled: bool) -> dict[str, Any]:
        return self._doc("POST", f"{_schedule(group, name)}:"
                         + ("enable" if enabled else "disable"))

    def list_schedules(self, *, group: str | None = None, prefix: str = "",
                       state: str | None = None, limit: int = 100,
                       next_token: str | None = None) -> dict[str, Any]:
        """One page: `schedules` and `next_token`."""
        return self._doc("GET", "/v1/schedules", params=_given(
            group=group, prefix=prefix, state=state, limit=limit, next_token=next_token))

    def next_occurrences(self, expression: str, timezone: str = "UTC", n: int = 5,
                         after: str | None = None) -> dict[str, Any]:
        """The expression's next occurrences by the node's clock and zone database."""
        return self._doc("GET", "/v1/expressions/next", params=_given(
            expression=expression, timezone=timezone, n=n, after=after))

    def create_group(self, name: str, tags: dict[str, str] | None = None) -> dict[str, Any]:
        return self._doc("POST", "/v1/schedule-groups", json={"name": name, "tags": tags or {}})

    def list_groups(self, prefix: str = "") -> list[dict[str, Any]]:
        return self._all("/v1/schedule-groups", "groups", {"prefix": prefix})

    def delete_group(self, name: str) -> dict[str, Any]:
        return self._doc("DELETE", f"/v1/schedule-groups/{_seg(name)}")

    # email --------------------------------------------------------------------------------

    def put_template(self, name: str, subject: str, html: str | None = None,
                     text: str | None = None, *, replace: bool = False) -> dict[str, Any]:
        """Store a new template, or (`replace`) every part of an existing one."""
        parts = {"subject": subject, "html": html, "text": text}
        if replace:
            return self._doc("PUT", f"/v1/email/templates/{_seg(name)}", json=parts)
        return self._doc("POST", "/v1/email/templates", json={"name": name, **parts})

    def get_template(self, name: str) -> dict[str, Any]:
        return self._doc("GET", f"/v1/email/templates/{_seg(name)}")

    def list_templates(self) -> list[dict[str, Any]]:
        return self._all("/v1/email/templates", "templates", {"limit": 1000})

    def delete_template(self, name: str) -> None:
        self.request("DELETE", f"/v1/email/templates/{_seg(name)}")

    def render(self, template: str, data: dict[str, Any]) -> dict[str, Any]:
        """The template rendered with `data` (subject, html, text); nothing is sent."""
        return self._doc("POST", f"/v1/email/templates/{_seg(template)}/render",
                         json={"data": data})

    def send_email(self, document: dict[str, Any]) -> dict[str, Any]:
        """Accept a SES v2 SendEmail document: `id`, `message_id`, `state`."""
        return self._doc("POST", "/v1/email/send", json=document)

    def delivery(self, delivery_id: str) -> dict[str, Any]:
        return self._doc("GET", f"/v1/email/deliveries/{_seg(delivery_id)}")

    def deliveries(self, *, recipient: str | None = None, state: str | None = None,
                   limit: int = 50) -> list[dict[str, Any]]:
        """The delivery log, newest first (one page of up to `limit`)."""
        out: list[dict[str, Any]] = self._doc("GET", "/v1/email/deliveries", params=_given(
            recipient=recipient, state=state, limit=limit))["deliveries"]
        return out

    def email_status(self) -> dict[str, Any]:
        """`waiting`: accepted email not sent yet; `relay`: whether the node has one."""
        return self._doc("GET", "/v1/email/status")

    def resend(self, **filters: Any) -> dict[str, Any]:
        """Put failed deliveries matching every filter (message_id, recipient, campaign,
        state, since, until: RFC 3339) back in line: `resent`, `skipped`."""
        return self._doc("POST", "/v1/email/resend", json=_given(**filters))

    def suppression(self, address: str) -> dict[str, Any] | None:
        try:
            return self._doc("GET", f"/v1/email/suppressions/{_seg(address)}")
        except RemoteError as exc:
            if exc.status == 404:
                return None
            raise

    def suppress(self, address: str, reason: str = "MANUAL") -> dict[str, Any]:
        return self._doc("PUT", f"/v1/email/suppressions/{_seg(address)}",
                         json={"reason": reason})

    def unsuppress(self, address: str) -> None:
        self.request("DELETE", f"/v1/email/suppressions/{_seg(address)}")

    def list_suppressions(self, reason: str | None = None) -> list[dict[str, Any]]:
        return self._all("/v1/email/suppressions", "suppressions",
                         _given(reason=reason, limit=1000))

    def put_contact_list(self, name: str, topics: list[dict[str, Any]] | None = None,
                         description: str | None = None, *,
                         replace: bool = False) -> dict[str, Any]:
        body = _given(topics=topics or [], description=description)
        if replace:
            return self._doc("PUT", f"/v1/email/contact-lists/{_seg(name)}", json=body)
        return self._doc("POST", "/v1/email/contact-lists", json={"name": name, **body})

    def contact_list(self, name: str) -> dict[str, Any]:
        return self._doc("GET", f"/v1/email/contact-lists/{_seg(name)}")

    def contact_lists(self) -> list[dict[str, Any]]:
        return self._all("/v1/email/contact-lists", "contact_lists", {"limit": 1000})

    def delete_contact_list(self, name: str) -> None:
        self.request("DELETE", f"/v1/email/contact-lists/{_seg(name)}")

    def put_contact(self, list_name: str, address: str, *, replace: bool = False,
                    **fields: Any) -> dict[str, Any]:
        """Create (or with `replace`, update) a contact: `topics` ({topic: OPT_IN |
        OPT_OUT}), `unsubscribe_all`, `attributes`."""
        path = f"/v1/email/contact-lists/{_seg(list_name)}/contacts"
        if replace:
            return self._doc("PUT", f"{path}/{_seg(address)}", json=_given(**fields))
        return self._doc("POST", path, json={"address": address, **_given(**fields)})

    def contact(self, list_name: str, address: str) -> dict[str, Any]:
        return self._doc("GET", f"/v1/email/contact-lists/{_seg(list_name)}/contacts/"
                         f"{_seg(address)}")

    def contacts(self, list_name: str, **where: Any) -> list[dict[str, Any]]:
        """Every contact of a list; `where`: status, topic, use_default (ListContacts)."""
        return self._all(f"/v1/email/contact-lists/{_seg(list_name)}/contacts", "contacts",
                         _given(**where, limit=1000))

    def delete_contact(self, list_name: str, address: str) -> None:
        self.request("DELETE", f"/v1/email/contact-lists/{_seg(list_name)}/contacts/"
                     f"{_seg(address)}")

    def email_events(self, *, address: str | None = None, delivery_id: str | None = None,
                     limit: int = 50) -> list[dict[str, Any]]:
        """Bounces and complaints, newest first."""
        out: list[dict[str, Any]] = self._doc("GET", "/v1/email/events", params=_given(
            address=address, delivery_id=delivery_id, limit=limit))["events"]
        return out

    # campaigns ----------------------------------------------------------------------------

    def list_campaigns(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = self._doc("GET", "/v1/campaigns",
                                              params={"limit": 1000})["campaigns"]
        return out

    def campaign(self, name: str, action: str | None = None) -> dict[str, Any]:
        """A campaign's status and counts; with `action` (pause, resume, cancel) after it."""
        path = f"/v1/campaigns/{_seg(name)}"
        return self._doc("POST", f"{path}/{action}") if action else self._doc("GET", path)

    def campaign_recipient(self, name: str, recipient_id: str) -> dict[str, Any]:
        """One recipient's steps: each pending one's due time, each fired one's deliveries."""
        return self._doc("GET", f"/v1/campaigns/{_seg(name)}/recipients/{_seg(recipient_id)}")

    def cancel_recipient(self, name: str, recipient_id: str) -> dict[str, Any]:
        return self._doc("POST", f"/v1/campaigns/{_seg(name)}/recipients/"
                         f"{_seg(recipient_id)}/cancel")

    def fanout(self, campaign: str, rows: Iterable[bytes], *, content_type: str = "text/csv",
               **options: Any) -> dict[str, Any]:
        """Stream a recipient list (CSV or JSON Lines) into the node's fan-out; `options`
        as the query of POST /v1/campaigns/{name}/fanout (template, from, step, …)."""
        return self._doc("POST", f"/v1/campaigns/{_seg(campaign)}/fanout",
                         params=_given(**options), content=rows,
                         headers={"content-type": content_type})

    def forecast(self, hours: int = 48, bucket_minutes: int = 1,
                 mean_duration_ms: int | None = None) -> dict[str, Any]:
        params: dict[str, Any] = {"hours": hours, "bucket_minutes": bucket_minutes}
        if mean_duration_ms is not None:
            params["mean_duration_ms"] = mean_duration_ms
        return self._doc("GET", "/v1/forecast", params=params)

    # audit --------------------------------------------------------------------------------

    def audit(self, *, actor: str | None = None, before: int | None = None,
              limit: int = 100) -> list[dict[str, Any]]:
        params: dict[str, Any] = {"limit": limit}
        if actor:
            params["actor"] = actor
        if before:
            params["before"] = before
        out: list[dict[str, Any]] = self.request("GET", "/v1/audit", params=params)["entries"]
        return out

    def _doc(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        doc: dict[str, Any] = self.request(method, path, **kwargs)
        return doc

    def _all(self, path: str, key: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        """Every item of a paged listing (`next_token` in, `next_token` out)."""
        out: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            page = self._doc("GET", path, params=_given(**params, next_token=token))
            out += page[key]
            token = page.get("next_token")
            if not token:
                return out

    def close(self) -> None:
        self._http.close()

    def __exit__(self, *exc: object) -> None:
        self.close()


def _seg(value: str) -> str:
    return quote(value, safe="")


def _schedule(group: str, name: str) -> str:
    return f"/v1/schedules/{_seg(group)}/{_seg(name)}"


def _given(**values: Any) -> dict[str, Any]:
    """The parameters that have a value: None means "not given", never JSON null."""
    return {k: v for k, v in values.items() if v is not None}
