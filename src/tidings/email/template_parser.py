r"""Parse the Handlebars subset SES templates use into an immutable node tree.

Everything that can be checked without data is checked here, so a template that
compiles can only fail at render time for a missing attribute: block nesting,
`{{else}}` placement, helper names, path syntax, `../` above the root and `@index`
outside `{{#each}}` all raise `TemplateSyntaxError` with the line and column of the tag.

Supported: `{{path}}`, `{{{path}}}`/`{{& path}}`, `#if`/`#unless`/`#each`/`#with` with
`{{else}}` and `{{else if …}}` chains, `@index @key @first @last @root`, `../`, `this`/`.`,
`[odd key]` segments, comments, `~` whitespace control and `\{{` escapes. Helpers with
arguments, partials, inline partials, block params and literals are rejected, not ignored.

Like Handlebars 4, only `each` and `with` push a context, so `../` skips `if`/`unless`;
the `{{else}}` branch of `each`/`with` runs in the outer context. Tags alone on a line
("standalone" blocks, else and comments) drop that line from the output, as Handlebars
does, so `{{#each}}` lines in a text part leave no blank lines behind.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tidings.errors import ValidationError

BLOCK_HELPERS = frozenset({"if", "unless", "each", "with"})
# Deep nesting would turn into deep recursion at render time.
MAX_NESTING = 100

_DATA_NAMES = frozenset({"index", "key", "first", "last"})
_LITERALS = frozenset({"true", "false", "null", "undefined"})
# Handlebars ID: anything but whitespace and these punctuation characters.
_BAD_ID_CHAR = re.compile(r"""[\s!"#%&'()*+,./;<=>@\[\\\]^`{|}~]""")
_TRIPLE_END = re.compile(r"\}(~?)\}\}")
_COMMENT_END = re.compile(r"--(~?)\}\}")
_BLANK = " \t\r"


class TemplateSyntaxError(ValidationError):
    """The template is not valid Handlebars, or uses a feature SES templates lack."""

    def __init__(self, field: str, line: int, column: int, problem: str) -> None:
        self.line = line
        self.column = column
        self.problem = problem
        super().__init__(field, f"line {line}, column {column}: {problem}")


Segment = tuple[str, int | None]  # (key, index when the key is all ASCII digits)


@dataclass(frozen=True, slots=True)
class PathExpr:
    """A data lookup. kind: "context" (depth = number of `../`), "root" or "data" (@index…)."""

    source: str
    kind: str
    depth: int
    segments: tuple[Segment, ...]
    data_name: str = ""

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(key for key, _ in self.segments)


@dataclass(frozen=True, slots=True)
class Text:
    text: str


@dataclass(frozen=True, slots=True)
class Var:
    path: PathExpr
    raw: bool


@dataclass(frozen=True, slots=True)
class Block:
    helper: str
    path: PathExpr
    body: tuple[Node, ...]
    inverse: tuple[Node, ...]


Node = Text | Var | Block


@dataclass(slots=True)
class _Tok:
    kind: str  # text, var, raw, open, close, else, comment
    offset: int
    body: str
    strip_left: bool = False
    strip_right: bool = False


@dataclass(slots=True)
class _Frame:
    helper: str
    path: PathExpr
    offset: int
    ctx_depth: int  # contexts pushed outside this block
    each_depth: int
    chained: bool  # opened by `{{else if …}}`: closed by the enclosing block's close tag
    body: list[Node] = field(default_factory=list)
    inverse: list[Node] | None = None


def position(source: str, offset: int) -> tuple[int, int]:
    """1-based (line, column) of an offset."""
    line = source.count("\n", 0, offset) + 1
    return line, offset - (source.rfind("\n", 0, offset) + 1) + 1


def parse(source: str, field_name: str) -> tuple[tuple[Node, ...], frozenset[str]]:
    """The node tree and the top-level data names the template reads."""
    return _Parser(source, field_name).run()


