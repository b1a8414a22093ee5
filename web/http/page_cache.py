"""The per-process cache of rendered public status pages (docs/status-pages.md, Built for
the stampede: rendered at most once per 10 s per page).

One :class:`PageCache` per process, made at start-up and passed to the app in
:class:`web.http.deps.Dependencies` (no globals). It maps a slug to its last
:class:`Rendered` copy: the HTML and the JSON bytes, each with its strong ETag, or "no
such page" (unknown slugs are cached too, so a flood of them costs the database one
query per slug per 10 s).

The cache holds at most ``max_bytes`` (``--status-cache-bytes``, default
:data:`DEFAULT_MAX_BYTES`, 64 MiB), counting each copy's four bodies (HTML and JSON,
plain and gzipped), its slug and :data:`ENTRY_OVERHEAD_BYTES`; past it, the least
recently read copies are dropped first. A copy larger than the whole budget is still
kept, alone, so that its page is rendered once per 10 s like any other (a page is
bounded: docs/status-pages.md, Bounds).

Behaviour under a stampede (single flight):

- **fresh** (rendered less than ``ttl_seconds`` ago, by ``clock``): served from memory;
- **stale**: the first reader renders it again; every other reader meanwhile gets the
  previous copy at once (stale-while-revalidate), never a second render;
- **absent** (first read, or evicted): the first reader renders; concurrent readers of
  that slug wait for that one render and share its result.

So a page is rendered at most once per ``ttl_seconds`` per process, whatever the load.
The age is counted from the start of the render. A render that fails (the database is
down) leaves the previous copy in place, served while readers keep retrying one at a
time; with no previous copy the readers that waited for it get :class:`RenderFailed`.
A render cancelled with its reader (the client went away) is retried by the next reader.
"""

from __future__ import annotations

import gzip
import hashlib
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import structlog
import trio

__all__ = [
    "DEFAULT_MAX_BYTES",
    "ENTRY_OVERHEAD_BYTES",
    "CacheStatistics",
    "PageCache",
    "RenderFailed",
    "Rendered",
    "badge_prefix",
    "etag_of",
]

DEFAULT_MAX_BYTES = 64 * 1024 * 1024
"""What the cache holds at most by default, bytes (64 MiB: a few hundred typical pages,
some 25 of the largest a page can be)."""
ENTRY_OVERHEAD_BYTES = 512
"""What a cached copy costs besides its bodies and slug, bytes: an estimate of the Python
objects holding them, so that unknown slugs (empty bodies) count too."""

log = structlog.get_logger("uptrio.web")


def badge_prefix(key: str) -> str:
    """What the slugs of badge key ``key``'s badges start with in the cache
    (:mod:`web.public.badges`; a key is hex, and the ``:`` keeps them apart from status
    page slugs, which cannot hold one)."""
    return f"badge:{key}:"


def etag_of(body: bytes) -> str:
    """A strong ETag for ``body``: the first 128 bits of its SHA-256, quoted."""
    return '"' + hashlib.sha256(body).hexdigest()[:32] + '"'


@dataclass(frozen=True, slots=True)
class Rendered:
    """One rendered page: ``html`` and ``json`` bytes with their ETags and their gzip
    encodings, or, for a slug that names no page, ``found`` False and empty bodies."""

    found: bool
    html: bytes = b""
    json: bytes = b""
    html_etag: str = ""
    json_etag: str = ""
    html_gzip: bytes = b""
    json_gzip: bytes = b""

    @classmethod
    def page(cls, html: bytes, json: bytes) -> Rendered:
        """A found page, its ETags computed from the bodies, and both bodies gzipped once
        (a 100-component page is about 1 MB of repetitive HTML, some 20 times smaller
        gzipped: served to every reader that accepts gzip, as browsers and CDNs do)."""
        return cls(
            True,
            html,
            json,
            etag_of(html),
            etag_of(json),
            gzip.compress(html, compresslevel=6, mtime=0),
            gzip.compress(json, compresslevel=6, mtime=0),
        )

    @property
    def size(self) -> int:
        """The bytes of its four bodies."""
        return len(self.html) + len(self.json) + len(self.html_gzip) + len(self.json_gzip)


MISSING = Rendered(False)
"""What a slug that names no page renders to."""


class RenderFailed(Exception):
    """The render a reader waited for failed, and no previous copy exists."""


