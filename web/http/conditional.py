"""Answering with a cached representation: gzip when the reader accepts it, a strong
``ETag``, and 304 for a matching ``If-None-Match`` (RFC 9110 sections 8.8.3, 12.5.3 and
13.1.2). Shared by the public status pages (:mod:`web.public.status_pages`) and the API
reference viewer (:mod:`web.public.docs`), whose bodies are built once and served many times.
"""

from __future__ import annotations

from quart import Response, request

__all__ = ["answer"]


def _matches(if_none_match: str | None, etag: str) -> bool:
    """Whether ``If-None-Match`` holds ``etag`` or ``*`` (weak comparison, RFC 9110)."""
    if not if_none_match:
        return False
    for candidate in if_none_match.split(","):
        candidate = candidate.strip()
        if candidate == "*" or candidate.removeprefix("W/") == etag:
            return True
    return False


def _accepts_gzip(accept_encoding: str | None) -> bool:
    """Whether ``Accept-Encoding`` accepts gzip (RFC 9110 12.5.3: listed without
    ``q=0``)."""
    for item in (accept_encoding or "").split(","):
        coding, _, params = item.strip().partition(";")
        if coding.strip().lower() in ("gzip", "x-gzip"):
            q = params.strip().lower().removeprefix("q=")
            return q not in ("0", "0.0", "0.00", "0.000")
    return False


def answer(
    body: bytes,
    gzipped: bytes,
    etag: str,
    content_type: str,
    extra: dict[str, str],
    *,
    cache_control: str,
) -> Response:
    """200 with ``body`` (or ``gzipped``, ``Content-Encoding: gzip``, for a reader that
    accepts it; its ETag is the identity ETag with ``-gzip``: another representation), or
    304 when ``If-None-Match`` holds the ETag. ``extra`` headers and ``Cache-Control:
    <cache_control>`` go on both; ``Vary: Accept-Encoding`` always. Reads the current
    Quart request."""
    headers = {"Cache-Control": cache_control, "Vary": "Accept-Encoding", **extra}
    if gzipped and _accepts_gzip(request.headers.get("Accept-Encoding")):
        body, etag = gzipped, etag[:-1] + '-gzip"'
        headers["Content-Encoding"] = "gzip"
    headers["ETag"] = etag
    if _matches(request.headers.get("If-None-Match"), etag):
        response = Response(b"", status=304, headers=headers)
        response.headers.remove("Content-Type")
        response.headers.pop("Content-Encoding", None)
        return response
    return Response(body, status=200, headers=headers, content_type=content_type)
