"""tsmodel on Apache Beam (the ``tsmodel-bigtable[beam]`` extra): a model source and sink, jobs.

``pip install 'tsmodel-bigtable[beam]'``. The core of tsmodel never imports this
package; importing it without Apache Beam installed raises
`ConfigurationError` saying what to install.

* `ReadModel` / `ReadEvents`: a model's events, read with the
  read compiler's plan, split at sampled row keys among workers.
* `WriteModel`: entities written through tsmodel's write planner, with
  retries and a dead-letter output.
* `snapshot()`, `repair()`, `backfill()`, `migrate()`: jobs
  on them, also ``tsmodel job ...`` on the command line.

See docs/jobs.md.
"""

from __future__ import annotations

try:
    import apache_beam  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    from tsmodel.errors import ConfigurationError, install_hint

    raise ConfigurationError(
        f"tsmodel.jobs.beam needs Apache Beam: {install_hint('beam')}") from exc

from tsmodel.jobs.beam.io import (
    DEAD_LETTERS,
    Companions,
    DeadLetter,
    Entities,
    ModelRead,
    ReadEvents,
    ReadModel,
    ReadParts,
    SnapshotRows,
    TableRead,
    WriteModel,
)
from tsmodel.jobs.beam.jobs import (
    BeamReport,
    SameFields,
    Verification,
    backfill,
    migrate,
    pipeline_options,
    rebuild_rollups,
    repair,
    snapshot,
)

__all__ = [
    "ReadModel", "ReadEvents", "ReadParts", "ModelRead", "TableRead", "WriteModel",
    "DeadLetter", "DEAD_LETTERS", "Entities", "SnapshotRows", "Companions",
    "BeamReport", "Verification", "SameFields", "snapshot", "repair", "backfill", "migrate",
    "rebuild_rollups", "pipeline_options",
]
