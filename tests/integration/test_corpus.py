"""The public SpamAssassin corpus through SMTP and through import, read back byte-exact.

Its unsealed letters only (4,847 of 6,046): a sealed letter is never read, not even by the
server's scoring on its way in (the rule of the detection figures)."""

from __future__ import annotations

import json
import re
import smtplib
import subprocess
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from pochta_factory import corpus
from tests.integration.conftest import eventually, start_server
from tests.integration.test_smtp import PASSWORD, add_users, session, strip_trace

pytestmark = [pytest.mark.integration, pytest.mark.slow]

UNSEALED = 4847  # of the corpus's 6,046 letters


@pytest.fixture(scope="module")
def letters() -> list[corpus.CorpusLetter]:
    try:
        return list(corpus.unsealed())
    except corpus.CorpusUnavailable as exc:  # pragma: no cover - offline machine
        pytest.skip(f"the SpamAssassin corpus cannot be fetched: {exc.message}")


def on_the_wire(raw: bytes) -> bytes:
    """What an SMTP client transmits as the letter: CRLF line endings, ending with CRLF."""
    wire = re.sub(rb"\r\n|\r|\n", b"\r\n", raw)
    return wire if wire.endswith(b"\r\n") else wire + b"\r\n"


def test_every_corpus_letter_over_smtp_comes_back_byte_identical(
    letters: list[corpus.CorpusLetter], tmp_path: Path
) -> None:
    assert len(letters) == UNSEALED
    data = tmp_path / "data"
    add_users(data, "corpus@example.org")
    srv = start_server(data, tmp_path / "serve.log")
    try:
        sent = [on_the_wire(m.raw) for m in letters]

        def send(batch: list[bytes]) -> None:
            with smtplib.SMTP("127.0.0.1", srv.smtp_port, timeout=60) as smtp:
                for raw in batch:
                    smtp.sendmail("feeder@example.net", ["corpus@example.org"], raw)

        with ThreadPoolExecutor(4) as pool:
            list(pool.map(send, [sent[i::4] for i in range(4)]))
        auth = session(srv, "corpus@example.org")

        def stored() -> int:
            folders = httpx.get(f"{srv.url}/v1/folders", headers=auth, timeout=60).json()
            return sum(int(f["total"]) for f in folders)

        # queued: the last letters are stored a moment after their 250
        eventually(stored, lambda n: n >= UNSEALED, timeout=600, what="every letter stored")
        ids: list[int] = []
        verdicts: Counter[str] = Counter()
        with httpx.Client(base_url=srv.url, headers=auth, timeout=60) as http:
            for folder in ("Inbox", "Spam"):
                cursor = None
                while True:
                    params = {
                        "folder": folder,
                        "limit": 200,
                        **({"cursor": cursor} if cursor else {}),
                    }
                    page = http.get("/v1/messages", params=params).json()
                    for m in page["messages"]:
                        ids.append(m["id"])
                        verdicts[m["verdict"]] += 1
                    cursor = page["next_cursor"]
                    if cursor is None:
                        break

            def raw(letter_id: int) -> bytes:
                r = http.get(f"/v1/messages/{letter_id}/raw")
                r.raise_for_status()
                return r.content

            with ThreadPoolExecutor(4) as pool:  # the server answers them side by side
                got = list(pool.map(raw, ids))
        assert Counter(strip_trace(g) for g in got) == Counter(sent)
        assert sum(verdicts.values()) == UNSEALED and verdicts["spam"] > 0 and verdicts["ham"] > 0
        stats = subprocess.run(
            [sys.executable, "-m", "pochta", "stats", "--json", "--data", str(data)],
            capture_output=True,
            text=True,
            check=True,
        )
        assert json.loads(stats.stdout)["letters"] == UNSEALED
    finally:
        srv.stop()


def test_every_corpus_letter_through_import_comes_back_byte_identical(
    letters: list[corpus.CorpusLetter], tmp_path: Path
) -> None:
    src = tmp_path / "corpus"
    for m in letters:
        (src / m.group).mkdir(parents=True, exist_ok=True)
        (src / m.group / m.name).write_bytes(m.raw)
    data = tmp_path / "data"
    add_users(data, "corpus@example.org")
    done = subprocess.run(
        [
            *(sys.executable, "-m", "pochta", "import", "--user", "corpus@example.org"),
            *("--json", "--data", str(data), str(src)),
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["letters"] == UNSEALED and report["failed"] == []
    assert report["bytes_received"] == sum(len(m.raw) for m in letters)
    from pochta.app import build
    from pochta.config import load_settings

    pochta = build(load_settings(data_dir=data))
    try:
        user = pochta.mailbox.user("corpus@example.org")
        assert user is not None
        listed = pochta.mailbox.letters(user.id, "Inbox", 10_000)
        got = Counter(pochta.mailbox.raw(user.id, m.id) for m in listed)
        assert got == Counter(m.raw for m in letters)
        assert pochta.mailbox.fsck().ok
    finally:
        pochta.close()
    assert PASSWORD  # the same users module as the SMTP tests
