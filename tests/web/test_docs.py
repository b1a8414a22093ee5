"""The API reference viewer at ``GET /docs`` (docs/api.md, API reference): no token, every
file it names served by the service itself from relative URLs (no CDN: it works with no
network), a Content-Security-Policy that allows only this origin, and its files cached
(ETag, 304, gzip). Rendering in a real browser: tests/browser/test_docs_browser.py.
"""

from __future__ import annotations

import gzip
import re
from html.parser import HTMLParser
from typing import TYPE_CHECKING
from urllib.parse import urljoin, urlsplit

import trio
from werkzeug.datastructures import Headers

from web.public.docs import ASSETS

if TYPE_CHECKING:
    from quart.typing import TestClientProtocol

BASE = "http://127.0.0.1/docs"


class _Links(HTMLParser):
    """Every ``src`` and ``href`` of a page, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.urls += [value for name, value in attrs if name in ("src", "href") and value]


async def _get(client: TestClientProtocol, path: str, **headers: str) -> tuple[int, Headers, bytes]:
    """GET ``path`` with ``headers``: (status, response headers, body)."""
    response = await client.get(path, headers=headers)
    return response.status_code, response.headers, await response.get_data()


async def test_the_page_names_only_local_files_and_each_answers(
    client: TestClientProtocol,
) -> None:
    with trio.fail_after(20):
        status, headers, body = await _get(client, "/docs")  # no Authorization
        assert status == 200 and headers["Content-Type"] == "text/html; charset=utf-8"
        csp = headers["Content-Security-Policy"]
        assert "default-src 'none'" in csp and "script-src 'self';" in csp
        assert "connect-src 'self'" in csp and not re.search(r"https?:|\*", csp)
        assert headers["X-Content-Type-Options"] == "nosniff"

        links = _Links()
        links.feed(body.decode())
        assert len(links.urls) >= 5
        scripts = []
        for url in links.urls:
            parts = urlsplit(url)
            assert not parts.scheme and not parts.netloc and not url.startswith("/"), url
            path = urlsplit(urljoin(BASE, url)).path
            got, file_headers, content = await _get(client, path)
            assert got == 200 and content, (url, content[:200])
            if url == "openapi.json":  # the noscript link to the document
                continue
            assert file_headers["X-Content-Type-Options"] == "nosniff"
            if path.endswith(".js"):
                assert file_headers["Content-Type"] == "text/javascript; charset=utf-8"
                scripts.append(content.decode())
            else:
                assert path.removeprefix("/docs/") in ASSETS, path
        # Swagger UI itself, then our start script, which reads this service's document
        [bundle, start] = scripts
        assert "SwaggerUIBundle" in bundle
        assert 'url: "openapi.json"' in start and "validatorUrl: null" in start
        assert not re.search(r"https?://", start)
        status, _, document = await _get(client, urlsplit(urljoin(BASE, "openapi.json")).path)
        assert status == 200 and b'"openapi":"3.1.0"' in document.replace(b" ", b"")


async def test_the_files_are_cached_gzipped_and_only_the_listed_ones(
    client: TestClientProtocol,
) -> None:
    with trio.fail_after(20):
        for path in ("/docs", "/docs/swagger-ui-bundle.js", "/docs/swagger-ui.css"):
            status, headers, plain = await _get(client, path)
            etag = headers["ETag"]
            assert status == 200 and re.fullmatch(r'"[0-9a-f]{32}"', etag)
            assert headers["Cache-Control"] == "public, max-age=300"
            status, again, empty = await _get(client, path, **{"If-None-Match": etag})
            assert status == 304 and empty == b"" and again["ETag"] == etag
            status, zipped, raw = await _get(client, path, **{"Accept-Encoding": "gzip"})
            assert status == 200 and zipped["Content-Encoding"] == "gzip"
            assert gzip.decompress(raw) == plain and len(raw) < len(plain)
        for path in (
            "/docs/LICENSE",  # in the package, not listed
            "/docs/swagger-ui.js",
            "/docs/..%2F..%2Fpyproject.toml",
            "/docs/",
            "/docs/start.js/x",
        ):
            status, _, body = await _get(client, path)
            assert status == 404 and b'"route_not_found"' in body, (path, body)
