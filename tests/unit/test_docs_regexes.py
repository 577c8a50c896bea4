"""docs/regexes.md lists every regex of src/pochta (checked by benchmarks/regex_table.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_regex_of_src_is_in_the_table() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        [sys.executable, "regex_table.py", "--check", str(ROOT / "docs" / "regexes.md")],
        cwd=ROOT / "benchmarks",
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
