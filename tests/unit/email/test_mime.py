"""MIME building: what mail clients and relays will parse out of our bytes."""

from __future__ import annotations

import shutil
import subprocess
from email import message_from_bytes, policy
from email.message import EmailMessage
from pathlib import Path

import pytest

from tidings.email.mime import DkimSigner, Outgoing, Unsubscribe, message_bytes


def outgoing(**changes: object) -> Outgoing:
    base: dict[str, object] = dict(
        from_address="Zoë Ünlü <news@example.com>", to=("ana@example.org",), cc=(),
        reply_to=(), subject="Hello", text="plain text", html="<p>html</p>",
        message_id="abc-123@example.com", date_ms=1_800_000_000_000)
    base.update(changes)
    return Outgoing(**base)  # type: ignore[arg-type]


def parse(data: bytes) -> EmailMessage:
    msg = message_from_bytes(data, policy=policy.default)
    assert isinstance(msg, EmailMessage)
    return msg


def test_bytes_are_seven_bit_with_crlf_and_short_lines() -> None:
    data = message_bytes(outgoing(subject="Ünïcödé " * 20, text="é" * 3000))
    assert data.isascii()
    assert b"\n" not in data.replace(b"\r\n", b"")
    assert max(len(line) for line in data.split(b"\r\n")) <= 998
    header_block = data.split(b"\r\n\r\n", 1)[0]
    assert max(len(line) for line in header_block.split(b"\r\n")) <= 78
    msg = parse(data)
    assert msg["Subject"] == "Ünïcödé " * 20
    plain = msg.get_body(("plain",))
    assert plain is not None and plain.get_content() == "é" * 3000


def test_headers_and_alternative_parts() -> None:
    msg = parse(message_bytes(outgoing(
        to=("Ana <ana@example.org>", "bob@example.org"), cc=("Smith, J <j@example.net>",),
        reply_to=("help@example.com",), tags=(("campaign", "spring"), ("tier", "gold")),
        headers=(("X-Custom", "yes"), ("Bcc", "spy@example.org"), ("Subject", "override")),
        unsubscribe=Unsubscribe("https://mail.example.com/unsubscribe/T0K", "u@example.com?"
                                "subject=T0K"))))
    assert msg["From"] == "Zoë Ünlü <news@example.com>"
    assert msg["From"].addresses[0].display_name == "Zoë Ünlü"
    assert [a.addr_spec for a in msg["To"].addresses] == ["ana@example.org", "bob@example.org"]
    assert msg["Cc"].addresses[0].display_name == "Smith, J"
    assert msg["Reply-To"] == "help@example.com"
    assert msg["Bcc"] is None and msg["Subject"] == "Hello"  # reserved names cannot be set
    assert msg["X-Custom"] == "yes"
    assert msg.get_all("X-Tidings-Tag") == ["campaign=spring", "tier=gold"]
    assert msg["Message-ID"] == "<abc-123@example.com>"
    assert msg["Date"].datetime.timestamp() == 1_800_000_000
    assert msg["List-Unsubscribe"] == ("<https://mail.example.com/unsubscribe/T0K>, "
                                       "<mailto:u@example.com?subject=T0K>")
    assert msg["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    assert msg["MIME-Version"] == "1.0"
    assert msg.get_content_type() == "multipart/alternative"
    assert [p.get_content_type() for p in msg.iter_parts()] == ["text/plain", "text/html"]


@pytest.mark.parametrize(("text", "html", "kind"), [
    ("only text", None, "text/plain"), (None, "<b>only html</b>", "text/html")])
def test_single_part(text: str | None, html: str | None, kind: str) -> None:
    msg = parse(message_bytes(outgoing(text=text, html=html)))
    assert msg.get_content_type() == kind and not msg.is_multipart()
    assert msg.get_content_charset() == "utf-8"
    assert msg.get_content().rstrip("\r\n") == (text or html)


def test_body_text_that_looks_like_a_boundary_or_dot_survives() -> None:
    text = ".\r\n..leading dots\n--=_tidings_x\nlast"
    msg = parse(message_bytes(outgoing(text=text, html="<p>x</p>")))
    plain = msg.get_body(("plain",))
    assert plain is not None
    assert plain.get_content().replace("\r\n", "\n") == text.replace("\r\n", "\n")


def test_idn_domain_is_punycoded() -> None:
    msg = parse(message_bytes(outgoing(to=("ana@bücher.example",))))
    assert msg["To"] == "ana@xn--bcher-kva.example"


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl to make a key")
def test_dkim_signature_verifies(tmp_path: Path) -> None:
    dkim = pytest.importorskip("dkim")
    key = tmp_path / "dkim.pem"
    subprocess.run(["openssl", "genrsa", "-out", str(key), "2048"], check=True,
                   capture_output=True)
    public = subprocess.run(["openssl", "rsa", "-in", str(key), "-pubout", "-outform", "DER"],
                            check=True, capture_output=True).stdout
    import base64

    record = b"v=DKIM1; k=rsa; p=" + base64.b64encode(public)
    signer = DkimSigner(str(key), "sel1", "example.com")
    data = message_bytes(outgoing(subject="Signed ✓"), signer)
    assert data.startswith(b"DKIM-Signature:")

    def dns(name: bytes, timeout: int = 5) -> bytes:
        assert name == b"sel1._domainkey.example.com."
        return record

    assert dkim.verify(data, dnsfunc=dns)
    tampered = data.replace(b"plain text", b"plain texT")
    assert not dkim.verify(tampered, dnsfunc=dns)
