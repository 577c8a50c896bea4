"""Settings: defaults < ``pochta.toml`` < ``POCHTA_*`` environment < explicit overrides.

Read once (``load_settings``), passed down as one object. Nested keys use ``__`` in the
environment: ``POCHTA_HTTP__PORT=8080`` is ``[http] port = 8080``. The file is ``pochta.toml``
in the working directory, or the path in ``POCHTA_CONFIG`` / ``--config``.
"""

from __future__ import annotations

import difflib
import logging
import os
import socket
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from pochta.errors import ConfigError
from pochta.netaddr import MAX_FORWARDERS, parse_forwarders, parse_networks, parse_server
from pochta.types import RAMP

log = logging.getLogger("pochta.config")

CHECK_SLACK = 1.0
"""Seconds past a letter's DNS lifetime that its last runs of SPF and DMARC may take (a few
milliseconds each, and the wait for a thread of the pool they run in)."""


class Section(BaseModel):
    """One ``[section]`` of the settings: a key it does not know is an error, never ignored."""

    model_config = ConfigDict(extra="forbid")


RENAMED = {"antispam.workers": "antispam.pool_processes"}
"""Settings renamed (issue 31: "worker" named four things), old name -> new name. The old
name is still read, in the settings file, the environment and overrides alike, when the new
one is not set (the new name wins), and ``log_renamed`` logs once a process that it is
deprecated. (The section's validator maps the old name, rather than pydantic's
``AliasChoices``, so that a use of the old name is seen and can be logged.)"""

_renamed_read: dict[str, None] = {}  # old names read in this process (in order)
_renamed_logged: set[str] = set()  # ... and already logged


def _renamed(section: str, data: Any) -> Any:
    """``data`` of ``[section]`` with each renamed key under its new name (before validation)."""
    if not isinstance(data, dict):
        return data
    for old_dotted, new_dotted in RENAMED.items():
        old_section, old = old_dotted.split(".", 1)
        if old_section != section or old not in data:
            continue
        new = new_dotted.split(".", 1)[1]
        value = data[old]
        data = {k: v for k, v in data.items() if k != old}
        data.setdefault(new, value)  # the new name wins, as pydantic's AliasChoices' first
        _renamed_read[old_dotted] = None
    return data


def log_renamed() -> None:
    """Log, once a process, each renamed setting that was read under its old name. Called by
    the commands once their logging is set up (``serve``'s lines may be JSON), not by
    ``load_settings``."""
    for old in _renamed_read:
        if old not in _renamed_logged:
            _renamed_logged.add(old)
            log.warning(
                "setting %s is deprecated: it is %s now (the old name is read while the new"
                " one is not set)",
                old,
                RENAMED[old],
            )


class HttpSettings(Section):
    host: str = "127.0.0.1"
    port: int = Field(8025, ge=0, le=65535)
    max_header_size: int = Field(
        16384,
        ge=1024,
        description="bytes of request line and headers; more gets 431 and the connection is closed",
    )
    parser: Literal["httptools", "h11"] = Field(
        "httptools",
        description="the HTTP/1.1 parser: httptools (llhttp, in C) or h11 (pure Python: about"
        " twice the server's CPU for parsing and writing a request); both are held to the same"
        " limits (h11 answers a header block that never ends with 400)",
    )
    max_login_body: int = Field(
        4096, ge=256, description="bytes of a POST /v1/session body; larger gets 413"
    )
    max_json_body: int = Field(
        262144,
        ge=1024,
        description="bytes of any other JSON body (a shingles update of 1,000 shingles is"
        " about 100 KB); larger gets 413",
    )
    max_json_depth: int = Field(
        32, ge=2, description="nesting of arrays and objects in a JSON body; deeper gets 400"
    )
    max_connections: int = Field(
        1000,
        ge=0,
        description="HTTP connections at once from untrusted addresses (see [connections]);"
        " more get 503 and are closed. 0: no limit. nginx's worker_connections is 512-1024",
    )
    max_connections_per_ip: int = Field(
        100,
        ge=0,
        description="HTTP connections at once from one address; more get 503. A browser opens"
        " at most 6 per host and httpx's pool holds 100, so an office behind one address and"
        " a service with a full pool get in (nginx's limit_conn has no default)",
    )
    max_connections_per_network: int = Field(
        400,
        ge=0,
        description="HTTP connections at once from one /24 (IPv4) or /64 (IPv6); more get 503",
    )
    max_connection_rate: int = Field(
        0,
        ge=0,
        description="new HTTP connections per connections.rate_period from all untrusted"
        " addresses; 0 (default): none, as a total rate limit turns a flood from many"
        " addresses into a refusal of everyone, and max_connections already bounds the load",
    )
    max_connection_rate_per_ip: int = Field(
        600,
        ge=0,
        description="new HTTP connections (attempts, refused ones included) per rate_period"
        " from one address: 10 a second, for clients without keep-alive",
    )
    max_connection_rate_per_network: int = Field(
        3000, ge=0, description="new HTTP connections per rate_period from one /24 or /64"
    )
    header_timeout: float = Field(
        60.0,
        gt=0,
        description="seconds a new connection may take to send its first request's line and"
        " headers; then it is closed (nginx's client_header_timeout): connections that send"
        " nothing would otherwise hold the connection limits for ever",
    )
    trusted_proxies: list[str] = Field(
        default_factory=lambda: ["127.0.0.1", "::1"],
        description="addresses or networks (CIDR) of reverse proxies whose X-Forwarded-For and"
        " X-Forwarded-Proto are believed: the client's address (login limits, logs) and https"
        " (Secure cookies) come from them, and their connections are not held to the"
        " max_connection* limits (every client behind one shares its address: the proxy's own"
        " limits apply). Default: a proxy on this host (uvicorn's default); [] believes no"
        " one. Never a network that strangers can send from",
    )

    @field_validator("trusted_proxies")
    @classmethod
    def _networks(cls, proxies: list[str]) -> list[str]:
        parse_networks(proxies)  # ValueError: names the value
        return proxies

    health_interval_seconds: float = Field(
        5.0,
        gt=0,
        description="how often a background check reads the pair database for /healthz, which"
        " answers from what it found and never waits for the database itself",
    )
    health_stale_seconds: float = Field(
        20.0,
        gt=0,
        description="/healthz says degraded (503) when the pair database has not answered the"
        " check for this long (a stalled PostgreSQL holds a check up to postgres.pool_timeout)",
    )


