"""Streaming readers of recipient lists: CSV (with a header row) or JSON Lines.

Both read one row at a time from a file or stdin, so memory stays flat however long the
list is. A row comes out as (row number, id, email, zone, instant text, template data) or
as (row number, id, error): a bad row is reported, never fatal. Row numbers count data
rows from 1 (a CSV header is not a row).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import IO, Any

from tidings.errors import ValidationError

Row = tuple[int, str, str, str, str | None, dict[str, Any]]
BadRow = tuple[int, str, str]


@dataclass(frozen=True)
class Columns:
    id: str = "id"
    email: str = "email"
    timezone: str = "timezone"
    at: str | None = None  # the instant column, when timing comes from the rows


class CountingReader(io.RawIOBase):
    """A binary stream that counts the bytes read through it (for progress and ETA)."""

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw = raw
        self.bytes_read = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self.raw.read(len(buffer))
        n = len(data)
        buffer[:n] = data
        self.bytes_read += n
        return n


def text_stream(raw: IO[bytes]) -> tuple[IO[str], CountingReader]:
    counter = CountingReader(raw)
    buffered = io.BufferedReader(counter, buffer_size=1 << 16)
    return io.TextIOWrapper(buffered, encoding="utf-8-sig", newline=""), counter


def read_csv(stream: Iterable[str], cols: Columns) -> Iterator[Row | BadRow]:
    reader = csv.reader(stream)
    header = next(reader, None)
    if header is None:
        return
    header = [h.strip() for h in header]
    index = {name: i for i, name in enumerate(header)}
    wanted = [cols.id, cols.email, cols.timezone] + ([cols.at] if cols.at else [])
    for name in wanted:
        if name not in index:
            raise ValidationError("Columns", f"the header has no column {name!r} "
                                  f"(columns: {', '.join(header)})")
    i_id, i_email, i_tz = index[cols.id], index[cols.email], index[cols.timezone]
    i_at = index[cols.at] if cols.at else -1
    skip = {i_id, i_email, i_tz, i_at}
    extras = [(name, i) for i, name in enumerate(header) if i not in skip]
    width = len(header)
    n = 0
    for fields in reader:
        if not fields:
            continue  # blank line
        n += 1
        if len(fields) != width:
            rid = fields[i_id] if i_id < len(fields) else ""
            missing = [h for h in header[len(fields):]]
            reason = (f"missing column {missing[0]!r}" if missing
                      else f"{len(fields)} fields where the header has {width}")
            yield n, rid, reason
            continue
        yield (n, fields[i_id], fields[i_email], fields[i_tz],
               fields[i_at] if i_at >= 0 else None, {k: fields[i] for k, i in extras})


def read_jsonl(stream: Iterable[str], cols: Columns) -> Iterator[Row | BadRow]:
    skip = {cols.id, cols.email, cols.timezone, cols.at}
    n = 0
    for line in stream:
        if not line.strip():
            continue
        n += 1
        try:
            doc = json.loads(line)
        except ValueError as exc:
            yield n, "", f"not valid JSON ({exc})"
            continue
        if not isinstance(doc, dict):
            yield n, "", "a row must be a JSON object"
            continue
        rid = doc.get(cols.id)
        rid_text = "" if rid is None else str(rid)
        missing = next((c for c in (cols.id, cols.email, cols.timezone, cols.at)
                        if c is not None and c not in doc), None)
        if missing is not None:
            yield n, rid_text, f"missing column {missing!r}"
            continue
        email, zone = doc[cols.email], doc[cols.timezone]
        at = doc[cols.at] if cols.at else None
        if not isinstance(email, str) or not isinstance(zone, str) or (
                at is not None and not isinstance(at, str)):
            yield n, rid_text, "email, time zone and instant must be strings"
            continue
        yield n, rid_text, email, zone, at, {k: v for k, v in doc.items() if k not in skip}


def read_rows(stream: Iterable[str], fmt: str, cols: Columns) -> Iterator[Row | BadRow]:
    if fmt == "csv":
        return read_csv(stream, cols)
    if fmt == "jsonl":
        return read_jsonl(stream, cols)
    raise ValidationError("Format", "must be csv or jsonl")
