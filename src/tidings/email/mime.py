"""Building the MIME message of one delivery from the stdlib `email` package's encoders.

- Text and HTML together are `multipart/alternative` (text first: clients show the last
  part they understand, RFC 2046 §5.1.4); a single part is sent on its own.
- Non-ASCII header text becomes RFC 2047 encoded-words (`email.header.Header`), display
  names go through `email.utils.formataddr`; bodies are UTF-8, 7bit when they are ASCII
  with short lines, quoted-printable otherwise, so a relay without 8BITMIME/SMTPUTF8
  takes every message.
- Bcc never appears in the headers: those recipients are envelope recipients only.
- One-click unsubscribe (RFC 8058): `List-Unsubscribe` with an https URL and a mailto,
  and `List-Unsubscribe-Post: List-Unsubscribe=One-Click` (required of bulk senders by
  Gmail and Yahoo).
- Tags travel as `X-Tidings-Tag: name=value` headers.
- DKIM (optional, `dkimpy`): the finished bytes are signed, relaxed/relaxed, over the
  usual headers plus the List-Unsubscribe pair.

The pieces are encoded by the `email` package but assembled here rather than through
`EmailMessage.as_bytes()`: its generic header refolding costs ~1-2 ms a message, more
than everything else on the send path together (bench/email.py).
"""

from __future__ import annotations

import email.utils
import functools
import random
import re
from dataclasses import dataclass
from email.charset import QP, Charset
from email.header import Header
from pathlib import Path

from tidings.model.email import split_display

CRLF = "\r\n"
_CONTROLS = re.compile(r"[\x00-\x08\x0a-\x1f\x7f\u2028\u2029\x85]")
_UTF8_QP = Charset("utf-8")
_UTF8_QP.body_encoding = QP

RESERVED_HEADERS = frozenset({
    "from", "to", "cc", "bcc", "reply-to", "subject", "date", "message-id", "mime-version",
    "content-type", "content-transfer-encoding", "list-unsubscribe", "list-unsubscribe-post",
})


@dataclass(frozen=True)
class Unsubscribe:
    url: str  # https://…/unsubscribe/TOKEN
    mailto: str  # unsubscribe@domain?subject=TOKEN (without the scheme)


@dataclass(frozen=True)
class Outgoing:
    """Everything a MIME message is made of, already rendered."""

    from_address: str
    to: tuple[str, ...]
    cc: tuple[str, ...]
    reply_to: tuple[str, ...]
    subject: str
    text: str | None
    html: str | None
    message_id: str  # without the angle brackets
    date_ms: int
    headers: tuple[tuple[str, str], ...] = ()
    tags: tuple[tuple[str, str], ...] = ()
    unsubscribe: Unsubscribe | None = None


def _is_ascii(value: str) -> bool:
    return value.isascii()


def unstructured(name: str, value: str) -> str:
    """One header line (folded), encoded-words only where the text needs them.

    Line breaks (and other control characters) become spaces: a subject rendered from a
    recipient's data can never start a header of its own (header injection)."""
    value = _CONTROLS.sub(" ", value)
    if _is_ascii(value) and len(name) + len(value) < 76:
        return f"{name}: {value}"
    charset = "us-ascii" if _is_ascii(value) else "utf-8"
    return f"{name}: " + Header(value, charset, header_name=name).encode(linesep=CRLF)


# The sender's line is the same in every message of a send, and the Date changes once a
# second: formatted once each, not per message.
@functools.lru_cache(maxsize=1024)
def address(value: str) -> str:
    name, addr = split_display(value)
    local, _, domain = addr.rpartition("@")
    if not domain.isascii():
        domain = domain.encode("idna").decode("ascii")
    return email.utils.formataddr((name, f"{local}@{domain}"), charset="utf-8")


def _address(value: str) -> str:
    """`address`, without its cache for a bare ASCII address (every recipient of a
    campaign is a new one: the cache only churned), which is written as it is."""
    if value.isascii() and "<" not in value and '"' not in value:
        return value.strip()
    return address(value)


def address_list(name: str, values: tuple[str, ...]) -> str:
    # One address per continuation line keeps every line short, whatever the count.
    return f"{name}: " + ("," + CRLF + " ").join(_address(v) for v in values)


