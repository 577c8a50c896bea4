"""pochta on PostgreSQL: the stores chosen in settings, schema migrations (``pochta db``),
the DSN kept secret, two processes' worth of pochta sharing one mailbox, and a crash of the
server (SIGKILL) losing no acknowledged step.

Each test gets its own empty database (``new_postgres_db`` copies a migrated template; the
tests of migrations drop the schema first) on the session's server; the crash test starts a
server of its own.
"""

from __future__ import annotations

import json
import logging
import random
import threading
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pydantic import SecretStr
from typer.testing import CliRunner

from pochta.antispam.tokens import FEATURE as TOKENS_FEATURE
from pochta.antispam.words.bounded import BoundedReads
from pochta.antispam.words.postgres import PostgresWordStore
from pochta.app import build
from pochta.blobs.filedb.postgres import PostgresFileDB
from pochta.blobs.keys import key_of
from pochta.cli import app as cli
from pochta.config import Settings, load_settings
from pochta.errors import ConfigError, StorageError
from pochta.history.postgres import PostgresHistory
from pochta.postgres import migrate
from pochta.postgres.database import PoolSettings, Postgres, describe
from tests.mailtools import letter, payload
from tests.pgserver import PASSWORD, NewDatabase, PostgresServer, migrated_template

pytestmark = pytest.mark.integration

ALL_POSTGRES = {
    "mailbox": {"backend": "postgres"},
    "blobs": {"backend": "postgres"},
    "valkyrie": {"backend": "postgres", "enabled": False},
    "antispam": {"pool_processes": 0},
}


