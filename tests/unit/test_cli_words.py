"""``pochta user delete`` and ``pochta words stats / clear`` in-process: what an account
leaves behind (nothing), the clear that a running server's buffer does not undo, and clear
errors for unknown addresses."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from tests.mailtools import letter
from typer.testing import CliRunner

from pochta.antispam.words import INSTALLATION, Words
from pochta.antispam.words.sqlite import SQLiteWordStore
from pochta.app import build
from pochta.cli import app
from pochta.cli import words as words_cli
from pochta.config import load_settings

runner = CliRunner()
PASSWORD = "a long enough password"
ALICE, BOB = "alice@example.org", "bob@example.org"


def run(*args: str | Path) -> tuple[int, str, str]:
    result = runner.invoke(app, [str(a) for a in args])
    assert "Traceback" not in result.output
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def data(tmp_path: Path) -> Path:
    """Alice with two letters (one with an attachment) and words she taught; Bob with one
    letter sharing the attachment."""
    path = tmp_path / "data"
    assert runner.invoke(app, ["init", "--data", str(path)]).exit_code == 0
    p = build(load_settings(data_dir=path, antispam={"pool_processes": 0}))
    try:
        box = p.mailbox
        alice = box.add_user(ALICE, PASSWORD)
        bob = box.add_user(BOB, PASSWORD)
        shared = os.urandom(40_000)
        box.deliver(letter(subject="one", attachments=[("a.bin", shared)]), [alice, bob])
        box.deliver(letter(subject="two"), [alice])
        words = p.scanner.words
        assert words is not None
        words.learn(words.hashes(["s:alice-only", "newsletter"]), "spam", 3, owner=alice.id)
        words.learn(words.hashes(["s:everyone"]), "ham", 3)
        lists = box.lists
        assert lists is not None
        lists.add(alice.id, "shop.example", "block")
        lists.add(alice.id, "friend@example.net", "allow")
        lists.add(bob.id, "shop.example", "allow")
    finally:
        p.close()
    return path


def _state(data: Path) -> tuple[list[str], int, tuple[int, int], tuple[int, int]]:
    p = build(load_settings(data_dir=data, antispam={"pool_processes": 0}))
    try:
        words = p.scanner.words
        assert words is not None
        users = [u.email for u in p.mailbox.index.users()]
        owners = words.store.owners()
        alice_totals = (0, 0)
        for owner in owners:
            if owner != INSTALLATION:
                alice_totals = words.totals(owner)
        return (
            users,
            p.mailbox.index.stats().letters,
            alice_totals,
            words.totals(INSTALLATION),
        )
    finally:
        p.close()


def test_user_delete_leaves_nothing_and_is_safe_to_repeat(data: Path) -> None:
    users, letters, alice_words, everyone = _state(data)
    assert users == [ALICE, BOB] and letters == 3 and alice_words == (3, 0)
    code, out, err = run("user", "delete", ALICE, "--no-wait", "--data", data, "--json")
    assert code == 0, err
    got = json.loads(out)
    assert got["email"] == ALICE and got["letters"] == 2 and got["letters_left"] == 0
    users, letters, alice_words, after = _state(data)
    assert users == [BOB] and letters == 1  # Bob's letter (and the shared attachment) stay
    assert alice_words == (0, 0) and after == everyone  # the installation's words stay
    code, _, err = run("user", "delete", ALICE, "--no-wait", "--data", data)
    assert code == 3 and f"no user {ALICE}" in err
    # Bob still reads his letter with its attachment
    p = build(load_settings(data_dir=data, antispam={"pool_processes": 0}))
    try:
        bob = p.mailbox.user(BOB)
        assert bob is not None
        (stored,) = p.mailbox.letters(bob.id)
        _, parsed = p.mailbox.message(bob.id, stored.id)
        assert len(parsed.attachments[0].content) == 40_000
        assert p.mailbox.user(ALICE) is None
        assert p.mailbox.add_user(ALICE, PASSWORD).id != 0  # the address can be taken again
    finally:
        p.close()


def _lists(data: Path, emails: list[str]) -> list[tuple[int, list[tuple[str, str]]]]:
    """Each account's id and sender-list entries; a deleted one's read by the id it had."""
    p = build(load_settings(data_dir=data, antispam={"pool_processes": 0}))
    try:
        lists = p.mailbox.lists
        assert lists is not None
        out = []
        for email in emails:
            user = p.mailbox.user(email)
            assert user is not None
            out.append((user.id, [(e.value, e.action) for e in lists.entries(user.id)]))
        return out
    finally:
        p.close()


def test_user_delete_forgets_the_accounts_sender_lists(data: Path) -> None:
    """The forget hooks app.py builds: the account's lists go with it, another's stay."""
    (alice_id, alice), bob = _lists(data, [ALICE, BOB])
    assert alice == [("friend@example.net", "allow"), ("shop.example", "block")]
    code, _, err = run("user", "delete", ALICE, "--no-wait", "--data", data)
    assert code == 0, err
    p = build(load_settings(data_dir=data, antispam={"pool_processes": 0}))
    try:
        lists = p.mailbox.lists
        assert lists is not None
        assert lists.entries(alice_id) == []
        assert not lists.lookup([alice_id], "x@shop.example")
    finally:
        p.close()
    assert _lists(data, [BOB]) == [bob]  # Bob's list stays


def test_words_stats_and_clear(data: Path) -> None:
    code, out, err = run("words", "stats", "--user", ALICE, "--data", data, "--json")
    assert code == 0, err
    got = json.loads(out)
    assert (got["learned_spam"], got["learned_ham"], got["words"]) == (3, 0, 2)
    assert got["counts_in_verdicts"] is False  # one letter: below the rule
    code, out, _ = run("words", "stats", "--data", data, "--json")
    assert json.loads(out)["learned_ham"] == 3
    code, _, err = run("words", "stats", "--user", "nobody@example.org", "--data", data)
    assert code == 3 and "no user nobody@example.org" in err
    code, _, err = run("words", "clear", "--user", ALICE, "--no-wait", "--data", data)
    assert code == 0, err
    code, out, _ = run("words", "stats", "--user", ALICE, "--data", data, "--json")
    assert json.loads(out)["learned_spam"] == 0
    code, out, _ = run("words", "stats", "--data", data, "--json")
    assert json.loads(out)["learned_ham"] == 3  # the installation's are not the account's
    code, _, _ = run("words", "clear", "--no-wait", "--data", data)
    code, out, _ = run("words", "stats", "--data", data, "--json")
    assert json.loads(out)["learned_ham"] == 0


def test_a_clear_is_not_undone_by_a_running_servers_flush(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server learned before the clear and flushes during it: the second pass drops what
    its flush wrote. Without it, the flush would bring the cleared words back."""
    path = tmp_path / "words.sqlite3"
    server = Words(SQLiteWordStore(path), flush_interval=0.01)
    cli = Words(SQLiteWordStore(path), buffered=False, flush_interval=0.01)
    for owner in (INSTALLATION, 7):
        cli.learn([1, 2], "spam", 3, owner=owner)  # written before
        server.learn([3], "spam", 3, owner=owner)  # held in the server's buffer
        monkeypatch.setattr(words_cli.time, "sleep", lambda _s: server.flush())
        words_cli.forget_twice(cli, owner)
        assert cli.totals(owner) == (0, 0) and not cli.learned(owner, [1, 2, 3])[0]
        server.learn([4], "spam", 3, owner=owner)  # after the clear: kept
        server.flush()
        assert cli.totals(owner) == (3, 0)
    server.close()
    cli.close()


