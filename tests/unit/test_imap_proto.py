"""IMAP without I/O: sequence sets, folder changes, sections, ENVELOPE, BODYSTRUCTURE and
SEARCH keys, on letters built here."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pymap.parsing.specials.sequenceset import SequenceSet

from pochta.mime import ranges
from pochta.mime.split import split
from pochta.mime.tree import scan
from pochta.server import imapfetch, imapproto
from pochta.server.imapproto import Simple, Unparsed, changes, parse, resolve
from pochta.server.imapsearch import Facts, matches, needs_text
from pochta.types import FolderEntry, LetterFlag

FORWARD = (
    b"From: Ann <ann@example.org>\r\n"
    b"To: bob@example.org, Carl <carl@example.org>\r\n"
    b"Subject: =?utf-8?q?Fwd=3A_=D0=BF=D1=80=D0=B8=D0=B2=D0=B5=D1=82?=\r\n"
    b"Date: Mon, 23 Nov 2026 10:00:00 +0000\r\n"
    b"Message-ID: <1@example.org>\r\n"
    b'Content-Type: multipart/mixed; boundary="b1"\r\n'
    b"\r\n"
    b"--b1\r\n"
    b"Content-Type: text/plain; charset=utf-8\r\n"
    b"\r\n"
    b"see below\r\nsecond line\r\n"
    b"--b1\r\n"
    b"Content-Type: message/rfc822\r\n"
    b"\r\n"
    b"From: Dan <dan@example.net>\r\n"
    b"Subject: the original\r\n"
    b"\r\n"
    b"inner text\r\n"
    b"--b1\r\n"
    b"Content-Type: application/octet-stream\r\n"
    b'Content-Disposition: attachment; filename="x.bin"\r\n'
    b"Content-Transfer-Encoding: base64\r\n"
    b"\r\n"
    b"AAECAwQFBgcICQ==\r\n"
    b"--b1--\r\n"
)


def seqset(text: str, uid: bool = False) -> SequenceSet:
    cmd = parse(f"a {'UID ' if uid else ''}FETCH {text} FLAGS\r\n".encode())
    assert not isinstance(cmd, Simple)
    return cmd.sequence_set  # type: ignore[attr-defined, no-any-return]


@settings(max_examples=200, deadline=None)
@given(
    uids=st.lists(st.integers(1, 60), unique=True, max_size=30).map(sorted),
    elems=st.lists(
        st.tuples(st.integers(1, 70) | st.just("*"), st.integers(1, 70) | st.just("*")),
        min_size=1,
        max_size=5,
    ),
    by_uid=st.booleans(),
)
def test_resolve_names_what_rfc_3501_says(
    uids: list[int], elems: list[tuple[int | str, int | str]], by_uid: bool
) -> None:
    text = ",".join(f"{a}:{b}" for a, b in elems)
    got = resolve(seqset(text, by_uid), uids, max_ranges=100)
    top = (uids[-1] if by_uid else len(uids)) if uids else 0
    want: set[int] = set()
    for a, b in elems:
        lo, hi = sorted(top if x == "*" else int(x) for x in (a, b))
        for pos, uid in enumerate(uids):
            if lo <= (uid if by_uid else pos + 1) <= hi:
                want.add(pos)
    assert got == sorted(want)


def test_resolve_refuses_too_many_ranges() -> None:
    with pytest.raises(imapproto.TooManyRanges):
        resolve(seqset(",".join(str(n) for n in range(1, 20))), [1, 2], max_ranges=10)


def test_changes_tell_expunges_flags_and_new_letters() -> None:
    old = [FolderEntry(u, u * 10, LetterFlag.NONE) for u in (1, 2, 3, 4)]
    new = [
        FolderEntry(1, 10, LetterFlag.NONE),
        FolderEntry(3, 30, LetterFlag.SEEN),
        FolderEntry(7, 70, LetterFlag.NONE),
    ]
    assert changes(old, new) == [
        b"* 4 EXPUNGE\r\n",
        b"* 2 EXPUNGE\r\n",
        b"* 2 FETCH (UID 3 FLAGS (\\Seen))\r\n",
        b"* 3 EXISTS\r\n",
    ]
    assert changes(new, new) == []


def test_parse_reads_what_pymap_does_not() -> None:
    assert parse(b"t1 UNSELECT\r\n") == Simple(b"t1", b"UNSELECT")
    assert parse(b"t2 namespace\r\n") == Simple(b"t2", b"NAMESPACE")
    with pytest.raises(Unparsed) as caught:
        parse(b"t3 FETCH x (FLAGS)\r\n")
    assert caught.value.tag == b"t3"


def test_strings_are_quoted_or_literals() -> None:
    assert imapproto.string(b'say "hi"') == b'"say \\"hi\\""'
    assert imapproto.string(b"two\r\nlines") == b"{10}\r\ntwo\r\nlines"
    assert imapproto.nstring(None) == b"NIL"
    assert imapproto.folder_name("Inbox") == b"INBOX"
    assert imapproto.folder_name("Почта") == b'"&BB8EPgRHBEIEMA-"'


def stored(raw: bytes) -> ranges.Layout:
    return ranges.layout(split(raw, inline_limit=4).skeleton)


def test_sections_name_the_bytes_of_rfc_3501() -> None:
    lay = stored(FORWARD)
    root = ranges.tree(lay)
    assert root == scan(FORWARD)

    def text(parts: list[int], spec: bytes | None = None) -> bytes:
        s = imapfetch.section(root, len(FORWARD), parts, spec)
        return FORWARD[s.start : s.end]

    assert text([]) == FORWARD
    assert text([], b"HEADER").endswith(b'boundary="b1"\r\n\r\n')
    assert text([1]) == b"see below\r\nsecond line"
    assert text([1], b"MIME") == b"Content-Type: text/plain; charset=utf-8\r\n\r\n"
    assert text([2], b"HEADER") == b"From: Dan <dan@example.net>\r\nSubject: the original\r\n\r\n"
    assert text([2], b"TEXT") == b"inner text"
    assert text([2, 1]) == b"inner text"
    assert text([3]) == b"AAECAwQFBgcICQ=="
    assert text([4]) == b"" and text([1, 1]) == b""
    single = b"Subject: x\r\n\r\nbody\r\n"
    assert imapfetch.section(scan(single), len(single), [1], None) == imapfetch.Section(14, 20)


def test_header_fields_keep_the_named_fields_and_the_blank_line() -> None:
    header = b"From: a\r\nTo: b\r\n c\r\nSubject: s\r\n\r\n"
    assert imapfetch.filter_fields(header, frozenset({b"to", b"subject"}), False) == (
        b"To: b\r\n c\r\nSubject: s\r\n\r\n"
    )
    assert imapfetch.filter_fields(header, frozenset({b"to"}), True) == (
        b"From: a\r\nSubject: s\r\n\r\n"
    )


def test_envelope_and_bodystructure() -> None:
    root = scan(FORWARD)
    header = FORWARD[: root.body_start]
    assert imapfetch.envelope(header) == (
        b'("Mon, 23 Nov 2026 10:00:00 +0000" "=?utf-8?q?Fwd=3A_=D0=BF=D1=80=D0=B8=D0=B2=D0=B5=D1'
        b'=82?=" (("Ann" NIL "ann" "example.org")) (("Ann" NIL "ann" "example.org")) (("Ann"'
        b' NIL "ann" "example.org")) ((NIL NIL "bob" "example.org")("Carl" NIL "carl"'
        b' "example.org")) NIL NIL NIL "<1@example.org>")'
    )

    def read(a: int, b: int) -> bytes:
        return FORWARD[a:b]

    def lines(a: int, b: int) -> int:
        return FORWARD[a:b].count(b"\n")

    body = imapfetch.bodystructure(root, read, lines, extended=False)
    assert body.startswith(b'(("TEXT" "PLAIN" ("CHARSET" "utf-8") NIL NIL "7BIT" 22 1)')
    assert b'("MESSAGE" "RFC822" NIL NIL NIL "7BIT" 64 (NIL "the original"' in body
    assert body.endswith(b'("APPLICATION" "OCTET-STREAM" NIL NIL NIL "BASE64" 16) "MIXED")')
    extended = imapfetch.bodystructure(root, read, lines)
    assert b'("attachment" ("FILENAME" "x.bin"))' in extended
    assert extended.endswith(b'"MIXED" ("BOUNDARY" "b1") NIL NIL NIL)')


def search_keys(text: str) -> list:  # type: ignore[type-arg]
    cmd = parse(f"a SEARCH {text}\r\n".encode())
    return list(cmd.keys)  # type: ignore[union-attr]


def facts(flags: LetterFlag = LetterFlag.NONE, seq: int = 1) -> Facts:
    return Facts(
        seq=seq,
        uid=seq * 10,
        flags=flags,
        size=len(FORWARD),
        received=1_790_000_000.0,  # 21-Sep-2026
        sent=1_795_428_000.0,  # 23-Nov-2026
        uids=[10, 20, 30],
        read_header=lambda: FORWARD[: FORWARD.index(b"\r\n\r\n") + 4],
        read_text=lambda: "see below\ninner text",
    )


@pytest.mark.parametrize(
    ("keys", "flags", "found"),
    [
        ("ALL", LetterFlag.NONE, True),
        ("SEEN", LetterFlag.SEEN, True),
        ("UNSEEN", LetterFlag.SEEN, False),
        ("NOT DELETED FLAGGED", LetterFlag.FLAGGED, True),
        ("OR DRAFT ANSWERED", LetterFlag.ANSWERED, True),
        ("NEW", LetterFlag.NONE, False),
        ("FROM ann@example.org", LetterFlag.NONE, True),
        ("TO carl", LetterFlag.NONE, True),
        ("CC carl", LetterFlag.NONE, False),
        ('SUBJECT "fwd: привет"', LetterFlag.NONE, False),  # no CHARSET: bytes are ASCII only
        ("CHARSET UTF-8 SUBJECT {17+}\r\nfwd: привет", LetterFlag.NONE, True),
        ("HEADER Message-ID <1@example.org>", LetterFlag.NONE, True),
        ("BODY INNER", LetterFlag.NONE, True),
        ("TEXT ann@example", LetterFlag.NONE, True),
        ("SINCE 21-Sep-2026 BEFORE 22-Sep-2026", LetterFlag.NONE, True),
        ("ON 20-Sep-2026", LetterFlag.NONE, False),
        ("SENTON 23-Nov-2026", LetterFlag.NONE, True),
        ("SENTBEFORE 23-Nov-2026", LetterFlag.NONE, False),
        (f"LARGER {len(FORWARD) - 1} SMALLER {len(FORWARD) + 1}", LetterFlag.NONE, True),
        ("UID 10:15", LetterFlag.NONE, True),
        ("UID 11:*", LetterFlag.NONE, False),
        ("1", LetterFlag.NONE, True),
        ("(2:3 SEEN) KEYWORD $Junk", LetterFlag.NONE, False),
        # the keywords pochta keeps ($Junk, $NotJunk: the owner's word) are searched as kept
        ("KEYWORD $Junk", LetterFlag.JUNK, True),
        ("KEYWORD $junk", LetterFlag.JUNK, True),  # flag names are case-insensitive
        ("KEYWORD $Junk", LetterFlag.NOT_JUNK, False),
        ("UNKEYWORD $Junk", LetterFlag.JUNK, False),
        ("UNKEYWORD $Junk", LetterFlag.NONE, True),
        ("KEYWORD $NotJunk", LetterFlag.NOT_JUNK, True),
        ("NOT KEYWORD $NotJunk", LetterFlag.NOT_JUNK, False),
        ("KEYWORD Work", LetterFlag.JUNK, False),  # others are not kept: nothing has them
        ("UNKEYWORD Work", LetterFlag.JUNK, True),
    ],
)
def test_search_keys(keys: str, flags: LetterFlag, found: bool) -> None:
    try:
        parsed = search_keys(keys)
    except Unparsed:
        assert not found
        return
    assert matches(parsed, facts(flags)) is found


def test_only_body_and_text_read_the_text() -> None:
    assert needs_text(search_keys("OR SEEN (NOT BODY x)"))
    assert not needs_text(search_keys("OR SEEN (NOT FROM x)"))


def test_a_fetch_response_is_one_piece_but_around_a_big_body() -> None:
    names = [b"UID", b"FLAGS", b"RFC822.SIZE", b"BODY[]"]
    small = [None, None, b"RFC822.SIZE 3", b"BODY[] {3}\r\nabc"]
    flags = imapproto.flags(LetterFlag.SEEN | LetterFlag.FLAGGED)
    assert imapfetch.response(7, 42, flags, names, small) == [
        b"* 7 FETCH (UID 42 FLAGS (\\Seen \\Flagged) RFC822.SIZE 3 BODY[] {3}\r\nabc)\r\n"
    ]
    blocks = iter([b"ab", b"c"])
    big = [None, None, b"RFC822.SIZE 3", (b"BODY[] ", 3, blocks)]
    assert imapfetch.response(7, 42, b"()", names, big) == [
        b"* 7 FETCH (UID 42 FLAGS () RFC822.SIZE 3 BODY[] {3}\r\n",
        blocks,
        b")\r\n",
    ]
