"""A phishing sign as the banner shows it: the explanation in the reader's language and the
evidence laid out side by side — the look-alike domain next to the one it imitates, what a
link shows next to where it leads, the Received hosts next to the From domain.

The signs' evidence (``pochta.antispam.signs``) is a few strings in fixed shapes:
``"paypa1.com ≈ paypal (PayPal)"``, ``"www.paypal.com → paypa1-secure.com"``,
``"From: example.org"``, ``"Return-Path: bounce@x.test"``, a quoted phrase. This module only
reads those shapes; anything else is shown as it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pochta.antispam.signs.registry import Sign
from pochta.server.web.i18n import Lang


@dataclass(frozen=True, slots=True)
class Piece:
    """One piece of evidence. ``kind``: ``lookalike`` (``left`` imitates ``right``, the
    organization in ``note``), ``link`` (shows ``left``, leads to ``right``), ``received``
    (the hosts in ``left`` next to the From domain in ``right``), ``labelled`` (``note``:
    ``left``) or ``plain`` (``left``)."""

    kind: str
    left: str
    right: str = ""
    note: str = ""


@dataclass(frozen=True, slots=True)
class ShownSign:
    symbol: str
    explanation: str
    pieces: tuple[Piece, ...]


LABELS = ("From", "Return-Path", "Reply-To")


def _labelled(item: str) -> tuple[str, str] | None:
    for label in LABELS:
        if item.startswith(label + ": "):
            return label, item[len(label) + 2 :]
    return None


def pieces(symbol: str, evidence: Sequence[str]) -> tuple[Piece, ...]:
    if symbol == "PHISH_RECEIVED_MISMATCH":
        hosts = [e for e in evidence if _labelled(e) is None]
        froms = [lab[1] for e in evidence if (lab := _labelled(e)) is not None]
        return (Piece("received", ", ".join(hosts), ", ".join(froms)),)
    out = []
    for item in evidence:
        if " ≈ " in item:
            left, right = item.split(" ≈ ", 1)
            name, _, org = right.partition(" (")
            out.append(Piece("lookalike", left, name, org.removesuffix(")")))
        elif " → " in item:
            left, right = item.split(" → ", 1)
            out.append(Piece("link", left, right))
        elif (lab := _labelled(item)) is not None:
            out.append(Piece("labelled", lab[1], note=lab[0]))
        else:
            out.append(Piece("plain", item))
    return tuple(out)


def shown(signs: Sequence[Sign], lang: Lang) -> list[ShownSign]:
    return [
        ShownSign(
            s.symbol,
            s.explanation_ru if lang == "ru" else s.explanation_en,
            pieces(s.symbol, s.evidence),
        )
        for s in signs
    ]
