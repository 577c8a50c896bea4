"""``pochta lists``: an operator's view of an account's sender list."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pochta.cli import app

runner = CliRunner()


def run(*args: str | Path, stdin: str | None = None) -> tuple[int, str, str]:
    result = runner.invoke(app, [str(a) for a in args], input=stdin)
    assert "Traceback" not in result.output
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "data"
    assert run("init", "--data", path)[0] == 0
    code, _, err = run(
        "user",
        "add",
        "ann@example.org",
        "--password-stdin",
        "--data",
        path,
        stdin="a long password\n",
    )
    assert code == 0, err
    return path


def test_add_show_and_remove(data: Path) -> None:
    code, out, _ = run("lists", "add", "Shop.Example", "--user", "ann@example.org", "--data", data)
    assert code == 0 and "allow shop.example" in out
    code, _, _ = run(
        "lists", "add", "bob@spam.example", "--block", "--user", "ann@example.org", "--data", data
    )
    assert code == 0
    code, out, _ = run("lists", "show", "--user", "ann@example.org", "--data", data, "--json")
    assert json.loads(out) == [
        {"value": "bob@spam.example", "action": "block"},
        {"value": "shop.example", "action": "allow"},
    ]
    code, out, _ = run(
        "lists", "remove", "shop.example", "--user", "ann@example.org", "--data", data
    )
    assert code == 0 and "removed shop.example" in out
    code, out, _ = run("lists", "show", "--user", "ann@example.org", "--data", data)
    assert "1 entry" in out and "bob@spam.example" in out


def test_bad_input_is_a_message_and_a_nonzero_exit(data: Path) -> None:
    for args, says in (
        (("add", "com"), "public suffix"),
        (("add", "x" * 300), "at most 254"),
        (("remove", "nothing.example"), "no entry"),
    ):
        code, _, err = run("lists", *args, "--user", "ann@example.org", "--data", data)
        assert code != 0 and says in " ".join(err.split()), (args, err)
    code, _, err = run("lists", "show", "--user", "nobody@example.org", "--data", data, "--json")
    assert code != 0 and json.loads(err)["error"] == "user_not_found"
