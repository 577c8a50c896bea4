"""IMAP's way in: STARTTLS, LOGIN and AUTHENTICATE PLAIN, commands of a session
(:class:`pochta.server.imapstate.SessionState`).

No password is taken in clear text off the networks allowed for it (``SessionState.may_login``);
the password is checked by the login sequence every door shares
(:class:`pochta.server.passwords.PasswordSlots`: admitted first, under the HTTP API's limits,
then checked in a slot), and every failure counts as the session's error. Split out of
``pochta.server.imap`` by issue 31.
"""

from __future__ import annotations

import base64
import binascii
import functools
import logging

from pochta.errors import InvalidCredentials, RateLimited, ResetRequired
from pochta.server.imapproto import bad, no
from pochta.server.imapread import Bye
from pochta.server.imapstate import SessionState
from pochta.server.imapwire import CHUNK, READ_AHEAD, LineTooLong

log = logging.getLogger("pochta.imap")


async def starttls(s: SessionState, tag: bytes) -> None:
    if s.server.tls is None:
        raise bad("STARTTLS is not offered here")
    if s.tls or s.user is not None:
        raise bad("TLS is on already" if s.tls else "STARTTLS comes before the login")
    context = s.server.tls()
    s.tagged(tag, b"OK", "begin TLS negotiation now")
    await s.wire.drain()
    await s.wire.start_tls(context, s.limits.login_timeout)
    s.tls = True


async def login(s: SessionState, tag: bytes, userid: bytes, password: bytes) -> None:
    _check_login_allowed(s)
    await _verify(s, tag, userid, password)
    _logged_in(s)


async def authenticate(s: SessionState, tag: bytes, mechanism: bytes) -> None:
    _check_login_allowed(s)
    if mechanism.upper() != b"PLAIN":
        raise no(f"[CANNOT] AUTHENTICATE {mechanism.decode('ascii', 'replace')} is not offered")
    s.send(b"+ \r\n")
    await s.wire.drain()
    bound = min(s.limits.login_command, s.limits.line_length)
    try:
        line = await s.wire.readline(bound)
    except LineTooLong:  # a response of a login process's size at most, as the command
        raise Bye(f"[TOOBIG] an AUTHENTICATE response longer than {bound} bytes") from None
    userid, password = plain(line)
    await _verify(s, tag, userid, password)
    _logged_in(s)


def plain(line: bytes) -> tuple[bytes, bytes]:
    """AUTHENTICATE PLAIN's response line: (user, password); BAD when it is cancelled (``*``)
    or is not base64 of ``[authzid] NUL user NUL password`` (an authzid other than the
    user)."""
    if line.strip() == b"*":
        raise bad("AUTHENTICATE cancelled")
    try:
        decoded = base64.b64decode(line.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise bad("AUTHENTICATE PLAIN wants base64") from None
    fields = decoded.split(b"\0")
    if len(fields) != 3 or (fields[0] and fields[0] != fields[1]):
        raise bad("AUTHENTICATE PLAIN wants [authzid] NUL user NUL password")
    return fields[1], fields[2]


def _check_login_allowed(s: SessionState) -> None:
    if s.user is not None:
        raise bad("logged in already")
    if not s.may_login():
        s.error()
        if s.server.tls is not None:
            raise no("[PRIVACYREQUIRED] log in over TLS (STARTTLS first)")
        raise no(
            "[PRIVACYREQUIRED] no password is taken in clear text from your address, and"
            " this server offers no TLS"
        )


def _logged_in(s: SessionState) -> None:
    """After a login: the connection may read ahead as much as a user's commands need."""
    if s.user is not None:
        s.wire.bound(READ_AHEAD, CHUNK)


async def _verify(s: SessionState, tag: bytes, userid: bytes, password: bytes) -> None:
    try:
        email, secret = userid.decode("utf-8"), password.decode("utf-8")
    except UnicodeDecodeError:
        s.error()
        raise no("[AUTHENTICATIONFAILED] wrong e-mail or password") from None
    try:
        user = await s.server.passwords.log_in(
            s.server.run,
            functools.partial(s.store.admit, email, s.wire.peer),
            functools.partial(s.store.login, password=secret),
        )
    except InvalidCredentials:
        s.error()
        raise no("[AUTHENTICATIONFAILED] wrong e-mail or password") from None
    except ResetRequired as exc:
        s.error()
        raise no(f"[EXPIRED] {exc.message}") from None
    except RateLimited as exc:
        s.error()
        raise no(
            "[UNAVAILABLE] too many login attempts;"
            f" try again in {max(1, int(exc.retry_after + 0.999))} s"
        ) from None
    s.user = user
    log.info("IMAP login of user %d from %s", user.id, s.wire.peer)
    s.tagged(tag, b"OK", b"[CAPABILITY %s] logged in" % s.server.capabilities(s))
