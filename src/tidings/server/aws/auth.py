"""SigV4 enforcement for the AWS wire APIs, and where the access keys come from.

Keys come from `TIDINGS_AWS_KEYS` ("AKID:SECRET,AKID2:SECRET2") and/or the file named by
`TIDINGS_AWS_KEYS_FILE` (`AKID SECRET` lines, `#` comments; or a JSON object
`{"AKID": "SECRET"}`). With no keys at all the node is in local-development mode and takes
any signature or none, as SQS emulators do; with keys, every request must verify.

The signature is checked over the request exactly as it arrived: the raw (still
percent-encoded) path from the ASGI scope and the raw body bytes, since any re-encoding by
the framework would make a correct signature fail. The credential scope's service must be
`sqs`; its region is not checked, so clients configured for any region can reach one node.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tidings.clock import Clock
from tidings.errors import ValidationError
from tidings.server.aws.sigv4 import SigV4Request, verify
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


def read_keys_file(path: str) -> dict[str, str]:
    field = "TIDINGS_AWS_KEYS_FILE"
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ValidationError(field, f"cannot read {path!r}: {exc.strerror}") from None
    if text.lstrip().startswith("{"):
        try:
            doc = json.loads(text)
        except json.JSONDecodeError:
            raise ValidationError(field, f"{path!r} is not a valid JSON object") from None
        if not isinstance(doc, dict) or not all(
                isinstance(k, str) and isinstance(v, str) and k and v for k, v in doc.items()):
            raise ValidationError(field, f"{path!r} must map access key ids to secrets")
        return dict(doc)
    keys: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) != 2:
            raise ValidationError(field, f"{path!r} line {number}: expected 'AKID SECRET'")
        keys[parts[0]] = parts[1]
    return keys


def load_keys(settings: Settings) -> dict[str, str]:
    keys: dict[str, str] = {}
    if settings.aws_keys_file:
        keys.update(read_keys_file(settings.aws_keys_file))
    if settings.aws_keys:
        keys.update(parse_keys(settings.aws_keys))
    return keys


class Authenticator:
    """Checks one request's SigV4 signature; a no-op when no keys are configured."""

    def __init__(self, keys: Mapping[str, str], clock: Clock, service: str = "sqs") -> None:
        self.keys = dict(keys)
        self.clock = clock
        self.service = service

    @property
    def enabled(self) -> bool:
        return bool(self.keys)

    def check(self, scope: Mapping[str, Any], body: bytes) -> str | None:
        """The access key id that signed the request (None when checks are off).

        Raises `SigV4Error` with the AWS code for a missing, malformed or wrong signature.
        """
        if not self.keys:
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
        return verify(request, self.keys, self.clock.now_ms(), service=self.service)
