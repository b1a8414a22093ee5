"""Private certificate authorities on the http probe (docs/checks.md, Private certificate
authorities): ``tls_verify`` and ``tls_ca_bundle``, against real local https targets whose
certificates come from CAs made here by trustme, which the system does not trust.

The prober is the default one (system CAs) throughout: only a monitor's bundle, or
``tls_verify`` false, gets a check through. Then the contexts' sharing (one per
distinct setting, built with the monitor's spec, never per check), the bundle's rules
shared with the API, and the whole path through the API and a running engine.
"""

from __future__ import annotations

import datetime
import gc
import ssl
import time
import weakref
from dataclasses import replace
from typing import Any

import pytest
import trio
import trustme

from engine import Engine, EngineSettings, Prober, probe_spec, run_engine
from engine.probes import (
    MAX_CA_BUNDLE_BYTES,
    InvalidCaBundle,
    ProbeResult,
    ProbeSpec,
    check_ca_bundle,
)
from store import Database, MonitorRecord, StoreWriter
from tests.api import Api
from tests.engine.test_story import checks_of, wait_status
from tests.targets import HttpTarget

LIMIT_SECONDS = 5.0
DAY = datetime.timedelta(days=1)


def pem(ca: trustme.CA) -> str:
    """The CA's certificate as the PEM text a monitor's ``tls_ca_bundle`` holds."""
    return ca.cert_pem.bytes().decode("ascii")


