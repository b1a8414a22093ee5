"""The target policy (engine/policy.py; OWASP API7, SSRF): every address class under
each setting, IPv4 hidden in IPv6, metadata names, resolution at create time (injected
resolvers, a timeout on the autojump clock), and the Prober applying it at every check,
redirect hops included.
"""

from __future__ import annotations

import contextlib
import ipaddress

import pytest
import trio

from engine import Prober, ProbeSpec, TargetPolicy
from engine.policy import METADATA_ADDRESSES, IPAddress, Resolver
from engine.probes import parse_target
from engine.probes._result import ProbeFailure
from engine.probes._tcp import resolve
from tests.targets import DnsTarget, HttpTarget, TcpTarget, open_dns_target

DEFAULT = TargetPolicy()
DENY = TargetPolicy(deny_private=True)
METADATA_OK = TargetPolicy(allow_metadata=True)
DENY_METADATA_OK = TargetPolicy(deny_private=True, allow_metadata=True)

# address -> (refused by default, refused with deny_private, refused with allow_metadata)
ADDRESSES: dict[str, tuple[bool, bool, bool]] = {
    # loopback
    "127.0.0.1": (False, True, False),
    "127.255.255.254": (False, True, False),
    "::1": (False, True, False),
    # private
    "10.0.0.1": (False, True, False),
    "172.16.5.4": (False, True, False),
    "192.168.1.1": (False, True, False),
    "fc00::1": (False, True, False),
    "fd12:3456::1": (False, True, False),
    # link-local and metadata
    "169.254.169.254": (True, True, False),
    "169.254.170.2": (True, True, False),
    "169.254.1.1": (True, True, False),
    "fe80::1": (True, True, False),
    "fd00:ec2::254": (True, True, False),
    "100.100.100.200": (True, True, False),
    "168.63.129.16": (True, True, False),
    # unspecified
    "0.0.0.0": (False, True, False),
    "::": (False, True, False),
    # multicast and broadcast
    "224.0.0.1": (False, True, False),
    "239.255.255.250": (False, True, False),
    "ff02::1": (False, True, False),
    "255.255.255.255": (False, True, False),
    # reserved, shared, documentation, site-local
    "240.0.0.1": (False, True, False),
    "100.64.0.1": (False, True, False),
    "192.0.2.10": (False, True, False),
    "198.18.0.1": (False, True, False),
    "fec0::1": (False, True, False),
    "2001:db8::1": (False, True, False),
    # IPv4 inside IPv6
    "::ffff:127.0.0.1": (False, True, False),
    "::ffff:169.254.169.254": (True, True, False),
    "::ffff:10.0.0.1": (False, True, False),
    "::a9fe:a9fe": (True, True, False),  # IPv4-compatible 169.254.169.254
    "64:ff9b::a9fe:a9fe": (True, True, False),  # NAT64
    "64:ff9b::7f00:1": (False, True, False),
    "2002:a9fe:a9fe::1": (True, True, False),  # 6to4
    "2002:7f00:1::1": (False, True, False),
    # public
    "8.8.8.8": (False, False, False),
    "93.184.216.34": (False, False, False),
    "2606:4700:4700::1111": (False, False, False),
    "64:ff9b::808:808": (False, False, False),  # NAT64 of a public address
}


@pytest.mark.parametrize("address", list(ADDRESSES))
def test_every_address_class_under_every_setting(address: str) -> None:
    ip = ipaddress.ip_address(address)
    by_default, with_deny, with_metadata = ADDRESSES[address]
    assert (DEFAULT.check_address(ip) is not None) is by_default
    assert (DENY.check_address(ip) is not None) is with_deny
    assert (METADATA_OK.check_address(ip) is not None) is with_metadata
    # deny_private refuses link-local even when metadata is allowed, but not public
    # metadata-service addresses
    expected = with_deny and not (ip in METADATA_ADDRESSES and ip.is_global)
    assert (DENY_METADATA_OK.check_address(ip) is not None) is expected
    # the policy is its own AddressPolicy
    assert DENY(ip) == DENY.check_address(ip)


def test_reasons_name_the_class_and_the_embedded_address() -> None:
    def reason(policy: TargetPolicy, text: str) -> str:
        found = policy.check_address(ipaddress.ip_address(text))
        assert found is not None
        return found

    assert reason(DENY, "127.0.0.1") == "a loopback address"
    assert reason(DENY, "10.1.1.1") == "a private address"
    assert reason(DENY, "0.0.0.0") == "the unspecified address"
    assert reason(DENY, "ff02::1") == "a multicast address"
    assert reason(DENY, "100.64.0.1") == "not a globally routable address"
    assert reason(DEFAULT, "169.254.169.254") == "a link-local or cloud metadata address"
    assert "169.254.169.254 embedded in" in reason(DEFAULT, "::ffff:169.254.169.254")
    assert reason(DENY, "::ffff:127.0.0.1").startswith("a loopback address (127.0.0.1")


