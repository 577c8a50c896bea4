"""Rules: named symbols that add points to a letter's Spam Score (seed 002), read from a TOML
file and checked when it is loaded. Evaluation is pure.

The file (``default_rules.toml`` is the shipped one and documents the format in its header):

- ``version = 1``
- ``[actions]``: ``spam`` — the score at or above which a letter is spam when no model is
  configured; ``phishing`` — the points of the ``phishing`` group at or above which it is
  phishing.
- ``[signs]``: ``PHISH_SYMBOL = points`` for the phishing signs (group ``phishing``); a sign
  not listed adds nothing.
- ``features = ["name", ...]``: extra feature names rules may use besides the built-in ones
  (:data:`pochta.antispam.features.FEATURES`, ``sign.*``, ``auth.*.*`` and
  ``shingle.<type>.<stat>``).
- ``[[rule]]``: ``symbol`` (UPPER_SNAKE_CASE, unique), ``score`` (points, negative for good
  signs), ``when`` (a condition in :mod:`pochta.antispam.rules.expr`), ``description`` (English),
  optional ``description_ru`` and ``group`` (a lowercase word; ``phishing`` points count
  towards the phishing verdict). A rule may use the symbols of the rules before it.

A bad file is refused as a whole with a :class:`~pochta.errors.ConfigError` that names the rule
and the reason.
"""

from __future__ import annotations

import functools
import math
import re
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Literal

from pochta.antispam import features
from pochta.antispam.auth.results import NO_AUTH, AuthResults
from pochta.antispam.rules import expr
from pochta.antispam.signs.registry import SPECS, Sign
from pochta.errors import ConfigError
from pochta.pickling import by_fields

Verdict = Literal["ham", "spam", "phishing"]

MAX_POINTS = 1000.0
PHISHING_GROUP = "phishing"
_SYMBOL = re.compile(r"^[A-Z][A-Z0-9_]{1,63}$")
_GROUP = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
_FEATURE = re.compile(r"^[a-z][a-z0-9_]*(?:\.[A-Za-z0-9_]+)+$")
_SHINGLE_FEATURE = re.compile(r"^shingle\.\d{1,4}\.[a-z0-9_]+$")

AUTH_CHOICES: dict[str, tuple[str, ...]] = {
    "auth.spf": ("pass", "fail", "softfail", "neutral", "none", "temperror", "permerror"),
    "auth.dkim": ("pass", "fail", "neutral", "none", "temperror", "permerror"),
    "auth.dmarc": ("pass", "fail", "none", "temperror", "permerror"),
    "auth.dmarc_policy": ("none", "quarantine", "reject"),
}
BUILTIN_FEATURES = frozenset(features.FEATURES + features.SIGN_FEATURES + features.AUTH_FEATURES)


@dataclass(frozen=True, slots=True)
class Rule:
    symbol: str
    score: float
    when: str
    condition: expr.Node
    description: str
    description_ru: str
    group: str = "rules"


@dataclass(frozen=True, slots=True)
class Actions:
    spam: float
    phishing: float


@dataclass(frozen=True, slots=True)
class Rules:
    rules: tuple[Rule, ...]
    sign_scores: Mapping[str, float]
    actions: Actions
    features: frozenset[str] = frozenset()  # extra feature names declared by the file


@by_fields  # read back by the server: pochta.pickling
@dataclass(frozen=True, slots=True)
class Hit:
    symbol: str
    score: float
    group: str
    description: str
    description_ru: str
    evidence: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, object]:
        return {
            "symbol": self.symbol,
            "score": self.score,
            "group": self.group,
            "description": self.description,
            "description_ru": self.description_ru,
            "evidence": list(self.evidence),
        }


# -- loading --------------------------------------------------------------------------------
def _number(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{what} must be a number, not {value!r}")
    f = float(value)
    if not math.isfinite(f) or abs(f) > MAX_POINTS:
        raise ConfigError(f"{what} must be finite and at most {MAX_POINTS:g} in size")
    return f


def _text(item: Mapping[str, object], key: str, where: str, default: str | None = None) -> str:
    value = item.get(key, default)
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where}: {key} must be a non-empty string")
    return value.strip()


