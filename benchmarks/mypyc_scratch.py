"""A scratch copy of ``src`` with the worker's pure-Python path compiled by mypyc (issue 29,
item 3: a feasibility study; pochta itself is not compiled, BENCHMARKS.md says why).

    python benchmarks/mypyc_scratch.py /tmp/mypyc_build      # copy, adapt, compile (~3 min CPU)
    cd /tmp/mypyc_build && python benchmarks/scan_worker_pair.py --other <main's src> --passes 2
    cd <this checkout> && PYTHONPATH=/tmp/mypyc_build/src python benchmarks/scan_worker.py \\
        --check <main's verdicts.json>

The copy (``DEST/src`` and ``DEST/benchmarks``, so that ``scan_worker_pair.py`` run there takes
the compiled tree as its side A) gets what mypyc needs and nothing else; each change asserts the
text it replaces, so a source that moved fails here rather than building something else:

- ``Learning.ham_below`` read through the class (a dataclass field: mypyc refuses it);
- the surrogate code points of ``headers._SURROGATE`` written with ``chr`` (refused in literals);
- ``Counters._thread`` renamed: mypyc's C name ``__thread`` is a GCC keyword;
- ``functools.cached_property`` made a property that keeps its value in ``__dict__``, its class
  a non-native one (``mypyc_attr(native_class=False)``, from mypy_extensions, which comes with
  mypy): mypyc compiles a ``cached_property`` as a plain property, so the value is worked out on
  every read (``TokenTable._ranked``: the shipped table's ranking again for every letter);
- ``model/trees.py`` left out (attributes set with ``object.__setattr__`` in ``__post_init__``:
  a native class has no room for them; the trees are NumPy's work anyway).

Needs mypy (mypyc comes with it), setuptools, a C compiler and Python's headers.
"""

from __future__ import annotations

import argparse
import ast
import re
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"
PYPROJECT = HERE.parent / "pyproject.toml"

# the worker's path (``scan_worker.py``): every pochta module it runs but the trees
MODULES = [
    "pochta/mime/codec.py",
    "pochta/mime/headers.py",
    "pochta/mime/html.py",
    "pochta/mime/letter.py",
    "pochta/mime/normalize.py",
    "pochta/mime/skeleton.py",
    "pochta/mime/split.py",
    "pochta/mime/tree.py",
    "pochta/antispam/features.py",
    "pochta/antispam/tokens.py",
    "pochta/antispam/verdict.py",
    "pochta/antispam/personal.py",
    "pochta/antispam/signs/attachments.py",
    "pochta/antispam/signs/casefold.py",
    "pochta/antispam/signs/checks.py",
    "pochta/antispam/signs/extortion.py",
    "pochta/antispam/signs/forwarders.py",
    "pochta/antispam/signs/links.py",
    "pochta/antispam/signs/lookalike.py",
    "pochta/antispam/signs/lures.py",
    "pochta/antispam/signs/protected.py",
    "pochta/antispam/signs/registry.py",
    "pochta/antispam/signs/wording.py",
    "pochta/antispam/shingles/extract.py",
    "pochta/antispam/shingles/registry.py",
    "pochta/antispam/shingles/counters/buckets.py",
    "pochta/antispam/shingles/counters/buffer.py",
    "pochta/antispam/shingles/counters/memory.py",
    "pochta/antispam/shingles/counters/service.py",
    "pochta/antispam/rules/expr.py",
    "pochta/antispam/rules/ruleset.py",
    "pochta/antispam/model/booster.py",
    "pochta/antispam/model/design.py",
    "pochta/antispam/auth/results.py",
    "pochta/antispam/words/memory.py",
    "pochta/antispam/words/personal.py",
    "pochta/mailbox/prepare.py",
]

REPLACEMENTS = {
    "pochta/antispam/verdict.py": [
        (
            "            learning = Learning(\n"
            "                ham_below=Learning.ham_below if below is None else float(below),\n"
            "                from_verdicts=learn_from_verdicts,\n"
            "            )",
            "            learning = (\n"
            "                Learning(from_verdicts=learn_from_verdicts)\n"
            "                if below is None\n"
            "                else Learning(ham_below=float(below), "
            "from_verdicts=learn_from_verdicts)\n"
            "            )",
        )
    ],
    "pochta/mime/headers.py": [
        (
            '_SURROGATE = re.compile("[\\udc80-\\udcff]")',
            '_SURROGATE = re.compile("[" + chr(0xDC80) + "-" + chr(0xDCFF) + "]")',
        )
    ],
    "pochta/antispam/shingles/counters/service.py": [("self._thread", "self._flusher")],
}

