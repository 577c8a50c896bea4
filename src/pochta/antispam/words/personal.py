"""A user's own words in the verdict of the letters they receive.

Every "spam" / "not spam" a user says (:mod:`pochta.mailbox.feedback`) teaches the
installation's words and the user's own table (owner = the account's id). The installation's
table moves everyone's statistic a little; the user's own is read for that user only, as
SpamAssassin's per-user Bayes is. SpamAssassin's stands alone, so it waits for 200 letters of
each kind before it says anything; pochta's own table is read *on top of* the shipped and the
installation's, which already know most words, so it can count much sooner:

    the rule (:class:`PersonalRule`): once a user has taught at least ``min_spam`` letters as
    spam and ``min_ham`` as not spam, a letter's word statistic for that user reads
    shipped + installation + ``weight`` x the user's own counts (words and letters alike);
    before that, the user's letters get the installation's verdict unchanged.

Since the user's word is already in the installation's table once, ``weight`` is how much more
it counts for its own author. The figures behind the defaults: BENCHMARKS.md ("Personal
learning", ``benchmarks/personal_replay.py``).

Cheap for users who taught nothing: :class:`Personal` keeps the set of owners past the rule,
refreshed every ``refresh`` seconds from the store (one query per owner that learned anything,
made by one caller while the others go on with the set they have); for anyone else
``Scanner.for_owner`` returns the verdict it was given without reading anything.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from pochta.antispam import tokens as tokens_mod
from pochta.antispam.words import (
    FEEDBACK_WEIGHT,
    INSTALLATION,
    MAX_HASHES,
    Words,
    merged_table,
)
from pochta.errors import StorageError


@dataclass(frozen=True, slots=True)
class PersonalRule:
    min_spam: int = 3  # letters the user said were spam
    min_ham: int = 1  # letters the user said were not spam
    weight: int = 2  # how many times the user's counts are added to the installation's
    share: float = 0.0  # > 0: blend frequencies instead (see :func:`frequency_blend`)
    full_at: int = 20  # letters taught at which the blend reaches ``share``

    def ready(self, totals: tuple[int, int]) -> bool:
        """Whether an owner with these learned letters (weighted, as stored) counts."""
        spam, ham = totals
        return spam >= self.min_spam * FEEDBACK_WEIGHT and ham >= self.min_ham * FEEDBACK_WEIGHT


def blended(
    installation: Mapping[int, tuple[int, int]],
    installation_totals: tuple[int, int],
    own: Mapping[int, tuple[int, int]],
    own_totals: tuple[int, int],
    weight: int,
) -> tuple[dict[int, tuple[int, int]], tuple[int, int]]:
    """The installation's counts plus ``weight`` x the owner's, words and letters (pure)."""
    out = dict(installation)
    for h, (s, m) in own.items():
        a, b = out.get(h, (0, 0))
        out[h] = (a + weight * s, b + weight * m)
    totals = (
        installation_totals[0] + weight * own_totals[0],
        installation_totals[1] + weight * own_totals[1],
    )
    return out, totals


def frequency_blend(
    tokens: Sequence[str],
    hashes: Sequence[int],
    shipped: tokens_mod.TokenTable | None,
    installation: Mapping[int, tuple[int, int]],
    installation_totals: tuple[int, int],
    own: Mapping[int, tuple[int, int]],
    own_totals: tuple[int, int],
    share: float,
    key: bytes = b"",
) -> tokens_mod.TokenTable:
    """One letter's table where each word's frequency among spam (and among ham) is
    ``(1 - share) x`` the installation's (shipped + learned) ``+ share x`` the owner's own,
    for each class the owner taught (pure): the owner's few letters weigh as much as
    ``share`` of everything else, however large the rest is."""
    base = merged_table(tokens, hashes, shipped, installation, installation_totals, key)
    big_s, big_h = max(base.spam_letters, 1), max(base.ham_letters, 1)
    own_s, own_h = own_totals
    counts: dict[str, tuple[int, int]] = {}
    for token, h in zip(tokens, hashes, strict=True):
        s, m = base.counts.get(token, (0, 0))
        fs, fh = s / big_s, m / big_h
        o = own.get(h)
        if o is not None:
            if own_s > 0:
                fs = (1 - share) * fs + share * min(1.0, o[0] / own_s)
            if own_h > 0:
                fh = (1 - share) * fh + share * min(1.0, o[1] / own_h)
        elif own_s > 0 or own_h > 0:
            fs = (1 - share) * fs if own_s > 0 else fs
            fh = (1 - share) * fh if own_h > 0 else fh
        ns, nh = round(fs * big_s), round(fh * big_h)
        if ns or nh:
            counts[token] = (ns, nh)
    return tokens_mod.TokenTable(counts, big_s, big_h)


class Personal:
    """Which owners' words count (:class:`PersonalRule`), and their blended tables."""

    def __init__(
        self,
        words: Words,
        rule: PersonalRule | None = None,
        *,
        refresh: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.words = words
        self.rule = rule if rule is not None else PersonalRule()
        self.refresh_seconds = refresh
        self.clock = clock
        self._ready: frozenset[int] = frozenset()
        self._next = 0.0  # when the set is refreshed next (0: at first use)
        self._refreshing = threading.Lock()

    def ready(self, owner: int) -> bool:
        """Whether ``owner``'s words count (the cached set; refreshed when stale)."""
        if self.clock() >= self._next and self._refreshing.acquire(blocking=False):
            try:
                self.refresh()
            except StorageError:
                self._next = self.clock() + self.refresh_seconds  # the old set, until then
            finally:
                self._refreshing.release()
        return owner in self._ready

    def refresh(self) -> frozenset[int]:
        """Read which owners are past the rule now (StorageError)."""
        ready = frozenset(
            owner
            for owner in self.words.store.owners()
            if owner != INSTALLATION and self.rule.ready(self.words.totals(owner))
        )
        self._ready = ready
        self._next = self.clock() + self.refresh_seconds
        return ready

    def table(
        self, owner: int, tokens: Sequence[str], hashes: Sequence[int]
    ) -> tokens_mod.TokenTable:
        """One letter's table for ``owner``: shipped + installation + weight x own
        (StorageError)."""
        w = self.words
        hashes = list(hashes)[:MAX_HASHES]
        tokens = list(tokens)[: len(hashes)]
        inst, inst_totals = w.learned(INSTALLATION, hashes)
        own, own_totals = w.learned(owner, hashes)
        rule = self.rule
        if rule.share > 0:
            taught = (own_totals[0] + own_totals[1]) / FEEDBACK_WEIGHT
            share = rule.share * min(1.0, taught / max(rule.full_at, 1))
            return frequency_blend(
                tokens, hashes, w.shipped, inst, inst_totals, own, own_totals, share, w.key
            )
        learned, totals = blended(inst, inst_totals, own, own_totals, self.rule.weight)
        return merged_table(tokens, hashes, w.shipped, learned, totals, w.key)