def empty(dsn: str) -> str:
    """The database without pochta's schema (as a new one an operator creates)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP SCHEMA pochta CASCADE")
    return dsn


def pg_settings(data: Path, dsn: str, **postgres: Any) -> Settings:
    return load_settings(data_dir=data, postgres={"dsn": dsn, **postgres}, **ALL_POSTGRES)


runner = CliRunner()


def pochta_cli(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(cli, list(args))
    assert "Traceback" not in result.output
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def dsn_env(new_postgres_db: NewDatabase, monkeypatch: pytest.MonkeyPatch) -> str:
    """An empty database named in POCHTA_POSTGRES__DSN, as an operator would give it."""
    dsn = empty(new_postgres_db())
    monkeypatch.setenv("POCHTA_POSTGRES__DSN", dsn)
    return dsn


# -- migrations -----------------------------------------------------------------------------
def test_db_upgrade_applies_every_migration_once(dsn_env: str, tmp_path: Path) -> None:
    code, out, err = pochta_cli("db", "status", "--data", str(tmp_path))
    assert code == 6 and "version 0" in out and "pochta db upgrade" in err
    code, out, _ = pochta_cli("db", "upgrade", "--data", str(tmp_path))
    assert code == 0, out
    assert [line.split()[1] for line in out.splitlines()[:-1]] == [
        f"{m.version:04d}_{m.name}" for m in migrate.shipped()
    ]
    code, out, _ = pochta_cli("db", "upgrade", "--json", "--data", str(tmp_path))
    assert code == 0 and '"applied": []' in out
    assert pochta_cli("db", "status", "--data", str(tmp_path))[0] == 0
    with psycopg.connect(dsn_env) as conn:
        rows = conn.execute("SELECT version FROM pochta.schema_version ORDER BY 1").fetchall()
    assert [r[0] for r in rows] == list(range(1, migrate.head() + 1))


def test_a_database_at_version_6_upgrades_to_the_models_lists_and_words(
    dsn_env: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """An installation upgraded before issue 28 (schema 6, the IMAP one): ``pochta db
    upgrade`` adds the model versions (7), the sender lists (8), the learned words and the
    history (9), FileDB's shard place (10), the queue's delivered entries (11), in that order,
    and a pochta built on it uses the first three."""
    real = migrate.shipped()
    assert [f"{m.version:04d}_{m.name}" for m in real[6:]] == [
        "0007_models",
        "0008_sender_lists",
        "0009_words_history",
        "0010_filedb_shards",
        "0011_queued",
    ]
    with monkeypatch.context() as m:
        m.setattr(migrate, "shipped", lambda: real[:6])
        assert pochta_cli("db", "upgrade", "--data", str(tmp_path))[0] == 0
    code, out, err = pochta_cli("db", "status", "--data", str(tmp_path))
    assert code == 6 and "version 6" in out and "pochta db upgrade" in err
    code, out, _ = pochta_cli("db", "upgrade", "--json", "--data", str(tmp_path))
    assert code == 0, out
    assert [a["version"] for a in json.loads(out)["applied"]] == [7, 8, 9, 10, 11]
    pochta = build(pg_settings(tmp_path / "data", dsn_env))
    try:
        user = pochta.mailbox.add_user("a@example.org", "a long enough password")
        assert pochta.mailbox.lists is not None
        pochta.mailbox.lists.add(user.id, "shop.example", "block")
        words = pochta.scanner.words
        assert words is not None
        words.learn(words.hashes(["s:w"]), "spam", 3, owner=user.id)
        words.flush()
        assert words.totals(user.id) == (3, 0)
        assert pochta.mailbox.lists.entries(user.id)[0].action == "block"
    finally:
        pochta.close()


def test_a_database_newer_than_the_code_is_refused(dsn_env: str, tmp_path: Path) -> None:
    assert pochta_cli("db", "upgrade", "--data", str(tmp_path))[0] == 0
    with psycopg.connect(dsn_env) as conn:
        conn.execute(
            "INSERT INTO pochta.schema_version (version, name) VALUES (%s, 'from_the_future')",
            (migrate.head() + 1,),
        )
    code, _, err = pochta_cli("db", "upgrade", "--data", str(tmp_path))
    assert code == 6
    assert f"version {migrate.head() + 1}, newer than this pochta" in " ".join(err.split())
    with pytest.raises(ConfigError, match="newer than this pochta"):
        build(pg_settings(tmp_path / "data", dsn_env, migrate_on_start=True))


def test_start_refuses_an_old_schema_unless_told_to_migrate(dsn_env: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="run `pochta db upgrade`"):
        build(pg_settings(tmp_path / "data", dsn_env))
    pochta = build(pg_settings(tmp_path / "data", dsn_env, migrate_on_start=True))
    pochta.close()
    build(pg_settings(tmp_path / "data", dsn_env)).close()  # now at the code's version


def test_a_failing_migration_leaves_nothing(
    dsn_env: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    real = migrate.shipped()
    broken = migrate.Migration(
        len(real) + 1, "broken", "CREATE TABLE pochta.half_done (x int); SELECT 1/0;"
    )
    monkeypatch.setattr(migrate, "shipped", lambda: [*real, broken])
    code, _, err = pochta_cli("db", "upgrade", "--data", str(tmp_path))
    assert code == 5 and "division by zero" in err
    with psycopg.connect(dsn_env) as conn:
        assert conn.execute("SELECT max(version) FROM pochta.schema_version").fetchone() == (
            len(real),
        )
        assert conn.execute("SELECT to_regclass('pochta.half_done')").fetchone() == (None,)


def test_concurrent_upgrades_apply_each_migration_once(dsn_env: str) -> None:
    errors: list[BaseException] = []
    applied: list[int] = []
    start = threading.Barrier(4)

    def upgrade() -> None:
        db = Postgres.connect(dsn_env, PoolSettings(max_size=1))
        try:
            start.wait()
            applied.extend(m.version for m in migrate.upgrade(db))
        except BaseException as exc:
            errors.append(exc)
        finally:
            db.close()

    threads = [threading.Thread(target=upgrade) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(applied) == list(range(1, migrate.head() + 1))


# -- the DSN is a secret --------------------------------------------------------------------
def test_the_password_is_never_shown(
    postgres_dsn: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    caplog.set_level(logging.DEBUG)
    wrong = postgres_dsn.replace(PASSWORD, "not-the-password-1234")
    monkeypatch.setenv("POCHTA_POSTGRES__DSN", wrong)
    code, out, err = pochta_cli("db", "status", "--data", str(tmp_path))
    assert code == 5
    assert "password authentication failed" in err
    assert "pochta@127.0.0.1" in err  # the server is named ...
    monkeypatch.setenv("POCHTA_POSTGRES__DSN", postgres_dsn)
    pochta = build(pg_settings(tmp_path / "data", postgres_dsn))
    pochta.mailbox.add_user("ann@example.org", "a long enough password")
    shown = f"{pochta.settings!r} {pochta.settings.postgres} {out} {err} {caplog.text}"
    pochta.close()
    assert "not-the-password" not in shown and PASSWORD not in shown  # ... never the password
    assert describe(postgres_dsn) == describe(wrong)


def test_a_malformed_dsn_is_a_settings_error_that_never_quotes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """libpq's own message for a bad URI quotes the offending part: here, the password."""
    monkeypatch.setenv("POCHTA_POSTGRES__DSN", "postgresql://pochta:s3%zzcret@db/pochta")
    code, out, err = pochta_cli("db", "status", "--data", str(tmp_path))
    assert code == 6
    assert "not a valid libpq connection string" in err
    assert "s3%zzcret" not in out + err and "zzcret" not in out + err


