"""`Prober`: the probes' shared resources and their one entry point, `Prober.probe`."""

from __future__ import annotations

import ssl
import time

import trio

from engine.targets import InvalidTarget, parse_target

from ._dns import make_resolver, probe_dns
from ._http import probe_http
from ._ping import permitted_ping_kinds, probe_ping
from ._result import ProbeFailure, ProbeResult, ProbeSpec
from ._tcp import AddressPolicy, probe_tcp
from ._tls import TlsContexts

__all__ = ["Prober"]


class Prober:
    """Runs checks. One per process, shared by every monitor.

    It holds what is costly to build and the same for every check: the verifying
    `ssl.SSLContext` of https checks (creating one loads the CA store, milliseconds of
    CPU) with the contexts of monitors that set ``tls_verify`` or ``tls_ca_bundle``
    (`tls`, built once per distinct setting), the DNS resolver for dns checks, the ICMP
    socket types this process may open, and the address policy. Only `tls` changes
    after creation, and only by adding or dropping contexts.

    Args:
        dns_nameserver: ``(ip, port)`` of the nameserver for dns checks; ``None`` reads
            the system's from ``/etc/resolv.conf`` once, here. Host names of http, tcp
            and ping checks are resolved by the system resolver (getaddrinfo) either way.
        ssl_context: verifies https targets of monitors without ``tls_ca_bundle`` or
            ``tls_verify`` false; ``None`` builds `ssl.create_default_context()` (system
            CAs, host names checked). Tests pass one trusting their own CA.
        address_policy: called with every resolved address before a probe contacts it;
            returns ``None`` to allow it or a reason string to refuse it (the check is
            then ``target_denied``). Probes connect to exactly the address that was
            checked. ``None`` allows everything at no cost. dns checks contact only the
            nameserver, but the addresses it answers are screened all the same
            (``_dns``).
    """

    __slots__ = ("_ping_kinds", "_policy", "_resolver", "_ssl_context", "tls")

    def __init__(
        self,
        *,
        dns_nameserver: tuple[str, int] | None = None,
        ssl_context: ssl.SSLContext | None = None,
        address_policy: AddressPolicy | None = None,
    ) -> None:
        self._ssl_context = ssl_context if ssl_context is not None else _default_ssl_context()
        self.tls = TlsContexts(self._ssl_context)
        """Builds and shares the `ssl.SSLContext` of each monitor's TLS setting (a
        `ProbeSpec`'s ``ssl_context``)."""
        self._resolver = make_resolver(dns_nameserver)
        self._policy = address_policy
        self._ping_kinds = permitted_ping_kinds()

    async def probe(self, spec: ProbeSpec) -> ProbeResult:
        """Run one check and say how it went.

        The whole check (name resolution, connection, TLS, request, response,
        redirects) runs under ``spec.timeout_seconds``; past it the result is
        ``timeout``. What ``response_time_ms`` measures is said by each probe
        (``_http``, ``_tcp``, ``_dns``, ``_ping``); for a failure it is the time from
        the start of this call to the failure.

        Returns:
            A `ProbeResult`; a failing target is a result with an ``error_code``, never
            an exception.

        Error handling:
            Raises only for bugs. `trio.Cancelled` from an enclosing cancel scope passes
            through unchanged: cancel the caller's scope to abandon a check.
        """
        started = time.perf_counter()
        try:
            with trio.fail_after(spec.timeout_seconds):
                return await self._run(spec)
        except trio.TooSlowError:
            return ProbeResult(
                ok=False,
                response_time_ms=(time.perf_counter() - started) * 1000.0,
                status_code=None,
                error_code="timeout",
                error_message=f"no answer within {spec.timeout_seconds:g} s",
            )
        except ProbeFailure as exc:
            return ProbeResult(
                ok=False,
                response_time_ms=(time.perf_counter() - started) * 1000.0,
                status_code=exc.status_code,
                error_code=exc.code,
                error_message=exc.message,
                tls_expires_at=exc.tls_expires_at,
            )

    async def _run(self, spec: ProbeSpec) -> ProbeResult:
        if spec.type == "http":
            return await probe_http(
                spec.url,
                method=spec.method,
                expected_status_code=spec.expected_status_code,
                ssl_context=self._ssl_context if spec.ssl_context is None else spec.ssl_context,
                policy=self._policy,
                headers=spec.request_headers,
                body=spec.request_body,
                assertions=spec.assertions,
                tls_expiry_days=spec.tls_expiry_days,
            )
        try:
            target = parse_target(spec.type, spec.url)
        except InvalidTarget as exc:
            raise ProbeFailure("invalid_target", str(exc)) from None
        if target.type == "tcp":
            assert target.port is not None
            elapsed_ms = await probe_tcp(target.host, target.port, self._policy)
        elif target.type == "dns":
            elapsed_ms = await probe_dns(
                self._resolver, target.host, spec.timeout_seconds, self._policy
            )
        else:
            if not self._ping_kinds:
                raise ProbeFailure(
                    "ping_not_permitted",
                    "this process may not open ICMP sockets (it needs root, CAP_NET_RAW "
                    "or net.ipv4.ping_group_range)",
                )
            elapsed_ms = await probe_ping(target.host, self._policy, self._ping_kinds)
        return ProbeResult(
            ok=True,
            response_time_ms=elapsed_ms,
            status_code=None,
            error_code=None,
            error_message=None,
        )


def _default_ssl_context() -> ssl.SSLContext:
    """System CAs, certificate and host name verified, TLS 1.2 or newer."""
    return ssl.create_default_context()