def served_by(ca: trustme.CA, *names: str, days: float = 90) -> ssl.SSLContext:
    """A server context with a certificate of ``ca`` for ``names`` (default 127.0.0.1)
    expiring in ``days`` (negative: expired that long ago)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    now = datetime.datetime.now(datetime.UTC)
    ca.issue_cert(
        *(names or ("127.0.0.1",)), not_before=now - 400 * DAY, not_after=now + days * DAY
    ).configure_cert(context)
    return context


async def start(nursery: trio.Nursery, context: ssl.SSLContext) -> HttpTarget:
    target = HttpTarget(ssl_context=context)
    await nursery.start(target.run)
    return target


async def check(
    prober: Prober,
    url: str,
    *,
    verify: bool | None = True,
    bundle: str | None = None,
    days: int | None = None,
) -> ProbeResult:
    """One check of ``url`` by a monitor with those TLS settings."""
    spec = ProbeSpec(
        type="http",
        url=url,
        timeout_seconds=3.0,
        tls_expiry_days=days,
        ssl_context=prober.tls.context(verify, bundle),
    )
    with trio.fail_after(LIMIT_SECONDS):
        return await prober.probe(spec)


async def test_a_private_ca_is_trusted_through_the_bundle_only(nursery: trio.Nursery) -> None:
    private, other = trustme.CA(), trustme.CA()
    target = await start(nursery, served_by(private, days=90))
    prober = Prober()  # the system's CAs
    now = time.time()

    trusted = await check(prober, target.url(), bundle=pem(private))
    assert trusted.ok and trusted.status_code == 200, trusted
    assert trusted.tls_expires_at is not None
    assert abs(trusted.tls_expires_at - (now + 90 * 86_400)) < 120

    untrusted = await check(prober, target.url())
    assert untrusted.error_code == "tls_error", untrusted
    assert "not accepted" in (untrusted.error_message or "")
    # a bundle replaces the system's CAs: another CA's bundle does not help
    wrong = await check(prober, target.url(), bundle=pem(other))
    assert wrong.error_code == "tls_error", wrong
    # several CAs in one bundle, with comments between them, as a ca-bundle.crt has
    both = f"# other\n{pem(other)}\n# private\n{pem(private)}"
    assert (await check(prober, target.url(), bundle=both)).ok

    accepted = await check(prober, target.url(), verify=False)
    assert accepted.ok, accepted
    assert accepted.tls_expires_at == trusted.tls_expires_at


async def test_the_bundle_still_checks_the_host_name_and_verify_false_does_not(
    nursery: trio.Nursery,
) -> None:
    private = trustme.CA()
    target = await start(nursery, served_by(private, "db.internal.example"))
    prober = Prober()
    mismatch = await check(prober, target.url(), bundle=pem(private))
    assert mismatch.error_code == "tls_error", mismatch
    assert "127.0.0.1" in (mismatch.error_message or "")
    accepted = await check(prober, target.url(), verify=False, bundle=pem(private))
    assert accepted.ok and accepted.tls_expires_at is not None, accepted


async def test_verify_false_records_the_expiry_and_applies_tls_expiry_days(
    nursery: trio.Nursery,
) -> None:
    self_signed = trustme.CA()
    soon = await start(nursery, served_by(self_signed, days=3))
    expired = await start(nursery, served_by(self_signed, days=-2))
    prober = Prober()
    now = time.time()

    expiring = await check(prober, soon.url(), verify=False, days=14)
    assert expiring.error_code == "tls_expiring" and expiring.status_code == 200, expiring
    assert expiring.tls_expires_at is not None
    assert abs(expiring.tls_expires_at - (now + 3 * 86_400)) < 120
    assert "in 3.0 days (tls_expiry_days is 14)" in (expiring.error_message or "")
    assert (await check(prober, soon.url(), verify=False, days=2)).ok

    # an expired certificate passes the handshake unverified, and fails every window
    for days in (14, 0):
        result = await check(prober, expired.url(), verify=False, days=days)
        assert result.error_code == "tls_expiring", result
        assert result.tls_expires_at is not None
        assert abs(result.tls_expires_at - (now - 2 * 86_400)) < 120
        assert "expired on" in (result.error_message or "")
        assert f"2.0 days ago (tls_expiry_days is {days})" in (result.error_message or "")
    unwatched = await check(prober, expired.url(), verify=False, days=None)
    assert unwatched.ok and unwatched.tls_expires_at is not None
    # verified, the same certificate fails the handshake
    refused = await check(prober, expired.url(), bundle=pem(self_signed), days=14)
    assert refused.error_code == "tls_error" and "expired" in (refused.error_message or "")


def record(**fields: Any) -> MonitorRecord:
    values: dict[str, Any] = {
        "id": "mon_a",
        "account_id": "acc_a",
        "name": "a",
        "url": "https://127.0.0.1/",
        "type": "http",
        "status": "up",
        "interval_seconds": 60,
        "timeout_seconds": 10,
        "method": "GET",
        "expected_status_code": 200,
        "failure_threshold": 1,
        "success_threshold": 1,
        "run_epoch": 1,
        "created": 0,
        "updated": 0,
        "metadata": {},
        "last_checked_at": None,
        "tls_verify": True,
    }
    values.update(fields)
    return MonitorRecord(**values)


def test_one_context_per_distinct_setting_built_with_the_spec() -> None:
    one, two = pem(trustme.CA()), pem(trustme.CA())
    prober = Prober()
    tls = prober.tls
    system = probe_spec(record(), tls)
    assert system.ssl_context is tls.default
    a = probe_spec(record(id="mon_a", tls_ca_bundle=one), tls)
    b = probe_spec(record(id="mon_b", tls_ca_bundle="".join(one)), tls)  # equal, not same
    c = probe_spec(record(id="mon_c", tls_ca_bundle=two), tls)
    assert a.ssl_context is b.ssl_context is not None
    assert c.ssl_context is not a.ssl_context and c.ssl_context is not tls.default
    # tls_verify false: one context, whatever the bundle
    off = probe_spec(record(tls_verify=False), tls)
    off_with_bundle = probe_spec(record(tls_verify=False, tls_ca_bundle=one), tls)
    assert off.ssl_context is off_with_bundle.ssl_context
    assert off.ssl_context is not None and off.ssl_context.verify_mode == ssl.CERT_NONE
    assert not off.ssl_context.check_hostname
    # other types have none; a reconfiguration with the same setting gets the same one
    tcp = record(type="tcp", url="127.0.0.1:1", tls_verify=None)
    assert probe_spec(tcp, tls).ssl_context is None
    renamed = probe_spec(replace(record(tls_ca_bundle=one), name="renamed"), tls)
    assert renamed.ssl_context is a.ssl_context
    # a context lives while a spec holds it, then goes (and is built anew when needed)
    gone = weakref.ref(a.ssl_context)
    del a, b, renamed
    gc.collect()
    assert gone() is None
    again = probe_spec(record(tls_ca_bundle=one), tls)
    assert again.ssl_context is not None and again.ssl_context.verify_mode == ssl.CERT_REQUIRED


def test_a_bundle_that_cannot_be_loaded_fails_closed() -> None:
    """A bundle stored before a stricter rule (the API refuses it now) trusts nothing,
    and building the spec never raises."""
    tls = Prober().tls
    spec = probe_spec(record(tls_ca_bundle="not a certificate"), tls)
    assert spec.ssl_context is not None and spec.ssl_context is not tls.default
    assert spec.ssl_context.cert_store_stats()["x509_ca"] == 0


def test_bundle_rules() -> None:
    ca, other = trustme.CA(), trustme.CA()
    good = pem(ca)
    assert check_ca_bundle(good).cert_store_stats()["x509_ca"] == 1
    assert check_ca_bundle(f"# comment\n{good}\n{pem(other)}\n").cert_store_stats()["x509_ca"] == 2
    block = "-----BEGIN CERTIFICATE-----\nMIIBkzCCATmgAwIBAgIU\n-----END CERTIFICATE-----\n"
    lines = good.splitlines()
    corrupt = "\n".join([*lines[:2], "!" + lines[2][1:], *lines[3:]])
    cases = [
        ("", "no certificate"),
        ("hello", "no certificate"),
        (good[:-30], "no certificate"),  # no END line: no block
        (good + block, "certificate 2 of 2 does not parse"),
        (corrupt + "\n" + pem(other), "certificate 1 of 2 does not parse"),
        (good + ca.private_key_pem.bytes().decode(), "private key"),
        (good + "é", "ASCII"),
        (good + "#" * MAX_CA_BUNDLE_BYTES, f"at most {MAX_CA_BUNDLE_BYTES} bytes"),
    ]
    for text, said in cases:
        with pytest.raises(InvalidCaBundle) as caught:
            check_ca_bundle(text)
        assert caught.value.code == "invalid_ca_bundle"
        assert said in caught.value.message and "tls_ca_bundle" in caught.value.message


# -- through the API and a running engine ------------------------------------------------


PRIVATE = trustme.CA()
"""The private CA of the story below (the engine's prober does not trust it)."""


@pytest.fixture
async def engine(db: Database, nursery: trio.Nursery, writer: StoreWriter) -> Engine:
    engine: Engine = await nursery.start(
        run_engine, db, writer, Prober(), EngineSettings(shard_count=1)
    )
    return engine


async def test_a_monitor_behind_a_private_ca_through_the_engine(
    api: Api, nursery: trio.Nursery
) -> None:
    target = await start(nursery, served_by(PRIVATE, days=90))
    fast = {"interval_seconds": 1, "timeout_seconds": 1, "failure_threshold": 1}
    with trio.fail_after(20):
        code, monitor, _ = await api.post(
            "/monitors",
            json={
                "name": "internal",
                "type": "http",
                "url": target.url(),
                "tls_ca_bundle": pem(PRIVATE),
                **fast,
            },
        )
        assert code == 201, monitor
        assert monitor["tls_verify"] is True and monitor["tls_ca_bundle"] == pem(PRIVATE)
        await wait_status(api, monitor["id"], "up")

        # without the bundle the system's CAs refuse it
        code, _, _ = await api.patch(f"/monitors/{monitor['id']}", json={"tls_ca_bundle": None})
        assert code == 200
        await wait_status(api, monitor["id"], "down")
        [refused, *_] = [c for c in await checks_of(api, monitor["id"]) if c["status"] == "down"]
        assert refused["error"]["code"] == "tls_error" and refused["tls_expires_at"] is None

        # tls_verify false accepts it and still records its expiry
        code, _, _ = await api.patch(f"/monitors/{monitor['id']}", json={"tls_verify": False})
        assert code == 200
        await wait_status(api, monitor["id"], "up")
        [accepted, *_] = [c for c in await checks_of(api, monitor["id"]) if c["status"] == "up"]
        assert abs(accepted["tls_expires_at"] - (time.time() + 90 * 86_400)) < 120
