"""What a worker sends back of a letter a user gives (pochta.mailbox.intake.spill): its big
parts as private files, not bytes, and a delivery from those files is byte for byte."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.mailtools import letter, payload

from pochta.app import Pochta, build
from pochta.config import load_settings
from pochta.mailbox.intake import spill
from pochta.mailbox.prepare import prepare


@pytest.fixture
def pochta(tmp_path: Path) -> Iterator[Pochta]:
    p = build(
        load_settings(data_dir=tmp_path / "data", antispam={"enabled": False, "pool_processes": 0})
    )
    yield p
    p.close()


def test_parts_past_the_threshold_go_to_files_and_are_stored_from_them(
    pochta: Pochta, tmp_path: Path
) -> None:
    raw = letter(
        subject="three files",
        attachments=[(f"{n}.bin", payload(n, 300_000)) for n in range(3)],
    )
    prepared = prepare(raw, inline_limit=4096)
    assert len(prepared.split.parts) == 3
    spool = tmp_path / "spool" / "abc.parts"  # made by the first part written
    light, files = spill(prepared, spool, over=400_000)
    assert sorted(files) == [1, 2]  # the first fits within 400,000 bytes, the others do not
    for part, before in zip(light.split.parts, prepared.split.parts, strict=True):
        assert (part.key, part.size, part.crc32) == (before.key, before.size, before.crc32)
        if part.index in files:
            assert part.content == b""
            assert files[part.index].read_bytes() == before.content
            assert files[part.index].stat().st_mode & 0o777 == 0o600
            assert files[part.index].parent == spool
        else:
            assert part.content == before.content
    assert spool.stat().st_mode & 0o777 == 0o700
    user = pochta.mailbox.add_user("alice@example.org", "correct horse battery")
    done = pochta.mailbox.deliver_prepared(light, [user], folder="Inbox", files=files)
    assert pochta.mailbox.raw(user.id, done.ids[0]) == raw
    assert done.uploaded == 3


def test_nothing_is_left_behind_when_a_part_cannot_be_written(tmp_path: Path) -> None:
    raw = letter(attachments=[("a.bin", payload(1, 50_000)), ("b.bin", payload(2, 50_000))])
    prepared = prepare(raw, inline_limit=4096)
    spool = tmp_path / "spool"
    spool.mkdir()
    (spool / "1.part").write_bytes(b"in the way")  # the second part's name is taken
    with pytest.raises(FileExistsError):
        spill(prepared, spool, over=0)
    assert sorted(p.name for p in spool.iterdir()) == ["1.part"]
