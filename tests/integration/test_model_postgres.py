"""With [postgres], model versions and the live pointer are in the database: two loaders on
different machines (two data directories, one database) switch to a promoted version
together, and the CLI of either machine sees the versions of both."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pochta.antispam.model import booster
from pochta.antispam.model import store as store_mod
from pochta.antispam.model.store.directory import DirectoryModelStore
from pochta.antispam.model.store.postgres import PostgresModelStore
from pochta.app import build
from pochta.cli import app as cli
from pochta.config import Settings, load_settings
from tests.pgserver import NewDatabase

pytestmark = pytest.mark.integration


def settings(data: Path, dsn: str, **antispam: object) -> Settings:
    return load_settings(
        data_dir=data,
        postgres={"dsn": dsn, "migrate_on_start": True},
        mailbox={"backend": "postgres"},
        antispam={"pool_processes": 0, "model_check_seconds": 0.05, **antispam},
    )


def test_two_machines_switch_together(new_postgres_db: NewDatabase, tmp_path: Path) -> None:
    dsn = new_postgres_db()
    shipped = booster.load()
    assert shipped is not None
    one = build(settings(tmp_path / "one", dsn))
    two = build(settings(tmp_path / "two", dsn))
    try:
        assert isinstance(one.models, PostgresModelStore)
        one.start()
        two.start()
        files = store_mod.files_of(dataclasses.replace(shipped, threshold=0.71), {})
        one.models.put("v1", files, created=time.time())
        assert [v for v, _ in two.models.versions()] == ["v1"]  # the other machine sees it
        two.models.promote("v1")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not all(
            p.scanner.model is not None and p.scanner.model.threshold == 0.71 for p in (one, two)
        ):
            time.sleep(0.02)
        assert [p.live_model.version for p in (one, two) if p.live_model] == ["v1", "v1"]
        assert not (tmp_path / "one" / "models").exists()  # nothing on either machine's disk
        runner = CliRunner()
        done = runner.invoke(
            cli, ["model", "rollback", "--data", str(tmp_path / "one"), "--json"],
            env={"POCHTA_POSTGRES__DSN": dsn, "POCHTA_MAILBOX__BACKEND": "postgres"},
        )  # fmt: skip
        assert done.exit_code == 0, done.output
        assert json.loads(done.stdout) == {"live": None}
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(
            p.live_model is not None and p.live_model.version is not None for p in (one, two)
        ):
            time.sleep(0.02)
        assert [p.scanner.model.threshold for p in (one, two) if p.scanner.model] == [
            shipped.threshold,
            shipped.threshold,
        ]
    finally:
        one.close()
        two.close()


def test_the_directory_store_when_postgres_is_not_for_models(
    new_postgres_db: NewDatabase, tmp_path: Path
) -> None:
    pochta = build(settings(tmp_path / "d", new_postgres_db(), model_store="directory"))
    try:
        assert isinstance(pochta.models, DirectoryModelStore)
    finally:
        pochta.close()
