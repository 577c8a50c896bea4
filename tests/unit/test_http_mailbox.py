"""The mailbox HTTP API through FastAPI's TestClient (real SQLite and disks)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from tests.mailtools import letter, payload

from pochta.config import load_settings
from pochta.errors import InvalidCredentials, RateLimited
from pochta.server.http import create_app

PASSWORD = "a long enough password"
HTTPS = "https://testserver"  # clients elsewhere send a password over TLS only


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    settings = load_settings(
        data_dir=tmp_path / "data",
        smtp={"enabled": False},
        imap={"enabled": False},
        # letters are put in by deliver() unscanned: the intake's worker processes (SMTP,
        # LMTP, IMAP APPEND only) would be started for nothing in each test
        antispam={"pool_processes": 0},
    )
    with TestClient(create_app(settings), base_url=HTTPS) as c:
        box = c.app.state.pochta.mailbox  # type: ignore[attr-defined]
        for name in ("alice", "bob"):
            box.add_user(f"{name}@example.org", PASSWORD)
        yield c


def login(c: TestClient, email: str = "alice@example.org") -> dict[str, str]:
    r = c.post("/v1/session", json={"email": email, "password": PASSWORD})
    assert r.status_code == 200, r.text
    return {"Authorization": f"Bearer {r.json()['token']}"}


def deliver(c: TestClient, raw: bytes, *emails: str) -> list[int]:
    box = c.app.state.pochta.mailbox  # type: ignore[attr-defined]
    rcpts = [box.user(e) for e in emails or ("alice@example.org",)]
    ids: list[int] = box.deliver(raw, rcpts).ids
    return ids


def test_login_errors_are_the_same_and_clear(client: TestClient) -> None:
    wrong = client.post("/v1/session", json={"email": "alice@example.org", "password": "nope"})
    unknown = client.post("/v1/session", json={"email": "x@example.org", "password": "nope"})
    assert wrong.status_code == unknown.status_code == 401
    assert wrong.json() == unknown.json()
    assert wrong.headers["www-authenticate"] == "Bearer"
    bad = client.post("/v1/session", json={"email": "alice@example.org"})
    assert bad.status_code == 422 and "password" in bad.json()["message"]
    assert client.get("/v1/folders").status_code == 401
    forged = client.get("/v1/folders", headers={"Authorization": "Bearer forged"})
    assert forged.status_code == 401 and forged.json()["error"] == "invalid_credentials"


def test_read_a_letter_its_raw_bytes_and_attachment(client: TestClient) -> None:
    att = payload(1, 30_000)
    raw = letter(subject="Отчёт за квартал", attachments=[("отчёт.pdf", att)], html="<p>hi</p>")
    (letter_id,) = deliver(client, raw)
    auth = login(client)
    page = client.get("/v1/messages", headers=auth).json()
    assert [m["id"] for m in page["messages"]] == [letter_id]
    assert page["messages"][0]["from"] == "Sender <sender@example.net>"
    assert page["messages"][0]["subject"] == "Отчёт за квартал"
    assert not page["messages"][0]["seen"]
    detail = client.get(f"/v1/messages/{letter_id}", headers=auth).json()
    assert detail["text"].startswith("Please find the report")
    assert detail["html"].strip() == "<p>hi</p>"
    assert detail["to"] == ["alice@example.org"]
    assert [(a["filename"], a["size"]) for a in detail["attachments"]] == [("отчёт.pdf", 30_000)]
    n = detail["attachments"][0]["n"]
    assert detail["seen"]  # opening marks it seen
    got = client.get(f"/v1/messages/{letter_id}/raw", headers=auth)
    assert got.content == raw and got.headers["content-type"] == "message/rfc822"
    part = client.get(f"/v1/messages/{letter_id}/attachments/{n}", headers=auth)
    assert part.content == att
    assert "filename*=UTF-8''" in part.headers["content-disposition"]
    missing = client.get(f"/v1/messages/{letter_id}/attachments/9", headers=auth)
    assert missing.status_code == 404


def test_someone_elses_letter_is_not_there(client: TestClient) -> None:
    (letter_id,) = deliver(client, letter())
    bob = login(client, "bob@example.org")
    for method, path in [
        ("GET", f"/v1/messages/{letter_id}"),
        ("GET", f"/v1/messages/{letter_id}/raw"),
        ("GET", f"/v1/messages/{letter_id}/attachments/0"),
        ("DELETE", f"/v1/messages/{letter_id}"),
    ]:
        r = client.request(method, path, headers=bob)
        assert r.status_code == 404, (method, path)
        assert r.json()["error"] == "message_not_found"
    r = client.patch(f"/v1/messages/{letter_id}", json={"seen": True}, headers=bob)
    assert r.status_code == 404
    assert client.get("/v1/messages", headers=bob).json()["messages"] == []


def test_paging_flags_folders_and_delete(client: TestClient) -> None:
    ids = [deliver(client, letter(subject=f"n{i}"))[0] for i in range(5)]
    auth = login(client)
    first = client.get("/v1/messages?limit=2", headers=auth).json()
    assert [m["id"] for m in first["messages"]] == ids[:2:-1][:2]
    rest = client.get(f"/v1/messages?limit=10&cursor={first['next_cursor']}", headers=auth)
    assert [m["id"] for m in rest.json()["messages"]] == ids[2::-1]
    assert client.get("/v1/messages?cursor=abc", headers=auth).status_code == 422
    assert client.get("/v1/messages?folder=Nope", headers=auth).status_code == 404
    r = client.patch(
        f"/v1/messages/{ids[0]}", json={"flagged": True, "folder": "Spam"}, headers=auth
    )
    assert r.status_code == 200 and r.json()["folder"] == "Spam" and r.json()["flagged"]
    r = client.patch(f"/v1/messages/{ids[0]}", json={}, headers=auth)  # changes nothing
    assert r.status_code == 200 and r.json()["folder"] == "Spam" and r.json()["flagged"]
    r = client.patch(f"/v1/messages/{ids[0]}", json={"folder": "Archive"}, headers=auth)
    assert r.status_code == 404 and r.json()["error"] == "folder_not_found"
    assert client.post("/v1/folders", json={"name": "Archive"}, headers=auth).status_code == 201
    assert client.post("/v1/folders", json={"name": "Archive"}, headers=auth).status_code == 409
    r = client.patch(f"/v1/messages/{ids[0]}", json={"folder": "Archive"}, headers=auth)
    assert r.status_code == 200
    folders = {f["name"]: f for f in client.get("/v1/folders", headers=auth).json()}
    assert folders["Inbox"]["total"] == 4 and folders["Archive"]["total"] == 1
    assert client.delete(f"/v1/messages/{ids[1]}", headers=auth).status_code == 204
    assert client.get(f"/v1/messages/{ids[1]}", headers=auth).status_code == 404
    assert client.delete(f"/v1/messages/{ids[1]}", headers=auth).status_code == 404


def test_logout_ends_the_session(client: TestClient) -> None:
    auth = login(client)
    assert client.delete("/v1/session", headers=auth).status_code == 204
    assert client.get("/v1/folders", headers=auth).status_code == 401


def test_logins_are_limited_per_ip_with_retry_after(tmp_path: Path) -> None:
    settings = load_settings(
        data_dir=tmp_path / "data",
        smtp={"enabled": False},
        imap={"enabled": False},
        guard={"login_ip_max": 3},
    )
    with TestClient(create_app(settings), base_url=HTTPS) as c:
        c.app.state.pochta.mailbox.add_user("ann@example.org", PASSWORD)  # type: ignore[attr-defined]
        answers = [
            c.post("/v1/session", json={"email": f"x{i}@example.org", "password": "nope"})
            for i in range(3)
        ]
        assert [a.status_code for a in answers] == [401, 401, 401]
        refused = c.post("/v1/session", json={"email": "ann@example.org", "password": PASSWORD})
        assert refused.status_code == 429
        assert refused.json()["error"] == "rate_limited"
        assert 1 <= int(refused.headers["retry-after"]) <= 1200  # one attempt per 20 minutes


def test_an_account_under_attack_slows_strangers_and_keeps_no_address(tmp_path: Path) -> None:
    from pochta.app import build
    from pochta.errors import InvalidCredentials, RateLimited

    guard = {"login_account_free": 2, "login_max_wait": 0.0}
    pochta = build(load_settings(data_dir=tmp_path / "data", guard=guard))
    try:
        pochta.mailbox.add_user("ann@example.org", PASSWORD)
        pochta.mailbox.login("ann@example.org", PASSWORD, "10.0.9.1")  # her address
        for ip in ("10.0.0.1", "10.0.0.2"):  # guesses from strangers use the free checks
            with pytest.raises(InvalidCredentials):
                pochta.mailbox.login("ann@example.org", "wrong password", ip)
        with pytest.raises(RateLimited) as limited:  # then they are spaced out
            pochta.mailbox.login("ann@example.org", PASSWORD, "10.0.0.3")
        assert limited.value.retry_after > 0
        pochta.mailbox.login("ann@example.org", PASSWORD, "10.0.9.1")  # never its owner
        files = (tmp_path / "data").glob("guard-*.sqlite3*")  # the files and their WALs
        stored = b"".join(f.read_bytes() for f in files if f.is_file())
        assert b"ann@example.org" not in stored and b"10.0." not in stored
    finally:
        pochta.close()


def test_a_device_token_lets_its_api_client_in_while_the_account_is_guessed_at(
    tmp_path: Path,
) -> None:
    settings = load_settings(
        data_dir=tmp_path / "data",
        smtp={"enabled": False},
        imap={"enabled": False},
        guard={"login_account_free": 1, "login_max_wait": 0.0},
    )
    with TestClient(create_app(settings), client=("198.51.100.7", 5000), base_url=HTTPS) as phone:
        pochta = phone.app.state.pochta  # type: ignore[attr-defined]
        pochta.mailbox.add_user("ann@example.org", PASSWORD)
        first = phone.post("/v1/session", json={"email": "ann@example.org", "password": PASSWORD})
        assert first.status_code == 200
        device = first.json()["device"]
        assert isinstance(device, str) and 40 < len(device) <= 128
        users = pochta.mailbox.users
        for i in range(3):  # strangers' guesses, until the account's next slot is far
            with contextlib.suppress(InvalidCredentials, RateLimited):
                users.verify_admitted(users.admit("ann@example.org", f"10.7.{i}.1"), "x")
        away = TestClient(phone.app, client=("203.0.113.9", 5000), base_url=HTTPS)
        body = {"email": "ann@example.org", "password": PASSWORD}
        refused = away.post("/v1/session", json=body)
        assert refused.status_code == 429 and int(refused.headers["retry-after"]) >= 1
        again = away.post("/v1/session", json={**body, "device": device})
        assert again.status_code == 200 and again.json()["device"].split(".")[0] == (
            device.split(".")[0]  # the same device, its token renewed
        )
        too_long = away.post("/v1/session", json={**body, "device": "x" * 129})
        assert too_long.status_code == 422
