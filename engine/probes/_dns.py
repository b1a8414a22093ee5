"""The ``dns`` probe type (`DNS`): does the name resolve to an A or AAAA record the policy
allows?

A dns monitor's ``url`` is a host name, or ``dns://name``: ``example.com``,
``dns://example.com.`` (`parse_dns_url`; the host rules: ``engine.targets``). IP
addresses are refused: a dns monitor checks that a *name* resolves, and an IP literal
has nothing to resolve (use a ping or tcp monitor for it). The name goes to the
nameserver as it is written (`DNS` resolves with the ``"nameserver"``).

dnspython's async stub resolver runs on trio (``dns.asyncbackend.get_backend("trio")``).
The A and AAAA queries go out together; the first one that comes back with at least one
allowed record makes the check up, and the other query is cancelled. NXDOMAIN, or no
record of either type, is ``dns_failure``; so is a nameserver that fails (SERVFAIL,
REFUSED). Names are asked of the nameserver only: ``/etc/hosts`` is never read (so
``localhost`` is whatever the nameserver says it is).

The probe talks to the nameserver only, never to the addresses in the answer, but those
addresses are screened by the address policy all the same, as the http probe screens
the addresses it would connect to (docs/api.md, "Target policy"): refused addresses are
dropped, and a check whose answers hold only refused addresses fails with
``target_denied``. Otherwise a dns monitor on an internal name would tell its owner
which internal names exist, and to which private addresses they point.

The resolver is built once per `Prober` by `make_resolver` (building one with the system
configuration reads ``/etc/resolv.conf``; checks must not). No answer is cached: every
check asks the nameserver. `nameserver_resolver` wraps the same kind of resolver for the
target policy's create-time screen (``engine.policy.TargetPolicy.dns_resolver``), so
create and check ask the same nameserver.

Response time: from just before the queries are sent to the first answer with an
allowed record, in milliseconds.
"""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Awaitable, Callable

import dns.asyncbackend
import dns.asyncresolver
import dns.exception
import dns.nameserver
import dns.resolver
import trio

from engine.targets import InvalidTarget, Target, is_ip, parse_host, strip_scheme, url_parser

from ._probe_type import ProbeContext, ProbeType
from ._result import ProbeFailure, ProbeResult, ProbeSpec
from ._source import SourceAddress
from ._tcp import AddressPolicy

