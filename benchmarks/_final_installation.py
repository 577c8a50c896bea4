"""The installation protocol's pochta row without the ``pochta model train`` subprocess, for a
machine too loaded to run it (BENCHMARKS.md, the second sealed run): the replay of every
non-sealed letter and the generated ones (:func:`installation_kfold.replayed`: what
``pochta model train --ham --spam`` replays), one :func:`pochta_factory.fitting.fit` with the
factory's defaults, the ``--threshold`` a k-fold run chose (``installation_kfold.py``), then
:func:`pochta_factory.training.evaluate` on the sealed letters as ``antispam_eval.py
--protocol installation`` does. ``--anchors``: SpamAssassin + Bayes and Rspamd + Bayes
(:func:`antispam_eval.anchors`: Bayes trained on the same non-sealed letters, network tests
off) on the same sealed letters in the same run, after pochta; an anchor whose daemon is not
installed reports its error and pochta's figures stay.

    python benchmarks/_final_installation.py --threshold 0.820
    python benchmarks/_final_installation.py --threshold 0.820 --anchors
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import emit, machine, note
from antispam_eval import anchors, goals_met, split_sealed
from installation_kfold import replayed
from pochta.antispam.model import design
from pochta.antispam.verdict import model_columns
from pochta_factory import legit, training
from pochta_factory.fitting import fit


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threshold", type=float, required=True)
    p.add_argument("--anchors", action="store_true", help="both anchors on the same letters")
    args = p.parse_args()
    started = time.perf_counter()
    data, _, _ = replayed(legit.COUNT)
    columns = design.model_columns(model_columns())
    everything = range(len(data.rows))
    rows, _ = training.token_rows(data, everything)
    model = fit(rows, data.labels, columns, iterations=400, seed=training.SEED,
                threshold=args.threshold, weights=training.weights_of(data.labels))  # fmt: skip
    model.tokens = training.word_knowledge(data, everything)  # with its word weights
    note(f"fitted at {time.perf_counter() - started:.0f} s")
    train_letters, sealed = split_sealed()
    groups = tuple(sorted({m.group for m in sealed}))
    own = training.evaluate(model, warm=train_letters, groups=groups, only=sealed)
    note(f"pochta done at {time.perf_counter() - started:.0f} s")
    result: dict[str, Any] = {
        "benchmark": "final_installation",
        "machine": machine(Path(tempfile.gettempdir())),
        "threshold": args.threshold,
        "ham_weight": training.HAM_WEIGHT,
        "word_weights": training.WORD_WEIGHTS,
        "pochta": {"own_verdicts": own},
    }
    if args.anchors:  # pochta's figures first: the anchors take minutes more
        note(json.dumps({"pochta": result["pochta"]}))
        ham = [m.raw for m in train_letters if m.label == "ham"]
        spam = [m.raw for m in train_letters if m.label == "spam"]
        result["anchors"] = anchors(sealed, False, (ham, spam))
        result["goals_met"] = goals_met(result)
    result["seconds"] = round(time.perf_counter() - started, 1)
    result["loadavg_at_end"] = list(os.getloadavg())
    emit(result)


if __name__ == "__main__":
    main()
