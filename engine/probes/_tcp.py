"""Name resolution, the address policy and TCP connects; the ``tcp`` probe type (`TCP`);
what a failed connection or TLS stream means (`os_failure`, `stream_failure`).

A tcp monitor's ``url`` is ``host:port`` or ``tcp://host:port``, the port 1 to 65,535
required: ``db.example.com:5432``, ``tcp://10.0.0.5:6379``, ``[2001:db8::1]:22``
(`parse_tcp_url`; the host rules: ``engine.targets``). The check is up when a TCP
connection opens (`probe_tcp`).

The http, tcp and ping probes share `resolve` (and http and tcp `connect`), which
together close the DNS rebinding hole: the host name is resolved once
(`trio.socket.getaddrinfo` in a worker thread; IP literals skip it through a cached
fast path), every resolved address is checked against the address policy, and the
connection goes to exactly one of the checked addresses. The host name is never handed
to anything that could resolve it again.

With several allowed addresses, `connect` races them the RFC 8305 ("happy eyeballs")
way, like `trio.open_tcp_stream`: first and second attempts use different address
families, a new attempt starts 250 ms after the previous one or as soon as it fails, and
the first connection that opens wins. With one address (an IP literal, most single-
stack hosts) it connects directly, without a nursery.
"""

from __future__ import annotations

import errno
import functools
import ipaddress
import socket
import ssl
import time

import trio

from engine.targets import InvalidTarget, Target, parse_host, parse_port, strip_scheme, url_parser

from ._probe_type import AddressPolicy, ProbeContext, ProbeType
from ._result import ProbeFailure, ProbeResult, ProbeSpec
from ._source import SourceAddress, keep_family

__all__ = [
    "TCP",
    "Address",
    "AddressPolicy",
    "connect",
    "describe",
    "numeric_address",
    "os_failure",
    "parse_tcp_url",
    "probe_tcp",
    "resolve",
    "stream_failure",
]


Address = tuple[int, tuple[object, ...]]
"""One resolved address: (address family, socket address as `socket.connect` takes it)."""

HAPPY_EYEBALLS_DELAY_SECONDS = 0.25
"""Seconds to wait for a connection attempt before also trying the next address."""

_UNREACHABLE_ERRNOS = frozenset(
    {errno.ENETUNREACH, errno.EHOSTUNREACH, errno.EHOSTDOWN, errno.ENETDOWN}
)
_TCP_EXAMPLE = "a tcp monitor needs host:port, for example db.example.com:5432"
_BRACKETS = f"{_TCP_EXAMPLE} (an IPv6 address goes in brackets: [::1]:5432)"


async def resolve(
    host: str,
    port: int,
    policy: AddressPolicy | None,
    *,
    kind: int = socket.SOCK_STREAM,
    source: SourceAddress | None = None,
) -> list[Address]:
    """Resolve ``host`` to the addresses a probe may contact, in connection order.

    Args:
        host: a host name or IP literal (as in `engine.targets.Target.host`).
        port: the port to put in the socket addresses (0 for ping).
        policy: the address policy, or ``None`` to allow every address.
        kind: the socket type to resolve for (``SOCK_STREAM``; ping uses ``SOCK_DGRAM``).
        source: the node's probe source address, or ``None``: with one, only the
            addresses of its family are kept (``_source``), before the policy.

    Returns:
        One or more addresses, duplicates removed, families alternated (RFC 6555 §5.4).

    Raises:
        ProbeFailure: ``dns_failure`` when the name does not resolve; ``unreachable``
            when no address is of ``source``'s family; ``target_denied`` when the policy
            refuses every resolved address (refused addresses are dropped and the others
            kept).
    """
    literal = _ip_literal(host, port)
    if literal is not None:  # the common case of monitors on IP addresses: no look-up
        addresses = [literal]
        # No I/O here; every probe goes on to wait for its connection, which yields.
        await trio.lowlevel.checkpoint_if_cancelled()
    else:
        addresses = await _lookup(host, port, kind)
    if source is not None:
        addresses = keep_family(host, addresses, source)
    if policy is not None:
        allowed: list[Address] = []
        refusal = ""
        for address in addresses:
            reason = policy(ipaddress.ip_address(str(address[1][0])))
            if reason is None:
                allowed.append(address)
            elif not refusal:
                refusal = f"{host} resolves to {address[1][0]}, which is not allowed: {reason}"
        if not allowed:
            raise ProbeFailure("target_denied", refusal)
        addresses = allowed
    if not addresses:  # getaddrinfo never answers an empty list, but be sure
        raise ProbeFailure("dns_failure", f"{host} has no address")
    for i in range(1, len(addresses)):
        if addresses[i][0] != addresses[0][0]:
            if i != 1:
                addresses.insert(1, addresses.pop(i))
            break
    return addresses


