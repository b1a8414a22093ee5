"""What makes an http response up (docs/checks.md): the status rule, assertions and
certificate expiry (`status_verdict`, `assertion_verdict`, `tls_expiring`); the
assertions' rules, checked once when a monitor is saved (`compile_assertions`,
`check_assertions`: the API's 422s), and their evaluation after every check
(`failed_assertion`).

One assertion is ``{"source", "property", "comparison", "target"}``:

================== =============================== =====================================
source             property                        compared value
================== =============================== =====================================
``status_code``    none                            the final status (an integer)
``response_time_ms`` none                          the check's response time (ms)
``header``         a header name (any case)        the header's first value, as text
``body``           none                            the first 1 MiB of body, as text
``json_body``      a JSONPath (``$.status``)       the value found there (jsonpath-ng)
================== =============================== =====================================

Comparisons and their type rules (decided here; docs/checks.md, Assertions and TLS
expiry):

- A value is *numeric* when it is a JSON number (not ``true``/``false``) or text holding a
  decimal number (``"12"``, ``" -0.5 "``, ``"1e3"``). Its *text* is itself for a string,
  its JSON form otherwise (``true``, ``null``, ``12``, ``{"a":1}``).
- ``equals`` / ``not_equals``: numerically when both sides are numeric (``"200"`` equals
  200, ``"1.0"`` equals 1), else text against text.
- ``contains`` / ``not_contains``: a JSON array found contains the target when one of its
  items ``equals`` it; any other value when its text contains the target's text.
- ``less_than`` / ``greater_than``: numerically; a value that is not numeric fails.
- ``is_empty`` / ``is_not_empty``: empty is a missing value (no such header, a JSONPath
  matching nothing), ``null``, ``""``, ``[]`` and ``{}``.
- A missing value fails every comparison but ``not_equals``, ``not_contains`` and
  ``is_empty``. A JSONPath matching several values compares the array of them.

What each source takes: ``status_code`` and ``response_time_ms`` no property, a number
as target and ``equals``, ``not_equals``, ``less_than`` or ``greater_than``; ``header``
(a header name) and ``json_body`` (a JSONPath starting with ``$``) a property; ``body``
none. Every comparison but ``is_empty`` and ``is_not_empty`` (which take none) needs a
target: a string, a number or a boolean, at most 1,000 characters as text; ``less_than``
and ``greater_than`` need a number.

The body is decoded with the ``charset`` of ``Content-Type`` when Python knows it, else
UTF-8, undecodable bytes replaced; ``json_body`` parses that text as JSON once per check.
"""

from __future__ import annotations

import functools
import json
import math
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, get_args

import trio
from jsonpath_ng.ext.parser import parse as parse_jsonpath

__all__ = [
    "COMPARISONS",
    "MAX_ASSERTIONS",
    "SOURCES",
    "Assertion",
    "Comparison",
    "InvalidAssertion",
    "Response",
    "Source",
    "assertion_verdict",
    "check_assertions",
    "compile_assertions",
    "failed_assertion",
    "needs",
    "status_verdict",
    "tls_expiring",
]

MAX_ASSERTIONS: Final = 20
"""Assertions a monitor may have (docs/checks.md)."""

INLINE_BODY_BYTES: Final = 16 * 1024
"""Bodies up to this size are judged in the event loop; larger ones in a worker thread."""

Source = Literal["status_code", "response_time_ms", "header", "body", "json_body"]
Comparison = Literal[
    "equals",
    "not_equals",
    "contains",
    "not_contains",
    "less_than",
    "greater_than",
    "is_empty",
    "is_not_empty",
]
SOURCES: Final = get_args(Source)
COMPARISONS: Final = get_args(Comparison)
_NUMERIC_SOURCES = frozenset({"status_code", "response_time_ms"})
_NUMERIC_ONLY = frozenset({"equals", "not_equals", "less_than", "greater_than"})
_ORDERED = frozenset({"less_than", "greater_than"})
_NO_TARGET = frozenset({"is_empty", "is_not_empty"})
_PASS_WHEN_MISSING = frozenset({"not_equals", "not_contains", "is_empty"})
_MAX_TARGET_CHARS = 1000
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}")
_NUMBER = re.compile(r"\s*-?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?\s*")
_CHARSET = re.compile(rb";\s*charset\s*=\s*\"?([A-Za-z0-9._:-]+)", re.IGNORECASE)
_MISSING: Any = object()
"""The value of a header that is absent or a JSONPath that matches nothing."""

