"""The shingle edges in-process: the HTTP router (service token) and the ``pochta shingles``
commands, over the in-memory store. Self-contained: they build their own app and Shingler,
so they do not depend on how app.py wires the service."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from email.message import EmailMessage
from pathlib import Path
from types import SimpleNamespace
from typing import Any, get_args

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from pochta.antispam.shingles.counters.buckets import KINDS, parse_window
from pochta.antispam.shingles.counters.memory import MemoryStore
from pochta.antispam.shingles.counters.service import Counters
from pochta.antispam.shingles.extract import extract as extract_letter
from pochta.antispam.shingles.shingler import Shingler
from pochta.cli import shingles as cli
from pochta.errors import InvalidInput
from pochta.mime.letter import parse
from pochta.server.api import errors
from pochta.server.api import shingles as http
from pochta.types import Envelope


def extract(raw: bytes, envelope: Envelope | None = None) -> list[Any]:
    return extract_letter(parse(raw), envelope)


TOKEN = "test-service-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def shingler() -> Iterator[Shingler]:
    s = Shingler(Counters(MemoryStore(), flush_interval=3600))
    yield s
    s.close()


@pytest.fixture
def client(shingler: Shingler) -> Iterator[TestClient]:
    app = FastAPI()
    errors.install(app)
    app.include_router(http.router)
    app.state.service_token = TOKEN
    app.state.pochta = SimpleNamespace(shingles=shingler)
    with TestClient(app) as c:
        yield c


def raw_letter() -> bytes:
    msg = EmailMessage()
    msg["From"] = "Promo <promo@shop.example.com>"
    msg["To"] = "alice@pochta.test"
    msg["Subject"] = "Re: Big SALE"
    msg.set_content("Everything must go today visit https://shop.example.com/sale now")
    return msg.as_bytes()


# -- HTTP -----------------------------------------------------------------------------------
def test_update_then_query_one_letter(client: TestClient) -> None:
    unique = {"type": 31, "hash": "120d322bf9a3cdc7"}
    shingles = [
        {"type": 8, "hash": "5791f8cac2b7d8dd"},
        {"type": 30, "hash": "1a0d25c934162402", "unique": unique},
    ]
    r = client.post(
        "/v1/shingles/update", json={"kind": "spam", "shingles": shingles}, headers=AUTH
    )
    assert r.status_code == 200, r.text
    assert r.json() == {"updated": 2}
    client.post(
        "/v1/shingles/update", json={"kind": "complaint", "count": 4, "shingles": shingles[:1]},
        headers=AUTH,
    )  # fmt: skip
    body = {
        "windows": ["1h", "14d"],
        "shingles": [*shingles, {"type": 31, "hash": "120d322bf9a3cdc7"}],
    }
    r = client.post("/v1/shingles/query", json=body, headers=AUTH)
    assert r.status_code == 200, r.text
    got = r.json()["shingles"]
    assert [(g["type"], g["name"], g["hash"]) for g in got] == [
        (8, "subject", "5791f8cac2b7d8dd"),
        (30, "sender_recipient", "1a0d25c934162402"),
        (31, "sender_recipients_unique", "120d322bf9a3cdc7"),
    ]
    assert got[0]["counters"]["1h"] == {"ham": 0, "spam": 1, "complaint": 4, "unspam": 0, "read": 0}
    assert got[1]["counters"]["14d"]["spam"] == 1
    assert got[2]["counters"]["14d"]["spam"] == 1  # the unique, counted through its pair


def test_query_defaults_to_1h_24h_14d(client: TestClient) -> None:
    r = client.post(
        "/v1/shingles/query", json={"shingles": [{"type": 8, "hash": "ff"}]}, headers=AUTH
    )
    assert r.status_code == 200
    assert list(r.json()["shingles"][0]["counters"]) == ["1h", "24h", "14d"]


@pytest.mark.parametrize(
    ("path", "body", "status"),
    [
        ("update", {"kind": "nope", "shingles": [{"type": 8, "hash": "ff"}]}, 422),
        ("update", {"kind": "spam", "count": 0, "shingles": []}, 422),
        ("update", {"kind": "spam", "shingles": [{"type": 8, "hash": "xyz"}]}, 422),
        ("update", {"kind": "spam", "shingles": [{"type": 8, "hash": "1" * 17}]}, 422),
        ("update", {"kind": "spam", "shingles": [{"type": 30, "hash": "ff"}]}, 422),  # no unique
        ("update", {"kind": "spam", "shingles": [{"type": 8, "hash": "f"}] * 1001}, 422),
        ("query", {"windows": ["15d"], "shingles": [{"type": 8, "hash": "ff"}]}, 422),
        ("query", {"windows": [], "shingles": []}, 422),
        ("query", {"windows": ["1w"], "shingles": []}, 422),
    ],
)
def test_bad_requests_get_clear_errors(
    client: TestClient, path: str, body: dict[str, Any], status: int
) -> None:
    r = client.post(f"/v1/shingles/{path}", json=body, headers=AUTH)
    assert r.status_code == status, r.text
    assert r.json()["error"] and r.json()["message"]


def test_service_token_required(client: TestClient) -> None:
    body = {"shingles": []}
    assert client.post("/v1/shingles/query", json=body).status_code == 401
    wrong = {"Authorization": "Bearer wrong"}
    assert client.post("/v1/shingles/query", json=body, headers=wrong).status_code == 401


def test_openapi_describes_the_shingle_api(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert "/v1/shingles/query" in paths and "/v1/shingles/update" in paths


# -- the Shingler facade --------------------------------------------------------------------
def test_observe_and_feedback_feed_the_counters(shingler: Shingler) -> None:
    raw = raw_letter()
    env = Envelope(
        ip="192.0.2.8", sender="promo@shop.example.com", recipients=["alice@pochta.test"]
    )
    shingler.observe(raw, env)
    shingler.observe(raw, env, verdict="spam")
    shingler.feedback(raw, "spam", env)
    shingler.feedback(raw, "read", env)
    stats = {int(s.shingle.type): s.counters["24h"] for s in shingler.stats(raw, ["24h"], env)}
    assert stats[8] == {"ham": 1, "spam": 1, "complaint": 1, "unspam": 0, "read": 1}
    assert stats[31] == {"ham": 1, "spam": 1, "complaint": 1, "unspam": 0, "read": 1}
    with pytest.raises(InvalidInput):
        shingler.observe(raw, verdict="maybe")
    with pytest.raises(InvalidInput):
        shingler.feedback(raw, "like")


# -- CLI ------------------------------------------------------------------------------------
runner = CliRunner()


def run(*args: str | Path) -> tuple[int, str, str]:
    result = runner.invoke(cli.app, [str(a) for a in args])
    assert "Traceback" not in result.output
    return result.exit_code, result.stdout, result.stderr


def test_show_lists_every_shingle(tmp_path: Path) -> None:
    path = tmp_path / "letter.eml"
    path.write_bytes(raw_letter())
    code, out, _ = run("show", path, "--json", "--ip", "192.0.2.8")
    assert code == 0
    shown = json.loads(out)["shingles"]
    expected = extract(raw_letter(), Envelope(ip="192.0.2.8"))
    assert [(s["type"], s["hash"]) for s in shown] == [(int(s.type), s.hex) for s in expected]
    subject = next(s for s in shown if s["type"] == 8)
    assert subject == {
        "type": 8,
        "name": "subject",
        "value": "big sale",
        "hash": subject["hash"],
        "unique": None,
    }
    code, out, _ = run("show", path)
    assert code == 0 and "subject" in out and "big sale" in out and "link_url" in out


def test_show_of_a_missing_file_is_exit_2(tmp_path: Path) -> None:
    code, _, err = run("show", tmp_path / "nope.eml", "--json")
    assert code == 2
    assert json.loads(err)["error"] == "invalid_input"


def test_stats_prints_the_counters(
    tmp_path: Path, shingler: Shingler, monkeypatch: pytest.MonkeyPatch
) -> None:
    @contextmanager
    def opened(data: Path | None, config: Path | None) -> Iterator[SimpleNamespace]:
        yield SimpleNamespace(shingles=shingler)

    monkeypatch.setattr(cli, "opened", opened)
    path = tmp_path / "letter.eml"
    path.write_bytes(raw_letter())
    shingler.observe(raw_letter(), verdict="spam")
    code, out, _ = run("stats", path, "--window", "1h", "--window", "14d", "--json")
    assert code == 0
    result = json.loads(out)
    assert result["windows"] == ["1h", "14d"]
    subject = next(s for s in result["shingles"] if s["type"] == 8)
    assert subject["counters"]["14d"]["spam"] == 1
    code, out, _ = run("stats", path)
    assert code == 0 and "window 24h" in out and "spam" in out
    code, _, err = run("stats", path, "--window", "30d", "--json")
    assert code == 2 and "window" in json.loads(err)["message"]


def test_stats_without_configured_counters_is_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    @contextmanager
    def opened(data: Path | None, config: Path | None) -> Iterator[SimpleNamespace]:
        yield SimpleNamespace()

    monkeypatch.setattr(cli, "opened", opened)
    path = tmp_path / "letter.eml"
    path.write_bytes(raw_letter())
    code, _, _ = run("stats", path)
    assert code == 6


@given(st.from_regex(http.WINDOW, fullmatch=True))
def test_every_window_the_schema_allows_the_counters_take(window: str) -> None:
    """The OpenAPI pattern of a window is a subset of what ``parse_window`` accepts."""
    parse_window(window)


def test_the_kinds_of_the_schema_are_the_counters_kinds() -> None:
    assert set(get_args(http.Kind)) == set(KINDS)