class BlobSettings(Section):
    backend: Literal["sqlite", "postgres"] = Field(
        "sqlite",
        description="where FileDB and PairDB live: sqlite = <data_dir>/filedb.sqlite3 and"
        " pairdb.sqlite3 (one machine); postgres = the [postgres] database (several loaders)",
    )
    placement_root: float = Field(
        2.0, gt=0, description="N in the placement weight free^(1/N) (seed 004)"
    )
    sync: Literal["full", "normal"] = Field(
        "full",
        description="SQLite durability of FileDB/PairDB: full = fsync at every commit"
        " (group commit shares it); normal = survives a process crash, not a power loss",
    )
    default_pair: bool = Field(
        True, description="create one pair of two directories in the data directory on first start"
    )
    free_refresh_seconds: float = Field(10.0, ge=0, description="how often free space is measured")
    max_upload_size: int = Field(
        1 << 30, gt=0, description="bytes of one PUT /v1/blobs/{key}; larger gets 413"
    )
    node_connect_timeout: float = Field(
        2.0, gt=0, description="seconds a WebDAV storage node may take to accept a connection"
    )
    node_read_timeout: float = Field(
        30.0, gt=0, description="seconds a WebDAV node may stay silent within a request"
    )
    node_pool_size: int = Field(
        16, ge=1, description="keep-alive connections kept open to each WebDAV node"
    )
    node_free_max_age: float = Field(
        300.0,
        gt=0,
        description="a WebDAV disk's free-space report older than this counts as none (the"
        " disk takes no new files until its storage host reports again)",
    )
    node_ca_file: Path | None = Field(
        None,
        description="PEM CA certificates that sign the https:// storage nodes' certificates"
        " (the installation's own CA); unset: the system's. Read once at start",
    )
    node_cert_file: Path | None = Field(
        None,
        description="PEM certificate this machine shows to https:// storage nodes, which"
        " refuse requests without one signed by their CA (nginx ssl_verify_client on); with"
        " node_key_file. Read once at start: a restart picks up a renewed one",
    )
    node_key_file: Path | None = Field(None, description="PEM private key of node_cert_file")

    @model_validator(mode="after")
    def _node_cert_and_key(self) -> BlobSettings:
        if (self.node_cert_file is None) != (self.node_key_file is None):
            raise ValueError("node_cert_file and node_key_file are set together (or neither)")
        return self


class SmtpSettings(Section):
    enabled: bool = Field(True, description="run the SMTP and LMTP listeners in `pochta serve`")
    host: str = "127.0.0.1"
    port: int = Field(2525, ge=0, le=65535, description="SMTP port")
    lmtp_port: int = Field(2424, ge=0, le=65535, description="LMTP port; 0 turns LMTP off")
    hostname: str = Field(
        "",
        description="the name in the greeting and in Received headers (default: this host's"
        " fully qualified name)",
    )
    max_message_size: int = Field(
        50 << 20, gt=0, description="bytes; larger letters get 552 (SMTP) / 413 (HTTP)"
    )
    line_length_limit: int = Field(
        1 << 20,
        ge=1001,
        description="longest line accepted in DATA, in bytes between two LFs; a letter with a"
        " longer line gets 500 once it has ended (RFC 5321 says 1000; real mail is longer,"
        " and lines up to this are stored byte-exactly)",
    )
    recipient_limit: int = Field(
        1000,
        ge=1,
        description="recipients of one letter; past it RCPT gets 452 4.5.3 and the client"
        " sends the rest in another transaction (Postfix's smtpd_recipient_limit)",
    )
    error_limit: int = Field(
        20,
        ge=1,
        description="error replies one session may get without a letter delivered; then 421"
        " and the connection is closed (Postfix's smtpd_hard_error_limit)",
    )
    command_timeout: float = Field(
        300.0,
        gt=0,
        description="seconds a client may stay silent between commands, and may take for one"
        " whole DATA transfer with its delivery; then the connection is closed",
    )
    spool_threshold: int = Field(
        1 << 20,
        ge=0,
        description="a letter being received is kept in memory up to this many bytes, beyond"
        " in a file under <data_dir>/spool (removed once it is answered)",
    )
    spool_min_free: int = Field(
        0,
        ge=0,
        description="bytes the spool's file system must keep free; below, MAIL FROM gets 452"
        " 4.3.1 (the sender keeps the letter and retries). The reserve is the larger of this"
        " and 1.5 x max_message_size: Postfix's rule (queue_minfree)",
    )
    max_connections: int = Field(
        1000,
        ge=0,
        description="SMTP connections at once from untrusted addresses (see [connections]),"
        " and as many LMTP ones; more get 421 4.3.2 before the greeting. 0: no limit",
    )
    max_connections_per_ip: int = Field(
        50,
        ge=0,
        description="SMTP (LMTP) connections at once from one address; more get 421 4.7.0"
        " before the greeting (Postfix's smtpd_client_connection_count_limit)",
    )
    max_connections_per_network: int = Field(
        200,
        ge=0,
        description="SMTP (LMTP) connections at once from one /24 (IPv4) or /64 (IPv6): a"
        " large sender's MTAs share a network; a botnet's addresses mostly do not",
    )
    max_connection_rate: int = Field(
        0,
        ge=0,
        description="new SMTP connections per connections.rate_period from all untrusted"
        " addresses; 0 (default): none, as a total rate limit turns a flood from many"
        " addresses into a refusal of everyone, and max_connections already bounds the load",
    )
    max_connection_rate_per_ip: int = Field(
        100,
        ge=0,
        description="new SMTP (LMTP) connections (attempts, refused ones included) per"
        " rate_period from one address (Postfix's smtpd_client_connection_rate_limit, off by"
        " default there): a sending MTA reuses its connections and opens far fewer",
    )
    max_connection_rate_per_network: int = Field(
        500, ge=0, description="new SMTP (LMTP) connections per rate_period from one /24 or /64"
    )
    lookup_threads: int = Field(
        8,
        ge=1,
        description="threads that look recipients up in the mailbox index (RCPT); their own, so"
        " that a stalled index holds these and nothing else",
    )
    delivery_threads: int = Field(
        16,
        ge=1,
        description="threads that store letters (index, FileDB, storage nodes); letters past"
        " them wait their turn, within command_timeout",
    )
    answer: Literal["delivered", "queued"] = Field(
        "queued",
        description='when an SMTP letter gets its 250: "delivered" once it is stored in the'
        ' mailboxes (with its verdict); "queued" once it is durable in the incoming queue under'
        " <data_dir>/queue, delivered from there right after (Postfix's queue: one connection's"
        " next letter comes while the workers judge and store the last). LMTP always answers"
        " once delivered",
    )
    queue_max_letters: int = Field(
        10_000,
        ge=1,
        description='letters the incoming queue holds at most (answer = "queued"); at the'
        " limit MAIL FROM gets 452 4.3.1 and a letter's end of DATA 451 4.3.0 (the client"
        " keeps it and retries)",
    )
    queue_max_bytes: int = Field(
        1 << 30,
        ge=1,
        description="bytes of letters the incoming queue holds at most; as queue_max_letters",
    )
    queue_deliveries: int = Field(
        8,
        ge=1,
        description="letters of the incoming queue being delivered at once (each needs a"
        " worker, then a delivery thread); the others wait in the queue",
    )
    queue_retry_seconds: float = Field(
        30.0,
        gt=0,
        description="seconds before a queued letter whose delivery failed (storage unreachable,"
        " workers busy) is tried again; doubled at each failure up to queue_retry_max_seconds"
        " (Postfix's minimal_backoff_time)",
    )
    queue_retry_max_seconds: float = Field(
        3600.0,
        gt=0,
        description="the longest wait between two tries of a queued letter (Postfix's"
        " maximal_backoff_time); a letter that got 250 is never given up",
    )
    queue_remember_days: float = Field(
        30.0,
        gt=0,
        description="days the index remembers a queued letter as delivered, so that its queue"
        " entry, left by a crash just after the delivery, is not delivered twice",
    )
    queue_stalled_seconds: float = Field(
        120.0,
        gt=0,
        description="/healthz says degraded (503) when the incoming queue's runner has made no"
        " progress (no try ended, no read of the queue) for this long while letters are due",
    )

    def fqdn(self) -> str:
        """The name pochta gives itself: ``hostname``, else this host's FQDN."""
        return self.hostname or socket.getfqdn()


