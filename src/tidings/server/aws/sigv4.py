"""Server-side check of AWS Signature Version 4, in the header and presigned-URL forms.

The canonical request is rebuilt exactly as AWS SDKs build it for services other than S3
(botocore's `SigV4Auth` is the reference the tests sign with):

* URI: dot segments and empty segments removed, then the path *as received* (still
  percent-encoded) is URI-encoded once more with only ``/`` and ``~`` kept — the "encode
  each segment twice" rule, so ``/schedules/a%20b`` is canonicalised as
  ``/schedules/a%2520b``.
* Query: every ``name=value`` pair is percent-decoded and re-encoded with RFC 3986
  unreserved characters kept, then sorted by name and value. ``+`` is a literal plus,
  since SDKs encode spaces as ``%20``.
* Headers: names lower-cased, values trimmed with inner whitespace runs collapsed to one
  space, repeated headers joined with ``,``; ``host`` must be signed.
* Payload: ``x-amz-content-sha256`` when sent (``UNSIGNED-PAYLOAD`` allowed; a hex digest
  must match the body), otherwise the SHA-256 of the body.

Error codes are those of the AWS query protocol (SQS, SES), as real SQS returns them:

=================================  ======  ===============================================
case                               status  code (JSON-protocol code in `json_code`)
=================================  ======  ===============================================
no Authorization / X-Amz-* query   403     MissingAuthenticationToken
malformed header or parameters     400     IncompleteSignature
unknown access key id              403     InvalidClientTokenId ("The security token
                                           included in the request is invalid.")
wrong signature, scope or date     403     SignatureDoesNotMatch
clock skew beyond 15 minutes       403     SignatureDoesNotMatch, "Signature expired: ..."
                                           or "Signature not yet current: ..." (the text
                                           SQS, STS and SES return; JSON services send
                                           InvalidSignatureException with the same text)
payload digest does not match      400     XAmzContentSHA256Mismatch
=================================  ======  ===============================================

Session tokens (X-Amz-Security-Token) are not issued by tidings; when present they are
only covered by the signature like any other signed header or parameter.
"""

from __future__ import annotations

import calendar
import functools
import hashlib
import hmac
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from urllib.parse import quote, unquote_to_bytes

from tidings.errors import TidingsError

ALGORITHM = "AWS4-HMAC-SHA256"
UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD"
MAX_PRESIGN_EXPIRES_S = 7 * 24 * 3600  # SigV4 signing keys are valid for seven days
_AMZ_DATE_FMT = "%Y%m%dT%H%M%SZ"
_AMZ_DATE_RE = re.compile(r"^\d{8}T\d{6}Z$")
_HEX_SHA256_RE = re.compile(r"^[0-9a-fA-F]{64}$")
_TERMINATOR = "aws4_request"

_SIGNATURE_MISMATCH = (
    "The request signature we calculated does not match the signature you provided."
    " Check your AWS Secret Access Key and signing method."
    " Consult the service documentation for details."
)
_JSON_CODES = {
    "MissingAuthenticationToken": "MissingAuthenticationTokenException",
    "IncompleteSignature": "IncompleteSignatureException",
    "InvalidClientTokenId": "UnrecognizedClientException",
    "SignatureDoesNotMatch": "InvalidSignatureException",
    "XAmzContentSHA256Mismatch": "InvalidSignatureException",
}


class SigV4Error(TidingsError):
    """The request is not authenticated; `code` and `status` are what AWS would answer."""

    def __init__(
        self,
        code: str,
        message: str,
        status: int = 403,
        canonical_request: str | None = None,
    ) -> None:
        self.code = code
        self.status = status
        # Kept for server-side debug logs: comparing it with the client's own canonical
        # request is the quickest way to find why a signature differs.
        self.canonical_request = canonical_request
        super().__init__(message)

    @property
    def json_code(self) -> str:
        """The error type JSON-protocol services (awsJson/restJson) use for this case."""
        return _JSON_CODES.get(self.code, self.code)


def _incomplete(message: str) -> SigV4Error:
    return SigV4Error("IncompleteSignature", message, 400)


@dataclass(frozen=True)
class SigV4Request:
    """One HTTP request as received: `path` and `query` still percent-encoded.

    `headers` may be a mapping or a sequence of (name, value) pairs; pairs keep repeated
    headers, which SigV4 joins with commas.
    """

    method: str
    path: str
    query: str
    headers: Mapping[str, str] | Sequence[tuple[str, str]]
    body: bytes = b""


