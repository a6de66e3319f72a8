"""The shorthand for common filter rules, compiled to jq (run by the same engine as jq rules).

Most rules compare an attribute's score with a number or ask whether an attribute has spans.
The shorthand says exactly that::

    gopher_v1__keep == 0                    any span of the attribute has score == 0
    bff_duplicate_paragraph_spans           the attribute has at least one span
    max(ft_lang_id__en) < 0.5               the highest score (no spans: false)
    count(pii__email) > 3                   the number of spans
    frac(bff_duplicate_paragraph_spans) > 0.3   sum(score * (end - start)) / characters of text
    c4_v2__keep == 0 or not (gopher_v1__keep == 1 and count(pii__email) < 5)

Operators are ``== != < <= > >=``; ``and`` binds tighter than ``or``; ``not`` and parentheses
work as expected. A name is an attribute key (``"quoted"`` when it holds other characters) or
the end of one after ``__``: ``gopher_v1__keep`` finds ``exp__gopher_v1__keep``. Names are
resolved against the attribute keys found in the stream's attribute files when the spec loads,
so an unknown or ambiguous name, or a syntax error, fails at once with its column.

An attribute missing from a document counts as having no spans (no error, unlike raw jq).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass

FUNCTIONS = ("count", "max", "min", "frac")
OPERATORS = ("==", "!=", "<=", ">=", "<", ">")
KEYWORDS = ("and", "or", "not")

_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
  | (?P<number>-?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<op>==|!=|<=|>=|<|>)
  | (?P<lparen>\()
  | (?P<rparen>\))
  | (?P<quoted>"(?:[^"\\]|\\.)*")
  | (?P<name>[A-Za-z_][A-Za-z0-9_.\-]*)
    """,
    re.VERBOSE,
)


class ShorthandError(ValueError):
    """A rule that does not parse or names no known attribute; ``column`` is 1-based."""

    def __init__(self, column: int, message: str):
        super().__init__(f"at column {column}: {message}")
        self.column = column
        self.message = message


@dataclass(frozen=True)
class Token:
    kind: str
    text: str
    column: int


def tokenize(src: str) -> list[Token]:
    tokens = []
    pos = 0
    while pos < len(src):
        m = _TOKEN.match(src, pos)
        if m is None:
            raise ShorthandError(pos + 1, f"unexpected character {src[pos]!r}")
        kind = m.lastgroup or ""
        text = m.group()
        if kind == "name" and text in KEYWORDS:
            kind = text
        if kind != "space":
            tokens.append(Token(kind, text, pos + 1))
        pos = m.end()
    tokens.append(Token("end", "", len(src) + 1))
    return tokens


# The tree: nodes are tuples, compiled straight to jq.
@dataclass(frozen=True)
class Name:
    name: str
    column: int


@dataclass(frozen=True)
class Has:
    attr: Name


@dataclass(frozen=True)
class Compare:
    func: str | None  # None: any span's score
    attr: Name
    op: str
    number: str


@dataclass(frozen=True)
class BoolOp:
    op: str  # and / or
    left: Node
    right: Node


@dataclass(frozen=True)
class Not:
    inner: Node


Node = Has | Compare | BoolOp | Not


