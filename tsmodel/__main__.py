"""``python -m tsmodel``: the ``tsmodel`` command (see `tsmodel.cli`)."""

from tsmodel.cli import main

raise SystemExit(main())
