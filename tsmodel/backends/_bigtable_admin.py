"""Tables, column families and GC rules of Cloud Bigtable, through the table admin client.

The sync `BigtableBackend` calls
`TableAdmin` directly; the async backend
(`tsmodel.backends.bigtable_async`) runs the same calls in a worker
thread: schema changes are rare and slow on the server side, and one code
path for them is worth more than an event loop's few microseconds.

Also here: the conversion of GC rules to and from the admin API's proto,
and the wrapping of Google errors into tsmodel's, which the data path uses
too. Only the Bigtable backends import this module.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any, TypeVar

import grpc
from google.api_core import exceptions as core_exceptions
from google.auth.credentials import Credentials
from google.cloud.bigtable_admin_v2 import BigtableTableAdminClient
from google.cloud.bigtable_admin_v2 import types as admin_types
from google.cloud.bigtable_admin_v2.services.bigtable_table_admin.transports import (
    BigtableTableAdminGrpcTransport,
)

from tsmodel.errors import BackendError, BackendUnreachableError, TableNotFoundError, TsModelError
from tsmodel.ground.base import GcRule, TableSpec

__all__ = ["TableAdmin", "gc_rule_to_proto", "gc_rule_from_proto", "call", "wrap"]

_T = TypeVar("_T")

#: The admin API's GC rule message (proto-plus constructors are untyped).
_GcRuleProto: Any = admin_types.GcRule
_Type: Any = admin_types.Type
#: The value type of an aggregate family of int64 sums.
_INT64_SUM = _Type(aggregate_type=_Type.Aggregate(
    input_type=_Type(int64_type=_Type.Int64()), sum=_Type.Aggregate.Sum()))


def _is_int64_sum(value_type: Any) -> bool:
    """Whether a family's value type is an aggregate of int64 sums."""
    return bool(_Type.pb(value_type).HasField("aggregate_type")) and \
        value_type.aggregate_type == _INT64_SUM.aggregate_type


class TableAdmin:
    """The table admin calls of one instance, with tsmodel's errors.

    Args:
        instance_path: ``projects/P/instances/I``.
        credentials: Google credentials, or ``None`` for the default
            (ignored on the emulator).
        emulator_host: ``HOST:PORT`` of an emulator, or ``None``.
        client_options: google-cloud's client options (ignored on the emulator).

    Raises:
        BackendError: the client could not be created.
    """

    def __init__(self, instance_path: str, credentials: Credentials | None,
                 emulator_host: str | None, client_options: Any = None) -> None:
        self.instance_path = instance_path
        self.emulator_host = emulator_host
        self.client: Any = call(lambda: _new_client(credentials, emulator_host, client_options),
                                "connect")

    def table_path(self, name: str) -> str:
        return f"{self.instance_path}/tables/{name}"

    def create_table(self, spec: TableSpec) -> None:
        """Create the table with its families, or add missing ones and set GC rules."""
        families = {name: admin_types.ColumnFamily(
                        gc_rule=gc_rule_to_proto(rule),
                        value_type=_INT64_SUM if name in spec.aggregates else None)
                    for name, rule in spec.families}
        try:
            self.client.create_table(
                parent=self.instance_path, table_id=spec.name,
                table=admin_types.Table(column_families=families))
        except core_exceptions.AlreadyExists:
            self._update_families(spec.name, families)
        except core_exceptions.GoogleAPIError as exc:
            raise wrap(exc, f"create table {spec.name!r}") from exc

    def _update_families(self, name: str, wanted: dict[str, Any]) -> None:
        """Create the families of ``wanted`` that are missing; set the GC rules of the rest."""
        existing = self._get_table(name).column_families
        modifications = []
        for family, column_family in wanted.items():
            if family not in existing:
                modifications.append(admin_types.ModifyColumnFamiliesRequest.Modification(
                    id=family, create=column_family))
            elif existing[family].gc_rule != column_family.gc_rule:
                modifications.append(admin_types.ModifyColumnFamiliesRequest.Modification(
                    id=family, update=column_family))
        if modifications:
            call(lambda: self.client.modify_column_families(
                name=self.table_path(name), modifications=modifications),
                f"modify the families of table {name!r}")

    def delete_table(self, name: str) -> None:
        """Delete a table and its data; a missing table is not an error."""
        try:
            self.client.delete_table(name=self.table_path(name))
        except core_exceptions.NotFound:
            pass
        except core_exceptions.GoogleAPIError as exc:
            raise wrap(exc, f"delete table {name!r}") from exc

    def delete_family(self, table: str, family: str) -> None:
        """Delete one family and its cells; a missing family is not an error.

        Raises:
            TableNotFoundError: the table does not exist.
        """
        if family not in self._get_table(table).column_families:
            return
        drop = admin_types.ModifyColumnFamiliesRequest.Modification(id=family, drop=True)
        call(lambda: self.client.modify_column_families(
            name=self.table_path(table), modifications=[drop]),
            f"delete family {family!r} of table {table!r}")

    def list_tables(self) -> list[str]:
        """The names of all tables of the instance, sorted."""
        def names() -> list[str]:
            pager = self.client.list_tables(request={
                "parent": self.instance_path, "view": admin_types.Table.View.NAME_ONLY})
            return sorted(table.name.rsplit("/", 1)[-1] for table in pager)

        return call(names, "list tables")

    def describe_table(self, name: str) -> TableSpec:
        """The table's families (sorted by name) and their GC rules.

        Raises:
            TableNotFoundError: the table does not exist.
        """
        families = self._get_table(name).column_families
        return TableSpec(name=name, families=tuple(
            (family, gc_rule_from_proto(families[family].gc_rule))
            for family in sorted(families)), aggregates=tuple(
            family for family in sorted(families)
            if _is_int64_sum(families[family].value_type)))

    def _get_table(self, name: str) -> Any:
        return call(lambda: self.client.get_table(request={
            "name": self.table_path(name), "view": admin_types.Table.View.SCHEMA_VIEW}),
            f"describe table {name!r}", table=name)

    def check_answers(self, timeout: float, left: float) -> None:
        """Raise unless the emulator answers one ListTables within ``left`` seconds."""
        request = {"parent": self.instance_path, "view": admin_types.Table.View.NAME_ONLY}
        try:
            self.client.list_tables(request=request, timeout=left, retry=None)
        except (core_exceptions.DeadlineExceeded, core_exceptions.ServiceUnavailable) as exc:
            raise BackendUnreachableError(
                f"the Bigtable emulator at {self.emulator_host} does not answer (no gRPC "
                f"reply within {timeout:g} s)", address=str(self.emulator_host),
                listening=True, timeout=timeout) from exc
        except core_exceptions.GoogleAPIError:
            pass  # an answer: the requests that follow report the error

    def close(self) -> None:
        self.client.transport.close()