class _Parser:
    def __init__(self, src: str):
        self.src = src
        self.tokens = tokenize(src)
        self.i = 0

    @property
    def tok(self) -> Token:
        return self.tokens[self.i]

    def take(self) -> Token:
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    def expect(self, kind: str, what: str) -> Token:
        if self.tok.kind != kind:
            raise ShorthandError(self.tok.column, f"expected {what}, found {self._found()}")
        return self.take()

    def _found(self) -> str:
        return "the end of the rule" if self.tok.kind == "end" else repr(self.tok.text)

    def parse(self) -> Node:
        if self.tok.kind == "end":
            raise ShorthandError(1, "empty rule")
        node = self.or_()
        if self.tok.kind != "end":
            raise ShorthandError(self.tok.column, f"unexpected {self._found()} (expected 'and', 'or' or the end)")
        return node

    def or_(self) -> Node:
        node = self.and_()
        while self.tok.kind == "or":
            self.take()
            node = BoolOp("or", node, self.and_())
        return node

    def and_(self) -> Node:
        node = self.not_()
        while self.tok.kind == "and":
            self.take()
            node = BoolOp("and", node, self.not_())
        return node

    def not_(self) -> Node:
        if self.tok.kind == "not":
            self.take()
            return Not(self.not_())
        return self.atom()

    def atom(self) -> Node:
        if self.tok.kind == "lparen":
            self.take()
            node = self.or_()
            self.expect("rparen", "')'")
            return node
        func = None
        if self.tok.kind == "name" and self.tok.text in FUNCTIONS and self.tokens[self.i + 1].kind == "lparen":
            func = self.take().text
            self.take()
            attr = self.name()
            self.expect("rparen", f"')' closing {func}(")
        else:
            attr = self.name()
        if self.tok.kind != "op":
            if func is not None:
                raise ShorthandError(self.tok.column, f"{func}(...) needs a comparison, e.g. {func}({attr.name}) > 0")
            return Has(attr)
        op = self.take().text
        number = self.expect("number", f"a number after {op!r}").text
        return Compare(func, attr, op, number)

    def name(self) -> Name:
        tok = self.tok
        if tok.kind == "name":
            self.take()
            return Name(tok.text, tok.column)
        if tok.kind == "quoted":
            self.take()
            return Name(json.loads(tok.text), tok.column)
        if tok.kind in KEYWORDS:
            raise ShorthandError(tok.column, f"expected an attribute name, found the keyword {tok.text!r}")
        raise ShorthandError(tok.column, f"expected an attribute name, found {self._found()}")


def parse(src: str) -> Node:
    """The rule's tree; :class:`ShorthandError` with the column on a syntax error."""
    return _Parser(src).parse()


def names(node: Node) -> list[Name]:
    """Every attribute name of a rule, in order."""
    if isinstance(node, Has):
        return [node.attr]
    if isinstance(node, Compare):
        return [node.attr]
    if isinstance(node, BoolOp):
        return names(node.left) + names(node.right)
    return names(node.inner)


def _spans(key: str) -> str:
    return f"((.attributes // {{}})[{json.dumps(key)}] // [])"


def to_jq(node: Node, resolve: Callable[[Name], str]) -> str:
    """The jq program of a rule; ``resolve`` maps each name to its attribute key (or raises)."""
    if isinstance(node, Has):
        return f"({_spans(resolve(node.attr))} | length > 0)"
    if isinstance(node, Compare):
        spans, op, x = _spans(resolve(node.attr)), node.op, node.number
        if node.func is None:
            return f"({spans} | any(.[2] {op} {x}))"
        if node.func == "count":
            return f"({spans} | length {op} {x})"
        if node.func in ("max", "min"):
            return f"({spans} | if length == 0 then false else (map(.[2]) | {node.func}) {op} {x} end)"
        # frac: score-weighted share of the text's characters covered by the spans
        return f"((({spans} | map(.[2] * (.[1] - .[0])) | add) // 0) / ((.text | length) as $n | if $n == 0 then 1 else $n end) {op} {x})"
    if isinstance(node, BoolOp):
        return f"({to_jq(node.left, resolve)} {node.op} {to_jq(node.right, resolve)})"
    return f"({to_jq(node.inner, resolve)} | not)"


def resolver(keys: dict[str, str], where: str) -> Callable[[Name], str]:
    """Resolve a name against the known attribute keys (key -> kind of its sample value).

    A name is a key, or the unique key ending in ``__<name>``. ``where`` says where the keys were
    looked for, for the error message.
    """
    import difflib

    def resolve(name: Name) -> str:
        if name.name in keys:
            key = name.name
        else:
            matches = sorted(k for k in keys if k.endswith("__" + name.name))
            if len(matches) > 1:
                raise ShorthandError(
                    name.column, f"attribute {name.name!r} is ambiguous: it ends {', '.join(matches)}; write the whole key"
                )
            if not matches:
                suffixes = {k.split("__", 1)[1]: k for k in keys if "__" in k}
                close = difflib.get_close_matches(name.name, [*keys, *suffixes], n=1, cutoff=0.6)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                known = ", ".join(sorted(keys)[:12]) + (", ..." if len(keys) > 12 else "")
                raise ShorthandError(name.column, f"unknown attribute {name.name!r}{hint}; {where} hold: {known or 'no attributes'}")
            key = matches[0]
        if keys[key] not in ("spans", "empty"):
            raise ShorthandError(
                name.column, f"attribute {key!r} holds {keys[key]} values, not [start, end, score] spans; use a jq or JSONPath rule"
            )
        return key

    return resolve
