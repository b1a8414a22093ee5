"""How an http monitor verifies https targets: ``tls_verify`` and ``tls_ca_bundle``.

The contract is docs/checks.md, "Private certificate authorities":

- ``tls_verify`` true and no bundle: the prober's own `ssl.SSLContext` (the system's
  CAs, host names checked), shared by every such monitor.
- ``tls_ca_bundle`` (PEM text of one or more certificates, at most
  `MAX_CA_BUNDLE_BYTES`): the chain and the host name are verified against those
  certificates instead of the system's.
- ``tls_verify`` false: any certificate is accepted (no chain, no host name check); the
  certificate's notAfter is still read (`unverified_expiry`), so ``tls_expires_at`` is
  recorded and ``tls_expiry_days`` still applies. A bundle is then kept but unused.

Building a context costs far more than a check (loading certificates), so a monitor's
context is built when its configuration is (`TlsContexts.context`, from
``engine.monitor.probe_spec``), never per check, and shared by every monitor with the
same setting: `TlsContexts` keeps them in a `weakref.WeakValueDictionary` keyed by the
setting, so a context lives exactly as long as a monitor's `ProbeSpec` holds it.
"""

from __future__ import annotations

import functools
import re
import ssl
import weakref
from typing import TYPE_CHECKING

import structlog
from cryptography import x509

if TYPE_CHECKING:
    import trio

__all__ = [
    "MAX_CA_BUNDLE_BYTES",
    "InvalidCaBundle",
    "TlsContexts",
    "check_ca_bundle",
    "peer_expiry",
    "unverified_expiry",
]

log = structlog.get_logger("uptrio.engine")

MAX_CA_BUNDLE_BYTES = 64 * 1024
"""The largest ``tls_ca_bundle``, in bytes of its text (PEM is ASCII: characters too)."""


class InvalidCaBundle(ValueError):
    """A ``tls_ca_bundle`` that cannot be used: ``code`` is ``"invalid_ca_bundle"``,
    ``message`` one sentence naming the field and what is wrong with it."""

    code = "invalid_ca_bundle"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def check_ca_bundle(pem: str) -> ssl.SSLContext:
    """Check that ``pem`` is a usable ``tls_ca_bundle``; returns the client context that
    verifies chains and host names against its certificates alone.

    Rules: ASCII text of at most `MAX_CA_BUNDLE_BYTES` holding one or more ``-----BEGIN
    CERTIFICATE-----`` blocks, each a certificate that parses; text between the blocks
    (the comments of a ``ca-bundle.crt``) is ignored; a private key is refused, since
    the bundle is shown to every reader of the monitor and in its events.

    Raises:
        InvalidCaBundle: when a rule is broken; the message names the field and, for a
            certificate that does not parse, which one (``certificate 2 of 3``).
    """
    if not pem.isascii():
        raise InvalidCaBundle("tls_ca_bundle must be PEM text (ASCII), as a .pem file holds")
    if len(pem) > MAX_CA_BUNDLE_BYTES:
        raise InvalidCaBundle(f"tls_ca_bundle may be at most {MAX_CA_BUNDLE_BYTES} bytes")
    if "PRIVATE KEY-----" in pem:
        raise InvalidCaBundle(
            "tls_ca_bundle holds a private key: send only the CA certificates (the bundle "
            "is shown to every reader of the monitor)"
        )
    blocks = _PEM_CERTIFICATE.findall(pem)
    if not blocks:
        raise InvalidCaBundle(
            "tls_ca_bundle holds no certificate (no -----BEGIN CERTIFICATE----- block)"
        )
    for number, block in enumerate(blocks, 1):
        try:
            x509.load_pem_x509_certificate(block.encode("ascii"))
        except ValueError:
            raise InvalidCaBundle(
                f"tls_ca_bundle: certificate {number} of {len(blocks)} does not parse"
            ) from None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # TLS 1.2+, chain and host name
    try:
        context.load_verify_locations(cadata=pem)
    except ssl.SSLError as exc:  # what cryptography took and OpenSSL does not
        raise InvalidCaBundle(f"tls_ca_bundle cannot be loaded: {exc.reason or exc}") from None
    return context


