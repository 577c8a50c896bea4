"""TLS for pochta's listeners: one server context per process, its certificate reloadable.

``ServerTLS(cert_file, key_file)`` loads the certificate chain and the key into an
``ssl.SSLContext``. ``context`` is the object every listener is given (aiosmtpd's
``tls_context`` for STARTTLS, uvicorn for HTTPS, the IMAP server for STARTTLS and IMAPS): it
never changes, so nobody has to be told of a reload. ``reload()`` (``pochta serve`` runs it on
SIGHUP) reads both files into a *new* context; the stable one switches every handshake that
starts afterwards to the newest through its ``sni_callback`` (called for every ClientHello,
with or without a server name; assigning ``SSLObject.context`` there is the documented way to
serve another certificate). Connections already up keep theirs: nothing is dropped. A reload
that fails (a file missing, a key that does not match the certificate, a certificate that
does not parse) changes nothing: the previous certificate stays in use and the reason is
logged; ``reload`` returns False.

Why not reload into the one context (``load_cert_chain`` on the live object): OpenSSL replaces
the certificate before it checks the key, so a mismatched pair would leave the listening
context without a usable key.

Use (the IMAP server)::

    tls = pochta.tls                      # None when [tls] has no certificate
    if tls is not None:
        ctx = tls.context                 # for loop.start_tls(..., server_side=True) on
                                          # STARTTLS, or create_server(ssl=ctx) for IMAPS
        tls.require_starttls              # refuse LOGIN / AUTHENTICATE before TLS
"""

from __future__ import annotations

import logging
import ssl
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pochta.config import TlsSettings
from pochta.errors import ConfigError

if TYPE_CHECKING:  # cryptography is imported where certificates are made, not at start
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import ec

log = logging.getLogger("pochta.tls")

