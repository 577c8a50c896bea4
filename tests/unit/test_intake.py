"""The intake's two duties beyond preparing: a letter loses the fields that claim to be
pochta's, and a letter its worker could not finish does what ``antispam.on_timeout`` says."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import math
import os
import pickle
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.mailtools import letter

from pochta.antispam import tokens
from pochta.antispam.model.booster import Model
from pochta.antispam.signs import wording
from pochta.antispam.tokens import TokenTable
from pochta.antispam.verdict import TIMEOUT, Analyzer, Scanner, unanalyzed
from pochta.budget import Budget
from pochta.config import WARM_WORDS, warm_words
from pochta.cpupool import CpuPool
from pochta.errors import ConfigError, CpuPoolTimeout, Overloaded
from pochta.mailbox import warmed
from pochta.mailbox.intake import AnalysisSettings, Intake, _model_reads, init_pool_process
from pochta.types import Envelope

FORGED = b"X-Pochta-Spam: ham; probability=0.0001\r\nAuthentication-Results: mx.test; dkim=pass\r\n"


class Told:
    def __init__(self) -> None:
        self.actions: list[str] = []

    def delivered(self, label: str, signs: object, copies: int) -> None:
        pass

    def feedback(self, kind: str, shingles: object) -> None:
        pass

    def login_failed(self, ip: str, account: str | None) -> None:
        pass

    def unscored(self, action: str) -> None:
        self.actions.append(action)


@pytest.fixture(scope="module")
def pool() -> Iterator[CpuPool]:
    workers = CpuPool(1, initializer=init_pool_process, initargs=(AnalysisSettings(),))
    workers.start()
    yield workers
    workers.close()


def slow_letter() -> bytes:
    """Little to send, much to parse: 30,000 tiny parts."""
    part = b"--b\r\nContent-Type: text/plain\r\n\r\nword 1 2 3\r\n"
    head = b'Subject: parts\r\nContent-Type: multipart/mixed; boundary="b"\r\n\r\n'
    return head + part * 30_000 + b"--b--\r\n"


def intake(pool: CpuPool | None, on_timeout: str, told: Told, deadline: float) -> Intake:
    return Intake(
        Analyzer(),
        pool,
        inline_limit=4096,
        deadline=deadline,
        authserv_id="mx.test",
        on_timeout=on_timeout,
        activity=told,
    )


ENVELOPE = Envelope(ip="192.0.2.1", sender="s@example.net", recipients=("a@example.org",))


def test_claims_go_in_the_worker_and_in_a_thread(pool: CpuPool, tmp_path: Path) -> None:
    raw = letter()
    spooled = tmp_path / "x.letter"
    spooled.write_bytes(FORGED + raw)
    for where in (pool, None):
        for given in (FORGED + raw, spooled):
            prepared = asyncio.run(
                intake(where, "inbox", Told(), 30.0).prepare(
                    given, ENVELOPE, "helo", analyze=True, shingles=True, prefix=b"Received: x\r\n"
                )
            )
            assert prepared.size == len(b"Received: x\r\n" + raw)
            assert prepared.analysis is not None and not prepared.analysis.partial


def test_a_letter_past_the_deadline_does_what_the_operator_chose(pool: CpuPool) -> None:
    raw = FORGED + slow_letter()
    told = Told()

    async def run(on_timeout: str) -> object:
        return await intake(pool, on_timeout, told, 0.05).prepare(
            raw, ENVELOPE, "helo", analyze=True, shingles=True
        )

    for on_timeout in ("inbox", "spam"):
        prepared = asyncio.run(run(on_timeout))
        assert prepared.analysis is not None and prepared.analysis.partial == (TIMEOUT,)
        assert prepared.size == len(raw) - len(FORGED)  # kept whole, without the claims
    with pytest.raises(CpuPoolTimeout):
        asyncio.run(run("defer"))
    assert told.actions == ["inbox", "spam", "defer"]


def test_the_unscored_label_is_the_operators() -> None:
    assert Scanner().decide(unanalyzed()).label == "ham"
    verdict = Scanner(unscored="spam").decide(unanalyzed())
    assert verdict.label == "spam" and verdict.partial == (TIMEOUT,)
    assert verdict.folder == "Spam"


def test_a_letter_loaded_whole_is_taken_from_the_budget_or_deferred(
    pool: CpuPool, tmp_path: Path
) -> None:
    """An unscored letter (past the deadline) is read whole into the server: its bytes are
    taken from the memory budget into the caller's share, held until the caller stores it;
    when the budget cannot hold them the letter is deferred (Overloaded: SMTP 451, IMAP NO
    [UNAVAILABLE]) rather than loaded. The same for a letter a user gives (prepare_apart)."""
    raw = slow_letter()
    spooled = tmp_path / "slow.letter"
    spooled.write_bytes(raw)
    prefix = b"Received: x\r\n"
    told = Told()
    slow = intake(pool, "inbox", told, 0.05)
    for given in (raw, spooled):
        budget = Budget(len(raw))  # not room for the trace header too
        held = budget.share()
        with pytest.raises(Overloaded):
            asyncio.run(
                slow.prepare(
                    given, ENVELOPE, "helo", analyze=True, shingles=True, prefix=prefix, held=held
                )
            )
        assert budget.used == 0
        budget = Budget(4 * len(raw))
        held = budget.share()
        prepared = asyncio.run(
            slow.prepare(
                given, ENVELOPE, "helo", analyze=True, shingles=True, prefix=prefix, held=held
            )
        )
        assert prepared.size == len(prefix + raw)
        assert held.held == len(prefix + raw)  # until the caller has stored it
        assert told.actions[-2:] == ["defer", "inbox"]  # what became of each, as counted
        held.release()
        # a letter a user gives, whose worker ran past the deadline: stored whole, counted
        budget = Budget(len(raw) - 1)
        with pytest.raises(Overloaded):
            asyncio.run(slow.prepare_apart(given, tmp_path / "parts", 0, budget.share()))
        budget = Budget(len(raw))
        held = budget.share()
        prepared, files = asyncio.run(slow.prepare_apart(given, tmp_path / "parts", 0, held))
        assert (prepared.size, files, held.held) == (len(raw), {}, len(raw))
        held.release()


def test_the_learned_words_key_is_not_in_the_analysis_settings_repr() -> None:
    """AnalysisSettings travels to every worker and may be shown in an error: the key of the
    learned words' hashes (antispam.learned_words_key) must not be."""
    settings = AnalysisSettings(dns="off", word_key=b"a-very-secret-words-key")
    assert settings.word_key == b"a-very-secret-words-key"
    assert "a-very-secret" not in repr(settings) and "dns='off'" in repr(settings)


