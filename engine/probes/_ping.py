"""The ``ping`` probe type (`PING`): one ICMP echo request, up when the matching echo reply
arrives.

A ping monitor's ``url`` is a host name or an IP address, optionally ``ping://host``:
``example.com``, ``192.0.2.10``, ``2001:db8::1``, ``[2001:db8::1]``,
``ping://example.com`` (`parse_ping_url`; the host rules: ``engine.targets``).

Built on ICMP sockets opened directly on trio rather than icmplib through trio-asyncio.
Why: one echo and one reply is about 60 lines here, it needs no asyncio loop (the probe
then works in any trio program and test, and skips two loop hops per check), and the
socket factory can be injected, which is how the tests reach the ``ping_not_permitted``
path without mocking anything else. icmplib does the same thing underneath (one ICMP
socket per ping, replies matched by identifier and sequence).

Sockets, in the order `Prober` found usable at start-up:

- ``SOCK_RAW`` (root or CAP_NET_RAW): the kernel hands every ICMP packet on the host to
  every raw socket, so replies are matched on type, sequence number and a random
  16-byte payload token; the identifier is random too. IPv4 raw packets arrive with their
  IP header, which is skipped. An ICMP destination-unreachable or time-exceeded message
  quoting our request ends the check early as ``unreachable``.
- ``SOCK_DGRAM`` ("ping sockets", allowed by ``net.ipv4.ping_group_range``): the kernel
  sets the identifier and delivers only our replies.

A `PermissionError` from every kind (or ``EPERM``/``EACCES`` when sending) is
``ping_not_permitted``, never a crash.

Response time: the round trip, from just before the request is sent to the reply being
received, in milliseconds.
"""

from __future__ import annotations

import errno
import os
import random
import socket
import struct
import time
from collections.abc import Callable, Sequence

import trio

from engine.targets import InvalidTarget, Target, is_ip, parse_host, strip_scheme, url_parser

from ._probe_type import ProbeContext, ProbeType
from ._result import ProbeFailure, ProbeResult, ProbeSpec
from ._source import SourceAddress
from ._tcp import AddressPolicy, os_failure, resolve

__all__ = [
    "PING",
    "PING_KINDS",
    "SocketFactory",
    "parse_ping_url",
    "permitted_ping_kinds",
    "ping_address",
    "probe_ping",
]

SocketFactory = Callable[[int, int, int], trio.socket.SocketType]
"""Creates a trio socket from (family, type, proto), like `trio.socket.socket`."""

PING_KINDS: tuple[int, ...] = (socket.SOCK_RAW, socket.SOCK_DGRAM)
"""ICMP socket types to try, in order, when the usable ones are not known."""

_ECHO_REQUEST: dict[int, int] = {socket.AF_INET: 8, socket.AF_INET6: 128}
_ECHO_REPLY: dict[int, int] = {socket.AF_INET: 0, socket.AF_INET6: 129}
_ERRORS: dict[int, frozenset[int]] = {
    socket.AF_INET: frozenset({3, 11}),
    socket.AF_INET6: frozenset({1, 3}),
}
_PROTO: dict[int, int] = {
    socket.AF_INET: socket.IPPROTO_ICMP,
    socket.AF_INET6: socket.IPPROTO_ICMPV6,
}
_HEADER = struct.Struct("!BBHHH")  # type, code, checksum, identifier, sequence
_TOKEN_BYTES = 16
_SEQUENCE = 1
_PING_EXAMPLE = "a ping monitor needs a host name or an IP address, for example example.com"


def permitted_ping_kinds() -> tuple[int, ...]:
    """The ICMP socket types this process may open (IPv4 checked), preferred first.

    Opens and closes a blocking socket of each kind once; `Prober` calls it at start-up
    so that checks do not retry a kind that cannot work. An empty tuple means ping
    checks fail with ``ping_not_permitted``.
    """
    kinds = []
    for kind in PING_KINDS:
        try:
            socket.socket(socket.AF_INET, kind, socket.IPPROTO_ICMP).close()
        except OSError:
            continue
        kinds.append(kind)
    return tuple(kinds)


async def probe_ping(
    host: str,
    policy: AddressPolicy | None,
    kinds: Sequence[int] = PING_KINDS,
    source: SourceAddress | None = None,
) -> float:
    """The ``ping`` probe: resolve ``host`` (only the addresses of ``source``'s family
    when one is given), apply the policy, ping the first address from ``source``.

    Returns:
        The round-trip time in milliseconds.

    Raises:
        ProbeFailure: see `._tcp.resolve` and `ping_address`.
    """
    addresses = await resolve(host, 0, policy, kind=socket.SOCK_DGRAM, source=source)
    family, sockaddr = addresses[0]
    return await ping_address(family, str(sockaddr[0]), kinds=kinds, source=source)