def _new_client(credentials: Credentials | None, emulator_host: str | None,
                client_options: Any) -> Any:
    """A table admin client; it ignores BIGTABLE_EMULATOR_HOST, so wire it by hand."""
    if emulator_host is None:
        return BigtableTableAdminClient(credentials=credentials, client_options=client_options)
    channel = grpc.insecure_channel(emulator_host)
    transport = BigtableTableAdminGrpcTransport(channel=channel)
    return BigtableTableAdminClient(transport=transport)


# -- errors ----------------------------------------------------------------

def call(fn: Callable[[], _T], action: str, *, table: str | None = None) -> _T:
    """Run ``fn``, turning Google errors into `BackendError`."""
    try:
        return fn()
    except core_exceptions.GoogleAPIError as exc:
        raise wrap(exc, action, table=table) from exc
    except Exception as exc:  # e.g. google.auth DefaultCredentialsError
        if isinstance(exc, TsModelError):
            raise
        raise BackendError(f"cannot {action}: {exc}") from exc


def wrap(exc: BaseException, action: str, *, table: str | None = None) -> BackendError:
    """The tsmodel error for a Google error; NotFound on a table is TableNotFoundError."""
    if table is not None and isinstance(exc, core_exceptions.NotFound):
        return TableNotFoundError(f"table {table!r} not found ({exc})")
    return BackendError(f"cannot {action}: {exc}")


# -- GC rules ----------------------------------------------------------------

def gc_rule_to_proto(rule: GcRule) -> Any:
    """The admin API ``GcRule`` of a neutral rule.

    A leaf with one condition is that condition; several conditions (both
    leaf fields, nested rules) are a union or an intersection by ``mode``; an
    empty rule is the empty proto (keep everything).
    """
    parts = []
    if rule.max_versions is not None:
        parts.append(_GcRuleProto(max_num_versions=rule.max_versions))
    if rule.max_age is not None:
        parts.append(_GcRuleProto(max_age=rule.max_age))
    nested = [gc_rule_to_proto(sub) for sub in rule.rules]
    if not nested and len(parts) <= 1:
        return parts[0] if parts else _GcRuleProto()
    if rule.mode == "intersection":
        return _GcRuleProto(
            intersection=_GcRuleProto.Intersection(rules=[*parts, *nested]))
    return _GcRuleProto(union=_GcRuleProto.Union(rules=[*parts, *nested]))


def gc_rule_from_proto(proto: Any) -> GcRule:
    """The neutral rule of an admin API ``GcRule`` (inverse of `gc_rule_to_proto()`).

    Several neutral spellings give the same proto; the one returned is a
    single-condition leaf, a leaf with both limits (for a union or
    intersection of exactly a ``max_versions`` then a ``max_age`` leaf, what
    `gc_rule_to_proto()` writes for such a leaf), or ``rules``.
    """
    kind = _GcRuleProto.pb(proto).WhichOneof("rule")
    if kind == "max_num_versions":
        return GcRule(max_versions=proto.max_num_versions)
    if kind == "max_age":
        return GcRule(max_age=_as_timedelta(proto.max_age))
    if kind in ("union", "intersection"):
        mode = kind
        subs = [gc_rule_from_proto(sub) for sub in getattr(proto, kind).rules]
        return _fold_leaves(subs, mode)
    return GcRule()


def _fold_leaves(subs: list[GcRule], mode: str) -> GcRule:
    """``[max_versions leaf, max_age leaf]`` is a leaf with both limits; the rest nests."""
    if len(subs) == 2 and _is_leaf(subs[0], "max_versions") and _is_leaf(subs[1], "max_age"):
        return GcRule(max_versions=subs[0].max_versions, max_age=subs[1].max_age, mode=mode)
    return GcRule(rules=tuple(subs), mode=mode)


def _is_leaf(rule: GcRule, field: str) -> bool:
    if rule.rules:
        return False
    return (rule.max_versions is not None) + (rule.max_age is not None) == 1 \
        and getattr(rule, field) is not None


def _as_timedelta(value: Any) -> timedelta:
    if isinstance(value, timedelta):
        return value
    return timedelta(seconds=value.seconds, microseconds=value.nanos // 1000)
