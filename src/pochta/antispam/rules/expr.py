"""The small, safe expression language of rule conditions. Pure; nothing is ever ``eval``-ed.

    condition   := or
    or          := and ("or" and)*
    and         := not ("and" not)*
    not         := "not" not | comparison
    comparison  := sum [("==" | "!=" | "<" | "<=" | ">" | ">=") sum]
                 | sum ["not"] "in" "(" literal ("," literal)* ")"
    sum         := product (("+" | "-") product)*
    product     := unary (("*" | "/") unary)*
    unary       := "-" unary | atom
    atom        := NUMBER ["%"] | STRING | "true" | "false" | NAME | "(" condition ")"

Names are of three kinds, told apart by their spelling and checked when the rules are loaded
(an unknown name, or a comparison of text with a number, is refused then, not at run time):

- ``UPPER_CASE``: a phishing sign or an earlier rule's symbol; true when it fired.
- ``auth.spf``, ``auth.dkim``, ``auth.dmarc``, ``auth.dmarc_policy``: text, compared with
  ``==``, ``!=`` or ``in`` to the words the auth module gives (``"pass"``, ``"fail"`` ...).
- anything else (``links.count``, ``shingle.14.spam_ratio_24h``): a number from the features.

A feature the letter does not have is *missing*: any comparison or arithmetic with it is
false (a rule over counters the shingler could not give does not fire), and as a condition
it is false. A number as a condition is true when it is not 0. ``99%`` is 0.99.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

Type = Literal["bool", "num", "str"]
Value = bool | float | str | None


class ExprError(Exception):
    """A condition that cannot be parsed or does not type-check."""


_TOKEN = re.compile(
    r"\s*(?:"
    r"(?P<num>\d+(?:\.\d+)?(?:[eE][+-]?\d+)?%?)"
    r"|(?P<str>\"[^\"\\]*(?:\\.[^\"\\]*)*\"|'[^'\\]*(?:\\.[^'\\]*)*')"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)"
    r"|(?P<op>==|!=|<=|>=|<|>|\+|-|\*|/|\(|\)|,)"
    r")"
)
_KEYWORDS = frozenset({"and", "or", "not", "in", "true", "false"})
_SIGN_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # num, str, name, op, kw, end
    text: str
    pos: int


def tokenize(source: str) -> list[Token]:
    out: list[Token] = []
    pos = 0
    source = source.rstrip()
    while pos < len(source):
        m = _TOKEN.match(source, pos)
        if m is None or m.end() == pos:
            raise ExprError(f"unexpected character {source[pos:].lstrip()[:1]!r} at {pos}")
        kind = m.lastgroup or ""
        text, start = m.group(kind), m.start(kind)
        if kind == "name" and text in _KEYWORDS:
            kind = "kw"
        out.append(Token(kind, text, start))
        pos = m.end()
    out.append(Token("end", "", len(source)))
    return out


# -- the tree -------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Const:
    value: bool | float | str


@dataclass(frozen=True, slots=True)
class Name:
    name: str


@dataclass(frozen=True, slots=True)
class Not:
    arg: Node


@dataclass(frozen=True, slots=True)
class BoolOp:
    op: Literal["and", "or"]
    args: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Compare:
    op: str
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class In:
    left: Node
    values: tuple[bool | float | str, ...]
    negated: bool


@dataclass(frozen=True, slots=True)
class Arith:
    op: str
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class Neg:
    arg: Node


Node = Const | Name | Not | BoolOp | Compare | In | Arith | Neg


class _Parser:
    def __init__(self, source: str) -> None:
        self.tokens = tokenize(source)
        self.i = 0

    @property
    def tok(self) -> Token:
        return self.tokens[self.i]

    def take(self, kind: str, text: str | None = None) -> Token | None:
        t = self.tok
        if t.kind == kind and (text is None or t.text == text):
            self.i += 1
            return t
        return None

    def expect(self, kind: str, text: str) -> Token:
        t = self.take(kind, text)
        if t is None:
            raise ExprError(f"expected {text!r} at {self.tok.pos}, found {self._shown()}")
        return t

    def _shown(self) -> str:
        return "the end" if self.tok.kind == "end" else repr(self.tok.text)

    def parse(self) -> Node:
        if self.tok.kind == "end":
            raise ExprError("empty condition")
        node = self.or_()
        if self.tok.kind != "end":
            raise ExprError(f"unexpected {self._shown()} at {self.tok.pos}")
        return node

    def or_(self) -> Node:
        args = [self.and_()]
        while self.take("kw", "or"):
            args.append(self.and_())
        return args[0] if len(args) == 1 else BoolOp("or", tuple(args))

    def and_(self) -> Node:
        args = [self.not_()]
        while self.take("kw", "and"):
            args.append(self.not_())
        return args[0] if len(args) == 1 else BoolOp("and", tuple(args))

    def not_(self) -> Node:
        if self.take("kw", "not"):
            return Not(self.not_())
        return self.comparison()

    def comparison(self) -> Node:
        left = self.sum_()
        t = self.tok
        if t.kind == "op" and t.text in ("==", "!=", "<", "<=", ">", ">="):
            self.i += 1
            return Compare(t.text, left, self.sum_())
        negated = False
        if t.kind == "kw" and t.text == "not" and self.tokens[self.i + 1].text == "in":
            self.i += 1
            negated = True
        if self.take("kw", "in"):
            self.expect("op", "(")
            values = [self.literal()]
            while self.take("op", ","):
                values.append(self.literal())
            self.expect("op", ")")
            return In(left, tuple(values), negated)
        if negated:
            raise ExprError(f"expected 'in' at {self.tok.pos}")
        return left

    def literal(self) -> bool | float | str:
        node = self.unary()
        if isinstance(node, Neg) and isinstance(node.arg, Const):
            value = node.arg.value
            if isinstance(value, float):
                return -value
        if not isinstance(node, Const):
            raise ExprError("the list after 'in' may hold only literals")
        return node.value

    def sum_(self) -> Node:
        node = self.product()
        while self.tok.kind == "op" and self.tok.text in ("+", "-"):
            op = self.tok.text
            self.i += 1
            node = Arith(op, node, self.product())
        return node

    def product(self) -> Node:
        node = self.unary()
        while self.tok.kind == "op" and self.tok.text in ("*", "/"):
            op = self.tok.text
            self.i += 1
            node = Arith(op, node, self.unary())
        return node

    def unary(self) -> Node:
        if self.take("op", "-"):
            return Neg(self.unary())
        return self.atom()

    def atom(self) -> Node:
        t = self.tok
        if t.kind == "num":
            self.i += 1
            if t.text.endswith("%"):
                return Const(float(t.text[:-1]) / 100)
            return Const(float(t.text))
        if t.kind == "str":
            self.i += 1
            return Const(_unquote(t.text))
        if t.kind == "kw" and t.text in ("true", "false"):
            self.i += 1
            return Const(t.text == "true")
        if t.kind == "name":
            self.i += 1
            return Name(t.text)
        if self.take("op", "("):
            node = self.or_()
            self.expect("op", ")")
            return node
        raise ExprError(f"unexpected {self._shown()} at {t.pos}")


def _unquote(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text[1:-1])


def parse(source: str) -> Node:
    return _Parser(source).parse()


# -- checking -------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Schema:
    """What names a condition may use: ``type_of`` gives a name's type (None: unknown);
    ``choices`` the allowed words of a text name."""

    type_of: Callable[[str], Type | None]
    choices: Mapping[str, Sequence[str]]


def is_sign_name(name: str) -> bool:
    return _SIGN_NAME.match(name) is not None


def names(node: Node) -> list[str]:
    out: list[str] = []

    def walk(n: Node) -> None:
        if isinstance(n, Name):
            out.append(n.name)
        elif isinstance(n, Not | Neg):
            walk(n.arg)
        elif isinstance(n, BoolOp):
            for a in n.args:
                walk(a)
        elif isinstance(n, Compare | Arith):
            walk(n.left)
            walk(n.right)
        elif isinstance(n, In):
            walk(n.left)

    walk(node)
    return out


def _const_type(value: bool | float | str) -> Type:
    if isinstance(value, bool):
        return "bool"
    return "str" if isinstance(value, str) else "num"


def check(node: Node, schema: Schema) -> Type:
    """The node's type; ExprError when a name is unknown or types do not fit."""
    if isinstance(node, Const):
        return _const_type(node.value)
    if isinstance(node, Name):
        t = schema.type_of(node.name)
        if t is None:
            kind = "sign or rule" if is_sign_name(node.name) else "feature"
            raise ExprError(f"unknown {kind} {node.name!r}")
        return t
    if isinstance(node, Not):
        _condition(node.arg, schema)
        return "bool"
    if isinstance(node, BoolOp):
        for a in node.args:
            _condition(a, schema)
        return "bool"
    if isinstance(node, Neg | Arith):
        parts = [node.arg] if isinstance(node, Neg) else [node.left, node.right]
        for p in parts:
            if check(p, schema) != "num":
                raise ExprError("arithmetic needs numbers")
        return "num"
    if isinstance(node, Compare):
        lt, rt = check(node.left, schema), check(node.right, schema)
        if lt != rt:
            raise ExprError(f"cannot compare {_describe(node.left)} ({lt}) with "
                            f"{_describe(node.right)} ({rt})")
        if lt != "num" and node.op not in ("==", "!="):
            raise ExprError(f"{node.op} needs numbers")
        if lt == "str":
            _check_words(node.left, node.right, schema)
            _check_words(node.right, node.left, schema)
        return "bool"
    if isinstance(node, In):
        lt = check(node.left, schema)
        for v in node.values:
            if _const_type(v) != lt:
                raise ExprError(f"{_describe(node.left)} ({lt}) compared with {v!r}")
            if isinstance(node.left, Name) and isinstance(v, str):
                _check_word(node.left.name, v, schema)
        return "bool"
    raise ExprError(f"unknown node {node!r}")  # pragma: no cover


