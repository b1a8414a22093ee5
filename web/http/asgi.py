"""The ASGI connection class of the app: Quart-Trio's, with the response sent shielded.

Why: with Hypercorn's trio worker, the end of a response is also where Hypercorn decides
the connection's fate, in the app's task: it hands ``http.disconnect`` to the app, then
closes the socket (a request whose body was not read to its end cannot be followed by
another) or re-arms the keep-alive timer. Quart-Trio's `TrioASGIHTTPConnection` cancels
the app's task as soon as its message reader sees that ``http.disconnect``, which lands in
the middle of Hypercorn's close (at the checkpoint of ``send_eof``): the socket is never
closed and Hypercorn goes on reading the client's bytes and dropping them. So a body over
``max_body_bytes`` got its 400 ``body_too_large`` but the upload was read to its end, or
the connection was held open forever when the client stalled.

:class:`ShieldedSendHTTPConnection` runs the sending of the response, and with it
Hypercorn's end-of-response work, in a shielded cancel scope bounded by Quart's
``RESPONSE_TIMEOUT`` (seconds). Hypercorn already shields its socket writes, so the
shield changes no deadline; the message reader is still cancelled right after.
``tests/web/test_hostile_input.py`` checks this against a live Hypercorn.
"""

from __future__ import annotations

import math
from typing import Any, cast

import trio
from hypercorn.typing import ASGISendCallable
from quart.wrappers import Request, Response
from quart_trio.asgi import TrioASGIHTTPConnection

__all__ = ["ShieldedSendHTTPConnection"]


class ShieldedSendHTTPConnection(TrioASGIHTTPConnection):
    """`TrioASGIHTTPConnection` whose response is sent under a shield (module docstring).

    Set as ``app.asgi_http_class``.
    """

    async def handle_request(  # type: ignore[override]
        self, nursery: trio.Nursery, request: Request, send: ASGISendCallable
    ) -> None:
        """Handle the request, send the response shielded from the reader's cancellation
        (at most ``RESPONSE_TIMEOUT`` seconds, or the response's own timeout), then stop
        the connection's tasks."""
        response: Any = await self.app.handle_request(request)
        timeout: float | None
        if isinstance(response, Response) and response.timeout != Ellipsis:
            timeout = cast(float | None, response.timeout)
        else:
            timeout = self.app.config["RESPONSE_TIMEOUT"]
        with (
            trio.CancelScope(shield=True),
            trio.move_on_after(math.inf if timeout is None else timeout),
        ):
            await self._send_response(send, response)
        nursery.cancel_scope.cancel()