class ImapSettings(Section):
    enabled: bool = Field(True, description="run the IMAP listener in `pochta serve`")
    host: str = Field("127.0.0.1", description="address of the IMAP listeners")
    port: int = Field(1143, ge=0, le=65535, description="IMAP port (STARTTLS when TLS is set up)")
    tls_port: int = Field(
        0, ge=0, le=65535, description="IMAPS port (TLS from the first byte); 0 turns it off"
    )
    line_length_limit: int = Field(
        65536,
        ge=1024,
        description="bytes of one command line, and after the login of a whole command other"
        " than APPEND's letter, literals included (Dovecot's imap_max_line_length); longer"
        " gets BYE (a literal that would pass it: NO, before it is read)",
    )
    login_command_limit: int = Field(
        4096,
        ge=512,
        description="bytes of a whole command before the login, its lines and literals"
        " together, and of an AUTHENTICATE response: a literal that would pass it is refused"
        " before it is read and the connection closed (BYE [TOOBIG]), and the connection reads"
        " no further ahead. A login needs an address and a password; Dovecot's login processes"
        " read a client through a buffer of 1 KB (LOGIN_MAX_INBUF_SIZE); 4 KB leaves room for"
        " long passwords",
    )
    big_appends_at_once: int = Field(
        1,
        ge=1,
        description="APPEND letters kept in a file (past smtp.spool_threshold, or any while"
        " memory_budget is spent) that are parsed and stored at once per server process; the"
        " others wait their turn. Such a letter costs no memory_budget, but the worker that"
        " parses it holds several times its size and its skeleton (its text) comes back to"
        " the server whole: 1, as one 50 MB letter at a time within the 64 MB budget before",
    )
    append_wait_seconds: float = Field(
        60.0,
        gt=0,
        description="seconds such an APPEND waits for its turn; then NO [UNAVAILABLE] (the"
        " client keeps the letter and tries again). A waiting APPEND whose client goes away"
        " stops waiting and is not stored",
    )
    store_threads: int = Field(
        8,
        ge=1,
        description="threads that run IMAP's reads and writes of the index, the database and"
        " the blobs, never on the event loop: a stalled database stalls only the IMAP commands"
        " waiting on it, never SMTP, HTTP or another IMAP greeting. 8 keeps IMAP within a part"
        " of postgres.pool_max",
    )
    literal_limit: int = Field(
        16, ge=1, description="literals in one command; more get NO (a LITERAL+ one, BYE)"
    )
    sequence_ranges_limit: int = Field(
        10_000, ge=1, description="ranges in one sequence set (1,3:5,...); more get BAD"
    )
    max_connections: int = Field(
        1000,
        ge=0,
        description="IMAP connections at once from untrusted addresses (see [connections]);"
        " more get BYE [UNAVAILABLE]. 0: no limit. Dovecot's default_client_limit is 1000",
    )
    max_connections_per_ip: int = Field(
        50,
        ge=0,
        description="IMAP connections at once from one address; more get BYE [UNAVAILABLE]."
        " Dovecot allows 10 per user and address (mail_max_userip_connections): 50 lets a"
        " few people behind one address each run a client or two",
    )
    max_connections_per_network: int = Field(
        200, ge=0, description="IMAP connections at once from one /24 (IPv4) or /64 (IPv6)"
    )
    max_connection_rate: int = Field(
        0,
        ge=0,
        description="new IMAP connections per connections.rate_period from all untrusted"
        " addresses; 0 (default): none, as a total rate limit turns a flood from many"
        " addresses into a refusal of everyone, and max_connections already bounds the load",
    )
    max_connection_rate_per_ip: int = Field(
        120,
        ge=0,
        description="new IMAP connections (attempts, refused ones included) per rate_period"
        " from one address: two a second, far above a client that checks mail every minute",
    )
    max_connection_rate_per_network: int = Field(
        600, ge=0, description="new IMAP connections per rate_period from one /24 or /64"
    )
    max_idle_sessions: int = Field(
        500, ge=0, description="sessions in IDLE at once; more get NO [LIMIT] (and poll instead)"
    )
    error_limit: int = Field(
        10, ge=1, description="BAD replies and failed logins one session may get; then BYE"
    )
    login_timeout: float = Field(
        60.0, gt=0, description="seconds a client may stay silent before it logs in; then BYE"
    )
    idle_timeout: float = Field(
        1800.0,
        gt=0,
        description="seconds a logged-in client may stay silent, and the longest IDLE; then BYE",
    )
    idle_poll_seconds: float = Field(
        2.0, gt=0, description="how often an IDLE session looks for new and expunged letters"
    )


class MailboxSettings(Section):
    backend: Literal["sqlite", "postgres"] = Field(
        "sqlite",
        description="where the mailbox index lives: sqlite = <data_dir>/mailbox.sqlite3;"
        " postgres = the [postgres] database (several pochta serve processes)",
    )
    inline_limit: int = Field(
        4096,
        ge=0,
        description="non-attachment leaf parts (images, binaries) larger than this many encoded"
        " bytes are stored in the blob store too; attachments always are",
    )
    session_ttl_seconds: float = Field(30 * 86400, gt=0, description="how long a login lasts")
    page_limit: int = Field(200, ge=1, description="the most letters one listing returns")
    pending_grace_seconds: float = Field(
        600.0,
        ge=0,
        description="a delivery still unfinished after this long was cut short (a crash, a"
        " failure) and is undone; longer than any delivery takes, so that another process's"
        " delivery in flight is never touched",
    )
    sender_list_max: int = Field(
        1000,
        ge=1,
        le=100_000,
        description="entries one account's sender list (allow / block) holds at most; it lives"
        " where the mailbox does (a table of mailbox.sqlite3, or the [postgres] database)",
    )


