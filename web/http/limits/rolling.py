"""Rolling-window request counting for the rate limits (docs/api.md, Rate limits), in
memory, per process.

Pure bookkeeping, no I/O and no web imports: :class:`RateLimiter` counts requests per
``(window, key)`` and answers whether one more fits. The middlewares of
:mod:`web.http.limits.throttle` decide which windows a request is counted in.

Algorithm: a sliding window kept as sub-window counters. A window of ``period_seconds``
is cut into :data:`SUB_WINDOWS` slices (1 s for a minute, 60 s for an hour); each key keeps
one counter per slice that holds requests, oldest first. A request counts from the moment
it is admitted until its slice's end plus the period, so between ``period_seconds`` and
``period_seconds + period_seconds / 60`` (60 to 61 s for a minute window, 60 to 61 min for
an hour). This errs on the strict side: no span of ``period_seconds`` ever holds more than
``limit`` admitted requests, a burst across a window boundary included, which a fixed
window cannot promise and a GCRA with a full-size burst does not either (it lets
``limit`` requests through at once and then more as its bucket drains, up to about twice
``limit`` in one period).

Memory: a key costs a dictionary entry and at most 61 slice numbers with their counts (a
key that sends a steady stream uses all of them; a burst uses one), in one flat list;
keys whose requests all expired are dropped every :data:`PRUNE_EVERY` operations.

Time: the clock is injected (default `trio.current_time`, monotonic seconds); tests pass
their own function and move it by hand. Results say durations relative to that clock;
the middleware turns them into epoch seconds for ``X-RateLimit-Reset``.

Several nodes (docs/several-nodes.md, Rate limits across nodes: they hold for the whole
service): the windows shared by the nodes are leased from the database by
:class:`web.http.limits.quota.QuotaLimiter`, which keeps these same semantics and uses this
limiter for the windows of one node (a ping key's) and for a node's own requests (what it
decides from when it cannot reach the database).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import trio

__all__ = [
    "PRUNE_EVERY",
    "SUB_WINDOWS",
    "Decision",
    "RateLimiter",
    "RateLimiterStatistics",
    "Window",
]

SUB_WINDOWS = 60
"""Slices per window: a request expires at the end of its slice plus the period."""

PRUNE_EVERY = 4096
"""Operations between two sweeps that drop keys with nothing left to count."""


@dataclass(frozen=True, slots=True)
class Window:
    """One limit: at most ``limit`` requests per rolling ``period_seconds`` (seconds).

    ``name`` tells windows apart in the limiter's state and in log lines (for example
    ``"token/minute"``); two windows with the same name must have the same period.
    """

    name: str
    limit: int
    period_seconds: float

    def __post_init__(self) -> None:
        if self.limit < 1 or not self.period_seconds > 0:
            raise ValueError(f"a window needs limit >= 1 and a period > 0: {self!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    """The answer for one request, for the most constraining window it was counted in.

    Attributes:
        allowed: whether the request was admitted (and counted).
        window: the name of the window reported.
        limit: that window's limit (``X-RateLimit-Limit``).
        remaining: requests still admitted in that window now (``X-RateLimit-Remaining``;
            0 when refused).
        reset_after_seconds: seconds until the oldest request counted in that window
            stops counting, so that ``remaining`` grows (0 when nothing is counted).
        retry_after_seconds: when refused, seconds until this request would be admitted
            (``Retry-After``); 0 when allowed.
    """

    allowed: bool
    window: str
    limit: int
    remaining: int
    reset_after_seconds: float
    retry_after_seconds: float


@dataclass(frozen=True, slots=True, kw_only=True)
class RateLimiterStatistics:
    """What the limiter holds: ``keys`` counted right now (``(window, key)`` pairs)."""

    keys: int


class _Counter:
    """One key's requests in one window: ``slices`` holds slice numbers and their counts
    in turn (``[s0, n0, s1, n1, ...]``), oldest first.

    Flat and a list (not a deque of pairs): a key costs a few hundred bytes instead of a
    kilobyte, and the limiter holds one per heartbeat that pings (bench/RESULTS.md,
    heartbeats' memory: an empty deque alone is 624 bytes)."""

    __slots__ = ("slice_seconds", "slices", "total")

    def __init__(self, slice_seconds: float) -> None:
        self.slice_seconds = slice_seconds
        self.slices: list[int] = []
        self.total = 0

    def expire(self, now_slice: int) -> None:
        """Drop slices that no longer count at slice ``now_slice``: a request of slice
        ``s`` counts until ``(s + 1 + SUB_WINDOWS) * slice_seconds``."""
        oldest = now_slice - SUB_WINDOWS
        slices = self.slices
        gone = 0
        while gone < len(slices) and slices[gone] < oldest:
            self.total -= slices[gone + 1]
            gone += 2
        if gone:
            del slices[:gone]

    def add(self, now_slice: int) -> None:
        """Count one request in slice ``now_slice`` (a clock that went back counts it in
        the newest slice)."""
        slices = self.slices
        if slices and slices[-2] >= now_slice:
            slices[-1] += 1
        else:
            slices += (now_slice, 1)
        self.total += 1

    def timeline(self) -> list[tuple[int, int]]:
        """``(slice, count)`` of every slice counted, oldest first."""
        return list(zip(self.slices[::2], self.slices[1::2], strict=True))

    def oldest(self) -> int | None:
        """The oldest slice counted, or None."""
        return self.slices[0] if self.slices else None

    def expiry(self, slice_number: int) -> float:
        """When the requests of slice ``slice_number`` stop counting (clock seconds)."""
        return (slice_number + 1 + SUB_WINDOWS) * self.slice_seconds


class RateLimiter:
    """Counts requests per ``(window, key)`` in rolling windows (module docstring).

    One per process, created at start-up and passed explicitly (``Dependencies``); it holds no
    global state. Single-threaded by design: every method is synchronous and trio runs one
    task at a time, so a check and its count cannot interleave with another request's.

    Args:
        clock: monotonic time in seconds; default `trio.current_time` (call the methods
            inside ``trio.run`` then).
    """

    __slots__ = ("_clock", "_counters", "_operations")

    def __init__(self, *, clock: Callable[[], float] = trio.current_time) -> None:
        self._clock = clock
        self._counters: dict[str, dict[str, _Counter]] = {}  # window name, key
        self._operations = 0

    @property
    def clock(self) -> Callable[[], float]:
        """The clock the limiter counts on (seconds)."""
        return self._clock

    def admit(self, checks: Sequence[tuple[Window, str]]) -> Decision:
        """Admit one request if every ``(window, key)`` of ``checks`` has room, and count it
        in all of them; a refused request is counted nowhere (it uses no quota).

        Returns:
            The decision for the most constraining window: when refused, the window that
            needs the longest wait; when admitted, the one with the fewest requests left
            (ties: the one that recovers last).

        Raises:
            ValueError: ``checks`` is empty.
        """
        return self._decide(checks, count=True)

    def peek(self, checks: Sequence[tuple[Window, str]]) -> Decision:
        """What `admit` would answer, without counting anything."""
        return self._decide(checks, count=False)

    def hit(self, checks: Iterable[tuple[Window, str]]) -> None:
        """Count one request in every ``(window, key)``, full or not (for events counted
        after the fact, such as failed authentications)."""
        now = self._clock()
        for window, key in checks:
            counter = self._counter(window, key)
            now_slice = math.floor(now / counter.slice_seconds)
            counter.expire(now_slice)
            counter.add(now_slice)
        self._tick(now)

    def statistics(self) -> RateLimiterStatistics:
        """How many ``(window, key)`` pairs are held."""
        return RateLimiterStatistics(keys=sum(len(keys) for keys in self._counters.values()))

    def _decide(self, checks: Sequence[tuple[Window, str]], *, count: bool) -> Decision:
        if not checks:
            raise ValueError("at least one window is needed")
        now = self._clock()
        decisions: list[Decision] = []
        counters: list[tuple[_Counter, int]] = []
        for window, key in checks:
            counter = self._counter(window, key)
            now_slice = math.floor(now / counter.slice_seconds)
            counter.expire(now_slice)
            counters.append((counter, now_slice))
            decisions.append(_judge(window, counter, now))
        refused = [d for d in decisions if not d.allowed]
        if refused:
            self._tick(now)
            return max(refused, key=lambda d: d.retry_after_seconds)
        if count:
            for counter, now_slice in counters:
                counter.add(now_slice)
            decisions = [
                _judge(window, counter, now, admitted=True)
                for (window, _), (counter, _) in zip(checks, counters, strict=True)
            ]
        self._tick(now)
        return min(decisions, key=lambda d: (d.remaining, -d.reset_after_seconds))

    def _counter(self, window: Window, key: str) -> _Counter:
        counters = self._counters.get(window.name)
        if counters is None:
            counters = self._counters[window.name] = {}
        counter = counters.get(key)
        if counter is None:
            counter = counters[key] = _Counter(window.period_seconds / SUB_WINDOWS)
        return counter

    def _tick(self, now: float) -> None:
        self._operations += 1
        if self._operations % PRUNE_EVERY:
            return
        for counters in self._counters.values():
            for key, counter in list(counters.items()):
                counter.expire(math.floor(now / counter.slice_seconds))
                if not counter.slices:
                    del counters[key]


def _judge(window: Window, counter: _Counter, now: float, *, admitted: bool = False) -> Decision:
    """The decision for ``window`` from its (expired) counter: before counting the request
    (``admitted`` False: does one more fit?) or after it was counted."""
    oldest = counter.oldest()
    reset_after = max(counter.expiry(oldest) - now, 0.0) if oldest is not None else 0.0
    counted = counter.total
    if admitted:
        return Decision(
            allowed=True,
            window=window.name,
            limit=window.limit,
            remaining=max(window.limit - counted, 0),
            reset_after_seconds=reset_after,
            retry_after_seconds=0.0,
        )
    if counted < window.limit:
        return Decision(
            allowed=True,
            window=window.name,
            limit=window.limit,
            remaining=window.limit - counted - 1,
            reset_after_seconds=reset_after,
            retry_after_seconds=0.0,
        )
    # Refused: wait until enough of the oldest slices expire to leave room for one more.
    excess = counted - window.limit + 1
    slice_number = 0
    for slice_number, slice_count in counter.timeline():  # noqa: B007
        excess -= slice_count
        if excess <= 0:
            break
    return Decision(
        allowed=False,
        window=window.name,
        limit=window.limit,
        remaining=0,
        reset_after_seconds=reset_after,
        retry_after_seconds=max(counter.expiry(slice_number) - now, 0.0),
    )
