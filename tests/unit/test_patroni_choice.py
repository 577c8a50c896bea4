"""Which Patroni the several-machines recipe's tests run (tests/patroni.py): its version read
from ``patroni --version``, and whether it has the leader-key fix of 3.0.3."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests import patroni


def fake(tmp_path: Path, name: str, says: str) -> str:
    """An executable that answers ``--version`` as a Patroni of that version would."""
    path = tmp_path / name
    path.write_text(f"#!/bin/sh\necho '{says}'\n")
    path.chmod(0o755)
    return str(path)


@pytest.fixture
def fresh() -> Iterator[None]:
    patroni.chosen.cache_clear()
    yield
    patroni.chosen.cache_clear()


@pytest.mark.parametrize(
    ("says", "version"),
    [
        ("patroni 3.0.2", (3, 0, 2)),
        ("patroni 3.1.2", (3, 1, 2)),
        ("patroni 4.1.0rc1", (4, 1, 0)),
        ("patroni 10.0", (10, 0)),
        ("something else 3.0.3", None),
        ("patroni", None),
        ("patroni x.y", None),
    ],
)
def test_version_of(tmp_path: Path, says: str, version: tuple[int, ...] | None) -> None:
    assert patroni.version_of(fake(tmp_path, "patroni", says)) == version


def test_version_of_what_does_not_run(tmp_path: Path) -> None:
    assert patroni.version_of(str(tmp_path / "absent")) is None


@pytest.mark.parametrize(
    ("says", "fixed"),
    [("patroni 3.0.2", False), ("patroni 3.0.3", True), ("patroni 3.1.2", True)],
)
def test_named_patroni_and_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh: None, says: str, fixed: bool
) -> None:
    exe = fake(tmp_path, "patroni", says)
    monkeypatch.setenv("SEVERAL_MACHINES_PATRONI", exe)
    assert patroni.chosen() == (exe, patroni.version_of(exe))
    assert patroni.fixed() is fixed
    assert patroni.describe() == f"{says} ({exe})"


def test_on_path_the_first_the_servers_can_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh: None
) -> None:
    """With the venv activated (CI), PATH finds the venv's Patroni first; when the servers'
    user cannot run it (a venv of root's pyenv) the next one on PATH (Debian's) is taken."""
    (venv := tmp_path / "venv").mkdir()
    (debian := tmp_path / "usr-bin").mkdir()
    mine = fake(venv, "patroni", "patroni 3.1.2")
    theirs = fake(debian, "patroni", "patroni 3.0.2")
    monkeypatch.delenv("SEVERAL_MACHINES_PATRONI", raising=False)
    monkeypatch.setattr(patroni.sys, "executable", str(tmp_path / "elsewhere" / "python"))
    monkeypatch.setenv("PATH", f"{venv}:{debian}")
    monkeypatch.setattr(patroni, "_runs_as_server", lambda script: str(script) != mine)
    assert patroni.chosen() == (theirs, (3, 0, 2))
    patroni.chosen.cache_clear()
    monkeypatch.setattr(patroni, "_runs_as_server", lambda script: True)
    assert patroni.chosen() == (mine, (3, 1, 2))