Version = Literal["TLSv1.2", "TLSv1.3"]
VERSIONS: dict[str, ssl.TLSVersion] = {
    "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}


def server_context(
    cert_file: Path, key_file: Path, min_version: Version = "TLSv1.2"
) -> ssl.SSLContext:
    """A server-side context holding ``cert_file`` + ``key_file``; OSError / ssl.SSLError
    when they cannot be read or do not match."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = VERSIONS[min_version]
    ctx.load_cert_chain(cert_file, key_file)
    return ctx


class ServerTLS:
    """The certificate of this process's listeners (see the module)."""

    def __init__(
        self,
        cert_file: Path,
        key_file: Path,
        *,
        min_version: Version = "TLSv1.2",
        require_starttls: bool = True,
    ) -> None:
        self.cert_file = cert_file
        self.key_file = key_file
        self.min_version = min_version
        self.require_starttls = require_starttls
        self._lock = threading.Lock()
        try:
            self._current = server_context(cert_file, key_file, min_version)
            self._front = server_context(cert_file, key_file, min_version)
        except (OSError, ssl.SSLError, ValueError) as exc:
            raise ConfigError(f"tls: cannot use {cert_file} with {key_file}: {_why(exc)}") from exc
        self._front.sni_callback = self._switch
        self.reloads = 0  # successful reloads since start
        self.failures = 0  # reloads that failed (the old certificate stayed)

    @classmethod
    def from_settings(cls, settings: TlsSettings) -> ServerTLS | None:
        """None when no certificate is configured; ConfigError when it cannot be used."""
        if settings.cert_file is None or settings.key_file is None:
            return None
        return cls(
            settings.cert_file,
            settings.key_file,
            min_version=settings.min_version,
            require_starttls=settings.require_starttls,
        )

    @property
    def context(self) -> ssl.SSLContext:
        """The context to give a listener; each new handshake gets the newest certificate."""
        return self._front

    def current(self) -> ssl.SSLContext:
        """The context holding the newest certificate loaded."""
        with self._lock:
            return self._current

    def reload(self) -> bool:
        """Read the certificate and the key again. True when the new ones are in use for the
        next handshakes; False (logged, nothing changed) when they cannot be used."""
        try:
            fresh = server_context(self.cert_file, self.key_file, self.min_version)
        except (OSError, ssl.SSLError, ValueError) as exc:
            with self._lock:
                self.failures += 1
            log.error("tls: certificate not reloaded, the previous one stays in use: %s", _why(exc))
            return False
        with self._lock:
            self._current = fresh
            self.reloads += 1
        log.info("tls: certificate reloaded from %s", self.cert_file)
        return True

    def _switch(
        self, conn: ssl.SSLObject | ssl.SSLSocket, server_name: str | None, ctx: ssl.SSLContext
    ) -> None:
        current = self.current()
        if current is not ctx:
            conn.context = current


def _why(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLError):
        return exc.reason or str(exc)
    if isinstance(exc, OSError):
        return f"{exc.filename}: {exc.strerror}" if exc.filename else str(exc)
    return str(exc)


def self_signed(hosts: list[str], days: int = 365) -> tuple[bytes, bytes]:
    """A self-signed certificate for ``hosts`` (names or IP addresses, all in its subject
    alternative names; the first is its common name) and its key (ECDSA P-256), both PEM. For
    a test install: clients must be told to trust it."""
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    return _leaf(hosts, days, key, issuer=None, client=False), _key_pem(key)


def new_ca(name: str = "pochta CA", days: int = 3650) -> tuple[bytes, bytes]:
    """A certificate authority for one installation: its certificate and its key (ECDSA
    P-256), both PEM. It signs only end certificates (``path_length=0``); every machine of the
    installation trusts it (``ca.pem``), and its key stays with the operator."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    if not name or len(name) > 64:
        raise ValueError("a CA's name has 1 to 64 characters")
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return _cert_pem(cert), _key_pem(key)


def signed(hosts: list[str], ca_cert: bytes, ca_key: bytes, days: int = 365) -> tuple[bytes, bytes]:
    """A certificate for ``hosts`` signed by the CA (``ca_cert`` / ``ca_key``, PEM, as
    :func:`new_ca` makes them) and its key, both PEM. It serves a machine's listeners (SMTP,
    IMAP, HTTPS, PostgreSQL, Redis, a storage node's nginx) and identifies the machine as a
    TLS client (to the storage nodes): both uses are in its extended key usage. ValueError
    when the CA's files are not a CA's certificate and its key."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    try:
        issuer = x509.load_pem_x509_certificate(ca_cert)
        issuer_key = serialization.load_pem_private_key(ca_key, password=None)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"not a PEM certificate and an unencrypted PEM key: {exc}") from None
    try:
        is_ca = issuer.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    except x509.ExtensionNotFound:
        is_ca = False
    if not is_ca:
        raise ValueError("the certificate is not a CA's (no basicConstraints CA:TRUE)")
    if not isinstance(issuer_key, ec.EllipticCurvePrivateKey) or (
        issuer_key.public_key() != issuer.public_key()
    ):
        raise ValueError("the key is not the CA certificate's (pochta's CAs have ECDSA keys)")
    key = ec.generate_private_key(ec.SECP256R1())
    return _leaf(hosts, days, key, issuer=(issuer, issuer_key), client=True), _key_pem(key)


def _leaf(
    hosts: list[str],
    days: int,
    key: ec.EllipticCurvePrivateKey,
    *,
    issuer: tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None,
    client: bool,
) -> bytes:
    """An end certificate for ``hosts`` and ``key``'s public half: self-signed when
    ``issuer`` is None, else signed by (CA certificate, CA key); ``client``: usable as a TLS
    client certificate too."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    if not hosts:
        raise ValueError("a certificate names at least one host")
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0][:64])])
    now = datetime.datetime.now(datetime.UTC)
    usages = [ExtendedKeyUsageOID.SERVER_AUTH] + (
        [ExtendedKeyUsageOID.CLIENT_AUTH] if client else []
    )
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject if issuer is None else issuer[0].subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    )
    if issuer is not None:
        builder = builder.add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer[1].public_key()),
            critical=False,
        )
    cert = builder.sign(key if issuer is None else issuer[1], hashes.SHA256())
    return _cert_pem(cert)


def _cert_pem(cert: x509.Certificate) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return cert.public_bytes(serialization.Encoding.PEM)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
