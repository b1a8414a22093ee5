"""Channel config validation and masking (engine.validate_config, engine.mask_config;
docs/alerts.md, "Notification channels"): each refusal names its key."""

from __future__ import annotations

from typing import Any

import pytest

from engine import (
    CHANNEL_TYPES,
    InvalidChannelConfig,
    SmtpNotConfigured,
    mask_config,
    validate_config,
)


def test_the_nine_types_in_the_api_order() -> None:
    assert CHANNEL_TYPES == (
        "email",
        "slack",
        "discord",
        "teams",
        "telegram",
        "pagerduty",
        "opsgenie",
        "ntfy",
        "webhook",
    )


@pytest.mark.parametrize(
    ("type", "config", "param"),
    [
        ("slack", {}, "webhook_url"),
        ("slack", {"webhook_url": "ftp://hooks.slack.com/x"}, "webhook_url"),
        ("slack", {"webhook_url": "https://"}, "webhook_url"),
        ("slack", {"webhook_url": "https://h/x", "channel": "#ops"}, "channel"),
        ("discord", {"webhook_url": 12}, "webhook_url"),
        ("teams", {"webhook_url": "  "}, "webhook_url"),
        ("telegram", {"chat_id": "1"}, "bot_token"),
        ("telegram", {"bot_token": "nocolon", "chat_id": "1"}, "bot_token"),
        ("telegram", {"bot_token": "1:a", "chat_id": "not a chat"}, "chat_id"),
        ("pagerduty", {"routing_key": "has space"}, "routing_key"),
        ("opsgenie", {"api_key": "k", "region": "asia"}, "region"),
        ("ntfy", {"topic_url": "mailto:x@y"}, "topic_url"),
        ("ntfy", {"topic_url": "https://ntfy.sh/t", "access_token": 5}, "access_token"),
        ("webhook", {"url": "https://h/x", "secret": "plain"}, "secret"),
        ("email", {"address": "not an address"}, "address"),
        ("email", {"address": "a@b", "cc": "c@d"}, "cc"),
        ("sms", {}, "type"),
        ("slack", ["https://h/x"], "config"),
    ],
)
def test_refusals_name_their_key(type: str, config: Any, param: str) -> None:
    with pytest.raises(InvalidChannelConfig) as caught:
        validate_config(type, config, smtp=True)
    assert caught.value.param == param
    assert str(caught.value)


def test_normalized_configs() -> None:
    assert validate_config("opsgenie", {"api_key": " k "}, smtp=False) == {
        "api_key": "k",
        "region": "us",
    }
    assert validate_config("telegram", {"bot_token": "1:a", "chat_id": -100}, smtp=False) == {
        "bot_token": "1:a",
        "chat_id": "-100",
    }
    assert validate_config(
        "ntfy", {"topic_url": "https://n/t", "access_token": None}, smtp=False
    ) == {"topic_url": "https://n/t"}
    assert validate_config("email", {"address": "ops@example.com"}, smtp=True) == {
        "address": "ops@example.com"
    }


def test_webhook_secret_made_once_and_kept() -> None:
    made = validate_config("webhook", {"url": "https://h/x"}, smtp=False)
    assert made["secret"].startswith("whsec_") and len(made["secret"]) > 40
    again = validate_config("webhook", made, smtp=False)
    assert again["secret"] == made["secret"]
    assert (
        validate_config("webhook", {"url": "https://h/x"}, smtp=False)["secret"] != made["secret"]
    )


def test_email_without_a_relay_is_refused() -> None:
    with pytest.raises(SmtpNotConfigured):
        validate_config("email", {"address": "ops@example.com"}, smtp=False)


@pytest.mark.parametrize(
    ("type", "config", "masked"),
    [
        (
            "slack",
            {"webhook_url": "https://hooks.slack.com/services/T/B/abcd"},
            {"webhook_url": "…abcd"},
        ),
        (
            "discord",
            {"webhook_url": "https://discord.com/api/webhooks/1/wxyz"},
            {"webhook_url": "…wxyz"},
        ),
        (
            "teams",
            {"webhook_url": "https://x.logic.azure.com/w?sig=9876"},
            {"webhook_url": "…9876"},
        ),
        (
            "telegram",
            {"bot_token": "123456:ABCDEFGH", "chat_id": "-1"},
            {"bot_token": "…EFGH", "chat_id": "-1"},
        ),
        ("pagerduty", {"routing_key": "0123456789abcdef"}, {"routing_key": "…cdef"}),
        (
            "opsgenie",
            {"api_key": "0123456789-ffff", "region": "eu"},
            {"api_key": "…ffff", "region": "eu"},
        ),
        (
            "ntfy",
            {"topic_url": "https://ntfy.sh/t", "access_token": "tk_0123456789"},
            {"topic_url": "https://ntfy.sh/t", "access_token": "…6789"},
        ),
        (
            "webhook",
            {"url": "https://h/x", "secret": "whsec_" + "a" * 40 + "zzzz"},
            {"url": "https://h/x", "secret": "…zzzz"},
        ),
        ("email", {"address": "ops@example.com"}, {"address": "ops@example.com"}),
    ],
)
def test_masking(type: str, config: dict[str, Any], masked: dict[str, Any]) -> None:
    assert mask_config(type, config) == masked


def test_short_secrets_are_masked_whole() -> None:
    assert mask_config("pagerduty", {"routing_key": "abcdefgh"}) == {"routing_key": "…"}
