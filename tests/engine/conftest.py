"""Fixtures for the engine tests: loopback target servers, a test CA and the store actor.

Targets run in pytest-trio's ``nursery`` fixture, which is cancelled when the test ends.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from functools import partial

import pytest
import trio

from store import Database, StoreSettings, StoreWriter, run_store_writer
from tests.targets import DnsTarget, HttpTarget, TcpTarget, TlsPair, make_tls_pair


@pytest.fixture(scope="session")
def tls() -> TlsPair:
    """A test CA (trustme) with a server context and a client context trusting it."""
    return make_tls_pair()


@pytest.fixture
async def http_target(nursery: trio.Nursery) -> HttpTarget:
    """An `HttpTarget` on 127.0.0.1, listening."""
    target = HttpTarget()
    await nursery.start(target.run)
    return target


@pytest.fixture
async def https_target(nursery: trio.Nursery, tls: TlsPair) -> HttpTarget:
    """An `HttpTarget` serving HTTPS with a certificate from the test CA."""
    target = HttpTarget(ssl_context=tls.server)
    await nursery.start(target.run)
    return target


@pytest.fixture
async def tcp_target(nursery: trio.Nursery) -> TcpTarget:
    """A `TcpTarget` on 127.0.0.1, listening."""
    target = TcpTarget()
    await nursery.start(target.run)
    return target


@pytest.fixture
async def dns_target(nursery: trio.Nursery) -> DnsTarget:
    """A `DnsTarget` knowing ``up.test`` (A and AAAA), ``v4.test`` (A), ``v6.test``
    (AAAA) and ``empty.test`` (no address); the answers are loopback addresses."""
    target = DnsTarget(
        records={
            "up.test": ["127.0.0.1", "::1"],
            "v4.test": ["127.0.0.4"],
            "v6.test": ["::1"],
            "empty.test": [],
        }
    )
    await nursery.start(target.run)
    return target


@pytest.fixture
async def writer(db: Database, nursery: trio.Nursery) -> AsyncIterator[StoreWriter]:
    """The store actor on the test's database, flushing every 50 ms (the engine stories)."""
    writer: StoreWriter = await nursery.start(
        partial(run_store_writer, db, StoreSettings(batch_age_seconds=0.05))
    )
    yield writer
