"""Escalation policy endpoints (docs/alerts.md, "Escalation policies"): create, read,
list, update, delete.

Rules (docs/alerts.md; bodies in :mod:`web.api.escalation_policies`): member and channel
targets name the account's own members and channels (422 ``unknown_member`` /
``unknown_channel``, ``param`` the target's path: ``steps[0].targets[1].id``), and
schedule targets its own schedules (422 ``unknown_schedule``, docs/on-call.md); making
a policy the ``default`` unsets the account's previous default in the same transaction;
deleting a policy a monitor, heartbeat or open alert uses is refused (409
``policy_in_use``, type ``invalid_request_error``); lists are sortable by ``created``,
``updated`` and ``name``; PATCH ``steps`` replaces the list; a ``repeat`` above 0 needs
a step whose delay is not 0 (422 ``invalid_value``, ``param`` ``repeat``). Policies write
no events.
"""

from __future__ import annotations

from typing import Any

from store import EscalationPolicyRecord, escalation_policies, new_id, schedules

from ..api.common import list_object, merge_metadata
from ..api.escalation_policies import (
    PolicyCreate,
    PolicyList,
    PolicyObject,
    PolicyUpdate,
    StepIn,
    policy_object,
)
from ..http.errors import ApiError
from ..http.params import parse_list_query
from ..http.pipeline import ApiResponse, RequestContext
from ..http.validation import validate
from .common import (
    crud_routes,
    delete_unless_used,
    get_owned,
    not_found,
    now,
    patch_changes,
    path_id,
)
from .members import own_channels, own_members
from .resource import Resource

__all__ = ["RESOURCE", "own_policy"]


async def _steps(ctx: RequestContext, steps: list[StepIn]) -> list[dict[str, Any]]:
    """The steps as stored, after checking their member, channel and schedule targets.

    Raises:
        ApiError: 422 ``unknown_member``, ``unknown_channel`` or ``unknown_schedule``
            naming the first bad target's ``steps[i].targets[j].id``.
    """
    refs: dict[str, list[tuple[str, str]]] = {"member": [], "channel": [], "schedule": []}
    for i, step in enumerate(steps):
        for j, target in enumerate(step.targets):
            if target.type in refs:
                refs[target.type].append((target.id, f"steps[{i}].targets[{j}].id"))
    await own_members(ctx, refs["member"])
    await own_channels(ctx, refs["channel"])
    if refs["schedule"]:
        foreign = set(
            await ctx.deps.db.run(
                schedules.missing, ctx.account_id, [i for i, _ in refs["schedule"]]
            )
        )
        for schedule_id, param in refs["schedule"]:
            if schedule_id in foreign:
                raise ApiError(
                    "unknown_schedule", f"no such schedule: {schedule_id!r}", param=param
                )
    return [
        {
            "delay_seconds": s.delay_seconds,
            "targets": [{"type": t.type, "id": t.id} for t in s.targets],
        }
        for s in steps
    ]


async def own_policy(ctx: RequestContext, policy_id: str | None) -> None:
    """Check that ``policy_id`` (a monitor's or heartbeat's ``escalation_policy``) is
    null or a policy of the account.

    Raises:
        ApiError: 422 ``unknown_escalation_policy`` (``param`` ``escalation_policy``).
    """
    if policy_id is None:
        return
    missing: list[str] = await ctx.deps.db.run(
        escalation_policies.missing, ctx.account_id, [policy_id]
    )
    if missing:
        raise ApiError(
            "unknown_escalation_policy",
            f"no such escalation policy: {policy_id[:80]!r}",
            param="escalation_policy",
        )


def _spaced(steps: list[dict[str, Any]], repeat: int) -> None:
    """A repeated walk must take time (docs/alerts.md, "Escalation policies and the
    walk"): with ``repeat`` above 0 and every step's delay 0, every walk would be sent in
    the same instant, a burst of identical pages rather than reminders.

    Raises:
        ApiError: 422 ``invalid_value``, ``param`` ``repeat``.
    """
    if repeat > 0 and not any(s["delay_seconds"] for s in steps):
        raise ApiError(
            "invalid_value",
            "repeat needs a step that waits: with every delay_seconds 0 each repeated walk "
            "would be sent at the same instant as the first",
            param="repeat",
        )


