"""The address a node's probes leave from (``uptrio serve --probe-source-address IP``):
`SourceAddress`, checked once at start-up by `source_address`.

What it binds (docs/checks.md, "Source address"): the socket of every probe, the four
types alike. http and tcp bind their TCP connections, ping its ICMP socket, dns its
queries to the nameserver (dnspython's ``source``). Webhook deliveries and notification
sends are no probes: they leave from whatever address the system picks.

Families, as Prometheus blackbox_exporter's ``source_ip_address``, whose Go dialer keeps
only the target's addresses of its local address's family ("no suitable address" when
none is left): a probe uses only the addresses of the source's family (`keep_family`,
applied by ``_tcp.resolve`` before the address policy), and a target that has none
fails ``unreachable`` with a message that names the source. The dns checks ask only the
nameservers of that family (``_dns.make_resolver``); ``uptrio serve`` refuses a
``--dns-nameserver`` of the other family at start-up.

Without the flag nothing here runs: the probes test ``source is None`` and skip the bind,
so a check makes the same system calls as before.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass

from ._result import ProbeFailure

__all__ = ["SourceAddress", "keep_family", "source_address"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True, slots=True)
class SourceAddress:
    """A local address probes bind before they connect or send.

    Attributes:
        ip: the address (an IPv6 one may carry a zone, ``fe80::1%eth0``).
        family: ``AF_INET`` or ``AF_INET6``.
        sockaddr: what ``socket.bind`` takes: ``(ip, 0)``, the port left to the system.
    """

    ip: IPAddress
    family: int
    sockaddr: tuple[str, int]

    @property
    def version_name(self) -> str:
        """``"IPv4"`` or ``"IPv6"``, for messages."""
        return f"IPv{self.ip.version}"


def source_address(text: str) -> SourceAddress:
    """Parse ``text`` as a source address and prove that this host can bind it.

    The proof is one UDP socket bound to ``(ip, 0)`` and closed, at start-up, so that a
    typo or an address this host does not have stops ``uptrio serve`` before it serves,
    rather than failing every check.

    Raises:
        ValueError: ``text`` is not an IP address, is a multicast or unspecified address
            (no source for a unicast probe), or this host cannot bind it (the message
            gives the system's reason, e.g. "Cannot assign requested address").
    """
    try:
        ip = ipaddress.ip_address(text.strip())
    except ValueError:
        raise ValueError(f"not an IP address: {text!r}") from None
    if ip.is_multicast or ip.is_unspecified:
        raise ValueError(f"{ip} cannot be a source address (give one of this host's addresses)")
    family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
    source = SourceAddress(ip=ip, family=family, sockaddr=(str(ip), 0))
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            probe.bind(source.sockaddr)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ValueError(f"cannot bind {ip} ({reason}): is it an address of this host?") from None
    return source


def keep_family(
    host: str, addresses: list[tuple[int, tuple[object, ...]]], source: SourceAddress
) -> list[tuple[int, tuple[object, ...]]]:
    """The ``addresses`` (``_tcp.Address``) of ``source``'s family, in their order.

    Raises:
        ProbeFailure: ``unreachable`` when none is of that family.
    """
    kept = [address for address in addresses if address[0] == source.family]
    if not kept:
        other = "IPv6" if source.family == socket.AF_INET else "IPv4"
        raise ProbeFailure(
            "unreachable",
            f"{host} has only {other} addresses ({addresses[0][1][0]}), and probes from "
            f"this node leave from {source.ip}, an {source.version_name} address "
            "(--probe-source-address)",
        )
    return kept
