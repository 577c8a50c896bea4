"""The rules language against the maintained evaluators weighed for it (issue 19).

The 27 conditions of ``default_rules.toml``, one letter's values (some signs fired, auth words,
features, one shingle statistic), evaluated by:

    pochta       pochta.antispam.rules.expr: the tree lark parsed, pochta's evaluator
    simpleeval   EvalWithCompoundTypes over the same conditions rewritten into Python
                 (``shingle.14.x`` -> ``shingle__14__x``, ``99%`` -> ``0.99``, true/false),
                 no functions, missing values as an object every comparison finds false
    cel          cel-python over the same conditions rewritten into CEL (&&, ||, !, [...]);
                 a missing feature is an error there, counted as the rule not firing

Each must give the same answers as pochta's; the figure is µs per letter (all 27 rules), the
best of five runs. Load time: building lark's parser and parsing every rule. Hostile text:
what each does with a method call on a value, a call, an f-string, a huge power, 3,000
nested parentheses.

    pip install -e '.[bench]' && python benchmarks/rules_eval.py
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import celpy
import simpleeval

from _common import emit, machine
from pochta.antispam.rules import expr, ruleset

ROOT = Path(__file__).resolve().parents[1]
_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)+")
_PERCENT = re.compile(r"(\d+(?:\.\d+)?)%")


def values(rules: ruleset.Rules) -> dict[str, Any]:
    signs = {s: False for s in ruleset.SPECS} | {r.symbol: False for r in rules.rules}
    signs |= {"PHISH_URGENCY": True, "PHISH_GENEROUS_OFFER": True}
    feats = {
        "sender.protected": 1.0, "phish.signs": 2.0, "text.letters": 500.0,
        "text.upper_ratio": 0.1, "subject.letters": 20.0, "subject.upper_ratio": 0.8,
        "subject.exclamations": 1.0, "html.hidden_chars": 0.0, "text.money": 0.0,
        "links.count": 4.0, "text.words": 30.0, "headers.has_message_id": 1.0,
        "headers.has_date": 1.0, "headers.has_list_unsubscribe": 0.0,
        "shingle.14.spam_ratio_24h": 0.5,
    }  # fmt: skip
    auth = {"auth.spf": "pass", "auth.dkim": "none", "auth.dmarc": "fail",
            "auth.dmarc_policy": "reject"}  # fmt: skip
    return signs | feats | auth


def flat(name: str) -> str:
    return name.replace(".", "__")


def as_python(source: str) -> str:
    s = _DOTTED.sub(lambda m: flat(m.group(0)), source)
    s = _PERCENT.sub(lambda m: repr(float(m.group(1)) / 100), s)
    return "(" + re.sub(r"\btrue\b", "True", re.sub(r"\bfalse\b", "False", s)) + ")"


def as_cel(source: str) -> str:
    s = _DOTTED.sub(lambda m: flat(m.group(0)), source)
    s = _PERCENT.sub(lambda m: repr(float(m.group(1)) / 100), s)
    s = re.sub(r"\bin \(([^)]*)\)", r"in [\1]", s)
    s = re.sub(r"\band\b", "&&", re.sub(r"\bor\b", "||", re.sub(r"\bnot\b", "!", s)))
    return "(" + re.sub(r"(?<![\d.\w])(\d+)(?![\d.])", r"\1.0", s) + ")"


class Missing:
    """A missing feature for simpleeval: every comparison false, arithmetic missing."""

    def __bool__(self) -> bool:
        return False

    def _false(self, other: object) -> bool:
        return False

    def _same(self, *other: object) -> Missing:
        return self

    __lt__ = __le__ = __gt__ = __ge__ = __eq__ = __ne__ = _false  # type: ignore[assignment]
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _same
    __truediv__ = __rtruediv__ = __neg__ = _same
    __hash__ = object.__hash__


class Names(dict[str, Any]):
    def __missing__(self, key: str) -> Missing:
        return Missing()


def best_us(fn: Callable[[], object], n: int) -> float:
    fn()
    times = []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        times.append((time.perf_counter() - t) / n)
    return round(min(times) * 1e6, 1)


def probe(fn: Callable[[str], object], source: str) -> str:
    t = time.perf_counter()
    try:
        out = f"evaluated to {fn(source)!r}"[:60]
    except (Exception, RecursionError) as exc:  # what each evaluator raises is the finding
        out = f"{type(exc).__name__}: {str(exc).splitlines()[0][:60]}"
    return f"{out} ({1000 * (time.perf_counter() - t):.1f} ms)"


def main() -> None:
    result: dict[str, Any] = {"benchmark": "rules_eval", "machine": machine(ROOT)}
    t = time.perf_counter()
    rules = ruleset.parse(ruleset.default_text(), "default_rules.toml")
    result["pochta_load_ms"] = round(1000 * (time.perf_counter() - t), 1)
    env = values(rules)
    conditions = [r.when for r in rules.rules]
    nodes = [r.condition for r in rules.rules]

    def pochta() -> list[bool]:
        return [expr.truth(expr.evaluate(n, env.get)) for n in nodes]

    expected = pochta()
    se = simpleeval.EvalWithCompoundTypes(names=Names({flat(k): v for k, v in env.items()}),
                                          functions={})
    py = [as_python(c) for c in conditions]
    parsed = [se.parse(p) for p in py]

    def simple() -> list[bool]:
        return [bool(se.eval(p, previously_parsed=q)) for p, q in zip(py, parsed, strict=True)]

    cel_env = celpy.Environment()
    activation = {flat(k): celpy.json_to_cel(v) for k, v in env.items()}
    programs = [cel_env.program(cel_env.compile(as_cel(c))) for c in conditions]

    def cel_one(program: Any) -> bool:
        try:
            return bool(program.evaluate(activation))
        except celpy.CELEvalError:  # a missing feature is an error in CEL: the rule is false
            return False

    def cel() -> list[bool]:
        return [cel_one(p) for p in programs]

    result["rules"] = len(nodes)
    result["same_answers"] = {"simpleeval": simple() == expected, "cel": cel() == expected}
    result["us_per_letter"] = {
        "pochta": best_us(pochta, 2000),
        "simpleeval": best_us(simple, 500),
        "cel": best_us(cel, 20),
    }
    hostile = {  # (as a rule would say it, as Python says it)
        "method call": ('auth.spf.upper() == "PASS"', '(auth__spf.upper() == "PASS")'),
        "call": ("int('5') == 5", "(int('5') == 5)"),
        "f-string": ("f'{auth.spf}' == 'pass'", "(f'{auth__spf}' == 'pass')"),
        "power": ("9**9**9**9 > 1", "(9**9**9**9 > 1)"),
        "nesting": ("(" * 1900 + "1" + ")" * 1900, "(" * 1900 + "1" + ")" * 1900),
    }
    schema = rules_schema(rules)
    result["hostile"] = {
        name: {
            "pochta": probe(lambda s: expr.check(expr.parse(s), schema), ours),
            "simpleeval": probe(se.eval, python),
        }
        for name, (ours, python) in hostile.items()
    }
    emit(result)


def rules_schema(rules: ruleset.Rules) -> expr.Schema:
    known = set(ruleset.SPECS) | {r.symbol for r in rules.rules}

    def type_of(name: str) -> expr.Type | None:
        if expr.is_sign_name(name):
            return "bool" if name in known else None
        if name in ruleset.AUTH_CHOICES:
            return "str"
        return "num" if name in ruleset.BUILTIN_FEATURES else None

    return expr.Schema(type_of, ruleset.AUTH_CHOICES)


if __name__ == "__main__":
    main()