def test_an_unreachable_server_is_one_clear_error(tmp_path: Path) -> None:
    from tests.servers import free_port

    dsn = f"postgresql://pochta:{PASSWORD}@127.0.0.1:{free_port()}/pochta?connect_timeout=2"
    with pytest.raises(StorageError, match=r"cannot connect to postgres pochta@127\.0\.0\.1"):
        build(pg_settings(tmp_path / "data", dsn))


def test_connections_give_up_on_a_silent_server_as_settings_say(postgres_dsn: str) -> None:
    """A server gone silent (packets dropped, no reset) is found within
    ``network_timeout``: every connection carries libpq's tcp_user_timeout and keepalives
    (tests/several_faults.py's ``cut loader-db`` drops the packets for real); a value the DSN
    sets wins, and 0 leaves the kernel's."""

    def options(dsn: str, **settings: Any) -> dict[str, str]:
        db = Postgres.connect(dsn, PoolSettings(max_size=1, **settings))
        try:
            with db.connection() as conn:
                return conn.info.get_parameters()
        finally:
            db.close()

    given = options(postgres_dsn, network_timeout=6.0)
    assert given["tcp_user_timeout"] == "6000"
    assert (given["keepalives"], given["keepalives_idle"]) == ("1", "3")
    assert given["keepalives_interval"] == "2" and given["keepalives_count"] == "3"
    own = options(postgres_dsn + " tcp_user_timeout=2500 keepalives_idle=7")  # key=value
    assert own["tcp_user_timeout"] == "2500" and own["keepalives_idle"] == "7"
    assert own["keepalives_count"] == "3"
    assert "tcp_user_timeout" not in options(postgres_dsn, network_timeout=0)


# -- the whole of pochta on PostgreSQL --------------------------------------------------------
def test_two_pochtas_share_one_mailbox_and_fsck_is_clean(postgres_dsn: str, tmp_path: Path) -> None:
    """Two instances (two loaders' worth: each its own data directory and pool) on one
    database: a letter delivered through one is read, deleted and finished through the
    other; the attachment is counted once per letter and released exactly once."""
    one = build(pg_settings(tmp_path / "one", postgres_dsn))
    two = build(pg_settings(tmp_path / "two", postgres_dsn))
    try:
        ann = one.mailbox.add_user("ann@example.org", "a long enough password")
        bob = two.mailbox.add_user("bob@example.org", "another long password")
        att = payload(7, 30_000)
        raw = letter(attachments=[("report.pdf", att)])
        done = one.mailbox.deliver(raw, [ann, bob])
        again = two.mailbox.deliver(raw, [bob])
        key = key_of(att)
        record = two.blobs.filedb.get(key)
        assert record is not None and record.counter == 3
        assert two.mailbox.raw(ann.id, done.ids[0]) == raw
        assert one.mailbox.raw(bob.id, again.ids[0]) == raw
        assert one.mailbox.fsck().ok and two.mailbox.fsck().ok
        for letter_id in done.ids:
            user = ann if letter_id == done.ids[0] else bob
            two.mailbox.delete(user.id, letter_id)
        assert one.mailbox.process_deletions() == 2
        assert two.mailbox.process_deletions() == 0  # nothing left for the other one
        record = one.blobs.filedb.get(key)
        assert record is not None and (record.counter, record.flags) == (1, 0)
        report = two.mailbox.fsck()
        assert report.ok and report.letters == 1 and not report.leaks
        assert one.mailbox.stats()["letters"] == 1
        assert two.valkyrie.state.summary()["disks"] == []
    finally:
        one.close()
        two.close()


