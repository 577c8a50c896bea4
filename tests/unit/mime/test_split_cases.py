"""Hand-written letters, well-formed and malformed: each round-trips byte for byte, with the
parts it should give extracted and the rest kept inline."""

from __future__ import annotations

import base64
import hashlib
import random
import time
import zlib
from collections.abc import Callable
from email import quoprimime

import pytest
from tests.unit.mime.mimegen import roundtrip

from pochta.mime import split
from pochta.mime.tree import MAX_DEPTH, MAX_ENTITIES

PDF = random.Random(1).randbytes(10_000)
PNG = random.Random(2).randbytes(4_000)
LF, CRLF = b"\n", b"\r\n"


def b64(data: bytes, width: int = 76, eol: bytes = LF) -> bytes:
    text = base64.b64encode(data)
    return eol.join(text[i : i + width] for i in range(0, len(text), width))


def part(headers: list[str], body: bytes, eol: bytes = LF) -> bytes:
    return eol.join(h.encode() for h in headers) + eol + eol + body


def attachment(
    body: bytes, *, eol: bytes = LF, name: str = "report.pdf", cte: str = "base64"
) -> bytes:
    return part(
        [
            f'Content-Type: application/pdf; name="{name}"',
            f"Content-Transfer-Encoding: {cte}",
            f'Content-Disposition: attachment; filename="{name}"',
        ],
        body,
        eol,
    )


TEXT = part(["Content-Type: text/plain; charset=utf-8"], b"Hello,\nthe report is attached.\n")


def letter(
    *parts: bytes,
    eol: bytes = LF,
    boundary: bytes = b"==b0undary==",
    preamble: bytes = b"",
    epilogue: bytes = b"",
    close: bool = True,
    end: bytes | None = None,
) -> bytes:
    head = eol.join(
        [
            b"From: Alice <alice@example.org>",
            b"To: bob@example.net",
            b"Subject: report",
            b"MIME-Version: 1.0",
            b'Content-Type: multipart/mixed; boundary="' + boundary + b'"',
        ]
    )
    delimiter = eol + b"--" + boundary + eol
    # parts are written with LF; a CRLF letter gets them converted
    body = preamble + b"".join(
        delimiter + (p.replace(LF, CRLF) if eol == CRLF else p) for p in parts
    )
    if close:
        body += eol + b"--" + boundary + b"--" + (eol if end is None else end) + epilogue
    return head + eol + eol + body


def check(raw: bytes, *expected: bytes, inline_limit: int = 4096) -> None:
    """raw round-trips, and exactly ``expected`` (decoded contents) are extracted, in order."""
    back, result = roundtrip(raw, inline_limit)
    assert back == raw
    assert [p.content for p in result.parts] == list(expected)
    for p in result.parts:
        assert p.key == hashlib.sha256(p.content).hexdigest()
        assert (p.size, p.crc32) == (len(p.content), zlib.crc32(p.content))


# -- line endings, widths, the shape of the letter ---------------------------------------------


@pytest.mark.parametrize("eol", [LF, CRLF], ids=["LF", "CRLF"])
@pytest.mark.parametrize("width", [76, 72, 64, 60, 57, 4, 1000])
def test_base64_of_any_regular_width_and_line_ending_is_extracted(eol: bytes, width: int) -> None:
    raw = letter(TEXT, attachment(b64(PDF, width)), eol=eol)
    check(raw, PDF)
    result = split(raw)
    assert len(result.skeleton) < len(raw) - 13_000
    assert result.parts[0].filename == "report.pdf"
    assert result.parts[0].content_type == "application/pdf"


def test_last_line_shorter_is_regular_but_longer_or_uneven_lines_stay_inline() -> None:
    lines = b64(PDF).split(LF)
    assert len(lines[-1]) < 76
    check(letter(attachment(LF.join(lines))), PDF)
    longer = LF.join([*lines[:-2], lines[-2] + lines[-1]])  # last line longer than the rest
    check(letter(attachment(longer)))
    uneven = LF.join([*lines[:5], lines[5][:40], lines[5][40:], *lines[6:]])
    check(letter(attachment(uneven)))


