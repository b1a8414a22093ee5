"""``uptrio export``: the account's resources in the apply format (docs/apply.md),
so that ``uptrio apply`` of the output on an empty account makes
them again.

Each object keeps only its create fields (read-only fields such as ``id``, ``status`` and
``created`` go), without the fields equal to their create default; references are names;
``metadata.managed_by`` goes (apply sets it on what it creates). A channel secret, which
the API only shows masked, is left out and named on standard error: add it to the file before
applying it elsewhere (a webhook's signing secret left out is one the service makes anew).
"""

from __future__ import annotations

import sys
from typing import Any, TextIO

import yaml

from ....routes.monitors import default_tls_expiry_days
from .account import read_account
from .client import ApiClient
from .format import KINDS, Kind

__all__ = ["export_account", "exported"]


def exported(kind: Kind, obj: dict[str, Any]) -> dict[str, Any]:
    """One account object (references already names) as an apply file has it: ``name``
    first, then the create fields that are not their default, in the model's order."""
    defaults = kind.defaults()
    out: dict[str, Any] = {kind.name_field: obj[kind.name_field]}
    for key in kind.model.model_fields:
        if key == kind.name_field or key not in obj:
            continue
        value = obj[key]
        if key == "metadata":
            value = {k: v for k, v in value.items() if k != "managed_by"}
        if isinstance(value, list):
            value = [_without_nulls(element) for element in value]
        if key in defaults and value in (defaults[key], _service_default(kind, key, obj)):
            continue
        out[key] = value
    return out


def _service_default(kind: Kind, key: str, obj: dict[str, Any]) -> Any:
    """What the service stores for a field a create left out whose create default is null:
    an http monitor's method (GET), expected status (200), headers ({}), assertions ([]),
    TLS verification (true) and TLS expiry days (14 for an https url), as the create in
    web/routes/monitors.py fills them; None for other fields and kinds."""
    if kind.key != "monitors" or obj.get(key) is None:
        return None
    return {
        "method": "GET",
        "expected_status_code": 200,
        "request_headers": {},
        "assertions": [],
        "tls_verify": True,
        "tls_expiry_days": default_tls_expiry_days(str(obj.get("url", ""))),
    }.get(key)


def _without_nulls(value: Any) -> Any:
    """``value`` without the null keys of the objects in it (a component's ``group``, a
    rotation's ``length_seconds``): the create models take them left out."""
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def _masked_secrets(kind: Kind, obj: dict[str, Any]) -> list[str]:
    """The keys of a channel's config whose value the API masked (``…`` and 4 characters);
    ``obj["config"]`` is a copy the caller may change."""
    if kind.key != "notification_channels":
        return []
    obj["config"] = dict(obj.get("config") or {})
    return [k for k, v in obj["config"].items() if isinstance(v, str) and v.startswith("…")]


async def export_account(
    api: ApiClient, out: TextIO | None = None, err: TextIO | None = None
) -> None:
    """Write the account's resources as one apply file on ``out`` (default stdout); each
    masked secret left out, named on ``err`` (default stderr). Raises ApiError when a list fails."""
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    account = await read_account(api)
    document: dict[str, list[dict[str, Any]]] = {}
    for kind in KINDS:
        items = []
        for obj in account.objects.get(kind.path, []):
            named = account.to_names(kind, obj)
            for key in _masked_secrets(kind, named):
                del named["config"][key]
                print(
                    f"uptrio: {kind.key} {named[kind.name_field]}: config.{key} is a secret the "
                    "API shows masked: left out, add it to the file before applying",
                    file=err,
                )
            items.append(exported(kind, named))
        if items:
            document[kind.key] = items
    out.write(yaml.safe_dump(document, sort_keys=False, allow_unicode=True))
