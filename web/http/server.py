"""The web server's part of the supervision tree: Hypercorn on sockets bound once.

:class:`WebServer` binds the listening sockets when it is made and hands duplicates of
them to each incarnation of the ``web`` child, so a restart of the child keeps the port
(connections wait in the backlog meanwhile). An incarnation stops politely through
:meth:`Incarnation.shutdown` (Hypercorn stops accepting and finishes the requests in
flight within its ``graceful_timeout``) or at once when cancelled. Hypercorn's settings
and its HTTP/1.1 protocol are :mod:`web.http.protocols`'s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any

import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.config import Sockets
from hypercorn.trio.run import worker_serve
from hypercorn.utils import wrap_app

__all__ = ["Incarnation", "WebServer"]


@dataclass(slots=True)
class Incarnation:
    """One incarnation of the web server, as its supervisor sees it."""

    stopping: trio.Event = field(default_factory=trio.Event)

    def shutdown(self) -> None:
        """The polite stop: stop accepting, finish the requests in flight."""
        self.stopping.set()


class WebServer:
    """Hypercorn serving ``app`` on sockets bound once (in the constructor); each
    incarnation (:meth:`run`) serves them until its :meth:`Incarnation.shutdown` or a
    cancellation.

    Attributes:
        binds: the URLs listened on (``http://host:port``), known once constructed.

    Raises:
        OSError: a socket could not be bound (the constructor).
    """

    def __init__(self, app: Any, config: HypercornConfig) -> None:
        self._app = wrap_app(app, config.wsgi_max_body_size, None)
        self._config = config
        self.sockets: Sockets = config.create_sockets()
        for sock in self.sockets.insecure_sockets:
            sock.listen(config.backlog)
        self.binds = [
            "http://{}:{}".format(*sock.getsockname()[:2]) for sock in self.sockets.insecure_sockets
        ]

    async def run(self, *, task_status: trio.TaskStatus[Incarnation]) -> None:
        """One incarnation; reports its :class:`Incarnation` once Hypercorn serves."""
        incarnation = Incarnation()
        # Each incarnation serves duplicates of the listening sockets (the same listen
        # queue): Hypercorn's trio listeners close theirs when the incarnation ends.
        mine = Sockets([], [sock.dup() for sock in self.sockets.insecure_sockets], [])
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(
                    partial(
                        worker_serve,
                        self._app,
                        self._config,
                        sockets=mine,
                        shutdown_trigger=incarnation.stopping.wait,
                    )
                )
                task_status.started(incarnation)
        finally:
            for sock in mine.insecure_sockets:
                sock.close()

    def close(self) -> None:
        """Close the listening sockets: new connections are refused from now on."""
        for sock in self.sockets.insecure_sockets:
            sock.close()
