"""The target policy: which addresses a monitor may make Uptrio contact (OWASP API7, SSRF).

A monitor makes the service open connections to an address its user chose. Without a
policy, anyone holding a ``monitors.create`` token can point a check at the cloud metadata
service (``http://169.254.169.254/``, which hands out credentials), at the database next
to Uptrio, or at anything else on its private network, and read the outcome from the
check results. One object, `TargetPolicy`, decides, and it is applied in two places:

1. **At create and PATCH** (web layer, `TargetPolicy.check_target`): an IP literal is
   checked as is; a host name is checked by name (well-known metadata names), and, when
   ``deny_private`` is on, resolved (bounded by ``resolve_timeout_seconds``) and refused if
   *any* of its addresses is refused. A name that does not resolve, or not in time, is
   accepted: it is checked again at every check. The API answers 422 ``target_not_allowed``
   on ``url``. The name of a dns monitor is resolved the way its checks resolve it, by
   asking the dns checks' nameserver (``dns_resolver``: ``--dns-nameserver``, else the
   system's nameservers, never ``/etc/hosts``); other names by the system resolver
   (``resolver``), as their checks do.
2. **At every check, after name resolution** (engine, through the `engine.Prober`'s
   ``address_policy`` hook, which takes `TargetPolicy.check_address`): refused addresses
   are dropped, the probe connects to exactly an address that was checked (no second
   resolution, so DNS rebinding cannot slip past), and a check whose every address is
   refused fails with ``target_denied``. An http check re-applies it at every redirect
   hop; a dns check applies it to the addresses the nameserver answers.

What is refused (`TargetPolicy.check_address`):

- **Always**, unless ``allow_metadata``: link-local addresses (``169.254.0.0/16``,
  ``fe80::/10``) and the well-known cloud metadata addresses outside them
  (`METADATA_ADDRESSES`: AWS's IPv6 IMDS ``fd00:ec2::254``, Alibaba's ``100.100.100.200``,
  Azure's wire server ``168.63.129.16``, ...), plus the metadata host names
  (`METADATA_HOST_NAMES`).
- **With** ``deny_private`` (``uptrio serve --deny-private-targets``; off by default, so a
  self-hosted Uptrio can watch its own network): also unspecified (``0.0.0.0``, ``::``),
  loopback, multicast, link-local, private (RFC 1918, ``fc00::/7``), reserved and every
  other address that is not globally routable (shared ``100.64.0.0/10``, documentation and
  benchmark ranges, site-local ``fec0::/10``).

IPv6 forms that embed an IPv4 address (IPv4-mapped ``::ffff:a.b.c.d``, IPv4-compatible
``::a.b.c.d``, NAT64 ``64:ff9b::/96``, 6to4 ``2002::/16``, Teredo ``2001::/32``) are judged
by the IPv4 address they reach as well, so ``::ffff:169.254.169.254`` is refused like
``169.254.169.254``; a NAT64 address is judged by its IPv4 address alone (an IPv6-only
host reaches public IPv4 services through ``64:ff9b::/96``).

dns monitors only talk to the configured nameserver, never to the addresses in the
answer, but the answers are screened all the same, at create and PATCH and at every
check (docs/api.md, "Target policy"): a dns monitor on an internal name would otherwise
tell its owner which internal names exist.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

import trio

from engine.probes import PROBE_TYPES, nameserver_resolver, numeric_address
from engine.targets import Target

__all__ = [
    "METADATA_ADDRESSES",
    "METADATA_HOST_NAMES",
    "IPAddress",
    "Resolver",
    "TargetPolicy",
    "system_dns_resolver",
    "system_resolver",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

Resolver = Callable[[str], Awaitable[list[IPAddress]]]
"""Resolves a host name to its addresses; raises `OSError` when it does not resolve."""

METADATA_ADDRESSES: frozenset[IPAddress] = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean, Oracle
        "169.254.170.2",  # AWS ECS task metadata
        "fd00:ec2::254",  # AWS IMDS over IPv6
        "100.100.100.200",  # Alibaba Cloud
        "168.63.129.16",  # Azure wire server
        "192.0.0.192",  # Oracle Cloud Classic
    )
)
"""Cloud metadata services' addresses, refused unless ``allow_metadata`` (beside all of
``169.254.0.0/16`` and ``fe80::/10``, which are refused the same way)."""

METADATA_HOST_NAMES = frozenset(
    {
        "metadata",
        "metadata.google.internal",
        "metadata.goog",
        "instance-data",
        "instance-data.ec2.internal",
    }
)
"""Host names of metadata services, refused by name unless ``allow_metadata`` (lowercase,
without the trailing dot)."""

_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
_SITE_LOCAL = ipaddress.ip_network("fec0::/10")


async def system_resolver(host: str) -> list[IPAddress]:
    """Every address of ``host`` from the system resolver (getaddrinfo in a worker thread,
    abandoned on cancellation).

    Raises:
        OSError: the name does not resolve (`socket.gaierror` is a subclass).
    """
    try:
        infos = await trio.socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except UnicodeError as exc:
        raise OSError(f"{host!r} cannot be resolved: {exc}") from None
    found: list[IPAddress] = []
    for *_, sockaddr in infos:
        ip = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if ip not in found:
            found.append(ip)
    return found


def system_dns_resolver() -> Resolver:
    """A resolver of every A and AAAA address of a name from the system's nameservers,
    asked the way dns checks ask them without ``--dns-nameserver`` (dnspython,
    ``/etc/resolv.conf`` read now, once; ``/etc/hosts`` never read). The resolver raises
    ``OSError`` when the name does not resolve."""
    return nameserver_resolver(None)


def _embedded_ipv4(ip: IPAddress) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address reaches (see the module docstring)."""
    if not isinstance(ip, ipaddress.IPv6Address):
        return []
    found: list[ipaddress.IPv4Address] = []
    if ip.ipv4_mapped is not None:
        found.append(ip.ipv4_mapped)
    packed = ip.packed
    if packed[:12] == bytes(12) and int(ip) > 1:  # IPv4-compatible ::a.b.c.d
        found.append(ipaddress.IPv4Address(packed[12:]))
    if any(ip in net for net in _NAT64):
        found.append(ipaddress.IPv4Address(packed[12:]))
    if ip.sixtofour is not None:
        found.append(ip.sixtofour)
    if ip.teredo is not None:
        found.extend(ip.teredo)
    return found