__all__ = ["DNS", "make_resolver", "nameserver_resolver", "parse_dns_url", "probe_dns"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_BACKEND = dns.asyncbackend.get_backend("trio")
_LIFETIME_MARGIN_SECONDS = 1.0
_DNS_EXAMPLE = "a dns monitor needs a host name, for example example.com"


def make_resolver(
    nameserver: tuple[str, int] | None, source: SourceAddress | None = None
) -> dns.asyncresolver.Resolver:
    """A resolver for dns checks.

    Args:
        nameserver: ``(ip, port)`` of the one nameserver to ask, or ``None`` for the
            system's nameservers (read from ``/etc/resolv.conf`` now, once).
        source: the probes' source address (``_source``), or ``None``: with one, only
            the nameservers of its family are kept (a query from it cannot reach the
            others).

    Returns:
        The resolver. Without a usable system configuration (or no nameserver of the
        source's family) it has no nameservers, and every dns check fails with
        ``dns_failure`` (the service still starts).
    """
    if nameserver is not None:
        resolver = dns.asyncresolver.Resolver(configure=False)
        resolver.nameservers = [dns.nameserver.Do53Nameserver(nameserver[0], nameserver[1])]
    else:
        try:
            resolver = dns.asyncresolver.Resolver(configure=True)
        except dns.resolver.NoResolverConfiguration:
            resolver = dns.asyncresolver.Resolver(configure=False)
            resolver.nameservers = []
    if source is not None:
        resolver.nameservers = [
            server for server in resolver.nameservers if _version(server) == source.ip.version
        ]
    return resolver


def _version(server: str | dns.nameserver.Nameserver) -> int | None:
    """4 or 6 for a nameserver given by its address; None for one that is not (DoH)."""
    text = server if isinstance(server, str) else getattr(server, "address", "")
    try:
        return ipaddress.ip_address(text.split("%", 1)[0]).version
    except ValueError:
        return None


async def probe_dns(
    resolver: dns.asyncresolver.Resolver,
    host: str,
    timeout_seconds: float,
    policy: AddressPolicy | None = None,
    source: SourceAddress | None = None,
) -> float:
    """Resolve ``host`` (A and AAAA) with ``resolver`` and screen the answers.

    Args:
        resolver: from `make_resolver`.
        host: a host name (as in `engine.targets.Target.host`).
        timeout_seconds: the check's timeout; the caller enforces it, dnspython's own
            lifetime is set a little longer so that the caller's timeout decides.
        policy: the address policy applied to every address in the answers (refused
            ones are dropped), or ``None`` to allow every address.
        source: the address the queries leave from (``_source``; ``resolver`` made with
            the same one), or ``None`` for the system's choice.

    Returns:
        The time to the first answer with an allowed record, in milliseconds.

    Raises:
        ProbeFailure: ``target_denied`` (every address in the answers is refused),
            ``dns_failure`` (NXDOMAIN, no A/AAAA record, nameserver failure, no
            nameserver configured) or ``timeout`` (dnspython gave up first).
    """
    if not resolver.nameservers:
        message = "no DNS nameserver is configured"
        if source is not None:
            message += f" of {source.version_name}, the family of the source address {source.ip}"
        raise ProbeFailure("dns_failure", message)
    lifetime = timeout_seconds + _LIFETIME_MARGIN_SECONDS
    started = time.perf_counter()
    answered_after: float | None = None
    errors: list[Exception] = []
    refusals: list[str] = []
    empty = 0

    async def query(rdtype: str) -> None:
        nonlocal answered_after, empty
        try:
            addresses = await _addresses(resolver, host, rdtype, lifetime, source)
        except (dns.exception.DNSException, OSError) as exc:
            errors.append(exc)
            return
        if not addresses:
            empty += 1
            return
        allowed = _screen(host, addresses, policy, refusals)
        if allowed and answered_after is None:
            answered_after = time.perf_counter() - started
            nursery.cancel_scope.cancel()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(query, "A")
        nursery.start_soon(query, "AAAA")
    if answered_after is not None:
        return answered_after * 1000.0
    if refusals:
        raise ProbeFailure("target_denied", refusals[0])
    raise _failure(host, errors, empty)


def nameserver_resolver(
    nameserver: tuple[str, int] | None,
) -> Callable[[str], Awaitable[list[IPAddress]]]:
    """A resolver function for `engine.policy.TargetPolicy.dns_resolver`: every A and
    AAAA address of a name, asked of ``nameserver`` (``(ip, port)``, or ``None`` for the
    system's nameservers as `make_resolver` reads them, once, here), as dns checks ask.

    The function it returns raises `OSError` when the name does not resolve (NXDOMAIN,
    no address, a failing or silent nameserver: dnspython gives up after 10 s, and the
    caller usually sooner); it waits for both queries and returns the addresses in
    answer order, IPv4 first.
    """
    resolver = make_resolver(nameserver)

    async def resolve(host: str) -> list[IPAddress]:
        if not resolver.nameservers:
            raise OSError("no DNS nameserver is configured")
        found: dict[str, list[IPAddress]] = {}
        failures: list[Exception] = []

        async def query(rdtype: str) -> None:
            try:
                found[rdtype] = await _addresses(resolver, host, rdtype, _RESOLVE_LIFETIME)
            except (dns.exception.DNSException, OSError) as exc:
                failures.append(exc)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(query, "A")
            nursery.start_soon(query, "AAAA")
        addresses = found.get("A", []) + found.get("AAAA", [])
        if not addresses:
            raise OSError(f"{host} does not resolve: {failures[0] if failures else 'no address'}")
        return addresses

    return resolve


_RESOLVE_LIFETIME = 10.0
"""dnspython's lifetime of a `nameserver_resolver` query, in seconds (the create-time
screen gives up sooner, after ``TargetPolicy.resolve_timeout_seconds``)."""


async def _addresses(
    resolver: dns.asyncresolver.Resolver,
    host: str,
    rdtype: str,
    lifetime: float,
    source: SourceAddress | None = None,
) -> list[IPAddress]:
    """The addresses of one A or AAAA answer (empty for a NOERROR answer without one),
    asked from ``source`` when one is given.

    Raises:
        dns.exception.DNSException, OSError: as dnspython raises them.
    """
    answer = await resolver.resolve(
        host,
        rdtype,
        raise_on_no_answer=False,
        lifetime=lifetime,
        backend=_BACKEND,
        source=None if source is None else source.sockaddr[0],
    )
    if answer.rrset is None:
        return []
    return [ipaddress.ip_address(record.address) for record in answer.rrset]


def _screen(
    host: str, addresses: list[IPAddress], policy: AddressPolicy | None, refusals: list[str]
) -> list[IPAddress]:
    """The addresses ``policy`` allows; the reason for each refused one goes to
    ``refusals`` (worded as the other probes word ``target_denied``)."""
    if policy is None:
        return addresses
    allowed: list[IPAddress] = []
    for address in addresses:
        reason = policy(address)
        if reason is None:
            allowed.append(address)
        else:
            refusals.append(f"{host} resolves to {address}, which is not allowed: {reason}")
    return allowed


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


async def _check(context: ProbeContext, spec: ProbeSpec, target: Target) -> ProbeResult:
    """The dns type's check: `probe_dns` on the target's name."""
    return ProbeResult.up(
        await probe_dns(
            context.dns_resolver, target.host, spec.timeout_seconds, context.policy, context.source
        )
    )


@url_parser
def parse_dns_url(url: str) -> Target:
    """The ``dns`` type's ``url`` rules (module docstring): ``url`` to a `Target` without
    a port.

    Raises:
        InvalidTarget: ``url`` is not a host name; nothing else escapes (`url_parser`).
    """
    rest = strip_scheme(url, "dns", _DNS_EXAMPLE)
    if any(c in rest for c in "/?#@[]") or (":" in rest and not is_ip(rest)):
        raise InvalidTarget(f"{_DNS_EXAMPLE} (no port, path or scheme other than dns://)")
    if is_ip(rest):
        raise InvalidTarget(
            "a dns monitor checks that a host name resolves; give a name such as "
            "example.com, not an IP address (use a ping or tcp monitor for an address)"
        )
    host = parse_host(rest, bracketed=False, example=_DNS_EXAMPLE)
    return Target(type="dns", host=host, port=None, url=url, scheme=None)


DNS = ProbeType(name="dns", parse=parse_dns_url, check=_check, resolves_with="nameserver")
"""The ``dns`` probe type (``_registry``)."""
