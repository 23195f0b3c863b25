"""SQS digests and attribute rules.

botocore has no SQS MD5 check (the Java/.NET/Go SDKs do), so the attribute digest is
checked against published vectors produced by independent implementations that are
themselves validated against live SQS, and against a from-the-spec re-encoding.
"""

from __future__ import annotations

import hashlib
import struct

import pytest

from tidings.errors import ValidationError
from tidings.model.digests import (
    MessageAttributeValue,
    attributes_size,
    md5_of_attributes,
    md5_of_body,
    validate_attributes,
)

M = MessageAttributeValue

_NUMBER_FLOAT = M("Number.float", "4563442423554324324264524243.32543234")
_BINARY = M("Binary", binary_value=b"Hello binary world!")
_STRING = M("String", "attribValue 1")


def test_md5_of_body_is_hex_md5_of_utf8() -> None:
    assert md5_of_body("") == "d41d8cd98f00b204e9800998ecf8427e"
    assert md5_of_body("héllo ✓") == hashlib.md5("héllo ✓".encode()).hexdigest()


@pytest.mark.parametrize(
    ("attrs", "expected"),
    [
        # npm aws-md5-of-message-attributes README vectors
        ({"attribName1": _STRING}, "19e27d4e946b072f3f58da80d94fd778"),
        ({"customNumberTypeAttrib": _NUMBER_FLOAT}, "9fe1b90bbd9965bdf77bac517c7d2495"),
        ({"binaryAttribute": _BINARY}, "31a92b15d92f8db860eda32aceb656c3"),
        (
            {
                "attribName1": _STRING,
                "customNumberTypeAttrib": _NUMBER_FLOAT,
                "binaryAttribute": _BINARY,
            },
            "c932db14a896c663f83c260297d594ff",
        ),
        # sqslite (aws-sdk-go-v2 based) test vector
        (
            {"ordinal": M("Number", "1"), "category": M("String", "test")},
            "d21ae90c49061e927f57df5f5d72be1f",
        ),
        # LocalStack test vector
        ({"timestamp": M("Number", "1493147359900")}, "235c5c510d26fb653d073faed50ae77c"),
    ],
)
def test_md5_of_attributes_matches_published_vectors(
    attrs: dict[str, MessageAttributeValue], expected: str
) -> None:
    assert md5_of_attributes(attrs) == expected


def _spec_digest(attrs: dict[str, MessageAttributeValue]) -> str:
    """The SQS Developer Guide algorithm, written independently with struct."""
    out = b""
    for name in sorted(attrs):
        v = attrs[name]
        for part in (name.encode(), v.data_type.encode()):
            out += struct.pack(">I", len(part)) + part
        if v.data_type.startswith("Binary"):
            raw = v.binary_value or b""
            out += b"\x02" + struct.pack(">I", len(raw)) + raw
        else:
            raw = (v.string_value or "").encode()
            out += b"\x01" + struct.pack(">I", len(raw)) + raw
    return hashlib.md5(out).hexdigest()


def test_md5_of_attributes_follows_spec_for_unicode_and_custom_binary() -> None:
    attrs = {
        "z": M("String.utf8", "ünïcødé ✓ 𝄞"),
        "a": M("Binary.gif", binary_value=bytes(range(256))),
        "M": M("Number", "-1.5e10"),
    }
    assert md5_of_attributes(attrs) == _spec_digest(attrs)


def test_md5_of_attributes_is_order_independent_and_none_when_empty() -> None:
    a = {"x": M("String", "1"), "y": M("Number", "2")}
    b = {"y": M("Number", "2"), "x": M("String", "1")}
    assert md5_of_attributes(a) == md5_of_attributes(b)
    assert md5_of_attributes({}) is None


def test_digest_depends_on_transport_type() -> None:
    as_text = {"k": M("String", "abc")}
    as_binary = {"k": M("Binary", binary_value=b"abc")}
    assert md5_of_attributes(as_text) != md5_of_attributes(as_binary)


def test_attributes_size_counts_name_type_and_value_bytes() -> None:
    attrs = {"név": M("String", "✓"), "b": M("Binary", binary_value=b"\x00\x01")}
    assert attributes_size(attrs) == (4 + 6 + 3) + (1 + 6 + 2)
    assert attributes_size({}) == 0


def test_valid_attributes_pass() -> None:
    validate_attributes(
        {
            "a.b-c_D9": M("String", "x"),
            "n": M("Number", "-12.5e3"),
            "n2": M("Number.int", "0"),
            "bin": M("Binary.png", binary_value=b"\x89PNG"),
            "awsx": M("String", "prefix without the dot is fine"),
        }
    )
    validate_attributes({f"k{i}": M("String", "v") for i in range(10)})
    validate_attributes({"n" * 256: M("String", "v")})


def _rule(attrs: dict[str, MessageAttributeValue]) -> ValidationError:
    with pytest.raises(ValidationError) as info:
        validate_attributes(attrs)
    return info.value


def test_too_many_attributes() -> None:
    err = _rule({f"k{i}": M("String", "v") for i in range(11)})
    assert err.field == "MessageAttributes"
    assert "at most 10" in err.rule


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("", "empty"),
        ("n" * 257, "256"),
        ("has space", "may contain only"),
        ("ünï", "may contain only"),
        ("AWS.x", "reserved"),
        ("aws.x", "reserved"),
        ("amazon.x", "reserved"),
        ("AMAZON.X", "reserved"),
        (".x", "start or end"),
        ("x.", "start or end"),
        ("a..b", "consecutive"),
    ],
)
def test_bad_names(name: str, words: str) -> None:
    err = _rule({name: M("String", "v")})
    assert words in err.rule
    assert err.field.startswith("MessageAttributes")


@pytest.mark.parametrize(
    "data_type",
    ["", "string", "Str", "StringX", "String.", "Binary" + "." + "x" * 250, "Float"],
)
def test_bad_data_types(data_type: str) -> None:
    err = _rule({"k": M(data_type, "v", b"v" if data_type.startswith("Binary") else None)})
    assert err.field == "MessageAttributes.k"
    assert "DataType" in err.rule


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (M("String"), "non-empty StringValue"),
        (M("String", ""), "non-empty StringValue"),
        (M("Number"), "non-empty StringValue"),
        (M("Binary"), "non-empty BinaryValue"),
        (M("Binary", binary_value=b""), "non-empty BinaryValue"),
        (M("Binary", "text", b"x"), "not StringValue"),
        (M("String", "x", b"x"), "not BinaryValue"),
        (M("String", "bad \x00 char"), "XML"),
    ],
)
def test_missing_or_mismatched_values(value: MessageAttributeValue, words: str) -> None:
    assert words in _rule({"k": value}).rule


@pytest.mark.parametrize(
    "number",
    ["abc", "NaN", "Infinity", "1_000", " 1", "1e", "--1", "0x10", "1" * 39, "1e127", "1e-129"],
)
def test_bad_numbers(number: str) -> None:
    assert "Number" in _rule({"k": M("Number", number)}).rule


@pytest.mark.parametrize(
    "number",
    ["0", "-0", "+7", ".5", "5.", "1" * 38, "1" + "0" * 50, "1e126", "1e-128", "-1e126",
     "0.000", "12345678901234567890123456789012345678e-10"],
)
def test_good_numbers(number: str) -> None:
    validate_attributes({"k": M("Number.x", number)})
