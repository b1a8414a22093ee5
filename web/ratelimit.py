"""Rolling-window request counting for the rate limits (spec 8), in memory, per process.

Pure bookkeeping, no I/O and no web imports: :class:`RateLimiter` counts requests per
``(window, key)`` and answers whether one more fits. The middlewares of
:mod:`web.throttle` decide which windows a request is counted in.

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

Several nodes (extensions part 6, "rate limits hold for the whole service"): the windows
named in ``shared`` also count what other nodes admitted. The limiter stays pure: a
separate actor (:mod:`web.limit_sync`) takes this node's changed slice counts
(:meth:`RateLimiter.take_changes`), stores them, and hands back the other nodes' counts for
the keys held here (:meth:`RateLimiter.shared_keys`, :meth:`RateLimiter.merge_remote`),
which then count beside this node's own. Slice numbers are then compared across nodes, so
a shared limiter runs on the wall clock (epoch seconds). A limiter that never merged
anything decides exactly as one without sharing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass

import trio

__all__ = [
    "PRUNE_EVERY",
    "SUB_WINDOWS",
    "Decision",
    "RateLimiter",
    "RateLimiterStatistics",
    "SliceCount",
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


SliceCount = tuple[str, str, int, int, float]
"""One slice of one key of a shared window, as the sync stores it: ``(window name, key,
slice number, requests counted there by this node, expiry)``; the expiry is when those
requests stop counting, in the limiter's clock's seconds (epoch seconds when shared)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RateLimiterStatistics:
    """What the limiter holds: ``keys`` counted right now (``(window, key)`` pairs)."""

    keys: int


class _Counter:
    """One key's requests in one window: ``slices`` holds slice numbers and their counts
    in turn (``[s0, n0, s1, n1, ...]``), oldest first.

    Flat and a list (not a deque of pairs): a key costs a few hundred bytes instead of a
    kilobyte, and the limiter holds one per heartbeat that pings (issue 16's memory goal:
    an empty deque alone is 624 bytes)."""

    __slots__ = ("changed_from", "remote", "remote_total", "slice_seconds", "slices", "total")

    def __init__(self, slice_seconds: float) -> None:
        self.slice_seconds = slice_seconds
        self.slices: list[int] = []
        self.total = 0
        # other nodes' counts, the same flat shape (shared windows only; empty otherwise)
        self.remote: list[int] = []
        self.remote_total = 0
        # the oldest slice counted in since the last sync (shared windows only), or None
        self.changed_from: int | None = None

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
        if self.remote:
            gone = 0
            remote = self.remote
            while gone < len(remote) and remote[gone] < oldest:
                self.remote_total -= remote[gone + 1]
                gone += 2
            if gone:
                del remote[:gone]

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
        """``(slice, count)`` of every slice counted, this node's and the others' added
        up, oldest first."""
        if not self.remote:
            return list(zip(self.slices[::2], self.slices[1::2], strict=True))
        merged: dict[int, int] = {}
        for flat in (self.slices, self.remote):
            for i in range(0, len(flat), 2):
                merged[flat[i]] = merged.get(flat[i], 0) + flat[i + 1]
        return sorted(merged.items())

    def oldest(self) -> int | None:
        """The oldest slice counted (this node's or another's), or None."""
        if not self.remote:
            return self.slices[0] if self.slices else None
        return min(self.slices[0], self.remote[0]) if self.slices else self.remote[0]

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

    __slots__ = ("_changed", "_clock", "_counters", "_operations", "_shared")

    def __init__(
        self,
        *,
        clock: Callable[[], float] = trio.current_time,
        shared: Collection[str] = (),
    ) -> None:
        """``shared``: names of the windows counted across nodes (module docstring); give
        a wall clock (``time.time``) with them."""
        self._clock = clock
        self._counters: dict[str, dict[str, _Counter]] = {}  # window name, key
        self._operations = 0
        self._shared = frozenset(shared)
        self._changed: dict[tuple[str, str], _Counter] = {}

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
            if window.name in self._shared:
                self._mark(window.name, key, counter, now_slice)
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
            for (window, key), (counter, now_slice) in zip(checks, counters, strict=True):
                counter.add(now_slice)
                if window.name in self._shared:
                    self._mark(window.name, key, counter, now_slice)
            decisions = [
                _judge(window, counter, now, admitted=True)
                for (window, _), (counter, _) in zip(checks, counters, strict=True)
            ]
        self._tick(now)
        return min(decisions, key=lambda d: (d.remaining, -d.reset_after_seconds))

    def take_changes(self) -> list[SliceCount]:
        """This node's counts, in full, of every slice of a shared window counted in since
        the previous call (and still counting), which the sync then stores; forgets that
        they changed (:meth:`requeue` when they could not be stored)."""
        now = self._clock()
        changes: list[SliceCount] = []
        for (name, key), counter in self._changed.items():
            since = counter.changed_from
            counter.changed_from = None
            if since is None:
                continue
            counter.expire(math.floor(now / counter.slice_seconds))
            flat = counter.slices
            for i in range(0, len(flat), 2):
                if flat[i] >= since:
                    changes.append((name, key, flat[i], flat[i + 1], counter.expiry(flat[i])))
        self._changed.clear()
        return changes

    def requeue(self, changes: Iterable[SliceCount]) -> None:
        """Mark the slices of ``changes`` (from :meth:`take_changes`) as changed again,
        because the sync could not store them."""
        for name, key, slice_number, _count, _expiry in changes:
            counter = self._counters.get(name, {}).get(key)
            if counter is not None:
                self._mark(name, key, counter, slice_number)

    def shared_keys(self) -> list[tuple[str, str]]:
        """``(window name, key)`` of every key of a shared window that counts something
        now (this node's requests or the others'): the keys whose other nodes' counts the
        sync reads back."""
        now = self._clock()
        keys: list[tuple[str, str]] = []
        for name in self._shared:
            for key, counter in self._counters.get(name, {}).items():
                counter.expire(math.floor(now / counter.slice_seconds))
                if counter.slices or counter.remote:
                    keys.append((name, key))
        return keys

    def merge_remote(
        self, keys: Iterable[tuple[str, str]], counts: Iterable[tuple[str, str, int, int]]
    ) -> None:
        """Replace the other nodes' counts of each of ``keys`` (from :meth:`shared_keys`)
        with ``counts``: ``(window name, key, slice, requests)`` rows, the other nodes'
        sums; a key without rows has none. Keys dropped meanwhile are skipped."""
        found: dict[tuple[str, str], list[tuple[int, int]]] = {}
        for name, key, slice_number, count in counts:
            found.setdefault((name, key), []).append((slice_number, count))
        for name, key in keys:
            counter = self._counters.get(name, {}).get(key)
            if counter is None:
                continue
            slices = sorted(found.get((name, key), ()))
            counter.remote = [n for pair in slices for n in pair]
            counter.remote_total = sum(count for _, count in slices)

    def _mark(self, name: str, key: str, counter: _Counter, slice_number: int) -> None:
        if counter.changed_from is None or slice_number < counter.changed_from:
            counter.changed_from = slice_number
        self._changed[name, key] = counter

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
                if not counter.slices and not counter.remote:
                    del counters[key]


def _judge(window: Window, counter: _Counter, now: float, *, admitted: bool = False) -> Decision:
    """The decision for ``window`` from its (expired) counter: before counting the request
    (``admitted`` False: does one more fit?) or after it was counted."""
    oldest = counter.oldest()
    reset_after = max(counter.expiry(oldest) - now, 0.0) if oldest is not None else 0.0
    counted = counter.total + counter.remote_total
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
