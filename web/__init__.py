"""Uptrio's web layer, one subpackage per thing it owns, each importing only those below
it (``pyproject.toml``, the import contracts):

- :mod:`web.process`: the process: the command line, the settings and flags, the
  composition root (``uptrio serve``'s supervision tree and its actors), the app's
  assembly, the operational endpoints, metrics, logs and the admin socket;
- :mod:`web.routes`: the API's endpoints, one module per resource, and the registry of
  them; :mod:`web.public`: what is served without a token (status pages, ping URLs, the
  ``/docs`` viewer);
- :mod:`web.api`: the API objects: request bodies and response objects as pydantic
  models, and the shapers derived from them;
- :mod:`web.http`: the HTTP pipeline: the app, its middlewares, errors, parameters, JSON
  bodies, authentication, idempotency, rate limits, versions, conditional responses and
  the Hypercorn server.
"""
