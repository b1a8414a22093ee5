"""The ``Uptrio-Signature`` header of webhook deliveries (docs/webhooks.md). Pure.

Value: ``t=<epoch seconds>,v1=<hex>[,v1=<hex>...]``, each ``<hex>`` the HMAC-SHA256 of
``"<t>.<raw body>"`` (the timestamp's decimal digits, a dot, the body's bytes exactly as
sent) keyed with one of the endpoint's valid secrets (the whole ``whsec_...`` string, as
UTF-8), one ``v1=`` per valid secret: two during the 24 hours after a rotation, the current
secret's first. A receiver accepts the delivery when any ``v1`` matches one it computes with
its secret, and rejects timestamps too far from its clock (replays); the README (Verifying a
delivery) has a receiver's snippet.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence

__all__ = ["SIGNATURE_HEADER", "sign", "signature_header"]

SIGNATURE_HEADER = "Uptrio-Signature"


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """The hex HMAC-SHA256 of ``b"<timestamp>." + body`` keyed with ``secret`` (UTF-8)."""
    message = str(timestamp).encode("ascii") + b"." + body
    return hmac.new(secret.encode("utf-8"), message, hashlib.sha256).hexdigest()


def signature_header(secrets: Sequence[str], timestamp: int, body: bytes) -> str:
    """The ``Uptrio-Signature`` value for ``body`` sent at ``timestamp`` (epoch seconds):
    ``t=<timestamp>`` then one ``v1=`` per secret, in order.

    Raises:
        ValueError: ``secrets`` is empty (a delivery is always signed).
    """
    if not secrets:
        raise ValueError("at least one secret is needed to sign a delivery")
    return ",".join([f"t={timestamp}", *(f"v1={sign(s, timestamp, body)}" for s in secrets)])
