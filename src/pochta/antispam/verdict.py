"""A letter's verdict, and why: features -> rules -> model -> ham / spam / phishing.

    features   content (features.py), phishing signs (phishing.py), sender authentication
               (auth.py), and the shingles' counters over 1 h / 24 h / 14 d
               (``shingle.<type>.<stat>_<window>``: volume, spam / ham / complaint ratios)
    rules      points per symbol from the rules file (rules.py); the phishing group decides
               "phishing" on its own
    model      CatBoost over the same features plus the rule score (model.py): the
               probability that the letter is spam; without a model, the rule score and the
               rules file's ``[actions] spam`` threshold decide

Nothing here does I/O except through what it is given: counters (may be None), a DNS
resolver (may be None: then authentication is not run).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pochta.antispam import auth as auth_mod
from pochta.antispam import features as feats_mod
from pochta.antispam import phishing, rules
from pochta.antispam.counters.buckets import Counts, parse_window
from pochta.antispam.counters.service import Counters
from pochta.antispam.letter import Letter
from pochta.antispam.model import Model
from pochta.antispam.resolver import Resolver
from pochta.antispam.shingles import (
    UNIQUE_TYPES,
    Envelope,
    Shingle,
    ShingleType,
    extract,
    query_refs,
    update_refs,
)
from pochta.antispam.signs import Sign

Label = Literal["ham", "spam", "phishing"]

WINDOWS = ("1h", "24h", "14d")
STATS = ("volume", "spam_ratio", "ham_ratio", "complaint_ratio", "unspam_ratio", "read_ratio")
SHINGLE_FEATURES: tuple[str, ...] = tuple(
    f"shingle.{int(t)}.{stat}_{w}" for t in ShingleType for stat in STATS for w in WINDOWS
)


def shingle_features(
    shingles: Sequence[Shingle], counts: Sequence[dict[str, Counts]]
) -> dict[str, float]:
    """Per shingle type and window: ``volume`` = log(1 + letters seen), and the share of them
    counted spam / ham, complained about, un-spammed, read. A ratio is absent (not 0) when the
    type was never seen in the window: "unknown" is not "clean"."""
    sums: dict[tuple[int, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for shingle, by_window in zip(shingles, counts, strict=True):
        for window, values in by_window.items():
            acc = sums[(int(shingle.type), window)]
            for kind, value in values.items():
                acc[kind] += value
    out: dict[str, float] = {}
    for (t, window), c in sums.items():
        seen = c["ham"] + c["spam"]
        if t in {int(u) for u in UNIQUE_TYPES}:  # distinct pairs: the count is the feature
            seen = max(seen, c["ham"] + c["spam"] + c["complaint"])
        out[f"shingle.{t}.volume_{window}"] = math.log1p(seen)
        if seen:
            out[f"shingle.{t}.spam_ratio_{window}"] = c["spam"] / seen
            out[f"shingle.{t}.ham_ratio_{window}"] = c["ham"] / seen
            out[f"shingle.{t}.complaint_ratio_{window}"] = c["complaint"] / seen
            out[f"shingle.{t}.unspam_ratio_{window}"] = c["unspam"] / seen
            out[f"shingle.{t}.read_ratio_{window}"] = c["read"] / seen
    return out


@dataclass(frozen=True)
class Verdict:
    label: Label
    probability: float | None  # the model's P(spam); None without a model
    score: float  # the rules' points
    hits: list[rules.Hit]
    signs: list[Sign]
    auth: auth_mod.AuthResults
    features: dict[str, float] = field(repr=False)
    shingles: list[Shingle] = field(repr=False, default_factory=list)

    @property
    def folder(self) -> str:
        return "Inbox" if self.label == "ham" else "Spam"

    def header(self) -> str:
        """The value of ``X-Pochta-Spam``."""
        p = "" if self.probability is None else f" probability={self.probability:.4f};"
        symbols = ",".join(h.symbol for h in self.hits if h.score)[:600]
        return f"{self.label};{p} score={self.score:.2f}; symbols={symbols or '-'}"

    def as_dict(self, authserv_id: str = "pochta") -> dict[str, Any]:
        return {
            "verdict": self.label,
            "probability": self.probability,
            "score": self.score,
            "rules": [h.as_dict() for h in self.hits],
            "phishing_signs": [s.as_dict() for s in self.signs],
            "authentication_results": self.auth.header(authserv_id),
        }


class Scanner:
    """Scores letters. ``counters`` feed the shingle features (and learn from verdicts via
    ``learn``); ``resolver`` enables SPF / DKIM / DMARC; ``model`` the CatBoost probability."""

    def __init__(
        self,
        *,
        rules_: rules.Rules | None = None,
        model: Model | None = None,
        counters: Counters | None = None,
        resolver: Resolver | None = None,
        authserv_id: str = "pochta",
    ) -> None:
        self.rules = rules_ if rules_ is not None else rules.default()
        self.model = model
        self.counters = counters
        self.resolver = resolver
        self.authserv_id = authserv_id
        self._windows = [parse_window(w) for w in WINDOWS]

    def features(
        self,
        raw: bytes,
        envelope: Envelope | None = None,
        helo: str | None = None,
        now: float | None = None,
    ) -> tuple[Letter, list[Sign], auth_mod.AuthResults, dict[str, float], list[Shingle]]:
        letter = Letter.parse(raw, envelope)
        signs = phishing.check(letter)
        if self.resolver is not None and envelope is not None and envelope.ip:
            ar = auth_mod.authenticate(
                raw,
                ip=envelope.ip,
                mail_from=envelope.sender or "",
                helo=helo or "",
                resolver=self.resolver,
                summary=letter.summary,
            )
        else:
            ar = auth_mod.NO_AUTH
        f = {
            **feats_mod.extract(letter),
            **feats_mod.from_signs(signs),
            **feats_mod.from_auth(ar),
        }
        shingles = extract(raw, envelope)
        if self.counters is not None and shingles:
            counts = self.counters.query(query_refs(shingles), self._windows, now=now)
            f.update(shingle_features(shingles, counts))
        return letter, signs, ar, f, shingles

    def scan(
        self,
        raw: bytes,
        envelope: Envelope | None = None,
        helo: str | None = None,
        now: float | None = None,
    ) -> Verdict:
        _letter, signs, ar, f, shingles = self.features(raw, envelope, helo, now)
        hits = rules.evaluate(self.rules, f, signs, ar)
        score = rules.score(hits)
        by_rules = rules.verdict(hits, self.rules.actions)
        probability = None
        label: Label
        if by_rules == "phishing":
            label = "phishing"
        elif self.model is not None:
            probability = self.model.probability(
                {**f, "rules.score": score, "rules.phishing_score": rules.phishing_score(hits)}
            )
            label = "spam" if probability >= self.model.threshold else "ham"
        else:
            label = "spam" if by_rules == "spam" else "ham"
        return Verdict(label, probability, score, hits, signs, ar, f, shingles)

    def learn(self, verdict: Verdict, at: float | None = None) -> None:
        """Count a delivered letter's shingles with its verdict (ham / spam)."""
        if self.counters is None or not verdict.shingles:
            return
        kind = "ham" if verdict.label == "ham" else "spam"
        self.counters.update(update_refs(verdict.shingles), kind, at=at, wait=0)


MODEL_EXTRA = ("rules.score", "rules.phishing_score")


def model_columns() -> list[str]:
    """The model's input columns, in order."""
    return list(
        dict.fromkeys(
            [
                *feats_mod.FEATURES,
                *(f"sign.{s}" for s in _symbols()),
                "phish.signs",
                *feats_mod.AUTH_FEATURES,
                *SHINGLE_FEATURES,
                *MODEL_EXTRA,
            ]
        )
    )


def _symbols() -> tuple[str, ...]:
    from pochta.antispam.signs import SYMBOLS

    return SYMBOLS
