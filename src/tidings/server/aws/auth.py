"""SigV4 enforcement for the AWS wire APIs, and where the access keys come from.

Keys come from `TIDINGS_AWS_KEYS` ("AKID:SECRET,AKID2:SECRET2") and/or the file named by
`TIDINGS_AWS_KEYS_FILE` (`AKID SECRET` lines, `#` comments; or a JSON object
`{"AKID": "SECRET"}`). With no keys at all the node is in local-development mode and takes
any signature or none, as SQS emulators do; with keys, every request must verify.

A key may be limited (in the file only) to some services (`sqs`, `scheduler`, `ses`) and to
queue and schedule-group names starting with given prefixes:

    AKIDORDERS  secret1  services=sqs,scheduler  prefixes=orders-,billing-

or in JSON `{"AKIDORDERS": {"secret": "secret1", "services": ["sqs"], "prefixes":
["orders-"]}}`. A call outside its grant is answered with AWS's `AccessDenied` (query
protocol) / `AccessDeniedException` (JSON protocols), 403, as IAM would.

Where the node requires credentials (`Settings.credentials_required`: any credential
configured, API tokens included, on loopback too; or beyond loopback without
`--insecure-no-auth`) signatures are required even with no keys configured: every call
is then refused with `InvalidClientTokenId`.

The signature is checked over the request exactly as it arrived: the raw (still
percent-encoded) path from the ASGI scope and the raw body bytes, since any re-encoding by
the framework would make a correct signature fail. The credential scope's service must be
`sqs`; its region is not checked, so clients configured for any region can reach one node.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tidings.clock import Clock
from tidings.errors import ValidationError
from tidings.server.aws.sigv4 import SigV4Error, SigV4Request, verify
from tidings.settings import Settings


def parse_keys(spec: str, field: str = "TIDINGS_AWS_KEYS") -> dict[str, str]:
    """`AKID:SECRET,AKID2:SECRET2` as a mapping; blank items are skipped."""
    keys: dict[str, str] = {}
    for item in spec.split(","):
        item = item.strip()
        if not item:
            continue
        akid, sep, secret = item.partition(":")
        if not sep or not akid.strip() or not secret.strip():
            raise ValidationError(field, "must be AKID:SECRET pairs separated by commas")
        keys[akid.strip()] = secret.strip()
    return keys


SERVICES = ("sqs", "scheduler", "ses")


@dataclass(frozen=True)
class KeyGrant:
    """What one access key may do: None is "no limit"."""

    services: frozenset[str] | None = None
    prefixes: tuple[str, ...] | None = None

    def allows_name(self, name: str) -> bool:
        return self.prefixes is None or name.startswith(self.prefixes)


_UNLIMITED = KeyGrant()


def _grant(field: str, where: str, services: Iterable[str] | None,
           prefixes: Iterable[str] | None) -> KeyGrant:
    checked = None
    if services is not None:
        checked = frozenset(x.strip() for x in services if x.strip())
        unknown = sorted(checked - set(SERVICES))
        if unknown or not checked:
            raise ValidationError(field, f"{where}: services must be among "
                                  f"{', '.join(SERVICES)}, got {', '.join(unknown) or 'none'}")
    names = None
    if prefixes is not None:
        names = tuple(p.strip() for p in prefixes if p.strip())
        if not names:
            raise ValidationError(field, f"{where}: prefixes must name at least one prefix")
    return KeyGrant(checked, names)


def _read_keys_file(path: str) -> dict[str, tuple[str, KeyGrant]]:
    field = "TIDINGS_AWS_KEYS_FILE"
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ValidationError(field, f"cannot read {path!r}: {exc.strerror}") from None
    if text.lstrip().startswith("{"):
        return _json_keys(field, path, text)
    keys: dict[str, tuple[str, KeyGrant]] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        where = f"{path!r} line {number}"
        if len(parts) < 2:
            raise ValidationError(field, f"{where}: expected 'AKID SECRET "
                                  "[services=sqs,...] [prefixes=a-,...]'")
        options: dict[str, list[str]] = {}
        for part in parts[2:]:
            key, sep, value = part.partition("=")
            if not sep or key not in ("services", "prefixes") or key in options:
                raise ValidationError(field, f"{where}: {part!r} is not services=… or "
                                      "prefixes=…")
            options[key] = value.split(",")
        keys[parts[0]] = (parts[1], _grant(field, where, options.get("services"),
                                           options.get("prefixes")))
    return keys


def _json_keys(field: str, path: str, text: str) -> dict[str, tuple[str, KeyGrant]]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        raise ValidationError(field, f"{path!r} is not a valid JSON object") from None
    if not isinstance(doc, dict):
        raise ValidationError(field, f"{path!r} must map access key ids to secrets")
    keys: dict[str, tuple[str, KeyGrant]] = {}
    for akid, value in doc.items():
        where = f"{path!r} key {akid!r}"
        if isinstance(value, str) and akid and value:
            keys[akid] = (value, _UNLIMITED)
            continue
        if not (isinstance(value, dict) and isinstance(value.get("secret"), str)
                and value["secret"] and akid and set(value) <= {"secret", "services",
                                                                "prefixes"}):
            raise ValidationError(field, f"{where}: must be a secret or an object with "
                                  "secret, services and prefixes")
        lists = {k: value.get(k) for k in ("services", "prefixes")}
        if not all(v is None or (isinstance(v, list) and all(isinstance(x, str) for x in v))
                   for v in lists.values()):
            raise ValidationError(field, f"{where}: services and prefixes are lists of text")
        keys[akid] = (value["secret"], _grant(field, where, lists["services"],
                                              lists["prefixes"]))
    return keys


def load_grants(settings: Settings) -> dict[str, tuple[str, KeyGrant]]:
    """Every configured key: its secret and what it may do. Keys given in
    TIDINGS_AWS_KEYS are unlimited."""
    keys: dict[str, tuple[str, KeyGrant]] = {}
    if settings.aws_keys_file:
        keys.update(_read_keys_file(settings.aws_keys_file))
    if settings.aws_keys:
        keys.update({k: (v, _UNLIMITED) for k, v in parse_keys(settings.aws_keys).items()})
    return keys


class AccessDenied(SigV4Error):
    """A signed call outside its key's grant, answered as IAM would answer it."""

    def __init__(self, message: str) -> None:
        super().__init__("AccessDenied", message, 403)

    @property
    def json_code(self) -> str:
        return "AccessDeniedException"


