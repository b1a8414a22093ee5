"""``python -m web.process.cli``: the ``uptrio`` command (:func:`web.process.cli.main`)."""

from . import main

raise SystemExit(main())
