"""What a channel type is (`ChannelType`): its config keys and their rules (`Key`), which
of them are secret, and how a `Message` becomes the provider's request (`HttpRequest`) or
how it is delivered otherwise (email). Each type is a module of this package; the
registry (``_registry``) lists them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from ._message import Attempt, ChannelSettings, InvalidChannelConfig, Message

__all__ = [
    "ChannelType",
    "Deliver",
    "HttpRequest",
    "Key",
    "Render",
    "RenderContext",
    "json_body",
    "json_headers",
]

MAX_VALUE_CHARS = 2048
"""Longest config value accepted, characters."""

KeyKind = Literal["url", "text", "email", "region", "token"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Key:
    """One config key of a channel type.

    Attributes:
        name: the key in ``config``.
        kind: its rule: ``url`` (http or https with a host), ``text`` (a non-empty
            string or an integer, kept as a string), ``token`` (a string without white
            space), ``email`` (an address), ``region`` (``us`` or ``eu``).
        required: whether it must be given (an optional key may be absent or null).
        secret: whether it is write-only, read back masked (`mask_config`).
        pattern: a regular expression the whole value must match, with ``hint`` saying
            in words what it expects.
        default: the value of an absent optional key, or None to leave it out.
    """

    name: str
    kind: KeyKind
    required: bool = True
    secret: bool = False
    pattern: str | None = None
    hint: str = ""
    default: str | None = None

    def check(self, value: Any) -> str:
        """``value`` normalized (stripped), or raises `InvalidChannelConfig` naming the key."""
        if self.kind == "text" and isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str):
            raise InvalidChannelConfig(self.name, f"{self.name} must be a string")
        text: str = value.strip()
        if not text:
            raise InvalidChannelConfig(self.name, f"{self.name} must not be empty")
        if len(text) > MAX_VALUE_CHARS:
            raise InvalidChannelConfig(
                self.name, f"{self.name} is longer than {MAX_VALUE_CHARS} characters"
            )
        reason = _RULES[self.kind](text)
        if reason is None and self.pattern is not None and not re.fullmatch(self.pattern, text):
            reason = f"must be {self.hint}"
        if reason is not None:
            raise InvalidChannelConfig(self.name, f"{self.name} {reason}")
        return text


def _url(value: str) -> str | None:
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 (raises on a bad port)
    except ValueError:
        return "must be an http or https url"
    if (
        parts.scheme not in ("http", "https")
        or not parts.hostname
        or any(c.isspace() for c in value)
    ):
        return "must be an http or https url"
    return None


def _token(value: str) -> str | None:
    return "must not contain white space" if any(c.isspace() for c in value) else None


def _email(value: str) -> str | None:
    if not re.fullmatch(r"[^@\s<>,;\"]+@[^@\s<>,;\"]+", value) or len(value) > 254:
        return "must be an email address"
    return None


def _region(value: str) -> str | None:
    return None if value in ("us", "eu") else "must be us or eu"


_RULES: Mapping[str, Callable[[str], str | None]] = {
    "url": _url,
    "text": lambda value: None,
    "token": _token,
    "email": _email,
    "region": _region,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpRequest:
    """A provider's request, ready for the target policy's client: always a POST.

    Attributes:
        url: where to send it (the provider base already applied).
        body: the bytes of the body.
        headers: (name, value) pairs, ``Content-Type`` included.

    Any 2xx answer is a success; anything else fails the attempt.
    """

    url: str
    body: bytes
    headers: tuple[tuple[str, str], ...]


Render = Callable[[Mapping[str, Any], Message, "RenderContext"], HttpRequest]
"""``render(config, message, context)``: the provider's request for ``message``."""

Deliver = Callable[[Mapping[str, Any], Message, ChannelSettings], Awaitable[Attempt]]
"""``deliver(config, message, settings)``: sends ``message`` by other means than an HTTP
POST (email); returns the `Attempt`, never raising for the far end's doing."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RenderContext:
    """What a renderer gets besides the config and the message.

    Attributes:
        base: the provider base to use (``--provider-base`` or the type's default), or
            None for a type whose config holds the whole url and no base was given.
        channel_id: the ``nch_`` id (keys test messages, which have no alert id).
        user_agent: ``Uptrio/<version>``.
        now: the time of sending, epoch seconds (signatures).
    """

    base: str | None
    channel_id: str
    user_agent: str
    now: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ChannelType:
    """One channel type (docs/alerts.md, "Notification channels").

    Attributes:
        name: the channel ``type``.
        keys: its config keys, in the order errors are reported.
        render: how a message becomes the provider's HTTP request, or None when
            ``deliver`` sends it.
        deliver: how a message is sent otherwise (email), or None.
        default_base: the provider's public API base, replaced by ``--provider-base``;
            None for a type whose config holds the whole url.
        prepare: completes a valid config (the webhook type's signing secret), or None.
    """

    name: str
    keys: tuple[Key, ...]
    render: Render | None = None
    deliver: Deliver | None = None
    default_base: str | None = None
    prepare: Callable[[dict[str, Any]], None] | None = None

    @property
    def secret_keys(self) -> frozenset[str]:
        """The names of the keys read back masked."""
        return frozenset(k.name for k in self.keys if k.secret)


def json_body(value: Any) -> bytes:
    """``value`` as compact JSON, UTF-8."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def json_headers(context: RenderContext, *extra: tuple[str, str]) -> tuple[tuple[str, str], ...]:
    """``Content-Type: application/json``, ``User-Agent``, then ``extra``."""
    return (("Content-Type", "application/json"), ("User-Agent", context.user_agent), *extra)
