"""Two ``pochta serve`` processes (two loaders, each its own data directory) whose learned
words are in one PostgreSQL database (with the admin history), or in Redis: a letter a user
moves into Spam through one loader is scored with what it taught by the other (``POST
/v1/scan``), as the issue asks ("every loader gives a letter the same verdict"). The shingle
counters are in Redis, as in *Several machines*: the loaders share every opinion."""

from __future__ import annotations

import json
import smtplib
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import redis

from tests.integration.conftest import Server, eventually, start_server
from tests.pgserver import NewDatabase

pytestmark = pytest.mark.integration

PASSWORD = "a long enough password"
LETTER = (
    "From: Deals <deals@shop.example.net>\r\n"
    "To: bob@example.org\r\n"
    "Subject: zorblatt offers this week\r\n"
    "Message-ID: <w1@shop.example.net>\r\n"
    "\r\n" + "zorblatt quexify mirthwing gadrolux plenderfast\r\n" * 8
).encode()


def scan(server: Server) -> float:
    r = httpx.post(f"{server.url}/v1/scan", content=LETTER, headers=server.auth, timeout=30)
    assert r.status_code == 200, r.text
    probability = r.json()["probability"]
    assert probability is not None  # the model scored it
    return float(probability)


@pytest.mark.parametrize("backend", ["postgres", "redis"])
def test_a_letter_taught_through_one_loader_is_scored_alike_by_the_other(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest, redis_client: redis.Redis
) -> None:
    port = redis_client.connection_pool.connection_kwargs["port"]
    settings = {
        "POCHTA_SHINGLES__BACKEND": "redis",
        "POCHTA_SHINGLES__FLUSH_INTERVAL": "0.2",
        "POCHTA_SHINGLES__CACHE_TTL": "0",
        "POCHTA_REDIS__NODES": json.dumps([f"127.0.0.1:{port}"]),
        "POCHTA_ANTISPAM__LEARNED_WORDS_KEY": "two-loaders-words-key-5a1c",
        "POCHTA_ANTISPAM__LEARNED_WORDS_FLUSH_SECONDS": "0.2",
        "POCHTA_ANTISPAM__POOL_PROCESSES": "0",
        "POCHTA_VALKYRIE__ENABLED": "false",
    }
    if backend == "postgres":
        new_db: NewDatabase = request.getfixturevalue("new_postgres_db")
        settings["POCHTA_POSTGRES__DSN"] = new_db()
        settings["POCHTA_ANTISPAM__LEARNED_WORDS_BACKEND"] = "postgres"
        settings["POCHTA_WEB__HISTORY_BACKEND"] = "postgres"
    # else auto: Redis, where the shingle counters are
    one_data = tmp_path / "one"
    subprocess.run([sys.executable, "-m", "pochta", "init", "--data", str(one_data)], check=True)
    subprocess.run(
        [
            *(sys.executable, "-m", "pochta", "user", "add", "bob@example.org"),
            *("--password-stdin", "--data", str(one_data)),
        ],
        input=f"{PASSWORD}\n".encode(),
        check=True,
        capture_output=True,
    )
    one = start_server(one_data, tmp_path / "one.log", settings=settings)
    two = start_server(tmp_path / "two", tmp_path / "two.log", settings=settings)
    try:
        before = scan(two)
        assert scan(one) == before
        with smtplib.SMTP("127.0.0.1", one.smtp_port, timeout=60) as smtp:
            smtp.sendmail("deals@shop.example.net", ["bob@example.org"], LETTER)
        token = httpx.post(
            f"{one.url}/v1/session", json={"email": "bob@example.org", "password": PASSWORD}
        ).json()["token"]
        bob = {"Authorization": f"Bearer {token}"}

        def inbox() -> list[dict[str, object]]:
            page = httpx.get(f"{one.url}/v1/messages", params={"folder": "Inbox"}, headers=bob)
            return list(page.json()["messages"])

        (letter,) = eventually(inbox, bool, what="the letter")  # queued: after its 250
        moved = httpx.patch(
            f"{one.url}/v1/messages/{letter['id']}", json={"folder": "Spam"}, headers=bob
        )
        assert moved.status_code == 200, moved.text
        # each loader writes its words and shingle increments within 0.2 s: soon both agree
        deadline = time.monotonic() + 30
        while (after := scan(two)) == before or scan(one) != after:
            assert time.monotonic() < deadline, "the loaders never agreed on what one learned"
            time.sleep(0.2)
        assert after > before  # "spam" taught: the letter leans to spam on both
        assert not (tmp_path / "two" / "words.sqlite3").exists()
        if backend == "redis":
            assert redis_client.keys("lw{w:0}:*")
    finally:
        for server in (one, two):
            server.stop()
