"""What a probe is asked (`ProbeSpec`) and what it answers (`ProbeResult`).

A failed check is data, not an exception: `Prober.probe` always returns a `ProbeResult`,
whose ``error_code`` is one of the stable snake_case codes below (``None`` when ok).
They are part of the public API (a check's ``error.code``), so a code is never renamed;
new ones may be added.

=======================  ==========================================================
error_code               meaning
=======================  ==========================================================
``timeout``              the whole check (resolution, connect, TLS, request,
                         response, redirects) took longer than ``timeout_seconds``
``connection_refused``   the target refused the TCP connection (nothing listens)
``connection_reset``     the target reset or closed the connection mid-exchange
``connection_failed``    the TCP connection failed for another operating-system
                         reason (the message gives it)
``unreachable``          no route to the network or host, or an ICMP
                         destination-unreachable / time-exceeded answer to a ping
``dns_failure``          the name does not resolve: NXDOMAIN, no A/AAAA answer, or
                         the nameserver failed (SERVFAIL, REFUSED)
``tls_error``            the TLS handshake failed: untrusted or expired
                         certificate (by the system's CAs or the monitor's
                         ``tls_ca_bundle``), wrong host name, protocol mismatch
``protocol_error``       the response is not valid HTTP/1.1, the connection closed
                         before a complete response, or a redirect is unusable
``unexpected_status``    http: the final status differs from
                         ``expected_status_code`` (``status_code`` still recorded)
``too_many_redirects``   http: more than 10 redirects (``status_code`` is the last
                         redirect's)
``assertion_failed``     http: a response assertion failed (docs/checks.md); the
                         message names it (``assertions[0]: ...``) and what was found
``tls_expiring``         http: the final response's TLS certificate expires within the
                         monitor's ``tls_expiry_days``; the message says when
``ping_not_permitted``   ping: this process may not open ICMP sockets (needs root,
                         CAP_NET_RAW or ``net.ipv4.ping_group_range``)
``target_denied``        the address policy refused the resolved address
``invalid_target``       the monitor's url or method cannot be probed (the API
                         validates both, so this means stale or corrupt config)
=======================  ==========================================================
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal, get_args

if TYPE_CHECKING:
    import ssl

    from ._assertions import Assertion

__all__ = ["ERROR_CODES", "ErrorCode", "ProbeFailure", "ProbeResult", "ProbeSpec"]

ErrorCode = Literal[
    "timeout",
    "connection_refused",
    "connection_reset",
    "connection_failed",
    "unreachable",
    "dns_failure",
    "tls_error",
    "protocol_error",
    "unexpected_status",
    "too_many_redirects",
    "assertion_failed",
    "tls_expiring",
    "ping_not_permitted",
    "target_denied",
    "invalid_target",
]

ERROR_CODES: Final[frozenset[str]] = frozenset(get_args(ErrorCode))
"""Every ``error_code`` a `ProbeResult` can carry (see the table above)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbeSpec:
    """One check to run, taken from a monitor's configuration.

    Attributes:
        type: the monitor type, a name in `PROBE_TYPES` (``_registry``).
        url: the monitor's url, in a form the type's parser accepts (`parse_target`).
        timeout_seconds: the limit on the whole check, in seconds (resolution,
            connection, TLS, every redirect hop and the response).
        method: http only: the request method, e.g. ``"GET"``; ``None`` means GET.
        expected_status_code: http only: the final status that counts as up; ``None``
            means any 2xx status. Without ``assertions`` only.
        request_headers: http only: headers added to the request, (name, value) pairs
            (``_request``).
        request_body: http only: the request's body, sent as UTF-8, or ``None``.
        assertions: http only: compiled by `compile_assertions`; when there are any they
            decide instead of ``expected_status_code`` (docs/checks.md).
        tls_expiry_days: http only: the check fails with ``tls_expiring`` when the final
            response's certificate expires within this many days; ``None``: never.
        ssl_context: http only: verifies every https connection of the check, from
            `TlsContexts.context` (the monitor's ``tls_verify`` and ``tls_ca_bundle``);
            ``None``: the prober's own (the system's CAs).
    """

    type: str
    url: str
    timeout_seconds: float
    method: str | None = None
    expected_status_code: int | None = None
    request_headers: tuple[tuple[str, str], ...] = ()
    request_body: str | None = None
    assertions: tuple[Assertion, ...] = ()
    tls_expiry_days: int | None = None
    ssl_context: ssl.SSLContext | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbeResult:
    """The outcome of one check.

    Attributes:
        ok: ``True`` when the target is up by the rules of its probe.
        response_time_ms: milliseconds, measured with `time.perf_counter`. Each probe's
            docstring says what its clock covers; on failure it is the time spent until
            the failure was seen (about ``timeout_seconds * 1000`` for a timeout).
        status_code: http only: the final HTTP status (also on ``unexpected_status`` and
            ``too_many_redirects``); ``None`` for other types and when no response came.
        error_code: one of `ERROR_CODES` (module docstring), ``None`` when ``ok``.
        error_message: one human-readable sentence about the failure, ``None`` when ok.
        tls_expires_at: http only: when the TLS certificate of the final response
            expires (its notAfter, epoch seconds); ``None`` for plain http and when no
            response came.
    """

    ok: bool
    response_time_ms: float
    status_code: int | None
    error_code: str | None
    error_message: str | None
    tls_expires_at: int | None = None

    @classmethod
    def up(cls, response_time_ms: float) -> ProbeResult:
        """The result of a check that is up and has nothing but its time to say (tcp,
        dns, ping); ``response_time_ms`` in milliseconds."""
        return cls(
            ok=True,
            response_time_ms=response_time_ms,
            status_code=None,
            error_code=None,
            error_message=None,
        )


class ProbeFailure(Exception):
    """Internal: raised inside a probe to end the check as a failure.

    `Prober.probe` turns it into a `ProbeResult` (``ok=False``) at the package boundary;
    it never escapes the package. ``status_code`` carries an HTTP status already seen,
    ``tls_expires_at`` the expiry (epoch seconds) of a certificate already seen.
    """

    def __init__(self, code: ErrorCode, message: str, *, status_code: int | None = None) -> None:
        super().__init__(code, message)
        self.code: ErrorCode = code
        self.message = message
        self.status_code = status_code
        self.tls_expires_at: int | None = None
