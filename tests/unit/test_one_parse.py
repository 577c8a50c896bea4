"""A delivery parses the letter once (SPEC §1, "the letter's path"): one MIME scan, at most one
HTML parse, and no parse by the standard library's ``email`` parsers, whatever the letter."""

from __future__ import annotations

import email.parser
import html.parser
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.mailtools import letter

from pochta.app import Pochta, build
from pochta.config import load_settings
from pochta.mime import html as html_reader
from pochta.mime import tree
from pochta.types import Envelope

PHISHING = Path(__file__).parent.parent / "data" / "phishing"


@pytest.fixture
def pochta(tmp_path: Path) -> Iterator[Pochta]:
    p = build(load_settings(data_dir=tmp_path / "data", antispam={"pool_processes": 0}))
    yield p
    p.close()


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How often each parser ran (every entry point that reads a whole letter or part)."""
    calls: Counter[str] = Counter()

    def counting(name: str, fn: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            return fn(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(tree._Scanner, "__init__", counting("mime", tree._Scanner.__init__))
    lexbor = html_reader.LexborHTMLParser
    monkeypatch.setattr(html_reader, "LexborHTMLParser", counting("html", lexbor))
    for cls, method in (
        (email.parser.BytesParser, "parsebytes"),
        (email.parser.Parser, "parsestr"),
        (html.parser.HTMLParser, "feed"),
    ):
        monkeypatch.setattr(cls, method, counting(f"stdlib {cls.__name__}", getattr(cls, method)))
    return calls


LETTERS = {
    "plain": letter(text="Hello, see you tomorrow.\n"),
    "html and attachment": letter(
        text="See the report.\n",
        html='<p>See the <a href="https://example.org/r">report</a>.</p>',
        attachments=[("report.pdf", b"%PDF-1.4 " * 2000)],
    ),
    **{p.stem: p.read_bytes() for p in sorted(PHISHING.glob("*.eml"))[:12]},
}


@pytest.mark.parametrize("name", list(LETTERS))
def test_a_delivery_with_a_verdict_parses_once(
    pochta: Pochta, parses: Counter[str], name: str
) -> None:
    user = pochta.mailbox.index.add_user("ivan@pochta.test", "x")
    envelope = Envelope("203.0.113.10", "sender@example.net", ("ivan@pochta.test",))
    pochta.mailbox.deliver(LETTERS[name], [user], envelope=envelope, scan=True)
    assert parses["mime"] == 1, parses
    assert parses["html"] <= 1
    assert not [k for k in parses if k.startswith("stdlib")], parses
