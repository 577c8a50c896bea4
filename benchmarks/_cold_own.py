"""The cold-start protocol's ``own`` row alone (``antispam_eval.py`` without the users and
truth modes nor the anchors), for a loaded machine: the shipped model, the counters warmed
with the non-sealed letters of easy-ham-1 + spam-1, then the non-sealed letters of easy-ham-2,
hard-ham-1 and spam-2 replayed in date order learning pochta's own verdicts.

    python benchmarks/_cold_own.py [--model DIR]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from _common import emit, machine
from pochta.antispam.model import booster
from pochta_factory import corpus, training


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", type=Path, help="a model directory (default: the shipped one)")
    args = p.parse_args()
    started = time.perf_counter()
    model = booster.load(args.model) if args.model else booster.load()
    if model is None:
        raise SystemExit("no shipped model")
    letters = [m for _, m in training.in_time_order(corpus.unsealed(training.EVAL_GROUPS))]
    warm = list(corpus.unsealed(training.TRAIN_GROUPS))
    own = training.evaluate(model, warm=warm, groups=training.EVAL_GROUPS, only=letters)
    emit(
        {
            "benchmark": "cold_own",
            "machine": machine(Path(tempfile.gettempdir())),
            "pochta": {"own_verdicts": own},
            "seconds": round(time.perf_counter() - started, 1),
            "loadavg_at_end": list(os.getloadavg()),
        }
    )


if __name__ == "__main__":
    main()
