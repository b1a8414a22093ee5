"""The probes against real local targets (tests/targets.py).

Rules of this module: loopback addresses only (127.0.0.1, ::1), ports picked by the
system (port 0), no mocks (the one injection is the ICMP socket factory, the documented
seam for the ``ping_not_permitted`` path), a time limit inside every test, and short
probe timeouts so that the whole module runs in a few seconds.
"""

from __future__ import annotations

import ipaddress
import socket
import struct

import pytest
import trio
import trio.testing

import engine.probes
from engine.probes import ERROR_CODES, Prober, ProbeResult, ProbeSpec
from engine.probes._ping import _classify, permitted_ping_kinds, ping_address
from engine.probes._result import ProbeFailure
from engine.probes._tcp import connect
from tests.targets import DnsTarget, HttpTarget, TcpTarget, TlsPair

LIMIT_SECONDS = 5.0
"""Each test's own time limit."""


def http(url: str, **fields: object) -> ProbeSpec:
    options: dict[str, object] = {"timeout_seconds": 3.0, "method": "GET"}
    options.update(fields)
    return ProbeSpec(type="http", url=url, **options)  # type: ignore[arg-type]


def assert_failed(result: ProbeResult, code: str) -> None:
    assert not result.ok, result
    assert result.error_code == code, result
    assert result.error_message, result
    assert result.response_time_ms >= 0.0


