"""`tidings.remote`: a client of a remote node's native API, with a bearer token.

`tidings.connect()` opens a database; a machine that may only reach a node over HTTP (a
node with tokens beyond loopback) uses this instead:

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
from contextlib import AbstractContextManager
from typing import Any
from urllib.parse import quote

import httpx

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
        headers = {"Authorization": f"Bearer {s.token}"} if s.token else {}
        self.url = s.url.rstrip("/")
        self._http = httpx.Client(base_url=self.url, headers=headers,
                                  timeout=timeout_s + 25, verify=verify)

    def __repr__(self) -> str:
        return f"RemoteTidings({self.url!r})"

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """Any native API call (`/v1/…`); the decoded JSON answer, None for a 204."""
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
        out: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            params: dict[str, Any] = {"prefix": prefix,
                                      **({"next_token": token} if token else {}),
                                      **({"all": "true"} if include_internal else {})}
            page = self.request("GET", "/v1/queues", params=params)
            out += page["queues"]
            token = page.get("next_token")
            if not token:
                return out

    def get_queue(self, name: str) -> dict[str, Any]:
        """The queue's settings, tags and approximate counts."""
        doc: dict[str, Any] = self.request("GET", f"/v1/queues/{_seg(name)}")
        return doc

    def create_queue(self, name: str, **attributes: Any) -> dict[str, Any]:
        doc: dict[str, Any] = self.request("POST", "/v1/queues",
                                           json={"name": name, "attributes": attributes})
        return doc

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

    def close(self) -> None:
        self._http.close()

    def __exit__(self, *exc: object) -> None:
        self.close()


def _seg(value: str) -> str:
    return quote(value, safe="")
