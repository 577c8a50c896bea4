"""The sender-list API (``/v1/lists``) through FastAPI's TestClient (real SQLite)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from pochta.config import load_settings
from pochta.server.http import create_app

PASSWORD = "a long enough password"
HTTPS = "https://testserver"


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    settings = load_settings(
        data_dir=tmp_path / "data",
        smtp={"enabled": False},
        imap={"enabled": False},
        mailbox={"sender_list_max": 3},
        # no letter is scanned here: no antispam worker processes to start for each test
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


def test_add_show_change_and_remove_entries(client: TestClient) -> None:
    auth = login(client)
    assert client.get("/v1/lists", headers=auth).json() == {"entries": [], "max_entries": 3}
    r = client.post(
        "/v1/lists", json={"value": "Bob@Shop.Example", "action": "allow"}, headers=auth
    )
    assert r.status_code == 201 and r.json() == {"value": "bob@shop.example", "action": "allow"}
    client.post("/v1/lists", json={"value": "пример.рф", "action": "block"}, headers=auth)
    client.post("/v1/lists", json={"value": "bob@shop.example", "action": "block"}, headers=auth)
    assert client.get("/v1/lists", headers=auth).json()["entries"] == [
        {"value": "bob@shop.example", "action": "block"},
        {"value": "xn--e1afmkfd.xn--p1ai", "action": "block"},
    ]
    assert client.delete("/v1/lists/BOB@shop.example", headers=auth).status_code == 204
    gone = client.delete("/v1/lists/bob@shop.example", headers=auth)
    assert gone.status_code == 404 and gone.json()["error"] == "entry_not_found"
    assert [e["value"] for e in client.get("/v1/lists", headers=auth).json()["entries"]] == [
        "xn--e1afmkfd.xn--p1ai"
    ]


@pytest.mark.parametrize(
    ("body", "status", "says"),
    [
        ({"value": "com", "action": "block"}, 400, "public suffix"),
        ({"value": "co.uk", "action": "allow"}, 400, "public suffix"),
        ({"value": "bob smith@shop.example", "action": "allow"}, 400, "not an e-mail address"),
        ({"value": "192.0.2.1", "action": "allow"}, 400, "not a domain"),
        ({"value": "shop.example\r\nX: y", "action": "allow"}, 400, "control characters"),
        ({"value": "x" * 255, "action": "allow"}, 422, "value"),
        ({"value": "", "action": "allow"}, 422, "value"),
        ({"value": "shop.example", "action": "trust"}, 422, "action"),
        ({"value": "shop.example"}, 422, "action"),
        ({"value": "shop.example", "action": "allow", "user": 2}, 422, "user"),
    ],
)
def test_bad_entries_are_a_clear_4xx(
    client: TestClient, body: dict[str, object], status: int, says: str
) -> None:
    auth = login(client)
    r = client.post("/v1/lists", json=body, headers=auth)
    assert r.status_code == status, r.text
    assert says in r.json()["message"]
    assert client.get("/v1/lists", headers=auth).json()["entries"] == []


def test_a_full_list_refuses_new_entries_but_changes_known_ones(client: TestClient) -> None:
    auth = login(client)
    for i in range(3):
        r = client.post(
            "/v1/lists", json={"value": f"s{i}.example", "action": "block"}, headers=auth
        )
        assert r.status_code == 201
    full = client.post("/v1/lists", json={"value": "s3.example", "action": "block"}, headers=auth)
    assert full.status_code == 400 and "at most 3" in full.json()["message"]
    again = client.post("/v1/lists", json={"value": "s1.example", "action": "allow"}, headers=auth)
    assert again.status_code == 201
    assert client.delete("/v1/lists/" + "x" * 255, headers=auth).status_code == 422


def test_nobody_reads_or_changes_another_users_list(client: TestClient) -> None:
    alice, bob = login(client), login(client, "bob@example.org")
    client.post("/v1/lists", json={"value": "shop.example", "action": "allow"}, headers=alice)
    assert client.get("/v1/lists", headers=bob).json()["entries"] == []
    assert client.delete("/v1/lists/shop.example", headers=bob).status_code == 404
    assert client.get("/v1/lists", headers=alice).json()["entries"] == [
        {"value": "shop.example", "action": "allow"}
    ]
    for method, path in (
        ("GET", "/v1/lists"),
        ("POST", "/v1/lists"),
        ("DELETE", "/v1/lists/a.example"),
    ):
        assert (
            client.request(method, path, json={"value": "a.example", "action": "allow"}).status_code
            == 401
        )