_CACHED = re.compile(r"\s*@(functools\.)?cached_property\s*$")
_DEF = re.compile(r"(\s*)def (\w+)\(self\) -> (.*):\s*$")


def _replace(path: Path, pairs: list[tuple[str, str]]) -> None:
    text = path.read_text()
    for old, new in pairs:
        if old not in text:
            sys.exit(f"{path}: the text to adapt is no longer there: {old[:60]!r}")
        text = text.replace(old, new)
    path.write_text(text)


def _no_cached_property(path: Path) -> None:
    """Each ``cached_property`` a property caching in ``__dict__``; its class non-native."""
    text = path.read_text()
    if "cached_property" not in text:
        return
    classes = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ClassDef) and "cached_property" in (
            ast.get_source_segment(text, node) or ""
        ):
            classes.append(min([d.lineno for d in node.decorator_list] + [node.lineno]))
    lines = text.split("\n")
    for first in sorted(classes, reverse=True):
        indent = lines[first - 1][: len(lines[first - 1]) - len(lines[first - 1].lstrip())]
        lines.insert(first - 1, indent + "@mypyc_attr(native_class=False)")
    out: list[str] = []
    i = 0
    while i < len(lines):
        if not _CACHED.match(lines[i]):
            out.append(lines[i])
            i += 1
            continue
        m = _DEF.match(lines[i + 1])
        if m is None:
            sys.exit(f"{path}: a cached_property of another shape: {lines[i + 1]!r}")
        ind, name, kind = m.groups()
        out.append(f"{ind}def _computed_{name}(self) -> {kind}:")
        i += 2
        while i < len(lines) and (not lines[i].strip() or lines[i].startswith(ind + "    ")):
            out.append(lines[i])
            i += 1
        blanks = []
        while out and not out[-1].strip():
            blanks.append(out.pop())
        out += [
            "",
            f"{ind}@property",
            f"{ind}def {name}(self) -> {kind}:",
            f"{ind}    d = self.__dict__",
            f'{ind}    if "{name}" in d:',
            f'{ind}        v: {kind} = d["{name}"]',
            f"{ind}        return v",
            f"{ind}    w: {kind} = self._computed_{name}()",
            f'{ind}    d["{name}"] = w',
            f"{ind}    return w",
            *blanks,
        ]
    future = next(k for k, line in enumerate(out) if line.startswith("from __future__"))
    out.insert(future + 1, "from mypy_extensions import mypyc_attr")
    path.write_text("\n".join(out).replace("from functools import cached_property\n", ""))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dest", type=Path, help="the scratch directory (replaced)")
    args = ap.parse_args()
    dest: Path = args.dest.resolve()
    root = HERE.parent  # the checkout: never replaced, nor anything inside it
    if dest == root or dest in root.parents or root in dest.parents:
        raise SystemExit(f"{dest} overlaps the checkout {root}: give a directory outside it")
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(SRC, dest / "src", ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    shutil.copytree(HERE, dest / "benchmarks", ignore=shutil.ignore_patterns("__pycache__"))
    src = dest / "src"
    # mypy's settings without [project]: setuptools (mypyc's build) would read that too
    settings = PYPROJECT.read_text()
    (src / "pyproject.toml").write_text(settings[settings.index("[tool.mypy]") :])
    for name, pairs in REPLACEMENTS.items():
        _replace(src / name, pairs)
    for name in MODULES:
        _no_cached_property(src / name)
    wall, cpu = time.perf_counter(), time.process_time()
    run = subprocess.run(
        [sys.executable, "-m", "mypyc", *MODULES], cwd=src, capture_output=True, text=True
    )
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    if run.returncode != 0:
        sys.stderr.write(run.stdout[-4000:] + run.stderr[-4000:])
        sys.exit(run.returncode)
    built = [p for p in src.rglob("*.so") if "build" not in p.relative_to(src).parts]
    print(
        f"compiled {len(MODULES)} modules into {len(built)} files in "
        f"{time.perf_counter() - wall:.0f} s wall, "
        f"{children.ru_utime + children.ru_stime + time.process_time() - cpu:.0f} s CPU"
    )


if __name__ == "__main__":
    main()
