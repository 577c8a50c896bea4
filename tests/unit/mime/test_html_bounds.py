"""The HTML reader's bounds: deep nesting is cut where Blink's parser stops nesting, ordinary
markup is never cut, and the cut is linear."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from tests.cputime import cpu

from pochta.mime import html


def test_nesting_past_the_limit_is_cut_and_the_text_before_it_kept() -> None:
    n = 3 * html.MAX_DEPTH
    page = "<p>shown first</p>" + "<div>" * n + "deep inside" + "</div>" * n
    read = html.parse(page)
    assert read.truncated
    assert "shown first" in read.text
    assert "deep inside" not in read.text  # it lies past the cut


def test_markup_that_does_not_nest_deep_is_never_cut() -> None:
    # thousands of tags, unclosed paragraphs and list items (the parser closes them), void
    # elements, and a layout of tables nested a few deep: nothing cut, the last word read
    rows = "<tr><td><font color=red>cell</font><br><img src=x></td></tr>" * 400
    page = ("<table>" * 8 + rows + "</table>" * 8) + "<p>para" * 800 + "<ul>" + "<li>item" * 800
    page += "</ul><p>the end"
    assert page.count("<") > html.DEPTH_CHECK_TAGS
    assert html.too_deep(page) == -1
    read = html.parse(page)
    assert not read.truncated
    assert read.text.endswith("the end")


def test_the_depth_is_counted_as_the_parser_nests() -> None:
    limit = html.MAX_DEPTH
    assert html.too_deep("<div>" * limit) == -1
    assert html.too_deep("<div>" * (limit + 1)) == 5 * limit  # before the tag one too deep
    assert html.too_deep("<DIV\n class=a>" * (limit + 1)) >= 0  # names in any case, any blank
    assert html.too_deep("<div></div>" * 5 * limit) == -1
    assert html.too_deep("< div>" * 5 * limit) == -1  # not a tag: text to an HTML5 parser
    assert html.too_deep("<br/><hr><li><td><p>" * 5 * limit) == -1
    assert html.too_deep("<!-- x -->" * 5 * limit) == -1


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["<div>", "</div>", "<span a=1>", "</span>", "<p>", "<br>", "x"]),
            st.integers(1, 300),
        ),
        max_size=12,
    )
)
def test_too_deep_agrees_with_a_plain_count(runs: list[tuple[str, int]]) -> None:
    pieces = [piece for piece, times in runs for _ in range(times)]
    depth, expected, at = 0, -1, 0
    for piece in pieces:
        if piece in ("</div>", "</span>"):
            depth = max(0, depth - 1)
        elif piece in ("<div>", "<span a=1>"):
            depth += 1
            if depth > html.MAX_DEPTH and expected < 0:
                expected = at
        at += len(piece)
    assert html.too_deep("".join(pieces)) == expected


def test_nesting_costs_linear_time() -> None:
    def nested(n: int) -> str:
        return "<div>" * n + "text" + "</div>" * n

    small, big = nested(2_000), nested(20_000)  # the big one has 10 times the tags
    t_small = min(cpu(lambda: html.parse(small), 5.0) for _ in range(3))
    t_big = min(cpu(lambda: html.parse(big), 5.0) for _ in range(3))
    assert t_big <= 15 * max(t_small, 0.002), (t_small, t_big)
