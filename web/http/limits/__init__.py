"""The API's rate limits (docs/api.md, Rate limits): rolling windows counted in memory
(:mod:`.rolling`), leased from the database so that they hold across nodes (:mod:`.quota`,
:mod:`.lease`, and the ``limits`` actor of :mod:`.returns`), and the middlewares that apply
them per token, per account and to failed logins (:mod:`.throttle`)."""
