"""Rate limits that hold across nodes: quota leased from Postgres (docs/api.md, Rate limits;
docs/several-nodes.md, Rate limits across nodes: they hold for the whole service).

:class:`QuotaLimiter` is what the middlewares ask (:mod:`web.http.limits.throttle`). Its windows
keep the rolling semantics of :mod:`web.http.limits.rolling` (60 slices; a request counts from its
admission until its slice's end plus the period), but for the windows named shared the count is the
database's, one row per window and key (:mod:`store.rate_limits`), and a node admits from a
**lease**: a part of what the window leaves, taken in one statement
(:func:`store.rate_limits.take_quota`) and charged to the current slice. While its lease lasts, a
node admits without asking anyone (no round trip, no await); when the lease runs out it asks again.
A lease is ``room / (2 * live nodes)`` (at least 1, at most the room), so leases shrink as the
window fills, as Envoy's global rate limits and Google's Doorman hand out capacity: the nodes
together never admit more than the limit, and one statement serves many requests while the window is
far from full.

A lease lasts until its slice ends (1 s for a minute window, 60 s for an hour), since a request
admitted in a later slice must count until that slice's end plus the period. What a node did not use
is given back then: with the node's next exchange for that key, or by the ``limits`` actor
(:func:`web.http.limits.returns.run_quota_returns`) within :data:`GIVE_BACK_SECONDS`. Asked while a
window is full, the database grants nothing and names the slice whose end leaves room: the node then
refuses from memory for at most :data:`RECHECK_SECONDS` (or until that slice ends, or the other
nodes' leases of its slice are back) before it asks again, so a client hammering a full window costs
about one statement a second per node. Concurrent requests needing the same lease share one exchange
(single flight).

The database unreachable (no answer within :data:`LEASE_DEADLINE_SECONDS`;
docs/several-nodes.md, Rate limits with the database unreachable: the choice): **fail open,
to this node's share**. For :data:`ALONE_SECONDS` the node asks nothing and decides alone
from its own requests of the window (counted in :attr:`QuotaLimiter.local` whatever decided
them), against ``ceil(limit / live nodes)``, as Doorman's clients fall back to their "safe
capacity": a database hiccup does not turn into 429s that lie about a client's usage, and
the nodes together still stay near the limit. What it admitted alone is charged to the
database at its next exchange (a debt); a lease's unused part whose giving back failed is
not sent again (the answer may have been lost after the commit), so an exchange that fails
only ever makes the count err towards refusing. A statement is never cut off by the request
that started it (it is shielded, within its deadline), so a grant is never lost with a
cancelled request.

Without a database (tests, embedders) every window is decided by :attr:`QuotaLimiter.local`
alone, as a lone node always did. Slice numbers are compared across nodes: a shared
limiter's clock is the wall clock (epoch seconds), and the nodes' clocks must agree
(NTP).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Collection, Sequence

import structlog
import trio

from store import Database, StoreError, rate_limits
from store.rate_limits import QuotaItem

from .lease import (
    GIVE_BACK_SECONDS,
    RECHECK_SECONDS,
    Flight,
    Lease,
    allowed_decision,
    quota_item,
    recheck_at,
    refused_decision,
)
from .rolling import SUB_WINDOWS, Decision, RateLimiter, Window

__all__ = [
    "ALONE_SECONDS",
    "GIVE_BACK_SECONDS",
    "LEASE_DEADLINE_SECONDS",
    "RECHECK_SECONDS",
    "QuotaLimiter",
    "QuotaStatistics",
]

log = structlog.get_logger("uptrio.limits")

LEASE_DEADLINE_SECONDS = 0.5
"""Longest one exchange may take, seconds; past it the node decides alone."""

ALONE_SECONDS = 1.0
"""After a failed exchange, seconds during which the node decides alone without asking."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class QuotaStatistics:
    """What a :class:`QuotaLimiter` did since it was made.

    Attributes:
        exchanges: statements run (leases taken, unused parts given back, debts charged).
        failed_exchanges: statements that failed or passed their deadline.
        admitted_alone: requests admitted while deciding alone (the database unreachable).
        keys: ``(window, key)`` pairs held in memory now.
    """

    exchanges: int
    failed_exchanges: int
    admitted_alone: int
    keys: int


