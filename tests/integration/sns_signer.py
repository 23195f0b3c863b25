"""A stand-in for Amazon SNS's signing side, on loopback: a self-made CA, an HTTPS server
(its certificate for 127.0.0.1 issued by that CA) that serves the signing certificate and
answers subscription links, and `sign()`, which signs a message as SNS does
(https://docs.aws.amazon.com/sns/latest/dg/sns-verify-signature-of-message.html), the
string to sign written out here independently of tidings' own.

A node trusts it through settings only: `sns_cert_host` names the loopback server and
`sns_ca_file` the CA; verification stays on."""

from __future__ import annotations

import base64
import datetime as dt
import http.server
import ipaddress
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.x509.oid import NameOID


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _cert(subject: str, key: rsa.RSAPrivateKey, issuer: str, issuer_key: rsa.RSAPrivateKey,
          *, ca: bool = False, ip: str | None = None) -> x509.Certificate:
    now = dt.datetime.now(dt.UTC)
    builder = (x509.CertificateBuilder()
               .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
               .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - dt.timedelta(hours=1))
               .not_valid_after(now + dt.timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ip is not None:
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [x509.IPAddress(ipaddress.ip_address(ip))]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


@dataclass
class Sns:
    base: str  # https://127.0.0.1:PORT
    ca_file: str
    signing_key: rsa.RSAPrivateKey
    fetched: list[str] = field(default_factory=list)  # paths the node asked for

    @property
    def cert_host(self) -> str:
        return r"127\.0\.0\.1:\d+"

    def sign(self, doc: dict[str, Any], version: str = "2",
             cert_url: str | None = None) -> dict[str, Any]:
        if doc["Type"] == "Notification":
            keys = ["Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type"]
        else:
            keys = ["Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn",
                    "Type"]
        text = "".join(f"{k}\n{doc[k]}\n" for k in keys if k in doc)
        digest = hashes.SHA1() if version == "1" else hashes.SHA256()  # noqa: S303 - SNS v1
        signature = self.signing_key.sign(text.encode(), padding.PKCS1v15(), digest)
        return {**doc, "SignatureVersion": version,
                "Signature": base64.b64encode(signature).decode(),
                "SigningCertURL": cert_url or f"{self.base}/SimpleNotificationService-1.pem"}


@contextmanager
def running_sns(folder: Path) -> Iterator[Sns]:
    ca_key, server_key, signing_key = _key(), _key(), _key()
    ca = _cert("test CA", ca_key, "test CA", ca_key, ca=True)
    server = _cert("127.0.0.1", server_key, "test CA", ca_key, ip="127.0.0.1")
    signing = _cert("sns.us-east-1.amazonaws.com", signing_key, "test CA", ca_key)
    (folder / "ca.pem").write_bytes(_pem(ca))
    (folder / "server.pem").write_bytes(_pem(server) + server_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    fetched: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            fetched.append(self.path)
            body = _pem(signing) if self.path.endswith(".pem") else \
                b"<ConfirmSubscriptionResponse/>"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(folder / "server.pem")
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield Sns(f"https://127.0.0.1:{httpd.server_address[1]}", str(folder / "ca.pem"),
                  signing_key, fetched)
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(10)
