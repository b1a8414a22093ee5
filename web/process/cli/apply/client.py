"""The service's API as ``uptrio apply`` and ``uptrio export`` use it: over HTTP with httpx,
never the database (docs/apply.md). Lists are read whole through the keyset cursors
(``limit=100``, ``starting_after`` the last id; uptime-api.md, "Pagination")."""

from __future__ import annotations

import os
from typing import Any

import httpx

__all__ = ["TIMEOUT_SECONDS", "ApiClient", "ApiError", "open_client"]

TIMEOUT_SECONDS = 30.0
"""The deadline of each request, in seconds (connect, read, write, pool)."""


class ApiError(Exception):
    """A request failed: the service answered an error (its ``error.message``, and
    ``error.param`` when given), or could not be reached. ``uptrio apply`` exits 1."""


def open_client(api_url: str, token: str | None = None) -> httpx.AsyncClient:
    """An httpx client for ``api_url`` with the bearer ``token`` (default: the environment's
    ``UPTRIO_TOKEN``) and :data:`TIMEOUT_SECONDS`."""
    token = token if token is not None else os.environ.get("UPTRIO_TOKEN", "")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.AsyncClient(base_url=api_url, headers=headers, timeout=TIMEOUT_SECONDS)


class ApiClient:
    """The calls of apply and export on one ``httpx.AsyncClient``; each raises ApiError."""

    def __init__(self, http: httpx.AsyncClient) -> None:
        self.http = http

    async def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = await self.http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise ApiError(f"{method} {path}: {exc.__class__.__name__}: {exc}") from None
        if response.status_code >= 400:
            raise ApiError(f"{method} {path}: {response.status_code} {_message(response)}")
        return response.json() if response.content else None

    async def list_all(self, path: str) -> list[dict[str, Any]]:
        """Every object of the list at ``path``, page after page."""
        out: list[dict[str, Any]] = []
        params: dict[str, Any] = {"limit": 100}
        while True:
            page = await self._call("GET", path, params=params)
            out.extend(page["data"])
            if not page["has_more"] or not page["data"]:
                return out
            params["starting_after"] = page["data"][-1]["id"]

    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST ``body`` to ``path``; the object created."""
        created: dict[str, Any] = await self._call("POST", path, json=body)
        return created

    async def update(self, path: str, id: str, body: dict[str, Any]) -> None:
        """PATCH ``body`` (only the fields to change) onto ``path/id``."""
        await self._call("PATCH", f"{path}/{id}", json=body)

    async def delete(self, path: str, id: str) -> None:
        """DELETE ``path/id``."""
        await self._call("DELETE", f"{path}/{id}")


def _message(response: httpx.Response) -> str:
    """The error's message from the spec's error shape, with its param; else the body."""
    try:
        error = response.json()["error"]
        param = error.get("param")
        return f"{error['message']}" + (f" (param: {param})" if param else "")
    except (ValueError, KeyError, TypeError):
        return response.text[:200]
