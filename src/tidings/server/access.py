"""Who may call the native API (and the web console): bearer tokens, each with a scope.

Scopes nest: `admin` can do what `operate` can, which can do what `read` can.

* read: list, get, counts, logs, peeks;
* operate: send, receive, delete messages, change visibility, redrive, pause/resume,
  cancel;
* admin: create, change and delete queues, schedules, groups, templates, suppressions,
  campaigns' fan-outs, purges, and reading the audit log.

Tokens come from `TIDINGS_API_TOKENS` (`scope:token` pairs) and `TIDINGS_API_TOKENS_FILE`
(`scope sha256-hex [name]` lines: the file holds only hashes, so reading it does not give
a token away). Each presented token is hashed and compared with every known hash by
`hmac.compare_digest`, without stopping at the first match, so neither the comparison nor
the loop says how much of a token was right. A token is never logged: what the audit log
and the server log show is the token's id (its name from the file, or `token-` and the
first 8 hex digits of its hash).

Whether tokens are required: yes when any credential is configured (API tokens or AWS
keys, on loopback too: a reverse proxy on the same host makes every client "loopback"),
or when the node listens beyond loopback unless `--insecure-no-auth`
(`Settings.credentials_required`); required with none configured, every call but the
open paths is refused. A development node (loopback, no credentials) lets everyone in.

The console (or any other face) authorises a request with
`Access.authorise(authorization_header, Scope.OPERATE)`, which returns the `Principal` or
raises `Unauthorized` (401) / `Forbidden` (403).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path

from tidings.errors import Forbidden, Unauthorized, ValidationError
from tidings.settings import Settings


class Scope(IntEnum):
    """What a token may do; a larger scope includes the smaller ones."""

    READ = 1
    OPERATE = 2
    ADMIN = 3

    @classmethod
    def parse(cls, text: str, field: str) -> Scope:
        try:
            return cls[text.strip().upper()]
        except KeyError:
            raise ValidationError(field, f"scope must be read, operate or admin, got "
                                  f"{text.strip()!r}") from None

    @property
    def label(self) -> str:
        return self.name.lower()


@dataclass(frozen=True)
class Principal:
    """Who made a request: `id` is safe to log and to write in the audit log."""

    id: str
    scope: Scope


#: The caller of a development node, or of a node run with --insecure-no-auth.
ANONYMOUS = Principal("anonymous", Scope.ADMIN)

_HEX64 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class TokenEntry:
    digest: bytes  # SHA-256 of the token
    scope: Scope
    id: str


def hash_token(token: str) -> str:
    """The SHA-256 hex digest a tokens file stores for `token`."""
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    """A fresh token: 32 random bytes, URL-safe."""
    return "tdg_" + secrets.token_urlsafe(32)


def _entry(scope: Scope, digest_hex: str, name: str | None) -> TokenEntry:
    return TokenEntry(bytes.fromhex(digest_hex), scope, name or f"token-{digest_hex[:8]}")


def parse_tokens(spec: str, field: str = "TIDINGS_API_TOKENS") -> list[TokenEntry]:
    """`scope:token,scope:token`; blank items are skipped."""
    out = []
    for item in spec.split(","):
        item = item.strip()
        if not item:
            continue
        scope, sep, token = item.partition(":")
        if not sep or not token.strip():
            raise ValidationError(field, "must be scope:token pairs separated by commas, "
                                  "e.g. read:abc,admin:xyz")
        if len(token.strip()) < 16:
            raise ValidationError(field, "each token must be at least 16 characters long")
        out.append(_entry(Scope.parse(scope, field), hash_token(token.strip()), None))
    return out


def read_tokens_file(path: str, field: str = "TIDINGS_API_TOKENS_FILE") -> list[TokenEntry]:
    """Lines `scope sha256-hex [name]`; `#` starts a comment."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ValidationError(field, f"cannot read {path!r}: {exc.strerror}") from None
    out = []
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        digest = parts[1].lower().removeprefix("sha256:") if len(parts) > 1 else ""
        if len(parts) not in (2, 3) or not _HEX64.match(digest):
            raise ValidationError(field, f"{path!r} line {number}: expected 'scope "
                                  "sha256-hex-of-token [name]' (tidings token new)")
        out.append(_entry(Scope.parse(parts[0], field), digest,
                          parts[2] if len(parts) == 3 else None))
    return out


class Access:
    """The native API's tokens and whether they are required."""

    def __init__(self, tokens: Sequence[TokenEntry], *, required: bool) -> None:
        self.tokens = tuple(tokens)
        self.required = required or bool(self.tokens)

    @classmethod
    def from_settings(cls, settings: Settings) -> Access:
        tokens: list[TokenEntry] = []
        if settings.api_tokens_file:
            tokens += read_tokens_file(settings.api_tokens_file)
        if settings.api_tokens:
            tokens += parse_tokens(settings.api_tokens)
        return cls(tokens, required=settings.credentials_required)

    def identify(self, token: str) -> TokenEntry | None:
        """The entry whose hash matches `token`: every entry is compared, in constant time."""
        digest = hashlib.sha256(token.encode()).digest()
        found = None
        for entry in self.tokens:
            if hmac.compare_digest(digest, entry.digest):
                found = entry
        return found

    def authorise(self, authorization: str | None, needed: Scope) -> Principal:
        """The caller behind an `Authorization` header, if allowed `needed`.

        Raises `Unauthorized` (no or unknown token) or `Forbidden` (scope too small)."""
        if not self.required:
            return ANONYMOUS
        if not self.tokens:
            raise Unauthorized("this node has no API tokens configured: set "
                               "TIDINGS_API_TOKENS or TIDINGS_API_TOKENS_FILE")
        scheme, _, token = (authorization or "").strip().partition(" ")
        if scheme.lower() == "basic":
            # Relay webhooks (SNS, Postmark) can carry credentials only in the URL they
            # are given, https://any:<token>@host/…, which arrives as Basic: the password
            # is the token.
            try:
                token = base64.b64decode(token.strip(), validate=True).decode().partition(
                    ":")[2]
                scheme = "bearer"
            except (ValueError, UnicodeDecodeError):
                token = ""
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthorized("missing credentials: send the header "
                               "'Authorization: Bearer <token>'")
        entry = self.identify(token.strip())
        if entry is None:
            raise Unauthorized("the bearer token is not valid")
        if entry.scope < needed:
            raise Forbidden(f"token {entry.id} has the {entry.scope.label} scope; this "
                            f"action needs {needed.label}")
        return Principal(entry.id, entry.scope)

    def token_check(self) -> Callable[[str], tuple[str, str] | None] | None:
        """For the console: token → (its scope's name, its id) (None: not a valid token);
        None for the whole function when tokens are not required (the console is then
        open)."""
        if not self.required:
            return None

        def check(token: str) -> tuple[str, str] | None:
            entry = self.identify(token) if self.tokens else None
            return None if entry is None else (entry.scope.label, entry.id)

        return check
