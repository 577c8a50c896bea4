"""``pochta.app``: building starts no thread; ``start`` starts the background work of a server;
``close`` joins every thread started and writes the buffered shingle counts."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from tests.mailtools import letter, payload

from pochta.antispam.shingles.counters import Ref
from pochta.app import build, history_backend, service_token, web_secret, words_backend
from pochta.cli.common import opened
from pochta.config import Settings, load_settings
from pochta.errors import ConfigError


def settings(tmp_path: Path) -> Settings:
    # a flush interval of an hour: only the close writes the counters
    return load_settings(data_dir=tmp_path / "data", shingles={"flush_interval": 3600})


def threads() -> set[threading.Thread]:
    return set(threading.enumerate())


def new_threads(before: set[threading.Thread]) -> set[str]:
    """The threads alive now that were not before (another test's ending ones do not count)."""
    return {t.name for t in threads() - before}


def test_building_starts_no_thread_and_close_joins_what_start_started(tmp_path: Path) -> None:
    before = threads()
    pochta = build(settings(tmp_path))
    try:
        assert new_threads(before) == set()
        pochta.start()
        started = new_threads(before)
        assert {"pochta-shingle-flusher", "pochta-deletions", "pochta-valkyrie"} <= started
        # put every pool to work: counting, fsync, the deletion worker and its lease
        user = pochta.mailbox.add_user("ann@example.org", "a long enough password")
        done = pochta.mailbox.deliver(letter(attachments=[("a", payload(1, 20_000))]), [user])
        pochta.mailbox.delete(user.id, done.ids[0])
        pochta.deletion_job.wake()
        deadline = time.monotonic() + 10
        while pochta.mailbox.stats()["pending_deletions"] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert pochta.mailbox.stats()["pending_deletions"] == 0
    finally:
        pochta.close()
    assert new_threads(before) == set()
    pochta.close()  # once is enough; again does nothing


def test_close_without_start_and_the_valkyrie_setting(tmp_path: Path) -> None:
    before = threads()
    s = settings(tmp_path)
    pochta = build(
        s.model_copy(update={"valkyrie": s.valkyrie.model_copy(update={"enabled": False})})
    )
    pochta.start()
    assert not any(name.startswith("pochta-valkyrie") for name in new_threads(before))
    pochta.close()
    assert new_threads(before) == set()
    build(s).close()  # never started
    assert new_threads(before) == set()


def test_a_cli_command_starts_no_thread(tmp_path: Path) -> None:
    before = threads()
    (tmp_path / "data").mkdir()
    with opened(tmp_path / "data", None) as pochta:
        pochta.mailbox.add_user("bob@example.org", "a long enough password")
        assert new_threads(before) == set()
    assert new_threads(before) == set()


def test_close_writes_the_buffered_shingle_counts(tmp_path: Path) -> None:
    refs = [Ref(8, i) for i in range(20)]
    pochta = build(settings(tmp_path))
    pochta.start()
    pochta.shingles.update(refs, "ham", 3)
    assert pochta.shingles.counters.stats().buffered == 20  # not yet written
    pochta.close()
    again = build(settings(tmp_path))
    try:
        assert {c["24h"]["ham"] for c in again.shingles.query(refs, ["24h"])} == {3}
        assert again.shingles.counters.stats().buffered == 0  # read from the store
    finally:
        again.close()


def test_moving_a_letter_into_spam_teaches_its_words_and_close_writes_them(
    tmp_path: Path,
) -> None:
    s = load_settings(data_dir=tmp_path / "data", antispam={"learned_words_flush_seconds": 3600})
    pochta = build(s)
    pochta.start()
    assert "pochta-words" in {t.name for t in threads()}
    user = pochta.mailbox.add_user("ann@example.org", "a long enough password")
    raw = letter(subject="hello", text="a letter whose words will be learned by pochta")
    done = pochta.mailbox.deliver(raw, [user], scan=True)
    words = pochta.scanner.words
    assert words is not None
    before = words.stats()
    pochta.mailbox.update(user.id, done.ids[0], folder="Spam")
    after = words.stats()
    assert after.learned_spam == before.learned_spam + 3  # a person's word: 3 letters
    pochta.close()
    again = build(s)
    try:
        assert again.scanner.words is not None
        assert again.scanner.words.stats().learned_spam == after.learned_spam
    finally:
        again.close()


def test_learning_words_can_be_turned_off(tmp_path: Path) -> None:
    pochta = build(load_settings(data_dir=tmp_path / "data", antispam={"learn_words": False}))
    try:
        assert pochta.scanner.words is None
        assert not (tmp_path / "data" / "words.sqlite3").exists()
    finally:
        pochta.close()


def race(config: Settings, racers: int) -> list[str]:
    """``web_secret`` in ``racers`` threads let go at once; what each got."""
    got: list[str] = []
    start = threading.Barrier(racers)

    def take() -> None:
        start.wait()
        got.append(web_secret(config))

    threads_ = [threading.Thread(target=take) for _ in range(racers)]
    for t in threads_:
        t.start()
    for t in threads_:
        t.join()
    return got


def test_threads_racing_for_a_new_secret_all_get_the_one_kept(tmp_path: Path) -> None:
    for round_ in range(20):  # before the fix, most rounds of 8 threads had a loser with ""
        data = tmp_path / str(round_)
        data.mkdir()
        got = race(load_settings(data_dir=data), 8)
        kept = (data / "web-secret").read_text().strip()
        assert len(kept) >= 16 and got == [kept] * 8
        assert stat.S_IMODE((data / "web-secret").stat().st_mode) == 0o600
        assert sorted(os.listdir(data)) == ["web-secret"]  # no temporary file left


RACER = """
import os, sys, time
from pathlib import Path
from pochta.secretfile import read_or_create
go = Path(sys.argv[1]) / "go"
while not go.exists():
    time.sleep(0.001)
print(read_or_create(Path(sys.argv[1]) / "service-token"))
"""


def test_processes_racing_for_a_new_secret_all_get_the_one_kept(tmp_path: Path) -> None:
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, str(tmp_path)], stdout=subprocess.PIPE, text=True
        )
        for _ in range(6)
    ]
    (tmp_path / "go").touch()
    got = [r.communicate(timeout=60)[0].strip() for r in racers]
    assert all(r.returncode == 0 for r in racers)
    kept = service_token(load_settings(data_dir=tmp_path))
    assert len(kept) >= 16 and got == [kept] * 6


