"""The blob API in-process (real SQLite and directories, no network)."""

from __future__ import annotations

import hashlib
import os
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from pochta.config import load_settings
from pochta.server.http import create_app

TOKEN = "test-service-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    settings = load_settings(
        data_dir=tmp_path / "data",
        service_token=TOKEN,
        smtp={"enabled": False},
        imap={"enabled": False},
        # no letter is scanned here: no antispam worker processes to start for each test
        antispam={"pool_processes": 0},
    )
    with TestClient(create_app(settings)) as c:
        yield c


def disk_files(root: Path) -> list[str]:
    return sorted(
        str(p.relative_to(root)) for p in (root / "data" / "disks").rglob("*") if p.is_file()
    )


def blob() -> tuple[bytes, str]:
    data = os.urandom(200_000)
    return data, hashlib.sha256(data).hexdigest()


def test_seed_flow_inc_upload_inc_dec(client: TestClient) -> None:
    data, key = blob()
    r = client.post(f"/v1/blobs/{key}/inc", json={"magic": 345}, headers=AUTH)
    assert r.status_code == 404
    assert r.json()["error"] == "blob_not_found"
    r = client.put(f"/v1/blobs/{key}", params={"magic": 345}, content=data, headers=AUTH)
    assert r.status_code == 201
    body = r.json()
    assert (body["counter"], body["magic"], body["size"], body["uploaded"]) == (
        1,
        345,
        len(data),
        True,
    )
    r = client.post(f"/v1/blobs/{key}/inc", json={"magic": 123}, headers=AUTH)
    assert (r.json()["counter"], r.json()["magic"]) == (2, 468)
    r = client.post(f"/v1/blobs/{key}/dec", json={"magic": 345}, headers=AUTH)
    assert (r.json()["counter"], r.json()["magic"], r.json()["space"]) == (1, 123, "live")
    r = client.post(f"/v1/blobs/{key}/dec", json={"magic": 123}, headers=AUTH)
    assert (r.json()["space"], r.json()["counter"]) == ("deleted", 0)
    assert client.get(f"/v1/blobs/{key}/stat", headers=AUTH).json()["space"] == "deleted"


def test_put_of_live_key_only_counts(client: TestClient, tmp_path: Path) -> None:
    data, key = blob()
    client.put(f"/v1/blobs/{key}", params={"magic": 1}, content=data, headers=AUTH)
    before = disk_files(tmp_path)
    r = client.put(f"/v1/blobs/{key}", params={"magic": 2}, content=data, headers=AUTH)
    assert r.status_code == 201
    assert (r.json()["uploaded"], r.json()["counter"], r.json()["magic"]) == (False, 2, 3)
    assert disk_files(tmp_path) == before


def test_get_head_and_ranges(client: TestClient) -> None:
    data, key = blob()
    client.put(f"/v1/blobs/{key}", params={"magic": 7}, content=data, headers=AUTH)
    r = client.get(f"/v1/blobs/{key}", headers=AUTH)
    assert r.status_code == 200
    assert r.content == data
    assert r.headers["content-length"] == str(len(data))
    assert r.headers["etag"] == f'"{key}"'
    r = client.get(f"/v1/blobs/{key}", headers={**AUTH, "Range": "bytes=100-199"})
    assert r.status_code == 206
    assert r.content == data[100:200]
    assert r.headers["content-range"] == f"bytes 100-199/{len(data)}"
    r = client.get(f"/v1/blobs/{key}", headers={**AUTH, "Range": "bytes=-10"})
    assert (r.status_code, r.content) == (206, data[-10:])
    r = client.get(f"/v1/blobs/{key}", headers={**AUTH, "Range": f"bytes={len(data) - 5}-"})
    assert (r.status_code, r.content) == (206, data[-5:])
    r = client.get(f"/v1/blobs/{key}", headers={**AUTH, "Range": f"bytes={len(data)}-"})
    assert r.status_code == 416
    assert r.json()["error"] == "range_not_satisfiable"
    r = client.head(f"/v1/blobs/{key}", headers=AUTH)
    assert (r.status_code, r.content, r.headers["content-length"]) == (200, b"", str(len(data)))


def test_expected_size_and_crc_guard_reads(client: TestClient, tmp_path: Path) -> None:
    data, key = blob()
    stored = client.put(f"/v1/blobs/{key}", params={"magic": 7}, content=data, headers=AUTH)
    crc = stored.json()["crc32"]
    ok = client.get(f"/v1/blobs/{key}", params={"size": len(data), "crc32": crc}, headers=AUTH)
    assert ok.status_code == 200
    assert ok.content == data
    wrong = client.get(f"/v1/blobs/{key}", params={"size": len(data) + 1}, headers=AUTH)
    assert wrong.status_code == 409
    for disk in (tmp_path / "data" / "disks").iterdir():  # corrupt both copies
        path = disk / key[:2] / key[2:4] / key
        raw = bytearray(path.read_bytes())
        raw[1000] ^= 0xFF
        path.write_bytes(bytes(raw))
    r = client.get(f"/v1/blobs/{key}", params={"crc32": crc}, headers=AUTH)
    assert r.status_code == 409
    assert r.json()["error"] == "integrity"


def test_wrong_content_leaves_nothing(client: TestClient, tmp_path: Path) -> None:
    data, key = blob()
    r = client.put(f"/v1/blobs/{key}", params={"magic": 9}, content=data + b"x", headers=AUTH)
    assert r.status_code == 422
    assert r.json()["error"] == "content_mismatch"
    assert disk_files(tmp_path) == []
    assert client.get(f"/v1/blobs/{key}/stat", headers=AUTH).status_code == 404


K = "/v1/blobs/" + "a" * 64
BAD = "invalid_request"


