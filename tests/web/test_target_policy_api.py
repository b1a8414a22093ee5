"""The target policy at the API (engine/policy.py; OWASP API7): create and PATCH refuse
a refused ``url`` with 422 ``target_not_allowed`` on ``url``, for every monitor type;
metadata addresses always, private ones with ``--deny-private-targets``; host names are
resolved (an injected resolver stands in for DNS) only when private targets are denied.
"""

from __future__ import annotations

import dataclasses
import ipaddress
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import pytest
import trio

from engine.policy import IPAddress, TargetPolicy
from tests.api import Api, MakeToken
from tests.targets import open_dns_target
from tests.web.helpers import assert_error, create_monitor, expect
from web.http.deps import Dependencies
from web.process.app import create_app
from web.process.cli import build_parser
from web.process.cli.serve_flags import service_settings

if TYPE_CHECKING:
    from quart.typing import TestClientProtocol

ANSWERS = {
    "public.example": ["93.184.216.34"],
    "internal.example": ["10.1.2.3", "93.184.216.34"],
    "imds.example": ["169.254.169.254"],
}


async def fake_resolver(host: str) -> list[IPAddress]:
    await trio.lowlevel.checkpoint()
    if host not in ANSWERS:
        raise OSError("does not resolve")
    return [ipaddress.ip_address(a) for a in ANSWERS[host]]


@pytest.fixture
async def denying_client(deps: Dependencies) -> AsyncIterator[TestClientProtocol]:
    """The app as ``uptrio serve --deny-private-targets`` runs it."""
    policy = TargetPolicy(deny_private=True, resolver=fake_resolver, dns_resolver=fake_resolver)
    app = create_app(dataclasses.replace(deps, target_policy=policy))
    async with app.test_app() as test_app:
        yield test_app.test_client()


def _monitor(kind: str, url: str) -> dict[str, str]:
    return {"name": "t", "type": kind, "url": url}


REFUSED_WHEN_DENYING = [
    ("http", "http://127.0.0.1:8080/"),
    ("http", "http://[::1]/"),
    ("http", "http://10.0.0.1/"),
    ("http", "http://0.0.0.0/"),
    ("http", "http://[::ffff:127.0.0.1]/"),
    ("http", "https://internal.example/health"),
    ("tcp", "192.168.1.10:5432"),
    ("tcp", "[fd00::5]:22"),
    ("tcp", "internal.example:443"),
    ("ping", "224.0.0.1"),
    ("ping", "100.64.0.1"),
    ("ping", "internal.example"),
    ("dns", "internal.example"),
]
ALWAYS_REFUSED = [
    ("http", "http://169.254.169.254/latest/meta-data/"),
    ("http", "http://[fe80::1]/"),
    ("http", "http://[::ffff:169.254.169.254]/"),
    ("http", "http://metadata.google.internal/computeMetadata/v1/"),
    ("tcp", "169.254.169.254:80"),
    ("tcp", "[fd00:ec2::254]:80"),
    ("ping", "169.254.170.2"),
    # numeric forms the resolver reads as 169.254.169.254 (inet_aton's hex, parts)
    ("http", "http://0xa9fea9fe/"),
    ("http", "http://0XA9FEA9FE/latest/meta-data/"),
    ("http", "http://0xa9.0xfe.0xa9.0xfe/"),
    ("http", "http://169.254.0xa9fe/"),
    ("tcp", "0xa9fea9fe:80"),
    ("ping", "0xA9FEA9FE"),
]


async def test_metadata_targets_are_refused_by_default_and_private_ones_allowed(
    api: Api,
) -> None:
    with trio.fail_after(15):
        for kind, url in ALWAYS_REFUSED:
            response = await api.post("/monitors", json=_monitor(kind, url))
            error = assert_error(response, 422, "target_not_allowed", param="url")
            assert "not allowed" in error["message"]
        for kind, url in REFUSED_WHEN_DENYING:
            if "example" in url:
                continue  # names are not resolved at create time with the default policy
            assert (await api.post("/monitors", json=_monitor(kind, url)))[0] == 201, url


async def test_deny_private_refuses_every_class_at_create(
    denying_client: TestClientProtocol, make_token: MakeToken
) -> None:
    with trio.fail_after(15):
        api = Api(denying_client, await make_token())
        for kind, url in REFUSED_WHEN_DENYING + ALWAYS_REFUSED:
            response = await api.post("/monitors", json=_monitor(kind, url))
            assert_error(response, 422, "target_not_allowed", param="url")
        for kind, url in (
            ("http", "https://public.example/"),
            ("http", "http://93.184.216.34/"),
            ("tcp", "public.example:443"),
            ("ping", "2606:4700:4700::1111"),
            ("dns", "public.example"),
            ("http", "https://does-not-resolve.example/"),  # checked again at every check
        ):
            assert (await api.post("/monitors", json=_monitor(kind, url)))[0] == 201, url
        # a bad url is still invalid_url, not target_not_allowed
        assert_error(
            await api.post("/monitors", json=_monitor("tcp", "10.0.0.1")), 422, "invalid_url"
        )


async def test_deny_private_refuses_at_patch_and_other_fields_still_change(
    denying_client: TestClientProtocol, make_token: MakeToken
) -> None:
    with trio.fail_after(15):
        api = Api(denying_client, await make_token())
        monitor = await create_monitor(api, url="https://public.example/")
        path = f"/monitors/{monitor['id']}"
        for url in ("http://127.0.0.1/", "https://internal.example/", "http://169.254.169.254/"):
            assert_error(
                await api.patch(path, json={"url": url}), 422, "target_not_allowed", param="url"
            )
        assert expect(await api.get(path))["url"] == "https://public.example/"
        assert expect(await api.patch(path, json={"name": "renamed"}))["name"] == "renamed"
        assert expect(await api.patch(path, json={"url": "https://93.184.216.34/"}))["url"] == (
            "https://93.184.216.34/"
        )
        missing = await api.patch("/monitors/mon_" + "a" * 24, json={"url": "http://10.0.0.1/"})
        assert_error(missing, 404, "resource_missing")


async def test_dns_monitors_are_screened_with_the_configured_nameserver(
    deps: Dependencies, make_token: MakeToken
) -> None:
    # docs/api.md, Target policy: `--deny-private-targets --dns-nameserver IP:PORT` screens
    # a dns monitor's name with the answers of that nameserver (the one its checks ask), not
    # with the system resolver
    records = {
        "internal.test": ["10.1.2.3"],
        "loop.test": ["127.0.0.1"],
        "public.test": ["93.184.216.34"],
    }
    with trio.fail_after(20):
        async with open_dns_target(records=records) as server:
            args = build_parser().parse_args(
                ["serve", "--deny-private-targets", "--dns-nameserver", f"127.0.0.1:{server.port}"]
            )
            app = create_app(
                dataclasses.replace(deps, target_policy=service_settings(args).target_policy)
            )
            async with app.test_app() as test_app:
                api = Api(test_app.test_client(), await make_token())
                for name, address in (("internal.test", "10.1.2.3"), ("loop.test", "127.0.0.1")):
                    response = await api.post("/monitors", json=_monitor("dns", name))
                    error = assert_error(response, 422, "target_not_allowed", param="url")
                    assert address in error["message"]
                created = await api.post("/monitors", json=_monitor("dns", "dns://public.test"))
                assert created[0] == 201, created[1]
            asked = {query.name for query in server.queries}
            assert {"internal.test", "loop.test", "public.test"} <= asked