class GuardSettings(Section):
    backend: Literal["embedded", "redis"] = Field(
        "embedded",
        description="where locks and rate limits live: embedded = <data_dir>/guard.sqlite3"
        " (the processes of one host); redis = the [redis] section",
    )
    lock_ttl: float = Field(10.0, gt=0, description="lease length of pochta's own locks")
    key_secret: SecretStr | None = Field(
        None,
        description="keys the hashes that stand for IPs and e-mail addresses in rate-limit"
        " keys; unset: generated into <data_dir>/guard-secret. Changing it resets all limits",
    )
    login_ip_max: int = Field(
        50,
        ge=1,
        description="failed logins per IP per period (rolling), on accounts that do not know"
        " that IP: a guesser or sprayer behind one address runs out; correct passwords do not"
        " count, so a NAT of many users never does. An account's own addresses, networks and"
        " devices are not refused by it",
    )
    login_ip_period: float = Field(3600.0, gt=0, description="seconds")
    login_client_max: int = Field(
        10,
        ge=1,
        description="failed logins per (account, client) per period (rolling); a client is a"
        " device (web cookie or API device token), an address, or a network the account"
        " logged in from: a phone with a stale password locks out itself, nobody else",
    )
    login_client_period: float = Field(3600.0, gt=0, description="seconds")
    login_account_free: int = Field(
        10,
        ge=1,
        description="password checks per period on one account by clients it does not know"
        " that pass at once; past them those checks are spaced out by a growing delay (never"
        " refused to everyone; the account's own devices and addresses are never slowed)",
    )
    login_account_checks: int = Field(
        100,
        ge=1,
        description="password checks per period on one account by clients it does not know,"
        " at most, however many addresses guess; more than 2 * login_account_free + 5",
    )
    login_account_period: float = Field(3600.0, gt=0, description="seconds")
    login_max_wait: float = Field(
        5.0,
        ge=0,
        le=30,
        description="seconds a login slowed by login_account_* waits for its slot (the server"
        " waits asynchronously); a slot further away is refused with 429 / NO [UNAVAILABLE]"
        " and the time until it",
    )
    password_time_cost: int = Field(
        3,
        ge=1,
        le=20,
        description="argon2id passes over the memory for a new password hash (RFC 9106's"
        " second recommendation: 3 passes over 64 MiB in 4 lanes); a stored hash keeps the"
        " cost it was made with and still verifies",
    )
    password_memory_kib: int = Field(
        65536,
        ge=8,
        le=4 * 1024 * 1024,
        description="KiB of memory one argon2id hash or check takes (at least 8 x"
        " password_lanes); with password_checks_at_once, the memory a flood of logins costs",
    )
    password_lanes: int = Field(
        4, ge=1, le=64, description="argon2id lanes (parallelism) of a new password hash"
    )
    password_checks_at_once: int = Field(
        2,
        ge=1,
        description="passwords checked at the same time in one server process, IMAP, the API"
        " and the webmail together (argon2: 64 MiB and tens of ms of CPU each; 2 keeps a flood"
        " of wrong passwords within 128 MiB and 2 cores busy); the rest wait their turn, the"
        " clients an account knows before strangers",
    )
    login_known_days: float = Field(
        90.0,
        gt=0,
        description="days an address, its network (/24, /64) and a device stay known clients"
        " of an account after its last successful login from them",
    )
    login_ip_success_max: int = Field(
        1000,
        ge=1,
        description="successful logins per IP per period from addresses the accounts did not"
        " know: slows credential stuffing with a leaked list, far above what an office behind"
        " one address needs",
    )
    login_ip_success_period: float = Field(3600.0, gt=0, description="seconds")

    @model_validator(mode="after")
    def _schedule_fits(self) -> GuardSettings:
        """The account's schedule needs room past its free checks and the ramp of growing
        delays (``pochta.guard.schedule``)."""
        least = 2 * self.login_account_free + RAMP
        if self.login_account_checks <= least:
            raise ValueError(
                f"login_account_checks ({self.login_account_checks}) must exceed"
                f" 2 * login_account_free + {RAMP} ({least})"
            )
        if self.password_memory_kib < 8 * self.password_lanes:
            raise ValueError(
                f"password_memory_kib ({self.password_memory_kib}) must be at least 8 x"
                f" password_lanes ({8 * self.password_lanes}): argon2's least"
            )
        return self


class ShingleSettings(Section):
    backend: Literal["embedded", "redis"] = Field(
        "embedded",
        description="embedded: SQLite <data_dir>/shingles.sqlite3; redis: the [redis] section",
    )
    key_prefix: str = Field("sh", description="prefix of every key (one per service)")
    flush_interval: float = Field(
        1.0, gt=0, description="seconds an increment waits at most (what a crash can lose)"
    )
    shard_cells: int = Field(4096, ge=1)
    max_cells: int = Field(
        2_000_000, ge=1000, description="buffered increments at most; then updates wait"
    )
    wait_timeout: float = Field(5.0, gt=0)
    cache_size: int = Field(100_000, ge=0)
    cache_ttl: float = Field(2.0, ge=0)


def redis_address(node: str) -> tuple[str, int] | str:
    """A ``[redis] nodes`` entry as (host, port), or the path of a unix socket (``/...``).
    ValueError, naming the entry, when it is neither."""
    if node.startswith("/"):
        return node
    host, sep, port = node.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]  # [::1]:6379
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{node!r} is not host:port (nor the path of a unix socket)")
    return host, int(port)


class RedisSettings(Section):
    """``[redis]``: the Redis that guard (``guard.backend = "redis"``) and the shingle counters
    (``shingles.backend = "redis"``) use: one server, a master watched by Sentinel, or a
    Cluster. Every combination that does not fit the mode is refused, never guessed at."""

    mode: Literal["standalone", "sentinel", "cluster"] = Field(
        "standalone",
        description="standalone: one server; sentinel: the master that the sentinels in"
        " nodes name; cluster: a Redis Cluster reached through any of nodes",
    )
    nodes: list[str] = Field(
        default_factory=lambda: ["127.0.0.1:6379"],
        description="standalone: the server, host:port or a unix socket's path; sentinel:"
        " the sentinels, host:port; cluster: any of its nodes, host:port",
    )
    service: str = Field("", description="sentinel: the name the sentinels know the master by")
    db: int = Field(
        0, ge=0, description="database number (standalone and sentinel; a Cluster has only 0)"
    )
    username: str = Field("", description="ACL user (Redis 6+); empty: the default user")
    password: SecretStr | None = Field(
        None, description="password of the Redis servers (never logged); unset: none"
    )
    sentinel_password: SecretStr | None = Field(
        None, description="sentinel: the sentinels' own password, if they require one"
    )
    tls: bool = Field(False, description="TLS to every node (and to the sentinels)")
    tls_ca_file: Path | None = Field(
        None, description="CA certificates that sign the servers' certificates; unset: the system's"
    )
    timeout: float = Field(
        2.0,
        gt=0,
        description="seconds a connection attempt or a command may take: a Redis that is gone"
        " is reported (and guard's leases declared lost) this fast",
    )

    @field_validator("nodes")
    @classmethod
    def _addresses(cls, nodes: list[str]) -> list[str]:
        if not nodes:
            raise ValueError("name at least one node")
        for node in nodes:
            redis_address(node)
        return nodes

    @model_validator(mode="after")
    def _fits_mode(self) -> RedisSettings:
        addresses = self.addresses()
        if self.mode == "standalone" and len(self.nodes) != 1:
            raise ValueError(
                "nodes: standalone mode takes exactly one server; for several set mode ="
                ' "cluster" (a Redis Cluster) or "sentinel" (the sentinels)'
            )
        if self.mode != "standalone" and any(isinstance(a, str) for a in addresses):
            raise ValueError(f"nodes: a unix socket is for standalone mode only, not {self.mode}")
        if self.tls and any(isinstance(a, str) for a in addresses):
            raise ValueError("tls: not over a unix socket")
        if self.mode == "sentinel" and not self.service:
            raise ValueError("service: sentinel mode needs the master's name")
        if self.mode != "sentinel" and (self.service or self.sentinel_password is not None):
            raise ValueError(
                f"service, sentinel_password: for mode = sentinel only, not {self.mode}"
            )
        if self.mode == "cluster" and self.db:
            raise ValueError("db: a Redis Cluster has only database 0")
        if self.tls_ca_file is not None and not self.tls:
            raise ValueError("tls_ca_file: set tls = true too (or drop tls_ca_file)")
        return self

    def addresses(self) -> list[tuple[str, int] | str]:
        return [redis_address(node) for node in self.nodes]


