"""Spam and phishing verdicts on corpus groups never used for training (issue 6).

pochta: the shipped model (trained by ``pochta model train`` on easy-ham-1 + spam-1 and the
legitimate letters pochta generates; see its ``info``). The counters first learn the training
groups with their true labels (what a deployed pochta would know), then the evaluation groups
easy-ham-2, hard-ham-1 and spam-2 are replayed in date order, twice:

    own      the counters learn only pochta's own verdicts, as ``Scanner.learn`` counts them
             (``verdict.Counting``: every ham verdict; spam when the content alone is sure;
             phishing not at all): a mail service without people's feedback
    users    the same, plus simulated people (``--share``, default 30 %, seed 2026): the owner
             of a ham letter filed in Spam presses "not spam", the owner of a spam letter left
             in the Inbox presses "spam", an hour later; as the mailbox does, that feeds the
             unspam / complaint counters of the letter's shingles
    truth    for reference only: the counters learn every letter's true label (what the issue
             measured on main as "true labels fed"); no mail service knows them

The learned words (pochta.antispam.words) start empty and learn as a deployed pochta's would:
people's "spam" / "not spam" (users), every letter's label (truth), and with
``--from-verdicts`` pochta's own sure verdicts too.

Reported per group: spam recall, false-positive rate; letters/s and CPU ms per letter (one
process, one core), how many verdicts were counted as spam / ham / not at all.

Anchors, in the same run and on the same letters (benchmarks/anchors.py, when SpamAssassin
and Rspamd are installed): network tests off, Bayes trained on easy-ham-1 + spam-1, asked with
two letters in flight; their own verdicts (SpamAssassin: score >= 5; Rspamd: add header or
reject). ``--compare-generated`` also trains, in this run, a model without the generated
letters and evaluates it the same way (what the generated letters change).

    python benchmarks/antispam_eval.py            # all 3,046 evaluation letters
    python benchmarks/antispam_eval.py --quick    # 300 of them; anchors trained on 250 + 250
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import emit, machine, note
from pochta.antispam.model import booster as model_mod
from pochta.antispam.model.booster import Model
from pochta_factory import corpus, training

QUICK_LETTERS = 300
QUICK_TRAINING = 250  # anchors' Bayes, a class, with --quick (above their minimum of 200)


def per_group(letters: list[corpus.CorpusLetter], spam: list[bool]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for g in sorted({m.group for m in letters}):
        idx = [i for i, m in enumerate(letters) if m.group == g]
        sp = [i for i in idx if letters[i].label == "spam"]
        hm = [i for i in idx if letters[i].label == "ham"]
        out[g] = {
            "letters": len(idx),
            "spam_recall": round(sum(spam[i] for i in sp) / len(sp), 4) if sp else None,
            "false_positive_rate": round(sum(spam[i] for i in hm) / len(hm), 4) if hm else None,
            "false_positives": sum(spam[i] for i in hm) if hm else None,
        }
    return out


def pochta(
    model: Model, letters: list[corpus.CorpusLetter], share: float, from_verdicts: bool = False
) -> dict[str, Any]:
    warm = list(corpus.letters(training.TRAIN_GROUPS))
    note(f"pochta, own verdicts: {len(letters)} letters")
    own = training.evaluate(
        model, warm=warm, groups=training.EVAL_GROUPS, only=letters, from_verdicts=from_verdicts
    )
    note(f"pochta, simulated users ({share:.0%})")
    users = training.evaluate(
        model,
        warm=warm,
        groups=training.EVAL_GROUPS,
        only=letters,
        users=training.Users(share=share),
        from_verdicts=from_verdicts,
    )
    note("pochta, true labels counted (a reference no mail service has)")
    oracle = training.evaluate(
        model, warm=warm, groups=training.EVAL_GROUPS, only=letters, oracle=True
    )
    return {"own_verdicts": own, "users": users, "true_labels_counted": oracle}


def anchors(letters: list[corpus.CorpusLetter], quick: bool) -> dict[str, Any]:
    try:
        from anchors import Rspamd, SpamAssassin, corpus_training
    except ImportError as exc:  # the anchors' harness is not on this branch
        return {"skipped": str(exc)}
    ham, spam = corpus_training(limit=QUICK_TRAINING if quick else None)
    out: dict[str, Any] = {}
    for cls in (SpamAssassin, Rspamd):
        note(f"{cls.name}: training on {len(ham)} + {len(spam)}, then {len(letters)} letters")
        try:
            with cls(ham, spam) as anchor:
                cpu0 = anchor.cpu_seconds()
                t0 = time.perf_counter()
                results = anchor.scan([m.raw for m in letters], concurrency=2)
                seconds = time.perf_counter() - t0
                cpu = anchor.cpu_seconds() - cpu0
                out[cls.name] = {
                    "groups": per_group(letters, [r.is_spam for r in results]),
                    "letters_per_s": round(len(letters) / seconds, 1),
                    "cpu_ms_per_letter": round(1000 * cpu / len(letters), 2),
                    "version": anchor.version(),
                    "bayes_trained_on": {"ham": len(ham), "spam": len(spam)},
                    "bayes_fired": round(sum(r.bayes for r in results) / len(results), 4),
                    "dns_queries": len(anchor.dns_queries()),
                }
        except Exception as exc:  # an anchor that cannot start must not lose pochta's figures
            out[cls.name] = {"error": f"{type(exc).__name__}: {exc}"}
    return out


def main() -> None:
    args = _args()
    model = model_mod.load()
    if model is None:
        raise SystemExit("no shipped model: run `pochta model train` first")
    groups = training.EVAL_GROUPS
    letters = [m for _, m in training.in_time_order(corpus.letters(groups))]
    if args.quick:
        letters = letters[:: max(1, len(letters) // QUICK_LETTERS)]
    result: dict[str, Any] = {
        "benchmark": "antispam_eval",
        "machine": machine(Path(tempfile.gettempdir())),
        "letters": len(letters),
        "model": {**model.info, "threshold": model.threshold},
        "pochta": pochta(model, letters, args.share, args.from_verdicts),
    }
    if args.compare_generated:
        note("a model without the generated letters (trained now)")
        bare, info = training.train(generated=0, seed=model.info.get("seed", training.SEED))
        result["pochta_without_generated"] = {
            "threshold": info["threshold"],
            **pochta(bare, letters, args.share),
        }
    if not args.no_anchors:
        result["anchors"] = anchors(letters, args.quick)
    emit(result)


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="300 letters: check the script works")
    p.add_argument("--no-anchors", action="store_true", help="pochta only")
    p.add_argument("--share", type=float, default=0.3, help="simulated people who say so")
    p.add_argument(
        "--from-verdicts",
        action="store_true",
        help="the learned words also learn pochta's sure verdicts"
        " (antispam.learn_words_from_verdicts)",
    )
    p.add_argument(
        "--compare-generated",
        action="store_true",
        help="also train and evaluate a model without the generated letters",
    )
    return p.parse_args()


if __name__ == "__main__":
    main()