def test_mixed_line_endings_in_base64_stay_inline() -> None:
    lines = b64(PDF).split(LF)
    mixed = LF.join(lines[:10]) + CRLF + LF.join(lines[10:])
    check(letter(attachment(mixed)))


def test_blank_lines_after_base64_are_kept_verbatim() -> None:
    check(letter(attachment(b64(PDF) + b"\n\n\n")), PDF)
    check(letter(attachment(b64(PDF) + b"\n  \t\n")), PDF)


def test_trailing_whitespace_on_base64_lines_stays_inline() -> None:
    body = b64(PDF).replace(LF, b" \n")
    check(letter(attachment(body)))


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda b: b[:100] + b"*" + b[101:], id="character outside the alphabet"),
        pytest.param(lambda b: b[:-1], id="padding cut off"),
        pytest.param(lambda b: b + b"=", id="extra padding"),
        pytest.param(lambda b: b[:-2] + b"B=", id="non-zero padding bits"),
        pytest.param(lambda b: b[:200] + b"====" + b[200:], id="padding in the middle"),
        pytest.param(lambda b: b + b"\nthis is not base64", id="trailing text"),
    ],
)
def test_broken_base64_stays_inline(damage: Callable[[bytes], bytes]) -> None:
    body = b64(PDF[:-2])  # 9998 bytes: the last group is padded with one "="
    assert body.endswith(b"=") and not body.endswith(b"==")
    check(letter(TEXT, attachment(body)), PDF[:-2])
    check(letter(TEXT, attachment(damage(body))))


def test_preamble_and_epilogue() -> None:
    raw = letter(
        TEXT,
        attachment(b64(PDF)),
        preamble=b"This is a multi-part message in MIME format.\n",
        epilogue=b"\nepilogue, ignored by readers\n\n",
    )
    check(raw, PDF)


@pytest.mark.parametrize("eol", [LF, CRLF], ids=["LF", "CRLF"])
def test_missing_close_delimiter(eol: bytes) -> None:
    raw = letter(TEXT, attachment(b64(PDF)), eol=eol, close=False)
    check(raw, PDF)
    check(raw + eol, PDF)  # the base64 part then ends in a line break, kept as its tail
    check(raw + eol + eol, PDF)


def test_no_newline_at_end_of_file() -> None:
    raw = letter(TEXT, attachment(b64(PDF)), end=b"")
    assert raw.endswith(b"--")
    check(raw, PDF)
    check(letter(TEXT, attachment(b64(PDF)), close=False), PDF)


def test_delimiters_with_trailing_blanks_are_delimiters() -> None:
    raw = letter(TEXT, attachment(b64(PDF)))
    raw = raw.replace(b"--==b0undary==\n", b"--==b0undary==  \t\n")
    check(raw, PDF)


def test_a_body_that_only_mentions_the_boundary_is_not_split() -> None:
    text = part(["Content-Type: text/plain"], b"see --==b0undary== and\n --==b0undary==\n")
    check(letter(text, attachment(b64(PDF))), PDF)


def test_wrong_or_missing_boundary_keeps_the_letter_whole() -> None:
    raw = letter(TEXT, attachment(b64(PDF)))
    check(raw.replace(b'boundary="==b0undary=="', b'boundary="other"'))
    check(raw.replace(b'; boundary="==b0undary=="', b""))


def test_single_part_letter_with_a_binary_body() -> None:
    raw = b"From: a@example.org\nContent-Type: image/png\nContent-Transfer-Encoding: base64\n\n"
    check(raw + b64(PNG) + b"\n", PNG)
    check(raw + b64(PNG), PNG)
    check(raw + b64(PNG)[:-1])  # truncated


# -- what is extracted ----------------------------------------------------------------------


