"""Helpers of the public status page tests: an injectable clock, status moves written by
the store's real batch path, an HTML reader on the standard library's ``html.parser``,
and a page seeded with components up, down and paused and incidents (with secrets that
must never reach the public).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import TYPE_CHECKING, Any

from store import CheckRecord, Database, StatusChange, checks, new_check_id
from tests.api import Api, EngineLike, web_deps
from tests.web.helpers import create_monitor, expect
from web.http.deps import Dependencies
from web.http.page_cache import PageCache

if TYPE_CHECKING:
    from quart.typing import TestClientProtocol

SECRETS = (
    "secret-name-web-7f3a",
    "secret-name-api-1b9c",
    "secret-name-worker-44d0",
    "hunter2-pass",
    "internal-host-9c1.corp.example",
    "sk_live_abc123",
    "oncall-secret@corp.example",
    "secret-err-5521",
    "SECRET-JIRA-991",
    "secret postmortem draft zz9",
    "secret-description-q42",
    "mon_",
    "inc_",
    "inu_",
    "stp_",
    "acct_",
    "chk_",
)
"""Strings of a seeded page that no public response may hold (names, urls, metadata,
check errors, incident metadata, postmortem, description, ids)."""


class Clock:
    """A clock tests move by hand: ``clock()`` is ``clock.t`` (seconds)."""

    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def status_deps(db: Database, engine: EngineLike, clock: Clock) -> Dependencies:
    """The app's dependencies with ``clock`` as both the wall clock and the page cache's."""
    return web_deps(db, engine, clock=clock, status_cache=PageCache(clock=clock))


async def fetch(
    client: TestClientProtocol, path: str, headers: dict[str, str] | None = None
) -> tuple[int, Any, str]:
    """GET ``path`` without a token: ``(status, headers, body text)``."""
    response = await client.get(path, headers=headers or {})
    return response.status_code, response.headers, (await response.get_data()).decode()


async def move(db: Database, monitor_id: str, to: str, at: int, error: str = "") -> None:
    """Write one check and the status move it causes at ``at`` (epoch seconds) through
    the store actor's batch path (``store.checks.write_check_batch``): the monitor's
    status, its rollups and the incident it opens or resolves."""

    async def current(connection: Any) -> Any:
        return await connection.fetchrow(
            "SELECT status, run_epoch FROM monitors WHERE id = $1", monitor_id
        )

    row = await db.run(current)
    await db.run(checks.ensure_partitions, at, at, 86_400)
    check = CheckRecord(
        id=new_check_id(at),
        monitor_id=monitor_id,
        status="up" if to == "up" else "down",
        response_time_ms=12.0,
        status_code=None,
        error_code=None if to == "up" else "connection_refused",
        error_message=None if to == "up" else f"Connection refused: {error}",
        created=at,
    )
    change = StatusChange(
        monitor_id=monitor_id,
        check_id=check.id,
        from_status=row["status"],
        to_status=to,
        run_epoch=row["run_epoch"],
        created=at,
    )
    await db.transaction(checks.write_check_batch, [check], [change])


@dataclass
class Element:
    """One element of a parsed page: tag, attributes, and the text inside it."""

    tag: str
    attrs: dict[str, str]
    text: str = ""
    children: list[Element] = field(default_factory=list)

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())

    def find(self, cls: str) -> list[Element]:
        """Descendants (self included) having class ``cls``, in document order."""
        found = [self] if cls in self.classes else []
        for child in self.children:
            found.extend(child.find(cls))
        return found

    def one(self, cls: str) -> Element:
        (found,) = self.find(cls)
        return found

    @property
    def words(self) -> str:
        """The text with runs of whitespace made one space."""
        return " ".join(self.text.split())


_VOID = {"meta", "br", "img", "link", "input", "hr"}


class _Reader(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("document", {})
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(element)
        if tag not in _VOID:
            self.stack.append(element)

    def handle_endtag(self, tag: str) -> None:
        while len(self.stack) > 1:
            if self.stack.pop().tag == tag:
                break

    def handle_data(self, data: str) -> None:
        for open_element in self.stack:
            open_element.text += data


def parse(html: str) -> Element:
    """The page as a tree of :class:`Element` (stdlib ``html.parser``)."""
    reader = _Reader()
    reader.feed(html)
    reader.close()
    return reader.root


@dataclass
class Seeded:
    """What :func:`seed` made: the page's API object and the monitors' ids by role."""

    page: dict[str, Any]
    monitors: dict[str, str]


async def seed(api: Api, db: Database, base: int) -> Seeded:
    """A page ``acme-status`` over three monitors with secret-looking names, urls and
    metadata: "Website" (up; went down and up again: an incident opened and resolved by
    the monitor), "Public API" (down since ``base + 300``: an open incident the monitor
    opened, then given metadata, a postmortem draft and a public update) and "Background
    jobs" (paused), the last two in group "Backend"; and a resolved incident written by
    hand with a secret description, plus one on a monitor the page does not show."""
    url = "https://internal-host-9c1.corp.example/health?token=sk_live_abc123&pw=hunter2-pass"
    meta = {"owner_email": "oncall-secret@corp.example"}
    ids = {}
    for role, name in (
        ("web", "secret-name-web-7f3a"),
        ("api", "secret-name-api-1b9c"),
        ("worker", "secret-name-worker-44d0"),
        ("other", "unlisted"),
    ):
        ids[role] = (await create_monitor(api, name=name, url=url, metadata=meta))["id"]
    await move(db, ids["web"], "up", base)
    await move(db, ids["web"], "down", base + 100, "secret-err-5521")
    await move(db, ids["web"], "up", base + 160)
    await move(db, ids["api"], "up", base)
    await move(db, ids["api"], "down", base + 300, "secret-err-5521")
    await move(db, ids["other"], "down", base + 300, "secret-err-5521")
    expect(await api.post(f"/monitors/{ids['worker']}/pause"))

    opened = expect(await api.get("/incidents", query={"resolved": "false"}))["data"]
    api_incident = next(i for i in opened if i["monitor"] == ids["api"])
    expect(
        await api.patch(
            f"/incidents/{api_incident['id']}",
            json={
                "metadata": {"jira": "SECRET-JIRA-991"},
                "postmortem": "secret postmortem draft zz9",
            },
        )
    )
    expect(
        await api.post(
            f"/incidents/{api_incident['id']}/updates",
            json={"message": "We are looking into it.", "status": "identified"},
        ),
        201,
    )
    manual = expect(
        await api.post(
            "/incidents",
            json={
                "title": "Slow responses",
                "description": "secret-description-q42",
                "severity": "minor",
                "monitors": [ids["web"]],
                "metadata": {"jira": "SECRET-JIRA-991"},
            },
        ),
        201,
    )
    expect(
        await api.post(
            f"/incidents/{manual['id']}/resolve", json={"resolution_message": "Fixed the cache."}
        )
    )
    expect(
        await api.post(
            "/incidents", json={"title": "Unrelated incident", "monitors": [ids["other"]]}
        ),
        201,
    )
    page = expect(
        await api.post(
            "/status-pages",
            json={
                "name": "Acme status",
                "slug": "acme-status",
                "description": "Live state of Acme's services.",
                "components": [
                    {"monitor": ids["web"], "name": "Website"},
                    {"monitor": ids["api"], "name": "Public API", "group": "Backend"},
                    {"monitor": ids["worker"], "name": "Background jobs", "group": "Backend"},
                ],
                "metadata": {"internal": "SECRET-JIRA-991"},
            },
        ),
        201,
    )
    return Seeded(page, ids)
