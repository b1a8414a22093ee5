"""What a probe type is (`ProbeType`) and what the `Prober` lends each check
(`ProbeContext`).

A probe type is a plug-in: its module (``_http``, ``_tcp``, ``_dns``, ``_ping``) holds
its ``url`` parser, its check and one `ProbeType` naming both, and ``_registry`` lists
the types (`PROBE_TYPES`). Everything that depends on the set of types reads it there:
the API's ``type`` field and the ``type`` filter of the monitor list (and so the OpenAPI
enums), the http-only fields, the target policy, the benchmark harness's plan; the
database's CHECK on ``monitors.type`` is held to it by a test (docs/development.md,
"Adding a probe type").
"""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import ssl

    import dns.asyncresolver

    from engine.targets import Target

    from ._result import ProbeResult, ProbeSpec
    from ._source import SourceAddress

__all__ = ["AddressPolicy", "Check", "ProbeContext", "ProbeType"]

AddressPolicy = Callable[[ipaddress.IPv4Address | ipaddress.IPv6Address], str | None]
"""Decides whether a probe may contact an address: ``None`` allows it, a string is the
reason it is refused (the check then fails with ``target_denied``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbeContext:
    """What a check may use of its `Prober`: built once per process, shared by every
    check, never changed.

    Attributes:
        ssl_context: verifies https servers for a spec without its own ``ssl_context``
            (the system's CAs, host names checked).
        dns_resolver: the resolver of dns checks (``_dns.make_resolver``).
        policy: the address policy, applied to every address a check would contact,
            or ``None`` to allow everything.
        ping_kinds: the ICMP socket types this process may open, preferred first; empty
            when it may open none (``_ping``).
        source: the local address every probe leaves from (``--probe-source-address``;
            ``_source``), or ``None`` for the system's choice.
    """

    ssl_context: ssl.SSLContext
    dns_resolver: dns.asyncresolver.Resolver
    policy: AddressPolicy | None
    ping_kinds: tuple[int, ...]
    source: SourceAddress | None = None


Check = Callable[["ProbeContext", "ProbeSpec", "Target"], Awaitable["ProbeResult"]]
"""One check of a monitor: ``check(context, spec, target)``, ``target`` being ``spec.url``
parsed by the type's parser. Returns the `ProbeResult`; raises `ProbeFailure` when the
target fails (the `Prober` turns it into a result and enforces ``timeout_seconds``) and
lets `trio.Cancelled` through."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbeType:
    """One probe type: the monitor ``type`` it serves and what is particular to it.

    Attributes:
        name: the monitor ``type`` (lower case, as the API and the database spell it).
        parse: the type's ``url`` rules: ``url`` to `Target`, raising `InvalidTarget`
            with a sentence for the API's 422 on ``url``; made with
            `engine.targets.url_parser` (shared checks, cached).
        check: runs one check (`Check`).
        http_fields: whether the http monitor fields apply (``method``,
            ``expected_status_code``, ``request_headers``, ``request_body``,
            ``assertions``, ``tls_expiry_days``, ``tls_verify``, ``tls_ca_bundle``:
            docs/checks.md); on other types they are null and setting one is a 422.
        resolves_with: how a check turns the host name into addresses, which the target
            policy's create-time screen does the same way (docs/api.md, "Target
            policy"): ``"system"``, getaddrinfo (``/etc/hosts`` read, numeric forms
            such as ``0x7f000001`` taken as addresses), for a type that contacts the
            host; ``"nameserver"``, the name asked of the dns checks' nameserver as
            it is written, for a type that only asks about the name.
    """

    name: str
    parse: Callable[[str], Target]
    check: Check
    http_fields: bool = False
    resolves_with: Literal["system", "nameserver"] = "system"