def test_metadata_host_names_are_refused_unless_allowed() -> None:
    for name in ("metadata.google.internal", "METADATA.google.internal.", "instance-data"):
        assert DEFAULT.check_host_name(name) is not None
        assert METADATA_OK.check_host_name(name) is None
    assert DEFAULT.check_host_name("example.com") is None


def _resolver(answers: dict[str, list[str]]) -> Resolver:
    async def resolve(host: str) -> list[IPAddress]:
        await trio.lowlevel.checkpoint()
        if host not in answers:
            raise OSError(f"{host} does not resolve")
        return [ipaddress.ip_address(a) for a in answers[host]]

    return resolve


async def test_create_time_check_resolves_names_only_when_denying_private() -> None:
    answers = {
        "public.example": ["93.184.216.34", "2606:2800::1"],
        "mixed.example": ["93.184.216.34", "10.0.0.7"],
        "internal.example": ["192.168.0.5"],
        "imds.example": ["169.254.169.254"],
    }
    resolver = _resolver(answers)
    deny = TargetPolicy(deny_private=True, resolver=resolver, dns_resolver=resolver)
    default = TargetPolicy(resolver=resolver, dns_resolver=resolver)
    with trio.fail_after(5):
        for kind, url in (
            ("http", "https://{}/health"),
            ("tcp", "{}:5432"),
            ("ping", "{}"),
            ("dns", "{}"),
        ):
            target = lambda host, kind=kind, url=url: parse_target(kind, url.format(host))  # noqa: E731
            assert await deny.check_target(target("public.example")) is None
            mixed = await deny.check_target(target("mixed.example"))
            assert mixed == "mixed.example resolves to 10.0.0.7, a private address"
            assert await deny.check_target(target("internal.example")) is not None
            assert await deny.check_target(target("nxdomain.example")) is None, "checked later"
            # without deny_private names are not resolved at create time
            assert await default.check_target(target("imds.example")) is None
            assert await default.check_target(target("internal.example")) is None
            assert await default.check_target(target("metadata.google.internal")) is not None
        # IP literals need no resolution
        for kind, url in (("http", "http://10.0.0.1/"), ("tcp", "[::1]:22"), ("ping", "::1")):
            assert await deny.check_target(parse_target(kind, url)) is not None
            assert await default.check_target(parse_target(kind, url)) is None
        literal = await default.check_target(parse_target("http", "http://169.254.169.254/"))
        assert literal == "169.254.169.254 is a link-local or cloud metadata address"


async def test_a_slow_resolver_is_given_up_after_the_timeout(
    autojump_clock: trio.abc.Clock,
) -> None:
    async def slow(host: str) -> list[IPAddress]:
        await trio.sleep(3600)
        return [ipaddress.ip_address("10.0.0.1")]

    policy = TargetPolicy(deny_private=True, resolve_timeout_seconds=2.0, resolver=slow)
    started = trio.current_time()
    assert await policy.check_target(parse_target("http", "http://slow.example/")) is None
    assert trio.current_time() - started == pytest.approx(2.0)


async def test_the_system_resolver_is_used_by_default() -> None:
    with trio.fail_after(5):
        reason = await DENY.check_target(parse_target("http", "http://localhost:8080/"))
    assert reason is not None and "localhost resolves to" in reason


# ---- the Prober applies it at every check -------------------------------------------


def _http(url: str) -> ProbeSpec:
    return ProbeSpec(type="http", url=url, timeout_seconds=3.0, method="GET")


async def test_the_prober_refuses_denied_addresses_at_check_time(
    http_target: HttpTarget, tcp_target: TcpTarget, dns_target: DnsTarget
) -> None:
    denying = Prober(address_policy=DENY, dns_nameserver=dns_target.nameserver)
    with trio.fail_after(10):
        results = [
            await denying.probe(_http(http_target.url())),
            await denying.probe(_http(f"http://localhost:{http_target.port}/")),
            await denying.probe(ProbeSpec(type="tcp", url=tcp_target.address, timeout_seconds=2)),
            await denying.probe(ProbeSpec(type="ping", url="127.0.0.1", timeout_seconds=2)),
        ]
        for result in results:
            assert not result.ok and result.error_code == "target_denied", result
        assert http_target.accepted == 0 and tcp_target.accepted == 0
        # dns checks screen the nameserver's answers too (here: loopback addresses)
        dns = await denying.probe(ProbeSpec(type="dns", url="up.test", timeout_seconds=2))
        assert not dns.ok and dns.error_code == "target_denied", dns
        # the default policy lets loopback through
        assert (await Prober(address_policy=DEFAULT).probe(_http(http_target.url()))).ok


