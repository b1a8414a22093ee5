"""The HTTP pipeline, which knows no resource: the Quart-Trio app serving pipeline routes
(:mod:`.app`), the request context and the middleware chain (:mod:`.pipeline`,
:mod:`.middleware`), the error shape (:mod:`.errors`), query parameters and JSON bodies
(:mod:`.params`, :mod:`.json_body`, :mod:`.validation`), tokens and permissions
(:mod:`.auth`), idempotency keys, rate limits (:mod:`.limits`), API versions,
conditional responses and their page cache, and the Hypercorn server (:mod:`.server`,
:mod:`.protocols`)."""