@functools.lru_cache(maxsize=4096)
def numeric_address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address ``host`` names without a look-up, read as `resolve` reads it: an IP
    literal, or one of the numeric IPv4 forms getaddrinfo takes (inet_aton's: hex
    ``0xa9fea9fe``, octal parts, fewer parts ``169.254.43518``, mixed
    ``0xa9.0xfe.0xa9.0xfe``) that `ipaddress` does not; None for a host name. No I/O:
    getaddrinfo with ``AI_NUMERICHOST`` never asks a resolver."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM, flags=socket.AI_NUMERICHOST)
    except (OSError, UnicodeError):
        return None
    return ipaddress.ip_address(str(infos[0][4][0]).split("%", 1)[0])


def _ip_literal(host: str, port: int) -> Address | None:
    """The `Address` of an IP literal ``host`` (``None`` for a name), as getaddrinfo
    would answer it, without getaddrinfo's per-call cost."""
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return None
    if ip.version == 6:
        return (socket.AF_INET6, (ip.compressed, port, 0, 0))
    return (socket.AF_INET, (ip.compressed, port))


async def _lookup(host: str, port: int, kind: int) -> list[Address]:
    try:
        infos = await trio.socket.getaddrinfo(host, port, type=kind)
    except socket.gaierror as exc:
        raise ProbeFailure("dns_failure", f"{host} does not resolve: {exc.strerror}") from None
    except (OSError, UnicodeError) as exc:
        raise ProbeFailure("dns_failure", f"{host} does not resolve: {exc}") from None
    addresses: list[Address] = []
    for family, _type, _proto, _canonname, sockaddr in infos:
        address = (int(family), tuple(sockaddr))
        if address not in addresses:
            addresses.append(address)
    return addresses


def describe(address: Address) -> str:
    """``ip:port`` (``[ip]:port`` for IPv6) of an `Address`, for messages."""
    ip, port = address[1][0], address[1][1]
    return f"[{ip}]:{port}" if address[0] == socket.AF_INET6 else f"{ip}:{port}"


def os_failure(exc: OSError, where: str) -> ProbeFailure:
    """Translate an `OSError` met while talking to ``where`` into a `ProbeFailure`.

    ``ECONNREFUSED`` is ``connection_refused``; resets, aborts and broken pipes are
    ``connection_reset``; no route to the network or host is ``unreachable``; a kernel
    connect timeout is ``timeout``; anything else is ``connection_failed``.
    """
    reason = exc.strerror or str(exc) or type(exc).__name__
    if isinstance(exc, ConnectionRefusedError):
        return ProbeFailure("connection_refused", f"connection to {where} refused")
    if isinstance(exc, ConnectionResetError | ConnectionAbortedError | BrokenPipeError):
        return ProbeFailure("connection_reset", f"connection to {where} reset: {reason}")
    if exc.errno in _UNREACHABLE_ERRNOS:
        return ProbeFailure("unreachable", f"{where} is unreachable: {reason}")
    if exc.errno == errno.ETIMEDOUT:
        return ProbeFailure("timeout", f"connection to {where} timed out")
    return ProbeFailure("connection_failed", f"connection to {where} failed: {reason}")


def stream_failure(exc: trio.BrokenResourceError, where: str, *, handshake: bool) -> ProbeFailure:
    """Translate a broken `trio.SSLStream` to ``where`` (trio wraps the OS or TLS error as
    ``__cause__``): ``tls_error`` for a refused certificate or a failed handshake, else
    as `os_failure` says."""
    cause = exc.__cause__
    if isinstance(cause, ssl.SSLCertVerificationError):
        return ProbeFailure(
            "tls_error", f"TLS certificate of {where} not accepted: {cause.verify_message}"
        )
    if isinstance(cause, ssl.SSLError):
        return ProbeFailure("tls_error", f"TLS with {where} failed: {cause.reason or cause}")
    if isinstance(cause, OSError):
        return os_failure(cause, where)
    if handshake:
        return ProbeFailure("tls_error", f"{where} closed the connection during the TLS handshake")
    return ProbeFailure("connection_reset", f"connection to {where} broken: {cause or exc}")


