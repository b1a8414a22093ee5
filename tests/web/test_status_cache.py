"""The public pages' cache (:mod:`web.http.page_cache`) on its own: single flight, stale
copies while one reader renders, failures, cancellation, eviction. No I/O: renders are
functions that count themselves and sleep on trio's ``autojump_clock``; the cache's
clock is injected.
"""

from __future__ import annotations

import pytest
import trio

from tests.web.status_helpers import Clock
from web.http.page_cache import (
    DEFAULT_MAX_BYTES,
    ENTRY_OVERHEAD_BYTES,
    PageCache,
    Rendered,
    RenderFailed,
    etag_of,
)
from web.process.cli import build_parser
from web.process.cli.serve_flags import service_settings


class Renderer:
    """A render that takes ``seconds`` (trio time), counts its calls, and fails while
    ``failing`` is set."""

    def __init__(self, seconds: float = 1.0) -> None:
        self.seconds = seconds
        self.calls = 0
        self.failing = False

    async def __call__(self, slug: str) -> Rendered:
        self.calls += 1
        await trio.sleep(self.seconds)
        if self.failing:
            raise RuntimeError("database down")
        return Rendered.page(f"<p>{slug} #{self.calls}</p>".encode(), b"{}")


async def _readers(cache: PageCache, render: Renderer, n: int) -> list[Rendered]:
    results: list[Rendered] = []

    async def read() -> None:
        results.append(await cache.get("acme", render))

    async with trio.open_nursery() as nursery:
        for _ in range(n):
            nursery.start_soon(read)
    return results


