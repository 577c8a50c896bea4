"""``pochta words``: stats and clear, of the installation's learned words or one account's.

A running ``pochta serve`` keeps what it learned in memory for up to
``antispam.learned_words_flush_seconds`` before writing it. A clear made here while it runs is
therefore made twice: at once, and again once every server has written what it held before
the first (twice the flush interval later), so that no increment learned before the clear
comes back with the next flush. What is learned after the first clear and before the second
(a few seconds of mail) is cleared too. While the store is down a server keeps its buffer
longer (retrying): clear again once it is back.
"""

from __future__ import annotations

import time
from typing import Annotated

import typer

from pochta.antispam.words import INSTALLATION, Words
from pochta.app import Pochta
from pochta.cli.common import ConfigOpt, DataOpt, JsonOpt, emit, handles_errors, opened, out
from pochta.errors import ConfigError, UserNotFound
from pochta.mailbox.service import shown

app = typer.Typer(
    help="Learned words: stats, clear (the installation's or one account's).",
    no_args_is_help=True,
)

UserOpt = Annotated[
    str | None,
    typer.Option("--user", help="this account's own words instead of the installation's"),
]


def _words(pochta: Pochta) -> Words:
    words = pochta.scanner.words
    if words is None:
        raise ConfigError(
            "no learned words here: antispam.learn_words is off, or there is no model"
        )
    return words


def _owner(pochta: Pochta, email: str | None) -> int:
    if email is None:
        return INSTALLATION
    user = pochta.mailbox.user(email)
    if user is None:
        raise UserNotFound(f"no user {shown(email)}")
    return user.id


def forget_twice(words: Words, owner: int, wait: bool = True) -> None:
    """Drop what ``owner`` learned, and again once a running server has flushed what it
    held (see the module's doc)."""
    drop = words.clear if owner == INSTALLATION else lambda: words.forget(owner)
    drop()
    if wait:
        time.sleep(2 * words.flush_interval)
        drop()


@app.command()
@handles_errors
def stats(
    user: UserOpt = None,
    data: DataOpt = None,
    config: ConfigOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """What the installation (or --user's account) learned: letters taught, words kept."""
    with opened(data, config) as pochta:
        words = _words(pochta)
        owner = _owner(pochta, user)
        st = words.stats(owner)
        personal = pochta.scanner.personal
        counts = (
            personal is not None
            and owner != INSTALLATION
            and personal.rule.ready((st.learned_spam, st.learned_ham))
        )
        limit = words.max_words if owner == INSTALLATION else words.max_words_per_owner
    payload = {
        "owner": user or "installation",
        "words": st.words,
        "words_max": limit,
        "learned_spam": st.learned_spam,
        "learned_ham": st.learned_ham,
    }
    if owner != INSTALLATION:
        payload["counts_in_verdicts"] = counts

    def human() -> None:
        out.print(f"{payload['owner']}: {st.words} words kept (at most {limit})")
        out.print(f"letters learned: {st.learned_spam} spam, {st.learned_ham} not spam (weighted)")
        if owner != INSTALLATION:
            out.print(
                "its words count in its verdicts"
                if counts
                else "its words do not count yet (too few letters of each kind)"
            )

    emit(json_output, payload, human)


@app.command()
@handles_errors
def clear(
    user: UserOpt = None,
    no_wait: Annotated[
        bool,
        typer.Option("--no-wait", help="clear once, without waiting for a running server's buffer"),
    ] = False,
    data: DataOpt = None,
    config: ConfigOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Forget every learned word of the installation (or of --user's account); the shipped
    model's words stay. Made twice, a few seconds apart, for a running server's buffer."""
    with opened(data, config) as pochta:
        words = _words(pochta)
        owner = _owner(pochta, user)
        forget_twice(words, owner, wait=not no_wait)
    who = user or "the installation"
    emit(
        json_output,
        {"owner": user or "installation", "cleared": True},
        lambda: out.print(f"learned words of {who} cleared"),
    )