@pytest.mark.parametrize(
    "content",
    [b"", b"\n", b"s3cr3t\n", b"\xff\xfe" * 20],
    ids=["empty", "blank", "short", "binary"],
)
def test_a_secret_file_without_a_usable_secret_is_refused_by_name(
    tmp_path: Path, content: bytes
) -> None:
    (tmp_path / "web-secret").write_bytes(content)  # e.g. a crash between create and write
    with pytest.raises(ConfigError) as caught:
        web_secret(load_settings(data_dir=tmp_path))
    assert str(tmp_path / "web-secret") in caught.value.message
    assert "s3cr3t" not in caught.value.message  # never the content


def test_a_crash_before_the_link_leaves_no_secret_behind(tmp_path: Path) -> None:
    (tmp_path / ".web-secret.0123456789abcdef.tmp").write_text("half")  # a crashed writer's
    value = web_secret(load_settings(data_dir=tmp_path))
    assert len(value) >= 16 and web_secret(load_settings(data_dir=tmp_path)) == value


@pytest.mark.parametrize(
    ("given", "words", "history"),
    [
        ({}, "sqlite", "sqlite"),
        ({"mailbox": {"backend": "postgres"}}, "postgres", "postgres"),
        ({"valkyrie": {"backend": "postgres"}}, "postgres", "postgres"),
        ({"guard": {"backend": "redis"}}, "redis", "sqlite"),
        ({"shingles": {"backend": "redis"}, "blobs": {"backend": "postgres"}},
         "postgres", "postgres"),
        ({"mailbox": {"backend": "postgres"}, "antispam": {"learned_words_backend": "sqlite"},
          "web": {"history_backend": "sqlite"}}, "sqlite", "sqlite"),
        ({"antispam": {"learned_words_backend": "redis"}}, "redis", "sqlite"),
        ({"web": {"history_backend": "postgres"}}, "sqlite", "postgres"),
    ],
)  # fmt: skip
def test_learned_words_and_history_go_where_the_shared_stores_are(
    given: dict[str, dict[str, str]], words: str, history: str
) -> None:
    s = load_settings(**given)
    assert (words_backend(s), history_backend(s)) == (words, history)


def test_learned_words_in_postgres_without_a_dsn_is_a_settings_error(tmp_path: Path) -> None:
    s = load_settings(data_dir=tmp_path / "data", antispam={"learned_words_backend": "postgres"})
    with pytest.raises(ConfigError, match=r"antispam\.learned_words_backend"):
        build(s)