async def ping_address(
    family: int,
    ip: str,
    *,
    kinds: Sequence[int] = PING_KINDS,
    socket_factory: SocketFactory = trio.socket.socket,
    source: SourceAddress | None = None,
) -> float:
    """Send one ICMP echo request to ``ip`` and wait for its reply (no time limit: the
    caller's cancel scope bounds it).

    Args:
        family: ``AF_INET`` or ``AF_INET6``.
        ip: the address literal to ping.
        kinds: ICMP socket types to try in order (`permitted_ping_kinds`).
        socket_factory: opens the socket; tests inject one that raises.
        source: the local address the echo request leaves from (the socket is bound to
            it; ``_source``), or ``None`` for the system's choice. Of ``family``.

    Returns:
        The round-trip time in milliseconds.

    Raises:
        ProbeFailure: ``ping_not_permitted`` when no kind of ICMP socket may be opened or
            used; ``unreachable`` on an ICMP error or a routing error; other codes from
            `._tcp.os_failure` for other socket errors.
    """
    sock = _open(family, kinds, socket_factory)
    raw = sock.type == socket.SOCK_RAW
    with sock:
        identifier = random.getrandbits(16)
        token = os.urandom(_TOKEN_BYTES)
        packet = _echo_request(family, identifier, token)
        started = time.perf_counter()
        try:
            if source is not None:
                await sock.bind(source.sockaddr)
            await sock.sendto(packet, (ip, 0))
            while True:
                data, peer = await sock.recvfrom(2048)
                verdict = _classify(data, family, raw, identifier, token)
                if verdict == "reply" and peer[0] == ip:
                    return (time.perf_counter() - started) * 1000.0
                if verdict == "error":
                    raise ProbeFailure("unreachable", f"{ip} is unreachable (ICMP from {peer[0]})")
        except PermissionError as exc:
            raise ProbeFailure("ping_not_permitted", f"not allowed to send ICMP: {exc}") from None
        except OSError as exc:
            raise os_failure(exc, ip) from None


def _open(family: int, kinds: Sequence[int], factory: SocketFactory) -> trio.socket.SocketType:
    for kind in kinds:
        try:
            return factory(family, kind, _PROTO[family])
        except PermissionError:
            continue
        except OSError as exc:
            if exc.errno in (errno.EPERM, errno.EACCES, errno.EPROTONOSUPPORT):
                continue
            raise os_failure(exc, "an ICMP socket") from None
    raise ProbeFailure(
        "ping_not_permitted",
        "this process may not open ICMP sockets (it needs root, CAP_NET_RAW or "
        "net.ipv4.ping_group_range)",
    )


def _echo_request(family: int, identifier: int, token: bytes) -> bytes:
    header = _HEADER.pack(_ECHO_REQUEST[family], 0, 0, identifier, _SEQUENCE)
    if family == socket.AF_INET6:  # the kernel fills in the ICMPv6 checksum
        return header + token
    checksum = _checksum(header + token)
    return _HEADER.pack(_ECHO_REQUEST[family], 0, checksum, identifier, _SEQUENCE) + token


def _checksum(data: bytes) -> int:
    """The Internet checksum (RFC 1071) of ``data``."""
    if len(data) % 2:
        data += b"\0"
    total: int = sum(struct.unpack(f"!{len(data) // 2}H", data))
    total = (total >> 16) + (total & 0xFFFF)
    total += total >> 16
    return ~total & 0xFFFF


def _classify(data: bytes, family: int, raw: bool, identifier: int, token: bytes) -> str:
    """``"reply"`` for our echo reply, ``"error"`` for an ICMP error quoting our request,
    ``"other"`` for anything else (other processes' ICMP, our own request on loopback).

    ``raw`` IPv4 packets start with the IP header; the others start with ICMP.
    """
    if raw and family == socket.AF_INET:
        if len(data) < 20:
            return "other"
        data = data[(data[0] & 0x0F) * 4 :]
    if len(data) < _HEADER.size:
        return "other"
    icmp_type, _, _, _, sequence = _HEADER.unpack_from(data)
    if icmp_type == _ECHO_REPLY[family]:
        if sequence == _SEQUENCE and data[_HEADER.size : _HEADER.size + _TOKEN_BYTES] == token:
            return "reply"
        return "other"
    if raw and icmp_type in _ERRORS[family]:
        quoted = data[8:]  # after the error's own header comes our packet
        if family == socket.AF_INET:
            if len(quoted) < 20:
                return "other"
            quoted = quoted[(quoted[0] & 0x0F) * 4 :]
        else:
            quoted = quoted[40:]
        if len(quoted) >= _HEADER.size:
            q_type, _, _, q_ident, q_sequence = _HEADER.unpack_from(quoted)
            if (
                q_type == _ECHO_REQUEST[family]
                and q_ident == identifier
                and q_sequence == _SEQUENCE
            ):
                return "error"
    return "other"


async def _check(context: ProbeContext, spec: ProbeSpec, target: Target) -> ProbeResult:
    """The ping type's check: `probe_ping` on the target's host, with the ICMP socket
    types this process may open (``ping_not_permitted`` when none)."""
    if not context.ping_kinds:
        raise ProbeFailure(
            "ping_not_permitted",
            "this process may not open ICMP sockets (it needs root, CAP_NET_RAW "
            "or net.ipv4.ping_group_range)",
        )
    return ProbeResult.up(
        await probe_ping(target.host, context.policy, context.ping_kinds, context.source)
    )


@url_parser
def parse_ping_url(url: str) -> Target:
    """The ``ping`` type's ``url`` rules (module docstring): ``url`` to a `Target` without
    a port.

    Raises:
        InvalidTarget: ``url`` is not a host; nothing else escapes (`url_parser`).
    """
    rest = strip_scheme(url, "ping", _PING_EXAMPLE)
    bracketed = rest.startswith("[") and rest.endswith("]")
    if bracketed:
        rest = rest[1:-1]
    if any(c in rest for c in "/?#@[]") or (":" in rest and not is_ip(rest)):
        raise InvalidTarget(f"{_PING_EXAMPLE} (no port or path)")
    host = parse_host(rest, bracketed=bracketed, example=_PING_EXAMPLE)
    return Target(type="ping", host=host, port=None, url=url, scheme=None)


PING = ProbeType(name="ping", parse=parse_ping_url, check=_check)
"""The ``ping`` probe type (``_registry``)."""