def test_every_loader_reads_the_same_sender_lists(postgres_dsn: str, tmp_path: Path) -> None:
    """A reader's list changed through one loader decides the letter another loader
    delivers: the lists live in the [postgres] database with the mailbox."""
    one = build(pg_settings(tmp_path / "one", postgres_dsn))
    two = build(pg_settings(tmp_path / "two", postgres_dsn))
    try:
        ann = one.mailbox.add_user("lists-ann@example.org", "a long enough password")
        bob = one.mailbox.add_user("lists-bob@example.org", "another long password")
        assert one.mailbox.lists is not None and two.mailbox.lists is not None
        one.mailbox.lists.add(ann.id, "shop.example", "block")
        raw = letter(
            sender="Shop <news@mail.shop.example>",
            text="Hi Ann,\n\nthe minutes of Tuesday's meeting are attached.\n\nPeter\n",
            attachments=[("minutes.pdf", payload(8, 20_000))],
        )
        done = two.mailbox.deliver(raw, [ann, bob], scan=True)
        assert done.verdict is not None and done.verdict.label != "phishing"
        assert one.mailbox.letter(ann.id, done.ids[0]).folder == "Spam"
        assert one.mailbox.letter(bob.id, done.ids[1]).folder == done.verdict.folder
        assert b"; list=block" in one.mailbox.raw(ann.id, done.ids[0])
        assert b"list=" not in one.mailbox.raw(bob.id, done.ids[1])
        assert two.mailbox.lists.forget(ann.id) == 1
        assert one.mailbox.lists.entries(ann.id) == []
        assert one.mailbox.fsck().ok
    finally:
        one.close()
        two.close()