@dataclass(frozen=True)
class _Auth:
    access_key: str
    scope_date: str
    region: str
    service: str
    signed_headers: list[str]
    signature: str
    timestamp: str  # ISO 8601 basic, as it enters the string to sign
    timestamp_ms: int
    expires_s: int | None  # presigned URLs only


def verify(
    request: SigV4Request,
    secrets: Mapping[str, str],
    now_ms: int,
    max_skew_ms: int = 15 * 60 * 1000,
    *,
    service: str | None = None,
    region: str | None = None,
) -> str:
    """Return the access key id whose secret signed `request`, or raise SigV4Error.

    `service`/`region`, when given, must equal the credential scope's.
    """
    headers = _header_lists(request.headers)
    query = _query_pairs(request.query)
    authorization = headers.get("authorization")
    if authorization:
        auth = _parse_header_auth(authorization[0], headers)
        canonical_query = query
    elif {"X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Signature"} & {
        name for name, _ in _decoded_pairs(query)
    }:
        auth = _parse_query_auth(query)
        canonical_query = [(n, v) for n, v in query if _decode(n) != "X-Amz-Signature"]
    else:
        raise SigV4Error(
            "MissingAuthenticationToken", "Request is missing Authentication Token", 403
        )

    _check_scope(auth, service, region)
    secret = secrets.get(auth.access_key)
    if secret is None:
        raise SigV4Error(
            "InvalidClientTokenId", "The security token included in the request is invalid.", 403
        )
    _check_time(auth, now_ms, max_skew_ms)

    canonical = "\n".join(
        [
            request.method.upper(),
            _canonical_uri(request.path),
            _canonical_query(canonical_query),
            "".join(f"{name}:{_header_value(headers.get(name, []))}\n"
                    for name in auth.signed_headers),
            ";".join(auth.signed_headers),
            _payload_hash(headers, request.body),
        ]
    )
    scope = f"{auth.scope_date}/{auth.region}/{auth.service}/{_TERMINATOR}"
    string_to_sign = "\n".join(
        [ALGORITHM, auth.timestamp, scope, hashlib.sha256(canonical.encode()).hexdigest()]
    )
    key = _signing_key(secret, auth.scope_date, auth.region, auth.service)
    expected = hmac.digest(key, string_to_sign.encode(), hashlib.sha256).hex()
    if not hmac.compare_digest(expected.encode(), auth.signature.encode("utf-8", "replace")):
        raise SigV4Error("SignatureDoesNotMatch", _SIGNATURE_MISMATCH, 403, canonical)
    return auth.access_key


# -- parsing ---------------------------------------------------------------------------


def _header_lists(
    headers: Mapping[str, str] | Sequence[tuple[str, str]],
) -> dict[str, list[str]]:
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    out: dict[str, list[str]] = {}
    for name, value in pairs:
        out.setdefault(name.strip().lower(), []).append(value)
    return out


def _query_pairs(raw: str) -> list[tuple[str, str]]:
    """The raw (still encoded) pairs; a bare ``name`` is ``name=``."""
    pairs = []
    for piece in raw.split("&"):
        if piece:
            name, _, value = piece.partition("=")
            pairs.append((name, value))
    return pairs


def _decode(text: str) -> str:
    return unquote_to_bytes(text).decode("utf-8", "replace")


def _decoded_pairs(pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(_decode(n), _decode(v)) for n, v in pairs]


def _parse_credential(credential: str, where: str) -> tuple[str, str, str, str]:
    """The access key, date, region and service of a credential scope: the first four
    fields of `_Auth`, in its order."""
    parts = credential.split("/")
    if len(parts) != 5:
        raise _incomplete(
            "Credential must have exactly 5 slash-delimited elements, e.g."
            f" keyid/date/region/service/term, got '{credential}' ({where})"
        )
    access_key, scope_date, scope_region, scope_service, terminator = parts
    if terminator != _TERMINATOR:
        raise SigV4Error(
            "SignatureDoesNotMatch",
            f"Credential should be scoped with a valid terminator: '{_TERMINATOR}',"
            f" not '{terminator}'.",
        )
    if not (access_key and re.fullmatch(r"\d{8}", scope_date) and scope_region
            and scope_service):
        raise _incomplete(f"Credential is malformed: '{credential}' ({where})")
    return access_key, scope_date, scope_region, scope_service


