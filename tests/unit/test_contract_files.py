"""Every Protocol lives in ``types.py`` or in a contract file that ``types.py``'s docstring
names, with the Protocol, on one line (issue 31: "put every Protocol in the contract file or
name the contract files")."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "pochta"


def _protocols(root: Path) -> set[tuple[str, str]]:
    """(path under ``root``, class name) of every class whose bases include ``Protocol``."""
    found = set()
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any(
                (isinstance(b, ast.Name) and b.id == "Protocol")
                or (isinstance(b, ast.Attribute) and b.attr == "Protocol")
                for b in node.bases
            ):
                found.add((path.relative_to(root).as_posix(), node.name))
    return found


def _listed(doc: str) -> dict[str, set[str]]:
    """The docstring's list: a line that starts with a path ending in .py, then its names."""
    listed: dict[str, set[str]] = {}
    for line in doc.splitlines():
        m = re.fullmatch(r"\s+(\S+\.py)\s+(.+?):.*", line)
        if m:
            listed.setdefault(m[1], set()).update(n.strip() for n in m[2].split(","))
    return listed


def test_every_protocol_outside_types_is_named_in_its_docstring() -> None:
    doc = ast.get_docstring(ast.parse((PACKAGE / "types.py").read_text())) or ""
    listed = _listed(doc)
    outside = {(p, n) for p, n in _protocols(PACKAGE) if p != "types.py"}
    assert ("blobs/valkyrie/state/__init__.py", "StateStore") in outside  # the finder finds
    assert {(p, n) for p, n in outside if n not in listed.get(p, set())} == set()
    # and the list names nothing that is not there
    assert {(p, n) for p, names in listed.items() for n in names} == outside


def test_the_list_reader_sees_a_missing_protocol(tmp_path: Path) -> None:
    (tmp_path / "x.py").write_text("from typing import Protocol\nclass Port(Protocol): ...\n")
    assert _protocols(tmp_path) == {("x.py", "Port")}
    assert _listed("    x.py    Other: a port\n") == {"x.py": {"Other"}}