@pytest.mark.parametrize(
    ("method", "path", "kwargs", "status", "error"),
    [
        # the schema says what a key is: a malformed one is refused like any invalid field
        ("put", "/v1/blobs/zz", {"params": {"magic": 1}, "content": b"x"}, 422, BAD),
        ("put", "/v1/blobs/" + "A" * 64, {"params": {"magic": 1}, "content": b"x"}, 422, BAD),
        ("put", K, {"params": {"magic": 0}, "content": b"x"}, 422, BAD),
        ("put", K, {"params": {"magic": 2**32}, "content": b"x"}, 422, BAD),
        ("put", K, {"content": b"x"}, 422, BAD),
        ("post", K + "/inc", {"json": {"magic": 0}}, 422, BAD),
        ("post", K + "/inc", {"json": {"magic": "x"}}, 422, BAD),
        ("post", K + "/inc", {"json": {}}, 422, BAD),
        ("post", K + "/dec", {"json": {"magic": 5}}, 404, "blob_not_found"),
        ("get", K, {}, 404, "blob_not_found"),
        ("get", K, {"params": {"crc32": "xyz"}}, 422, BAD),
        ("get", K + "/stat", {}, 404, "blob_not_found"),
    ],
)
def test_bad_requests_get_clear_errors(
    client: TestClient,
    method: str,
    path: str,
    kwargs: dict[str, object],
    status: int,
    error: str,
) -> None:
    r = getattr(client, method)(path, headers=AUTH, **kwargs)
    assert r.status_code == status, r.text
    body = r.json()
    assert body["error"] == error
    assert body["message"]
    assert "Traceback" not in r.text


def test_service_token_required(client: TestClient) -> None:
    key = "a" * 64
    assert client.get(f"/v1/blobs/{key}").status_code == 401
    r = client.get(f"/v1/blobs/{key}", headers={"Authorization": "Bearer wrong"})
    assert r.status_code == 401
    assert r.headers["www-authenticate"] == "Bearer"
    health = client.get("/healthz").json()
    ago = health.pop("checked_seconds_ago")
    assert health == {
        "status": "ok",
        "pairs": 1,
        "writable_pairs": 1,
        "problem": None,
        "queue_stalled_seconds": None,  # no incoming queue here (smtp.answer = "queued")
        "queue_oldest_seconds": None,
    }
    # from the background check (pochta.health, every http.health_interval_seconds), not a
    # read of its own: the report says how old it is
    assert isinstance(ago, float) and 0 <= ago < 60


def test_openapi_describes_the_blob_api(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    paths = spec["paths"]
    assert {"put", "get", "head"} <= set(paths["/v1/blobs/{key}"])
    assert "post" in paths["/v1/blobs/{key}/inc"]
    assert "post" in paths["/v1/blobs/{key}/dec"]
    assert set(spec["components"]["securitySchemes"]) == {"service_token", "session_token"}


def test_generated_token_is_kept_in_data_dir(tmp_path: Path) -> None:
    settings = load_settings(
        data_dir=tmp_path / "d", smtp={"enabled": False}, imap={"enabled": False}
    )
    with TestClient(create_app(settings)) as c:
        token_file = tmp_path / "d" / "service-token"
        token = token_file.read_text().strip()
        assert len(token) >= 32
        assert token_file.stat().st_mode & 0o777 == 0o600
        r = c.get(K + "/stat", headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 404


def test_upload_answer_is_the_documented_model(client: TestClient) -> None:
    """The upload is served by a plain route (server.api.blobs): its answer is exactly StoredOut,
    the model the OpenAPI document gives for it."""
    from pochta.server.api.blobs import StoredOut

    for size in (0, 4096, 300_000, 1_500_000):  # empty, small, one chunk, several chunks
        data = os.urandom(size)
        key = hashlib.sha256(data).hexdigest()
        r = client.put(f"/v1/blobs/{key}", params={"magic": 7}, content=data, headers=AUTH)
        assert r.status_code == 201, r.text
        assert r.headers["content-type"] == "application/json"
        body = r.json()
        assert StoredOut.model_validate(body).model_dump(mode="json") == body
        assert (body["key"], body["size"], body["uploaded"]) == (key, size, True)
        assert body["crc32"] == f"{zlib.crc32(data):08x}"
        stat = client.get(f"/v1/blobs/{key}/stat", headers=AUTH).json()
        assert stat == {k: body[k] for k in stat}
        assert client.get(f"/v1/blobs/{key}", headers=AUTH).content == data


@pytest.mark.parametrize(
    ("path", "params", "headers", "status", "message"),
    [
        # the token first, whatever else is wrong (as the router's dependency does)
        ("/v1/blobs/zz", {"magic": 0}, {}, 401, "a valid service token is required"),
        ("/v1/blobs/zz", {}, {"Authorization": "Basic " + TOKEN}, 401, None),
        (K, {"magic": 1}, {"Authorization": "Bearer " + TOKEN + "x"}, 401, None),
        ("/v1/blobs/zz", {"magic": 1}, AUTH, 422, "path.key: String should match pattern"),
        (K, {"magic": 0}, AUTH, 422, "query.magic: Input should be greater than or equal to 1"),
        (K, {"magic": "x"}, AUTH, 422, "query.magic: Input should be a valid integer"),
        (K, {}, AUTH, 422, "query.magic: Field required"),
    ],
)
def test_upload_refusals_say_what_fastapi_would(
    client: TestClient,
    path: str,
    params: dict[str, object],
    headers: dict[str, str],
    status: int,
    message: str | None,
) -> None:
    r = client.put(path, params=params, content=b"x", headers=headers)
    assert r.status_code == status, r.text
    if status == 401:
        assert r.headers["www-authenticate"] == "Bearer"
    if message is not None:
        assert r.json()["message"].startswith(message), r.json()
