"""The probes: one check per probe type (`PROBE_TYPES`), run through one shared `Prober`.

Usage::

    prober = Prober()  # once per process
    result = await prober.probe(
        ProbeSpec(type="http", url="https://example.com/", timeout_seconds=10.0,
                  method="GET", expected_status_code=200)
    )
    result.ok, result.response_time_ms, result.status_code, result.error_code

A failing target is data: `Prober.probe` returns a `ProbeResult` whose ``error_code`` is
one of `ERROR_CODES` (table in ``_result.py``); it raises only for bugs, and lets
`trio.Cancelled` through. The modules, one per concern:

- ``_registry``: `PROBE_TYPES`, the one list of the monitor types, and `parse_target`;
- ``_probe_type``: what a probe type is (`ProbeType`: its url parser, its check, what
  applies to it) and what its checks may use (`ProbeContext`);
- ``_result``: `ProbeSpec`, `ProbeResult`, the error codes;
- ``_prober``: `Prober`, the timeout and the translation of failures into results;
- ``_tcp``: resolution, the address policy, TCP connects (happy eyeballs), the tcp type;
- ``_http``: the http type (connections over trio, redirects, TLS);
- ``_http_response``: reading an http check's response (a fast path for the common head,
  h11 for the rest, the body up to its limit);
- ``_request``: what an http check sends (its url's rules, its request), and the rules
  on a monitor's request headers;
- ``_assertions``: what makes an http response up: status rule, assertions (their rules,
  shared with the API's validation), certificate expiry;
- ``_tls``: how https is verified per monitor (``tls_verify``, ``tls_ca_bundle``: the
  shared contexts, and the bundle's rules, shared with the API's validation);
- ``_dns``: the dns type (dnspython on trio), and `nameserver_resolver` for the target
  policy's create-time screen of dns monitors;
- ``_ping``: the ping type (ICMP sockets on trio);
- ``_source``: the address probes leave from (``--probe-source-address``).
"""

from ._assertions import (
    MAX_ASSERTIONS,
    Assertion,
    Comparison,
    InvalidAssertion,
    Source,
    check_assertions,
    compile_assertions,
)
from ._dns import nameserver_resolver
from ._http import MAX_REDIRECTS
from ._http_response import ASSERTION_BODY_BYTES, BODY_LIMIT_BYTES
from ._probe_type import ProbeType
from ._prober import Prober
from ._registry import PROBE_TYPES, http_fields_apply, parse_target
from ._request import (
    MAX_REQUEST_BODY_CHARS,
    MAX_REQUEST_HEADERS,
    USER_AGENT,
    InvalidRequestHeaders,
    check_request_headers,
)
from ._result import ERROR_CODES, ErrorCode, ProbeResult, ProbeSpec
from ._source import SourceAddress, source_address
from ._tcp import AddressPolicy, numeric_address
from ._tls import MAX_CA_BUNDLE_BYTES, InvalidCaBundle, TlsContexts, check_ca_bundle

__all__ = [
    "ASSERTION_BODY_BYTES",
    "BODY_LIMIT_BYTES",
    "ERROR_CODES",
    "MAX_ASSERTIONS",
    "MAX_CA_BUNDLE_BYTES",
    "MAX_REDIRECTS",
    "MAX_REQUEST_BODY_CHARS",
    "MAX_REQUEST_HEADERS",
    "PROBE_TYPES",
    "USER_AGENT",
    "AddressPolicy",
    "Assertion",
    "Comparison",
    "ErrorCode",
    "InvalidAssertion",
    "InvalidCaBundle",
    "InvalidRequestHeaders",
    "ProbeResult",
    "ProbeSpec",
    "ProbeType",
    "Prober",
    "Source",
    "SourceAddress",
    "TlsContexts",
    "check_assertions",
    "check_ca_bundle",
    "check_request_headers",
    "compile_assertions",
    "http_fields_apply",
    "nameserver_resolver",
    "numeric_address",
    "parse_target",
    "source_address",
]