def parse(text: str, source: str = "rules", extra_features: Iterable[str] = ()) -> Rules:
    """Read and check a rules file; ConfigError naming the rule and the reason."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML: {exc}") from exc
    unknown = set(data) - {"version", "actions", "signs", "features", "rule"}
    if unknown:
        raise ConfigError(f"{source}: unknown top-level keys {sorted(unknown)}")
    if data.get("version", 1) != 1:
        raise ConfigError(f"{source}: version {data.get('version')!r} is not supported (1 is)")

    actions = data.get("actions")
    if not isinstance(actions, dict):
        raise ConfigError(f"{source}: [actions] with spam and phishing thresholds is required")
    if set(actions) - {"spam", "phishing"}:
        raise ConfigError(f"{source}: [actions] knows only spam and phishing")
    for key in ("spam", "phishing"):
        if key not in actions:
            raise ConfigError(f"{source}: [actions] needs {key}")
    acts = Actions(
        _number(actions["spam"], f"{source}: actions.spam"),
        _number(actions["phishing"], f"{source}: actions.phishing"),
    )

    signs = data.get("signs", {})
    if not isinstance(signs, dict):
        raise ConfigError(f"{source}: [signs] must be a table of SIGN = points")
    sign_scores: dict[str, float] = {}
    for symbol, points in signs.items():
        if symbol not in SPECS:
            raise ConfigError(f"{source}: signs.{symbol}: no such phishing sign")
        sign_scores[symbol] = _number(points, f"{source}: signs.{symbol}")

    declared = data.get("features", [])
    if not isinstance(declared, list) or not all(
        isinstance(n, str) and _FEATURE.match(n) for n in declared
    ):
        raise ConfigError(f"{source}: features must be a list of dotted lowercase names")
    extra = frozenset(declared) | frozenset(extra_features)

    items = data.get("rule", [])
    if not isinstance(items, list):
        raise ConfigError(f"{source}: rules are [[rule]] tables")
    rules: list[Rule] = []
    symbols: set[str] = set()
    for i, item in enumerate(items):
        rule = _rule(item, i, source, symbols, extra)
        symbols.add(rule.symbol)
        rules.append(rule)
    return Rules(tuple(rules), sign_scores, acts, extra)


def _rule(item: object, i: int, source: str, earlier: set[str], extra: frozenset[str]) -> Rule:
    if not isinstance(item, dict):
        raise ConfigError(f"{source}: rule #{i + 1} is not a table")
    symbol = item.get("symbol")
    where = f"{source}: rule {symbol}" if isinstance(symbol, str) else f"{source}: rule #{i + 1}"
    if not isinstance(symbol, str) or not _SYMBOL.match(symbol):
        raise ConfigError(f"{where}: symbol must be UPPER_SNAKE_CASE (2-64 characters)")
    if symbol in earlier:
        raise ConfigError(f"{where}: symbol defined twice")
    if symbol in SPECS:
        raise ConfigError(f"{where}: symbol is a phishing sign; give it points in [signs]")
    unknown = set(item) - {"symbol", "score", "when", "description", "description_ru", "group"}
    if unknown:
        raise ConfigError(f"{where}: unknown keys {sorted(unknown)}")
    if "score" not in item:
        raise ConfigError(f"{where}: score is required")
    score = _number(item["score"], f"{where}: score")
    when = _text(item, "when", where)
    description = _text(item, "description", where)
    description_ru = _text(item, "description_ru", where, description)
    group = item.get("group", "rules")
    if not isinstance(group, str) or not _GROUP.match(group):
        raise ConfigError(f"{where}: group must be a lowercase word")
    schema = _schema(earlier, extra)
    try:
        node = expr.parse(when)
        if expr.check(node, schema) == "str":
            raise expr.ExprError("the condition is text: compare it with == or in")
    except expr.ExprError as exc:
        raise ConfigError(f"{where}: when: {exc}") from exc
    return Rule(symbol, score, when, node, description, description_ru, group)


def _schema(earlier: set[str], extra: frozenset[str]) -> expr.Schema:
    known_symbols = set(SPECS) | earlier

    def type_of(name: str) -> expr.Type | None:
        if expr.is_sign_name(name):
            return "bool" if name in known_symbols else None
        if name in AUTH_CHOICES:
            return "str"
        if name in BUILTIN_FEATURES or name in extra or _SHINGLE_FEATURE.match(name):
            return "num"
        return None

    return expr.Schema(type_of, AUTH_CHOICES)


def load(path: str | Path, extra_features: Iterable[str] = ()) -> Rules:
    """Read a rules file from disk."""
    p = Path(path)
    try:
        text = p.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"rules file {p}: cannot be read: {exc}") from exc
    return parse(text, str(p), extra_features)


@functools.lru_cache(maxsize=1)
def default() -> Rules:
    """The rules shipped with pochta (``default_rules.toml``)."""
    return parse(default_text(), "default_rules.toml")


def default_text() -> str:
    return resources.files(__package__).joinpath("default_rules.toml").read_text("utf-8")


# -- evaluation -----------------------------------------------------------------------------
def evaluate(
    rules: Rules,
    feats: Mapping[str, float],
    signs: Sequence[Sign],
    auth: AuthResults | None = None,
) -> list[Hit]:
    """The hits of one letter: its signs that carry points, then every rule that fires, in
    file order. ``sign.*``, ``phish.signs`` and ``auth.*.*`` come from ``signs`` and ``auth``
    themselves; other features the letter lacks are missing (see
    :mod:`pochta.antispam.rules.expr`)."""
    hits: list[Hit] = []
    fired: set[str] = set()
    for s in signs:
        fired.add(s.symbol)
        points = rules.sign_scores.get(s.symbol)
        if points is not None:
            hits.append(
                Hit(s.symbol, points, PHISHING_GROUP, s.explanation_en, s.explanation_ru,
                    s.evidence)
            )
    words = (auth if auth is not None else NO_AUTH).values()
    auth_values = {f"auth.{k}": v for k, v in words.items()}
    derived = {**features.from_signs(signs), **features.from_auth(auth)}

    def lookup(name: str) -> expr.Value:
        if _sign_name(name):
            return name in fired
        if name in auth_values:
            return auth_values[name]
        value = derived.get(name)
        if value is None:
            value = feats.get(name)
        return None if value is None else float(value)

    for rule, condition in zip(rules.rules, _conditions(rules), strict=True):
        if expr.truth(condition(lookup)):
            fired.add(rule.symbol)
            hits.append(Hit(rule.symbol, rule.score, rule.group, rule.description,
                            rule.description_ru))
    return hits


_sign_name = functools.lru_cache(maxsize=4096)(expr.is_sign_name)
"""``expr.is_sign_name`` remembered: a lookup asks it for every name a letter's rules read."""

