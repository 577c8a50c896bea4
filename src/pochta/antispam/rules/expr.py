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

Hostile text is bounded: a condition holds at most :data:`MAX_CONDITION` characters and nests
at most :data:`MAX_DEPTH` deep; a longer or deeper one is refused when the rules are loaded.

Who does what. The grammar above is parsed by lark (LALR(1): one pass, linear time, an
explicit stack, so deep parentheses cannot exhaust Python's recursion as the hand-written
recursive-descent parser this replaced could), building the tree below as it reduces. The
tree, its checks at load time and its evaluation are pochta's own, and so they stay: the
maintained evaluators weighed for them each fall short of the job (measured on the 27 rules
of ``default_rules.toml``, one letter, ``benchmarks/rules_eval.py``):

- simpleeval (Python's syntax through ``ast``): ``shingle.14.spam_ratio_24h`` and ``99%`` are
  no Python, so a rewriting tokenizer would stay; nothing is checked before a letter comes
  (an unknown name, text compared with a number, ``auth.spf == "passed"``); method calls on
  values and f-strings evaluate (``auth.spf.upper()``); missing values need a stand-in
  object; 1.7x the time of this evaluator.
- cel-python (Google's CEL): its own syntax (``&&``, ``[...]``, no ``99%``, no names with a
  number in them), so every rules file would change; 12 ms a letter, 250x this evaluator.
- asteval: whole Python statements, loops included: unbounded CPU on hostile text.
- rule-engine: its own syntax again (``in (...)`` does not parse).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import lark

Type = Literal["bool", "num", "str"]
Value = bool | float | str | None


class ExprError(Exception):
    """A condition that cannot be parsed or does not type-check."""


MAX_CONDITION = 4000  # characters of one condition
MAX_DEPTH = 64  # nesting of the tree (not, -, and/or, comparisons, arithmetic)

GRAMMAR = r"""
?start: or_
?or_: and_ ("or" and_)*
?and_: not_ ("and" not_)*
?not_: "not" not_ -> negation
     | comparison
?comparison: sum
     | sum CMP sum -> compare
     | sum "in" "(" sum ("," sum)* ")" -> member
     | sum "not" "in" "(" sum ("," sum)* ")" -> non_member
?sum: product
    | sum PLUS product -> arith
    | sum MINUS product -> arith
?product: unary
    | product TIMES unary -> arith
    | product DIVIDE unary -> arith
?unary: atom
    | MINUS unary -> neg
?atom: NUMBER -> number
     | STRING -> string
     | "true" -> true
     | "false" -> false
     | NAME -> name
     | "(" or_ ")"
CMP: "==" | "!=" | "<=" | ">=" | "<" | ">"
PLUS: "+"
MINUS: "-"
TIMES: "*"
DIVIDE: "/"
NUMBER: /\d+(\.\d+)?([eE][+-]?\d+)?%?/
STRING: /"[^"\\]*(\\.[^"\\]*)*"|'[^'\\]*(\\.[^'\\]*)*'/
NAME: /[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)*/
%ignore /\s+/
"""
_SIGN_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")
# how lark's terminal names read in an error message
_SHOWN = {"RPAR": "')'", "LPAR": "'('", "COMMA": "','", "CMP": "a comparison", "PLUS": "'+'",
          "MINUS": "'-'", "TIMES": "'*'", "DIVIDE": "'/'", "AND": "'and'", "OR": "'or'",
          "NOT": "'not'", "IN": "'in'", "NUMBER": "a number", "STRING": "a string",
          "NAME": "a name", "TRUE": "'true'", "FALSE": "'false'", "$END": "the end"}


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


# -- parsing --------------------------------------------------------------------------------
Literal_ = bool | float | str


class _Build(lark.Transformer[lark.Token, Node]):
    """lark's callbacks, run as the LALR parser reduces: the tree bottom-up, no recursion."""

    def or_(self, args: list[Node]) -> Node:
        return BoolOp("or", tuple(args))

    def and_(self, args: list[Node]) -> Node:
        return BoolOp("and", tuple(args))

    def negation(self, args: list[Node]) -> Node:
        return Not(args[0])

    def compare(self, args: list[Any]) -> Node:
        return Compare(str(args[1]), args[0], args[2])

    def member(self, args: list[Node]) -> Node:
        return In(args[0], tuple(_literal(a) for a in args[1:]), negated=False)

    def non_member(self, args: list[Node]) -> Node:
        return In(args[0], tuple(_literal(a) for a in args[1:]), negated=True)

    def arith(self, args: list[Any]) -> Node:
        return Arith(str(args[1]), args[0], args[2])

    def neg(self, args: list[Any]) -> Node:
        return Neg(args[1])

    def number(self, args: list[lark.Token]) -> Node:
        text = str(args[0])
        return Const(float(text[:-1]) / 100 if text.endswith("%") else float(text))

    def string(self, args: list[lark.Token]) -> Node:
        return Const(_unquote(str(args[0])))

    def true(self, args: list[Any]) -> Node:
        return Const(True)

    def false(self, args: list[Any]) -> Node:
        return Const(False)

    def name(self, args: list[lark.Token]) -> Node:
        return Name(str(args[0]))


def _literal(node: Node) -> Literal_:
    if isinstance(node, Neg) and isinstance(node.arg, Const) and isinstance(node.arg.value, float):
        return -node.arg.value
    if not isinstance(node, Const):
        raise ExprError("the list after 'in' may hold only literals")
    return node.value


def _unquote(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text[1:-1])


@functools.cache
def _parser() -> lark.Lark:
    return lark.Lark(GRAMMAR, parser="lalr", lexer="basic", transformer=_Build())


def _expected(names: Iterable[str]) -> str:
    shown = sorted({_SHOWN.get(n, n.lower()) for n in names})
    return ", ".join(shown)


def parse(source: str) -> Node:
    """The tree of a condition; ExprError saying what is wrong and where."""
    if not source.strip():
        raise ExprError("empty condition")
    if len(source) > MAX_CONDITION:
        raise ExprError(f"longer than {MAX_CONDITION} characters")
    try:
        node: Node = _parser().parse(source)  # type: ignore[assignment]  # _Build's tree
    except lark.exceptions.UnexpectedCharacters as exc:
        pos = exc.pos_in_stream or 0
        raise ExprError(f"unexpected character {source[pos]!r} at {pos}") from None
    except lark.exceptions.UnexpectedToken as exc:
        end = exc.token.type == "$END"
        pos = len(source.rstrip()) if end else exc.token.start_pos
        found = "the end" if end else repr(str(exc.token))
        expected = exc.accepts or exc.expected  # accepts: checked against the parser's stack
        if end and "RPAR" in expected:
            raise ExprError(f"expected ')' at {pos}, found the end") from None
        raise ExprError(f"unexpected {found} at {pos} (expected {_expected(expected)})") from None
    except lark.exceptions.UnexpectedInput as exc:  # any other way lark finds it wrong
        raise ExprError(f"cannot be parsed: {str(exc).splitlines()[0]}") from None
    except lark.exceptions.VisitError as exc:  # a callback's ExprError, wrapped by lark
        if isinstance(exc.orig_exc, ExprError):
            raise exc.orig_exc from None
        raise
    if depth(node) > MAX_DEPTH:
        raise ExprError(f"nested more than {MAX_DEPTH} deep")
    return node


def children(node: Node) -> tuple[Node, ...]:
    if isinstance(node, Not | Neg):
        return (node.arg,)
    if isinstance(node, BoolOp):
        return node.args
    if isinstance(node, Compare | Arith):
        return (node.left, node.right)
    if isinstance(node, In):
        return (node.left,)
    return ()


def depth(node: Node) -> int:
    """How deep the tree nests, counted without recursion (a hostile tree may be deep)."""
    deepest, stack = 0, [(node, 1)]
    while stack:
        n, d = stack.pop()
        deepest = max(deepest, d)
        stack.extend((c, d + 1) for c in children(n))
    return deepest


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
    """The names a condition uses, left to right."""
    out: list[str] = []
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, Name):
            out.append(n.name)
        stack.extend(reversed(children(n)))
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


