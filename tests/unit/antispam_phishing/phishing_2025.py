"""The 2025 phishing set (tests/data/phishing_2025): its manifest, and each letter scanned as
``POST /v1/scan`` scans a raw letter (no envelope, no DNS) by a fresh Scanner with the
shipped model. Shared by its test and benchmarks/sign_precision.py."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from pochta.antispam.rules import ruleset
from pochta.antispam.verdict import Scanner, Verdict

DATA = Path(__file__).resolve().parents[2] / "data" / "phishing_2025"


@dataclass(frozen=True)
class Case:
    file: str
    lang: str
    kind: str  # "phishing" or "ham"
    expect: tuple[str, ...]
    what: str

    @property
    def raw(self) -> bytes:
        """The letter as SMTP carries it: CRLF line ends."""
        return (DATA / self.file).read_bytes().replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")


def cases() -> list[Case]:
    with (DATA / "manifest.toml").open("rb") as fh:
        data = tomllib.load(fh)
    return [
        Case(e["file"], e["lang"], e["kind"], tuple(e["expect"]), e["what"]) for e in data["letter"]
    ]


def scanner() -> Scanner:
    """A fresh Scanner with the shipped model and the default rules, as a new server has."""
    from pochta.antispam.model import booster

    return Scanner(model=booster.load())


def named(verdict: Verdict, rules: ruleset.Rules) -> list[str]:
    """The phishing signs of a verdict that carry points."""
    return [s.symbol for s in verdict.signs if rules.sign_scores.get(s.symbol, 0.0) > 0]