_PEM_CERTIFICATE = re.compile(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----", re.DOTALL)
"""One PEM certificate block (RFC 7468 section 5), framing only; cryptography parses it."""


def _unverified() -> ssl.SSLContext:
    """A client context that accepts any certificate (``tls_verify`` false): no chain
    and no host name check; TLS 1.2 or newer like the others."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


class TlsContexts:
    """The `ssl.SSLContext` of every TLS setting in use, built once per distinct setting.

    ``default`` serves ``tls_verify`` true without a bundle (held for the process);
    the others live in a `weakref.WeakValueDictionary` keyed by ``(verify, bundle)``:
    monitors with the same setting share one context, and it goes away with the last
    `ProbeSpec` holding it. Used from one thread (the engine's trio loop).
    """

    __slots__ = ("_built", "_default")

    def __init__(self, default: ssl.SSLContext) -> None:
        self._default = default
        self._built: weakref.WeakValueDictionary[tuple[bool, str | None], ssl.SSLContext] = (
            weakref.WeakValueDictionary()
        )

    @property
    def default(self) -> ssl.SSLContext:
        """The context of ``tls_verify`` true without a bundle."""
        return self._default

    def context(self, verify: bool | None, ca_bundle: str | None) -> ssl.SSLContext:
        """The context for ``tls_verify`` ``verify`` (None: true) and ``tls_ca_bundle``
        ``ca_bundle``: the shared one when it exists, else one built now and kept while
        a caller holds it.

        A bundle that cannot be loaded (stored before a stricter release, or corrupt)
        gives a context that trusts nothing: every https check of that monitor fails
        with ``tls_error``, and a warning is logged. Never raises.
        """
        if verify is not False and ca_bundle is None:
            return self._default
        key = (False, None) if verify is False else (True, ca_bundle)
        context = self._built.get(key)
        if context is None:
            context = self._build(key[1])
            self._built[key] = context
        return context

    @staticmethod
    def _build(ca_bundle: str | None) -> ssl.SSLContext:
        if ca_bundle is None:
            return _unverified()
        try:
            return check_ca_bundle(ca_bundle)
        except InvalidCaBundle as exc:
            log.warning("tls_ca_bundle cannot be loaded; its checks fail", reason=exc.message)
            return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # trusts nothing


@functools.lru_cache(maxsize=1024)
def unverified_expiry(der: bytes) -> int:
    """The notAfter of a DER certificate as epoch seconds: what ``tls_expires_at``
    records when ``tls_verify`` is false (`ssl.SSLSocket.getpeercert` decodes only
    verified certificates). Cached by the certificate's bytes: a target serves the same
    one check after check.

    Raises:
        ValueError: ``der`` is not a certificate (the handshake accepted it, so only a
            server sending garbage that OpenSSL took).
    """
    return int(x509.load_der_x509_certificate(der).not_valid_after_utc.timestamp())


def peer_expiry(stream: trio.SSLStream[trio.SocketStream]) -> int | None:
    """The notAfter (epoch seconds) of the certificate the server presented in the
    handshake just done on ``stream``: a check's ``tls_expires_at``. A verified
    certificate is decoded by `ssl` (its date parse cached); one accepted without
    verification (``tls_verify`` false) is read from its DER form (`unverified_expiry`).
    None when the server sent none, or one that does not parse (the check then records
    no ``tls_expires_at``)."""
    certificate = stream.getpeercert()  # empty when not verified (tls_verify false)
    if certificate:
        return _epoch_seconds(certificate["notAfter"])
    der = stream.getpeercert(binary_form=True)
    if not der:
        return None
    try:
        return unverified_expiry(der)
    except ValueError:
        return None


@functools.lru_cache(maxsize=4096)
def _epoch_seconds(not_after: str) -> int:
    """A certificate's notAfter (``"Jun  1 12:00:00 2027 GMT"``) as epoch seconds; cached
    because `ssl.cert_time_to_seconds` (strptime) costs more than the lookup of the
    certificate itself."""
    return int(ssl.cert_time_to_seconds(not_after))
