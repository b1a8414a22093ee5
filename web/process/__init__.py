"""The process: the ``uptrio`` command line (:mod:`.cli`, one module per command), the
settings (:mod:`.settings`), the composition root of ``uptrio serve`` (:mod:`.service`)
and its actors (:mod:`.actors`), the app's assembly (:mod:`.app`), what it does around
its tree (:mod:`.startup`), the operational endpoints (:mod:`.ops`), metrics, logs and
the admin socket (:mod:`.admin`)."""
