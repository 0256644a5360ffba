"""tsmodel: an ORM-style time-series mapper for Google Cloud Bigtable.

Declare a model, and tsmodel derives its row keys, lays its events out in
cells following Google's time-series schema patterns, keeps its current-value
table in step and answers time-range and latest-value queries:

    import tsmodel as ts

    @ts.model(table="METRIC", family="METRIC", current="CURRENT_METRIC")
    class ServerMetric:
        hostname: str = ts.key()
        time: datetime = ts.timestamp(unit="ms")
        cpu1_usr: float = ts.value("CPU/CPU1_USR")
"""

# Importing it gives the "tsmodel" logger its NullHandler (see tsmodel/_observe.py).
from tsmodel import _observe  # noqa: F401
from tsmodel.declare.fields import (
    alternate,
    constant,
    key,
    rollup,
    salt,
    snapshot,
    timestamp,
    value,
    version,
)
from tsmodel.declare.options import ModelOptions
from tsmodel.declare.spec import ModelSpec, spec_of
from tsmodel.declare.tables import table_specs
from tsmodel.encoding.codecs import Bool, Codec, Float64, Int64, Raw, Text, Utf8
from tsmodel.encoding.serialization import Protobuf, Serialization
from tsmodel.encoding.timestamps import floor_timestamp
from tsmodel.errors import (
    ArgumentError,
    ArgumentTypeError,
    BackendError,
    BackendUnreachableError,
    CellDecodingError,
    ConfigurationError,
    DeclarationError,
    DoesNotExist,
    EmulatorNotFoundError,
    ExtraNotInstalledError,
    FieldTypeError,
    InvalidCursorError,
    KeyDecodingError,
    KeyDecodingTypeError,
    KeyEncodingError,
    KeyTypeError,
    QueryError,
    ReadInterruptedError,
    RetentionError,
    SaveError,
    ScanRefusedError,
    TableNotFoundError,
    TsModelError,
    ValidationError,
)
from tsmodel.ground.base import AsyncBackend, Backend, Features, GcRule, Reachable, TableSpec
from tsmodel.jobs.repair import RepairReport, repair, repair_async
from tsmodel.jobs.snapshots import (
    SnapshotError,
    SnapshotReport,
    build_snapshot,
    build_snapshot_async,
)
from tsmodel.layouts import Layout, cells, columns, offsets, rows
from tsmodel.plan.codecs import codec_source
from tsmodel.plan.cursors import Page
from tsmodel.plan.reads import LatestManyPlan, LatestResult
from tsmodel.plan.results import FrameResult
from tsmodel.plan.rollups import ResamplePlan, Stats, Window
from tsmodel.plan.rowkeys import current_row_key, decode_row_key, encode_row_key, row_key
from tsmodel.run.async_connection import AsyncConnection, AsyncQuerySet, connect_async
from tsmodel.run.connection import (
    Connection,
    EntityResult,
    QuerySet,
    WriteFlow,
    WriteResult,
    WriteStatus,
    connect,
    get_default_connection,
    set_default_connection,
)
from tsmodel.run.model import Model, model
from tsmodel.run.query import Query, ReadPlan
from tsmodel.settings import Settings

__version__ = "0.1.0.dev0"

__all__ = [
    # declaring models
    "model", "ModelOptions", "Model", "key", "timestamp", "value", "version", "constant",
    "salt", "Protobuf", "Layout", "rows", "cells", "columns", "offsets", "alternate",
    "snapshot", "rollup",
    # companion-table jobs
    "build_snapshot", "SnapshotReport", "SnapshotError", "repair", "RepairReport",
    "Serialization", "ModelSpec", "spec_of",
    # codecs
    "Codec", "Int64", "Float64", "Utf8", "Bool", "Raw", "Text",
    # row keys
    "row_key", "current_row_key", "encode_row_key", "decode_row_key", "floor_timestamp",
    "codec_source",
    # connections and writes
    "connect", "Connection", "get_default_connection", "set_default_connection",
    "WriteResult", "EntityResult", "FrameResult", "WriteStatus", "WriteFlow", "table_specs",
    "Settings",
    # asyncio
    "connect_async", "AsyncConnection", "AsyncQuerySet", "AsyncBackend", "repair_async",
    "build_snapshot_async",
    # queries
    "Query", "QuerySet", "ReadPlan", "LatestResult", "LatestManyPlan", "Window", "Stats",
    "ResamplePlan", "Page",
    # backends
    "Backend", "Reachable", "Features", "GcRule", "TableSpec",
    # errors
    "TsModelError", "DeclarationError", "ValidationError", "FieldTypeError",
    "KeyEncodingError", "KeyTypeError", "KeyDecodingError", "KeyDecodingTypeError",
    "CellDecodingError", "RetentionError", "QueryError",
    "ScanRefusedError", "InvalidCursorError",
    "DoesNotExist", "BackendError", "TableNotFoundError", "BackendUnreachableError",
    "ReadInterruptedError", "SaveError",
    "ConfigurationError", "EmulatorNotFoundError", "ExtraNotInstalledError",
    "ArgumentError", "ArgumentTypeError",
]