class Authenticator:
    """Checks one request's SigV4 signature and its key's grant.

    No keys and not `required`: a development node; every call passes as `None`."""

    def __init__(self, keys: Mapping[str, str], clock: Clock, service: str = "sqs", *,
                 grants: Mapping[str, KeyGrant] | None = None, required: bool = False,
                 ) -> None:
        self.keys = dict(keys)
        self.grants = dict(grants or {})
        self.clock = clock
        self.service = service
        self.required = required

    @classmethod
    def from_settings(cls, settings: Settings, clock: Clock, service: str) -> Authenticator:
        loaded = load_grants(settings)
        return cls({k: s for k, (s, _) in loaded.items()}, clock, service,
                   grants={k: g for k, (_, g) in loaded.items()},
                   required=settings.credentials_required)

    @property
    def enabled(self) -> bool:
        return bool(self.keys) or self.required

    def check(self, scope: Mapping[str, Any], body: bytes) -> str | None:
        """The access key id that signed the request (None when checks are off).

        Raises `SigV4Error` with the AWS code for a missing, malformed or wrong signature,
        `AccessDenied` when the key may not use this service.
        """
        if not self.keys:
            if self.required:
                raise SigV4Error("InvalidClientTokenId", "The security token included in the "
                                 "request is invalid: this node has no AWS access keys "
                                 "configured (TIDINGS_AWS_KEYS or TIDINGS_AWS_KEYS_FILE).")
            return None
        raw_path = scope.get("raw_path")
        path = raw_path.decode("latin-1") if raw_path else str(scope.get("path", "/"))
        request = SigV4Request(
            method=str(scope.get("method", "POST")),
            path=path.split("?", 1)[0],
            query=bytes(scope.get("query_string", b"")).decode("latin-1"),
            headers=[(k.decode("latin-1"), v.decode("latin-1"))
                     for k, v in scope.get("headers", ())],
            body=body,
        )
        akid = verify(request, self.keys, self.clock.now_ms(), service=self.service)
        services = self.grant(akid).services
        if services is not None and self.service not in services:
            raise AccessDenied(f"User: {akid} is not authorized to use the {self.service} "
                               "service: its key is limited to "
                               f"{', '.join(sorted(services))}.")
        return akid

    def grant(self, akid: str | None) -> KeyGrant:
        return _UNLIMITED if akid is None else self.grants.get(akid, _UNLIMITED)

    def check_names(self, akid: str | None, action: str, names: Iterable[str]) -> None:
        """Raise `AccessDenied` unless the key may act on every named queue or group."""
        grant = self.grant(akid)
        for name in names:
            if not grant.allows_name(name):
                raise AccessDenied(
                    f"User: {akid} is not authorized to perform: {self.service}:{action} on "
                    f"resource: {name} (the key is limited to names starting with "
                    f"{', '.join(grant.prefixes or ())}).")
