"""``pochta.app``: building starts no thread; ``start`` starts the background work of a server;
``close`` joins every thread started and writes the buffered shingle counts."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from tests.mailtools import letter, payload

from pochta.antispam.shingles.counters import Ref
from pochta.app import build
from pochta.cli.common import opened
from pochta.config import Settings, load_settings


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
        pochta.deletions.wake()
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