class AntispamSettings(Section):
    enabled: bool = Field(True, description="score every letter delivered over SMTP/LMTP")
    rules_file: Path | None = Field(
        None, description="a rules file (TOML) instead of the default one shipped"
    )
    model_dir: Path | None = Field(
        None, description="model.cbm + model.json instead of the model shipped"
    )
    use_model: bool = Field(True, description="false: the rules' score alone decides")
    model_store: Literal["auto", "directory", "postgres"] = Field(
        "auto",
        description="where `pochta model train` keeps model versions and the live pointer:"
        " directory = <data_dir>/models; postgres = the [postgres] database (every machine's"
        " loaders switch together); auto = postgres when another store uses it, else directory",
    )
    model_check_seconds: float = Field(
        10.0,
        gt=0,
        le=3600,
        description="how often a loader reads the live model pointer and switches to a newly"
        " promoted (or rolled back) version; not with model_dir, which pins a model",
    )
    dns: Literal["off", "system"] = Field(
        "off",
        description="SPF/DKIM/DMARC need DNS: system = the host's resolver; off = no checks",
    )
    authserv_id: str = Field(
        "",
        description="the name in Authentication-Results (default: smtp.hostname); arriving"
        " Authentication-Results fields with it are removed (RFC 8601): the same on every loader",
    )
    dns_server: str | None = Field(
        None,
        description='with dns = "system": the one DNS server to ask, "address[:port]" (e.g.'
        ' "127.0.0.1:5353", "[::1]:53"); unset: the host\'s resolvers (/etc/resolv.conf)',
    )
    dns_timeout: float = Field(2.0, gt=0, description="seconds one DNS question may take")
    dns_lifetime: float = Field(
        7.0,
        gt=0,
        description="seconds all DNS questions of one letter (SPF, DKIM, DMARC) may take, from"
        " the end of DATA; past it the check is temperror. The server asks them while a worker"
        " reads the letter, so they never hold a worker (RFC 7208 4.6.4 suggests allowing 20 s)",
    )
    dns_cache_size: int = Field(
        10_000,
        ge=0,
        description="DNS answers the server keeps, each for its TTL (a name that does not"
        " exist: its zone's negative TTL); 0: none",
    )
    dns_max_in_flight: int = Field(
        256,
        ge=1,
        description="DNS questions out at once (one socket each); more wait for a slot within"
        " their letter's dns_lifetime, and with 4 x this many waiting a new one is temperror"
        " at once. The same question of several letters is asked once, and dropped when every"
        " letter waiting on it gave up",
    )
    dns_max_in_flight_per_zone: int = Field(
        8,
        ge=1,
        description="DNS questions out at once to names of one zone (the registrable domain:"
        " x.evil.example is evil.example's), at most half of dns_max_in_flight, so that a"
        " sender whose name servers never answer holds a few slots, not all; more wait, and"
        " with 4 x this many waiting a new one is temperror at once. Letters of one sender"
        " share their questions, so few distinct names of one zone are asked at once",
    )
    dns_down_seconds: float = Field(
        10.0,
        gt=0,
        description="when 3 questions in a row got no reply and a probe of the server got none"
        " either, SPF/DKIM/DMARC are temperror at once for this long, then the server is probed"
        " again (a sender's silent name servers alone never trip it)",
    )
    pool_processes: int | None = Field(
        None,
        ge=0,
        description="processes of the CPU pool that parse and analyze letters (default: one"
        " per core; with `serve --processes N`, cores / N each); 0: in the server process."
        " Was antispam.workers, still read under that name (deprecated)",
    )
    budget_seconds: float = Field(
        1.0,
        gt=0,
        description="analysis time one letter may take; past it the verdict comes from the"
        " checks that finished and is marked partial",
    )
    deadline_seconds: float = Field(
        10.0,
        gt=0,
        description="a worker still busy with one letter after this is stopped and replaced;"
        " the letter is then unscored (partial=timeout) and on_timeout says what it does. DNS"
        " is not part of it",
    )
    on_timeout: Literal["inbox", "spam", "defer"] = Field(
        "inbox",
        description="what a letter that could not be scored (past deadline_seconds, or its"
        " worker died) does: inbox = delivered as ham (no letter is lost or delayed for being"
        " slow); spam = delivered to Spam; defer = answered 451 4.7.1 and left to the sender to"
        " retry (Postfix's milter_default_action = tempfail: a letter that is always slow is"
        " bounced by its sender after days)",
    )
    learn_words: bool = Field(
        True,
        description="learn the words of this installation's mail (people's spam / not spam and"
        " pochta's sure verdicts) into learned_words_backend, read with the model's own",
    )
    learn_words_from_verdicts: bool = Field(
        False,
        description="also learn words from pochta's own sure verdicts, not only from people's"
        " spam / not spam (measured: more spam caught, more legitimate mail in Spam)",
    )
    learned_words_max: int = Field(
        2_000_000,
        ge=1000,
        description="words the learned table keeps (about 40 bytes each); past it the words"
        " learned longest ago are dropped",
    )
    learned_words_read_timeout: float = Field(
        0.5,
        gt=0,
        le=30,
        description="how long scoring a letter waits for a shared (PostgreSQL / Redis) learned"
        " words' store; past it the letter is scored without the learned words",
    )
    learned_words_flush_seconds: float = Field(
        2.0, gt=0, description="how often learned words are written (a crash loses at most this)"
    )
    learned_words_per_account_max: int = Field(
        50_000,
        ge=100,
        le=10_000_000,
        description="words each account's own learned table keeps; past it the words it"
        " learned longest ago are dropped",
    )
    personal_words: bool = Field(
        True,
        description="a user's own spam / not spam count in the verdicts of that user's letters"
        " (once antispam.personal_min_spam and personal_min_ham are reached)",
    )
    personal_min_spam: int = Field(
        3,
        ge=0,
        le=10_000,
        description="letters a user must have said were spam before the user's own words count",
    )
    personal_min_ham: int = Field(
        1,
        ge=0,
        le=10_000,
        description="letters a user must have said were not spam before the user's own words count",
    )
    personal_weight: int = Field(
        2,
        ge=1,
        le=100,
        description="how many times a user's own word counts are added to the installation's"
        " for that user's letters",
    )
    personal_bound: float = Field(
        1.0,
        ge=0.0,
        le=10.0,
        description="at most this many log-odds a user's own words alone add to or take from"
        " the model's verdict for that user's letters (0: only through the word statistic); in"
        " full once the user taught 3 letters of each kind, in proportion before",
    )
    learned_words_backend: Literal["auto", "sqlite", "postgres", "redis"] = Field(
        "auto",
        description="where learned words live: sqlite = <data_dir>/words.sqlite3 (this machine's"
        " own); postgres = the [postgres] database; redis = the [redis] server or Cluster"
        " (every loader the same table); auto = postgres when another store (mailbox, blobs,"
        " valkyrie) is there, else redis when guard or the shingle counters are, else sqlite",
    )
    learned_words_key: SecretStr | None = Field(
        None,
        description="keys the learned words' hashes (16+ characters; a secret): the same on"
        " every loader that shares the table; unset: generated into <data_dir>/words-key",
    )
    trusted_forwarders: list[str] = Field(
        default_factory=list,
        description="forwarding services and relays whose Received fields are trusted, as"
        " domains (a host under one counts) or IP networks: a letter that came through them"
        " is judged by the hop before them (an address-masking forwarder such as"
        " sneakemail.com writes the sender into the display name; a plain one rewrites the"
        " Return-Path). A name is matched against what the receiving server wrote (for a"
        " hop into pochta, the client's HELO): list a forwarder's networks to trust its"
        f" addresses alone. At most {MAX_FORWARDERS}",
    )

    @model_validator(mode="before")
    @classmethod
    def _old_names(cls, data: Any) -> Any:
        return _renamed("antispam", data)

    @field_validator("trusted_forwarders")
    @classmethod
    def _trusted_forwarders(cls, value: list[str]) -> list[str]:
        parse_forwarders(value)  # ValueError names the entry
        return value

    @field_validator("dns_server")
    @classmethod
    def _dns_server(cls, value: str | None) -> str | None:
        if value is not None:
            parse_server(value)  # ValueError: a clear message for the settings error
        return value