@dataclass(frozen=True, slots=True, kw_only=True)
class TargetPolicy:
    """Which addresses checks may contact (rules in the module docstring).

    Immutable; one per process, passed explicitly to the web layer (``Dependencies``) and to
    the `engine.Prober` (as its ``address_policy``). Calling the policy is
    `check_address`, so the object itself is an ``AddressPolicy``.

    Attributes:
        deny_private: refuse every address that is not globally routable
            (``--deny-private-targets``; default off).
        allow_metadata: allow link-local and cloud metadata addresses
            (``--allow-metadata-targets``; default off, so they are refused). Has no
            effect on link-local addresses while ``deny_private`` is on.
        resolve_timeout_seconds: how long `check_target` waits for a host name to resolve
            at create and PATCH, in seconds (default 2 s).
        resolver: resolves the host names of http, tcp and ping monitors for
            `check_target` (default: `system_resolver`, as their checks resolve them);
            tests inject their own.
        dns_resolver: resolves the names of dns monitors for `check_target`: the
            nameserver their checks ask (`engine.probes.nameserver_resolver` of
            ``--dns-nameserver``; default: `system_dns_resolver`).
    """

    deny_private: bool = False
    allow_metadata: bool = False
    resolve_timeout_seconds: float = 2.0
    resolver: Resolver = field(default=system_resolver, compare=False, repr=False)
    dns_resolver: Resolver = field(default_factory=system_dns_resolver, compare=False, repr=False)

    def __call__(self, ip: IPAddress) -> str | None:
        """Same as `check_address`: lets the policy serve as the Prober's address policy."""
        return self.check_address(ip)

    def check_address(self, ip: IPAddress) -> str | None:
        """Whether a check may contact ``ip``.

        Returns:
            None when allowed, else the reason in a few words (for example ``"a loopback
            address"``), used in the 422 message and in the check's ``target_denied``.
        """
        for inner in _embedded_ipv4(ip):
            reason = self._check_one(inner)
            if reason is not None:
                return f"{reason} ({inner} embedded in {ip})"
        if any(ip in net for net in _NAT64):
            return None  # a NAT64 gateway reaches exactly the embedded IPv4 address
        return self._check_one(ip)

    def check_host_name(self, host: str) -> str | None:
        """Whether a host name may be used at all (before any resolution): the metadata
        names of `METADATA_HOST_NAMES` are refused unless ``allow_metadata``.

        Returns:
            None when allowed, else the reason.
        """
        if not self.allow_metadata and host.lower().rstrip(".") in METADATA_HOST_NAMES:
            return "a cloud metadata host name"
        return None

    async def check_target(self, target: Target) -> str | None:
        """The create/PATCH check of a parsed monitor target (module docstring, point 1).

        An IP literal is checked with `check_address`, and so is a numeric form that
        the checks' resolver reads as an address (``0xa9fea9fe`` is ``169.254.169.254``:
        `engine.probes.numeric_address`, getaddrinfo without a look-up), so that create
        refuses what every check or delivery would refuse; a host name with
        `check_host_name`, then, when ``deny_private`` is on, by resolving it (at most
        ``resolve_timeout_seconds``) as the type's checks do (its ``resolves_with``,
        `engine.probes.ProbeType`: a dns monitor's name with ``dns_resolver``, any
        other with ``resolver``) and checking every address. A name that does not
        resolve, or not in time, is allowed: the check-time policy still applies.

        Returns:
            None when allowed, else a sentence saying why (for the 422 message).

        Error handling:
            Resolution failures are answers (allowed), not errors; `trio.Cancelled` passes.
        """
        # a name asked of the nameserver (dns) goes as a name, whatever it looks like
        by_nameserver = PROBE_TYPES[target.type].resolves_with == "nameserver"
        ip = None if by_nameserver else numeric_address(target.host)
        if ip is not None:
            reason = self.check_address(ip)
            return None if reason is None else f"{ip} is {reason}"
        reason = self.check_host_name(target.host)
        if reason is not None:
            return f"{target.host} is {reason}"
        if not self.deny_private:
            return None
        addresses: Iterable[IPAddress] = ()
        with trio.move_on_after(self.resolve_timeout_seconds):
            try:
                resolve = self.dns_resolver if by_nameserver else self.resolver
                addresses = await resolve(target.host)
            except OSError:
                return None
        for address in addresses:
            reason = self.check_address(address)
            if reason is not None:
                return f"{target.host} resolves to {address}, {reason}"
        return None

    def _check_one(self, ip: IPAddress) -> str | None:
        if not self.allow_metadata and (ip in METADATA_ADDRESSES or ip.is_link_local):
            return "a link-local or cloud metadata address"
        if not self.deny_private:
            return None
        if ip.is_unspecified:
            return "the unspecified address"
        if ip.is_loopback:
            return "a loopback address"
        if ip.is_multicast:
            return "a multicast address"
        if ip.is_link_local:
            return "a link-local address"
        if isinstance(ip, ipaddress.IPv6Address) and ip in _SITE_LOCAL:
            return "a site-local address"
        if ip.is_reserved:
            return "a reserved address"
        if ip.is_private:
            return "a private address"
        if not ip.is_global:
            return "not a globally routable address"
        return None