async def test_concurrent_readers_of_an_absent_page_share_one_render(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with trio.fail_after(30):
        clock, render = Clock(0.0), Renderer()
        cache = PageCache(clock=clock)
        results = await _readers(cache, render, 50)
        assert render.calls == 1 and len({r.html for r in results}) == 1
        assert cache.statistics().waited == 49
        clock.t = 9.99
        assert (await cache.get("acme", render)).html == b"<p>acme #1</p>"
        assert render.calls == 1 and cache.statistics().fresh == 1


async def test_a_stale_page_is_rendered_once_while_others_get_the_old_copy(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with trio.fail_after(30):
        clock, render = Clock(0.0), Renderer()
        cache = PageCache(clock=clock)
        await cache.get("acme", render)
        clock.t = 10.0
        results = await _readers(cache, render, 50)
        assert render.calls == 2
        assert sorted(r.html for r in results) == [b"<p>acme #1</p>"] * 49 + [b"<p>acme #2</p>"]
        assert cache.statistics().stale == 49
        assert (await cache.get("acme", render)).html == b"<p>acme #2</p>"


async def test_a_failed_render_keeps_the_old_copy_or_fails_its_waiters(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with trio.fail_after(30):
        clock, render = Clock(0.0), Renderer()
        cache = PageCache(clock=clock)
        render.failing = True
        errors: list[type[BaseException]] = []

        async def read() -> None:
            try:
                await cache.get("acme", render)
            except Exception as exc:
                errors.append(type(exc))

        async with trio.open_nursery() as nursery:
            for _ in range(5):
                nursery.start_soon(read)
        assert sorted(e.__name__ for e in errors) == ["RenderFailed"] * 4 + ["RuntimeError"]
        render.failing = False
        first = await cache.get("acme", render)
        clock.t = 20.0
        render.failing = True
        assert await cache.get("acme", render) == first  # the previous copy, not an error
        assert cache.statistics().failures == 2
        render.failing = False
        assert (await cache.get("acme", render)).html != first.html  # retried by the next


async def test_a_cancelled_render_is_retried_by_a_waiting_reader(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with trio.fail_after(30):
        cache, render = PageCache(clock=Clock(0.0)), Renderer(seconds=5.0)
        got: list[Rendered] = []

        async def wait_for_it(on: PageCache) -> None:
            got.append(await on.get("acme", render))

        async with trio.open_nursery() as nursery:
            with trio.move_on_after(1):  # the first reader goes away mid-render
                await cache.get("acme", render)
            nursery.start_soon(wait_for_it, cache)
        assert render.calls == 2 and got[0].html == b"<p>acme #2</p>"

        waiting = PageCache(clock=Clock(0.0))
        async with trio.open_nursery() as nursery:
            leader = trio.CancelScope()

            async def lead() -> None:
                with leader:
                    await waiting.get("acme", render)

            nursery.start_soon(lead)
            await trio.sleep(0.5)
            nursery.start_soon(wait_for_it, waiting)
            await trio.sleep(0.5)
            leader.cancel()  # its waiter takes the render over
        assert got[1].html == b"<p>acme #4</p>" and waiting.statistics().renders == 2


async def test_the_least_recently_used_pages_are_dropped_past_max_bytes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with trio.fail_after(30):
        page = Rendered.page(b"x" * 10_000, b"{}")
        render = Renderer(seconds=0)

        async def big(slug: str) -> Rendered:
            await render(slug)
            return page

        room = 2 * (page.size + len("one") + ENTRY_OVERHEAD_BYTES)
        cache = PageCache(clock=Clock(0.0), max_bytes=room)
        for slug in ("one", "two", "one", "six"):
            await cache.get(slug, big)
        assert cache.statistics().entries == 2 and render.calls == 3
        assert cache.statistics().bytes == room
        await cache.get("one", big)
        assert render.calls == 3  # kept: used more recently than "two"
        await cache.get("two", big)
        assert render.calls == 4
        # a page larger than the whole budget is served and kept alone
        huge = Rendered.page(b"y" * (2 * room), b"{}")

        async def hog(slug: str) -> Rendered:
            return huge

        assert await cache.get("hog", hog) is huge
        assert cache.statistics().entries == 1


def test_the_budget_is_a_flag_of_serve_with_a_64_mib_default() -> None:
    def parsed(*flags: str) -> int:
        args = build_parser().parse_args(["serve", *flags])
        return service_settings(args).web.status_cache_bytes

    assert parsed() == DEFAULT_MAX_BYTES == 64 * 1024 * 1024
    assert parsed("--status-cache-bytes", "1000000") == 1_000_000


def test_etags_are_strong_hashes_of_the_body() -> None:
    page = Rendered.page(b"<p>a</p>", b"{}")
    assert page.html_etag == etag_of(b"<p>a</p>") != page.json_etag
    assert page.html_etag.startswith('"') and not page.html_etag.startswith("W/")
    assert etag_of(b"x") == etag_of(b"x") != etag_of(b"y")


@pytest.mark.parametrize("ttl", [0.5, 10.0])
async def test_the_ttl_is_injectable(autojump_clock: trio.testing.MockClock, ttl: float) -> None:
    with trio.fail_after(30):
        clock, render = Clock(0.0), Renderer(seconds=0)
        cache = PageCache(clock=clock, ttl_seconds=ttl)
        await cache.get("acme", render)
        clock.t = ttl - 0.01
        await cache.get("acme", render)
        assert render.calls == 1
        clock.t = ttl
        await cache.get("acme", render)
        assert render.calls == 2
        assert isinstance(RenderFailed("x"), Exception)


async def test_forget_drops_the_copies_of_a_prefix_and_their_bytes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with trio.fail_after(30):
        cache, render = PageCache(clock=Clock(0.0)), Renderer(seconds=0.0)
        for slug in ("badge:k1:status", "badge:k1:uptime-30", "badge:k2:status", "acme"):
            await cache.get(slug, render)
        before = cache.statistics().bytes
        assert cache.forget("badge:k1:") == 2
        after = cache.statistics()
        assert after.entries == 2 and 0 < after.bytes < before
        await cache.get("badge:k1:status", render)  # fresh copies were dropped: rendered again
        await cache.get("badge:k2:status", render)  # the others kept theirs
        assert render.calls == 5