class _Parser:
    def __init__(self, source: str, field_name: str) -> None:
        self.source = source
        self.field = field_name
        self.stack: list[_Frame] = []
        self.root: list[Node] = []
        self.names: set[str] = set()

    def fail(self, offset: int, problem: str) -> TemplateSyntaxError:
        line, column = position(self.source, offset)
        return TemplateSyntaxError(self.field, line, column, problem)

    def where(self, offset: int) -> str:
        line, column = position(self.source, offset)
        return f"line {line}, column {column}"

    # -- tokens ---------------------------------------------------------------

    def tokenize(self) -> list[_Tok]:
        src, toks, pos, text_start = self.source, [], 0, 0
        while True:
            start = src.find("{{", pos)
            if start < 0:
                toks.append(_Tok("text", text_start, src[text_start:]))
                break
            before = src[max(start - 2, text_start) : start]
            if before == "\\\\":
                # `\\{{x}}`: one literal backslash, then a real tag.
                toks.append(_Tok("text", text_start, src[text_start : start - 1]))
            elif before.endswith("\\"):
                # `\{{` is a literal `{{`: keep the text, drop the backslash.
                toks.append(_Tok("text", text_start, src[text_start : start - 1]))
                text_start, pos = start, start + 2
                continue
            else:
                toks.append(_Tok("text", text_start, src[text_start:start]))
            tok, pos = self.read_tag(start)
            toks.append(tok)
            text_start = pos
        return [t for t in toks if t.kind != "text" or t.body]

    def read_tag(self, start: int) -> tuple[_Tok, int]:
        src, i = self.source, start + 2
        strip_left = src.startswith("~", i)
        i += strip_left
        if src.startswith("{", i):
            m = _TRIPLE_END.search(src, i + 1)
            if m is None:
                raise self.fail(start, "unclosed '{{{': no matching '}}}'")
            tok = _Tok("raw", start, src[i + 1 : m.start()], strip_left, bool(m.group(1)))
            return tok, m.end()
        if src.startswith("!--", i):
            m = _COMMENT_END.search(src, i + 1)
            if m is None:
                raise self.fail(start, "unclosed comment '{{!--': no matching '--}}'")
            return _Tok("comment", start, "", strip_left, bool(m.group(1))), m.end()
        end = src.find("}}", i)
        if end < 0:
            raise self.fail(start, "unclosed '{{': no matching '}}'")
        strip_right = end > i and src[end - 1] == "~"
        inner = src[i : end - strip_right]
        if inner.startswith("!"):
            return _Tok("comment", start, "", strip_left, strip_right), end + 2
        body = inner.strip()
        kind = "var"
        if body[:1] in ("#", "/", "&"):
            kind = {"#": "open", "/": "close", "&": "raw"}[body[0]]
            body = body[1:].strip()
        elif body == "else" or body.startswith(("else ", "else\t", "else\n")):
            kind, body = "else", body[4:].strip()
        elif body[:1] in ("^", ">", "*") or body.startswith("#>"):
            raise self.fail(start, f"'{{{{{body[:1]}…}}}}' is not supported in SES templates")
        if not body and kind != "else":
            raise self.fail(start, f"empty expression '{src[start : end + 2]}'")
        return _Tok(kind, start, body, strip_left, strip_right), end + 2

    @staticmethod
    def whitespace(toks: list[_Tok]) -> None:
        cut_head = [0] * len(toks)
        cut_tail = [len(t.body) for t in toks]
        last = len(toks) - 1
        for i, tok in enumerate(toks):
            if tok.kind not in ("open", "close", "else", "comment"):
                continue
            prev = toks[i - 1] if i > 0 else None
            nxt = toks[i + 1] if i < last else None
            if prev is not None:
                if prev.kind != "text":
                    continue
                nl = prev.body.rfind("\n")
                if (nl < 0 and i - 1 != 0) or prev.body[nl + 1 :].strip(_BLANK):
                    continue
            if nxt is not None:
                if nxt.kind != "text":
                    continue
                nl = nxt.body.find("\n")
                head = nxt.body if nl < 0 else nxt.body[:nl]
                if (nl < 0 and i + 1 != last) or head.strip(_BLANK):
                    continue
            if prev is not None:
                cut_tail[i - 1] = prev.body.rfind("\n") + 1
            if nxt is not None:
                nl = nxt.body.find("\n")
                cut_head[i + 1] = nl + 1 if nl >= 0 else len(nxt.body)
        for i, tok in enumerate(toks):
            if tok.kind == "text":
                tok.body = tok.body[cut_head[i] : max(cut_head[i], cut_tail[i])]
        for i, tok in enumerate(toks):
            if tok.strip_left and i > 0 and toks[i - 1].kind == "text":
                toks[i - 1].body = toks[i - 1].body.rstrip()
            if tok.strip_right and i < last and toks[i + 1].kind == "text":
                toks[i + 1].body = toks[i + 1].body.lstrip()

    # -- tree -----------------------------------------------------------------

    def run(self) -> tuple[tuple[Node, ...], frozenset[str]]:
        toks = self.tokenize()
        self.whitespace(toks)
        for tok in toks:
            getattr(self, "on_" + tok.kind)(tok)
        if self.stack:
            frame = next(f for f in reversed(self.stack) if not f.chained)
            raise self.fail(
                len(self.source),
                f"unclosed {{{{#{frame.helper}}}}} opened at {self.where(frame.offset)}",
            )
        return _merge(self.root), frozenset(self.names)

    def target(self) -> list[Node]:
        if not self.stack:
            return self.root
        top = self.stack[-1]
        return top.body if top.inverse is None else top.inverse

    def depths(self) -> tuple[int, int]:
        """(contexts pushed, enclosing `each` blocks) at the current point."""
        if not self.stack:
            return 0, 0
        top = self.stack[-1]
        if top.inverse is not None:
            return top.ctx_depth, top.each_depth
        pushes = top.helper in ("each", "with")
        return top.ctx_depth + pushes, top.each_depth + (top.helper == "each")

    def on_text(self, tok: _Tok) -> None:
        if tok.body:
            self.target().append(Text(tok.body))

    def on_comment(self, tok: _Tok) -> None:
        pass

    def on_var(self, tok: _Tok, raw: bool = False) -> None:
        if len(_split_args(tok.body)) > 1:
            raise self.fail(tok.offset, f"helpers are not supported: '{{{{{tok.body}}}}}'")
        self.target().append(Var(self.path(tok.body, tok.offset), raw))

    def on_raw(self, tok: _Tok) -> None:
        self.on_var(tok, raw=True)

    def on_open(self, tok: _Tok, chained: bool = False) -> None:
        args = _split_args(tok.body)
        helper = args[0]
        if helper not in BLOCK_HELPERS:
            raise self.fail(tok.offset, f"unknown block helper '{{{{#{helper}}}}}'")
        if len(args) != 2:
            raise self.fail(tok.offset, f"'{{{{#{helper}}}}}' takes exactly one argument")
        if len(self.stack) >= MAX_NESTING:
            raise self.fail(tok.offset, f"blocks are nested deeper than {MAX_NESTING}")
        path = self.path(args[1], tok.offset)
        ctx_depth, each_depth = self.depths()
        self.stack.append(_Frame(helper, path, tok.offset, ctx_depth, each_depth, chained))

    def on_else(self, tok: _Tok) -> None:
        if not self.stack:
            raise self.fail(tok.offset, "'{{else}}' outside a block")
        top = self.stack[-1]
        if top.inverse is not None:
            raise self.fail(
                tok.offset,
                f"second '{{{{else}}}}' in '{{{{#{top.helper}}}}}' opened at "
                f"{self.where(top.offset)}",
            )
        top.inverse = []
        if tok.body:
            # `{{else if x}}`: a nested block, closed by the enclosing block's close tag.
            self.on_open(tok, chained=True)

    def on_close(self, tok: _Tok) -> None:
        name = tok.body
        while self.stack and self.stack[-1].chained:
            self.finish()
        if not self.stack:
            raise self.fail(tok.offset, f"'{{{{/{name}}}}}' has no matching opening block")
        top = self.stack[-1]
        if name != top.helper:
            raise self.fail(
                tok.offset,
                f"'{{{{/{name}}}}}' does not match '{{{{#{top.helper}}}}}' opened at "
                f"{self.where(top.offset)}",
            )
        self.finish()

    def finish(self) -> None:
        frame = self.stack.pop()
        block = Block(frame.helper, frame.path, _merge(frame.body), _merge(frame.inverse or []))
        self.target().append(block)

    def path(self, text: str, offset: int) -> PathExpr:
        try:
            expr = _parse_path(text)
        except ValueError as exc:
            raise self.fail(offset, str(exc)) from None
        ctx_depth, each_depth = self.depths()
        if expr.kind == "data" and each_depth == 0:
            raise self.fail(offset, f"'@{expr.data_name}' is only defined inside '{{{{#each}}}}'")
        if expr.kind == "context" and expr.depth > ctx_depth:
            raise self.fail(offset, f"invalid path '{text}': '../' goes above the root data")
        reads_root = expr.kind == "root" or (expr.kind == "context" and expr.depth == ctx_depth)
        if reads_root and expr.segments:
            self.names.add(expr.segments[0][0])
        return expr