def test_inline_limit_applies_to_non_text_leaves_without_a_name() -> None:
    image = part(["Content-Type: image/png", "Content-Transfer-Encoding: base64"], b64(PNG))
    raw = letter(TEXT, image)
    check(raw, PNG)  # 5.4 KB of base64 > 4096
    check(raw, inline_limit=6000)
    big_text = part(["Content-Type: text/plain", "Content-Transfer-Encoding: base64"], b64(PDF))
    check(letter(big_text))  # text stays inline, however large


def test_attachments_are_extracted_whatever_their_size_and_type() -> None:
    small = part(
        ["Content-Type: text/plain", 'Content-Disposition: attachment; filename="a.txt"'],
        b"tiny",
    )
    named = part(['Content-Type: text/csv; name="t.csv"'], b"a,b\n1,2")
    check(letter(TEXT, small, named), b"tiny", b"a,b\n1,2")


def test_empty_attachment_stays_inline() -> None:
    check(letter(attachment(b"")))


@pytest.mark.parametrize("cte", ["binary", "8bit", "7bit"])
def test_identity_encodings_are_extracted_as_they_are(cte: str) -> None:
    data = b"\x00\x01binary\x00with NULs\r\nand \xff bytes" * 10
    check(letter(attachment(data, cte=cte)), data)


def test_quoted_printable_from_the_standard_library_is_extracted() -> None:
    data = ("Строка с пробелом в конце \nand a long line " + "x" * 200 + "\n").encode()
    body = quoprimime.body_encode(data.decode("latin-1"), 76, "\n").encode("latin-1")
    check(letter(attachment(body, cte="quoted-printable")), data)


def test_quoted_printable_from_other_encoders_stays_inline() -> None:
    body = b"soft breaks=\nat odd places=\n=41=42=43 and =3D\n"  # "ABC" encoded needlessly
    check(letter(attachment(body, cte="quoted-printable")))


def test_unknown_transfer_encodings_stay_inline() -> None:
    check(letter(attachment(b"begin 644 a.pdf\nM86)C\n`\nend\n", cte="x-uuencode")))


def test_same_attachment_twice_gives_two_parts_with_one_key() -> None:
    _, result = roundtrip(letter(attachment(b64(PDF)), attachment(b64(PDF, 64))))
    assert [p.index for p in result.parts] == [0, 1]
    assert result.parts[0].key == result.parts[1].key


def test_nested_multiparts_and_forwarded_letters() -> None:
    related = (
        b'Content-Type: multipart/related; boundary="rel"\n\n--rel\n'
        + part(["Content-Type: text/html"], b"<img src=cid:x>")
        + b"\n--rel\n"
        + part(["Content-Type: image/png", "Content-Transfer-Encoding: base64"], b64(PNG))
        + b"\n--rel--\n"
    )
    alternative = (
        b'Content-Type: multipart/alternative; boundary="alt"\n\n--alt\n'
        + TEXT
        + b"\n--alt\n"
        + related
        + b"\n--alt--"
    )
    forwarded = part(
        ["Content-Type: message/rfc822"],
        b"From: c@example.com\nSubject: fwd\n" + letter(attachment(b64(PDF)), boundary=b"inner"),
    )
    check(letter(alternative, forwarded), PNG, PDF, inline_limit=1000)


def test_nesting_beyond_the_limit_stays_inline() -> None:
    def nest(depth: int) -> bytes:
        inner = attachment(b64(PDF))
        for level in range(depth):
            b = f"level{level}".encode()
            inner = (
                b'Content-Type: multipart/mixed; boundary="' + b + b'"\n\n--' + b + b"\n" + inner
            )
            inner += b"\n--" + b + b"--\n"
        return b"From: a@example.org\n" + inner

    check(nest(5), PDF)
    check(nest(MAX_DEPTH - 1), PDF)
    check(nest(MAX_DEPTH))
    started = time.process_time()  # CPU: holds on a loaded machine
    check(nest(2000))  # far deeper than Python's recursion limit
    assert time.process_time() - started < 5