def test_unknown_or_absurd_addresses_are_one_line_errors(data: Path) -> None:
    for args in (
        ("words", "clear", "--user", "x" * 100_000, "--no-wait"),
        ("user", "delete", "\x00nobody@example.org", "--no-wait"),
        ("words", "stats", "--user", ""),
    ):
        code, out, err = run(*args, "--data", data, "--json")
        assert code == 3, (args, out, err)
        assert json.loads(err)["error"] and len(err) < 2000


def test_user_delete_forgets_the_words_even_where_learning_is_now_off(
    data: Path, tmp_path: Path
) -> None:
    """Words an account taught are its data: deleted with it even when the installation has
    since turned learning off (antispam.learn_words = false), and the words kept stay."""
    p = build(load_settings(data_dir=data, antispam={"pool_processes": 0}))
    try:
        alice = p.mailbox.user(ALICE)
        assert alice is not None and p.scanner.words is not None
        assert p.scanner.words.totals(alice.id) == (3, 0)
    finally:
        p.close()
    off = tmp_path / "off.toml"
    off.write_text("[antispam]\nlearn_words = false\npool_processes = 0\n")
    code, _, err = run("user", "delete", ALICE, "--no-wait", "--data", data, "--config", off)
    assert code == 0, err
    p = build(load_settings(data_dir=data, antispam={"pool_processes": 0}))
    try:
        words = p.scanner.words
        assert words is not None
        assert words.totals(alice.id) == (0, 0) and not words.learned(alice.id, [1])[0]
        assert alice.id not in words.store.owners()
        assert words.totals(INSTALLATION) == (0, 3)  # the installation's stay
    finally:
        p.close()
