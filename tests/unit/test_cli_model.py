"""``pochta model``: train on an operator's own letters (Maildir, mbox, directories, the
installation's own mail), evaluate, list, promote, roll back; and the readers behind them."""

from __future__ import annotations

import json
import mailbox
import random
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from pochta.app import build
from pochta.cli import app
from pochta.config import load_settings
from pochta.errors import InvalidInput
from pochta.mime.letter import parse
from pochta_factory import installation, legit, sources

runner = CliRunner()
WORDS = ("cheap", "pills", "winner", "casino", "loan", "bitcoin", "offer", "free", "money",
         "click", "urgent", "prize", "lottery", "bonus", "deal")  # fmt: skip


def run(*args: str | Path) -> tuple[int, str, str]:
    result = runner.invoke(app, [str(a) for a in args])
    assert "Traceback" not in result.output
    return result.exit_code, result.stdout, result.stderr


def spam_letter(rng: random.Random, i: int) -> bytes:
    body = " ".join(rng.choice(WORDS) for _ in range(rng.randrange(30, 80)))
    link = f"http://{rng.choice(WORDS)}{rng.randrange(999)}.example.biz/{rng.randrange(10**6)}"
    return (
        f'From: "{rng.choice(WORDS).title()} Deals" <promo{i}@{rng.choice(WORDS)}-mail.biz>\r\n'
        f"To: someone@example.org\r\n"
        f"Subject: {rng.choice(WORDS).upper()} {rng.choice(WORDS).upper()}!!! "
        f"${rng.randrange(100, 9999)}\r\n"
        f"Date: Mon, {1 + i % 28} Oct 2002 10:{i % 60:02d}:00 +0000\r\n"
        f"Message-ID: <{i}.{rng.randrange(10**9)}@spam.example.biz>\r\n"
        f"Content-Type: text/plain\r\n\r\n{body}\r\n{link}\r\n"
    ).encode()


def spam_letters(count: int, seed: int = 1) -> list[bytes]:
    rng = random.Random(seed)
    return [spam_letter(rng, i) for i in range(count)]


def ham_letters(count: int, seed: int = 7) -> list[bytes]:
    return [g.raw for g in legit.letters(count, seed=seed)]


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "data"
    assert runner.invoke(app, ["init", "--data", str(path)]).exit_code == 0
    return path


@pytest.fixture
def mail(tmp_path: Path) -> tuple[Path, Path]:
    """30 ham letters in a Maildir and a directory of .eml files, 30 spam in an mbox."""
    hams = ham_letters(30)
    box = mailbox.Maildir(str(tmp_path / "ham-maildir"), create=True)
    for raw in hams[:20]:
        box.add(raw)
    folder = tmp_path / "ham-files"
    folder.mkdir()
    for i, raw in enumerate(hams[20:]):
        (folder / f"{i}.eml").write_bytes(raw)
    (folder / "notes.pdf").write_bytes(b"%PDF not a letter")  # not a letter's suffix
    mbox = mailbox.mbox(str(tmp_path / "spam.mbox"), create=True)
    for raw in spam_letters(30):
        mbox.add(raw)
    mbox.flush()
    mbox.close()
    return tmp_path / "ham-maildir", tmp_path / "spam.mbox"


# -- reading letters -----------------------------------------------------------------------


def test_every_kind_of_path_is_read(tmp_path: Path, mail: tuple[Path, Path]) -> None:
    maildir, mbox = mail
    ham = sources.read([maildir, tmp_path / "ham-files"], "ham", max_size=10**6)
    assert len(ham.letters) == 30 and {m.label for m in ham.letters} == {"ham"}
    assert sorted(m.raw for m in ham.letters) == sorted(ham_letters(30))
    spam = sources.read([mbox], "spam", max_size=10**6)
    assert [m.raw.replace(b"\r\n", b"\n") for m in spam.letters] == [
        r.replace(b"\r\n", b"\n") for r in spam_letters(30)
    ]
    one = sources.read([tmp_path / "ham-files" / "0.eml"], "ham", max_size=10**6)
    assert len(one.letters) == 1 and one.letters[0].date is not None


