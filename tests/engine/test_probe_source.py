"""``--probe-source-address``: every probe type leaves from the node's source address
(docs/checks.md, Source address; ``engine.probes._source``).

Real loopback sockets only: Linux routes all of 127.0.0.0/8 to ``lo``, so 127.0.0.2 is a
local address that can be bound without any set-up, and the local targets record the
address each connection or query came from. IPv6 has one loopback address, ``::1``.
"""

from __future__ import annotations

import socket

import pytest
import trio

from engine.probes import Prober, ProbeResult, ProbeSpec, source_address
from engine.probes._ping import permitted_ping_kinds
from engine.probes._tcp import connect
from tests.targets import DnsTarget, HttpTarget, TcpTarget, TlsPair, open_http_target

LIMIT_SECONDS = 5.0
SOURCE = "127.0.0.2"


def _spec(type: str, url: str) -> ProbeSpec:
    method = "GET" if type == "http" else None
    return ProbeSpec(type=type, url=url, timeout_seconds=2.0, method=method)


async def _probe(prober: Prober, type: str, url: str) -> ProbeResult:
    with trio.fail_after(LIMIT_SECONDS):
        return await prober.probe(_spec(type, url))


async def _peers(target: TcpTarget, count: int) -> list[str]:
    """The target's peers once it has accepted ``count`` connections (a tcp check is done
    when its connection opens, which can be before the target's accept runs)."""
    with trio.fail_after(LIMIT_SECONDS):
        while len(target.peers) < count:
            await trio.sleep(0.01)
    return target.peers


def _unreachable_from_source(result: ProbeResult) -> None:
    assert not result.ok and result.error_code == "unreachable", result
    assert "127.0.0.2" in (result.error_message or ""), result
    assert "IPv6" in (result.error_message or ""), result


async def test_http_and_tcp_checks_leave_from_the_source_address(
    http_target: HttpTarget, tcp_target: TcpTarget
) -> None:
    bound = Prober(source_address=source_address(SOURCE))
    assert (await _probe(Prober(), "http", http_target.url())).ok
    assert (await _probe(bound, "http", http_target.url())).ok
    assert (await _probe(bound, "tcp", tcp_target.address)).ok
    assert http_target.peers == ["127.0.0.1", SOURCE]
    assert await _peers(tcp_target, 1) == [SOURCE]


async def test_https_checks_leave_from_the_source_address(
    https_target: HttpTarget, tls: TlsPair
) -> None:
    bound = Prober(ssl_context=tls.client, source_address=source_address(SOURCE))
    assert (await _probe(bound, "http", https_target.url())).ok
    assert https_target.peers == [SOURCE]


async def test_every_raced_connection_is_bound(tcp_target: TcpTarget) -> None:
    # Two addresses: the first refuses (nothing listens on 127.0.0.3), the second accepts.
    addresses = [
        (socket.AF_INET, ("127.0.0.3", tcp_target.port)),
        (socket.AF_INET, ("127.0.0.1", tcp_target.port)),
    ]
    with trio.fail_after(LIMIT_SECONDS):
        sock = await connect(addresses, source_address(SOURCE))
    with sock:
        assert sock.getsockname()[0] == SOURCE
        assert await _peers(tcp_target, 1) == [SOURCE]


async def test_dns_queries_leave_from_the_source_address(dns_target: DnsTarget) -> None:
    bound = Prober(dns_nameserver=dns_target.nameserver, source_address=source_address(SOURCE))
    assert (await _probe(bound, "dns", "up.test")).ok
    assert dns_target.queries
    assert {query.source for query in dns_target.queries} == {SOURCE}


async def test_ping_leaves_from_the_source_address() -> None:
    if socket.SOCK_RAW not in permitted_ping_kinds():
        pytest.skip("watching echo requests needs a raw ICMP socket (root or CAP_NET_RAW)")
    bound = Prober(source_address=source_address(SOURCE))
    with socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP) as watcher:
        watcher.setblocking(False)
        result = await _probe(bound, "ping", "127.0.0.1")
        if result.error_code == "timeout":
            pytest.skip("ICMP sockets open here but echo replies never arrive")
        assert result.ok, result
        requests = []
        while True:  # every ICMP packet on the host reached the watcher; keep echo requests
            try:
                packet = watcher.recv(2048)
            except BlockingIOError:
                break
            header = (packet[0] & 0x0F) * 4
            if packet[header] == 8:  # echo request
                requests.append(socket.inet_ntoa(packet[12:16]))
    assert SOURCE in requests, requests


async def test_a_target_of_the_other_family_is_unreachable(
    http_target: HttpTarget, nursery: trio.Nursery
) -> None:
    v6_tcp = TcpTarget(host="::1")
    await nursery.start(v6_tcp.run)
    bound = Prober(source_address=source_address(SOURCE))
    async with open_http_target(host="::1") as v6_http:
        _unreachable_from_source(await _probe(bound, "http", v6_http.url()))
        assert v6_http.accepted == 0
    _unreachable_from_source(await _probe(bound, "tcp", v6_tcp.address))
    _unreachable_from_source(await _probe(bound, "ping", "::1"))
    assert v6_tcp.accepted == 0


async def test_an_ipv6_source_reaches_ipv6_targets_only(
    http_target: HttpTarget, dns_target: DnsTarget
) -> None:
    bound = Prober(dns_nameserver=dns_target.nameserver, source_address=source_address("::1"))
    async with open_http_target(host="::1") as v6_http:
        assert (await _probe(bound, "http", v6_http.url())).ok
        assert v6_http.peers == ["::1"]
    refused = await _probe(bound, "http", http_target.url())
    assert refused.error_code == "unreachable" and "IPv4 addresses" in (
        refused.error_message or ""
    ), refused
    # The only nameserver is IPv4: a query from ::1 cannot reach it.
    no_nameserver = await _probe(bound, "dns", "up.test")
    assert no_nameserver.error_code == "dns_failure", no_nameserver
    assert "IPv6" in (no_nameserver.error_message or "")
    assert dns_target.queries == [] and http_target.accepted == 0


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("db.example.com", "not an IP address"),
        ("127.0.0.2:80", "not an IP address"),
        ("0.0.0.0", "cannot be a source address"),
        ("ff02::1", "cannot be a source address"),
        ("192.0.2.1", "cannot bind 192.0.2.1"),  # TEST-NET-1: no host has it
        ("2001:db8::1", "cannot bind 2001:db8::1"),
    ],
)
def test_a_bad_source_address_is_refused(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        source_address(text)


def test_a_good_source_address_is_kept_as_given() -> None:
    source = source_address(" 127.0.0.2 ")
    assert (str(source.ip), source.family, source.sockaddr) == (SOURCE, socket.AF_INET, (SOURCE, 0))
    assert source_address("::1").family == socket.AF_INET6
