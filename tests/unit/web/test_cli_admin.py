"""``pochta user add --admin`` and ``pochta user admin EMAIL [--revoke]``."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from pochta.cli import app

runner = CliRunner()


def run(*args: str | Path, stdin: str | None = None) -> tuple[int, str, str]:
    result = runner.invoke(app, [str(a) for a in args], input=stdin)
    assert "Traceback" not in result.output
    return result.exit_code, result.stdout, result.stderr


def test_admin_role_from_the_command_line(tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert run("init", "--data", data)[0] == 0
    pw = "a long enough password\n"
    code, out, _ = run(
        "user", "add", "root@example.org", "--admin", "--password-stdin", "--data", data, stdin=pw
    )
    assert code == 0 and "as an admin" in out
    code, out, _ = run(
        "user", "add", "ann@example.org", "--password-stdin", "--json", "--data", data, stdin=pw
    )
    assert code == 0 and json.loads(out)["admin"] is False
    code, out, _ = run("user", "list", "--json", "--data", data)
    assert {u["email"]: u["admin"] for u in json.loads(out)} == {
        "ann@example.org": False,
        "root@example.org": True,
    }
    code, out, _ = run("user", "admin", "ann@example.org", "--data", data)
    assert code == 0 and "now an admin" in out
    code, out, _ = run("user", "admin", "root@example.org", "--revoke", "--json", "--data", data)
    assert code == 0 and json.loads(out) == {"id": 1, "email": "root@example.org", "admin": False}
    code, out, _ = run("user", "list", "--data", data)
    assert "ann@example.org  (admin)" in out and "root@example.org  (admin)" not in out
    code, _, err = run("user", "admin", "ghost@example.org", "--data", data)
    assert code == 2 and "no user ghost@example.org" in err