def test_a_letter_over_the_size_is_skipped_and_counted(tmp_path: Path) -> None:
    folder = tmp_path / "letters"
    folder.mkdir()
    (folder / "small.eml").write_bytes(b"Subject: hi\r\n\r\nhello\r\n")
    (folder / "big.eml").write_bytes(b"Subject: big\r\n\r\n" + b"x" * 5000)
    (folder / "empty.txt").write_bytes(b"\r\n")
    read = sources.read([folder], "ham", max_size=1000)
    assert read.as_dict() == {"letters": 1, "too_large": 1, "empty": 1}
    assert read.size == len(b"Subject: hi\r\n\r\nhello\r\n")


def test_a_missing_path_and_too_many_letters_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="no such file or directory"):
        sources.read([tmp_path / "nope"], "ham", max_size=1000)
    folder = tmp_path / "letters"
    folder.mkdir()
    for i in range(4):
        (folder / f"{i}.eml").write_bytes(b"Subject: hi\r\n\r\nhello\r\n")
    with pytest.raises(InvalidInput, match="more than 3 ham letters"):
        sources.read([folder], "ham", max_size=1000, limit=3)
    with pytest.raises(InvalidInput, match="more than 50 bytes"):
        sources.read([folder], "ham", max_size=1000, max_bytes=50)


@pytest.mark.parametrize(
    ("folder", "verdict", "taught"),
    [
        ("Spam", "spam", ("spam", False)),
        ("Spam", "phishing", ("spam", False)),
        ("Spam", "ham", ("spam", True)),  # moved into Spam
        ("Inbox", "ham", ("ham", False)),
        ("Work", "ham", ("ham", False)),
        ("Inbox", "spam", ("ham", True)),  # moved out of Spam
        ("Inbox", "phishing", ("ham", True)),
        ("Inbox", None, None),  # never scored (appended, imported)
        ("Trash", "spam", None),
        ("Spam", "unknown", None),
    ],
)
def test_what_an_installations_letter_teaches(
    folder: str, verdict: str | None, taught: tuple[str, bool] | None
) -> None:
    assert installation.label_of(folder, verdict) == taught


# -- the commands --------------------------------------------------------------------------


def test_train_list_promote_rollback(data: Path, mail: tuple[Path, Path]) -> None:
    maildir, mbox = mail
    ham_files = maildir.parent / "ham-files"
    code, out, _ = run("model", "list", "--data", data, "--json")
    assert code == 0 and json.loads(out) == {"live": None, "versions": []}
    code, out, err = run(
        "model", "train", "--ham", maildir, "--ham", ham_files, "--spam", mbox,
        "--generated", "0", "--iterations", "10", "--data", data, "--json",
    )  # fmt: skip
    assert code == 0, err
    trained = json.loads(out)
    figures = trained["figures"]
    assert figures["letters"] == {"ham": 30, "spam": 30} and figures["folds"] == 5
    assert set(figures["new"]) == set(figures["live"]) == {"spam_caught", "ham_in_spam"}
    assert figures["read"]["ham"] == {"letters": 30, "too_large": 0, "empty": 0}
    version = trained["version"]
    assert "promoted" not in trained
    code, out, _ = run("model", "list", "--data", data, "--json")
    listed = json.loads(out)
    assert listed["live"] is None  # written, not live
    assert [v["version"] for v in listed["versions"]] == [version]
    assert listed["versions"][0]["figures"]["new"] == figures["new"]
    assert (data / "models" / version / "model.cbm").is_file()

    code, out, _ = run("model", "promote", version, "--data", data, "--json")
    assert code == 0 and json.loads(out) == {"live": version}
    code, out, _ = run("model", "list", "--data", data)
    assert f"* {version}" in out
    code, out, _ = run("model", "rollback", "--data", data, "--json")
    assert code == 0 and json.loads(out) == {"live": None}
    code, out, _ = run("model", "list", "--data", data, "--json")
    assert json.loads(out)["live"] is None and len(json.loads(out)["versions"]) == 1