@dataclass(frozen=True, slots=True)
class CacheStatistics:
    """Counters since the cache was made: ``renders`` started, ``fresh`` hits,
    ``stale`` copies served while another reader rendered, ``waited`` readers that
    waited for another's first render, ``failures`` of renders; and the ``entries`` held
    now, with the ``bytes`` they count (module docstring)."""

    renders: int
    fresh: int
    stale: int
    waited: int
    failures: int
    entries: int
    bytes: int


@dataclass(slots=True)
class _Entry:
    rendered: Rendered
    at: float
    size: int  # bytes it counts (module docstring)


@dataclass(slots=True)
class _Flight:
    done: trio.Event = field(default_factory=trio.Event)
    result: Rendered | None = None
    failed: bool = False


class PageCache:
    """Rendered pages by slug (module docstring).

    Args:
        ttl_seconds: how long a copy is served before it is rendered again (10 s).
        clock: monotonic seconds (default ``time.monotonic``; tests inject their own).
        max_bytes: bytes held at most (module docstring; least recently read dropped
            first).
    """

    def __init__(
        self,
        *,
        ttl_seconds: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        self.ttl_seconds = ttl_seconds
        self._clock = clock
        self._max_bytes = max_bytes
        self._bytes = 0
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._flights: dict[str, _Flight] = {}
        self._counts = {"renders": 0, "fresh": 0, "stale": 0, "waited": 0, "failures": 0}

    def statistics(self) -> CacheStatistics:
        """The counters (see :class:`CacheStatistics`)."""
        return CacheStatistics(entries=len(self._entries), bytes=self._bytes, **self._counts)

    async def get(self, slug: str, render: Callable[[str], Awaitable[Rendered]]) -> Rendered:
        """The page of ``slug``: from memory when fresh, else rendered by
        ``render(slug)`` at most once at a time (module docstring).

        Raises:
            RenderFailed: this reader waited for a first render that failed.
            Exception: whatever ``render`` raised, for the reader that ran it when no
                previous copy exists.
        """
        entry = self._entries.get(slug)
        if entry is not None:
            self._entries.move_to_end(slug)
            if self._clock() - entry.at < self.ttl_seconds:
                self._counts["fresh"] += 1
                return entry.rendered
        flight = self._flights.get(slug)
        if flight is not None:
            if entry is not None:
                self._counts["stale"] += 1
                return entry.rendered
            self._counts["waited"] += 1
            await flight.done.wait()
            if flight.result is None:
                if flight.failed:
                    raise RenderFailed(f"rendering the page {slug!r} failed")
                return await self.get(slug, render)  # its reader was cancelled: retry
            return flight.result
        return await self._render(slug, render, entry)

    async def _render(
        self, slug: str, render: Callable[[str], Awaitable[Rendered]], stale: _Entry | None
    ) -> Rendered:
        """Render ``slug`` as the one reader doing it; other readers wait or get ``stale``."""
        flight = self._flights[slug] = _Flight()
        started = self._clock()
        self._counts["renders"] += 1
        try:
            rendered = await render(slug)
            flight.result = rendered
            self._keep(
                slug, _Entry(rendered, started, rendered.size + len(slug) + ENTRY_OVERHEAD_BYTES)
            )
            return rendered
        except Exception as exc:
            flight.failed = True
            self._counts["failures"] += 1
            if stale is None:
                raise
            log.warning("status page render failed; serving the previous copy", error=str(exc))
            return stale.rendered
        finally:
            del self._flights[slug]
            flight.done.set()

    def forget(self, prefix: str) -> int:
        """Drop every copy whose slug starts with ``prefix`` (a revoked badge key's
        badges: docs/badges.md), so the next reader renders it again; returns how many.
        A render already under way still stores what it read."""
        dropped = [slug for slug in self._entries if slug.startswith(prefix)]
        for slug in dropped:
            self._bytes -= self._entries.pop(slug).size
        return len(dropped)

    def _keep(self, slug: str, entry: _Entry) -> None:
        """Hold ``entry`` as the most recently read copy of ``slug``, then drop the least
        recently read others while the bytes held are over ``max_bytes``."""
        old = self._entries.pop(slug, None)
        self._bytes += entry.size - (0 if old is None else old.size)
        self._entries[slug] = entry
        while self._bytes > self._max_bytes and len(self._entries) > 1:
            _, dropped = self._entries.popitem(last=False)
            self._bytes -= dropped.size