async def connect(
    addresses: list[Address], source: SourceAddress | None = None
) -> trio.socket.SocketType:
    """Open a TCP connection to the first of ``addresses`` that accepts, from ``source``
    when one is given (each attempt's socket bound to it first; ``_source``).

    Returns:
        A connected trio socket; the caller closes it.

    Raises:
        ProbeFailure: from `os_failure` for the first address's error when no address
            accepts (a failed bind to ``source`` included).
    """
    if len(addresses) == 1:
        family, sockaddr = addresses[0]
        try:
            sock = trio.socket.socket(family, socket.SOCK_STREAM)
        except OSError as exc:  # out of file descriptors, address family unsupported
            raise os_failure(exc, describe(addresses[0])) from None
        try:
            if source is not None:
                await sock.bind(source.sockaddr)
            await sock.connect(sockaddr)
        except OSError as exc:
            sock.close()
            raise os_failure(exc, describe(addresses[0])) from None
        except BaseException:
            sock.close()
            raise
        return sock
    return await _connect_racing(addresses, source)


async def _connect_racing(
    addresses: list[Address], source: SourceAddress | None
) -> trio.socket.SocketType:
    winner: trio.socket.SocketType | None = None
    opened: list[trio.socket.SocketType] = []
    errors: list[tuple[Address, OSError]] = []

    async def attempt(address: Address, failed: trio.Event) -> None:
        nonlocal winner
        try:
            sock = trio.socket.socket(address[0], socket.SOCK_STREAM)
            opened.append(sock)
            if source is not None:
                await sock.bind(source.sockaddr)
            await sock.connect(address[1])
        except OSError as exc:
            errors.append((address, exc))
            failed.set()
            return
        if winner is None:
            winner = sock
            nursery.cancel_scope.cancel()

    try:
        async with trio.open_nursery() as nursery:
            for address in addresses:
                failed = trio.Event()
                nursery.start_soon(attempt, address, failed)
                with trio.move_on_after(HAPPY_EYEBALLS_DELAY_SECONDS):
                    await failed.wait()
    except BaseException:
        winner = None  # cancelled from outside: close the winner too, then re-raise
        raise
    finally:
        for sock in opened:
            if sock is not winner:
                sock.close()
    if winner is None:
        address, exc = errors[0]
        failure = os_failure(exc, describe(address))
        if len(errors) > 1:
            failure.message += f" (and {len(errors) - 1} other addresses failed)"
        raise failure
    return winner


async def probe_tcp(
    host: str, port: int, policy: AddressPolicy | None, source: SourceAddress | None = None
) -> float:
    """The ``tcp`` probe: up when a TCP connection to ``host:port`` opens, from
    ``source`` when one is given.

    The connection is closed as soon as it opens; nothing is sent.

    Returns:
        The connect time in milliseconds: from just before the first connection attempt
        (after name resolution) to the connection being open.

    Raises:
        ProbeFailure: see `resolve` and `connect`.
    """
    addresses = await resolve(host, port, policy, source=source)
    started = time.perf_counter()
    sock = await connect(addresses, source)
    elapsed_ms = (time.perf_counter() - started) * 1000.0
    sock.close()
    return elapsed_ms


async def _check(context: ProbeContext, spec: ProbeSpec, target: Target) -> ProbeResult:
    """The tcp type's check: `probe_tcp` on the target's host and port."""
    assert target.port is not None
    return ProbeResult.up(await probe_tcp(target.host, target.port, context.policy, context.source))


@url_parser
def parse_tcp_url(url: str) -> Target:
    """The ``tcp`` type's ``url`` rules (module docstring): ``url`` to a `Target` with its
    port.

    Raises:
        InvalidTarget: ``url`` is not such an address; nothing else escapes (`url_parser`).
    """
    rest = strip_scheme(url, "tcp", _TCP_EXAMPLE)
    if rest.endswith("/"):
        rest = rest[:-1]
    if "/" in rest or "?" in rest or "#" in rest or "@" in rest:
        raise InvalidTarget(_TCP_EXAMPLE)
    if rest.startswith("["):
        end = rest.find("]")
        if end == -1 or rest[end + 1 : end + 2] != ":":
            raise InvalidTarget(_BRACKETS)
        raw_host, port_text, bracketed = rest[1:end], rest[end + 2 :], True
    else:
        if rest.count(":") > 1:
            raise InvalidTarget(_BRACKETS)
        raw_host, sep, port_text = rest.partition(":")
        bracketed = False
        if not sep:
            raise InvalidTarget(f"{_TCP_EXAMPLE}; the port is missing")
    if not raw_host:
        raise InvalidTarget(f"{_TCP_EXAMPLE}; the host is missing")
    port = parse_port(port_text)
    host = parse_host(raw_host, bracketed=bracketed, example=_TCP_EXAMPLE)
    return Target(type="tcp", host=host, port=port, url=url, scheme=None)


TCP = ProbeType(name="tcp", parse=parse_tcp_url, check=_check)
"""The ``tcp`` probe type (``_registry``)."""
