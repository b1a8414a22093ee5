"""``python -m bench.targets KIND ...``: run one target server (see `bench.targets.servers`)."""

from .servers import main

main()
