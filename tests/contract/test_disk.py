"""The Disk contract: every storage node kind of ``DISK_KINDS`` (conftest.py), one suite.

Names are relative (``tmp/<random>.part``, ``ab/cd/<key>``); nothing here looks at the disk
other than through the Disk interface.
"""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

import pytest

from pochta.blobs.keys import blob_path, key_of
from pochta.errors import DiskError, MissingFile
from pochta.types import Disk

DATA = os.urandom(300_000)
NAME = blob_path(key_of(DATA))


def store(disk: Disk, name: str, data: bytes, tmp: str = "tmp/upload-1.part") -> None:
    writer = disk.create(tmp)
    for i in range(0, len(data), 65_536):
        writer.write(data[i : i + 65_536])
    writer.commit()
    disk.publish(tmp, name)


def read(disk: Disk, name: str, start: int = 0, end: int | None = None) -> bytes:
    return b"".join(disk.open(name, start, end))


def test_write_commit_publish_then_read(disk: Disk) -> None:
    store(disk, NAME, DATA)
    assert read(disk, NAME) == DATA
    assert disk.size(NAME) == len(DATA)
    assert disk.size("tmp/upload-1.part") is None  # the temporary name is gone


def test_a_file_is_not_there_before_publish(disk: Disk) -> None:
    writer = disk.create("tmp/a.part")
    writer.write(DATA)
    writer.commit()
    assert disk.size(NAME) is None
    with pytest.raises(MissingFile):
        disk.open(NAME)
    disk.publish("tmp/a.part", NAME)
    assert disk.size(NAME) == len(DATA)


def test_commit_as_puts_the_bytes_under_their_name(disk: Disk) -> None:
    writer = disk.create("tmp/as.part")
    writer.write(DATA[:100_000])
    writer.write(DATA[100_000:])
    writer.commit_as(NAME)
    assert read(disk, NAME) == DATA
    assert disk.size("tmp/as.part") is None


def test_commit_as_replaces_a_file_of_the_same_name(disk: Disk) -> None:
    """A leftover under the name (a crash's, or another loader's) gives way to the new bytes."""
    store(disk, NAME, b"an older, shorter file")
    writer = disk.create("tmp/as.part")
    writer.write(DATA)
    writer.commit_as(NAME)
    assert read(disk, NAME) == DATA
    assert disk.size("tmp/as.part") is None


def test_many_loaders_commit_one_name_at_once(disk: Disk) -> None:
    """Each reader sees one loader's bytes whole; no temporary name stays behind."""
    contents = [os.urandom(20_000) for _ in range(6)]
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(contents))

    def load(i: int) -> None:
        try:
            writer = disk.create(f"tmp/many-{i}.part")
            writer.write(contents[i])
            barrier.wait(10)
            writer.commit_as(NAME)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=load, args=(i,)) for i in range(len(contents))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == []
    assert read(disk, NAME) in contents
    for i in range(len(contents)):
        assert disk.size(f"tmp/many-{i}.part") is None


def test_empty_file(disk: Disk) -> None:
    store(disk, NAME, b"")
    assert disk.size(NAME) == 0
    reader = disk.open(NAME)
    assert reader.size == 0
    assert b"".join(reader) == b""


def test_a_large_file_arrives_in_several_chunks(disk: Disk) -> None:
    data = os.urandom(2_500_000)
    store(disk, NAME, data)
    reader = disk.open(NAME)
    assert reader.size == len(data)
    chunks = list(reader)
    assert len(chunks) > 1
    assert b"".join(chunks) == data


@pytest.mark.parametrize(
    ("start", "end"),
    [(0, None), (0, 1), (1000, 2000), (299_999, None), (100, 300_000), (5, 5), (0, 10**9)],
)
def test_ranges(disk: Disk, start: int, end: int | None) -> None:
    store(disk, NAME, DATA)
    reader = disk.open(NAME, start, end)
    assert reader.size == len(DATA)  # the whole file's size, whatever the range
    assert b"".join(reader) == DATA[start:end]


