r"""Variants of the model's training and of its word columns, measured out of fold on the
NON-sealed letters exactly as ``installation_kfold.py`` measures the factory (issue 28,
helper ``recall28``; BENCHMARKS.md). None of them was adopted: this script keeps them
reproducible. It patches the factory's own functions in this process only (the word columns
:func:`pochta_factory.training._word_columns`, the word weights' passes, the monotone
constraints of the added columns); the factory on disk is unchanged.

    python benchmarks/kfold_variants.py --tag sh --words sh          # Fisher's two halves
    python benchmarks/kfold_variants.py --tag strong --words strong  # counts of strong words
    python benchmarks/kfold_variants.py --tag p16 --passes 16        # word weights, 16 passes
    python benchmarks/kfold_variants.py --tag it800 --iterations 800
    python benchmarks/kfold_variants.py --tag lr04 --learning-rate 0.04
    python benchmarks/kfold_variants.py --tag l2_10 --l2 10 --seed 1   # CatBoost's l2_leaf_reg
    python benchmarks/kfold_variants.py --tag drop1h --drop 'shingle\..*_1h'  # columns left out
    python benchmarks/kfold_variants.py --tag c400 --counters-iterations 400  # counters model
    python benchmarks/kfold_variants.py --tag gw1 --generated-weight 1  # generated letters' weight
    python benchmarks/kfold_variants.py --tag links --tokens links   # more words of each link

Word columns (each from the same in-fold table as ``tokens.score``, never from the letter's
own label): ``sh`` the two halves of Fisher's combining that ``tokens.score`` folds into one
number, ``tokens.spam_evidence`` (1 - chi2Q of the clues' -2 sum ln(1 - f)) and
``tokens.ham_evidence`` (the same of ln f), so that a letter with strong words of both kinds
is not the same 0.5 as one with no known word; ``strong`` the numbers of clues with f >= 0.9
and f <= 0.1. Monotone: spam evidence toward spam, ham evidence toward ham.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import pickle
import re
import time
from email.utils import getaddresses
from pathlib import Path
from typing import Any

import installation_kfold as ik
from _common import emit, machine, note
from pochta.antispam import tokens as tokens_mod
from pochta.antispam.auth.results import NO_AUTH
from pochta.antispam.model import design
from pochta.antispam.verdict import KNOWN_SENDER_BELOW, known_sender, model_columns
from pochta.mime.letter import Letter, parse
from pochta_factory import corpus, fitting, legit, training, wordweights

EXTRA = {
    "sh": (("tokens.spam_evidence", 1), ("tokens.ham_evidence", -1)),
    "strong": (("tokens.spam_clues", 1), ("tokens.ham_clues", -1)),
}


def halves(table: tokens_mod.TokenTable, toks: frozenset[str]) -> tuple[float, float]:
    """Fisher's spam and ham evidence of the letter's clues (0, 0: no clue)."""
    clues = table.clues(toks)
    if not clues:
        return 0.0, 0.0
    ln_f = ln_1f = 0.0
    for _, f in clues:
        f = min(max(f, tokens_mod.CLAMP), 1.0 - tokens_mod.CLAMP)
        ln_f += math.log(f)
        ln_1f += math.log(1.0 - f)
    n = 2 * len(clues)
    return 1.0 - tokens_mod._chi2q(-2.0 * ln_1f, n), 1.0 - tokens_mod._chi2q(-2.0 * ln_f, n)


_URL_PIECES = re.compile(r"[a-z0-9]{3,20}")


def link_tokens(letter: Letter) -> set[str]:
    """``links``: each link's host and the words of its path."""
    out = set()
    for link in letter.web_links[: tokens_mod.MAX_LINK_TOKENS]:
        if link.host and link.host != link.registrable:
            out.add("urlhost:" + link.host[:100])
        _, _, rest = link.url.partition("://")
        _, slash, path = rest.partition("/")
        if slash:
            out.update("urlpath:" + w for w in _URL_PIECES.findall(path[:300].lower()))
    return out


