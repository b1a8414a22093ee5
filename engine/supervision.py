"""The vocabulary of :mod:`engine.supervisor`: child specs, restart rules, errors and
statistics (Erlang/OTP's ``sup_princ``; Akka's ``BackoffSupervisor`` for the back-off).
Pure data: no task runs here.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "Backoff",
    "ChildInfo",
    "ChildSpec",
    "ChildStartError",
    "ChildState",
    "Intensity",
    "RestartType",
    "SupervisorClosed",
    "SupervisorError",
    "SupervisorEscalation",
    "SupervisorState",
    "SupervisorStatistics",
]


class RestartType(enum.StrEnum):
    """When a child is restarted (OTP ``restart``): ``PERMANENT`` after a crash *and*
    after a normal return; ``TRANSIENT`` only after a crash; ``TEMPORARY`` never. A child
    that is not restarted is removed. Operator restarts and stops are not counted."""

    PERMANENT = "permanent"
    TRANSIENT = "transient"
    TEMPORARY = "temporary"


ChildState = Literal["starting", "running", "restarting", "stopping"]
"""``starting``: the incarnation has not called ``started`` yet; an ended child is gone."""

SupervisorState = Literal["running", "closing", "closed", "escalated"]
"""``closing``: stopping its children; ``escalated``: ended by :class:`SupervisorEscalation`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Intensity:
    """At most ``max_restarts`` automatic restarts within ``period_seconds`` seconds (OTP
    ``intensity`` and ``period``), window (now - period, now]; one more escalates instead
    (``max_restarts=0``: the first crash escalates). ValueError if negative."""

    max_restarts: int = 10
    period_seconds: float = 60.0

    def __post_init__(self) -> None:
        if self.max_restarts < 0 or self.period_seconds <= 0:
            raise ValueError(f"need max_restarts >= 0 and period_seconds > 0: {self}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Backoff:
    """Exponential back-off before each automatic restart (Akka ``BackoffSupervisor``).

    The *n*-th consecutive restart of a child (n = 0, 1, ...) waits
    ``min(max_seconds, min_seconds * 2**n) * (1 + r * random_factor)`` seconds, r uniform
    in [0, 1) (``random_factor=0.2``: up to 20 % longer, so restarts do not synchronise).
    *n* is per child and goes back to 0 when the incarnation that just ended had run for
    at least ``reset_after_seconds`` seconds (Akka's auto-reset). ValueError if negative
    or ``min_seconds`` > ``max_seconds``."""

    min_seconds: float = 0.1
    max_seconds: float = 30.0
    random_factor: float = 0.2
    reset_after_seconds: float = 30.0

    def __post_init__(self) -> None:
        low = min(self.min_seconds, self.random_factor, self.reset_after_seconds)
        if low < 0 or self.min_seconds > self.max_seconds:
            raise ValueError(f"need 0 <= min_seconds <= max_seconds, others >= 0: {self}")

    def delay_seconds(self, attempt: int, random_value: float) -> float:
        """The wait in seconds before consecutive restart ``attempt`` (0-based), given
        ``random_value`` in [0, 1); a pure function of its arguments."""
        base = self.max_seconds
        if attempt < 64:  # past that, any sane min_seconds * 2**attempt is above max
            base = min(self.max_seconds, self.min_seconds * 2.0**attempt)
        return base * (1.0 + random_value * self.random_factor)


@dataclass(frozen=True, slots=True, kw_only=True)
class ChildSpec:
    """How to run and restart one child (OTP child specification).

    ``start`` is called as ``await start(task_status=status)`` for every incarnation and
    must call ``status.started(value)`` once ready (trio's ``nursery.start`` protocol;
    bind other arguments with ``functools.partial``). ``shutdown``, if given, is the
    polite stop, called with the incarnation's started value (for example
    ``lambda ref: ref.tell_nowait(Stop())``); the incarnation then has
    ``shutdown_seconds`` seconds to return before it is cancelled. Without it, before
    ``started``, if the hook raises or returns False (it could not ask), or when the
    stop asks for it (``stop_child(..., at_once=True)``, OTP's ``brutal_kill``),
    stopping cancels at once."""

    child_id: str
    start: Callable[..., Awaitable[object]]
    restart: RestartType = RestartType.PERMANENT
    shutdown: Callable[[Any], object] | None = None
    shutdown_seconds: float = 5.0


class SupervisorError(Exception):
    """Base of the supervisor's errors; ``child_id`` is None if no child is concerned."""

    def __init__(self, message: str, *, supervisor_name: str, child_id: str | None) -> None:
        super().__init__(message)
        self.supervisor_name = supervisor_name
        self.child_id = child_id


class SupervisorEscalation(SupervisorError):
    """The restart intensity was exceeded: raised by the supervisor into its parent,
    ``from`` the child's exception (None if a permanent child kept returning)."""


class ChildStartError(SupervisorError):
    """A child's first incarnation raised, returned or was stopped before it called
    ``task_status.started``; ``__cause__`` is its exception. Not counted as a restart."""


class SupervisorClosed(SupervisorError):
    """The supervisor is closing, closed or escalated: it takes no new child."""


@dataclass(frozen=True, slots=True)
class ChildInfo:
    """A snapshot of one child; ``last_failure`` is the repr of its last crash or None."""

    child_id: str
    state: ChildState
    restart: RestartType
    restarts: int
    last_failure: str | None


@dataclass(frozen=True, slots=True)
class SupervisorStatistics:
    """A snapshot of a supervisor: live ``children``; automatic restarts within the
    intensity period and in total; ``last_failure`` as ``"child_id: repr"`` or None."""

    name: str
    state: SupervisorState
    children: int
    restarts_in_period: int
    total_restarts: int
    last_failure: str | None