async def test_a_redirect_to_the_metadata_service_is_denied_at_its_hop(
    http_target: HttpTarget,
) -> None:
    http_target.redirects["/to-imds"] = (302, "http://169.254.169.254/latest/meta-data/")
    http_target.redirects["/to-mapped"] = (302, "http://[::ffff:169.254.169.254]/")
    prober = Prober(address_policy=DEFAULT)
    with trio.fail_after(10):
        for path in ("/to-imds", "/to-mapped"):
            result = await prober.probe(_http(http_target.url(path)))
            assert not result.ok and result.error_code == "target_denied", result
            assert "metadata" in (result.error_message or "")


def _dns(name: str) -> ProbeSpec:
    return ProbeSpec(type="dns", url=name, timeout_seconds=3.0)


async def test_dns_checks_screen_the_addresses_the_nameserver_answers() -> None:
    # docs/api.md, Target policy: a dns monitor must not learn which internal names exist
    records = {
        "internal.test": ["10.1.2.3"],
        "loop.test": ["127.0.0.1", "::1"],
        "imds.test": ["169.254.169.254"],
        "public.test": ["93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946"],
        "mixed.test": ["10.1.2.3", "2606:2800:220:1:248:1893:25c8:1946"],
    }
    with trio.fail_after(20):
        async with open_dns_target(records=records) as server:
            denying = Prober(address_policy=DENY, dns_nameserver=server.nameserver)
            default = Prober(address_policy=DEFAULT, dns_nameserver=server.nameserver)
            for name, reason in (
                ("internal.test", "10.1.2.3, which is not allowed: a private address"),
                ("loop.test", "which is not allowed: a loopback address"),
                ("imds.test", "a link-local or cloud metadata address"),
            ):
                result = await denying.probe(_dns(name))
                assert not result.ok and result.error_code == "target_denied", result
                assert reason in (result.error_message or ""), result
            # refused addresses are dropped, as for http: one allowed address is enough
            for name in ("public.test", "mixed.test"):
                result = await denying.probe(_dns(name))
                assert result.ok, (name, result)
            # without deny_private only link-local and metadata addresses are refused
            assert (await default.probe(_dns("loop.test"))).ok
            imds = await default.probe(_dns("imds.test"))
            assert not imds.ok and imds.error_code == "target_denied", imds
            # the nameserver was asked every time (no cache, no /etc/hosts)
            assert sum(q.name == "loop.test" for q in server.queries) >= 2


NUMERIC_FORMS = {
    # host as a url gives it -> the address the system resolver reads in it (forms
    # whose last part is decimal, 169.0xfe.169.254, are no host name: invalid_url)
    "0xa9fea9fe": "169.254.169.254",
    "0xa9.0xfe.0xa9.0xfe": "169.254.169.254",
    "169.254.0xa9fe": "169.254.169.254",
    "0x7f000001": "127.0.0.1",
}


@pytest.mark.parametrize(("host", "address"), NUMERIC_FORMS.items())
async def test_numeric_forms_are_judged_at_create_as_at_send(host: str, address: str) -> None:
    # inet_aton's forms (hex, fewer parts) are no IP literal to ipaddress, but the
    # resolver the checks and the webhook sender use reads them as one: create must
    # refuse what every send would refuse, without a name look-up
    with trio.fail_after(5):
        ip = ipaddress.ip_address(address)
        for policy in (DEFAULT, DENY, METADATA_OK):
            target = parse_target("http", f"http://{host}/")
            assert target.host == host.lower()
            at_create = await policy.check_target(target)
            at_send = policy.check_address(ip)
            assert (at_create is None) == (at_send is None), (host, policy)
            if at_send is not None:
                assert at_create is not None and address in at_create
            with pytest.raises(ProbeFailure) if at_send else contextlib.nullcontext():
                await resolve(host, 80, policy)
    assert (await DEFAULT.check_target(parse_target("dns", "0xa9fea9fe"))) is None  # a name
