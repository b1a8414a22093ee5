"""The ``dns`` probe: does the name resolve to an A or AAAA record?

dnspython's async stub resolver runs on trio (``dns.asyncbackend.get_backend("trio")``).
The A and AAAA queries go out together; the first one that comes back with at least one
record makes the check up, and the other query is cancelled. NXDOMAIN, or no record of
either type, is ``dns_failure``; so is a nameserver that fails (SERVFAIL, REFUSED). The
probe talks to the nameserver only, never to the target, so the address policy does not
apply to it.

The resolver is built once per `Prober` by `make_resolver` (building one with the system
configuration reads ``/etc/resolv.conf``; checks must not). No answer is cached: every
check asks the nameserver.

Response time: from just before the queries are sent to the first answer with a record,
in milliseconds.
"""

from __future__ import annotations

import time

import dns.asyncbackend
import dns.asyncresolver
import dns.exception
import dns.nameserver
import dns.resolver
import trio

from ._result import ProbeFailure

__all__ = ["make_resolver", "probe_dns"]

_BACKEND = dns.asyncbackend.get_backend("trio")
_LIFETIME_MARGIN_SECONDS = 1.0


def make_resolver(nameserver: tuple[str, int] | None) -> dns.asyncresolver.Resolver:
    """A resolver for dns checks.

    Args:
        nameserver: ``(ip, port)`` of the one nameserver to ask, or ``None`` for the
            system's nameservers (read from ``/etc/resolv.conf`` now, once).

    Returns:
        The resolver. Without a usable system configuration it has no nameservers, and
        every dns check fails with ``dns_failure`` (the service still starts).
    """
    if nameserver is not None:
        resolver = dns.asyncresolver.Resolver(configure=False)
        resolver.nameservers = [dns.nameserver.Do53Nameserver(nameserver[0], nameserver[1])]
        return resolver
    try:
        return dns.asyncresolver.Resolver(configure=True)
    except dns.resolver.NoResolverConfiguration:
        resolver = dns.asyncresolver.Resolver(configure=False)
        resolver.nameservers = []
        return resolver


async def probe_dns(
    resolver: dns.asyncresolver.Resolver, host: str, timeout_seconds: float
) -> float:
    """Resolve ``host`` (A and AAAA) with ``resolver``.

    Args:
        resolver: from `make_resolver`.
        host: a host name (as in `engine.targets.Target.host`).
        timeout_seconds: the check's timeout; the caller enforces it, dnspython's own
            lifetime is set a little longer so that the caller's timeout decides.

    Returns:
        The time to the first answer with a record, in milliseconds.

    Raises:
        ProbeFailure: ``dns_failure`` (NXDOMAIN, no A/AAAA record, nameserver failure, no
            nameserver configured) or ``timeout`` (dnspython gave up first).
    """
    if not resolver.nameservers:
        raise ProbeFailure("dns_failure", "no DNS nameserver is configured")
    lifetime = timeout_seconds + _LIFETIME_MARGIN_SECONDS
    started = time.perf_counter()
    answered_after: float | None = None
    errors: list[Exception] = []
    empty = 0

    async def query(rdtype: str) -> None:
        nonlocal answered_after, empty
        try:
            answer = await resolver.resolve(
                host, rdtype, raise_on_no_answer=False, lifetime=lifetime, backend=_BACKEND
            )
        except (dns.exception.DNSException, OSError) as exc:
            errors.append(exc)
            return
        if answer.rrset is None or len(answer.rrset) == 0:
            empty += 1
        elif answered_after is None:
            answered_after = time.perf_counter() - started
            nursery.cancel_scope.cancel()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(query, "A")
        nursery.start_soon(query, "AAAA")
    if answered_after is not None:
        return answered_after * 1000.0
    raise _failure(host, errors, empty)


def _failure(host: str, errors: list[Exception], empty: int) -> ProbeFailure:
    if any(isinstance(exc, dns.resolver.NXDOMAIN) for exc in errors):
        return ProbeFailure("dns_failure", f"{host} does not exist (NXDOMAIN)")
    if empty == 2:
        return ProbeFailure("dns_failure", f"{host} has no A or AAAA record")
    for exc in errors:
        if isinstance(exc, dns.exception.Timeout):
            return ProbeFailure("timeout", f"no answer from the nameserver about {host}")
    for exc in errors:
        if isinstance(exc, dns.resolver.NoNameservers):
            return ProbeFailure("dns_failure", f"the nameserver failed to resolve {host}")
    reason = errors[0] if errors else "no answer"
    return ProbeFailure("dns_failure", f"{host} does not resolve: {reason}")