def test_very_many_parts_are_bounded() -> None:
    raw = letter(*[attachment(b"%d" % i, cte="7bit") for i in range(20_000)])
    started = time.process_time()  # CPU, not wall time: the test holds on a loaded machine
    back, result = roundtrip(raw)
    assert back == raw
    assert len(result.parts) == MAX_ENTITIES - 1  # the letter itself is the first entity
    assert result.parts[-1].content == b"%d" % (MAX_ENTITIES - 2)
    assert time.process_time() - started < 5


# -- malformed letters ----------------------------------------------------------------------


def test_eight_bit_and_nul_bytes_in_headers() -> None:
    pdf = (
        'Content-Type: application/pdf; name="отчёт.pdf"\n'.encode()
        + b"Content-Transfer-Encoding: base64\nX-Nul: a\x00b\xff\n\n"
        + b64(PDF)
    )
    raw = letter(TEXT, pdf).replace(b"Subject: report", b"Subject: \xff\xfe\x00 raw bytes")
    check(raw, PDF)
    assert split(raw).parts[0].filename == "отчёт.pdf"


def test_file_names_rfc2231_and_encoded_words_are_decoded() -> None:
    rfc2231 = part(
        [
            "Content-Type: application/pdf",
            "Content-Transfer-Encoding: base64",
            "Content-Disposition: attachment;",
            " filename*0*=utf-8''%D0%BE%D1%82%D1%87;",
            " filename*1*=%D1%91%D1%82.pdf",
        ],
        b64(PDF),
    )
    word = part(
        [
            'Content-Type: application/pdf; name="=?koi8-r?B?z9Teo9Qu?= 2.pdf"',
            "Content-Transfer-Encoding: base64",
        ],
        b64(PNG),
    )
    raw_utf8 = part(
        ["Content-Type: image/png", "Content-Transfer-Encoding: base64"],
        b64(PNG),
    ).replace(b"image/png", 'image/png; name="фото.png"'.encode())
    _, result = roundtrip(letter(rfc2231, word, raw_utf8))
    assert [p.filename for p in result.parts] == ["отчёт.pdf", "отчёт. 2.pdf", "фото.png"]


def test_truncated_letters_round_trip() -> None:
    raw = letter(TEXT, attachment(b64(PDF)), attachment(b64(PNG), name="b.png"))
    for cut in [0, 1, 10, 150, 400, len(raw) // 3, len(raw) // 2, len(raw) - 30, len(raw) - 1]:
        back, _ = roundtrip(raw[:cut])
        assert back == raw[:cut]
    # cut inside the second attachment: the first is whole and still extracted
    check(raw[: raw.index(b"b.png") + 500], PDF)


def test_one_megabyte_header_line() -> None:
    long = b"X-Long: " + b"a" * 2**20 + b"\n"
    raw = letter(TEXT, attachment(b64(PDF)))
    started = time.process_time()  # CPU: holds on a loaded machine
    check(long + raw, PDF)
    huge_type = b"Content-Type: application/pdf; name=" + b"x; " * 400_000
    check(letter(part([], b64(PDF)).replace(b"\n\n", huge_type + b"\n\n", 1)))
    assert time.process_time() - started < 5


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"\n",
        b"\r\n\r\n",
        b"no headers at all, just text",
        b"From nobody\n",
        b"Content-Type: multipart/mixed; boundary=x\n\n--x",
        b"Content-Type: multipart/mixed; boundary=x\n\n--x--",
        b"Content-Type: multipart/mixed; boundary=\n\n--\n",
        b"Content-Type: application/pdf\nContent-Disposition: attachment\n",
        bytes(range(256)) * 4,
    ],
)
def test_odd_inputs_round_trip(raw: bytes) -> None:
    back, result = roundtrip(raw, inline_limit=0)
    assert back == raw
    assert result.skeleton.endswith(raw) or result.parts
