"""Message attribute values, their SQS validation rules and the MD5 digests SQS returns.

SDKs (the Java, .NET and Go SDKs among them) recompute `MD5OfMessageBody` and
`MD5OfMessageAttributes` on every send and receive and raise if ours differ, so the
attribute digest below must be byte-for-byte the algorithm documented in "Calculating the
MD5 message digest for message attributes" of the SQS Developer Guide.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from tidings.errors import ValidationError

MAX_ATTRIBUTES = 10
MAX_NAME_LENGTH = 256
MAX_DATA_TYPE_LENGTH = 256
# SQS Number: "up to 38 digits of precision, and can be between 10^-128 and 10^+126".
MAX_NUMBER_DIGITS = 38
_NUMBER_MIN = Decimal("1e-128")
_NUMBER_MAX = Decimal("1e126")

_BASE_TYPES = ("String", "Number", "Binary")
_NAME_CHARS = re.compile(r"^[A-Za-z0-9_.\-]+$")
_RESERVED_PREFIXES = ("aws.", "amazon.")
# A plain decimal literal; Decimal() alone would also accept "NaN", "1_000" and spaces.
_NUMBER_RE = re.compile(r"^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$")
# Attribute string values obey the same XML 1.0 character rule as message bodies.
_INVALID_CHARS = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")

# Transport type byte of the digest: Binary values are raw bytes, String and Number are text.
_TRANSPORT_STRING = 1
_TRANSPORT_BINARY = 2


@dataclass(frozen=True)
class MessageAttributeValue:
    """One user message attribute. `data_type` may carry a custom suffix ("Number.float")."""

    data_type: str
    string_value: str | None = None
    binary_value: bytes | None = None

    @property
    def base_type(self) -> str:
        """"String", "Number" or "Binary" — the part before any custom-type suffix."""
        return self.data_type.split(".", 1)[0]


def decode_binary(text: object, field: str, rule: str) -> bytes | None:
    """A binary attribute value as it travels (standard base64) as bytes; None stays None.
    `rule` is the message of the interface that received it."""
    if text is None:
        return None
    try:
        return base64.b64decode(str(text), validate=True)
    except ValueError:
        raise ValidationError(field, rule) from None


def md5_of_body(body: str) -> str:
    """Hex MD5 of the UTF-8 body: what SQS returns as MD5OfMessageBody."""
    return hashlib.md5(body.encode("utf-8"), usedforsecurity=False).hexdigest()


def _length_prefixed(data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + data


def md5_of_attributes(attrs: Mapping[str, MessageAttributeValue]) -> str | None:
    """Hex MD5 that SQS returns as MD5OfMessageAttributes; None when there are no attributes.

    Per attribute, in ascending name order: length-prefixed name, length-prefixed data type
    (with its custom suffix), one transport byte (1 text, 2 binary), length-prefixed value.
    Lengths are 4-byte big-endian; text is UTF-8. The same encoding gives
    MD5OfMessageSystemAttributes (AWSTraceHeader).
    """
    if not attrs:
        return None
    digest = hashlib.md5(usedforsecurity=False)
    for name in sorted(attrs):
        value = attrs[name]
        digest.update(_length_prefixed(name.encode("utf-8")))
        digest.update(_length_prefixed(value.data_type.encode("utf-8")))
        if value.base_type == "Binary":
            digest.update(bytes([_TRANSPORT_BINARY]))
            digest.update(_length_prefixed(value.binary_value or b""))
        else:
            digest.update(bytes([_TRANSPORT_STRING]))
            digest.update(_length_prefixed((value.string_value or "").encode("utf-8")))
    return digest.hexdigest()


def attributes_size(attrs: Mapping[str, MessageAttributeValue]) -> int:
    """Bytes the attributes count against MaximumMessageSize: name + data type + value."""
    total = 0
    for name, value in attrs.items():
        total += len(name.encode("utf-8")) + len(value.data_type.encode("utf-8"))
        if value.binary_value is not None:
            total += len(value.binary_value)
        if value.string_value is not None:
            total += len(value.string_value.encode("utf-8"))
    return total


def validate_attributes(
    attrs: Mapping[str, MessageAttributeValue], field: str = "MessageAttributes"
) -> None:
    """Raise ValidationError unless `attrs` obeys the SQS message attribute rules."""
    if len(attrs) > MAX_ATTRIBUTES:
        raise ValidationError(
            field, f"at most {MAX_ATTRIBUTES} attributes are allowed, got {len(attrs)}"
        )
    for name, value in attrs.items():
        _validate_name(name, field)
        where = f"{field}.{name}"
        _validate_data_type(value.data_type, where)
        _validate_value(value, where)


def _validate_name(name: str, field: str) -> None:
    if not name:
        raise ValidationError(field, "attribute names must not be empty")
    where = f"{field}.{name}"
    if len(name) > MAX_NAME_LENGTH:
        raise ValidationError(where, f"attribute names are at most {MAX_NAME_LENGTH} characters")
    if not _NAME_CHARS.match(name):
        raise ValidationError(
            where, "attribute names may contain only A-Z, a-z, 0-9, '_', '-' and '.'"
        )
    if name.lower().startswith(_RESERVED_PREFIXES):
        raise ValidationError(
            where, "attribute names must not start with the reserved prefixes 'AWS.' or 'Amazon.'"
        )
    if name.startswith(".") or name.endswith("."):
        raise ValidationError(where, "attribute names must not start or end with '.'")
    if ".." in name:
        raise ValidationError(where, "attribute names must not contain consecutive periods")


def _validate_data_type(data_type: str, where: str) -> None:
    if len(data_type) > MAX_DATA_TYPE_LENGTH:
        raise ValidationError(
            where, f"DataType is at most {MAX_DATA_TYPE_LENGTH} characters"
        )
    base, dot, suffix = data_type.partition(".")
    if base not in _BASE_TYPES or (dot and not suffix):
        raise ValidationError(
            where,
            f"DataType {data_type!r} is invalid: it must be String, Number or Binary,"
            " optionally followed by '.' and a custom type label",
        )
    if _INVALID_CHARS.search(suffix):
        raise ValidationError(where, "DataType contains characters SQS does not allow")


def _validate_value(value: MessageAttributeValue, where: str) -> None:
    base = value.base_type
    if base == "Binary":
        if value.string_value is not None:
            raise ValidationError(where, "a Binary attribute takes BinaryValue, not StringValue")
        if not value.binary_value:
            raise ValidationError(where, "a Binary attribute needs a non-empty BinaryValue")
        return
    if value.binary_value is not None:
        raise ValidationError(where, f"a {base} attribute takes StringValue, not BinaryValue")
    text = value.string_value
    if not text:
        raise ValidationError(where, f"a {base} attribute needs a non-empty StringValue")
    if _INVALID_CHARS.search(text):
        raise ValidationError(
            where, "StringValue contains characters outside the XML 1.0 set SQS allows"
        )
    if base == "Number":
        _validate_number(text, where)


def _validate_number(text: str, where: str) -> None:
    if not _NUMBER_RE.match(text):
        raise ValidationError(where, f"a Number attribute needs a decimal number, got {text!r}")
    try:
        number = Decimal(text)
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only valid literals
        raise ValidationError(where, f"{text!r} is not a number") from exc
    digits = "".join(map(str, number.as_tuple().digits)).strip("0")
    if len(digits) > MAX_NUMBER_DIGITS:
        raise ValidationError(
            where, f"a Number has at most {MAX_NUMBER_DIGITS} significant digits"
        )
    # copy_abs is exact; abs() would round to the context precision (28 digits).
    magnitude = number.copy_abs()
    if magnitude and not _NUMBER_MIN <= magnitude <= _NUMBER_MAX:
        raise ValidationError(where, "a Number must lie between 10^-128 and 10^+126 in magnitude")
