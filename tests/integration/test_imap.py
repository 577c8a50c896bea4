"""IMAP against a real `pochta serve`, with imaplib and imapclient as clients: what they read
is byte for byte what was delivered over SMTP, and what they change (flags, moves, deletions)
is what the HTTP API sees."""

from __future__ import annotations

import hashlib
import imaplib
import re
import shutil
import smtplib
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from imapclient import IMAPClient

from pochta.antispam.shingles.extract import extract
from pochta.app import build
from pochta.config import load_settings
from pochta.mime.letter import parse
from tests.integration.conftest import Server, eventually, start_server
from tests.integration.test_smtp import PASSWORD, add_users, count, session, strip_trace
from tests.mailtools import letter, payload

pytestmark = pytest.mark.integration

ALICE, BOB = "alice@example.org", "bob@example.org"


USERS = [f"user{n}@example.org" for n in range(12)]


def make_users(data: Path, *emails: str) -> None:
    """A data directory with these users, made in this process (one start-up, not one
    ``pochta user add`` per user)."""
    add_users(data)  # pochta init
    pochta = build(load_settings(data_dir=data, antispam={"pool_processes": 0}))
    try:
        for email in emails:
            pochta.mailbox.add_user(email, PASSWORD)
    finally:
        pochta.close()


def serve(tmp_path: Path) -> Server:
    return start_server(
        tmp_path / "data",
        tmp_path / "serve.log",
        settings={
            "POCHTA_IMAP__IDLE_POLL_SECONDS": "0.2",
            "POCHTA_SHINGLES__FLUSH_INTERVAL": "0.2",
            "POCHTA_ANTISPAM__POOL_PROCESSES": "1",
        },
    )


