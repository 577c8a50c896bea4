"""The ``pochta`` command in-process: output, --json, exit codes, no tracebacks."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pochta.cli import app

runner = CliRunner()


def run(*args: str | Path) -> tuple[int, str, str]:
    result = runner.invoke(app, [str(a) for a in args])
    assert "Traceback" not in result.output
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def data(tmp_path: Path) -> Path:
    """A data directory made by ``pochta init``: no other command creates one."""
    path = tmp_path / "data"
    assert runner.invoke(app, ["init", "--data", str(path)]).exit_code == 0
    return path


@pytest.fixture
def payload(tmp_path: Path) -> tuple[Path, str]:
    path = tmp_path / "attachment.bin"
    path.write_bytes(os.urandom(70_000))
    return path, hashlib.sha256(path.read_bytes()).hexdigest()


def test_put_stat_get_dec(data: Path, payload: tuple[Path, str], tmp_path: Path) -> None:
    path, key = payload
    code, out, _ = run("blob", "put", path, "--magic", "345", "--data", data, "--json")
    assert code == 0
    first = json.loads(out)
    assert (first["key"], first["counter"], first["magic"], first["uploaded"]) == (
        key,
        1,
        345,
        True,
    )
    code, out, _ = run("blob", "put", path, "--magic", "123", "--data", data, "--json")
    second = json.loads(out)
    assert (second["counter"], second["record_magic"], second["uploaded"]) == (2, 468, False)
    code, out, _ = run("blob", "stat", key, "--data", data, "--json")
    assert json.loads(out)["counter"] == 2
    target = tmp_path / "copy.bin"
    code, out, _ = run("blob", "get", key, "-o", target, "--data", data, "--json")
    assert code == 0
    assert target.read_bytes() == path.read_bytes()
    code, out, _ = run("blob", "get", key, "--data", data)
    assert code == 0
    code, out, _ = run("blob", "dec", key, "--magic", "345", "--data", data, "--json")
    assert (json.loads(out)["counter"], json.loads(out)["magic"]) == (1, 123)
    code, out, _ = run("blob", "dec", key, "--magic", "123", "--data", data, "--json")
    assert json.loads(out)["space"] == "deleted"


def test_put_draws_a_random_magic_and_prints_it(data: Path, payload: tuple[Path, str]) -> None:
    path, _ = payload
    code, out, _ = run("blob", "put", path, "--data", data)
    assert code == 0
    assert "magic" in out
    code, out, _ = run("blob", "put", path, "--data", data, "--json")
    magic = json.loads(out)["magic"]
    assert 0 < magic < 2**32


def test_get_to_stdout_is_the_content(data: Path, payload: tuple[Path, str]) -> None:
    path, key = payload
    run("blob", "put", path, "--data", data)
    result = runner.invoke(app, ["blob", "get", key, "--data", str(data)])
    assert result.exit_code == 0
    assert result.stdout_bytes == path.read_bytes()


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (("blob", "stat", "zz"), 2, "malformed key"),
        (("blob", "stat", "a" * 64), 3, "no record"),
        (("blob", "get", "a" * 64, "-o", "x"), 3, "no record"),
        (("blob", "dec", "a" * 64, "--magic", "5"), 3, "no record"),
        (("blob", "dec", "a" * 64, "--magic", "0"), 2, "out of range"),
        (("blob", "dec", "a" * 64, "--magic", "4294967296"), 2, "out of range"),
        (("blob", "dec", "a" * 64, "--magic", "seven"), 2, "not an integer"),
        (("blob", "put", "/nonexistent/file"), 2, "not a readable file"),
        (("pairs", "set-flags", "1", "bogus"), 2, "unknown flag"),
        (("pairs", "set-flags", "99", "readonly"), 3, "no pair 99"),
    ],
)
def test_errors_are_one_line_and_an_exit_code(
    data: Path, args: tuple[str, ...], code: int, needle: str
) -> None:
    got, _, err = run(*args, "--data", data)
    assert got == code
    assert needle in err


def test_json_errors_for_scripts(data: Path) -> None:
    got, _, err = run("blob", "stat", "a" * 64, "--data", data, "--json")
    assert got == 3
    assert json.loads(err)["error"] == "blob_not_found"


def test_pairs_add_list_flags(data: Path, tmp_path: Path, payload: tuple[Path, str]) -> None:
    code, out, _ = run("pairs", "list", "--data", data, "--json")
    assert code == 0
    pairs = json.loads(out)
    assert [p["id"] for p in pairs] == [1]
    assert pairs[0]["disks"][0]["root"].endswith("disks/0")
    a, b = tmp_path / "a", tmp_path / "b"
    code, out, _ = run("pairs", "add", a, b, "--data", data, "--json")
    assert code == 0
    assert json.loads(out)["id"] == 2
    assert a.is_dir()
    assert b.is_dir()
    code, _, err = run("pairs", "add", a, tmp_path / "c", "--data", data)
    assert code == 2
    assert "already belongs to pair 2" in err
    code, _, err = run("pairs", "add", a, a, "--data", data)
    assert code == 2
    code, out, _ = run("pairs", "set-flags", "1", "readonly", "locked", "--data", data, "--json")
    assert json.loads(out)["flags"] == ["readonly", "locked"]
    assert json.loads(out)["writable"] is False
    # with pair 1 read-only, new files go to pair 2
    path, key = payload
    code, out, _ = run("blob", "put", path, "--data", data, "--json")
    assert json.loads(out)["pair"] == 2
    assert (a / key[:2] / key[2:4] / key).is_file()
    code, out, _ = run("pairs", "set-flags", "1", "none", "--data", data, "--json")
    assert json.loads(out)["flags"] == []
    code, out, _ = run("pairs", "list", "--data", data)
    assert code == 0
    assert "pair" in out


def test_no_writable_pair_is_a_storage_error(data: Path, payload: tuple[Path, str]) -> None:
    run("pairs", "list", "--data", data)
    run("pairs", "set-flags", "1", "service", "--data", data)
    code, _, err = run("blob", "put", payload[0], "--data", data)
    assert code == 5
    assert "no pair can take the file" in err


def test_unusable_data_dir_is_a_config_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    code, _, err = run("blob", "stat", "a" * 64, "--data", blocker / "data")
    assert code == 6
    assert "data directory" in err


def test_only_init_creates_a_data_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for argv in (["user", "list"], ["blob", "stat", "ab" * 32], ["stats"], ["pairs", "list"]):
        code, _, err = run(*argv)
        assert code == 6, argv
        assert f"no data directory at {tmp_path / 'pochta-data'}" in err
        assert "data_dir from the default" in err and "pochta init" in err
    monkeypatch.setenv("POCHTA_DATA_DIR", "elsewhere")
    code, _, err = run("user", "list")
    assert code == 6 and "data_dir from environment variable POCHTA_DATA_DIR" in err
    code, _, err = run("user", "list", "--data", tmp_path / "given")
    assert code == 6 and "data_dir from --data" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    code, out, _ = run("init", "--data", tmp_path / "given", "--json")
    assert code == 0
    made = json.loads(out)
    assert made["created"] is True and made["data_dir"] == str(tmp_path / "given")
    assert Path(made["token_file"]).is_file()
    assert run("user", "list", "--data", tmp_path / "given")[0] == 0
    code, out, _ = run("init", "--data", tmp_path / "given")
    assert code == 0 and "already there" in out