_COMPILED: dict[int, tuple[Rules, tuple[expr.Compiled, ...]]] = {}
"""Per rules object (by id, kept alive here so that the id stays its own): its conditions
compiled (:func:`pochta.antispam.rules.expr.compiled`). A process holds one or two."""


def _conditions(rules: Rules) -> tuple[expr.Compiled, ...]:
    found = _COMPILED.get(id(rules))
    if found is None or found[0] is not rules:
        if len(_COMPILED) >= 8:  # rules reloaded many times: the old ones are let go
            _COMPILED.clear()
        conditions = tuple(expr.compiled(r.condition) for r in rules.rules)
        found = _COMPILED[id(rules)] = (rules, conditions)
    return found[1]


def score(hits: Iterable[Hit]) -> float:
    return round(sum(h.score for h in hits), 6)


def phishing_score(hits: Iterable[Hit]) -> float:
    return round(sum(h.score for h in hits if h.group == PHISHING_GROUP), 6)


def verdict(hits: Sequence[Hit], actions: Actions) -> Verdict:
    """The verdict by points alone (the fallback when no model is configured): phishing when
    the phishing group reaches ``actions.phishing``, else spam when the score reaches
    ``actions.spam``, else ham."""
    if phishing_score(hits) >= actions.phishing:
        return "phishing"
    if score(hits) >= actions.spam:
        return "spam"
    return "ham"
