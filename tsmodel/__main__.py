"""``python -m tsmodel``: the ``tsmodel`` command (see :mod:`tsmodel.cli`)."""

from tsmodel.cli import main

raise SystemExit(main())