async def create_policy(ctx: RequestContext) -> ApiResponse:
    """POST /escalation-policies: 201 with the new policy."""
    body = ctx.json_body(PolicyCreate)
    steps = await _steps(ctx, body.steps)
    _spaced(steps, body.repeat)
    created = now()
    values = {
        "id": new_id(RESOURCE.prefix),
        "account_id": ctx.account_id,
        "name": body.name,
        "steps": steps,
        "repeat": body.repeat,
        "is_default": body.default,
        "created": created,
        "updated": created,
        "metadata": merge_metadata({}, body.metadata),
    }
    record = await ctx.deps.db.transaction(escalation_policies.insert_policy, values)
    return ApiResponse(201, policy_object(record))


async def get_policy(ctx: RequestContext) -> ApiResponse:
    """GET /escalation-policies/:id."""
    return await get_owned(ctx, RESOURCE, escalation_policies.get_policy, policy_object)


async def list_policies(ctx: RequestContext) -> ApiResponse:
    """GET /escalation-policies: a page, newest first by default (``sort``: ``created``,
    ``updated``, ``name``)."""
    query = parse_list_query(
        ctx.query, prefix=RESOURCE.prefix, sorts=("created", "updated", "name"), filters={}
    )
    page = await ctx.deps.db.run(escalation_policies.list_policies, ctx.account_id, query.page)
    return ApiResponse(
        200, list_object("/escalation-policies", page.items, page.has_more, policy_object)
    )


async def update_policy(ctx: RequestContext) -> ApiResponse:
    """PATCH /escalation-policies/:id: only the fields sent change; ``steps`` replaces
    the list; ``default`` true unsets the previous default; metadata merges."""
    policy_id = path_id(ctx, RESOURCE)
    body = validate(PolicyUpdate, ctx.json_object())
    steps = None if body.steps is None else await _steps(ctx, body.steps)

    def apply(current: EscalationPolicyRecord) -> dict[str, Any]:
        changes = patch_changes(body, current, skip=frozenset({"steps", "default"}))
        if steps is not None and steps != current.steps:
            changes["steps"] = steps
        if body.default is not None and body.default != current.is_default:
            changes["is_default"] = body.default
        _spaced(changes.get("steps", current.steps), changes.get("repeat", current.repeat))
        return changes

    record = await ctx.deps.db.transaction(
        escalation_policies.update_policy, ctx.account_id, policy_id, apply, now()
    )
    if record is None:
        raise not_found(RESOURCE, policy_id)
    return ApiResponse(200, policy_object(record))


async def delete_policy(ctx: RequestContext) -> ApiResponse:
    """DELETE /escalation-policies/:id: 204, or 409 ``policy_in_use``."""
    return await delete_unless_used(
        ctx,
        RESOURCE,
        escalation_policies.delete_policy,
        refused=escalation_policies.PolicyInUse,
        code="policy_in_use",
        message=lambda exc: (
            f"this escalation policy is used by {', '.join(exc.users)}: point them at "
            "another policy (or none), or resolve the alert, first"
        ),
    )


RESOURCE = Resource(
    path="/escalation-policies",
    noun="escalation policy",
    prefix="esc",
    permission="on_call",
    tag="Escalation policies",
    description=(
        "Who is told of an alert, in which order and after how long: steps of members, "
        "schedules and channels, walked until someone acknowledges."
    ),
    routes=crud_routes(
        path="/escalation-policies",
        permission="on_call",
        singular="escalation_policy",
        plural="escalation_policies",
        prefix="esc",
        handlers=(list_policies, create_policy, get_policy, update_policy, delete_policy),
        models=(PolicyList, PolicyCreate, PolicyObject, PolicyUpdate),
        noun="escalation policy",
    ),
)
"""The escalation policies resource (permissions ``on_call.*``)."""