Compiled = Callable[[Lookup], Value]


def compiled(node: Node) -> Compiled:
    """``node`` as one function of the lookup: ``compiled(node)(lookup)`` is
    ``evaluate(node, lookup)``, the same values in the same order (``and`` / ``or`` stop
    where ``evaluate`` does), with the node types told apart once instead of for every
    letter."""
    if isinstance(node, Const):
        const = node.value
        return lambda lookup: const
    if isinstance(node, Name):
        name = node.name
        return lambda lookup: lookup(name)
    if isinstance(node, Not):
        arg = compiled(node.arg)
        return lambda lookup: not truth(arg(lookup))
    if isinstance(node, BoolOp):
        args = tuple(compiled(a) for a in node.args)
        # loops, not all()/any() of a generator (one made per letter and condition): the
        # same arguments read in the same order, stopping at the same one
        if node.op == "and":

            def all_(lookup: Lookup) -> Value:
                for a in args:  # noqa: SIM110 - no generator made per call
                    if not truth(a(lookup)):
                        return False
                return True

            return all_

        def any_(lookup: Lookup) -> Value:
            for a in args:  # noqa: SIM110 - no generator made per call
                if truth(a(lookup)):
                    return True
            return False

        return any_
    if isinstance(node, Neg):
        negated = compiled(node.arg)

        def neg(lookup: Lookup) -> Value:
            v = negated(lookup)
            return -v if isinstance(v, float) else None

        return neg
    if isinstance(node, Arith):
        op, left, right = node.op, compiled(node.left), compiled(node.right)
        return lambda lookup: _arith(op, left(lookup), right(lookup))
    if isinstance(node, Compare):
        op = node.op
        if isinstance(node.left, Name) and isinstance(node.right, Const):  # feature <op> 1.5
            name, value = node.left.name, node.right.value
            return _name_against(op, name, value)
        left, right = compiled(node.left), compiled(node.right)
        return lambda lookup: _compare(op, left(lookup), right(lookup))
    if isinstance(node, In):
        member, values, negative = compiled(node.left), node.values, node.negated

        def in_(lookup: Lookup) -> Value:
            v = member(lookup)
            if v is None:
                return False
            return (v in values) != negative

        return in_
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


def _name_against(op: str, name: str, value: bool | float | str) -> Compiled:
    """``lambda lookup: _compare(op, lookup(name), value)`` with ``_compare``'s choices made
    for the constant once: the same result for every value the lookup gives."""
    if op == "==":
        return lambda lookup: (a := lookup(name)) is not None and a == value
    if op == "!=":
        return lambda lookup: (a := lookup(name)) is not None and a != value
    if not isinstance(value, float):
        return lambda lookup: _compare(op, lookup(name), value)
    if op == "<":
        return lambda lookup: isinstance(a := lookup(name), float) and a < value
    if op == "<=":
        return lambda lookup: isinstance(a := lookup(name), float) and a <= value
    if op == ">":
        return lambda lookup: isinstance(a := lookup(name), float) and a > value
    if op == ">=":
        return lambda lookup: isinstance(a := lookup(name), float) and a >= value
    return lambda lookup: _compare(op, lookup(name), value)  # pragma: no cover


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
