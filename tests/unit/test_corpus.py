"""The SpamAssassin corpus fetcher: against a fake registry, and (slow) against the real one."""

from __future__ import annotations

import base64
import collections
import hashlib
import io
import json
import tarfile
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

import pytest

from pochta.errors import InvalidInput
from pochta_factory import corpus

HAM = (
    b"From alice@example.org  Thu Aug 22 12:36:23 2002\n"
    b"From: alice@example.org\nDate: Thu, 22 Aug 2002 18:26:25 +0700\nSubject: ham\n\n"
    b"\xe9t\xe9 8-bit body\n"
)
SPAM = b"Return-Path: x@example.com\nSubject: spam\n\nbuy now\r\n"
TARBALL_URL = "https://registry.example/pkg/-/datasets-spam-assassin-9.9.9.tgz"


def name(data: bytes, n: int = 1) -> str:
    return f"{n:05d}.{hashlib.md5(data).hexdigest()}"


def make_tarball(extra: list[tarfile.TarInfo | tuple[str, bytes]] | None = None) -> bytes:
    files = {
        f"package/data/spam-1/{name(SPAM)}.txt": SPAM,
        f"package/data/easy-ham-1/{name(HAM)}.txt": HAM,
        f"package/data/easy-ham-1/{name(HAM)}.json": b'{"text": "lossy"}',
        "package/data/file_list.json": json.dumps(
            [f"easy-ham-1/{name(HAM)}.txt", f"spam-1/{name(SPAM)}.txt"]
        ).encode(),
        "package/package.json": b"{}",
    }
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        items: list[tarfile.TarInfo | tuple[str, bytes]] = [*files.items(), *(extra or [])]
        for item in items:
            if isinstance(item, tarfile.TarInfo):
                tar.addfile(item)
            else:
                info = tarfile.TarInfo(item[0])
                info.size = len(item[1])
                tar.addfile(info, io.BytesIO(item[1]))
    return out.getvalue()


class FakeRegistry:
    def __init__(self, tarball: bytes, *, integrity: str | None = None, shasum: str | None = None):
        self.tarball = tarball
        dist = {
            "tarball": TARBALL_URL,
            "integrity": integrity
            if integrity is not None
            else "sha512-" + base64.b64encode(hashlib.sha512(tarball).digest()).decode(),
            "shasum": shasum if shasum is not None else hashlib.sha1(tarball).hexdigest(),
        }
        self.meta = {"dist-tags": {"latest": "9.9.9"}, "versions": {"9.9.9": {"dist": dist}}}
        self.calls: list[str] = []

    def __call__(self, url: str) -> BinaryIO:
        self.calls.append(url)
        if url == f"{corpus.REGISTRY}/@stdlib%2Fdatasets-spam-assassin":
            return io.BytesIO(json.dumps(self.meta).encode())
        if url == TARBALL_URL:
            return io.BytesIO(self.tarball)
        raise OSError(f"404 {url}")


def offline(url: str) -> BinaryIO:
    raise OSError("network is unreachable")


def test_fetch_verifies_unpacks_and_lists_letters_in_package_order(tmp_path: Path) -> None:
    registry = FakeRegistry(make_tarball())
    got = list(corpus.letters(cache_dir=tmp_path, open_url=registry))
    assert [(x.group, x.label, x.raw) for x in got] == [
        ("easy-ham-1", "ham", HAM),
        ("spam-1", "spam", SPAM),
    ]
    ham, spam = got
    assert ham.name == name(HAM) and ham.checksum_ok
    assert ham.date == datetime(2002, 8, 22, 11, 26, 25, tzinfo=UTC)
    assert ham.received == datetime(2002, 8, 22, 12, 36, 23, tzinfo=UTC)
    assert (spam.date, spam.received) == (None, None)
    root = tmp_path / "spam-assassin-9.9.9"
    manifest = json.loads((root / "manifest.json").read_text())
    assert manifest["version"] == "9.9.9" and len(manifest["letters"]) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spam-assassin-9.9.9"]  # no temp left


def test_once_cached_nothing_is_fetched(tmp_path: Path) -> None:
    corpus.fetch(tmp_path, open_url=FakeRegistry(make_tarball()))
    assert len(list(corpus.letters(cache_dir=tmp_path, open_url=offline))) == 2
    registry = FakeRegistry(make_tarball())
    corpus.fetch(tmp_path, refresh=True, open_url=registry)
    assert registry.calls == [f"{corpus.REGISTRY}/@stdlib%2Fdatasets-spam-assassin", TARBALL_URL]


def test_cache_directory_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("POCHTA_CORPUS_CACHE", str(tmp_path / "env-cache"))
    assert corpus.default_cache_dir() == tmp_path / "env-cache"
    assert corpus.fetch(open_url=FakeRegistry(make_tarball())).parent == tmp_path / "env-cache"
    monkeypatch.delenv("POCHTA_CORPUS_CACHE")
    assert corpus.default_cache_dir() == Path.home() / ".cache" / "pochta" / "corpus"