def test_train_with_promote_makes_a_version_live_when_not_worse(
    data: Path, mail: tuple[Path, Path]
) -> None:
    maildir, mbox = mail
    code, out, err = run(
        "model", "train", "--ham", maildir, "--ham", maildir.parent / "ham-files",
        "--spam", mbox, "--generated", "0", "--iterations", "10", "--promote",
        "--models", "2", "--data", data, "--json",
    )  # fmt: skip
    assert code == 0, err
    trained = json.loads(out)
    # two fits averaged into one model (and into each fold's model the figures come from)
    meta = json.loads((data / "models" / trained["version"] / "model.json").read_text())
    assert meta["info"]["models"] == 2 and meta["info"]["seed"] == 0
    new, live = trained["figures"]["new"], trained["figures"]["live"]
    better = new["spam_caught"] >= live["spam_caught"] and new["ham_in_spam"] <= live["ham_in_spam"]
    assert trained["promoted"] is better
    code, out, _ = run("model", "list", "--data", data, "--json")
    assert json.loads(out)["live"] == (trained["version"] if better else None)


def test_bad_input_is_a_clear_error(data: Path, tmp_path: Path, mail: tuple[Path, Path]) -> None:
    code, _, err = run("model", "train", "--ham", tmp_path / "nope", "--data", data)
    assert code == 2 and "no such file or directory" in err
    code, _, err = run("model", "train", "--models", "0", "--data", data)
    assert code == 2 and "--models" in err
    code, _, err = run("model", "train", "--spam", mail[1], "--data", data)
    assert code == 2 and "at least 20" in err
    code, _, err = run("model", "promote", "../../etc", "--data", data)
    assert code == 2 and "not a model version" in err
    code, _, err = run("model", "promote", "20990101-000000", "--data", data)
    assert code == 3 and "no model version" in err
    code, _, err = run("model", "evaluate", "--data", data)
    assert code == 2 and "not both nor neither" in err
    code, _, err = run("model", "evaluate", mail[1], "--user", "a@example.org", "--data", data)
    assert code == 2
    code, _, err = run("model", "evaluate", "--user", "nobody@example.org", "--data", data)
    assert code == 3


def test_evaluate_says_where_each_letter_goes_and_why(
    data: Path, tmp_path: Path, mail: tuple[Path, Path]
) -> None:
    big = tmp_path / "big.eml"
    big.write_bytes(b"Subject: big\r\n\r\n" + b"x" * (3 * 2**20))
    code, out, err = run(
        "model", "evaluate", big, mail[1], "--limit", "5", "--data", data, "--json",
        "--config", write_config(tmp_path, max_message_size=2**20),
    )  # fmt: skip
    assert code == 0, err
    result = json.loads(out)
    assert len(result["letters"]) == 5
    spam = result["letters"][1:]
    assert all(r["goes_to"] in ("Spam", "Inbox") and r["reasons"] for r in spam)
    assert all(r["goes_to"] == ("Inbox" if r["verdict"] == "ham" else "Spam") for r in spam)
    assert result["letters"][0]["verdict"] == "too_large"
    summary = result["summary"]
    assert summary["letters"] == 5 and summary["too_large"] == 1
    assert summary["to_spam"] + summary["to_inbox"] == 4


def write_config(tmp_path: Path, max_message_size: int) -> Path:
    path = tmp_path / "pochta.toml"
    path.write_text(f"[smtp]\nmax_message_size = {max_message_size}\n")
    return path


def test_from_installation_reads_what_users_filed(data: Path) -> None:
    pochta = build(load_settings(data_dir=data, antispam={"pool_processes": 0}))
    try:
        ann = pochta.mailbox.add_user("ann@example.org", "a long enough password")
        bob = pochta.mailbox.add_user("bob@example.org", "a long enough password")
        for i, raw in enumerate(ham_letters(24)):
            pochta.mailbox.deliver(raw, [ann if i % 2 else bob], scan=True)
        for i, raw in enumerate(spam_letters(24, seed=3)):
            pochta.mailbox.deliver(raw, [ann if i % 2 else bob], scan=True)
        stored = [
            m
            for user in (ann, bob)
            for folder in ("Inbox", "Spam")
            for m in pochta.mailbox.letters(user.id, folder, 100)
        ]
        inbox_ham = next(m for m in stored if m.folder == "Inbox" and m.verdict == "ham")
        pochta.mailbox.update(inbox_ham.user_id, inbox_ham.id, folder="Spam")
        found = installation.read(pochta.mailbox)
    finally:
        pochta.close()
    assert found.users == 2
    assert len(found.ham.letters) + len(found.spam.letters) == 48
    assert found.corrections["moved_into_spam"] == 1
    in_spam = {m.id for m in stored if m.folder == "Spam"} | {inbox_ham.id}
    assert len(found.spam.letters) == len(in_spam) == 25
    code, out, err = run(
        "model", "train", "--from-installation", "--generated", "0", "--iterations", "10",
        "--data", data, "--json",
    )  # fmt: skip
    assert code == 0, err  # 25 spam (24 filed by pochta, 1 by ann) and 23 ham
    assert json.loads(out)["figures"]["read"]["installation"]["corrections"] == {
        "moved_into_spam": 1,
        "moved_out_of_spam": 0,
    }