class QuotaLimiter:
    """The API's rate limits (module docstring): windows named in ``shared`` leased from
    the database, every other window (and every window without ``db``) decided by
    :attr:`local`.

    One per process, made at start-up and passed explicitly (``Dependencies``). Its state
    is touched only from trio tasks of one run: the checks and the counting of a request
    happen without a checkpoint between them.

    Args:
        local: the in-memory limiter (default: a new one on trio's clock); with ``db`` it
            must run on the wall clock, and counts this node's own requests of the shared
            windows, for deciding alone.
        db: the database the leases come from; None: everything decided by ``local``.
        shared: names of the windows leased.
        deadline_seconds: longest one exchange may take, seconds.
    """

    __slots__ = (
        "_alone",
        "_alone_until",
        "_db",
        "_held",
        "_leases",
        "_nodes",
        "_shared",
        "_stats",
        "local",
    )

    def __init__(
        self,
        local: RateLimiter | None = None,
        *,
        db: Database | None = None,
        shared: Collection[str] = (),
        deadline_seconds: float = LEASE_DEADLINE_SECONDS,
    ) -> None:
        self.local = RateLimiter() if local is None else local
        self._db = db.with_deadline(deadline_seconds) if db is not None else None
        self._shared = frozenset(shared) if db is not None else frozenset()
        self._leases: dict[str, dict[str, Lease]] = {}
        self._held: set[Lease] = set()  # leases with something to give back or charge
        self._nodes = 1
        self._alone_until = -math.inf
        self._alone = False
        self._stats = [0, 0, 0]  # exchanges, failed, admitted alone

    @property
    def leasing(self) -> bool:
        """Whether some windows are leased from a database (then run
        :func:`run_quota_returns` beside the app)."""
        return bool(self._shared)

    def statistics(self) -> QuotaStatistics:
        """Counters since the limiter was made, and the keys held now."""
        exchanges, failed, alone = self._stats
        keys = sum(len(by_key) for by_key in self._leases.values())
        return QuotaStatistics(
            exchanges=exchanges, failed_exchanges=failed, admitted_alone=alone, keys=keys
        )

    async def admit(self, checks: Sequence[tuple[Window, str]]) -> Decision:
        """Admit one request if every ``(window, key)`` of ``checks`` has room, and count it
        in all of them; a refused request is counted nowhere. Returns at once while this
        node's leases last; otherwise after one exchange (at most about
        ``deadline_seconds``), or decides alone.

        Returns:
            The decision for the most constraining window, as
            :meth:`web.http.limits.rolling.RateLimiter.admit` gives it.

        Raises:
            ValueError: ``checks`` is empty, or mixes shared windows with others.
        """
        if not self._leased(checks):
            return self.local.admit(checks)
        while True:
            now = self.local.clock()
            leases = self._leases_of(checks, now)
            missing = [lease for lease in leases if lease.left <= 0]
            if not missing:
                for lease in leases:
                    lease.left -= 1
                self.local.hit(checks)
                return allowed_decision(checks, leases, now)
            refused = [
                (window, lease)
                for (window, _), lease in zip(checks, leases, strict=True)
                if lease.left <= 0 and lease.full_until > now
            ]
            if refused:
                return refused_decision(refused, now)
            if now < self._alone_until or not await self._waiting(missing):
                return self._admit_alone(checks, leases)

    async def peek(self, checks: Sequence[tuple[Window, str]]) -> Decision:
        """What :meth:`admit` would answer, counting nothing. A shared window asks the
        database only when its last exchange found it full and this node holds no lease
        (so a key never counted here costs nothing: no lease is made for it).

        Raises:
            ValueError: as :meth:`admit`.
        """
        if not self._leased(checks):
            return self.local.peek(checks)
        now = self.local.clock()
        if all(self._leases.get(window.name, {}).get(key) is None for window, key in checks):
            fresh = [Lease(window, key) for window, key in checks]
            return allowed_decision(checks, fresh, now, taking=1)
        leases = self._leases_of(checks, now)
        asking = [lease for lease in leases if lease.left <= 0 and lease.full]
        fresh = [lease for lease in asking if lease.full_until <= now]
        if fresh and (now < self._alone_until or not await self._exchange(fresh)):
            return self._with_limits(checks, self.local.peek(self._shares(checks)))
        now = self.local.clock()
        refused = [
            (window, lease)
            for (window, _), lease in zip(checks, leases, strict=True)
            if lease.left <= 0 and lease.full
        ]
        if refused:
            return refused_decision(refused, now)
        return allowed_decision(checks, leases, now, taking=1)

    async def hit(self, checks: Sequence[tuple[Window, str]]) -> None:
        """Count one request in every ``(window, key)``, full or not (events counted
        after the fact, such as failed authentications): from the lease when there is
        one, else charged to the database with the next exchange, which also takes a
        lease for the next events.

        Raises:
            ValueError: as :meth:`admit`.
        """
        if not self._leased(checks):
            self.local.hit(checks)
            return
        leases = self._leases_of(checks, self.local.clock())
        self.local.hit(checks)
        owing = []
        for lease in leases:
            if lease.left > 0:
                lease.left -= 1
            else:
                lease.owe(lease.slice, 1)
                self._held.add(lease)
                owing.append(lease)
        if owing and self.local.clock() >= self._alone_until:
            await self._exchange(owing)

    async def give_back(self, *, everything: bool = False) -> None:
        """Send what the leases owe (unused parts of slices that ended, debts), in one
        exchange; with ``everything`` (a node stopping), the unused part of the current
        slices too. Never raises a database error: a failure makes the node decide alone
        for a while (module docstring)."""
        if self._db is None:
            return
        now = self.local.clock()
        due = []
        for lease in list(self._held):
            if lease.flight is not None:
                continue
            current = math.floor(now / lease.slice_seconds)
            if lease.slice != current:
                self._roll(lease, current)
            elif everything and lease.left > 0:
                lease.owe(lease.slice, -lease.left)
                lease.left = 0
            if lease.pending:
                due.append(lease)
            elif lease.left <= 0:
                self._held.discard(lease)
        if due and (everything or now >= self._alone_until):
            await self._exchange(due, lease=False)

    async def sweep(self) -> None:
        """Forget the leases whose every slice stopped counting and that owe nothing, and
        delete the database rows whose every slice did. A failure is logged and left to
        the next sweep."""
        now = self.local.clock()
        for by_key in self._leases.values():
            for key, lease in list(by_key.items()):
                stale = lease.slice + SUB_WINDOWS < math.floor(now / lease.slice_seconds)
                if stale and not lease.pending and lease.flight is None and lease not in self._held:
                    del by_key[key]
        if self._db is not None:
            try:
                await self._db.run(rate_limits.delete_expired_quota, now)
            except StoreError as exc:
                log.debug("expired rate-limit rows not deleted", error=str(exc))

    # ---- the leases --------------------------------------------------------------------

    def _leased(self, checks: Sequence[tuple[Window, str]]) -> bool:
        if not checks:
            raise ValueError("at least one window is needed")
        shared = [window.name in self._shared for window, _ in checks]
        if any(shared) and not all(shared):
            raise ValueError("a request's windows are all shared or none is")
        return shared[0]

    def _leases_of(self, checks: Sequence[tuple[Window, str]], now: float) -> list[Lease]:
        """The lease of each check, moved to the slice of ``now``."""
        found = []
        for window, key in checks:
            by_key = self._leases.get(window.name)
            if by_key is None:
                by_key = self._leases[window.name] = {}
            lease = by_key.get(key)
            if lease is None:
                lease = by_key[key] = Lease(window, key)
            current = math.floor(now / lease.slice_seconds)
            if lease.slice != current:
                self._roll(lease, current)
            found.append(lease)
        return found

    def _roll(self, lease: Lease, current: int) -> None:
        """Move ``lease`` to slice ``current``: what it left unused goes back."""
        if lease.left > 0:
            lease.owe(lease.slice, -lease.left)
            self._held.add(lease)
        lease.left = 0
        lease.slice = current

    async def _waiting(self, leases: list[Lease]) -> bool:
        """:meth:`_exchange` for a request waiting on ``leases``, counted in their
        ``waiting`` (so a lease asked meanwhile is large enough for every waiter)."""
        for held in leases:
            held.waiting += 1
        try:
            return await self._exchange(leases)
        finally:
            for held in leases:
                held.waiting -= 1

    async def _exchange(self, leases: list[Lease], *, lease: bool = True) -> bool:
        """Lease (``lease``) for each of ``leases`` and send what they owe, joining the
        exchanges already in flight for some of them; whether all went through."""
        waits = [held.flight for held in leases if held.flight is not None]
        mine = [held for held in leases if held.flight is None]
        ok = True
        if mine:
            flight = Flight()
            for held in mine:
                held.flight = flight
            try:
                flight.ok = ok = await self._send(mine, lease=lease)
            finally:
                for held in mine:
                    held.flight = None
                flight.done.set()
        for waiting in waits:
            await waiting.done.wait()
            ok = ok and waiting.ok
        return ok

    async def _send(self, leases: list[Lease], *, lease: bool) -> bool:
        """One statement for ``leases`` (see :meth:`_exchange`); applies its answers."""
        assert self._db is not None
        items: list[QuotaItem] = []
        sent: list[tuple[Lease, dict[int, int], int]] = []
        for held in leases:
            owed = dict(held.pending)
            for slice_number, requests in owed.items():
                items.append(quota_item(held, lease=False, charge=(slice_number, requests)))
            if lease:
                items.append(quota_item(held, lease=True))
            sent.append((held, owed, held.slice))
        if not items:
            return True
        self._stats[0] += 1
        try:
            with trio.CancelScope(shield=True):  # a grant is never lost with its request
                answers = await self._db.run(rate_limits.take_quota, items)
        except StoreError as exc:
            self._stats[1] += 1
            for held, owed, _ in sent:  # debts go again; unused parts do not (docstring)
                for slice_number, requests in owed.items():
                    if requests < 0:
                        held.owe(slice_number, -requests)
            self._go_alone(exc)
            return False
        if self._alone:
            log.info("rate limits shared again")
            self._alone = False
        self._nodes = answers[-1].live_nodes
        position = 0
        now = self.local.clock()
        for held, owed, slice_number in sent:
            for owed_slice, requests in owed.items():
                held.owe(owed_slice, -requests)
            position += len(owed)
            if lease:
                self._granted(held, slice_number, answers[position], now)
                position += 1
            if held.left > 0 or held.pending:
                self._held.add(held)
        return True

    def _granted(
        self, held: Lease, slice_number: int, answer: rate_limits.QuotaAnswer, now: float
    ) -> None:
        if held.slice != slice_number:  # the slice ended meanwhile: give the grant back
            if answer.granted:
                held.owe(slice_number, -answer.granted)
            return
        held.left += answer.granted
        held.counted, held.oldest, held.retry = (
            answer.counted,
            answer.oldest_slice,
            answer.retry_slice,
        )
        held.full = answer.granted == 0
        if held.full:
            held.full_until = recheck_at(held, answer.retry_slice, now)
        else:
            held.full_until = -math.inf

    def _go_alone(self, exc: StoreError) -> None:
        self._alone_until = self.local.clock() + ALONE_SECONDS
        if not self._alone:
            log.warning("rate limits decided by this node alone", error=str(exc))
            self._alone = True

    # ---- deciding alone ----------------------------------------------------------------

    def _shares(self, checks: Sequence[tuple[Window, str]]) -> list[tuple[Window, str]]:
        """``checks`` with each limit cut to this node's share: ``ceil(limit / nodes)``."""
        nodes = self._nodes
        return [
            (Window(window.name, math.ceil(window.limit / nodes), window.period_seconds), key)
            for window, key in checks
        ]

    def _admit_alone(self, checks: Sequence[tuple[Window, str]], leases: list[Lease]) -> Decision:
        decision = self.local.admit(self._shares(checks))
        if decision.allowed:
            self._stats[2] += 1
            for held in leases:  # from a lease in hand, else a debt
                if held.left > 0:
                    held.left -= 1
                else:
                    held.owe(held.slice, 1)
                    self._held.add(held)
        return self._with_limits(checks, decision)

    @staticmethod
    def _with_limits(checks: Sequence[tuple[Window, str]], decision: Decision) -> Decision:
        """``decision`` (on this node's shares) with its window's whole limit."""
        limit = next(window.limit for window, _ in checks if window.name == decision.window)
        return dataclasses.replace(decision, limit=limit)
