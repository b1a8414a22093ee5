"""``uptrio serve`` flags for request safety: rate limits, idempotency, the body timeout,
the target policy.

Kept apart from :mod:`web.cli` so that the composition root only wires: the flags are
declared by :func:`add_request_safety_flags`, read back by :func:`web_settings` (into
:class:`web.services.WebSettings`) and :func:`target_policy` (into the
:class:`engine.policy.TargetPolicy` that both the web layer and the Prober get).
"""

from __future__ import annotations

import argparse

from engine.policy import TargetPolicy
from engine.probes import nameserver_resolver

from .services import WebSettings

__all__ = [
    "add_request_safety_flags",
    "positive_float",
    "positive_int",
    "target_policy",
    "web_settings",
]

_DEFAULTS = WebSettings()


def positive_int(text: str) -> int:
    """An integer of at least 1, for ``argparse``.

    Raises:
        argparse.ArgumentTypeError: anything else.
    """
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {value}")
    return value


def positive_float(text: str) -> float:
    """A finite number above 0, for ``argparse``.

    Raises:
        argparse.ArgumentTypeError: anything else.
    """
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be above 0: {text}")
    return value


def add_request_safety_flags(parser: argparse.ArgumentParser) -> None:
    """Add the rate-limit (spec 8), idempotency (spec 4.5) and target-policy flags."""
    group = parser.add_argument_group("request safety")
    group.add_argument(
        "--token-requests-per-minute",
        type=positive_int,
        default=_DEFAULTS.token_requests_per_minute,
        help="requests per token per rolling minute (default %(default)s)",
    )
    group.add_argument(
        "--token-requests-per-hour",
        type=positive_int,
        default=_DEFAULTS.token_requests_per_hour,
        help="requests per token per rolling hour (default %(default)s)",
    )
    group.add_argument(
        "--account-requests-per-minute",
        type=positive_int,
        default=_DEFAULTS.account_requests_per_minute,
        help="requests per account, all tokens, per rolling minute (default %(default)s)",
    )
    group.add_argument(
        "--auth-failures-per-minute",
        type=positive_int,
        default=_DEFAULTS.auth_failures_per_minute,
        help="failed authentications per client address per rolling minute before it gets "
        "429s (default %(default)s)",
    )
    group.add_argument(
        "--idempotency-retention-seconds",
        type=positive_int,
        default=_DEFAULTS.idempotency_retention_seconds,
        help="how long idempotency keys replay, seconds (default %(default)s: 24 hours)",
    )
    group.add_argument(
        "--body-timeout-seconds",
        type=positive_float,
        default=_DEFAULTS.body_timeout_seconds,
        help="longest wait for a request's whole body before a 408 body_timeout, seconds "
        "(default %(default)s)",
    )
    group.add_argument(
        "--deny-private-targets",
        action="store_true",
        help="refuse monitors and checks on loopback, private, link-local, unspecified, "
        "multicast and other non-global addresses",
    )
    group.add_argument(
        "--allow-metadata-targets",
        action="store_true",
        help="allow link-local and cloud metadata addresses (169.254.169.254, ...), "
        "refused by default",
    )


def web_settings(args: argparse.Namespace) -> WebSettings:
    """The web layer's settings from ``uptrio serve`` flags."""
    return WebSettings(
        max_body_bytes=args.max_body_bytes,
        token_requests_per_minute=args.token_requests_per_minute,
        token_requests_per_hour=args.token_requests_per_hour,
        account_requests_per_minute=args.account_requests_per_minute,
        auth_failures_per_minute=args.auth_failures_per_minute,
        idempotency_retention_seconds=args.idempotency_retention_seconds,
        body_timeout_seconds=args.body_timeout_seconds,
    )


def target_policy(args: argparse.Namespace) -> TargetPolicy:
    """The target policy from ``uptrio serve`` flags (an immutable value: building it
    twice gives equal policies). The names of dns monitors are screened with the
    nameserver their checks ask (``--dns-nameserver``, else the system's; issue 15)."""
    return TargetPolicy(
        deny_private=args.deny_private_targets,
        allow_metadata=args.allow_metadata_targets,
        dns_resolver=nameserver_resolver(args.dns_nameserver),
    )