class ValkyrieSettings(Section):
    enabled: bool = Field(True, description="run Valkyrie inside pochta serve")
    backend: Literal["sqlite", "postgres"] = Field(
        "sqlite",
        description="where each disk's position and totals live: sqlite ="
        " <data_dir>/valkyrie.sqlite3; postgres = the [postgres] database",
    )
    budget_mb_per_s: float | None = Field(
        20.0, gt=0, description="disk reads per scrubber, MB/s; unset: unthrottled"
    )
    quarantine_seconds: float = Field(
        7 * 86400, ge=0, description="how long <key>.deleted.<ts> is kept"
    )
    slave_delay_seconds: float = Field(
        3600, ge=0, description="the non-master disk waits this long after a delete"
    )
    tmp_max_age_seconds: float = Field(
        86400, ge=0, description="tmp/*.part older than this is removed"
    )
    orphan_min_age_seconds: float = Field(
        3600, ge=0, description="younger unrecorded files may be uploads in flight"
    )
    pass_interval_seconds: float = Field(3600, gt=0, description="pause between passes in serve")
    checkpoint_every: int = Field(200, ge=1, description="files between two saves of the position")


class WebSettings(Section):
    enabled: bool = Field(True, description="serve the webmail (/webmail) and admin (/admin) pages")
    secret: SecretStr | None = Field(
        None,
        description="keys the pages' CSRF tokens (16+ characters); unset: generated into"
        " <data_dir>/web-secret",
    )
    page_size: int = Field(50, ge=1, le=500, description="letters per page of a folder")
    max_html_bytes: int = Field(
        1 << 20,
        ge=1024,
        description="a letter's HTML larger than this is not rendered (its text is shown)",
    )
    sample_seconds: float = Field(
        600.0, gt=0, description="how often `pochta serve` samples the store's size for /admin"
    )
    history_days: float = Field(
        90.0, gt=0, description="how long storage samples and hourly tallies are kept"
    )
    history_backend: Literal["auto", "sqlite", "postgres"] = Field(
        "auto",
        description="where the admin pages' history lives: sqlite = <data_dir>/history.sqlite3"
        " (this machine's own); postgres = the [postgres] database (every loader's events"
        " added up); auto = postgres when another store (mailbox, blobs, valkyrie) is there",
    )


class PostgresSettings(Section):
    dsn: SecretStr | None = Field(
        None,
        description="libpq connection string or URI of the database (a secret: never logged;"
        " messages name user@host:port/dbname only), e.g. postgresql://pochta:PW@db:5432/pochta",
    )
    pool_min: int = Field(1, ge=0, description="connections each process keeps open")
    pool_max: int = Field(
        10, ge=1, description="connections each process opens at most (shared by its stores)"
    )
    connect_timeout: float = Field(10.0, gt=0, description="seconds to open one connection")
    pool_timeout: float = Field(
        30.0, gt=0, description="seconds a request waits for a free connection; then 503"
    )
    statement_timeout: float = Field(
        30.0, ge=0, description="seconds one statement may run on the server; 0: no limit"
    )
    failover_timeout: float = Field(
        30.0,
        gt=0,
        description="seconds a step whose answer was lost (the server died or was demoted"
        " while it ran) is tried again, on whichever server of the dsn takes writes",
    )
    network_timeout: float = Field(
        10.0,
        ge=0,
        le=3600,
        description="seconds a connection waits for a server gone silent (its machine lost,"
        " packets dropped) before it is broken: libpq's tcp_user_timeout and keepalives,"
        " unless the dsn sets them; 0: the kernel's (minutes to hours)",
    )
    answer_timeout: float = Field(
        60.0,
        ge=0,
        le=86400,
        description="seconds one use of a pooled connection (a statement, or a transaction) may"
        " wait for the server: then the connection is shut down and dropped and the step fails"
        " as if its answer were lost (a frozen server - SIGSTOP, a paused VM - still answers"
        " TCP, so network_timeout does not find it); keep it above statement_timeout;"
        " 0: no limit",
    )
    synchronous_commit: Literal["on", "off"] = Field(
        "on",
        description="on: a step is acknowledged once its commit is on the server's disk; off:"
        " a crash of PostgreSQL may lose the last ~0.6 s of acknowledged steps (never"
        " corrupts): counts lost so can delete a file too early - keep on",
    )
    migrate_on_start: bool = Field(
        False,
        description="apply missing schema migrations when pochta starts; false: a database"
        " behind this pochta's schema stops it (run `pochta db upgrade`)",
    )
    filedb_shards: list[SecretStr] = Field(
        default_factory=list,
        description="with blobs.backend = postgres: the databases FileDB's records are spread"
        " over by key (each its own primary with its own standby; docs/sizing.md), e.g."
        ' ["postgresql://pochta:PW@fdb1/pochta", "postgresql://pochta:PW@fdb2/pochta"];'
        " every other store stays in dsn. Empty: FileDB is in dsn. Their number and order fix"
        " where each file's record lives: set them once, when the installation starts",
    )
    batch_max: int = Field(
        256,
        ge=1,
        description="FileDB steps of concurrent callers sent as one statement and one commit"
        " (group commit); 1: every step alone",
    )
    batch_leaders: int = Field(
        8,
        ge=1,
        description="FileDB groups one process has on the wire at once (each on its own"
        " connection; keep it below pool_max)",
    )

    @field_validator("filedb_shards")
    @classmethod
    def _distinct_shards(cls, shards: list[SecretStr]) -> list[SecretStr]:
        if len(shards) > 256:
            raise ValueError(f"at most 256 FileDB shards, not {len(shards)}")
        dsns = [shard.get_secret_value() for shard in shards]
        if len(set(dsns)) != len(dsns):
            raise ValueError("a database is named twice: every shard is a database of its own")
        return shards


class LogSettings(Section):
    format: Literal["text", "json"] = Field(
        "text",
        description="text: a human line per record; json: one JSON object per line (for log"
        " shippers). pochta's, uvicorn's and aiosmtpd's lines alike",
    )
    level: Literal["debug", "info", "warning", "error"] | None = Field(
        None,
        description="the lowest level logged (default: log_level); aiosmtpd's per-command"
        " lines show at debug only",
    )


