"""`Prober`: the probes' shared resources and their one entry point, `Prober.probe`."""

from __future__ import annotations

import ssl
import time

import trio

from engine.targets import InvalidTarget

from ._dns import make_resolver
from ._ping import permitted_ping_kinds
from ._probe_type import ProbeContext
from ._registry import PROBE_TYPES, parse_target
from ._result import ProbeFailure, ProbeResult, ProbeSpec
from ._source import SourceAddress
from ._tcp import AddressPolicy
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
        source_address: the local address every probe leaves from
            (``--probe-source-address``; made by `source_address`, which proves it can
            be bound), or ``None`` for the system's choice (``_source``: only target
            addresses, and dns nameservers, of its family are used).
    """

    __slots__ = ("_context", "tls")

    def __init__(
        self,
        *,
        dns_nameserver: tuple[str, int] | None = None,
        ssl_context: ssl.SSLContext | None = None,
        address_policy: AddressPolicy | None = None,
        source_address: SourceAddress | None = None,
    ) -> None:
        self._context = ProbeContext(
            ssl_context=ssl_context if ssl_context is not None else _default_ssl_context(),
            dns_resolver=make_resolver(dns_nameserver, source_address),
            policy=address_policy,
            ping_kinds=permitted_ping_kinds(),
            source=source_address,
        )
        self.tls = TlsContexts(self._context.ssl_context)
        """Builds and shares the `ssl.SSLContext` of each monitor's TLS setting (a
        `ProbeSpec`'s ``ssl_context``)."""

    async def probe(self, spec: ProbeSpec) -> ProbeResult:
        """Run one check and say how it went.

        The whole check (name resolution, connection, TLS, request, response,
        redirects) runs under ``spec.timeout_seconds``; past it the result is
        ``timeout``. ``spec.url`` is parsed by its type's parser (`parse_target`; an
        unknown type or a url it refuses is ``invalid_target``), then the type's check
        runs (`PROBE_TYPES`). What ``response_time_ms`` measures is said by each probe
        type (``_http``, ``_tcp``, ``_dns``, ``_ping``); for a failure it is the time
        from the start of this call to the failure.

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
        try:
            target = parse_target(spec.type, spec.url)
        except InvalidTarget as exc:
            raise ProbeFailure("invalid_target", str(exc)) from None
        return await PROBE_TYPES[spec.type].check(self._context, spec, target)


def _default_ssl_context() -> ssl.SSLContext:
    """System CAs, certificate and host name verified, TLS 1.2 or newer."""
    return ssl.create_default_context()
