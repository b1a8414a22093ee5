"""`engine.probes.parse_target`: what each monitor type accepts and refuses.

Pure parsing, so no sockets and no clock; hypothesis checks that nothing but
`InvalidTarget` ever escapes, whatever the input.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.probes import parse_target
from engine.targets import InvalidTarget, Target


@pytest.mark.parametrize(
    ("url", "host", "port", "scheme"),
    [
        ("https://example.com/health?x=1", "example.com", 443, "https"),
        ("http://example.com", "example.com", 80, "http"),
        ("HTTP://Example.COM:8080/", "example.com", 8080, "http"),
        ("http://127.0.0.1:8080/x", "127.0.0.1", 8080, "http"),
        ("http://[::1]:8080/", "::1", 8080, "http"),
        ("https://[2001:DB8::1]/", "2001:db8::1", 443, "https"),
        ("https://bücher.example/", "xn--bcher-kva.example", 443, "https"),
        ("https://example.com./", "example.com.", 443, "https"),
        ("http://my_host.internal/", "my_host.internal", 80, "http"),
        ("http://localhost:65535/#frag", "localhost", 65535, "http"),
    ],
)
def test_http_accepts(url: str, host: str, port: int, scheme: str) -> None:
    assert parse_target("http", url) == Target(
        type="http", host=host, port=port, url=url, scheme=scheme
    )


@pytest.mark.parametrize(
    ("url", "message_part"),
    [
        ("example.com", "http:// or https://"),
        ("ftp://example.com/", "http:// or https://"),
        ("http://", "http:// or https://"),
        ("http:///path", "http:// or https://"),
        ("https://user:secret@example.com/", "password"),
        ("http://example.com:0/", "port"),
        ("http://example.com:65536/", "port"),
        ("http://example.com:http/", "port"),
        ("http://example.com:/", "port"),
        ("http://exa mple.com/", "spaces"),
        ("http://example.com/\n", "control"),
        ("http://-bad-.com/", "not a valid host name"),
        ("http://1.2.3/", "IP address"),
        ("http://[::1/", "not valid"),
        ("http://[example.com]/", "IPv6"),
        ("http://[127.0.0.1]/", "brackets"),
        ("http://[fe80::1%25eth0]/", "zone"),
        ("", "empty"),
        ("http://example.com/\ud800", "surrogate"),
        ("http://" + "a" * 64 + ".com/", "not a valid host name"),
    ],
)
def test_http_rejects(url: str, message_part: str) -> None:
    with pytest.raises(InvalidTarget, match=message_part):
        parse_target("http", url)


@pytest.mark.parametrize(
    ("url", "host", "port"),
    [
        ("db.example.com:5432", "db.example.com", 5432),
        ("tcp://db.example.com:5432", "db.example.com", 5432),
        ("TCP://10.0.0.5:6379/", "10.0.0.5", 6379),
        ("[::1]:80", "::1", 80),
        ("tcp://[2001:db8::1]:22", "2001:db8::1", 22),
        ("localhost:1", "localhost", 1),
    ],
)
def test_tcp_accepts(url: str, host: str, port: int) -> None:
    assert parse_target("tcp", url) == Target(
        type="tcp", host=host, port=port, url=url, scheme=None
    )


@pytest.mark.parametrize(
    ("url", "message_part"),
    [
        ("db.example.com", "host:port"),
        ("db.example.com:", "port"),
        (":5432", "host is missing"),
        ("db.example.com:0", "port"),
        ("db.example.com:70000", "port"),
        ("db.example.com:54x", "port"),
        ("db.example.com:+80", "port"),
        ("http://db.example.com:80", "host:port"),
        ("db.example.com:80/path", "host:port"),
        ("::1:80", "brackets"),
        ("[::1]", "brackets"),
        ("[::1]80", "brackets"),
        ("[db.example.com]:80", "IPv6"),
        ("user@db.example.com:80", "host:port"),
    ],
)
def test_tcp_rejects(url: str, message_part: str) -> None:
    with pytest.raises(InvalidTarget, match=message_part):
        parse_target("tcp", url)


def test_tcp_message_gives_an_example() -> None:
    with pytest.raises(InvalidTarget) as info:
        parse_target("tcp", "db.example.com")
    assert "a tcp monitor needs host:port, for example db.example.com:5432" in str(info.value)


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("example.com", "example.com"),
        ("dns://Example.com.", "example.com."),
        ("_dmarc.example.com", "_dmarc.example.com"),
        ("localhost", "localhost"),
    ],
)
def test_dns_accepts_host_names(url: str, host: str) -> None:
    assert parse_target("dns", url) == Target(
        type="dns", host=host, port=None, url=url, scheme=None
    )


@pytest.mark.parametrize(
    ("url", "message_part"),
    [
        ("192.0.2.1", "not an IP address"),
        ("2001:db8::1", "not an IP address"),
        ("dns://192.0.2.1", "not an IP address"),
        ("example.com:53", "no port"),
        ("https://example.com", "host name"),
        ("example.com/path", "no port, path"),
        ("exa_mple-.com", "not a valid host name"),
        ("dns://", "host is missing"),
    ],
)
def test_dns_rejects(url: str, message_part: str) -> None:
    with pytest.raises(InvalidTarget, match=message_part):
        parse_target("dns", url)


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("example.com", "example.com"),
        ("ping://example.com", "example.com"),
        ("192.0.2.10", "192.0.2.10"),
        ("2001:DB8::1", "2001:db8::1"),
        ("[2001:db8::1]", "2001:db8::1"),
        ("ping://[::1]", "::1"),
    ],
)
def test_ping_accepts_names_and_addresses(url: str, host: str) -> None:
    assert parse_target("ping", url) == Target(
        type="ping", host=host, port=None, url=url, scheme=None
    )


@pytest.mark.parametrize(
    "url",
    ["example.com:80", "http://example.com", "example.com/x", "[example.com]", "ping://", "1.2.3"],
)
def test_ping_rejects(url: str) -> None:
    with pytest.raises(InvalidTarget):
        parse_target("ping", url)


def test_unknown_type_is_invalid() -> None:
    with pytest.raises(InvalidTarget, match="one of http, tcp, dns, ping"):
        parse_target("smtp", "example.com")


def test_invalid_target_is_a_value_error() -> None:
    assert issubclass(InvalidTarget, ValueError)


_TYPES = st.sampled_from(["http", "tcp", "dns", "ping"])
_PIECES = st.sampled_from(
    [
        "http://", "https://", "tcp://", "dns://", "ping://", "[", "]", ":", "::", "@", "/",
        "?", "#", "%", "%25", ".", "-", "_", "1", "65536", "0", "example", "com", "xn--",
        "::1", "127.0.0.1", "ü", "ß", "\u0130", "\ufe0f", "\x00", " ", "\ud800", "\uff0e",
    ]
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(_TYPES, st.lists(_PIECES, max_size=8).map("".join))
def test_parse_target_raises_only_invalid_target_on_url_like_input(type: str, url: str) -> None:
    _check_total(type, url)


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(["http", "tcp", "dns", "ping", "", "HTTP"]), st.text(max_size=60))
def test_parse_target_raises_only_invalid_target_on_any_text(type: str, url: str) -> None:
    _check_total(type, url)


def _check_total(type: str, url: str) -> None:
    try:
        target = parse_target(type, url)
    except InvalidTarget as exc:
        assert str(exc)
        return
    assert target.type == type
    assert target.url == url
    assert target.host and target.host.isascii()
    if type in ("http", "tcp"):
        assert target.port is not None and 1 <= target.port <= 65535
    else:
        assert target.port is None
