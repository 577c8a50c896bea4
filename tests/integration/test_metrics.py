"""/metrics of a real ``pochta serve`` after real deliveries: the counters move by exactly
what happened (letters, bytes, deduplication, verdicts, SMTP codes, blob operations, logins,
a pair set READONLY, a copy Valkyrie repaired), and values recorded by another process of the
same server (multiprocess mode, as ``serve --workers N`` has) are summed in."""

from __future__ import annotations

import os
import smtplib
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.conftest import Server, eventually, start_server
from tests.integration.test_smtp import add_users, count, session
from tests.mailtools import letter, payload

pytestmark = pytest.mark.integration

Sample = tuple[str, frozenset[tuple[str, str]]]


def scrape(srv: Server) -> dict[Sample, float]:
    r = httpx.get(f"{srv.url}/metrics", timeout=10)
    r.raise_for_status()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(r.text)
        for s in family.samples
    }


def value(samples: dict[Sample, float], name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def total(samples: dict[Sample, float], name: str) -> float:
    return sum(v for (n, _), v in samples.items() if n == name)


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up after {timeout} s waiting for {what}")
        time.sleep(0.1)


WORKERS = 2  # antispam.pool_processes


@pytest.fixture(scope="module")
def mx(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("metrics")
    add_users(root / "data", "alice@example.org", "bob@example.org")
    srv = start_server(
        root / "data",
        root / "serve.log",
        settings={
            "POCHTA_SMTP__MAX_MESSAGE_SIZE": "200000",
            "POCHTA_VALKYRIE__PASS_INTERVAL_SECONDS": "0.5",
            "POCHTA_VALKYRIE__BUDGET_MB_PER_S": "100",
            "POCHTA_ANTISPAM__POOL_PROCESSES": str(WORKERS),
        },
    )
    yield srv
    srv.stop()


def sizes(srv: Server, email: str) -> list[int]:
    auth = session(srv, email)
    out = []
    for folder in ("Inbox", "Spam"):
        page = httpx.get(f"{srv.url}/v1/messages?folder={folder}", headers=auth).json()
        out += [m["size"] for m in page["messages"]]
    return out


def test_counters_move_by_what_was_delivered(mx: Server) -> None:
    had = len(sizes(mx, "alice@example.org")) + len(sizes(mx, "bob@example.org"))
    before = scrape(mx)
    attachment = [("report.bin", payload(11, 60_000))]
    with smtplib.SMTP("127.0.0.1", mx.smtp_port) as client:
        # one letter for two: stored twice, the attachment uploaded once and counted twice
        client.sendmail("s@example.net", ["alice@example.org", "bob@example.org"],
                        letter(subject="first", attachments=attachment))  # fmt: skip
        # the same attachment again, for alice: deduplicated
        client.sendmail("s@example.net", ["alice@example.org"],
                        letter(subject="second", attachments=attachment))  # fmt: skip
        # over smtp.max_message_size (no SIZE given at MAIL): 552 after DATA, nothing stored
        client.mail("s@example.net")
        client.rcpt("alice@example.org")
        code, _ = client.data(letter(subject="big", attachments=[("big", payload(1, 300_000))]))
        assert code == 552
    with smtplib.LMTP("127.0.0.1", mx.lmtp_port) as lmtp:
        lmtp.sendmail("s@example.net", ["bob@example.org"], letter(subject="by lmtp"))
    for guess in ("wrong password 1", "wrong password 2"):
        r = httpx.post(f"{mx.url}/v1/session",
                       json={"email": "alice@example.org", "password": guess})  # fmt: skip
        assert r.status_code == 401

    def stored() -> int:
        return len(sizes(mx, "alice@example.org")) + len(sizes(mx, "bob@example.org"))

    eventually(stored, lambda n: n >= had + 4, what="4 letters stored")  # queued: after 250
    after = scrape(mx)

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert moved("pochta_deliveries_total", protocol="smtp", result="delivered", code="250") == 2
    assert moved("pochta_deliveries_total", protocol="smtp", result="refused", code="552") == 1
    assert moved("pochta_deliveries_total", protocol="lmtp", result="delivered", code="250") == 1
    assert moved("pochta_letters_stored_total") == 4
    assert moved("pochta_attachments_total", outcome="uploaded") == 1
    assert moved("pochta_attachments_total", outcome="deduplicated") == 2
    assert moved("pochta_blob_operations_total", op="store", result="ok") == 2
    assert moved("pochta_blob_operations_total", op="inc", result="ok") == 1
    letter_bytes = sum(sizes(mx, "alice@example.org")) + sum(sizes(mx, "bob@example.org"))
    assert moved("pochta_letter_bytes_total") == letter_bytes
    stored = moved("pochta_stored_bytes_total")
    assert 60_000 < stored < letter_bytes - 2 * 60_000  # the attachment once, not three times
    assert moved("pochta_dedup_saved_bytes_total") == 2 * 60_000  # the 2nd and 3rd copy
    assert total(after, "pochta_verdicts_total") - total(before, "pochta_verdicts_total") == 3
    assert moved("pochta_scan_seconds_count") == 3 and moved("pochta_scan_seconds_sum") > 0
    assert moved("pochta_login_failures_total", reason="invalid_credentials") == 2
    wait_for(lambda: value(scrape(mx), "pochta_shingle_flushed_cells_total", result="ok")
             > value(before, "pochta_shingle_flushed_cells_total", result="ok"),
             10, "the shingle counters to be flushed")  # fmt: skip
    # the server's counters and each worker process's own (they count what was delivered),
    # each sampled at its own flush tick: a fresh scrape once every process has ticked (the
    # ``after`` above can come before the first tick of any of them on a fast machine)
    capacity = (1 + WORKERS) * 2_000_000
    wait_for(lambda: value(scrape(mx), "pochta_shingle_buffer_capacity_cells") == capacity,
             10, "every process's buffer capacity in /metrics")  # fmt: skip


def test_a_readonly_pair_shows(mx: Server) -> None:
    assert value(scrape(mx), "pochta_pair_writable", pair="1") == 1
    flags = [sys.executable, "-m", "pochta", "pairs", "set-flags", "1", "--data", str(mx.data)]
    subprocess.run([*flags, "readonly"], check=True, capture_output=True)
    try:
        samples = scrape(mx)
        assert value(samples, "pochta_pair_writable", pair="1") == 0
        assert value(samples, "pochta_pair_flag", pair="1", flag="readonly") == 1
        assert value(samples, "pochta_pair_flag", pair="1", flag="service") == 0
    finally:
        subprocess.run([*flags, "none"], check=True, capture_output=True)


def test_valkyrie_repairs_show_per_disk(mx: Server) -> None:
    disk = mx.data / "disks" / "1"

    def blobs() -> set[Path]:
        return {p for p in disk.glob("??/??/*") if p.is_file() and "." not in p.name}

    before_blobs, letters = blobs(), count(mx, "alice@example.org")
    with smtplib.SMTP("127.0.0.1", mx.smtp_port) as client:
        client.sendmail("s@example.net", ["alice@example.org"],
                        letter(subject="to corrupt", attachments=[("c.bin", payload(5, 20_000))]))
    # queued: the letter is stored a moment after its 250 (the newest file on the disk read
    # at once was an older letter's)
    eventually(lambda: count(mx, "alice@example.org"), lambda n: n > letters, what="the letter")
    blob = max(blobs() - before_blobs, key=lambda p: p.stat().st_size)  # the attachment's
    before = value(scrape(mx), "pochta_valkyrie_files_total", disk=str(disk), action="repaired")
    blob.write_bytes(b"rot" + blob.read_bytes()[3:])

    def repaired() -> bool:
        now = value(scrape(mx), "pochta_valkyrie_files_total", disk=str(disk), action="repaired")
        return now > before

    wait_for(repaired, 60, "Valkyrie to repair the copy")
    samples = scrape(mx)
    assert value(samples, "pochta_valkyrie_files_total", disk=str(disk), action="checked") > 0
    assert value(samples, "pochta_valkyrie_passes_total", disk=str(disk)) >= 1
    assert value(samples, "pochta_valkyrie_files_total", disk=str(disk), action="errors") == 0


def test_values_of_another_process_of_the_server_are_summed(mx: Server) -> None:
    """A second process writing into the server's metrics directory (as the processes of
    ``pochta serve --workers N`` do) is counted by a scrape of the first."""
    before = scrape(mx)
    (directory,) = (mx.data / "metrics").iterdir()
    code = (
        "from pochta import metrics\n"
        "for _ in range(5): metrics.delivery('smtp', '451 4.3.0 try again')\n"
        "metrics.login_failed('rate_limited')\n"
    )
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(directory)}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)
    after = scrape(mx)
    labels = {"protocol": "smtp", "result": "deferred", "code": "451"}
    assert value(after, "pochta_deliveries_total", **labels) - value(
        before, "pochta_deliveries_total", **labels
    ) == 5
    assert value(after, "pochta_login_failures_total", reason="rate_limited") - value(
        before, "pochta_login_failures_total", reason="rate_limited"
    ) == 1
