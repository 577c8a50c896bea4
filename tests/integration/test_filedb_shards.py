"""FileDB spread over several PostgreSQL databases (``postgres.filedb_shards``, issue 30 item 5):
every file's record on the one shard its key falls in, nothing of FileDB in the main
database, the mailbox's counts exact across the shards, and ``pochta db`` upgrading every
shard. Each shard is a database of the session's server (primaries of their own in a real
installation)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psycopg
import pytest
from typer.testing import CliRunner

from pochta.app import build
from pochta.blobs.filedb.sharded import ShardedFileDB, shard_of
from pochta.blobs.keys import key_of
from pochta.cli import app as cli
from pochta.config import Settings, load_settings
from pochta.errors import ConfigError
from tests.integration.test_postgres import ALL_POSTGRES
from tests.mailtools import letter, payload
from tests.pgserver import NewDatabase

pytestmark = pytest.mark.integration

STORES = ALL_POSTGRES  # every store in PostgreSQL, as test_postgres.py runs them


def sharded(data: Path, main: str, shards: list[str], **more: Any) -> Settings:
    return load_settings(
        data_dir=data, postgres={"dsn": main, "filedb_shards": shards, **more}, **STORES
    )


def live_keys(dsn: str) -> set[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT key FROM pochta.filedb_live").fetchall()
    return {bytes(row[0]).hex() for row in rows}


def test_each_file_is_counted_on_its_shard_and_released_exactly_once(
    new_postgres_db: NewDatabase, tmp_path: Path
) -> None:
    main, shards = new_postgres_db(), [new_postgres_db(), new_postgres_db()]
    pochta = build(sharded(tmp_path, main, shards))
    try:
        assert isinstance(pochta.blobs.filedb, ShardedFileDB)
        ann = pochta.mailbox.add_user("ann@example.org", "a long enough password")
        bob = pochta.mailbox.add_user("bob@example.org", "another long password")
        files = [payload(seed, 20_000) for seed in range(12)]
        raw = letter(attachments=[(f"part{i}.bin", body) for i, body in enumerate(files)])
        done = pochta.mailbox.deliver(raw, [ann, bob])
        keys = {key_of(body) for body in files}
        on = [live_keys(dsn) for dsn in shards]
        assert on[0] | on[1] == keys and not on[0] & on[1]  # each record on one shard only
        assert all(key in on[shard_of(key, 2)] for key in keys)  # the one its key falls in
        assert on[0] and on[1]  # these twelve keys fall on both shards
        assert live_keys(main) == set()  # nothing of FileDB in the main database
        for key in keys:
            record = pochta.blobs.filedb.get(key)
            assert record is not None and record.counter == 2
        pair = next(iter(pochta.blobs.pairdb.list())).id
        assert pochta.blobs.filedb.count_live(pair) == 12
        assert pochta.blobs.filedb.live_keys(pair) == sorted(keys)
        assert pochta.mailbox.raw(bob.id, done.ids[1]) == raw
        assert pochta.mailbox.fsck().ok
        pochta.mailbox.delete(ann.id, done.ids[0])
        pochta.mailbox.delete(bob.id, done.ids[1])
        assert pochta.mailbox.process_deletions() == 2
        for key in keys:
            record = pochta.blobs.filedb.get(key)
            assert record is not None and record.counter == 0  # released once, on its shard
        report = pochta.mailbox.fsck()
        assert report.ok and report.letters == 0
    finally:
        pochta.close()


def test_db_upgrade_and_status_cover_every_shard(
    new_postgres_db: NewDatabase, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    main, shard = new_postgres_db(), new_postgres_db()
    with psycopg.connect(shard, autocommit=True) as conn:
        conn.execute("DROP SCHEMA pochta CASCADE")  # a new, empty primary for FileDB
    monkeypatch.setenv("POCHTA_POSTGRES__DSN", main)
    monkeypatch.setenv("POCHTA_POSTGRES__FILEDB_SHARDS", json.dumps([shard]))
    runner = CliRunner()
    status = runner.invoke(cli, ["db", "status", "--data", str(tmp_path), "--json"])
    assert status.exit_code == 6, status.output  # the shard is behind
    seen = json.loads(status.stdout)
    assert seen["version"] == seen["expected"] and seen["shards"][0]["version"] == 0
    with pytest.raises(ConfigError):  # nor does pochta start on it
        build(sharded(tmp_path, main, [shard]))
    upgrade = runner.invoke(cli, ["db", "upgrade", "--data", str(tmp_path), "--json"])
    assert upgrade.exit_code == 0, upgrade.output
    done = json.loads(upgrade.stdout)
    assert done["applied"] == [] and done["shards"][0]["applied"]  # only the shard lacked it
    assert runner.invoke(cli, ["db", "status", "--data", str(tmp_path)]).exit_code == 0
    build(sharded(tmp_path, main, [shard])).close()


def test_a_start_with_the_shards_changed_is_refused(
    new_postgres_db: NewDatabase, tmp_path: Path
) -> None:
    """The number and order of the shards fix where each record lives: a start with the list
    reordered, grown, or naming one database twice would look on the wrong shard."""
    main, one, two = new_postgres_db(), new_postgres_db(), new_postgres_db()
    build(sharded(tmp_path / "a", main, [one, two])).close()  # the shards learn their place
    for changed in ([two, one], [one, two, new_postgres_db()], [one]):
        with pytest.raises(ConfigError, match="give the list as it was"):
            build(sharded(tmp_path / "a", main, changed))
    with pytest.raises(ConfigError, match="give the list as it was"):
        build(sharded(tmp_path / "b", new_postgres_db(), [one, one + " "]))
    build(sharded(tmp_path / "a", main, [one, two])).close()  # as it was: it starts


def test_records_left_in_the_main_database_are_not_abandoned(
    new_postgres_db: NewDatabase, tmp_path: Path
) -> None:
    main = new_postgres_db()
    alone = build(load_settings(data_dir=tmp_path, postgres={"dsn": main}, **STORES))
    try:
        ann = alone.mailbox.add_user("ann@example.org", "a long enough password")
        alone.mailbox.deliver(letter(attachments=[("a.bin", payload(1, 20_000))]), [ann])
    finally:
        alone.close()
    with pytest.raises(ConfigError, match="FileDB records are in dsn"):
        build(sharded(tmp_path, main, [new_postgres_db()]))


def test_shards_are_refused_where_they_cannot_be_used(tmp_path: Path) -> None:
    dsn = "postgresql://pochta:SECRETPW@127.0.0.1:1/one"
    with pytest.raises(ConfigError, match=r"blobs\.backend is not postgres"):
        build(load_settings(data_dir=tmp_path, postgres={"dsn": dsn, "filedb_shards": [dsn + "2"]}))
    with pytest.raises(ConfigError, match="named twice") as twice:
        load_settings(data_dir=tmp_path, postgres={"filedb_shards": [dsn, dsn]})
    assert "SECRETPW" not in str(twice.value)


def test_a_backup_that_would_miss_the_shards_is_refused(
    new_postgres_db: NewDatabase, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("POCHTA_POSTGRES__DSN", new_postgres_db())
    monkeypatch.setenv("POCHTA_POSTGRES__FILEDB_SHARDS", json.dumps([new_postgres_db()]))
    for name, value in STORES.items():
        for key, setting in value.items():
            monkeypatch.setenv(f"POCHTA_{name.upper()}__{key.upper()}", str(setting))
    wal = tmp_path / "wal"
    wal.mkdir()
    result = CliRunner().invoke(
        cli,
        ["backup", "create", "--to", str(tmp_path / "b"), "--wal-dir", str(wal),
         "--data", str(tmp_path / "data")],
    )  # fmt: skip
    assert result.exit_code != 0 and "filedb_shards is set" in result.output
    assert "Traceback" not in result.output and not (tmp_path / "b").exists()

