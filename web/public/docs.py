"""The API reference at ``GET /docs``: Swagger UI reading ``/openapi.json``, every file
served by the service itself (docs/api.md, API reference).

No network beyond the service: Swagger UI's files come from the ``flask-swagger-ui``
package (its ``dist`` folder: the swagger-ui-dist release it tracks; no Flask code of it
runs here), the page and its start script are ours, and every URL in them is relative
(``docs/swagger-ui.css`` from ``/docs``), so the viewer works on a machine with no
internet and under a path prefix. The page's ``Content-Security-Policy`` allows nothing
but this origin (``'unsafe-inline'`` styles: Swagger UI sets style attributes), which
also keeps Swagger UI's online validator badge off (``validatorUrl`` is null anyway).

Like ``/openapi.json`` these routes need no token and sit outside the API's middlewares
(no rate limit: the files are static and cached). Responses carry a strong ``ETag`` and
answer ``If-None-Match`` with 304; readers that accept gzip get a gzipped copy, made
once per process in a worker thread the first time a file is asked for (the bundle is
1.7 MB of JavaScript) and kept (:mod:`web.http.conditional`). An unknown file is a 404
``route_not_found`` like any unknown path.
"""

from __future__ import annotations

import gzip
import importlib.resources
import json
from dataclasses import dataclass
from typing import Any

import trio
from quart import Response, abort
from quart_trio import QuartTrio

from ..http.conditional import answer
from ..http.page_cache import etag_of

__all__ = ["ASSETS", "add_docs_routes"]

ASSETS: dict[str, str] = {
    "swagger-ui.css": "text/css; charset=utf-8",
    "index.css": "text/css; charset=utf-8",
    "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
    "favicon-32x32.png": "image/png",
    "favicon-16x16.png": "image/png",
}
"""The files of flask-swagger-ui's ``dist`` folder served under ``/docs/``, with their
content types; no other file of the package is reachable."""

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self' data:; connect-src 'self'; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'"
)
CACHE_CONTROL = "public, max-age=300"

_PAGE = b"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Uptrio API reference</title>
<link rel="stylesheet" href="docs/swagger-ui.css">
<link rel="stylesheet" href="docs/index.css">
<link rel="icon" type="image/png" href="docs/favicon-32x32.png" sizes="32x32">
<link rel="icon" type="image/png" href="docs/favicon-16x16.png" sizes="16x16">
</head>
<body>
<noscript>This reference needs JavaScript. The OpenAPI document it shows is
<a href="openapi.json">/openapi.json</a>.</noscript>
<div id="swagger-ui"></div>
<script src="docs/swagger-ui-bundle.js"></script>
<script src="docs/start.js"></script>
</body>
</html>
"""
"""The viewer page; relative URLs only (module docstring)."""

_START = b""""use strict";
// Swagger UI over this service's OpenAPI document; nothing fetched from elsewhere.
window.addEventListener("load", function () {
  window.ui = SwaggerUIBundle({
    url: "openapi.json",
    dom_id: "#swagger-ui",
    deepLinking: true,
    validatorUrl: null,
    displayRequestDuration: true,
    presets: [SwaggerUIBundle.presets.apis],
    layout: "BaseLayout",
  });
});
"""
"""The start script (a file, not inline: the CSP allows scripts from this origin only)."""


@dataclass(frozen=True, slots=True)
class _File:
    """One file as served: its bytes, their gzip encoding, its strong ETag and type."""

    body: bytes
    gzipped: bytes
    etag: str
    content_type: str

    @classmethod
    def of(cls, body: bytes, content_type: str) -> _File:
        return cls(body, gzip.compress(body, compresslevel=6, mtime=0), etag_of(body), content_type)


def _read_asset(name: str) -> _File:
    """The package's file ``name`` (a key of `ASSETS`), read and gzipped.

    Raises:
        OSError: the package is installed without it (a broken install).
    """
    data = (importlib.resources.files("flask_swagger_ui") / "dist" / name).read_bytes()
    return _File.of(data, ASSETS[name])


def add_docs_routes(app: QuartTrio, document: dict[str, Any]) -> None:
    """Add ``GET /openapi.json`` (``document``, compact JSON), ``GET /docs`` (the page)
    and ``GET /docs/<name>`` (its files) to ``app`` (module docstring). The files are
    read on first use and kept for the app's life."""
    document_body = json.dumps(document, separators=(",", ":"))
    page = _File.of(_PAGE, "text/html; charset=utf-8")
    start = _File.of(_START, "text/javascript; charset=utf-8")
    files: dict[str, _File] = {"start.js": start}
    headers = {"X-Content-Type-Options": "nosniff"}
    page_headers = {**headers, "Content-Security-Policy": CSP}

    def serve(file: _File, extra: dict[str, str]) -> Response:
        return answer(
            file.body,
            file.gzipped,
            file.etag,
            file.content_type,
            extra,
            cache_control=CACHE_CONTROL,
        )

    @app.route("/openapi.json", methods=["GET"], provide_automatic_options=False)
    async def openapi() -> Response:
        return Response(document_body, status=200, content_type="application/json")

    @app.route("/docs", methods=["GET"], provide_automatic_options=False)
    async def docs_page() -> Response:
        return serve(page, page_headers)

    @app.route("/docs/<name>", methods=["GET"], provide_automatic_options=False)
    async def docs_file(name: str) -> Response:
        file = files.get(name)
        if file is None:
            if name not in ASSETS:
                abort(404)
            file = files[name] = await trio.to_thread.run_sync(_read_asset, name)
        return serve(file, headers)