def _merge(nodes: list[Node]) -> tuple[Node, ...]:
    """Join adjacent text nodes (a comment between two texts leaves two)."""
    out: list[Node] = []
    for node in nodes:
        if isinstance(node, Text) and out and isinstance(out[-1], Text):
            out[-1] = Text(out[-1].text + node.text)
        else:
            out.append(node)
    return tuple(out)


def _split_args(body: str) -> list[str]:
    """Whitespace-separated words; a `[...]` segment may contain spaces."""
    args: list[str] = []
    current, bracket = "", False
    for ch in body:
        if bracket:
            current += ch
            bracket = ch != "]"
        elif ch.isspace():
            if current:
                args.append(current)
            current = ""
        else:
            current += ch
            bracket = ch == "["
    if current:
        args.append(current)
    return args


def _parse_path(text: str) -> PathExpr:
    """Parse `a.b`, `a/b`, `../a`, `this.a`, `./a`, `.`, `[odd key]`, `@index`, `@root.a`."""
    if text.startswith("@"):
        name, _, rest = text[1:].partition(".")
        if name == "root":
            segs = _segments(rest, text) if rest else ()
            return PathExpr(text, "root", 0, segs)
        if name in _DATA_NAMES and not rest:
            return PathExpr(text, "data", 0, (), name)
        raise ValueError(f"unknown data variable '{text}'")
    if text in _LITERALS:
        raise ValueError(f"literal '{text}' is not supported; use a data attribute")
    depth, i = 0, 0
    while text.startswith("../", i):
        depth, i = depth + 1, i + 3
    rest = text[i:]
    if rest in ("..", "") and (depth or rest):
        # `..` or `../..`: the parent context itself.
        return PathExpr(text, "context", depth + (rest == ".."), ())
    if rest in ("this", "."):
        return PathExpr(text, "context", depth, ())
    for prefix in ("this.", "this/", "./"):
        if rest.startswith(prefix):
            rest = rest[len(prefix) :]
            break
    return PathExpr(text, "context", depth, _segments(rest, text))


def _segments(rest: str, text: str) -> tuple[Segment, ...]:
    segs: list[Segment] = []
    i, n = 0, len(rest)
    while True:
        if rest.startswith("[", i):
            end = rest.find("]", i)
            if end < 0:
                raise ValueError(f"invalid path '{text}': unclosed '['")
            key, i = rest[i + 1 : end], end + 1
        else:
            end = i
            while end < n and rest[end] not in "./":
                end += 1
            key, i = rest[i:end], end
            if not key or _BAD_ID_CHAR.search(key) or key == "this":
                raise ValueError(f"invalid path '{text}'")
        segs.append((key, int(key) if key.isascii() and key.isdigit() else None))
        if i == n:
            return tuple(segs)
        if rest[i] not in "./" or i + 1 == n:
            raise ValueError(f"invalid path '{text}'")
        i += 1
