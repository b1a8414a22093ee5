"""Request and response bodies of the escalation policy endpoints (docs/alerts.md,
"Escalation policies"), in the style of :mod:`web.api.common` (strict requests, unknown
fields refused).

Rules (docs/alerts.md): ``name`` 1 to 100 characters; ``steps`` 1 to 10, each
``{"delay_seconds": 0 to 86,400, "targets": 1 to 10 of {"type": "member" | "schedule" |
"channel", "id"}}`` (a step's delay counts from the step before, the first's from the
trigger); a target's ``id`` has its type's prefix (``mbr_``, ``sch_``, ``nch_``: 422
``invalid_value``), and member and channel targets must exist in the account (422
``unknown_member`` / ``unknown_channel`` naming ``steps[i].targets[j].id``, checked by the
route); ``repeat`` 0 to 9; ``default`` true makes it the account's default, unsetting the
previous one.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from store import EscalationPolicyRecord

from .common import PATCH, REQUEST, Absent, ListObject, Metadata
from .shaping import From, shaper

__all__ = [
    "MAX_STEPS",
    "MAX_TARGETS",
    "PolicyCreate",
    "PolicyList",
    "PolicyObject",
    "PolicyUpdate",
    "StepIn",
    "policy_object",
]

MAX_STEPS = 10
MAX_TARGETS = 10
MAX_DELAY_SECONDS = 86_400
TARGET_PREFIXES = {"member": "mbr", "schedule": "sch", "channel": "nch"}
"""The id prefix of each target type."""
_ID = re.compile(r"^[a-z]{2,4}_[a-z0-9]{1,64}$")

PolicyName = Annotated[str, Field(min_length=1, max_length=100)]
TargetType = Literal["member", "schedule", "channel"]


class TargetIn(BaseModel):
    """Who a step tells: a member (on each of their contact channels), whoever a schedule
    has on call, or one channel."""

    model_config = ConfigDict(strict=True, extra="forbid")

    type: TargetType
    id: str = Field(pattern=r"^(mbr|sch|nch)_[a-z0-9]{1,64}$")

    @model_validator(mode="after")
    def _prefix_fits(self) -> TargetIn:
        prefix = TARGET_PREFIXES[self.type]
        if not (_ID.fullmatch(self.id) and self.id.startswith(prefix + "_")):
            raise PydanticCustomError(
                "invalid_value", f"a {self.type} target's id starts with {prefix}_"
            )
        return self


class StepIn(BaseModel):
    """One step: its delay (seconds, from the step before; the first's from the trigger)
    and its targets."""

    model_config = ConfigDict(strict=True, extra="forbid")

    delay_seconds: int = Field(ge=0, le=MAX_DELAY_SECONDS)
    targets: list[TargetIn] = Field(min_length=1, max_length=MAX_TARGETS)


Steps = Annotated[
    list[StepIn], Field(min_length=1, max_length=MAX_STEPS, description="1 to 10 steps.")
]
Repeat = Annotated[
    int, Field(ge=0, le=9, description="How many more times the steps are walked (0 to 9).")
]


class PolicyCreate(BaseModel):
    """The body of `POST /escalation-policies`."""

    model_config = REQUEST

    name: PolicyName
    steps: Steps
    repeat: Repeat = 0
    default: bool = False
    metadata: Metadata = Field(default_factory=dict)


class PolicyUpdate(BaseModel):
    """The body of `PATCH /escalation-policies/{id}`: only the fields to change; `steps`
    replaces the list; `default` true makes it the account's default (false: the account
    has none); `metadata` is merged key by key."""

    model_config = PATCH

    name: PolicyName | Absent = None
    steps: Steps | Absent = None
    repeat: Repeat | Absent = None
    default: bool | Absent = None
    metadata: Metadata | Absent = None


class TargetObject(BaseModel):
    """A step's target."""

    type: TargetType
    id: str


class StepObject(BaseModel):
    """A step: its delay (seconds) and its targets."""

    delay_seconds: int
    targets: list[TargetObject]


class PolicyObject(BaseModel):
    """An escalation policy: who is told, in which order, after how long."""

    id: str = Field(pattern=r"^esc_[a-z0-9]+$")
    object: Literal["escalation_policy"]
    name: str
    steps: list[StepObject]
    repeat: int
    default: Annotated[bool, From("is_default")]
    created: int
    updated: int
    metadata: dict[str, str]


policy_object = shaper(PolicyObject, EscalationPolicyRecord)
"""A policy as the API shows it."""


class PolicyList(ListObject):
    """A page of escalation policies."""

    data: list[PolicyObject]
