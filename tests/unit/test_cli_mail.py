"""``pochta user / import / message / fsck / stats`` in-process: output, --json, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

from tests.mailtools import letter, payload
from typer.testing import CliRunner

from pochta.blobs.keys import blob_path, key_of
from pochta.cli import app

runner = CliRunner()


def run(*args: str | Path, stdin: str | None = None) -> tuple[int, str, str]:
    result = runner.invoke(app, [str(a) for a in args], input=stdin)
    assert "Traceback" not in result.output
    return result.exit_code, result.stdout, result.stderr


def test_users_import_list_get_delete_fsck_stats(tmp_path: Path) -> None:
    data = tmp_path / "data"
    code, _, err = run("user", "add", "ann@example.org", "--password-stdin", "--data", data)
    assert code == 6 and "pochta init" in err and not data.exists()
    assert run("init", "--data", data)[0] == 0
    code, out, _ = run(
        "user",
        "add",
        "Ann@Example.org",
        "--password-stdin",
        "--data",
        data,
        "--json",
        stdin="a good password\n",
    )
    assert code == 0 and json.loads(out)["email"] == "ann@example.org"
    code, _, err = run(
        "user", "add", "ann@example.org", "--password-stdin", "--data", data, stdin="another pw\n"
    )
    assert code == 2 and "already exists" in err
    code, _, err = run(
        "user", "add", "bo@example.org", "--password-stdin", "--data", data, stdin="x\n"
    )
    assert code == 2 and "at least 8" in err
    code, out, _ = run("user", "list", "--data", data, "--json")
    assert [u["email"] for u in json.loads(out)] == ["ann@example.org"]

    shared = payload(11, 60_000)
    folder = tmp_path / "mail"
    folder.mkdir()
    raws = [letter(subject=f"s{i}", attachments=[("x.bin", shared)]) for i in range(3)]
    for i, raw in enumerate(raws):
        (folder / f"{i}.eml").write_bytes(raw)
    code, out, _ = run("import", "--user", "ann@example.org", folder, "--data", data, "--json")
    assert code == 0, out
    report = json.loads(out)
    assert report["letters"] == 3 and report["attachments_stored"] == 1
    assert report["attachments_deduplicated"] == 2 and report["savings_percent"] > 50

    code, out, _ = run("message", "list", "--user", "ann@example.org", "--data", data, "--json")
    listed = json.loads(out)
    assert [m["subject"] for m in listed] == ["s2", "s1", "s0"]
    first = listed[-1]["id"]
    got = tmp_path / "got.eml"
    code, _, _ = run(
        "message", "get", first, "--user", "ann@example.org", "--raw", "-o", got, "--data", data
    )
    assert code == 0 and got.read_bytes() == raws[0]
    code, out, _ = run(
        "message", "get", first, "--user", "ann@example.org", "--data", data, "--json"
    )
    assert json.loads(out)["attachments"][0]["size"] == 60_000

    code, out, _ = run("stats", "--data", data, "--json")
    stats = json.loads(out)
    assert stats["letters"] == 3 and stats["blobs"] == 1 and stats["dedup_ratio"] > 2

    code, out, _ = run("fsck", "--data", data, "--json")
    assert code == 0 and json.loads(out)["ok"]
    key = key_of(shared)
    for copy in (data / "disks").glob(f"*/{blob_path(key)}"):
        copy.write_bytes(b"rot")
    code, out, _ = run("fsck", "--data", data, "--json")
    assert code == 1 and len(json.loads(out)["lost"]) == 1

    code, out, _ = run("message", "delete", first, "--user", "ann@example.org", "--data", data)
    assert code == 0
    code, _, err = run("message", "delete", first, "--user", "ann@example.org", "--data", data)
    assert code == 3 and "no message" in err
    code, _, err = run("message", "list", "--user", "nobody@example.org", "--data", data)
    assert code == 3 and "no user" in err


def test_import_reports_failures_and_exits_non_zero(tmp_path: Path) -> None:
    data = tmp_path / "data"
    run("init", "--data", data)
    run(
        "user",
        "add",
        "ann@example.org",
        "--password-stdin",
        "--data",
        data,
        stdin="a good password\n",
    )
    (tmp_path / "toml").write_text("[smtp]\nmax_message_size = 1000\n")
    big = tmp_path / "big.eml"
    big.write_bytes(letter(text="x" * 5000))
    code, out, _ = run(
        "import",
        "--user",
        "ann@example.org",
        big,
        "--data",
        data,
        "--config",
        tmp_path / "toml",
        "--json",
    )
    assert code == 1
    report = json.loads(out)
    assert report["letters"] == 0 and "limit" in report["failed"][0]
    code, _, err = run("import", "--user", "ann@example.org", tmp_path / "nope", "--data", data)
    assert code == 2 and "neither a file nor a directory" in err


def test_leaks_audit_forces_a_reset_of_working_passwords(tmp_path: Path) -> None:
    data = tmp_path / "data"
    run("init", "--data", data)
    for email in ("ann@example.org", "bob@example.org"):
        run("user", "add", email, "--password-stdin", "--data", data, stdin="a good password\n")
    dump = tmp_path / "dump.txt"
    dump.write_bytes(
        b"ann@example.org:a good password\n"
        b"bob@example.org:guess\n"
        b"eve@example.org:whatever\n"
        b"no colon here\n"
        b"\xff\xfe:binary\n"
    )
    code, out, _ = run("leaks", "audit", dump, "--workers", "1", "--data", data, "--json")
    assert code == 0
    report = json.loads(out)
    assert (report["lines"], report["malformed"], report["unknown"]) == (5, 2, 1)
    assert (report["wrong"], report["valid"]) == (1, 1)
    code, out, _ = run("user", "list", "--data", data, "--json")
    resets = {u["email"]: u["reset_required"] for u in json.loads(out)}
    assert resets == {"ann@example.org": True, "bob@example.org": False}
    code, _, err = run("leaks", "audit", tmp_path / "missing.txt", "--data", data)
    assert code == 2 and "not a readable file" in err