class TlsSettings(Section):
    cert_file: Path | None = Field(
        None,
        description="PEM certificate chain (the server's certificate first); with key_file it"
        " turns TLS on. Both files are read again on SIGHUP",
    )
    key_file: Path | None = Field(None, description="PEM private key of cert_file")
    min_version: Literal["TLSv1.2", "TLSv1.3"] = Field(
        "TLSv1.2", description="the oldest TLS version a client may use"
    )
    smtp: bool = Field(True, description="offer STARTTLS on the SMTP port (when TLS is on)")
    lmtp: bool = Field(False, description="offer STARTTLS on the LMTP port (when TLS is on)")
    https: bool = Field(
        False, description="serve the HTTP API over HTTPS on http.port (when TLS is on)"
    )
    require_starttls: bool = Field(
        True,
        description="IMAP: LOGIN and AUTHENTICATE only over TLS (STARTTLS first, or IMAPS) when"
        " TLS is on. SMTP never requires it: a public MX must take mail in clear (RFC 3207)",
    )

    @model_validator(mode="after")
    def _both_or_neither(self) -> TlsSettings:
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("cert_file and key_file are set together (or neither)")
        return self

    @property
    def enabled(self) -> bool:
        return self.cert_file is not None and self.key_file is not None


class ConnectionSettings(Section):
    """``[connections]``: what the connection limits of [smtp], [imap] and [http] share."""

    trusted_networks: list[str] = Field(
        default_factory=lambda: ["127.0.0.1", "::1"],
        description="addresses and networks (CIDR) exempt from every connection limit; by"
        " default exactly 127.0.0.1 and ::1, so that the rest of 127.0.0.0/8 plays strangers"
        " in tests. Add a reverse proxy or an MTA that relays to pochta here",
    )
    rate_period: float = Field(
        60.0,
        gt=0,
        description="seconds over which the max_connection_rate* limits count (Postfix's"
        " anvil_rate_time_unit)",
    )
    ipv4_prefix: int = Field(
        24, ge=8, le=32, description="an IPv4 client's network for the *_per_network limits"
    )
    ipv6_prefix: int = Field(
        64,
        ge=16,
        le=128,
        description="an IPv6 client's network: /64, the smallest a provider gives a site",
    )

    cleartext_login_networks: list[str] = Field(
        default_factory=lambda: ["127.0.0.0/8", "::1/128"],
        description="networks whose clients may send a password without TLS (IMAP LOGIN /"
        " AUTHENTICATE, POST /v1/session, the webmail's login); from anywhere else it must come"
        " over TLS (IMAP: LOGINDISABLED, NO [PRIVACYREQUIRED]; HTTP: 403), whether TLS is set"
        " up or not. Loopback only, as Dovecot refuses plaintext authentication off loopback"
        " without TLS: a password in clear on a network is anyone's who can listen",
    )

    @field_validator("trusted_networks", "cleartext_login_networks")
    @classmethod
    def _networks(cls, values: list[str]) -> list[str]:
        parse_networks(values)  # ValueError: names the value
        return values


class MetricsSettings(Section):
    enabled: bool = Field(True, description="serve /metrics (Prometheus text format)")
    token: SecretStr | None = Field(
        None,
        description="when set, /metrics answers only requests with Authorization: Bearer"
        " <token> (401 otherwise); unset: only clients on a loopback address (403 otherwise)",
    )


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="POCHTA_", env_nested_delimiter="__", extra="forbid"
    )

    data_dir: Path = Field(Path("pochta-data"), description="where embedded backends keep data")
    service_token: SecretStr | None = Field(
        None,
        description="bearer token of services calling the blob API; when unset, one is"
        " generated into <data_dir>/service-token",
    )
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    memory_budget: int = Field(
        64 << 20,
        ge=0,
        description="bytes that the listeners of one server process hold in memory for clients"
        " at once, in all: SMTP letters and IMAP APPEND letters being received or stored"
        " while they are kept in memory (each up to smtp.spool_threshold), IMAP literals until"
        " their command is done, POST /v1/scan bodies while they are scored, and letters no"
        " worker could prepare in time, read whole to be stored unscored. Not in it: what a"
        " connection reads ahead of its session (IMAP: at most 128 KB a session; TLS keeps"
        " buffers of its own), what the worker processes hold, letters being sent. Once"
        " spent: SMTP and IMAP APPEND spool to a file from the first byte; any other IMAP"
        " literal is refused before it is read, NO [UNAVAILABLE] after the login (BYE"
        " [UNAVAILABLE] for LITERAL+) and BYE [UNAVAILABLE] before it; POST /v1/scan gets"
        " 503; an unscored letter is deferred (SMTP 451 4.3.0, APPEND NO [UNAVAILABLE]). 64"
        " MB: 64 letters of 1 MB in memory at once, a part of what a loader has to spare"
        " beside its ~250 MB at rest",
    )
    http: HttpSettings = HttpSettings()
    blobs: BlobSettings = BlobSettings()
    smtp: SmtpSettings = SmtpSettings()
    imap: ImapSettings = ImapSettings()
    mailbox: MailboxSettings = MailboxSettings()
    guard: GuardSettings = GuardSettings()
    shingles: ShingleSettings = ShingleSettings()
    redis: RedisSettings = RedisSettings()
    antispam: AntispamSettings = AntispamSettings()
    valkyrie: ValkyrieSettings = ValkyrieSettings()
    web: WebSettings = WebSettings()
    postgres: PostgresSettings = PostgresSettings()
    log: LogSettings = LogSettings()
    tls: TlsSettings = TlsSettings()
    metrics: MetricsSettings = MetricsSettings()
    connections: ConnectionSettings = ConnectionSettings()

    @model_validator(mode="after")
    def _dns_before_the_reply(self) -> Settings:
        """A letter's DNS runs beside its worker, no longer inside deadline_seconds (the old
        rule, dns_lifetime + dns_timeout + 1 <= deadline_seconds, is gone: a slow sender can
        no longer get a worker killed). What still bounds it: the client waits for the reply
        to DATA at most smtp.command_timeout before pochta closes the connection.

        From the end of DATA to the reply, pochta's own bounds allow: the worker's pass
        (deadline_seconds, SPF asking meanwhile), the DKIM keys and DMARC policies within what
        is left of dns_lifetime, the last runs of SPF within dns_lifetime + CHECK_SLACK, the
        signatures verified by a second worker task (deadline_seconds again), DMARC's runs
        (within dns_lifetime + CHECK_SLACK): at most max(deadline, lifetime + slack) +
        deadline, bounded here by lifetime + slack + 2 x deadline. Not bounded by time: the
        waits for a free worker (their queue is bounded, ``CpuPool.max_pending``) and the
        storing itself."""
        a = self.antispam
        worst = a.dns_lifetime + CHECK_SLACK + 2 * a.deadline_seconds
        if a.dns == "system" and worst >= self.smtp.command_timeout:
            raise ValueError(
                f"antispam.dns_lifetime ({a.dns_lifetime:g}) + {CHECK_SLACK:g} + 2 x"
                f" antispam.deadline_seconds ({a.deadline_seconds:g}) must be less than"
                f" smtp.command_timeout ({self.smtp.command_timeout:g}): a letter's checks"
                " (its worker's pass, its DNS, the verification of its DKIM signatures in a"
                " second worker task) may take that long, and the client would be disconnected"
                " before its reply"
            )
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, TomlConfigSettingsSource(settings_cls))


