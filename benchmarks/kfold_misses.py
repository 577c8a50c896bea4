"""The letters an ``installation_kfold.py`` run files wrongly out of fold (issue 28): every
non-sealed spam letter it lets through and every ham letter it files as spam, with its
out-of-fold P(spam), the signs it showed and the content features that most often tell
spam from ham. Reads the run's cached replay and out-of-fold file (no letter is read again,
no sealed letter was ever read: the replay holds only :func:`pochta_factory.corpus.unsealed`).

    python benchmarks/installation_kfold.py --tag base      # first
    python benchmarks/kfold_misses.py --tag base [--threshold 0.6154] [--replay FILE]
"""

from __future__ import annotations

import argparse
import pickle
from pathlib import Path
from typing import Any

from _common import emit
from installation_kfold import CACHE, replayed, signs_of
from pochta.antispam.auth.results import NO_AUTH
from pochta.antispam.verdict import KNOWN_SENDER_BELOW, known_sender
from pochta_factory import legit, training

SHOWN = (
    "rules.content_score",
    "rules.phishing_score",
    "tokens.score",
    "tokens.weights",
    "text.words",
    "links.count",
    "links.own_share",
    "headers.has_list_unsubscribe",
    "headers.message_id_aligned",
    "headers.return_path_aligned",
    "sender.freemail",
    "html.only",
)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tag", default="")
    p.add_argument("--threshold", type=float, default=None)
    p.add_argument("--generated", type=int, default=legit.COUNT)
    p.add_argument(
        "--replay", type=Path, default=None, help="the run's replay file (default: the one of "
        "the code as it is now)"
    )  # fmt: skip
    args = p.parse_args()
    if args.replay is not None:
        with args.replay.open("rb") as fh:
            data, _hashes, phishing = pickle.load(fh)
    else:
        data, _hashes, phishing = replayed(args.generated)
    with (CACHE / f"oof{args.tag}.pickle").open("rb") as fh:
        saved = pickle.load(fh)
    oof, part = saved["oof"], saved["part"]
    real = [i for i in range(len(oof)) if part[i] >= 0]
    # as installation_kfold counts it: a known sender's letter the model is sure of is ham
    phishing = [
        ph and not (oof[i] < KNOWN_SENDER_BELOW and known_sender(row, signs_of(row), NO_AUTH, ()))
        for i, (ph, row) in enumerate(zip(phishing, data.rows, strict=True))
    ]
    cut = args.threshold
    if cut is None:
        cut = training._threshold([oof[i] for i in real], [data.labels[i] for i in real])
    wrong: list[dict[str, Any]] = []
    for i in real:
        spam = oof[i] >= cut or phishing[i]
        if bool(spam) == bool(data.labels[i]):
            continue
        row = data.rows[i]
        wrong.append(
            {
                "letter": f"{data.groups[i]}/{data.names[i][:5]}",
                "label": "spam" if data.labels[i] else "ham",
                "p": round(oof[i], 4),
                "phishing": phishing[i],
                "signs": sorted(
                    k.removeprefix("sign.") for k, v in row.items() if k.startswith("sign.") and v
                ),
                **{k: round(row[k], 3) for k in SHOWN if k in row},
            }
        )
    wrong.sort(key=lambda w: (w["label"], w["letter"]))
    emit({"benchmark": "kfold_misses", "tag": args.tag, "threshold": cut, "wrong": wrong})


if __name__ == "__main__":
    main()
