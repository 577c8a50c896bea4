"""SMTP and LMTP listeners (aiosmtpd): the edge only translates.

RCPT: an unknown local recipient gets 550 at once. DATA: the letter (with a Received header
prepended) is parsed, analyzed and split in a worker process (``mailbox.intake``), then stored
by ``Mailbox.deliver_prepared`` in a thread; 250 comes only after the delivery is durable.
Over the size limit: 552 (aiosmtpd refuses it while reading). A storage failure, or workers
too busy to take the letter, is temporary (451: the client keeps the letter and retries); a
letter pochta cannot accept is refused for good (554). LMTP answers once per accepted
recipient.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from datetime import UTC, datetime
from typing import Any

from aiosmtpd.lmtp import LMTP
from aiosmtpd.smtp import SMTP, Envelope, Session

from pochta.config import SmtpSettings
from pochta.errors import ConfigError, InvalidInput, PochtaError, StorageError, TooLarge
from pochta.mailbox.intake import Intake
from pochta.mailbox.service import Delivered, Mailbox
from pochta.mailbox.trace import line_ending, received
from pochta.types import Envelope as MailEnvelope
from pochta.types import User

log = logging.getLogger("pochta.smtp")


class DeliveryHandler:
    def __init__(self, mailbox: Mailbox, intake: Intake, hostname: str, lmtp: bool) -> None:
        self.mailbox = mailbox
        self.intake = intake
        self.hostname = hostname
        self.lmtp = lmtp

    async def handle_RCPT(
        self,
        server: SMTP,
        session: Session,
        envelope: Envelope,
        address: str,
        rcpt_options: list[str],
    ) -> str:
        user = await asyncio.to_thread(self.mailbox.user, address)
        if user is None:
            return f"550 5.1.1 <{address}>: no such user here"
        envelope.rcpt_tos.append(address)
        envelope.rcpt_options.extend(rcpt_options)
        return "250 2.1.5 OK"

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        raw = envelope.original_content or b""
        users: list[User] = []
        for address in envelope.rcpt_tos:
            user = await asyncio.to_thread(self.mailbox.user, address)
            if user is not None:
                users.append(user)
        queue_id = secrets.token_hex(6)
        if self.lmtp:
            protocol = "LMTP"
        elif "SMTPUTF8" in envelope.mail_options:
            protocol = "UTF8SMTP"
        else:
            protocol = "ESMTP" if session.extended_smtp else "SMTP"
        peer: Any = session.peer
        trace = received(
            helo=session.host_name or "",
            ip=str(peer[0]) if isinstance(peer, tuple) else "unix",
            hostname=self.hostname,
            protocol=protocol,
            queue_id=queue_id,
            recipient=envelope.rcpt_tos[0] if len(envelope.rcpt_tos) == 1 else None,
            when=datetime.now(UTC),
            eol=line_ending(raw),
        )
        envelope_ = MailEnvelope(
            ip=str(peer[0]) if isinstance(peer, tuple) else None,
            sender=envelope.mail_from or "",
            recipients=tuple(envelope.rcpt_tos),
        )
        status = await self._deliver(trace + raw, users, queue_id, envelope_, session.host_name)
        if self.lmtp:
            return "\r\n".join(status for _ in envelope.rcpt_tos)
        return status

    async def _deliver(
        self,
        raw: bytes,
        users: list[User],
        queue_id: str,
        envelope: MailEnvelope,
        helo: str | None,
    ) -> str:
        if not users:
            return "554 5.1.1 no valid recipients"
        try:
            prepared = await self.intake.prepare(
                raw,
                envelope,
                helo,
                analyze=self.mailbox.scores,
                shingles=self.mailbox.counts_shingles,
            )
            done = await asyncio.to_thread(self.mailbox.deliver_prepared, prepared, users)
        except TooLarge as exc:
            return f"552 5.3.4 {exc.message}"
        except InvalidInput as exc:
            return f"554 5.6.0 {exc.message}"
        except StorageError as exc:
            log.warning("delivery %s deferred: %s", queue_id, exc.message)
            return "451 4.3.0 storage is unavailable; try again later"
        except PochtaError as exc:
            log.warning("delivery %s failed: %s", queue_id, exc.message)
            return "451 4.3.0 temporary failure; try again later"
        except Exception:
            log.exception("delivery %s failed", queue_id)
            return "451 4.3.0 temporary failure; try again later"
        log.info(
            "delivered %s: %d bytes to %d recipient(s), letters %s, verdict %s",
            queue_id,
            done.size,
            len(users),
            ",".join(map(str, done.ids)),
            _verdict(done),
        )
        return f"250 2.0.0 OK queued as {queue_id}"


def _verdict(done: Delivered) -> str:
    """The verdict for the log: its label, and the analysis stages the budget cut if any."""
    v = done.verdict
    if v is None:
        return "-"
    return f"{v.label} (partial: {','.join(v.partial)})" if v.partial else v.label


def protocol_factory(mailbox: Mailbox, settings: SmtpSettings, *, lmtp: bool) -> type[SMTP]:
    """An aiosmtpd protocol class with pochta's limits (line length is a class attribute)."""
    base: type[SMTP] = LMTP if lmtp else SMTP
    return type(
        "PochtaLMTP" if lmtp else "PochtaSMTP",
        (base,),
        {"line_length_limit": settings.line_length_limit},
    )


async def start(mailbox: Mailbox, intake: Intake, settings: SmtpSettings) -> list[asyncio.Server]:
    """Start the SMTP (and LMTP) listeners on the running loop; the caller closes them."""
    loop = asyncio.get_running_loop()
    hostname = settings.fqdn()
    servers = []
    listeners = [(settings.port, False)]
    if settings.lmtp_port:
        listeners.append((settings.lmtp_port, True))
    for port, lmtp in listeners:
        cls = protocol_factory(mailbox, settings, lmtp=lmtp)
        handler = DeliveryHandler(mailbox, intake, hostname, lmtp)

        def factory(cls: type[SMTP] = cls, handler: DeliveryHandler = handler) -> SMTP:
            return cls(
                handler,
                data_size_limit=settings.max_message_size,
                enable_SMTPUTF8=True,
                decode_data=False,
                hostname=hostname,
                ident="pochta",
                loop=loop,
            )

        try:
            servers.append(await loop.create_server(factory, settings.host, port))
        except OSError as exc:
            for server in servers:
                server.close()
            what = "LMTP" if lmtp else "SMTP"
            raise ConfigError(f"cannot listen for {what} on {settings.host}:{port}: {exc}") from exc
    return servers