# needs(): what a probe must read for a monitor's assertions
HEAD_ONLY, HEADERS, BODY = 0, 1, 2


class InvalidAssertion(ValueError):
    """An assertion breaks a rule of the module docstring.

    Attributes:
        code: the API's error code, ``invalid_assertion`` or ``invalid_jsonpath``.
        message: one sentence naming the assertion (``assertions[1]: ...``).
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class Assertion:
    """One compiled assertion (module docstring); ``problem`` is the rule it breaks, or
    None. The engine runs whatever is stored: an assertion that a later version refuses
    fails its checks with ``problem`` as message instead of stopping the monitor."""

    source: str
    property: str | None
    comparison: str
    target: str | int | float | bool | None
    problem: tuple[str, str] | None = None
    path: Any = field(default=None, compare=False, repr=False)
    """The compiled JSONPath of a ``json_body`` assertion."""


def compile_assertions(raw: Sequence[Mapping[str, Any]]) -> tuple[Assertion, ...]:
    """Compile a monitor's stored ``assertions`` (a list of objects); never raises: the
    rule an assertion breaks is kept in its ``problem``."""
    return tuple(_compile(index, item) for index, item in enumerate(raw))


def check_assertions(raw: Sequence[Mapping[str, Any]]) -> None:
    """Check ``assertions`` as sent to the API (at most `MAX_ASSERTIONS`, each by the
    rules of the module docstring).

    Raises:
        InvalidAssertion: the first rule broken, for a 422 with its code.
    """
    if len(raw) > MAX_ASSERTIONS:
        raise InvalidAssertion(
            "invalid_assertion", f"assertions may hold at most {MAX_ASSERTIONS}, got {len(raw)}"
        )
    for assertion in compile_assertions(raw):
        if assertion.problem is not None:
            raise InvalidAssertion(*assertion.problem)


def _compile(index: int, item: Mapping[str, Any]) -> Assertion:
    source, prop = item.get("source"), item.get("property")
    comparison, target = item.get("comparison"), item.get("target")
    problem = _problem(source, prop, comparison, target)
    path = None
    if problem is None and source == "json_body":
        path = _jsonpath(prop)
        if path is None:
            problem = ("invalid_jsonpath", f"{prop!r} is not a JSONPath jsonpath-ng accepts")
    if problem is not None:
        problem = (problem[0], f"assertions[{index}]: {problem[1]}")
    return Assertion(
        source=str(source),
        property=prop,
        comparison=str(comparison),
        target=target,
        problem=problem,
        path=path,
    )


def _problem(source: Any, prop: Any, comparison: Any, target: Any) -> tuple[str, str] | None:
    """The rule broken (code, message without the index), or None."""
    bad = "invalid_assertion"
    if source not in SOURCES:
        return bad, f"source must be one of {', '.join(SOURCES)}"
    if comparison not in COMPARISONS:
        return bad, f"comparison must be one of {', '.join(COMPARISONS)}"
    if source in ("header", "json_body"):
        if not isinstance(prop, str) or not prop:
            what = "a header name" if source == "header" else "a JSONPath such as $.status"
            return bad, f"a {source} assertion needs a property: {what}"
        if source == "header" and not _TOKEN.fullmatch(prop):
            return bad, f"property {prop[:100]!r} is not a header name (RFC 9110 token)"
        if source == "json_body" and (not prop.startswith("$") or len(prop) > 1000):
            return "invalid_jsonpath", f"property {prop[:100]!r} must be a JSONPath starting with $"
    elif prop is not None:
        return bad, f"a {source} assertion takes no property"
    if source in _NUMERIC_SOURCES and comparison not in _NUMERIC_ONLY:
        return bad, f"{source} takes equals, not_equals, less_than or greater_than"
    if comparison in _NO_TARGET:
        if target is not None:
            return bad, f"{comparison} takes no target"
        return None
    if target is None:
        return bad, f"{comparison} needs a target"
    if not isinstance(target, str | int | float) or (
        isinstance(target, float) and not math.isfinite(target)
    ):
        return bad, "target must be a string, a number or a boolean"
    if len(_text(target)) > _MAX_TARGET_CHARS:
        return bad, f"target may be at most {_MAX_TARGET_CHARS} characters"
    needs_number = comparison in _ORDERED or source in _NUMERIC_SOURCES
    if needs_number and (isinstance(target, bool) or not isinstance(target, int | float)):
        return bad, f"{source} {comparison} needs a number as target"
    return None


@functools.lru_cache(maxsize=4096)
def _jsonpath(text: str) -> Any:
    """``text`` compiled by jsonpath-ng (its extended syntax, filters included), or None
    when it does not parse. Cached: compiling costs about 0.3 ms."""
    try:
        return parse_jsonpath(text)
    except Exception:  # JsonPathParserError, LexerError, and whatever else ply raises
        return None


def needs(assertions: Sequence[Assertion]) -> int:
    """What a probe must read for ``assertions``: `HEAD_ONLY` (status and timing: the
    fast path), `HEADERS`, or `BODY` (up to 1 MiB of it)."""
    need = HEAD_ONLY
    for assertion in assertions:
        if assertion.source in ("body", "json_body"):
            return BODY
        if assertion.source == "header":
            need = HEADERS
    return need


@dataclass(slots=True, kw_only=True)
class Response:
    """What the probe keeps of a final response for assertions: ``status``,
    ``response_time_ms`` (milliseconds), ``headers`` (h11's: lower-case names, bytes) and,
    with ``keep_body``, ``body`` (at most 1 MiB; ``truncated`` when there was more). The
    http probe fills it while it reads (``_http_response._read_with_h11``)."""

    keep_body: bool = False
    status: int = 0
    response_time_ms: float = 0.0
    headers: Sequence[tuple[bytes, bytes]] = ()
    body: bytearray = field(default_factory=bytearray)
    truncated: bool = False
    text: str | None = None
    """The body decoded (`_body_text`), once."""
    document: Any = _MISSING
    """The body parsed as JSON, once."""


def status_verdict(status: int, expected_status_code: int | None) -> tuple[str | None, str | None]:
    """(error code, message) of a final ``status`` for a monitor without assertions, or
    (None, None) when it is up: ``expected_status_code``, or any 2xx when that is None
    (``unexpected_status``)."""
    if expected_status_code is None:
        if 200 <= status < 300:
            return None, None
        return "unexpected_status", f"expected a 2xx status, got {status}"
    if status == expected_status_code:
        return None, None
    return "unexpected_status", f"expected status {expected_status_code}, got {status}"


async def assertion_verdict(
    assertions: Sequence[Assertion], status: int, response_time_ms: float, seen: Response | None
) -> tuple[str | None, str | None]:
    """(``"assertion_failed"``, message) when an assertion fails on the final response,
    else (None, None). ``seen`` holds the head and body the assertions need (None when
    they need neither).

    A body over `INLINE_BODY_BYTES` is judged in a worker thread (`trio.to_thread`; it
    is not abandoned on cancellation): a JSONPath such as ``$..*`` over 1 MiB of JSON
    takes about 0.4 s of CPU, which must not stop every other check of the process.
    """
    if seen is None:
        seen = Response()
    seen.status, seen.response_time_ms = status, response_time_ms
    if len(seen.body) > INLINE_BODY_BYTES:
        message = await trio.to_thread.run_sync(failed_assertion, assertions, seen)
    else:
        message = failed_assertion(assertions, seen)
    return (None, None) if message is None else ("assertion_failed", message)


def tls_expiring(host: str, expires_at: int, days: int) -> tuple[str | None, str | None]:
    """(``"tls_expiring"``, message) when a certificate of ``host`` expiring at
    ``expires_at`` (epoch seconds) does so within ``days`` days of now (wall clock), else
    (None, None) (docs/checks.md). A certificate that has expired already (seen only
    with ``tls_verify`` false: verification refuses it) is within every ``days``, 0
    included, and the message says it expired."""
    left = expires_at - time.time()
    if left >= days * 86_400:
        return None, None
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(expires_at))
    if left < 0:
        return "tls_expiring", (
            f"the TLS certificate of {host} expired on {when}, {-left / 86_400:.1f} days "
            f"ago (tls_expiry_days is {days})"
        )
    return "tls_expiring", (
        f"the TLS certificate of {host} expires on {when}, in {left / 86_400:.1f} days "
        f"(tls_expiry_days is {days})"
    )


def failed_assertion(assertions: Sequence[Assertion], response: Response) -> str | None:
    """The message of the first assertion ``response`` fails (``assertions[2]: json_body
    $.status equals "ok", found "degraded"``, with how many more failed), or None."""
    failures = [m for i, a in enumerate(assertions) if (m := _failure(i, a, response))]
    if not failures:
        return None
    more = len(failures) - 1
    return failures[0] + (f" (and {more} more assertion{'s' * (more > 1)} failed)" if more else "")


def _failure(index: int, assertion: Assertion, response: Response) -> str | None:
    if assertion.problem is not None:
        return assertion.problem[1]
    comparison, target = assertion.comparison, assertion.target
    said = f"assertions[{index}]: {assertion.source}"
    if assertion.property is not None:
        said += f" {assertion.property}"
    said += f" {comparison}" + ("" if target is None else f" {_shown(target)}")
    try:
        found = _value(assertion, response)
    except ValueError as exc:  # a body that is no JSON, a JSONPath failing on it
        return f"{said}: {exc}"
    if _holds(comparison, found, target):
        return None
    return f"{said}, found {_describe(assertion, found)}"


def _value(assertion: Assertion, response: Response) -> Any:
    source = assertion.source
    if source == "status_code":
        return response.status
    if source == "response_time_ms":
        return response.response_time_ms
    if source == "header":
        wanted = (assertion.property or "").lower().encode("ascii")
        for name, value in response.headers:
            if name == wanted:
                return value.decode("latin-1")
        return _MISSING
    if source == "body":
        return _body_text(response)
    if response.document is _MISSING:
        try:
            response.document = json.loads(_body_text(response))
        except ValueError:
            cut = " (it was cut at 1 MiB)" if response.truncated else ""
            raise ValueError(f"the body is not valid JSON{cut}") from None
    try:
        found = [match.value for match in assertion.path.find(response.document)]
    except Exception as exc:  # jsonpath-ng's own failure on this document
        raise ValueError(f"the JSONPath failed on this body: {exc}") from None
    if not found:
        return _MISSING
    return found[0] if len(found) == 1 else found


def _body_text(response: Response) -> str:
    if response.text is None:
        charset = "utf-8"
        for name, value in response.headers:
            if name == b"content-type" and (match := _CHARSET.search(value)):
                charset = match[1].decode("ascii")
        try:
            response.text = response.body.decode(charset, errors="replace")
        except LookupError:  # a charset Python does not know
            response.text = response.body.decode("utf-8", errors="replace")
    return response.text


def _holds(comparison: str, found: Any, target: Any) -> bool:
    if found is _MISSING:
        return comparison in _PASS_WHEN_MISSING
    if comparison == "equals":
        return _equal(found, target)
    if comparison == "not_equals":
        return not _equal(found, target)
    if comparison in ("contains", "not_contains"):
        if isinstance(found, list):
            inside = any(_equal(item, target) for item in found)
        else:
            inside = _text(target) in _text(found)
        return inside == (comparison == "contains")
    if comparison in _ORDERED:
        number, bound = _number(found), _number(target)
        if number is None or bound is None:
            return False
        return number < bound if comparison == "less_than" else number > bound
    empty = found is None or found in ("", [], {})
    return empty == (comparison == "is_empty")


def _equal(found: Any, target: Any) -> bool:
    a, b = _number(found), _number(target)
    if a is not None and b is not None:
        return a == b
    return _text(found) == _text(target)


def _number(value: Any) -> int | float | None:
    """``value`` as a number when it is numeric (module docstring), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return value
    if isinstance(value, str) and _NUMBER.fullmatch(value):
        number = float(value)
        return number if math.isfinite(number) else None
    return None


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _shown(value: Any) -> str:
    """``value`` for a message: JSON form, at most about 100 characters."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= 100 else text[:99] + "…"


def _describe(assertion: Assertion, found: Any) -> str:
    if assertion.source == "response_time_ms":
        return f"{found:.1f}"
    if found is not _MISSING:
        return _shown(found)
    if assertion.source == "header":
        return f"no {assertion.property} header"
    return f"nothing at {assertion.property}"