def _parse_signed_headers(value: str) -> list[str]:
    names = sorted({n.strip().lower() for n in value.split(";") if n.strip()})
    if "host" not in names:
        raise _incomplete(
            "'Host' or ':authority' must be a 'SignedHeader' in the AWS Authorization."
        )
    return names


def _parse_header_auth(value: str, headers: dict[str, list[str]]) -> _Auth:
    algorithm, _, rest = value.strip().partition(" ")
    if algorithm != ALGORITHM:
        raise _incomplete(
            f"Unsupported AWS 'algorithm': '{algorithm}'; only {ALGORITHM} is accepted"
        )
    fields: dict[str, str] = {}
    for component in rest.split(","):
        name, eq, field_value = component.strip().partition("=")
        if eq:
            fields[name.strip()] = field_value.strip()
    missing = [f"Authorization header requires '{k}' parameter."
               for k in ("Credential", "Signature", "SignedHeaders") if not fields.get(k)]
    amz_date = headers.get("x-amz-date")
    http_date = headers.get("date")
    if not amz_date and not http_date:
        missing.append(
            "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header."
        )
    if missing:
        raise _incomplete(" ".join(missing) + f" Authorization={value}")
    credential = _parse_credential(fields["Credential"], "Authorization header")
    timestamp, timestamp_ms = (
        _parse_amz_date(amz_date[0].strip()) if amz_date
        else _parse_http_date(http_date[0] if http_date else "")
    )
    return _Auth(*credential, signed_headers=_parse_signed_headers(fields["SignedHeaders"]),
                 signature=fields["Signature"], timestamp=timestamp, timestamp_ms=timestamp_ms,
                 expires_s=None)


def _parse_query_auth(pairs: list[tuple[str, str]]) -> _Auth:
    params = dict(_decoded_pairs(pairs))
    required = ("X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Signature", "X-Amz-Date",
                "X-Amz-SignedHeaders", "X-Amz-Expires")
    if any(not params.get(name) for name in required):
        raise _incomplete(
            "AWS query-string parameters must include "
            + ", ".join(f"'{name}'" for name in required)
            + ". Re-examine the query-string parameters."
        )
    if params["X-Amz-Algorithm"] != ALGORITHM:
        raise _incomplete(f'X-Amz-Algorithm only supports "{ALGORITHM}"')
    credential = _parse_credential(params["X-Amz-Credential"], "X-Amz-Credential")
    expires_text = params["X-Amz-Expires"]
    if not expires_text.isdigit() or not 1 <= int(expires_text) <= MAX_PRESIGN_EXPIRES_S:
        raise _incomplete(
            f"X-Amz-Expires must be a whole number of seconds from 1 to {MAX_PRESIGN_EXPIRES_S},"
            f" got '{expires_text}'"
        )
    timestamp, timestamp_ms = _parse_amz_date(params["X-Amz-Date"])
    return _Auth(*credential,
                 signed_headers=_parse_signed_headers(params["X-Amz-SignedHeaders"]),
                 signature=params["X-Amz-Signature"], timestamp=timestamp,
                 timestamp_ms=timestamp_ms, expires_s=int(expires_text))


def _parse_amz_date(text: str) -> tuple[str, int]:
    try:
        if not _AMZ_DATE_RE.match(text):
            raise ValueError(text)
        parsed = datetime.strptime(text, _AMZ_DATE_FMT)
    except ValueError:
        raise _incomplete(
            f"Date must be in ISO-8601 'basic format'. Got '{text}'."
            " See http://en.wikipedia.org/wiki/ISO_8601"
        ) from None
    return text, calendar.timegm(parsed.timetuple()) * 1000


def _parse_http_date(text: str) -> tuple[str, int]:
    try:
        parsed = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        raise _incomplete(f"Date header is not a valid HTTP date: '{text}'") from None
    if parsed.tzinfo is None:  # RFC 5322 "-0000": UTC with no claim about local time
        parsed = parsed.replace(tzinfo=UTC)
    seconds = calendar.timegm(parsed.utctimetuple())
    return _fmt(seconds * 1000), seconds * 1000