def deny_loopback(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    return "loopback addresses are not monitored" if ip.is_loopback else None


# -- package surface -------------------------------------------------------------------


def test_exported_names_are_public_and_present() -> None:
    for name in engine.probes.__all__:
        assert not name.startswith("_")
        assert hasattr(engine.probes, name)
    assert {"Prober", "ProbeSpec", "ProbeResult", "ERROR_CODES"} <= set(engine.probes.__all__)


def test_error_codes_are_the_documented_ones() -> None:
    documented = {
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
    }
    assert documented == ERROR_CODES
    doc = engine.probes._result.__doc__ or ""
    for code in ERROR_CODES:
        assert f"``{code}``" in doc


# -- http ------------------------------------------------------------------------------


async def test_http_up_records_status_and_time(http_target: HttpTarget) -> None:
    with trio.fail_after(LIMIT_SECONDS):
        result = await Prober().probe(http(http_target.url("/health?x=1")))
    assert result == ProbeResult(
        ok=True,
        response_time_ms=result.response_time_ms,
        status_code=200,
        error_code=None,
        error_message=None,
    )
    assert 0.0 < result.response_time_ms < 1000.0
    [request] = http_target.requests
    assert (request.method, request.path) == ("GET", "/health?x=1")
    assert request.headers["host"] == f"127.0.0.1:{http_target.port}"
    assert request.headers["connection"] == "close"


async def test_http_opens_a_new_connection_per_check(http_target: HttpTarget) -> None:
    prober = Prober()
    with trio.fail_after(LIMIT_SECONDS):
        for _ in range(3):
            assert (await prober.probe(http(http_target.url()))).ok
    assert http_target.accepted == 3


async def test_http_sends_the_monitor_method(http_target: HttpTarget) -> None:
    prober = Prober()
    with trio.fail_after(LIMIT_SECONDS):
        for method in ("HEAD", "POST", "DELETE"):
            assert (await prober.probe(http(http_target.url(), method=method))).ok
    assert [r.method for r in http_target.requests] == ["HEAD", "POST", "DELETE"]
    assert http_target.requests[1].headers["content-length"] == "0"


async def test_http_unexpected_status_keeps_the_status(http_target: HttpTarget) -> None:
    await http_target.set_mode("error")
    with trio.fail_after(LIMIT_SECONDS):
        result = await Prober().probe(http(http_target.url(), expected_status_code=200))
    assert_failed(result, "unexpected_status")
    assert result.status_code == 500
    assert "500" in (result.error_message or "")


async def test_http_expected_status_other_than_200(http_target: HttpTarget) -> None:
    with trio.fail_after(LIMIT_SECONDS):
        result = await Prober().probe(
            http(http_target.url("/status/404"), expected_status_code=404)
        )
    assert result.ok and result.status_code == 404


async def test_http_without_expected_status_accepts_any_2xx(http_target: HttpTarget) -> None:
    prober = Prober()
    with trio.fail_after(LIMIT_SECONDS):
        created = await prober.probe(
            http(http_target.url("/status/204"), expected_status_code=None)
        )
        missing = await prober.probe(
            http(http_target.url("/status/404"), expected_status_code=None)
        )
    assert created.ok and created.status_code == 204
    assert_failed(missing, "unexpected_status")


async def test_http_reads_a_large_body_only_up_to_the_cap(http_target: HttpTarget) -> None:
    with trio.fail_after(LIMIT_SECONDS):
        result = await Prober().probe(http(http_target.url("/big/1000000")))
    assert result.ok and result.status_code == 200


async def test_http_slow_target_times_out(http_target: HttpTarget) -> None:
    await http_target.set_mode("slow")
    with trio.fail_after(LIMIT_SECONDS):
        result = await Prober().probe(http(http_target.url(), timeout_seconds=0.2))
    assert_failed(result, "timeout")
    assert 150.0 <= result.response_time_ms < 2000.0
    assert result.status_code is None


async def test_http_stopped_target_is_refused_then_up_again(http_target: HttpTarget) -> None:
    prober = Prober()
    port = http_target.port
    with trio.fail_after(LIMIT_SECONDS):
        await http_target.set_mode("stopped")
        refused = await prober.probe(http(http_target.url()))
        await http_target.set_mode("ok")
        again = await prober.probe(http(http_target.url()))
    assert_failed(refused, "connection_refused")
    assert again.ok
    assert http_target.port == port


async def test_http_follows_relative_redirects(http_target: HttpTarget) -> None:
    with trio.fail_after(LIMIT_SECONDS):
        result = await Prober().probe(http(http_target.url("/redirect/3")))
    assert result.ok and result.status_code == 200
    paths = [r.path for r in http_target.requests]
    assert paths == ["/redirect/3", "/redirect/2", "/redirect/1", "/redirect/0"]


async def test_http_follows_absolute_and_absolute_path_locations(
    http_target: HttpTarget,
) -> None:
    http_target.redirects["/a"] = (301, http_target.url("/b"))
    http_target.redirects["/b"] = (308, "/c?from=b")
    with trio.fail_after(LIMIT_SECONDS):
        result = await Prober().probe(http(http_target.url("/a")))
    assert result.ok
    assert [r.path for r in http_target.requests] == ["/a", "/b", "/c?from=b"]


async def test_http_follows_ten_redirects_but_not_eleven(http_target: HttpTarget) -> None:
    prober = Prober()
    with trio.fail_after(LIMIT_SECONDS):
        ten = await prober.probe(http(http_target.url("/redirect/10")))
        eleven = await prober.probe(http(http_target.url("/redirect/11")))
    assert ten.ok
    assert_failed(eleven, "too_many_redirects")
    assert eleven.status_code == 302


async def test_http_redirect_loop_is_too_many_redirects(http_target: HttpTarget) -> None:
    http_target.redirects["/loop"] = (307, "/loop")
    with trio.fail_after(LIMIT_SECONDS):
        result = await Prober().probe(http(http_target.url("/loop")))
    assert_failed(result, "too_many_redirects")
    assert len(http_target.requests) == 11


async def test_http_303_continues_with_get_and_307_keeps_the_method(
    http_target: HttpTarget,
) -> None:
    http_target.redirects["/see-other"] = (303, "/done")
    http_target.redirects["/temporary"] = (307, "/done")
    prober = Prober()
    with trio.fail_after(LIMIT_SECONDS):
        assert (await prober.probe(http(http_target.url("/see-other"), method="POST"))).ok
        assert (await prober.probe(http(http_target.url("/temporary"), method="POST"))).ok
    assert [(r.method, r.path) for r in http_target.requests] == [
        ("POST", "/see-other"),
        ("GET", "/done"),
        ("POST", "/temporary"),
        ("POST", "/done"),
    ]


async def test_http_redirect_that_is_the_expected_status_is_not_followed(
    http_target: HttpTarget,
) -> None:
    with trio.fail_after(LIMIT_SECONDS):
        result = await Prober().probe(
            http(http_target.url("/redirect/2"), expected_status_code=302)
        )
    assert result.ok and result.status_code == 302
    assert len(http_target.requests) == 1


async def test_http_redirect_to_an_unusable_url_is_a_protocol_error(
    http_target: HttpTarget,
) -> None:
    http_target.redirects["/ftp"] = (302, "ftp://127.0.0.1/file")
    with trio.fail_after(LIMIT_SECONDS):
        result = await Prober().probe(http(http_target.url("/ftp")))
    assert_failed(result, "protocol_error")


async def test_http_policy_is_checked_on_every_hop(
    http_target: HttpTarget, nursery: trio.Nursery
) -> None:
    other = HttpTarget(host="::1")
    await nursery.start(other.run)
    http_target.redirects["/elsewhere"] = (302, other.url("/"))

    def deny_ipv6(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
        return "no IPv6 here" if ip.version == 6 else None

    with trio.fail_after(LIMIT_SECONDS):
        result = await Prober(address_policy=deny_ipv6).probe(http(http_target.url("/elsewhere")))
        followed = await Prober().probe(http(http_target.url("/elsewhere")))
    assert_failed(result, "target_denied")
    assert "no IPv6 here" in (result.error_message or "")
    assert other.accepted == 1  # only the unrestricted prober reached it
    assert followed.ok


async def test_http_connection_closed_without_response_is_a_protocol_error(
    tcp_target: TcpTarget,
) -> None:
    with trio.fail_after(LIMIT_SECONDS):
        result = await Prober().probe(http(f"http://{tcp_target.address}/"))
    assert result.error_code in ("protocol_error", "connection_reset"), result
    assert not result.ok


async def test_http_invalid_url_is_invalid_target() -> None:
    with trio.fail_after(LIMIT_SECONDS):
        result = await Prober().probe(http("ftp://127.0.0.1/"))
    assert_failed(result, "invalid_target")


async def test_http_invalid_method_is_invalid_target(http_target: HttpTarget) -> None:
    with trio.fail_after(LIMIT_SECONDS):
        result = await Prober().probe(http(http_target.url(), method="NOT A METHOD"))
    assert_failed(result, "invalid_target")
    assert http_target.accepted == 0


async def test_https_up_with_the_trusted_test_ca(https_target: HttpTarget, tls: TlsPair) -> None:
    with trio.fail_after(LIMIT_SECONDS):
        result = await Prober(ssl_context=tls.client).probe(http(https_target.url("/secure")))
    assert result.ok and result.status_code == 200
    assert https_target.requests[0].path == "/secure"


async def test_https_untrusted_certificate_is_a_tls_error(https_target: HttpTarget) -> None:
    with trio.fail_after(LIMIT_SECONDS):
        result = await Prober().probe(http(https_target.url()))  # system CAs only
    assert_failed(result, "tls_error")
    assert https_target.requests == []


async def test_https_to_a_plain_http_server_is_a_tls_error(http_target: HttpTarget) -> None:
    with trio.fail_after(LIMIT_SECONDS):
        result = await Prober().probe(http(f"https://127.0.0.1:{http_target.port}/"))
    assert_failed(result, "tls_error")


# -- tcp -------------------------------------------------------------------------------


async def test_tcp_up_when_the_connection_opens(tcp_target: TcpTarget) -> None:
    with trio.fail_after(LIMIT_SECONDS):
        result = await Prober().probe(
            ProbeSpec(type="tcp", url=tcp_target.address, timeout_seconds=2.0)
        )
    assert result.ok and result.status_code is None and result.error_code is None
    assert result.response_time_ms > 0.0
    await trio.testing.wait_all_tasks_blocked()  # let the target accept from its queue
    assert tcp_target.accepted == 1


async def test_tcp_refused_when_stopped_then_up_on_the_same_port(tcp_target: TcpTarget) -> None:
    prober = Prober()
    spec = ProbeSpec(type="tcp", url=f"tcp://{tcp_target.address}", timeout_seconds=2.0)
    with trio.fail_after(LIMIT_SECONDS):
        await tcp_target.stop()
        refused = await prober.probe(spec)
        await tcp_target.start()
        again = await prober.probe(spec)
    assert_failed(refused, "connection_refused")
    assert again.ok
    await trio.testing.wait_all_tasks_blocked()  # let the target accept from its queue
    assert tcp_target.accepted == 1


async def test_tcp_over_ipv6_loopback(nursery: trio.Nursery) -> None:
    target = TcpTarget(host="::1")
    await nursery.start(target.run)
    with trio.fail_after(LIMIT_SECONDS):
        result = await Prober().probe(
            ProbeSpec(type="tcp", url=f"[::1]:{target.port}", timeout_seconds=2.0)
        )
    assert result.ok


async def test_connect_falls_back_to_the_next_address(tcp_target: TcpTarget) -> None:
    with trio.socket.socket() as unused:  # a port nothing listens on
        await unused.bind(("127.0.0.1", 0))
        closed_port = unused.getsockname()[1]
    addresses = [
        (socket.AF_INET, ("127.0.0.1", closed_port)),
        (socket.AF_INET, ("127.0.0.1", tcp_target.port)),
    ]
    with trio.fail_after(LIMIT_SECONDS):
        sock = await connect(addresses)  # type: ignore[arg-type]
    with sock:
        assert sock.getpeername()[1] == tcp_target.port


async def test_tcp_unresolvable_host_is_a_dns_failure() -> None:
    with trio.fail_after(LIMIT_SECONDS):
        result = await Prober().probe(
            ProbeSpec(type="tcp", url="no-such-host.invalid:80", timeout_seconds=2.0)
        )
    assert result.error_code in ("dns_failure", "timeout"), result


# -- address policy --------------------------------------------------------------------


async def test_policy_refusing_loopback_is_target_denied(
    http_target: HttpTarget, tcp_target: TcpTarget
) -> None:
    prober = Prober(address_policy=deny_loopback)
    with trio.fail_after(LIMIT_SECONDS):
        results = [
            await prober.probe(http(http_target.url())),
            await prober.probe(ProbeSpec(type="tcp", url=tcp_target.address, timeout_seconds=2)),
            await prober.probe(ProbeSpec(type="ping", url="127.0.0.1", timeout_seconds=2)),
        ]
    for result in results:
        assert_failed(result, "target_denied")
        assert "loopback addresses are not monitored" in (result.error_message or "")
    assert http_target.accepted == 0 and tcp_target.accepted == 0


# -- dns -------------------------------------------------------------------------------


async def test_dns_up_with_a_records(dns_target: DnsTarget) -> None:
    prober = Prober(dns_nameserver=dns_target.nameserver)
    with trio.fail_after(LIMIT_SECONDS):
        both = await prober.probe(ProbeSpec(type="dns", url="up.test", timeout_seconds=2))
        v4 = await prober.probe(ProbeSpec(type="dns", url="dns://v4.test", timeout_seconds=2))
        v6 = await prober.probe(ProbeSpec(type="dns", url="V6.test.", timeout_seconds=2))
    for result in (both, v4, v6):
        assert result.ok, result
        assert result.status_code is None and result.response_time_ms > 0.0
    asked = {(q.name, q.rdtype) for q in dns_target.queries}
    assert {("v6.test", "A"), ("v6.test", "AAAA")} <= asked


async def test_dns_nxdomain_is_a_dns_failure(dns_target: DnsTarget) -> None:
    prober = Prober(dns_nameserver=dns_target.nameserver)
    with trio.fail_after(LIMIT_SECONDS):
        result = await prober.probe(ProbeSpec(type="dns", url="missing.test", timeout_seconds=2))
    assert_failed(result, "dns_failure")
    assert "NXDOMAIN" in (result.error_message or "")


async def test_dns_no_address_record_is_a_dns_failure(dns_target: DnsTarget) -> None:
    prober = Prober(dns_nameserver=dns_target.nameserver)
    with trio.fail_after(LIMIT_SECONDS):
        result = await prober.probe(ProbeSpec(type="dns", url="empty.test", timeout_seconds=2))
    assert_failed(result, "dns_failure")


async def test_dns_servfail_is_a_dns_failure(dns_target: DnsTarget) -> None:
    dns_target.mode = "servfail"
    prober = Prober(dns_nameserver=dns_target.nameserver)
    with trio.fail_after(LIMIT_SECONDS):
        result = await prober.probe(ProbeSpec(type="dns", url="up.test", timeout_seconds=2))
    assert_failed(result, "dns_failure")


async def test_dns_silent_nameserver_times_out(dns_target: DnsTarget) -> None:
    dns_target.mode = "silent"
    prober = Prober(dns_nameserver=dns_target.nameserver)
    with trio.fail_after(LIMIT_SECONDS):
        result = await prober.probe(ProbeSpec(type="dns", url="up.test", timeout_seconds=0.3))
    assert_failed(result, "timeout")
    assert 250.0 <= result.response_time_ms < 2000.0


# -- ping ------------------------------------------------------------------------------


async def test_ping_loopback() -> None:
    if not permitted_ping_kinds():
        pytest.skip("this process may not open ICMP sockets (needs root or CAP_NET_RAW)")
    with trio.fail_after(LIMIT_SECONDS):
        result = await Prober().probe(ProbeSpec(type="ping", url="127.0.0.1", timeout_seconds=2))
    if result.error_code == "timeout":
        pytest.skip("ICMP sockets open here but echo replies never arrive (sandboxed network)")
    assert result.ok, result
    assert result.response_time_ms > 0.0 and result.status_code is None


async def test_ping_not_permitted_when_icmp_sockets_are_refused() -> None:
    def refuse(family: int, kind: int, proto: int) -> trio.socket.SocketType:
        raise PermissionError(1, "Operation not permitted")

    with trio.fail_after(LIMIT_SECONDS), pytest.raises(ProbeFailure) as info:
        await ping_address(socket.AF_INET, "127.0.0.1", socket_factory=refuse)
    assert info.value.code == "ping_not_permitted"
    assert "ICMP" in info.value.message


def test_ping_recognises_an_icmp_error_quoting_our_request() -> None:
    quoted_ip = bytes([0x45]) + bytes(19)
    quoted_icmp = struct.pack("!BBHHH", 8, 0, 0, 0x1234, 1)
    unreachable = struct.pack("!BBHI", 3, 1, 0, 0) + quoted_ip + quoted_icmp
    outer_ip = bytes([0x45]) + bytes(19)
    token = bytes(16)
    assert _classify(outer_ip + unreachable, socket.AF_INET, True, 0x1234, token) == "error"
    assert _classify(outer_ip + unreachable, socket.AF_INET, True, 0x9999, token) == "other"
    reply = struct.pack("!BBHHH", 0, 0, 0, 0x1234, 1) + token
    assert _classify(outer_ip + reply, socket.AF_INET, True, 0x1234, token) == "reply"
    assert _classify(reply, socket.AF_INET, False, 0, token) == "reply"
    assert _classify(reply, socket.AF_INET, False, 0, b"x" * 16) == "other"


# -- cancellation ----------------------------------------------------------------------


async def test_cancelling_a_probe_raises_cancelled_not_a_result(http_target: HttpTarget) -> None:
    await http_target.set_mode("slow")
    results: list[ProbeResult] = []
    with trio.fail_after(LIMIT_SECONDS):
        with trio.move_on_after(0.2) as scope:
            results.append(await Prober().probe(http(http_target.url(), timeout_seconds=3.0)))
    assert scope.cancelled_caught
    assert results == []


async def test_cancelling_a_dns_probe_raises_cancelled(dns_target: DnsTarget) -> None:
    dns_target.mode = "silent"
    prober = Prober(dns_nameserver=dns_target.nameserver)
    results: list[ProbeResult] = []
    with trio.fail_after(LIMIT_SECONDS):
        with trio.move_on_after(0.2) as scope:
            spec = ProbeSpec(type="dns", url="up.test", timeout_seconds=3.0)
            results.append(await prober.probe(spec))
    assert scope.cancelled_caught
    assert results == []
