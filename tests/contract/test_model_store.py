"""The ModelStore contract: every store of model versions passes these same assertions."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pochta.antispam.model import store as store_mod
from pochta.antispam.model.store import MAX_FILE, ModelStore
from pochta.antispam.model.store.directory import DirectoryModelStore
from pochta.antispam.model.store.memory import MemoryModelStore
from pochta.antispam.model.store.postgres import PostgresModelStore
from pochta.errors import InvalidInput, NotFound
from tests.contract.conftest import postgres

MODEL_STORE_KINDS = ["memory", "directory", "postgres"]


@pytest.fixture(params=MODEL_STORE_KINDS)
def models(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ModelStore]:
    store: ModelStore
    if request.param == "memory":
        store = MemoryModelStore()
    elif request.param == "directory":
        store = DirectoryModelStore(tmp_path / "models")
    elif request.param == "postgres":
        store = PostgresModelStore(postgres(request))
    else:  # pragma: no cover - a new backend adds its branch here
        raise AssertionError(request.param)
    yield store
    store.close()


def files(tag: bytes) -> dict[str, bytes]:
    return {"model.cbm": b"cbm " + tag, "model.json": b'{"tag": "%s"}' % tag}


def test_a_version_comes_back_byte_for_byte(models: ModelStore) -> None:
    body = {**files(b"a"), "figures.json": b"{}", "tokens.json": bytes(range(256)) * 10}
    models.put("v1", body, created=10.0)
    assert models.files("v1") == body
    assert models.versions() == [("v1", 10.0)]


def test_versions_come_oldest_first(models: ModelStore) -> None:
    models.put("b", files(b"b"), created=20.0)
    models.put("a", files(b"a"), created=30.0)
    models.put("c", files(b"c"), created=10.0)
    assert [v for v, _ in models.versions()] == ["c", "b", "a"]


def test_a_version_is_written_once(models: ModelStore) -> None:
    models.put("v1", files(b"a"), created=1.0)
    with pytest.raises(InvalidInput, match="exists"):
        models.put("v1", files(b"b"), created=2.0)
    assert models.files("v1") == files(b"a")


@pytest.mark.parametrize(
    "version", ["", "../up", "a/b", ".hidden", "x" * 65, "live.json ", "a\x00b", "пример"]
)
def test_a_bad_version_name_is_refused(models: ModelStore, version: str) -> None:
    with pytest.raises(InvalidInput, match="not a model version"):
        models.put(version, files(b"a"), created=1.0)
    assert models.versions() == []


def test_wrong_files_are_refused(models: ModelStore) -> None:
    with pytest.raises(InvalidInput, match=r"needs model\.cbm"):
        models.put("v1", {"model.json": b"{}"}, created=1.0)
    with pytest.raises(InvalidInput, match="holds only"):
        models.put("v1", {**files(b"a"), "../../etc/passwd": b"x"}, created=1.0)
    with pytest.raises(InvalidInput, match="at most"):
        models.put("v1", {**files(b"a"), "tokens.json": b"x" * (MAX_FILE + 1)}, created=1.0)
    assert models.versions() == []


def test_an_unknown_version_is_not_found(models: ModelStore) -> None:
    with pytest.raises(NotFound):
        models.files("nope")
    with pytest.raises(NotFound):
        models.promote("nope")
    assert models.promotions() == []


def test_promote_and_rollback_move_the_live_pointer(models: ModelStore) -> None:
    assert store_mod.live(models) is None
    assert models.rollback() is None  # nothing promoted: nothing to undo
    models.put("v1", files(b"1"), created=1.0)
    models.put("v2", files(b"2"), created=2.0)
    models.promote("v1")
    assert store_mod.live(models) == "v1"
    models.promote("v2")
    assert models.promotions() == ["v1", "v2"]
    assert models.rollback() == "v1"
    assert store_mod.live(models) == "v1"
    models.promote("v2")
    models.promote("v1")  # a version may be promoted again
    assert models.promotions() == ["v1", "v2", "v1"]
    assert models.rollback() == "v2"
    assert models.rollback() == "v1"
    assert models.rollback() is None
    assert store_mod.live(models) is None
    assert [v for v, _ in models.versions()] == ["v1", "v2"]  # rollback keeps every version
