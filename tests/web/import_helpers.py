"""What the importer tests share (tests/web/test_import.py, test_import_rules.py): the
check that an apply document is what the API accepts.

Every channel, policy, monitor and heartbeat of the document is validated against the
API's create models (``ChannelCreate`` with the engine's config rules, ``PolicyCreate``,
``MonitorCreate`` and the route's ``parse_target``, ``HeartbeatCreate``) once its
references by name are ids, as ``uptrio apply`` resolves them (docs/import.md).
"""

from __future__ import annotations

import json
from typing import Any

from engine import parse_target, validate_config
from web.api.escalation_policies import PolicyCreate
from web.api.heartbeats import HeartbeatCreate
from web.api.monitors import MonitorCreate
from web.api.notification_channels import ChannelCreate

__all__ = ["assert_api_accepts"]


def _fake_id(prefix: str, name: str) -> str:
    return f"{prefix}_" + "".join(c for c in name.lower() if c.isalnum())[:60] + "x"


def assert_api_accepts(document: dict[str, Any]) -> None:
    """Every resource of ``document`` passes its create model once its references by
    name are ids, and every reference names a resource of the document."""
    channels = {c["name"]: c for c in document.get("notification_channels", [])}
    policies = {p["name"]: p for p in document.get("escalation_policies", [])}
    for channel in channels.values():
        ChannelCreate.model_validate(channel)
        validate_config(channel["type"], channel["config"], smtp=True)
    for policy in policies.values():
        body = json.loads(json.dumps(policy))
        for step in body["steps"]:
            for target in step["targets"]:
                assert target["channel"] in channels
            step["targets"] = [
                {"type": "channel", "id": _fake_id("nch", t["channel"])} for t in step["targets"]
            ]
        PolicyCreate.model_validate(body)
    used = {
        item.get("escalation_policy")
        for kind in ("monitors", "heartbeats")
        for item in document.get(kind, [])
    }
    assert set(policies) <= used  # no policy that nothing uses
    for kind, model in (("monitors", MonitorCreate), ("heartbeats", HeartbeatCreate)):
        names = [item["name"] for item in document.get(kind, [])]
        assert len(names) == len(set(names))
        for item in document.get(kind, []):
            body = dict(item)
            if "escalation_policy" in body:
                assert body["escalation_policy"] in policies
                body["escalation_policy"] = _fake_id("esc", body["escalation_policy"])
            model.model_validate(body)
            if kind == "monitors":
                parse_target(body["type"], body["url"])  # the route's invalid_url check