def _body(text: str) -> tuple[str, str]:
    """(Content-Transfer-Encoding, encoded body with CRLF line ends)."""
    if "\r" not in text and text.isascii() and (
            len(text) <= 998 or max(map(len, text.split("\n"))) <= 998):
        return "7bit", text.replace("\n", CRLF)  # the common case, in two passes
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if text.isascii() and all(len(line) <= 998 for line in lines):
        return "7bit", CRLF.join(lines)
    encoded = _UTF8_QP.body_encode("\n".join(lines)) or ""
    return "quoted-printable", encoded.replace("\n", CRLF)


def _part(subtype: str, text: str) -> tuple[str, str]:
    cte, body = _body(text)
    head = (f'Content-Type: text/{subtype}; charset="utf-8"{CRLF}'
            f"Content-Transfer-Encoding: {cte}")
    return head, body


def message_text(out: Outgoing) -> str:
    lines = [address_list("From", (out.from_address,))]
    if out.to:
        lines.append(address_list("To", out.to))
    if out.cc:
        lines.append(address_list("Cc", out.cc))
    if out.reply_to:
        lines.append(address_list("Reply-To", out.reply_to))
    lines.append(unstructured("Subject", out.subject))
    lines.append("Date: " + _date(out.date_ms // 1000))
    lines.append(f"Message-ID: <{out.message_id}>")
    if out.unsubscribe is not None:
        lines.append(f"List-Unsubscribe: <{out.unsubscribe.url}>,{CRLF}"
                     f" <mailto:{out.unsubscribe.mailto}>")
        lines.append("List-Unsubscribe-Post: List-Unsubscribe=One-Click")
    for name, value in out.tags:
        lines.append(unstructured("X-Tidings-Tag", f"{name}={value}"))
    for name, value in out.headers:
        if name.lower() not in RESERVED_HEADERS:
            lines.append(unstructured(name, value))
    lines.append("MIME-Version: 1.0")
    parts = [p for p in (("plain", out.text), ("html", out.html)) if p[1] is not None]
    if not parts:
        parts = [("plain", "")]
    if len(parts) == 1:
        head, body = _part(parts[0][0], parts[0][1] or "")
        return CRLF.join(lines) + CRLF + head + CRLF + CRLF + body + CRLF
    encoded = [_part(sub, text or "") for sub, text in parts]
    # "=_" cannot occur in quoted-printable output, and 7bit parts are checked.
    boundary = _boundary()
    while any(boundary in body for _, body in encoded):  # pragma: no cover - 2^-96
        boundary = _boundary()
    lines.append(f'Content-Type: multipart/alternative;{CRLF} boundary="{boundary}"')
    out_text = CRLF.join(lines) + CRLF + CRLF
    for head, body in encoded:
        out_text += f"--{boundary}{CRLF}{head}{CRLF}{CRLF}{body}{CRLF}"
    return out_text + f"--{boundary}--{CRLF}"


@functools.lru_cache(maxsize=4)
def _date(seconds: int) -> str:
    return email.utils.formatdate(seconds, usegmt=True)


_RANDOM = random.Random()


def _boundary() -> str:
    """A boundary need not be secret, only absent from the parts (which is checked):
    not the system's random source, whose read cost more than the rest of the line."""
    return f"=_tidings_{_RANDOM.getrandbits(96):024x}"


def message_bytes(out: Outgoing, dkim: DkimSigner | None = None) -> bytes:
    data = message_text(out).encode("ascii")
    return dkim.sign(data) if dkim is not None else data


class DkimSigner:
    """Signs finished messages with a private key (PEM) for `selector._domainkey.domain`."""

    SIGNED = (b"from", b"to", b"cc", b"reply-to", b"subject", b"date", b"message-id",
              b"mime-version", b"content-type", b"list-unsubscribe", b"list-unsubscribe-post")

    def __init__(self, key_file: str, selector: str, domain: str) -> None:
        try:
            import dkim  # type: ignore[import-untyped]  # noqa: F401 - the [dkim] extra
        except ImportError:
            raise RuntimeError("DKIM signing needs dkimpy: pip install 'tidings[dkim]'") from None
        self.key = Path(key_file).read_bytes()
        self.selector = selector.encode()
        self.domain = domain.encode()

    def sign(self, data: bytes) -> bytes:
        import dkim

        signature: bytes = dkim.sign(data, self.selector, self.domain, self.key,
                                     canonicalize=(b"relaxed", b"relaxed"),
                                     include_headers=list(self.SIGNED))
        return signature + data
