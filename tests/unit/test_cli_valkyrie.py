"""`pochta valkyrie`, `pochta pairs evacuate / retire`, `pochta blob restore`, in-process."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from pochta.blobs.keys import blob_path, master_index
from pochta.cli import app as pochta_app
from pochta.cli import valkyrie

runner = CliRunner()
app = typer.Typer()
app.add_typer(pochta_app, name="pochta")
app.add_typer(valkyrie.app, name="valkyrie")  # until cli/__init__.py registers it


def run(*args: str | Path) -> tuple[int, str, str]:
    argv = [str(a) for a in args]
    if argv[0] != "valkyrie":
        argv = ["pochta", *argv]
    result = runner.invoke(app, argv)
    assert "Traceback" not in result.output
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def data(tmp_path: Path) -> Path:
    """A data directory made by ``pochta init``: no other command creates one."""
    path = tmp_path / "data"
    assert runner.invoke(app, ["pochta", "init", "--data", str(path)]).exit_code == 0
    return path


def put(data: Path, tmp_path: Path, content: bytes, magic: int = 77) -> str:
    path = tmp_path / "f.bin"
    path.write_bytes(content)
    code, out, _ = run("blob", "put", path, "--magic", str(magic), "--data", data, "--json")
    assert code == 0
    key: str = json.loads(out)["key"]
    assert key == hashlib.sha256(content).hexdigest()
    return key


def disk_root(data: Path, index: int) -> Path:
    return data / "disks" / str(index)


def test_valkyrie_run_once_repairs_and_reports(data: Path, tmp_path: Path) -> None:
    content = os.urandom(40_000)
    key = put(data, tmp_path, content)
    copy = disk_root(data, 1) / blob_path(key)
    copy.write_bytes(b"flipped")
    code, out, _ = run("valkyrie", "run", "--once", "--data", data, "--json")
    assert code == 0
    report = json.loads(out)
    assert report["errors"] == 0
    assert [d["complete"] for d in report["disks"]] == [True, True]
    assert sum(d["repaired"] for d in report["disks"]) == 1
    assert copy.read_bytes() == content
    code, out, _ = run("valkyrie", "stats", "--data", data, "--json")
    stats = json.loads(out)
    assert (code, stats["repaired"], len(stats["disks"])) == (0, 1, 2)
    assert stats["checked"] >= 2


def test_valkyrie_run_one_disk_by_index(data: Path, tmp_path: Path) -> None:
    put(data, tmp_path, b"one disk")
    code, out, _ = run("valkyrie", "run", "--once", "--disk", "1", "--data", data, "--json")
    assert code == 0
    disks = json.loads(out)["disks"]
    assert [d["index"] for d in disks] == [1]
    code, _, err = run("valkyrie", "run", "--once", "--disk", "9", "--data", data, "--json")
    assert code == 2
    assert json.loads(err)["error"] == "invalid_input"


def test_evacuate_then_retire_a_failed_pair(data: Path, tmp_path: Path) -> None:
    keys = [put(data, tmp_path, os.urandom(1000 + i), magic=1 + i) for i in range(5)]
    code, _, _ = run("pairs", "add", tmp_path / "c", tmp_path / "d", "--data", data)
    assert code == 0
    code, _, err = run("pairs", "retire", "1", "--data", data, "--json")
    assert code == 2
    assert "still holds 5 live file(s)" in json.loads(err)["message"]
    shutil.rmtree(disk_root(data, 0))  # a disk dies
    code, out, _ = run("pairs", "evacuate", "1", "--data", data, "--json")
    assert code == 0
    summary = json.loads(out)
    assert (summary["moved"], summary["left"], summary["errors"]) == (5, 0, 0)
    for key in keys:
        code, out, _ = run("blob", "stat", key, "--data", data, "--json")
        assert json.loads(out)["pair"] == 2
        for root in (tmp_path / "c", tmp_path / "d"):
            assert hashlib.sha256((root / blob_path(key)).read_bytes()).hexdigest() == key
    code, out, _ = run("pairs", "retire", "1", "--data", data, "--json")
    assert (code, json.loads(out)["id"]) == (0, 1)
    code, out, _ = run("pairs", "list", "--data", data, "--json")
    assert [p["id"] for p in json.loads(out)] == [2]


def test_blob_restore_after_quarantine(data: Path, tmp_path: Path) -> None:
    content = b"a letter still needs this"
    key = put(data, tmp_path, content, magic=5)
    code, _, _ = run("blob", "dec", key, "--magic", "5", "--data", data)
    assert code == 0
    master = disk_root(data, master_index(key)) / blob_path(key)
    master.rename(master.with_name(f"{key}.deleted.1700000000"))
    code, out, _ = run("blob", "restore", key, "--data", data, "--json")
    assert code == 0
    restored = json.loads(out)
    assert restored["space"] == "live"
    assert restored["flags"] == ["do_not_delete"]
    assert restored["renamed"] == [str(disk_root(data, master_index(key)).resolve())]
    assert master.read_bytes() == content
    code, _, err = run("blob", "restore", "0" * 64, "--data", data, "--json")
    assert code == 3
    assert json.loads(err)["error"] == "blob_not_found"