@pytest.fixture(scope="module")
def mx(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server for the module; each test reads and writes the mailboxes of its own users."""
    where = tmp_path_factory.mktemp("imap")
    make_users(where / "data", ALICE, BOB, *USERS)
    srv = serve(where)
    yield srv
    if srv.proc.poll() is None:
        srv.stop()


_free = iter(USERS)


@pytest.fixture
def alice() -> str:
    return next(_free)


@pytest.fixture
def bob() -> str:
    return next(_free)


def send(server: Server, raw: bytes, *rcpts: str) -> None:
    """Send, and return once every recipient has the letter (with ``smtp.answer = "queued"``
    it is stored a moment after its 250)."""
    before = {r: count(server, r) for r in rcpts}
    with smtplib.SMTP("127.0.0.1", server.smtp_port) as s:
        refused = s.sendmail("sender@example.net", list(rcpts), raw)
    for r in rcpts:
        if r not in refused:
            eventually(lambda r=r: count(server, r), lambda n, r=r: n > before[r], what=r)


def wait_for(check: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def imap(server: Server, email: str) -> imaplib.IMAP4:
    c = imaplib.IMAP4("127.0.0.1", server.imap_port)
    c.login(email, PASSWORD)
    return c


def folder_of(c: imaplib.IMAP4) -> str:
    """Where the letter went (the verdict decides): the folder with a letter in it."""
    for name in ("INBOX", "Spam"):
        typ, data = c.status(name, "(MESSAGES)")
        if typ == "OK" and b"MESSAGES 0" not in data[0]:
            return name
    raise AssertionError("no letter anywhere")


def http_raw(server: Server, email: str) -> bytes:
    auth = session(server, email)
    for folder in ("Inbox", "Spam"):
        page = httpx.get(f"{server.url}/v1/messages?folder={folder}", headers=auth).json()
        for m in page["messages"]:
            return httpx.get(f"{server.url}/v1/messages/{m['id']}/raw", headers=auth).content
    raise AssertionError("no letter")


def test_imaplib_reads_whole_and_partial_bodies_byte_exact(mx: Server, alice: str) -> None:
    sent = letter(to=alice, attachments=[("data.bin", payload(1, 300_000))])
    send(mx, sent, alice)
    stored = http_raw(mx, alice)
    assert strip_trace(stored) == sent
    c = imap(mx, alice)
    typ, listed = c.list()
    assert typ == "OK"
    assert b'(\\HasNoChildren) "/" INBOX' in listed
    assert b'(\\HasNoChildren \\Junk) "/" "Spam"' in listed
    typ, data = c.select(folder_of(c))
    assert (typ, data) == ("OK", [b"1"])
    typ, data = c.fetch("1", "(RFC822.SIZE FLAGS BODY.PEEK[])")
    assert typ == "OK"
    head, body = data[0]  # type: ignore[misc]
    assert body == stored
    assert b"RFC822.SIZE %d" % len(stored) in head and b"FLAGS ()" in head
    for start, length in [(0, 100), (1000, 5000), (len(stored) - 10, 100), (len(stored) + 5, 10)]:
        typ, data = c.fetch("1", f"(BODY.PEEK[]<{start}.{length}>)")
        assert data[0][1] == stored[start : start + length]  # type: ignore[index]
    header_end = stored.index(b"\r\n\r\n") + 4
    typ, data = c.fetch("1", "(BODY.PEEK[HEADER] BODY.PEEK[TEXT])")
    assert data[0][1] == stored[:header_end]  # type: ignore[index]
    assert data[1][1] == stored[header_end:]  # type: ignore[index]
    typ, data = c.fetch("1", "(BODY.PEEK[2])")  # the attachment part, base64 as delivered
    part = data[0][1]  # type: ignore[index]
    assert len(part) > 400_000 and part in stored
    typ, data = c.fetch("1", "(FLAGS)")
    assert b"\\Seen" not in data[0]  # type: ignore[operator]
    c.fetch("1", "(BODY[TEXT]<0.10>)")  # not a peek: the letter is read now
    typ, data = c.fetch("1", "(FLAGS)")
    assert b"\\Seen" in data[0]  # type: ignore[operator]
    c.logout()


def test_imapclient_lists_searches_and_keeps_flags(mx: Server, alice: str) -> None:
    send(mx, letter(to=alice, subject="Quarterly report"), alice)
    send(mx, letter(to=alice, subject="Lunch on Friday", text="Shall we meet at noon?\n"), alice)
    with IMAPClient("127.0.0.1", port=mx.imap_port, ssl=False) as c:
        c.login(alice, PASSWORD)
        names = [name for _, _, name in c.list_folders()]
        assert names == ["INBOX", "Spam"]
        status = {n: c.folder_status(n, ["MESSAGES"])[b"MESSAGES"] for n in names}
        assert sum(status.values()) == 2
        folder = max(status, key=lambda n: status[n])
        info = c.select_folder(folder)
        assert info[b"UIDVALIDITY"] > 0
        uids = c.search("ALL")
        if len(uids) < 2:
            pytest.skip("the verdicts split the letters between folders")
        assert c.search(["SUBJECT", "lunch"]) == [uids[1]]
        assert c.search(["BODY", "noon"]) == [uids[1]]
        assert c.search(["FROM", "sender@example.net"]) == uids
        assert c.search(["SINCE", "1-Jan-2020", "LARGER", 100]) == uids
        assert c.search(["UID", f"{uids[1]}:*"]) == [uids[1]]
        assert c.search(["UNSEEN"]) == uids
        c.add_flags([uids[0]], [b"\\Flagged", b"\\Answered"])
        assert c.search(["FLAGGED"]) == [uids[0]]
        assert c.search(["NOT", "FLAGGED"]) == [uids[1]]
        fetched = c.fetch(uids, ["FLAGS", "ENVELOPE", "BODYSTRUCTURE", "INTERNALDATE"])
        assert set(fetched[uids[0]][b"FLAGS"]) == {b"\\Flagged", b"\\Answered"}
        assert fetched[uids[1]][b"ENVELOPE"].subject == b"Lunch on Friday"
        assert fetched[uids[1]][b"BODYSTRUCTURE"][0].lower() == b"text"
        c.remove_flags([uids[0]], [b"\\Answered"])
    # the HTTP API sees the flag set over IMAP
    auth = session(mx, alice)
    folder_name = "Inbox" if folder == "INBOX" else folder
    page = httpx.get(f"{mx.url}/v1/messages?folder={folder_name}", headers=auth).json()
    flagged = [m["subject"] for m in page["messages"] if m["flagged"]]
    assert flagged == ["Quarterly report"]


def subject_counts(server: Server, stored: bytes) -> dict[str, int]:
    (shingle,) = [s for s in extract(parse(stored)) if int(s.type) == 8]
    r = httpx.post(
        f"{server.url}/v1/shingles/query",
        json={"windows": ["24h"], "shingles": [{"type": 8, "hash": f"{shingle.hash:016x}"}]},
        headers=server.auth,
    )
    r.raise_for_status()
    counts: dict[str, int] = r.json()["shingles"][0]["counters"]["24h"]
    return counts


def test_a_move_to_spam_and_back_is_the_feedback_of_the_http_api(mx: Server, alice: str) -> None:
    send(mx, letter(to=alice, subject="Cheap watches for everyone"), alice)
    stored = http_raw(mx, alice)
    before = subject_counts(mx, stored)
    c = imap(mx, alice)
    source = folder_of(c)
    target = "Spam" if source == "INBOX" else "INBOX"
    c.select(source)
    typ, data = c.uid("MOVE", "1", target)
    assert typ == "OK"
    assert c.select(source)[1] == [b"0"]
    c.select(target)
    typ, data = c.uid("FETCH", "1:*", "(UID BODY.PEEK[])")
    assert data[0][1] == stored  # type: ignore[index]
    kind = "complaint" if target == "Spam" else "unspam"
    wait_for(lambda: subject_counts(mx, stored)[kind] == before[kind] + 1)
    c.copy("1", source)  # a copy is a new letter with its own UID; no feedback
    c.select(source)
    typ, data = c.fetch("1", "(BODY.PEEK[] UID)")
    assert data[0][1] == stored  # type: ignore[index]
    c.logout()


def test_expunge_is_the_journaled_deletion_and_the_attachment_counter_drops(
    mx: Server, alice: str, bob: str
) -> None:
    attachment = payload(7, 50_000)
    key = hashlib.sha256(attachment).hexdigest()
    send(mx, letter(to=alice, attachments=[("a.bin", attachment)]), alice, bob)

    def counter() -> int:
        r = httpx.get(f"{mx.url}/v1/blobs/{key}/stat", headers=mx.auth)
        return int(r.json()["counter"]) if r.status_code == 200 else 0

    assert counter() == 2
    c = imap(mx, alice)
    c.select(folder_of(c))
    c.store("1", "+FLAGS.SILENT", "(\\Deleted)")
    typ, data = c.expunge()
    assert (typ, data) == ("OK", [b"1"])
    wait_for(lambda: counter() == 1)  # Bob's copy keeps it
    assert c.select("INBOX")[1] == [b"0"] or c.select("Spam")[1] == [b"0"]
    c.logout()


def test_idle_sees_a_new_delivery(mx: Server, alice: str) -> None:
    """Two sessions idle, one in INBOX and one in Spam (the verdict decides where the letter
    goes): one of them hears of it, without a command."""
    clients = [IMAPClient("127.0.0.1", port=mx.imap_port, ssl=False) for _ in range(2)]
    try:
        for c, folder in zip(clients, ["INBOX", "Spam"], strict=True):
            c.login(alice, PASSWORD)
            c.select_folder(folder)
            c.idle()
        send(mx, letter(subject="Hello there", to=alice), alice)
        heard: list[int] = []
        deadline = time.monotonic() + 20
        while not heard and time.monotonic() < deadline:
            for n, c in enumerate(clients):
                if any(r[1] == b"EXISTS" for r in c.idle_check(timeout=0.2)):
                    heard.append(n)
        for c in clients:
            c.idle_done()
        assert len(heard) == 1
        assert clients[heard[0]].search("ALL") == [1]
    finally:
        for c in clients:
            c.logout()


def test_uidvalidity_and_uids_stay_across_a_restart(tmp_path: Path) -> None:
    make_users(tmp_path / "data", ALICE)
    mx = serve(tmp_path)
    try:
        for n in range(3):
            send(mx, letter(subject=f"letter {n}"), ALICE)
        c = imap(mx, ALICE)
        folder = folder_of(c)
        c.select(folder)
        validity = c.response("UIDVALIDITY")[1]
        uids = c.uid("SEARCH", "ALL")[1][0].split()  # type: ignore[union-attr]
        c.uid("STORE", uids[1], "+FLAGS", "(\\Deleted)")
        c.expunge()
        c.logout()
    finally:
        mx.stop()
    again = start_server(mx.data, tmp_path / "serve2.log", imap_port=mx.imap_port)
    try:
        send(again, letter(subject="after the restart"), ALICE)
        c = imap(again, ALICE)
        c.select(folder)
        assert c.response("UIDVALIDITY")[1] == validity
        got = c.uid("SEARCH", "ALL")[1][0].split()  # type: ignore[union-attr]
        assert got[:2] == [uids[0], uids[2]]
        assert got[2:] in ([], [b"%d" % (int(uids[2]) + 1)])  # the expunged UID is never reused
        c.logout()
    finally:
        again.stop()


def test_login_limits_and_bad_passwords(mx: Server, alice: str) -> None:
    c = imaplib.IMAP4("127.0.0.1", mx.imap_port)
    with pytest.raises(imaplib.IMAP4.error, match="AUTHENTICATIONFAILED"):
        c.login(alice, "wrong password")
    typ, _ = c.authenticate("PLAIN", lambda _: f"\0{alice}\0{PASSWORD}".encode())
    assert typ == "OK"
    c.logout()


def test_a_literal_over_the_limit_is_refused_before_it_is_read(mx: Server, alice: str) -> None:
    """Before the login: BYE for any literal past a few KB, no "+" first. After it: a letter
    over APPENDLIMIT gets NO before the "+", or BYE when it comes anyway (LITERAL+)."""
    with socket.create_connection(("127.0.0.1", mx.imap_port)) as s:
        f = s.makefile("rwb")
        assert f.readline().startswith(b"* OK")
        f.write(b"a LOGIN {5000}\r\n")
        f.flush()
        assert f.readline().startswith(b"* BYE [TOOBIG] before the login")
        assert f.readline() == b""  # closed
    with socket.create_connection(("127.0.0.1", mx.imap_port)) as s:
        f = s.makefile("rwb")
        f.readline()
        f.write(b'l LOGIN %s "%s"\r\n' % (alice.encode(), PASSWORD.encode()))
        f.flush()
        assert f.readline().startswith(b"l OK")
        f.write(b"a APPEND INBOX {99999999999}\r\n")
        f.flush()
        assert f.readline().startswith(b"a NO [TOOBIG] a letter of 99999999999 bytes")
        f.write(b"b APPEND INBOX {99999999999+}\r\n")
        f.flush()
        assert f.readline().startswith(b"* BYE [TOOBIG]")
        assert f.readline() == b""  # closed


def vm_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field}")


def test_big_literals_before_the_login_are_never_read(mx: Server, alice: str) -> None:
    """The issue's attack, smaller: 4 connections each send a LOGIN with LITERAL+ literals of
    40 MB. Each is told BYE at once and cut off after a few MB at most; the server's peak
    resident set hardly moves (on main it read them all: 3.9 GB for 8 literals each), and a
    client that logged in before reads its mail meanwhile."""
    reader = imap(mx, alice)
    send(mx, letter(to=alice, subject="read during the attack"), alice)  # 250: stored
    reader.select(folder_of(reader))
    Path(f"/proc/{mx.proc.pid}/clear_refs").write_text("5")  # VmHWM := VmRSS now
    before = vm_kb(mx.proc.pid, "VmHWM")
    sent: list[int] = []
    answers: list[bytes] = []

    def attacker() -> None:
        s = socket.create_connection(("127.0.0.1", mx.imap_port), 30, ("127.0.0.2", 0))
        f = s.makefile("rb")
        f.readline()
        block, done = b"x" * (1 << 20), 0
        try:
            s.sendall(b"a LOGIN {40000000+}\r\n")
            for i in range(2):
                for _ in range(38):
                    s.sendall(block)
                    done += len(block)
                s.sendall(b"x" * (40_000_000 - 38 * len(block)))
                s.sendall(b" {40000000+}\r\n" if i == 0 else b"\r\n")
        except OSError:
            pass
        sent.append(done)
        try:
            answers.append(f.readline())
        except OSError as exc:
            answers.append(repr(exc).encode())
        s.close()

    threads = [threading.Thread(target=attacker) for _ in range(4)]
    for t in threads:
        t.start()
    typ, data = reader.fetch("1", "(BODY.PEEK[HEADER.FIELDS (SUBJECT)])")
    assert typ == "OK" and b"read during the attack" in data[0][1]  # type: ignore[index]
    for t in threads:
        t.join(60)
    reader.logout()
    grown = vm_kb(mx.proc.pid, "VmHWM") - before
    assert all(a.startswith(b"* BYE [TOOBIG]") for a in answers), answers
    assert max(sent) <= 16 << 20, sent  # the server stopped reading, and lingered briefly
    assert grown < 30 << 10, f"the server grew by {grown} KB"


def test_a_big_append_is_spooled_and_stored_from_its_file(mx: Server, alice: str) -> None:
    """An APPEND of a 3 MB letter goes to a file under <data_dir>/spool while it comes, is
    parsed by a worker process from that file, stored byte for byte, and the file is gone."""
    raw = letter(to=alice, subject="spooled append", attachments=[("a.bin", payload(9, 2 << 20))])
    spool = mx.data / "spool"
    with socket.create_connection(("127.0.0.1", mx.imap_port)) as s:
        f = s.makefile("rwb")
        f.readline()
        f.write(b'l LOGIN %s "%s"\r\n' % (alice.encode(), PASSWORD.encode()))
        f.flush()
        assert f.readline().startswith(b"l OK")
        f.write(b"a APPEND INBOX {%d+}\r\n" % len(raw) + raw[: 2 << 20])
        f.flush()
        wait_for(lambda: any(p.stat().st_size > 1 << 20 for p in spool.glob("*.letter")))
        f.write(raw[2 << 20 :] + b"\r\n")
        f.flush()
        answer = f.readline()
        assert answer.startswith(b"a OK [APPENDUID"), answer
    assert list(spool.glob("*.letter")) == []
    c = imap(mx, alice)
    c.select("INBOX")
    _, data = c.uid("FETCH", answer.split()[4].rstrip(b"]").decode(), "(BODY.PEEK[])")
    assert data[0][1] == raw  # type: ignore[index]
    c.logout()


MBSYNCRC = """\
IMAPAccount pochta
Host 127.0.0.1
Port {port}
User {user}
Pass "{password}"
SSLType None
AuthMechs LOGIN

IMAPStore far
Account pochta

MaildirStore near
Path {maildir}/
Inbox {maildir}/INBOX
SubFolders Verbatim

Channel box
Far :far:
Near :near:
Patterns *
Create Near
Expunge Both
SyncState {state}/
"""


def undo_mbsync(data: bytes) -> bytes:
    """The letter mbsync was given: its one X-TUID header out, CRLF line ends back."""
    data, count = re.subn(rb"(?m)^X-TUID: [^\n]*\n", b"", data, count=1)
    assert count == 1
    return data.replace(b"\n", b"\r\n")


@pytest.mark.skipif(shutil.which("mbsync") is None, reason="mbsync (Debian isync) is not here")
def test_mbsync_pulls_every_letter_byte_exact_and_converges(
    mx: Server, alice: str, tmp_path: Path
) -> None:
    sent = [
        letter(to=alice, subject=f"letter {n}", attachments=[("a.bin", payload(n, 20_000))])
        for n in range(4)
    ]
    for raw in sent:
        send(mx, raw, alice)
    maildir, state = tmp_path / "mail", tmp_path / "state"
    state.mkdir()
    maildir.mkdir()
    rc = tmp_path / "mbsyncrc"
    rc.write_text(
        MBSYNCRC.format(
            port=mx.imap_port, user=alice, password=PASSWORD, maildir=maildir, state=state
        )
    )

    def sync() -> dict[str, bytes]:
        done = subprocess.run(
            ["mbsync", "-c", str(rc), "-a"], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        return {
            str(p.relative_to(maildir)): p.read_bytes()
            for p in maildir.glob("*/*/*")
            if p.parent.name in ("cur", "new")
        }

    files = sync()
    assert len(files) == len(sent)
    assert sorted(strip_trace(undo_mbsync(f)) for f in files.values()) == sorted(sent)
    c = imap(mx, alice)
    folder = folder_of(c)
    c.select(folder)
    uids = c.uid("SEARCH", "ALL")[1][0].split()  # type: ignore[union-attr]
    c.uid("STORE", uids[0].decode(), "+FLAGS", "(\\Flagged)")
    c.uid("STORE", uids[1].decode(), "+FLAGS", "(\\Deleted)")
    c.expunge()
    files = sync()
    assert len(files) == len(sent) - 1
    first = uids[0].decode()
    flagged = [name for name in files if re.search(rf",U={first}:2,[A-Z]*F", name)]
    assert len(flagged) == 1
    assert not [name for name in files if f",U={uids[1].decode()}:" in name]
    assert sync() == files  # converged: a third sync changes nothing
    assert (
        sorted(undo_mbsync(f) for f in files.values())
        == sorted(
            c.uid("FETCH", u.decode(), "(BODY.PEEK[])")[1][0][1]  # type: ignore[index]
            for u in [uids[0], *uids[2:]]
        )
    )
    c.logout()
