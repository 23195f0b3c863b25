"""Who is looking at the console, and may they do this: sessions, CSRF tokens and scopes.

A session is a signed cookie (HMAC-SHA256 with a key kept in the database, so every node
accepts every node's cookies): `{"sid", "scope", "exp"}`. It is HttpOnly (no script can
read it), SameSite=Strict (no other site's page sends it) and Secure over TLS. Every action
is a POST carrying a CSRF token derived from the session id, so even a page that could
post to a loopback node without a cookie check (the open mode) cannot act through it.

Where the node requires no credentials (a development node: loopback, none configured),
the viewer gets an anonymous session with every scope; otherwise they sign in with a
token and get its scope (`Settings.credentials_required`, as the native API).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

COOKIE = "tidings_console"
SESSION_S = 12 * 3600
#: Each scope allows what the ones before it do.
SCOPES = ("read", "operate", "admin")

#: Token → (scope, token id) (None: not a valid token); None for the whole function: the
#: node requires no tokens, and the console is open like the native API
#: (`tidings.server.access.Access.token_check`).
TokenCheck = Callable[[str], tuple[str, str] | None]


def allows(scope: str, needed: str) -> bool:
    return scope in SCOPES and SCOPES.index(scope) >= SCOPES.index(needed)


@dataclass(frozen=True)
class Session:
    sid: str
    scope: str
    signed_in: bool  # with a token (False: the open console's anonymous session)
    who: str = "anonymous"  # the token's id (never the token), for the audit log


class Sessions:
    def __init__(self, key: bytes, check: TokenCheck | None) -> None:
        self.key = key
        self.check = check

    @property
    def required(self) -> bool:
        """Does the viewer need to sign in?"""
        return self.check is not None

    def _sign(self, payload: bytes) -> str:
        return base64.urlsafe_b64encode(
            hmac.new(self.key, payload, hashlib.sha256).digest()).decode().rstrip("=")

    def issue(self, scope: str, signed_in: bool, who: str = "anonymous",
              ) -> tuple[Session, str]:
        """A new session and its cookie value."""
        session = Session(secrets.token_urlsafe(18), scope, signed_in, who)
        payload = json.dumps({"sid": session.sid, "scope": scope, "in": signed_in,
                              "who": who, "exp": int(time.time()) + SESSION_S}).encode()
        body = base64.urlsafe_b64encode(payload).decode().rstrip("=")
        return session, f"{body}.{self._sign(payload)}"

    def read(self, cookie: str | None) -> Session | None:
        """The session a cookie carries, if it is ours, unexpired and still valid here."""
        if not cookie or "." not in cookie:
            return None
        body, _, signature = cookie.partition(".")
        try:
            payload = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        except ValueError:
            return None
        if not hmac.compare_digest(self._sign(payload), signature):
            return None
        try:
            data = json.loads(payload)
            session = Session(str(data["sid"]), str(data["scope"]), bool(data["in"]),
                              str(data.get("who", "anonymous")))
            expires = int(data["exp"])
        except (ValueError, KeyError, TypeError):
            return None
        if expires < time.time() or session.scope not in SCOPES:
            return None
        if self.required and not session.signed_in:
            return None  # an open-mode session does not survive tokens being configured
        return session

    def sign_in(self, token: str) -> tuple[str, str] | None:
        """(scope, token id) of a valid token, or None."""
        if self.check is None:
            return "admin", "anonymous"
        return self.check(token)

    def csrf_token(self, session: Session) -> str:
        return self._sign(f"csrf:{session.sid}".encode())

    def csrf_ok(self, session: Session, token: str | None) -> bool:
        return bool(token) and hmac.compare_digest(self.csrf_token(session), token or "")
