"""What the service serves without a token, outside the API's middlewares: the public
status pages (:mod:`.status_pages`, what they show: :mod:`.status_view`, their feeds:
:mod:`.status_feeds`), the heartbeats' ping URLs (:mod:`.pings`) and the API reference
viewer with ``/openapi.json`` (:mod:`.docs`)."""
