"""Amazon SNS message signatures, checked before an SES notification is believed.

Anyone who learns the webhook's URL could otherwise post a "Permanent bounce" for every
address on a list and have them all suppressed. SNS signs every message it delivers
(https://docs.aws.amazon.com/sns/latest/dg/sns-verify-signature-of-message.html):

- the string to sign is the message's fields in a fixed order, each `Name\\nvalue\\n`:
  `Message, MessageId, Subject (when present), Timestamp, TopicArn, Type` for a
  Notification, and `Message, MessageId, SubscribeURL, Timestamp, Token, TopicArn, Type`
  for a SubscriptionConfirmation or UnsubscribeConfirmation;
- `SignatureVersion` 1 is RSA PKCS#1 v1.5 over SHA1, 2 over SHA256;
- the certificate is fetched from `SigningCertURL`, which must be https on an SNS host
  (`sns.<region>.amazonaws.com`, `TIDINGS_SNS_CERT_HOST`) and end in `.pem`: checking
  the signature with a certificate from anywhere else would prove nothing. Certificates
  are kept by URL (AWS rotates them rarely), so a steady stream costs no fetch.

A SubscriptionConfirmation whose signature holds is confirmed by fetching its
`SubscribeURL`, checked against the same host rule, so the node makes no request to a
URL anybody but SNS could have handed it.

`cryptography` is an optional dependency (`pip install 'tidings[sns]'`); without it a
signed message is refused naming the package, unless `TIDINGS_SNS_VERIFY=false`.
"""

from __future__ import annotations

import base64
import binascii
import re
import ssl
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from tidings.errors import Forbidden, TidingsError

if TYPE_CHECKING:
    import httpx

#: The hosts SNS signs from and sends confirmation links on (host, or host:port, matched
#: whole): every commercial region, and China's.
DEFAULT_CERT_HOST = r"sns\.[a-z0-9-]+\.amazonaws\.com(\.cn)?"
SNS_TYPES = frozenset({"Notification", "SubscriptionConfirmation", "UnsubscribeConfirmation"})
_NOTIFICATION_KEYS = ("Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type")
_SUBSCRIPTION_KEYS = ("Message", "MessageId", "SubscribeURL", "Timestamp", "Token",
                      "TopicArn", "Type")
_KEEP_CERTS = 32
_FETCH_TIMEOUT_S = 10.0


def string_to_sign(doc: Mapping[str, Any]) -> bytes:
    """The bytes SNS signed: the message's fields of its type, in SNS's order."""
    keys = _NOTIFICATION_KEYS if doc.get("Type") == "Notification" else _SUBSCRIPTION_KEYS
    out = []
    for key in keys:
        if key == "Subject" and "Subject" not in doc:
            continue  # a Notification without a subject leaves it out, name and all
        value = doc.get(key)
        if not isinstance(value, str):
            raise Forbidden(f"{key}: an SNS message carries it as a string; without it the "
                            "signature cannot be checked")
        out.append(f"{key}\n{value}\n")
    return "".join(out).encode()


class SnsVerifier:
    def __init__(self, cert_host: str = DEFAULT_CERT_HOST, ca_file: str | None = None) -> None:
        self.cert_host = re.compile(cert_host)
        self.ca_file = ca_file
        self._keys: dict[str, Any] = {}  # certificate URL → its public key

    def _checked_url(self, url: object, field: str, *, pem: bool) -> str:
        parts = urlsplit(url) if isinstance(url, str) else None
        if parts is None or parts.scheme != "https" or not self.cert_host.fullmatch(
                parts.netloc.lower()) or (pem and not parts.path.endswith(".pem")):
            raise Forbidden(f"{field} {url!r} is not an https URL of Amazon SNS "
                            "(TIDINGS_SNS_CERT_HOST): the message's signature cannot be "
                            "trusted")
        return str(url)

    def _client(self) -> httpx.AsyncClient:
        import httpx  # here: only a node verifying SNS fetches (httpx costs every process MBs)

        verify: ssl.SSLContext | bool = True
        if self.ca_file:
            verify = ssl.create_default_context(cafile=self.ca_file)
        return httpx.AsyncClient(verify=verify, timeout=_FETCH_TIMEOUT_S,
                                 follow_redirects=False)

    async def _fetch(self, url: str) -> bytes:
        import httpx

        try:
            async with self._client() as client:
                response = await client.get(url)
        except httpx.HTTPError as exc:
            raise TidingsError(f"cannot fetch {url} ({type(exc).__name__}: {exc})") from None
        if response.status_code != 200:
            raise TidingsError(f"{url} answered {response.status_code}")
        return response.content

    async def _public_key(self, url: str) -> Any:
        key = self._keys.get(url)
        if key is None:
            from cryptography import x509  # optional: tidings[sns]

            try:
                key = x509.load_pem_x509_certificate(await self._fetch(url)).public_key()
            except ValueError:
                raise Forbidden(f"SigningCertURL {url} is not a PEM certificate") from None
            if len(self._keys) >= _KEEP_CERTS:
                self._keys.pop(next(iter(self._keys)))
            self._keys[url] = key
        return key

    async def verify(self, doc: Mapping[str, Any]) -> None:
        """Return if SNS signed `doc`; raise Forbidden (403) if not, a document that is no
        SNS message included: whoever sent it cannot be told from anyone else."""
        if doc.get("Type") not in SNS_TYPES:
            raise Forbidden("Type: not an SNS message (Notification or "
                            "SubscriptionConfirmation); with TIDINGS_SNS_VERIFY only signed "
                            "SNS messages are taken")
        try:
            from cryptography.exceptions import InvalidSignature
            from cryptography.hazmat.primitives import hashes
            from cryptography.hazmat.primitives.asymmetric import padding, rsa
        except ImportError:
            raise TidingsError("checking SNS signatures needs the cryptography package: "
                               "pip install 'tidings[sns]' (or TIDINGS_SNS_VERIFY=false "
                               "behind a check of your own)") from None
        version = doc.get("SignatureVersion")
        algorithm = {"1": hashes.SHA1(), "2": hashes.SHA256()}.get(str(version))
        if algorithm is None:
            raise Forbidden(f"SignatureVersion {version!r} is not 1 or 2")
        url = self._checked_url(doc.get("SigningCertURL"), "SigningCertURL", pem=True)
        try:
            signature = base64.b64decode(str(doc.get("Signature") or ""), validate=True)
        except (binascii.Error, ValueError):
            raise Forbidden("the Signature is not base64") from None
        key = await self._public_key(url)
        if not isinstance(key, rsa.RSAPublicKey):
            raise Forbidden(f"the certificate at {url} has no RSA key")
        try:
            key.verify(signature, string_to_sign(doc), padding.PKCS1v15(), algorithm)
        except InvalidSignature:
            raise Forbidden("the SNS signature does not match the message") from None

    async def confirm(self, doc: Mapping[str, Any]) -> None:
        """Confirm a verified SubscriptionConfirmation: GET its SubscribeURL."""
        await self._fetch(self._checked_url(doc.get("SubscribeURL"), "SubscribeURL",
                                            pem=False))