def test_a_range_starting_at_the_end_is_empty(disk: Disk) -> None:
    store(disk, NAME, DATA)
    assert read(disk, NAME, len(DATA)) == b""


def test_a_reader_can_be_closed_unread(disk: Disk) -> None:
    store(disk, NAME, DATA)
    disk.open(NAME).close()
    assert read(disk, NAME) == DATA


def test_missing_file(disk: Disk) -> None:
    with pytest.raises(MissingFile):
        disk.open(NAME)
    with pytest.raises(MissingFile):
        disk.open("ab/cd/" + "0" * 64, 10, 20)
    assert disk.size(NAME) is None
    assert isinstance(MissingFile("x"), DiskError)


def test_publish_replaces_a_file_of_the_same_name(disk: Disk) -> None:
    """The second of two loaders storing the same file renames over the first copy."""
    store(disk, NAME, b"first copy", tmp="tmp/one.part")
    store(disk, NAME, b"second copy", tmp="tmp/two.part")
    assert read(disk, NAME) == b"second copy"
    assert disk.size("tmp/one.part") is None
    assert disk.size("tmp/two.part") is None


def test_two_writers_at_once_never_mix_bytes(disk: Disk) -> None:
    first, second = os.urandom(500_000), os.urandom(500_000)
    start = threading.Barrier(2)

    def loader(data: bytes, tmp: str) -> None:
        start.wait()
        store(disk, NAME, data, tmp=tmp)

    threads = [
        threading.Thread(target=loader, args=(first, "tmp/x.part")),
        threading.Thread(target=loader, args=(second, "tmp/y.part")),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert read(disk, NAME) in (first, second)


def test_delete(disk: Disk) -> None:
    store(disk, NAME, DATA)
    disk.delete(NAME)
    assert disk.size(NAME) is None
    with pytest.raises(MissingFile):
        disk.open(NAME)
    disk.delete(NAME)  # deleting what is not there is not an error


@pytest.mark.parametrize("size", [len(DATA), 2_500_000])  # held back, and being streamed
def test_abort_before_commit_leaves_nothing(disk: Disk, size: int) -> None:
    """A local disk has the bytes in its temporary file by now, a WebDAV node in the PUT
    being sent; either way an abort leaves no trace of them."""
    writer = disk.create("tmp/aborted.part")
    writer.write(os.urandom(size))
    writer.abort()
    assert disk.size("tmp/aborted.part") is None
    assert [e.name for e in disk.walk()] == []
    writer.abort()  # never raises, even twice


def test_abort_after_commit_removes_the_temporary_file(disk: Disk) -> None:
    writer = disk.create("tmp/aborted.part")
    writer.write(DATA)
    writer.commit()
    writer.abort()
    assert disk.size("tmp/aborted.part") is None


def test_abort_after_publish_keeps_the_published_file(disk: Disk) -> None:
    writer = disk.create("tmp/p.part")
    writer.write(DATA)
    writer.commit()
    disk.publish("tmp/p.part", NAME)
    writer.abort()
    assert read(disk, NAME) == DATA


@pytest.mark.parametrize("size", [5_000, 2_500_000])
def test_a_clash_of_temporary_names_never_mixes_two_uploads(disk: Disk, size: int) -> None:
    """Temporary names carry 128 random bits, so two uploads never share one; were they to,
    the disk refuses the second writer (a local disk, at create) or keeps one writer's bytes
    whole (a WebDAV node: each PUT lands whole), never a mix of the two."""
    first, second = os.urandom(size), os.urandom(size)
    writer = disk.create("tmp/same.part")
    writer.write(first)
    try:
        other = disk.create("tmp/same.part")
    except DiskError:
        other = None
    if other is not None:
        other.write(second)
    writer.commit()
    if other is not None:
        other.commit()
    disk.publish("tmp/same.part", NAME)
    assert read(disk, NAME) in (first, second)


def test_free_bytes(disk: Disk) -> None:
    free = disk.free_bytes()
    assert isinstance(free, int)
    assert free > len(DATA)


def test_probe_repeats_and_the_disk_stays_usable(disk: Disk) -> None:
    disk.probe()
    disk.probe()
    store(disk, NAME, DATA)
    assert read(disk, NAME) == DATA


@pytest.mark.parametrize("size", [0, 5, 300_000])
def test_the_content_replaces_the_probe_of_its_own_file(disk: Disk, size: int) -> None:
    data = DATA[:size]
    writer = disk.create("tmp/probed.part")
    writer.probe()
    assert disk.size("tmp/probed.part") is not None  # the node took the probe's bytes
    for i in range(0, len(data), 65_536):
        writer.write(data[i : i + 65_536])
    writer.commit_as(NAME)
    assert read(disk, NAME) == data  # not a byte of the probe left, whatever the size
    assert disk.size("tmp/probed.part") is None


def test_a_probed_file_aborted_leaves_nothing(disk: Disk) -> None:
    writer = disk.create("tmp/probed.part")
    writer.probe()
    writer.abort()
    assert disk.size("tmp/probed.part") is None


def test_an_unwritable_disk_fails_the_probe(broken_disk: Disk) -> None:
    with pytest.raises(DiskError):
        broken_disk.probe()

    def probe_a_file() -> None:
        writer = broken_disk.create("tmp/p.part")
        try:
            writer.probe()
        finally:
            writer.abort()

    with pytest.raises(DiskError):  # at create (a local disk), at the probe (a node)
        probe_a_file()

    def store_one() -> None:
        writer = broken_disk.create("tmp/x.part")
        writer.write(b"x")
        writer.commit()

    with pytest.raises(DiskError):  # at create (a local disk), by commit at the latest (a node)
        store_one()
    with pytest.raises(DiskError):
        broken_disk.open(NAME)


def test_walk_lists_every_file_in_name_order(disk: Disk) -> None:
    names = sorted(blob_path(key_of(bytes([i]))) for i in range(5))
    for i, name in enumerate(names):
        store(disk, name, bytes([i]) * (i + 1), tmp=f"tmp/w{i}.part")
    quarantined = names[2] + ".deleted.1700000000"
    disk.publish(names[2], quarantined)
    writer = disk.create("tmp/pending.part")
    writer.write(b"half")
    writer.commit()
    listed = list(disk.walk())
    expected = sorted([*names[:2], quarantined, *names[3:], "tmp/pending.part"])
    assert [e.name for e in listed] == expected
    sizes = {e.name: e.size for e in listed}
    assert sizes[names[0]] == 1
    assert sizes["tmp/pending.part"] == 4
    assert all(e.mtime > 0 for e in listed)


def test_walk_resumes_after_a_name(disk: Disk) -> None:
    names = sorted(blob_path(key_of(bytes([i]))) for i in range(6))
    for i, name in enumerate(names):
        store(disk, name, b"x", tmp=f"tmp/w{i}.part")
    assert [e.name for e in disk.walk(names[2])] == names[3:]
    assert [e.name for e in disk.walk(names[-1])] == []


def test_walk_of_a_disk_whose_root_is_gone_fails(disk: Disk, tmp_path: Path) -> None:
    store(disk, NAME, DATA)
    shutil.rmtree(tmp_path / "disk")
    with pytest.raises(DiskError):
        list(disk.walk())


def test_walk_skips_the_nodes_own_dot_names_at_the_root(disk: Disk, tmp_path: Path) -> None:
    """A storage host keeps its own files beside the blobs (nginx's temporary bodies, the
    free-space report): names at the root that begin with a dot are not the disk's files."""
    (tmp_path / "disk" / ".nginx-body").mkdir(exist_ok=True)
    (tmp_path / "disk" / ".nginx-body" / "0000000001").write_bytes(b"half a body")
    (tmp_path / "disk" / ".pochta-free").write_text('{"free": 1, "total": 2}')
    store(disk, NAME, DATA)
    assert [e.name for e in disk.walk()] == [NAME]