NOT_SETTINGS = frozenset({"POCHTA_CONFIG", "POCHTA_CORPUS_CACHE", "POCHTA_WARM_WORDS"})
"""``POCHTA_*`` variables that are not settings: the settings file's path, where the test
corpus is cached, and the letters' fork server's warm-up (:func:`warm_words`: read by the
fork server, which reads no settings). Every other ``POCHTA_*`` variable must name a setting."""

WARM_WORDS = 60_000
"""Words the letters' fork server reads with the phrase families' set before it forks a
worker (:mod:`pochta.mailbox.warmed`), unless ``POCHTA_WARM_WORDS`` says otherwise."""
WARM_WORDS_MAX = 1_000_000


def warm_words(environ: Mapping[str, str] | None = None) -> int:
    """``POCHTA_WARM_WORDS`` (0: no warm-up; the tests' pochtas set it), else
    :data:`WARM_WORDS`; a value that is not a whole number 0-1,000,000 is a ConfigError."""
    raw = (os.environ if environ is None else environ).get("POCHTA_WARM_WORDS")
    if raw is None:
        return WARM_WORDS
    try:
        words = int(raw.strip())
    except ValueError:
        words = -1
    if not 0 <= words <= WARM_WORDS_MAX:
        raise ConfigError(
            f"environment variable POCHTA_WARM_WORDS: {raw[:40]!r} is not a whole number "
            f"0-{WARM_WORDS_MAX:,}"
        )
    return words


_SHARED = ", shared by guard and shingles (see README, Configuration)"
MOVED = {
    "guard.redis_url": "[redis] nodes, db, username, password, tls" + _SHARED,
    "guard.redis_cluster": '[redis] mode = "cluster"' + _SHARED,
    "guard.redis_timeout": "[redis] timeout" + _SHARED,
    "shingles.redis_url": "[redis] nodes, db, username, password, tls" + _SHARED,
    "shingles.cluster_nodes": '[redis] nodes with mode = "cluster"' + _SHARED,
    "shingles.timeout": "[redis] timeout" + _SHARED,
    "imap.logins_at_once": "guard.password_checks_at_once: one bound for the password checks"
    " of every door (IMAP, the API, the webmail), the clients an account knows first",
    "guard.login_account_max": "guard.login_account_free and guard.login_account_checks:"
    " failures on an account no longer refuse it to everyone, they slow down the clients it"
    " does not know (see README, Locks and limits)",
}
"""Settings that moved: refused with the name of their new place and why (guard and the
shingle counters share one [redis] section since 0.2; an account's failures slow rather
than refuse since issue 27), never read under the old name."""


def _moved(dotted: str) -> str:
    return f"moved to {MOVED[dotted]}"


Loc = tuple[str | int, ...]


def env_names(model: type[BaseModel] = Settings, prefix: str = "POCHTA_") -> dict[str, Loc]:
    """Every environment variable that names a setting (or a whole section, as JSON), and
    the setting it names."""
    names: dict[str, Loc] = {}
    for field, info in model.model_fields.items():
        name = prefix + field.upper()
        names[name] = (field,)
        if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel):
            for sub, loc in env_names(info.annotation, name + "__").items():
                names[sub] = (field, *loc)
    return names


def _environ() -> dict[str, str]:
    """pochta's variables, upper-cased as pydantic-settings matches them (case-insensitive)."""
    return {k.upper(): v for k, v in os.environ.items() if k.upper().startswith("POCHTA_")}


def _refuse_unknown_env() -> None:
    warm_words()  # read by the fork server, which could not say what is wrong with it
    known = env_names()
    for name in sorted(_environ()):
        if name in known or name in NOT_SETTINGS:
            continue
        dotted = name.removeprefix("POCHTA_").lower().replace("__", ".")
        if dotted in RENAMED:
            continue
        if dotted in MOVED:
            raise ConfigError(f"environment variable {name} names no setting: {_moved(dotted)}")
        close = difflib.get_close_matches(name, [*known, *NOT_SETTINGS], n=1)
        hint = f"; did you mean {close[0]}?" if close else ""
        raise ConfigError(f"environment variable {name} names no setting{hint}")


def _toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except (OSError, ValueError):
        return {}


def _has(tree: Any, loc: Loc) -> bool:
    for part in loc:
        listed = isinstance(tree, list) and isinstance(part, int) and part < len(tree)
        if not (listed or (isinstance(tree, dict) and part in tree)):
            return False
        tree = tree[part]
    return True


def source_of(loc: Loc, config: Path | None = None, overrides: dict[str, Any] | None = None) -> str:
    """Where the value of setting ``loc`` comes from, in the words of an error message: the
    command line, the environment variable that set it, the settings file, or the default.
    A renamed setting may have come under its old name."""
    dotted = ".".join(str(p) for p in loc[:2])
    olds = [tuple(o.split(".")) + loc[2:] for o, new in RENAMED.items() if new == dotted]
    given = {k: v for k, v in (overrides or {}).items() if v is not None}
    env = _environ()
    path = _config_path(config)
    for at in [loc, *olds]:
        if _has(given, at):
            return "the command line"
        for end in range(len(at), 0, -1):
            name = "POCHTA_" + "__".join(str(p) for p in at[:end]).upper()
            if name in env:
                return f"environment variable {name}"
        if path.is_file() and _has(_toml(path), at):
            return str(path)
    return "the default"


def _config_path(config: Path | None) -> Path:
    if config is None and os.environ.get("POCHTA_CONFIG"):
        return Path(os.environ["POCHTA_CONFIG"])
    return config or Path("pochta.toml")


def _problem(err: ErrorDetails, config: Path | None, overrides: dict[str, Any]) -> str:
    loc: Loc = tuple(err["loc"])
    key = ".".join(str(p) for p in loc)
    what = "unknown setting" if err["type"] == "extra_forbidden" else err["msg"]
    if err["type"] == "extra_forbidden" and key in MOVED:
        what = _moved(key)
    if not loc:  # a rule between sections: its message names the settings
        return what.removeprefix("Value error, ")
    return f"{key}: {what} (from {source_of(loc, config, overrides)})"


def load_settings(config: Path | None = None, **overrides: Any) -> Settings:
    """Read the settings once. A named config file that is missing, a key that names no
    setting (in the file or in a ``POCHTA_*`` variable) or any invalid value is a ConfigError
    that names the setting and where it came from."""
    if config is None and os.environ.get("POCHTA_CONFIG"):
        config = Path(os.environ["POCHTA_CONFIG"])
    if config is not None and not config.is_file():
        raise ConfigError(f"config file {config} does not exist")
    path = _config_path(config)
    _refuse_unknown_env()

    class _FromFile(Settings):
        model_config = SettingsConfigDict(toml_file=path)

    given = {k: v for k, v in overrides.items() if v is not None}
    try:
        return Settings.model_validate(_FromFile(**given).model_dump())
    except ValidationError as exc:
        problems = "; ".join(_problem(err, config, given) for err in exc.errors())
        raise ConfigError(f"invalid settings: {problems}") from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