def test_prepare_then_hands_the_workers_answer_to_the_executor(pool: CpuPool) -> None:
    """``prepare_then``: ``then`` runs in a thread of the given executor with the prepared
    letter (no sender authentication here: the pool's thread hands it over), and its result
    or its error comes back; a letter past the deadline goes the way of ``on_timeout`` first;
    with ``defer``, or cancelled while its worker runs, ``then`` is never called."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    raw = letter()
    seen: list[tuple[int, str]] = []

    def then(prepared: object) -> str:
        seen.append((getattr(prepared, "size", -1), threading.current_thread().name))
        return "stored"

    def broken(prepared: object) -> str:
        raise OSError("disk")

    async def run(where: Intake, given: bytes, store: object = then) -> object:
        return await where.prepare_then(
            store,  # type: ignore[arg-type]
            executor,
            given,
            ENVELOPE,
            "helo",
            analyze=True,
            shingles=True,
            prefix=b"Received: x\r\n",
        )

    told = Told()
    with ThreadPoolExecutor(1, thread_name_prefix="store") as executor:
        assert asyncio.run(run(intake(pool, "inbox", told, 30.0), raw)) == "stored"
        assert seen == [(len(b"Received: x\r\n" + raw), seen[0][1])]
        assert seen[0][1].startswith("store")
        with pytest.raises(OSError, match="disk"):
            asyncio.run(run(intake(pool, "inbox", told, 30.0), raw, broken))
        slow = FORGED + slow_letter()
        assert asyncio.run(run(intake(pool, "inbox", told, 0.05), slow)) == "stored"
        assert seen[-1][0] == len(b"Received: x\r\n" + slow) - len(FORGED)  # whole, unscored
        with pytest.raises(CpuPoolTimeout):
            asyncio.run(run(intake(pool, "defer", told, 0.05), slow))
        assert told.actions == ["inbox", "defer"]
        assert len(seen) == 2

        async def cancelled() -> None:
            task = asyncio.ensure_future(run(intake(pool, "inbox", told, 30.0), slow_letter()))
            await asyncio.sleep(0.03)  # its worker is parsing (~0.1-0.2 s of work here)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        asyncio.run(cancelled())
        pool.run(len, b"")  # the worker has finished the cancelled letter
        assert len(seen) == 2


WARMED = """
from pochta.antispam import tokens
from pochta.antispam.signs import wording
from pochta.cpupool import CpuPool
from pochta.mailbox.intake import POOL_MODULES
from pochta.mime import normalize