def test_valkyrie_stats_read_the_state_in_postgres(
    postgres_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``valkyrie.backend = "postgres"``, a pass run by one machine is what ``pochta
    valkyrie stats`` and ``pochta stats`` on another show (not that machine's own SQLite
    file, which stays empty)."""
    scrubber = build(pg_settings(tmp_path / "storage-host", postgres_dsn))
    try:
        ann = scrubber.mailbox.add_user("ann@example.org", "a long enough password")
        scrubber.mailbox.deliver(letter(attachments=[("a.bin", payload(3, 20_000))]), [ann])
        pair = scrubber.blobs.pairs()[0]
        report = scrubber.valkyrie.run_disk(pair, 0)
        assert report.counts.checked == 1
    finally:
        scrubber.close()
    monkeypatch.setenv("POCHTA_POSTGRES__DSN", postgres_dsn)
    for section, values in ALL_POSTGRES.items():
        for key, value in values.items():
            monkeypatch.setenv(f"POCHTA_{section.upper()}__{key.upper()}", str(value).lower())
    other = str(tmp_path / "loader")
    (tmp_path / "loader").mkdir()
    code, out, err = pochta_cli("valkyrie", "stats", "--json", "--data", other)
    assert code == 0, err
    stats = json.loads(out)
    assert stats["checked"] == 1 and [d["passes"] for d in stats["disks"]] == [1]
    code, out, err = pochta_cli("stats", "--json", "--data", other)
    assert code == 0, err
    assert json.loads(out)["valkyrie"]["checked"] == 1
    assert not (tmp_path / "loader" / "valkyrie.sqlite3").exists()


def test_two_loaders_learn_one_word_table_and_keep_one_history(
    postgres_dsn: str, tmp_path: Path
) -> None:
    """Two loaders on one database (``auto`` backends): a letter moved into Spam through one
    is scored with what it taught by the other, and the admin history of either is both
    loaders' events; neither keeps a words or history file of its own."""

    def loader(name: str) -> Any:
        s = pg_settings(tmp_path / name, postgres_dsn)
        s.antispam.learned_words_key = SecretStr("two-loaders-words-key-0123")
        return build(s)

    one, two = loader("one"), loader("two")
    try:
        assert one.scanner.words is not None and two.scanner.words is not None
        bounded = one.scanner.words.store  # reads on the mail's path bounded in time
        assert isinstance(bounded, BoundedReads) and isinstance(bounded.store, PostgresWordStore)
        assert isinstance(two.history.store, PostgresHistory)
        ann = one.mailbox.add_user("ann@example.org", "a long enough password")
        raw = letter(subject="quarterly offer", text="zorblatt quexify mirthwing gadrolux " * 5)
        done = one.mailbox.deliver(raw, [ann], scan=True)
        before = two.scanner.scan(raw).features[TOKENS_FEATURE]
        one.mailbox.update(ann.id, done.ids[0], folder="Spam")  # teaches the words
        one.scanner.words.flush()
        seen_by_two = two.scanner.scan(raw).features[TOKENS_FEATURE]
        assert seen_by_two > before
        assert seen_by_two == one.scanner.scan(raw).features[TOKENS_FEATURE]
        assert two.scanner.words.stats() == one.scanner.words.stats()
        one.history.delivered("spam", ["PHISH_URGENCY"], copies=1)
        two.history.delivered("spam", [], copies=2)
        one.history.flush()
        two.history.flush()
        verdicts = two.history.store.top("verdict", 0)
        assert dict(verdicts)["spam"] == 3  # 1 through one, 2 through two
        assert sum(n for _, n in verdicts) == 4  # and the delivery above, through one
        assert one.history.store.top("verdict", 0) == verdicts
        assert two.history.store.top("complaint", 0)  # the move, through one
        for name in ("one", "two"):
            assert not (tmp_path / name / "words.sqlite3").exists()
            assert not (tmp_path / name / "history.sqlite3").exists()
    finally:
        one.close()
        two.close()


# -- a crash of PostgreSQL ----------------------------------------------------------------------
def test_a_killed_server_loses_no_acknowledged_step(tmp_path: Path) -> None:
    """SIGKILL the server while four threads count with operation ids; after its crash
    recovery every acknowledged count is there exactly once (journaled), a count whose
    answer was lost is there once or not at all (the journal tells which), and the
    record's counter equals the journaled counts."""
    with PostgresServer.start() as server:
        dsn = server.dsn(migrated_template(server, "crash"))
        db = Postgres.connect(dsn, PoolSettings(max_size=4, connect_timeout=2, pool_timeout=3))
        filedb = PostgresFileDB(db)
        key = key_of(b"crash")
        filedb.upsert(key, 1, 1)
        acked: list[bytes] = []
        failed: list[bytes] = []
        ops_done = threading.Semaphore(0)
        stop = threading.Event()

        def count(worker: int) -> None:
            rng = random.Random(worker)
            for i in range(100_000):
                if stop.is_set():
                    return
                op = f"w{worker}-{i}".encode()
                try:
                    filedb.inc(key, rng.randrange(1, 2**32), op)
                    acked.append(op)
                    ops_done.release()
                except StorageError:
                    failed.append(op)
                    return

        threads = [threading.Thread(target=count, args=(w,)) for w in range(4)]
        for t in threads:
            t.start()
        for _ in range(300):  # some counts acknowledged before the crash
            ops_done.acquire()
        server.kill()
        stop.set()
        for t in threads:
            t.join(30)
        server.start_again()
        for _ in range(20):  # the pool reconnects (with its backoff) after the restart
            try:
                filedb.get(key)
                break
            except StorageError:
                continue
        journaled = filedb.applied(acked + failed)
        assert set(acked) <= journaled
        record = filedb.get(key)
        assert record is not None and record.counter == 1 + len(journaled)
        filedb.close()


# -- SMTP while PostgreSQL is down --------------------------------------------------------------
def test_smtp_answers_451_while_the_database_is_down(tmp_path: Path) -> None:
    """A recipient looked up while the index's database is unreachable is deferred (451), at
    RCPT and at the end of DATA, never refused for good: aiosmtpd answers an exception with
    500, which a sending MTA bounces (found on several machines, README's recipe)."""
    import smtplib

    from tests.integration.conftest import DELIVERED, start_server

    with PostgresServer.start() as server:
        dsn = server.dsn(migrated_template(server, "smtp"))
        data = tmp_path / "data"
        pochta = build(pg_settings(data, dsn))
        pochta.mailbox.add_user("ann@example.org", "a long enough password")
        pochta.close()
        env = {
            "POCHTA_POSTGRES__DSN": dsn,
            "POCHTA_POSTGRES__POOL_TIMEOUT": "2",
            "POCHTA_POSTGRES__CONNECT_TIMEOUT": "2",
            **{
                f"POCHTA_{section.upper()}__{key.upper()}": str(value).lower()
                for section, values in ALL_POSTGRES.items()
                for key, value in values.items()
            },
            **DELIVERED,  # the 451 at the end of DATA (queued: 250, the letter retried)
        }
        srv = start_server(data, tmp_path / "serve.log", settings=env)
        try:
            with smtplib.SMTP("127.0.0.1", srv.smtp_port, timeout=60) as smtp:
                assert smtp.sendmail("s@example.net", ["ann@example.org"], letter()) == {}
                server.kill()
                smtp.ehlo()
                smtp.mail("s@example.net")
                code, reply = smtp.rcpt("ann@example.org")
                assert (code, reply[:5]) == (451, b"4.3.0"), reply
                assert b"postgres" not in reply  # nothing of the server's is shown
                smtp.rset()
                server.start_again()
                for _ in range(50):  # the pool reconnects with its backoff
                    smtp.mail("s@example.net")
                    code, reply = smtp.rcpt("ann@example.org")
                    if code == 250:
                        break
                    smtp.rset()
                assert code == 250, reply
                server.kill()  # gone between RCPT and the end of DATA
                code, reply = smtp.data(letter(subject="while the database is down"))
                assert (code, reply[:5]) == (451, b"4.3.0"), reply
        finally:
            srv.stop()
        assert "Traceback" not in srv.log.read_text()