def _condition(node: Node, schema: Schema) -> None:
    if check(node, schema) == "str":
        raise ExprError(f"{_describe(node)} is text: compare it with == or in")


def _check_words(name: Node, other: Node, schema: Schema) -> None:
    if isinstance(name, Name) and isinstance(other, Const) and isinstance(other.value, str):
        _check_word(name.name, other.value, schema)


def _check_word(name: str, word: str, schema: Schema) -> None:
    allowed = schema.choices.get(name)
    if allowed is not None and word not in allowed:
        raise ExprError(f"{name} is never {word!r}; it is one of {', '.join(allowed)}")


def _describe(node: Node) -> str:
    if isinstance(node, Name):
        return node.name
    if isinstance(node, Const):
        return repr(node.value)
    return "an expression"


# -- evaluation -----------------------------------------------------------------------------
Lookup = Callable[[str], Value]


def truth(value: Value) -> bool:
    if value is None:
        return False
    if isinstance(value, float):
        return value != 0 and not math.isnan(value)
    return bool(value)


def evaluate(node: Node, lookup: Lookup) -> Value:
    if isinstance(node, Const):
        return node.value
    if isinstance(node, Name):
        return lookup(node.name)
    if isinstance(node, Not):
        return not truth(evaluate(node.arg, lookup))
    if isinstance(node, BoolOp):
        if node.op == "and":
            return all(truth(evaluate(a, lookup)) for a in node.args)
        return any(truth(evaluate(a, lookup)) for a in node.args)
    if isinstance(node, Neg):
        v = evaluate(node.arg, lookup)
        return -v if isinstance(v, float) else None
    if isinstance(node, Arith):
        return _arith(node.op, evaluate(node.left, lookup), evaluate(node.right, lookup))
    if isinstance(node, Compare):
        return _compare(node.op, evaluate(node.left, lookup), evaluate(node.right, lookup))
    if isinstance(node, In):
        v = evaluate(node.left, lookup)
        if v is None:
            return False
        return (v in node.values) != node.negated
    raise ExprError(f"unknown node {node!r}")  # pragma: no cover


def _arith(op: str, a: Value, b: Value) -> Value:
    if not isinstance(a, float) or not isinstance(b, float):
        return None
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    return a / b if b != 0 else None


def _compare(op: str, a: Value, b: Value) -> bool:
    if a is None or b is None:
        return False
    if op == "==":
        return a == b
    if op == "!=":
        return a != b
    if not isinstance(a, float) or not isinstance(b, float):
        return False
    if op == "<":
        return a < b
    if op == "<=":
        return a <= b
    if op == ">":
        return a > b
    return a >= b
