"""What every letter worker reads, built once in the fork server that forks them.

The letters' pool preloads this module (``pochta.mailbox.intake.POOL_MODULES``): the fork
server imports it once, before it forks a worker, so each worker (and each replacement of a
worker killed at its deadline) starts with the format characters' tables and the public
suffix list already built (:func:`pochta.mime.normalize.warm`: ~0.2 s of CPU otherwise spent
by every worker), and shares their pages with its siblings. ``init_pool_process`` calls the
same function again, which then does nothing; nothing else imports this module.

It also warms the phrase families' RE2 set (:func:`pochta.antispam.signs.wording.warm`),
whose automaton RE2 builds lazily, a state at a time as texts reach it: a new worker's first
hundreds of letters built most of it (~1-1.6 ms a letter of its signs stage over its first 300,
the set alone). The fork server reads ``POCHTA_WARM_WORDS`` words (default
:data:`pochta.config.WARM_WORDS`; 0 in the tests' pochtas: most never judge a letter) drawn
from the shipped model's token table (the words of the letters it was trained on, as often as
they were seen there; ~0.25 s of CPU, once a server) before it forks, and every worker starts
with the states they reached. The warm-up only fills RE2's cache: a token table that cannot be
read leaves the set cold, it never stops the fork server (an exception here but ImportError
would: every worker's start would fail with the fork server's EOF).

What the fork server holds once it has loaded these modules, a worker leaves out of its garbage
collections' walks (``gc.freeze`` at its start: :func:`pochta.cpupool.freeze`), so its full
collections neither spend its CPU on those objects nor copy their pages. Importing this module
freezes nothing: a process that imports it (the tests) keeps its collector as it was.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from pathlib import Path

from pochta.antispam import tokens
from pochta.antispam.model import booster
from pochta.antispam.signs import (
    checks,  # noqa: F401  (its import registers the families)
    wording,
)
from pochta.config import warm_words
from pochta.errors import ConfigError
from pochta.mime import normalize

WARM_TEXT_WORDS = 500  # words a warming text holds (a letter's body, about)


def sample_texts(table: tokens.TokenTable, words: int, seed: int = 0) -> Iterator[str]:
    """Texts of ``words`` words in all drawn from ``table``'s tokens, each as often as the
    training letters held it, in lines and sentences (deterministic for a ``seed``)."""
    vocabulary = list(table.counts)
    if not vocabulary:
        return
    weights = list(itertools.accumulate(s + h for s, h in table.counts.values()))
    rng = random.Random(seed)
    for start in range(0, words, WARM_TEXT_WORDS):
        drawn = rng.choices(vocabulary, cum_weights=weights, k=min(WARM_TEXT_WORDS, words - start))
        yield "".join(
            w + ("\n" if i % 12 == 11 else ". " if i % 9 == 8 else " ") for i, w in enumerate(drawn)
        )


def warm(words: int | None = None, directory: Path | None = None) -> None:
    """The tables every letter reads, and the phrase families' set warmed with ``words``
    words (``POCHTA_WARM_WORDS``'s; a value it refuses: none) of the token table in
    ``directory`` (the shipped model's)."""
    normalize.warm()
    if words is None:
        try:
            words = warm_words()
        except ConfigError:  # serve refused it before its pool started; a test's pool: no warm-up
            return
    if words <= 0:
        return
    try:
        table = tokens.load(directory or booster.shipped_dir(), keep=False)
    except ConfigError:  # the live model's own table, if it is this one, stops the build
        return
    if table is not None:
        wording.warm(sample_texts(table, words))


warm()