def skip_tokens(letter: Letter) -> set[str]:
    """``skip``: a word too long for the word list, by its first character and length."""
    words = letter.text[: tokens_mod.MAX_TEXT].lower().split()
    long = {w.strip(tokens_mod.STRIP) for w in words if len(w) > tokens_mod.MAX_LEN}
    return {f"skip:{w[0]} {len(w) // 10 * 10}" for w in long if len(w) > tokens_mod.MAX_LEN}


def replyto_tokens(letter: Letter) -> set[str]:
    """``replyto``: the domains of the Reply-To addresses."""
    out = set()
    for value in letter.headers("reply-to")[:2]:
        for _, address in getaddresses([value])[:5]:
            domain = address.rpartition("@")[2].lower()
            if domain:
                out.add("replyto:" + domain[:100])
    return out


TOKENS = {"links": link_tokens, "skip": skip_tokens, "replyto": replyto_tokens}


def with_tokens(data: training.Replay, kinds: list[str]) -> None:
    """``data.tokens`` with the added words of ``kinds`` (cached by the variant and the
    sources of tokens.py and this script)."""
    key = hashlib.sha256(",".join(sorted(kinds)).encode())
    key.update(Path(tokens_mod.__file__ or "").read_bytes() + Path(__file__).read_bytes())
    path = ik.CACHE / f"tokens-{key.hexdigest()[:16]}.pickle"
    if path.is_file():
        with path.open("rb") as fh:
            data.tokens = pickle.load(fh)
        return
    samples = training.training_samples(list(corpus.unsealed()), legit.COUNT)
    note(f"adding {kinds} to the words of {len(samples)} letters")
    out = []
    for s, toks in zip(samples, data.tokens, strict=True):
        letter = parse(s.raw)
        more: set[str] = set()
        for kind in kinds:
            more |= TOKENS[kind](letter)
        out.append(frozenset(toks | more))
    data.tokens = out
    with path.open("wb") as fh:
        pickle.dump(out, fh)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tag", required=True)
    p.add_argument("--iterations", type=int, default=400)
    p.add_argument("--depth", type=int, default=6)
    p.add_argument("--learning-rate", type=float, default=fitting.LEARNING_RATE)
    p.add_argument("--ham-weight", type=float, default=training.HAM_WEIGHT)
    p.add_argument(
        "--generated-weight", type=float, default=None,
        help="a generated letter's weight (default: a ham letter's)",
    )  # fmt: skip
    p.add_argument("--words", default="", help="added word columns: sh, strong (comma list)")
    p.add_argument("--passes", type=int, default=wordweights.PASSES, help="word weights' passes")
    p.add_argument("--seed", type=int, default=training.SEED)
    p.add_argument("--l2", type=float, default=None, help="CatBoost's l2_leaf_reg (default 3)")
    p.add_argument(
        "--random-strength", type=float, default=None, help="CatBoost's random_strength (1)"
    )
    p.add_argument("--border-count", type=int, default=None, help="CatBoost's border_count")
    p.add_argument(
        "--counters-iterations", type=int, default=200, help="the counters model's rounds"
    )
    p.add_argument("--counters-depth", type=int, default=4, help="the counters model's depth")
    p.add_argument("--drop", default="", help="columns left out of the model: a regex (fullmatch)")
    p.add_argument("--tokens", default="", help=f"added words: {', '.join(TOKENS)} (comma list)")
    args = p.parse_args()
    extra_params = {
        k: v
        for k, v in (
            ("l2_leaf_reg", args.l2),
            ("random_strength", args.random_strength),
            ("border_count", args.border_count),
        )
        if v is not None
    }
    if extra_params:
        params = fitting._params
        fitting._params = lambda *a: {**params(*a), **extra_params}  # type: ignore[assignment]
    extra = [w for w in args.words.split(",") if w]
    added: list[str] = []
    for name in extra:
        for column, sign in EXTRA[name]:
            added.append(column)
            design.MONOTONE = (*design.MONOTONE, (re.compile(re.escape(column) + "$"), sign, ""))
    fit_weights = wordweights.fit_weights
    wordweights.fit_weights = lambda t, y, seed=0, passes=args.passes: fit_weights(  # type: ignore[assignment]
        t, y, seed=seed, passes=args.passes
    )
    plain = training._word_columns

    def word_columns(table: tokens_mod.TokenTable, toks: frozenset[str]) -> dict[str, float]:
        out = plain(table, toks)
        if "sh" in extra:
            out["tokens.spam_evidence"], out["tokens.ham_evidence"] = halves(table, toks)
        if "strong" in extra:
            clues = table.clues(toks)
            out["tokens.spam_clues"] = float(sum(f >= 0.9 for _, f in clues))
            out["tokens.ham_clues"] = float(sum(f <= 0.1 for _, f in clues))
        return out

    training._word_columns = word_columns  # type: ignore[assignment]
    started = time.perf_counter()
    data, hashes, phishing = ik.replayed(legit.COUNT)
    kinds = [k for k in args.tokens.split(",") if k]
    if kinds:
        with_tokens(data, kinds)
    columns = design.model_columns(model_columns()) + added
    if args.drop:
        dropped = re.compile(args.drop)
        columns = [c for c in columns if not dropped.fullmatch(c)]
        note(f"{len(columns)} columns after --drop")
    n = len(data.rows)
    part = [h % 5 if h >= 0 else -1 for h in hashes]
    oof = [0.0] * n
    for k in range(5):
        train_idx = [i for i in range(n) if part[i] != k]
        test_idx = [i for i in range(n) if part[i] == k]
        train_rows, test_rows = training.token_rows(data, train_idx, test_idx)
        labels = [data.labels[i] for i in train_idx]
        weights = [1.0 if y else args.ham_weight for y in labels]
        if args.generated_weight is not None:
            weights = [
                args.generated_weight if data.groups[i] == training.GENERATED else w
                for i, w in zip(train_idx, weights, strict=True)
            ]
        model = fitting.fit(train_rows, labels, columns, iterations=args.iterations,
                            seed=args.seed, depth=args.depth, weights=weights,
                            counters_iterations=args.counters_iterations,
                            counters_depth=args.counters_depth,
                            learning_rate=args.learning_rate)  # fmt: skip
        for i, prob in zip(test_idx, model.probabilities(test_rows), strict=True):
            oof[i] = prob
        note(f"fold {k + 1}/5 at {time.perf_counter() - started:.0f} s")
    real = [i for i in range(n) if part[i] >= 0]
    phishing = [
        ph
        and not (oof[i] < KNOWN_SENDER_BELOW and known_sender(row, ik.signs_of(row), NO_AUTH, ()))
        for i, (ph, row) in enumerate(zip(phishing, data.rows, strict=True))
    ]
    with (ik.CACHE / f"oof{args.tag}.pickle").open("wb") as fh:
        pickle.dump({"oof": oof, "part": part}, fh)
    threshold = training._threshold([oof[i] for i in real], [data.labels[i] for i in real])
    out: dict[str, Any] = {
        "benchmark": "kfold_variants",
        "machine": machine(Path(ik.CACHE)),
        "args": vars(args),
        "threshold": threshold,
        "groups": ik.figures(data, real, oof, phishing, threshold),
        "at": {
            str(cut): ik.figures(data, real, oof, phishing, cut, short=True)
            for cut in (0.5, 0.7, 0.8, 0.9)
        },
        **ik.ranking(oof, data.labels, real),
        "seconds": round(time.perf_counter() - started, 1),
    }
    emit(out)


if __name__ == "__main__":
    main()
