"""Every module-level regex of the modules that read letter text, against generic hostile runs.

The crafted letters (tests/crafted.py) aim at the ways known before; this looks for the ones
not thought of. Each pattern runs with ``finditer`` — the most demanding way to call it: a
match tried at every position — over runs of small pieces that sit on the border of common
character classes (a dash is a word character in ``[\\w'-]`` and a gap in ``\\W``; a dot ends
a label and a sentence; digits and blanks make amounts), after a few words patterns start
with. 10x the text may cost at most GROWTH x the CPU. Patterns that pochta only ever calls
anchored (``match`` / ``fullmatch`` on a bounded value) are tried with ``match``.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.cputime import cpu

MODULES = (
    "pochta.antispam.signs.wording",
    "pochta.antispam.signs.checks",
    "pochta.antispam.signs.links",
    "pochta.antispam.signs.extortion",
    "pochta.antispam.signs.protected",
    "pochta.antispam.features",
    "pochta.antispam.shingles.extract",
    "pochta.mime.letter",
    "pochta.mime.html",
    "pochta.mime.headers",
    "pochta.mime.normalize",
)
ANCHORED = {"checks._HOSTNAME", "checks._RECEIVED_FROM", "headers._MEDIA_TYPE",
            "headers._HEADER_LINE", "links._SHOWN_URL", "links._AUTHORITY"}  # fmt: skip
PIECES = ("-", "'", "a-", "a.", "a ", "1 ", "1,", "1.", "a@", ". ", "  ", "a\n", "а-", "а ",
          "$1", "re:", "[a]", "http://", "www.", "%41", "<a", "a'", "_")  # fmt: skip
PREFIXES = ("", "send ", "dear ", "карт")
SMALL, BIG = 1_000, 10_000
GROWTH = 20
FLOOR = 0.002  # s: CPU below this counts as this (the clock is coarse)
WALL = 240  # s for all of them in the child (about 10 s on an idle core)


def _patterns() -> list[tuple[str, re.Pattern[str]]]:
    out = []
    for name in MODULES:
        module = importlib.import_module(name)
        short = name.rsplit(".", 1)[1]
        for attr, value in vars(module).items():
            values = value.items() if isinstance(value, dict) else [(None, value)]
            for key, rx in values:
                if isinstance(rx, re.Pattern) and isinstance(rx.pattern, str):
                    out.append((f"{short}.{attr}" + (f"[{key}]" if key else ""), rx))
    return out


PATTERNS = _patterns()


def _runner(name: str, rx: re.Pattern[str]) -> Callable[[str], object]:
    if name in ANCHORED:
        return rx.match
    return lambda text: sum(1 for _ in rx.finditer(text))


def slow_cases(name: str, rx: re.Pattern[str]) -> list[str]:
    run = _runner(name, rx)
    slow = []
    for piece in PIECES:
        for prefix in PREFIXES:
            small = prefix + piece * (SMALL // len(piece))
            big = prefix + piece * (BIG // len(piece))
            t_small = max(cpu(lambda: run(small), 1.0), FLOOR)  # noqa: B023
            budget = GROWTH * t_small
            t_big = cpu(lambda: run(big), budget)  # noqa: B023
            for _ in range(2):  # a loaded machine can slow one run; a super-linear pattern
                if t_big <= budget:  # is over its budget every time
                    break
                t_small = max(t_small, cpu(lambda: run(small), 1.0))  # noqa: B023
                budget = GROWTH * t_small
                t_big = min(t_big, cpu(lambda: run(big), budget))  # noqa: B023
            if t_big > budget:
                slow.append(f"{prefix!r} + {piece!r} x n: {t_small:.4f} s at {SMALL}, over "
                            f"{budget:.3f} s at {BIG}")  # fmt: skip
    return slow


def main() -> None:
    """In a child process: one JSON line per pattern, written before it is tried (an
    exponential backtrack in C may never look at the CPU timer's signal)."""
    for name, rx in PATTERNS:
        print(json.dumps({"trying": name}), flush=True)
        print(json.dumps({"name": name, "slow": slow_cases(name, rx)}), flush=True)


def test_the_modules_have_patterns() -> None:
    assert len(PATTERNS) > 40  # the walk finds them (a rename would empty the test)


def test_every_pattern_grows_linearly_on_generic_runs() -> None:
    root = Path(__file__).resolve().parents[3]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(root / "src")])}
    proc = subprocess.Popen([sys.executable, __file__], cwd=root, env=env,
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        out, _ = proc.communicate(timeout=WALL)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        lines = [json.loads(line) for line in out.splitlines() if line]
        stuck = lines[-1].get("trying") if lines else None
        pytest.fail(f"{stuck} did not finish within {WALL} s on a generic run")
    assert proc.returncode == 0
    results = [json.loads(line) for line in out.splitlines() if line]
    done = [r for r in results if "name" in r]
    assert len(done) == len(PATTERNS)
    slow = {r["name"]: r["slow"] for r in done if r["slow"]}
    assert not slow, slow


if __name__ == "__main__":
    main()