def test_groups(tmp_path: Path) -> None:
    registry = FakeRegistry(make_tarball())
    assert [x.group for x in corpus.letters(["spam-1"], cache_dir=tmp_path, open_url=registry)] == [
        "spam-1"
    ]
    with pytest.raises(InvalidInput, match="unknown corpus group"):
        list(corpus.letters(["spam-3"], cache_dir=tmp_path, open_url=registry))


@pytest.mark.parametrize(
    ("integrity", "shasum", "message"),
    [
        ("sha512-" + base64.b64encode(b"x" * 64).decode(), None, "SHA-512"),
        (None, "0" * 40, "SHA-1"),
        ("", "", "no checksum"),
    ],
)
def test_a_tarball_that_does_not_verify_leaves_nothing(
    tmp_path: Path, integrity: str | None, shasum: str | None, message: str
) -> None:
    registry = FakeRegistry(make_tarball(), integrity=integrity, shasum=shasum)
    with pytest.raises(corpus.CorpusUnavailable, match=message):
        corpus.fetch(tmp_path, open_url=registry)
    assert list(tmp_path.iterdir()) == []


def test_shasum_alone_is_enough(tmp_path: Path) -> None:
    assert corpus.fetch(tmp_path, open_url=FakeRegistry(make_tarball(), integrity="")).is_dir()


def test_unpacking_writes_only_letters_inside_the_cache(tmp_path: Path) -> None:
    link = tarfile.TarInfo(f"package/data/spam-1/{name(b'link', 2)}.txt")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    evil: list[tarfile.TarInfo | tuple[str, bytes]] = [
        (f"package/data/easy-ham-1/../../../../evil-{name(b'a')}.txt", b"evil"),
        (f"/tmp/package/data/spam-1/{name(b'b', 3)}.txt", b"evil"),
        (f"package/data/other-1/{name(b'c')}.txt", b"not a group"),
        link,
    ]
    cache = tmp_path / "cache"
    got = list(corpus.letters(cache_dir=cache, open_url=FakeRegistry(make_tarball(evil))))
    assert len(got) == 2
    written = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert written == [
        "cache/spam-assassin-9.9.9/easy-ham-1/" + name(HAM) + ".txt",
        "cache/spam-assassin-9.9.9/manifest.json",
        "cache/spam-assassin-9.9.9/spam-1/" + name(SPAM) + ".txt",
    ]


def test_unreachable_registry(tmp_path: Path) -> None:
    with pytest.raises(corpus.CorpusUnavailable, match="metadata"):
        corpus.fetch(tmp_path, open_url=offline)
    with pytest.raises(corpus.CorpusUnavailable, match="https"):
        corpus._urlopen("http://registry.npmjs.org/x")


@pytest.mark.slow
def test_the_real_corpus() -> None:
    try:
        letters = list(corpus.letters())
    except corpus.CorpusUnavailable as exc:
        pytest.skip(f"the SpamAssassin corpus cannot be fetched: {exc}")
    groups = collections.Counter(x.group for x in letters)
    assert groups == {
        "easy-ham-1": 2500,
        "easy-ham-2": 1400,
        "hard-ham-1": 250,
        "spam-1": 500,
        "spam-2": 1396,
    }
    assert collections.Counter(x.label for x in letters) == {"ham": 4150, "spam": 1896}
    assert [f"{x.group}/{x.name[:5]}" for x in letters if not x.checksum_ok] == ["hard-ham-1/00230"]
    assert sum(x.date is not None for x in letters) > 6000
    assert sum(x.received is not None for x in letters) > 5000


def test_unsealed_drops_sealed_letters_by_their_files_hash(tmp_path: Path) -> None:
    """A letter whose file's SHA-256 begins with a byte below 52 is sealed: left out."""
    made = [b"Subject: n%d\n\nbody\n" % n for n in range(64)]
    sealed = next(raw for raw in made if hashlib.sha256(raw).digest()[0] < 52)
    kept = next(raw for raw in made if hashlib.sha256(raw).digest()[0] >= 52)
    assert corpus.is_sealed(sealed) and not corpus.is_sealed(kept)
    extra: list[tarfile.TarInfo | tuple[str, bytes]] = [
        (f"package/data/spam-2/{name(sealed, 7)}.txt", sealed),
        (f"package/data/spam-2/{name(kept, 8)}.txt", kept),
    ]
    registry = FakeRegistry(make_tarball(extra))
    every = [x.raw for x in corpus.letters(cache_dir=tmp_path, open_url=registry)]
    assert sealed in every and kept in every
    got = [x.raw for x in corpus.unsealed(cache_dir=tmp_path, open_url=registry)]
    assert got == [raw for raw in every if not corpus.is_sealed(raw)]
    assert kept in got and sealed not in got
    with pytest.raises(InvalidInput):
        list(corpus.unsealed(["nope"], cache_dir=tmp_path, open_url=registry))