def test_evaluate_a_users_letters_says_which_would_change_folder(data: Path) -> None:
    pochta = build(load_settings(data_dir=data, antispam={"pool_processes": 0}))
    try:
        ann = pochta.mailbox.add_user("ann@example.org", "a long enough password")
        for raw in ham_letters(3):
            pochta.mailbox.deliver(raw, [ann], scan=True)
        first = pochta.mailbox.letters(ann.id, "Inbox", 10)[0]
        pochta.mailbox.update(ann.id, first.id, folder="Spam")  # she filed a ham letter as spam
        bob = pochta.mailbox.add_user("bob@example.org", "a long enough password")
        pochta.mailbox.deliver(spam_letters(1)[0], [bob], scan=True)
    finally:
        pochta.close()
    code, out, err = run("model", "evaluate", "--user", "ann@example.org", "--data", data, "--json")
    assert code == 0, err
    result = json.loads(out)
    assert len(result["letters"]) == 3  # hers only: bob's letter is not among them
    assert {r["folder"] for r in result["letters"]} == {"Inbox", "Spam"}
    moved = sum(1 for r in result["letters"] if (r["folder"] == "Spam") != (r["goes_to"] == "Spam"))
    assert result["summary"]["would_move"] == moved


def test_evaluate_a_users_letters_reads_the_users_own_list(data: Path) -> None:
    """ "Would it go to Spam now" for a user is what a delivery to that user would do: the
    installation's verdict made personal by the user's sender list (and words)."""
    pochta = build(load_settings(data_dir=data, antispam={"pool_processes": 0}))
    try:
        ann = pochta.mailbox.add_user("ann@example.org", "a long enough password")
        blocked, kept = ham_letters(2)
        assert pochta.mailbox.lists is not None
        pochta.mailbox.lists.add(ann.id, parse(blocked).from_address, "block")
        done = pochta.mailbox.deliver(blocked, [ann], scan=True)
        assert done.verdict is not None and done.verdict.label == "ham"
        assert pochta.mailbox.letter(ann.id, done.ids[0]).folder == "Spam"  # her list
        pochta.mailbox.deliver(kept, [ann], scan=True)
    finally:
        pochta.close()
    code, out, err = run("model", "evaluate", "--user", "ann@example.org", "--data", data, "--json")
    assert code == 0, err
    result = json.loads(out)
    rows = {r["folder"]: r for r in result["letters"]}
    assert (rows["Spam"]["goes_to"], rows["Spam"]["verdict"]) == ("Spam", "spam")
    assert rows["Spam"]["list"] == "block" and rows["Inbox"]["list"] is None
    assert rows["Inbox"]["goes_to"] == "Inbox" and result["summary"]["would_move"] == 0


def test_the_models_option_states_the_factorys_default() -> None:
    """``--models``' help says the default ``train`` uses (``training.MODELS``)."""
    import typer.main

    from pochta_factory import training

    groups: Any = typer.main.get_command(app)
    train = groups.commands["model"].commands["train"]
    option = next(p for p in train.params if p.name == "models")
    stated = re.search(r"default (\d+)", getattr(option, "help", "") or "")
    assert stated is not None and int(stated.group(1)) == training.MODELS


def test_the_models_option_allows_what_the_factory_fits() -> None:
    """``--models``' range is the factory's (``fitting.MAX_MODELS``): the CLI repeats the number
    so that ``pochta --help`` does not import the factory, and this keeps the two the same."""
    import typer.main

    from pochta_factory import fitting

    groups: Any = typer.main.get_command(app)
    train = groups.commands["model"].commands["train"]
    option = next(p for p in train.params if p.name == "models")
    assert (option.min, option.max) == (1, fitting.MAX_MODELS)
