"""Opening a letter in the webmail: the letter page (first open, which marks it read, and a
reopen) and its sandboxed frame, on a letter with a large attachment and an HTML body with
remote images, through FastAPI's TestClient (no network; real SQLite and disks).

Reported: milliseconds per request (median of ``--runs``), and how many times one first open
(page + frame) parses the letter, runs nh3 and extracts the letter's shingles, counted by
wrapping those functions; plus each step alone on the same letter.

    python benchmarks/web_letter_page.py [--attachment-mb 10] [--html-kb 300] [--runs 7]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import nh3
from fastapi.testclient import TestClient

from _common import emit, machine, note
from pochta.antispam.shingles import extract as extract_module
from pochta.antispam.shingles import shingler as shingler_module
from pochta.config import load_settings
from pochta.mailbox import reading
from pochta.mime.letter import parse
from pochta.server.http import create_app
from pochta.server.web import sanitize as sanitize_module

PASSWORD = "a long enough password"
CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def newsletter(size: int) -> str:
    block = (
        '<table width="600" style="border-collapse: collapse; color: #333"><tr>'
        '<td style="padding: 12px; font-family: Arial, sans-serif; font-size: 14px">'
        '<h2 style="color: #005a9c">Weekly news</h2><p>Lorem ipsum dolor sit amet, '
        '<a href="https://news.example/item?id=1">read more</a>.</p>'
        '<img src="https://cdn.news.example/pic.png" width="560" alt="picture"></td></tr>'
        "</table>\n"
    )
    return "<html><body>" + block * (size // len(block) + 1) + "</body></html>"


def the_letter(html_bytes: int, attachment_bytes: int) -> bytes:
    msg = EmailMessage()
    msg["From"] = "News <news@bulk.example>"
    msg["To"] = "alice@example.org"
    msg["Subject"] = "Weekly news with the report"
    msg["Message-ID"] = "<bench@bulk.example>"
    msg.set_content("Weekly news (text part).")
    msg.add_alternative(newsletter(html_bytes), subtype="html")
    msg.add_attachment(
        os.urandom(attachment_bytes),
        maintype="application",
        subtype="octet-stream",
        filename="report.bin",
    )
    return msg.as_bytes()


@contextmanager
def counted() -> Iterator[Counter[str]]:
    """Count the letter parses, nh3 passes and shingle extractions while inside."""
    calls: Counter[str] = Counter()
    patches: list[tuple[Any, str, Any]] = []

    def wrap(owner: Any, name: str, label: str) -> None:
        original = getattr(owner, name)

        def counting(*args: Any, **kwargs: Any) -> Any:
            calls[label] += 1
            return original(*args, **kwargs)

        patches.append((owner, name, original))
        setattr(owner, name, counting)

    wrap(reading, "parse", "parse")
    wrap(nh3, "clean", "nh3")
    wrap(shingler_module, "extract", "extract")
    try:
        yield calls
    finally:
        for owner, name, original in patches:
            setattr(owner, name, original)


def ms(fn: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return round(statistics.median(times) * 1000, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--attachment-mb", type=float, default=10.0)
    parser.add_argument("--html-kb", type=int, default=300)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="a 1 MiB attachment, one run")
    args = parser.parse_args()
    if args.quick:
        args.attachment_mb, args.runs = 1.0, 1
    raw = the_letter(args.html_kb * 1000, int(args.attachment_mb * 2**20))
    with tempfile.TemporaryDirectory() as tmp:
        settings = load_settings(
            data_dir=Path(tmp) / "data",
            smtp={"enabled": False},
            valkyrie={"enabled": False},
            antispam={"pool_processes": 0},
        )
        with TestClient(create_app(settings)) as client:
            pochta: Any = client.app.state.pochta  # type: ignore[attr-defined]
            box = pochta.mailbox
            box.add_user("alice@example.org", PASSWORD)
            alice = box.user("alice@example.org")
            (letter_id,) = box.deliver(raw, [alice]).ids
            token = CSRF.search(client.get("/webmail/login").text)
            assert token is not None
            r = client.post(
                "/webmail/login",
                data={"email": "alice@example.org", "password": PASSWORD, "csrf": token[1]},
                follow_redirects=False,
            )
            assert r.status_code == 303
            page_url = f"/webmail/letters/{letter_id}"

            def first_open() -> None:
                box.update(alice.id, letter_id, seen=False)  # no feedback, no parse
                assert client.get(page_url).status_code == 200

            def reopen() -> None:
                assert client.get(page_url).status_code == 200

            def frame() -> None:
                assert client.get(page_url + "/body").status_code == 200

            first_open()  # warm up (templates, caches)
            note("counting one first open")
            with counted() as calls:
                box.update(alice.id, letter_id, seen=False)
                client.get(page_url)
                page_calls = dict(calls)
                client.get(page_url + "/body")
            figures = {
                "first_open_page_ms": ms(first_open, args.runs),
                "reopen_page_ms": ms(reopen, args.runs),
                "frame_ms": ms(frame, args.runs),
            }
            parsed = parse(raw)
            html = parsed.body_html or ""
            steps = {
                "parse_ms": ms(lambda: parse(raw), args.runs),
                "sanitize_ms": ms(lambda: sanitize_module.sanitize(html), args.runs),
                "extract_all_shingles_ms": ms(lambda: extract_module.extract(parsed), args.runs),
            }
            count_only = getattr(sanitize_module, "count_remote_images", None)
            if count_only is not None:
                steps["count_remote_images_ms"] = ms(lambda: count_only(html), args.runs)
    emit(
        {
            "benchmark": "web_letter_page",
            "machine": machine(Path(__file__).parent),
            "letter": {
                "bytes": len(raw),
                "attachment_bytes": int(args.attachment_mb * 2**20),
                "html_bytes": len(html.encode()),
                "base64_lines": raw.count(b"\n"),
            },
            "runs": args.runs,
            "per_request": figures,
            "calls_in_one_first_open": {
                "page": page_calls,
                "page_and_frame": dict(calls),
            },
            "steps_alone": steps,
            "note": "medians; FastAPI's TestClient in one process",
        }
    )


if __name__ == "__main__":
    main()
