"""Render compiled template trees: each node becomes a closure, built once per Template.

Safety: a template can only look up keys in mappings and digit indexes in lists/tuples;
there is no attribute access and no helper that calls code, and rendered values are
appended to the output, never parsed again, so `{{` inside data is just text.

Rendering rules (SES reports a rendering failure rather than sending a blank):
- `{{path}}` whose path is absent from the data raises `RenderingError` naming the full path
  from the root ("items.2.name" inside `{{#each items}}`); a present `null` renders as "".
- `#if`/`#unless`/`#each`/`#with` treat an absent path like `null`: falsy, no error.
- Values render like handlebars.js: true → "true", 1.0 → "1", 2.5 → "2.5", a list joins its
  items with ",", an object renders "[object Object]"; other Python types are an error.
- With `escape_html`, `& < > " ' \\` =` are escaped as Handlebars does; `{{{x}}}` and
  `{{& x}}` are never escaped.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any, cast

from tidings.email.template_parser import Block, Node, PathExpr, Segment, Text, parse
from tidings.errors import TidingsError


class RenderingError(TidingsError):
    """The template could not be rendered with the given data."""

    def __init__(self, path: str, message: str | None = None) -> None:
        self.path = path
        super().__init__(message or f"Attribute '{path}' is not present in the rendering data.")


class _Missing:
    __slots__ = ()


_MISSING = _Missing()

_DATA_SLOT = {"index": 0, "key": 1, "first": 2, "last": 3}


_ESCAPES = (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ('"', "&quot;"), ("'", "&#x27;"),
            ("`", "&#x60;"), ("=", "&#x3D;"))
_NEEDS_ESCAPE = re.compile("[&<>\"'`=]").search


def _escape(text: str) -> str:
    # Handlebars' escape set. One search for the usual clean value; chained replaces beat
    # str.translate and re.sub on the short values templates get.
    if _NEEDS_ESCAPE(text) is None:
        return text
    for char, entity in _ESCAPES:  # "&" first, so no entity is escaped twice
        if char in text:
            text = text.replace(char, entity)
    return text


class _Scope:
    """One context: the root data, or what an `each` iteration or a `with` pushed.

    `origin`, `base` and `step` say where the value came from, so an error message can name
    the full path; they are only followed when an error is raised.
    """

    __slots__ = ("value", "parent", "root", "data", "origin", "base", "step")

    def __init__(
        self,
        value: object,
        parent: _Scope | None,
        data: tuple[object, ...] | None,
        origin: _Scope | None,
        base: tuple[str, ...],
        step: object,
    ) -> None:
        self.value = value
        # The root is its own parent; the parser rejects `../` that would reach it.
        self.parent: _Scope = self if parent is None else parent
        self.root: _Scope = self if parent is None else parent.root
        self.data = data  # (@index, @key, @first, @last) of the nearest each
        self.origin = origin
        self.base = base
        self.step = step

    def trail(self) -> list[str]:
        parts: list[str] = []
        scope: _Scope | None = self
        while scope is not None and scope.origin is not None:
            parts[:0] = [*scope.base, *([str(scope.step)] if scope.step is not None else [])]
            scope = scope.origin
        return parts


Emit = Callable[[_Scope, list[str]], None]
Getter = Callable[[_Scope], object]


def _step(value: object, key: str, index: int | None) -> object:
    if isinstance(value, Mapping):
        return value.get(key, _MISSING)
    if index is not None and isinstance(value, list | tuple):
        return value[index] if index < len(value) else _MISSING
    return _MISSING


def _walk(value: object, segments: tuple[tuple[str, int | None], ...]) -> object:
    for key, index in segments:
        value = value.get(key, _MISSING) if type(value) is dict else _step(value, key, index)
        if value is _MISSING:
            break
    return value


def _source(scope: _Scope, path: PathExpr) -> _Scope:
    """The scope a path is looked up in (the parser rejects `../` above the root)."""
    if path.kind == "root":
        return scope.root
    for _ in range(path.depth):
        scope = scope.parent
    return scope


def _getter(path: PathExpr) -> Getter:
    segments = path.segments
    if path.kind == "data":
        slot = _DATA_SLOT[path.data_name]
        return lambda scope: scope.data[slot] if scope.data is not None else _MISSING
    if path.kind == "root":
        return lambda scope: _walk(scope.root.value, segments)
    if path.depth == 1:
        return lambda scope: _walk(scope.parent.value, segments)
    if path.depth > 1:
        return lambda scope: _walk(_source(scope, path).value, segments)
    if len(segments) != 1:
        return lambda scope: _walk(scope.value, segments)
    ((key, index),) = segments

    def get_one(scope: _Scope) -> object:
        value = scope.value
        return value.get(key, _MISSING) if type(value) is dict else _step(value, key, index)

    return get_one


def _missing(scope: _Scope, path: PathExpr) -> RenderingError:
    return RenderingError(".".join([*_source(scope, path).trail(), *path.keys]))


def _float_text(value: float) -> str:
    text = repr(value)  # only called for exact floats: faster than float.__repr__
    if text.endswith(".0"):
        return text[:-2] if value else "0"  # JavaScript prints -0 as "0"
    if "e" not in text and "n" not in text:
        return text
    # JavaScript number formatting: NaN, Infinity, no exponent in [1e-7, 1e21), "1e-7".
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if 1e-7 <= abs(value) < 1e21:
        return int.__repr__(int(value)) if value.is_integer() else format(Decimal(text), "f")
    mantissa, exponent = text.split("e")
    return f"{mantissa}e{exponent[0]}{int(exponent[1:])}"


_TEXT_OF_TYPE: dict[type, Callable[[Any], str]] = {
    str: str.__str__,
    int: repr,
    float: _float_text,
    bool: lambda value: "true" if value else "false",
    type(None): lambda value: "",
}


def to_text(value: object) -> str:
    """A value as handlebars.js prints it (JSON data: str, int, float, bool, None, list, dict)."""
    convert = _TEXT_OF_TYPE.get(type(value))
    if convert is not None:
        return convert(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        return _float_text(float(value))
    if isinstance(value, list | tuple):
        return ",".join(map(to_text, value))
    if isinstance(value, Mapping):
        return "[object Object]"
    raise TypeError(f"unsupported template value of type {type(value).__name__}")


def truthy(value: object) -> bool:
    """Handlebars `#if`: false, null, absent, "", 0, NaN and [] are false; {} is true."""
    if value is None or value is _MISSING:
        return False
    if isinstance(value, str | bool | int | list | tuple):
        return bool(value)
    if isinstance(value, float):
        return value == value and value != 0.0
    return True


def _empty_context(value: object) -> bool:
    """Handlebars `#with`: 0 is a context, other falsy values are not."""
    if isinstance(value, int | float) and not isinstance(value, bool) and value == 0:
        return False
    return not truthy(value)


def _as_text(value: object, scope: _Scope, path: PathExpr) -> str:
    convert = _TEXT_OF_TYPE.get(type(value))
    if convert is not None:
        return convert(value)
    if value is _MISSING:
        raise _missing(scope, path)
    try:
        return to_text(value)
    except TypeError as exc:
        raise RenderingError(path.source, str(exc)) from None


def _var(path: PathExpr, escape: bool) -> Emit:
    get = _getter(path)

    def emit(scope: _Scope, out: list[str]) -> None:
        value = get(scope)
        text = value if type(value) is str else _as_text(value, scope, path)
        out.append(_escape(text) if escape else text)

    return emit


def _block(node: Block, escape: bool) -> Emit:
    get = _getter(node.path)
    body = _sequence(node.body, escape)
    inverse = _sequence(node.inverse, escape)
    base = node.path.keys

    if node.helper in ("if", "unless"):
        want = node.helper == "if"

        def emit_if(scope: _Scope, out: list[str]) -> None:
            (body if truthy(get(scope)) is want else inverse)(scope, out)

        return emit_if

    if node.helper == "with":

        def emit_with(scope: _Scope, out: list[str]) -> None:
            value = get(scope)
            if value is _MISSING or _empty_context(value):
                inverse(scope, out)
            else:
                origin = _source(scope, node.path)
                body(_Scope(value, scope, scope.data, origin, base, None), out)

        return emit_with

    def emit_each(scope: _Scope, out: list[str]) -> None:
        value = get(scope)
        if isinstance(value, Mapping):
            items: list[tuple[object, object]] = list(value.items())
        elif isinstance(value, list | tuple):
            items = list(enumerate(value))
        else:
            items = []
        if not items:
            inverse(scope, out)
            return
        origin = _source(scope, node.path)
        last = len(items) - 1
        for i, (key, item) in enumerate(items):
            data = (i, key, i == 0, i == last)
            body(_Scope(item, scope, data, origin, base, key), out)

    return emit_each


def _nothing(scope: _Scope, out: list[str]) -> None:
    pass


# `{{a.b}}` in the current context, looked up inside the sequence loop: a call per variable
# would be a third of the rendering time.
_Inline = tuple[tuple[Segment, ...], bool, PathExpr]


def _sequence(nodes: tuple[Node, ...], escape: bool) -> Emit:
    parts: list[str | _Inline | Emit] = []
    for node in nodes:
        if isinstance(node, Text):
            parts.append(node.text)
        elif isinstance(node, Block):
            parts.append(_block(node, escape))
        elif node.path.kind == "context" and node.path.depth == 0 and node.path.segments:
            parts.append((node.path.segments, escape and not node.raw, node.path))
        else:
            parts.append(_var(node.path, escape and not node.raw))
    if not parts:
        return _nothing
    if len(parts) == 1 and callable(parts[0]):
        return parts[0]
    if len(parts) == 1 and isinstance(parts[0], str):
        text = parts[0]
        return lambda scope, out: out.append(text)
    steps = tuple(parts)

    def run(scope: _Scope, out: list[str]) -> None:
        append = out.append
        for part in steps:
            if type(part) is str:
                append(part)
            elif type(part) is tuple:
                segments, escaped, path = part
                value = scope.value
                for key, index in segments:
                    if type(value) is dict:
                        value = value.get(key, _MISSING)
                    else:
                        value = _step(value, key, index)
                        if value is _MISSING:
                            break
                text = value if type(value) is str else _as_text(value, scope, path)
                append(_escape(text) if escaped else text)
            else:
                cast(Emit, part)(scope, out)

    return run


class Template:
    """One compiled template part; immutable, so one instance serves every thread."""

    __slots__ = ("_plain", "_html", "_variables", "_source")

    def __init__(self, source: str, nodes: tuple[Node, ...], variables: frozenset[str]) -> None:
        self._source = source
        self._variables = variables
        self._plain = _sequence(nodes, escape=False)
        self._html = _sequence(nodes, escape=True)

    @property
    def source(self) -> str:
        return self._source

    @property
    def variables(self) -> frozenset[str]:
        """Top-level data names the template reads, for validation and previews."""
        return self._variables

    @classmethod
    def compile(cls, source: str, field: str = "template") -> Template:
        nodes, variables = parse(source, field)
        return cls(source, nodes, variables)

    def render(self, data: Mapping[str, object], *, escape_html: bool) -> str:
        out: list[str] = []
        scope = _Scope(data, None, None, None, (), None)
        try:
            (self._html if escape_html else self._plain)(scope, out)
        except RecursionError:
            raise RenderingError("", "The rendering data is nested too deeply.") from None
        return "".join(out)