# -- checks ----------------------------------------------------------------------------


def _fmt(ms: int) -> str:
    return datetime.fromtimestamp(ms // 1000, UTC).strftime(_AMZ_DATE_FMT)


def _check_scope(auth: _Auth, service: str | None, region: str | None) -> None:
    if auth.scope_date != auth.timestamp[:8]:
        raise SigV4Error(
            "SignatureDoesNotMatch",
            "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date"
            f" from HTTP: '{auth.scope_date}' != '{auth.timestamp[:8]}',"
            f" from '{auth.timestamp}'.",
        )
    if service is not None and auth.service != service:
        raise SigV4Error(
            "SignatureDoesNotMatch", f"Credential should be scoped to correct service: '{service}'."
        )
    if region is not None and auth.region != region:
        raise SigV4Error(
            "SignatureDoesNotMatch",
            f"Credential should be scoped to a valid region, not '{auth.region}'.",
        )


def _check_time(auth: _Auth, now_ms: int, max_skew_ms: int) -> None:
    minutes = f"{max_skew_ms // 60000} min."
    if auth.timestamp_ms > now_ms + max_skew_ms:
        raise SigV4Error(
            "SignatureDoesNotMatch",
            f"Signature not yet current: {auth.timestamp} is still later than"
            f" {_fmt(now_ms + max_skew_ms)} ({_fmt(now_ms)} + {minutes})",
        )
    if auth.expires_s is not None:
        expiry_ms = auth.timestamp_ms + auth.expires_s * 1000
        if now_ms > expiry_ms:
            raise SigV4Error(
                "SignatureDoesNotMatch",
                f"Signature expired: {_fmt(expiry_ms)} is now earlier than {_fmt(now_ms)}"
                f" ({auth.timestamp} + {auth.expires_s} s)",
            )
    elif auth.timestamp_ms < now_ms - max_skew_ms:
        raise SigV4Error(
            "SignatureDoesNotMatch",
            f"Signature expired: {auth.timestamp} is now earlier than"
            f" {_fmt(now_ms - max_skew_ms)} ({_fmt(now_ms)} - {minutes})",
        )


# -- canonical request -----------------------------------------------------------------


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 §5.2.4, plus the AWS rule that empty segments (``//``) disappear."""
    kept: list[str] = []
    for segment in path.split("/"):
        if segment == "..":
            if kept:
                kept.pop()
        elif segment and segment != ".":
            kept.append(segment)
    joined = "/" + "/".join(kept)
    if kept and path.endswith("/"):
        joined += "/"
    return joined


def _canonical_uri(path: str) -> str:
    return quote(_remove_dot_segments(path or "/"), safe="/~")


def _canonical_query(pairs: list[tuple[str, str]]) -> str:
    encoded = sorted(
        (quote(unquote_to_bytes(n), safe="-_.~"), quote(unquote_to_bytes(v), safe="-_.~"))
        for n, v in pairs
    )
    return "&".join(f"{n}={v}" for n, v in encoded)


def _header_value(values: list[str]) -> str:
    return ",".join(" ".join(v.split()) for v in values)


def _payload_hash(headers: dict[str, list[str]], body: bytes) -> str:
    actual = hashlib.sha256(body).hexdigest()
    claimed = headers.get("x-amz-content-sha256")
    if not claimed:
        return actual
    value = claimed[0].strip()
    if value == UNSIGNED_PAYLOAD:
        return value
    if not _HEX_SHA256_RE.match(value):
        raise _incomplete(
            f"x-amz-content-sha256 must be {UNSIGNED_PAYLOAD} or the hex SHA-256 of the body,"
            f" got '{value}'"
        )
    if not hmac.compare_digest(value.lower(), actual):
        raise SigV4Error(
            "XAmzContentSHA256Mismatch",
            "The provided 'x-amz-content-sha256' header does not match what was computed.",
            400,
        )
    return value


@functools.lru_cache(maxsize=256)
def _signing_key(secret: str, date: str, region: str, service: str) -> bytes:
    """Four chained HMACs, the same for a key's every request of a day: cached (bounded,
    as a request picks its region; the secrets are the node's own, already in memory)."""
    key = ("AWS4" + secret).encode()
    for part in (date, region, service, _TERMINATOR):
        key = hmac.digest(key, part.encode(), hashlib.sha256)
    return key