def built() -> int:
    return normalize.public_suffixes.cache_info().currsize


def sets() -> int:
    return len(wording._SET)


if __name__ == "__main__":
    workers = CpuPool(1, preload=POOL_MODULES)
    workers.start()
    try:
        print(workers.submit(built).result(timeout=60), built())
        print(workers.submit(sets).result(timeout=60), sets())
    finally:
        workers.close()
"""


def test_a_worker_starts_with_the_tables_built_by_its_fork_server(tmp_path: Path) -> None:
    """The preloaded ``warmed`` module builds them in the fork server (a fresh process's:
    one per process, started by its first pool): a worker that ran no initializer has them
    (and the phrase families' RE2 set, compiled and warmed) already, and the server process
    that only forks workers never builds them."""
    script = tmp_path / "warmed.py"
    script.write_text(WARMED)
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env={**os.environ, "POCHTA_WARM_WORDS": "2000"},
    )
    assert done.stdout.split() == ["1", "0", "1", "0"]
    done = subprocess.run(  # the tests' own pochtas: no warm-up, the set compiled at first use
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env={**os.environ, "POCHTA_WARM_WORDS": "0"},
    )
    assert done.stdout.split() == ["1", "0", "0", "0"]


FROZEN = """
import gc

from pochta.cpupool import CpuPool
from pochta.mailbox import warmed
from pochta.mailbox.intake import POOL_MODULES
from pochta.mime import normalize


def walked() -> tuple[bool, bool, int]:
    ids = {id(o) for o in gc.get_objects()}
    return id(vars(warmed)) in ids, id(vars(normalize)) in ids, gc.get_freeze_count()


if __name__ == "__main__":
    workers = CpuPool(1, preload=POOL_MODULES)
    workers.start()
    try:
        here, forked = walked(), workers.submit(walked).result(timeout=60)
        print(*here[:2], here[2] == 0, *forked[:2], forked[2] > 10_000)
    finally:
        workers.close()
"""


def test_a_worker_freezes_what_its_fork_server_loaded_and_importing_freezes_nothing(
    tmp_path: Path,
) -> None:
    """A worker leaves what it inherited from its fork server (the preloaded modules, their
    tables) out of its collections' walks: none walks those objects again, nor copies their
    pages. Importing ``warmed`` (the server process does not; these tests do) freezes
    nothing: the process that imports it keeps its own collector as it was."""
    script = tmp_path / "frozen.py"
    script.write_text(FROZEN)
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env={**os.environ, "POCHTA_WARM_WORDS": "0"},
    )
    assert done.stdout.split() == ["True", "True", "True", "False", "False", "True"]
    assert gc.get_freeze_count() == 0  # this process imported warmed (at the top)


def test_a_token_table_that_cannot_be_read_leaves_the_set_cold(tmp_path: Path) -> None:
    """The warm-up runs in the fork server, where any exception but ImportError kills it
    (every worker's start then fails with an EOF): a broken table is no warm-up, no error."""
    (tmp_path / "tokens.json").write_text('{"spam_letters": 1')
    wording._SET.clear()
    warmed.warm(2_000, tmp_path)
    assert wording._SET == []
    warmed.warm(2_000, tmp_path / "none")  # no table at all
    assert wording._SET == []


def test_the_table_read_for_the_warm_up_is_not_kept(tmp_path: Path) -> None:
    """Every worker the fork server forks would inherit it (~3 MB of the shipped one) and
    never read it: each is handed its model's own table."""
    tokens.save(TokenTable({"verify": (9, 0), "lunch": (0, 1)}, 10, 10), tmp_path)
    kept = dict(tokens._LOADED)
    wording._SET.clear()
    warmed.warm(2_000, tmp_path)
    assert len(wording._SET) == 1 and dict(tokens._LOADED) == kept


def test_the_warm_up_size_is_read_from_the_environment() -> None:
    assert warm_words({}) == WARM_WORDS
    assert warm_words({"POCHTA_WARM_WORDS": " 0"}) == 0
    assert warm_words({"POCHTA_WARM_WORDS": "1000000"}) == 1_000_000
    for bad in ("-1", "1e4", "", "1000001", "ten"):
        with pytest.raises(ConfigError, match="POCHTA_WARM_WORDS"):
            warm_words({"POCHTA_WARM_WORDS": bad})


def test_the_warming_texts_are_the_tables_words_as_often_as_seen() -> None:
    table = TokenTable({"verify": (9, 0), "lunch": (0, 1)}, 10, 10)
    texts = list(warmed.sample_texts(table, 1_234, seed=3))
    assert texts == list(warmed.sample_texts(table, 1_234, seed=3))  # the same every start
    words = " ".join(texts).replace(".", " ").split()
    assert len(texts) == 3 and len(words) == 1_234 and set(words) == {"verify", "lunch"}
    assert words.count("verify") > 5 * words.count("lunch")
    assert list(warmed.sample_texts(TokenTable({}, 0, 0), 100)) == []


def test_the_answer_keeps_the_features_the_model_reads_otherwise_than_a_missing_column() -> None:
    """``for_the_server`` sends only the model's columns whose value is not what the model takes
    for a missing column (its default, else NaN), each as the float the model reads."""
    model = Model(
        None, ["a", "b", "c", "d", "e", "f", "g"], defaults={"a": 0.0, "b": 1.0, "d": math.nan}
    )
    features = {"a": 0.0, "b": 2, "c": math.nan, "d": math.nan, "e": 3.5, "g": 0.0, "x": 9.0}
    kept = _model_reads(features, model)
    assert kept == {"b": 2.0, "e": 3.5, "g": 0.0}
    assert type(kept["b"]) is float
    assert _model_reads(features, None) == {}
    assert model.missing_values[:2] == (("a", 0.0), ("b", 1.0))


def test_a_switched_model_s_answer_reads_the_new_model_s_missing_values() -> None:
    """A model switch (a new ``Model``: promoted, or pickled to a new worker) reads its own
    columns and defaults, never the previous model's kept from an earlier letter."""
    features = {"a": 0.0, "b": 1.0, "c": 2.0}
    old = Model(None, ["a", "b"], defaults={"a": 0.0})
    assert _model_reads(features, old) == {"b": 1.0}  # old's missing values now read
    new = dataclasses.replace(old, columns=["a", "b", "c"], defaults={"a": 1.0, "b": 1.0})
    assert _model_reads(features, new) == {"a": 0.0, "c": 2.0}
    pickled = pickle.loads(pickle.dumps(new))
    assert _model_reads(features, pickled) == {"a": 0.0, "c": 2.0}
    assert _model_reads(features, old) == {"b": 1.0}
