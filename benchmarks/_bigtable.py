"""(a) writes, (b) range reads, (c) latest lookups and (f) single saves on the emulator.

Baselines use google-cloud-bigtable's data client as an application would:
default settings, ``MutationsBatcher`` for writes, ``read_rows`` into
``Row`` objects, ``read_row`` for a single row, ``mutate_row`` per table
for a single event.
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Callable
from typing import Any

import _data
from _common import Result, median, ratio_result, timed

import tsmodel as ts
from tsmodel.backends import open_backend
from tsmodel.backends.base import GcRule, ReadFilter, ReadRequest, RowRange, RowSet, TableSpec
from tsmodel.ground.base import MutationOutcome, MutationStatus
from tsmodel.plan.schedule import SaveSchedule
from tsmodel.plan.writes import prepare_save
from tsmodel.run.cache import CachingBackend

BASE_MAIN, BASE_CURRENT = "BASE_METRIC", "BASE_CURRENT_METRIC"
LIMIT_MAIN, LIMIT_CURRENT = "LIMIT_METRIC", "LIMIT_CURRENT_METRIC"
#: Events per MutateRows request of the write limit: tsmodel's default batch size.
LIMIT_BATCH = 1_000
#: Requests in flight at once in the write limit: tsmodel's default WriteFlow.batches.
LIMIT_IN_FLIGHT = 4
#: Calls in flight at once in b0's threaded way (2 threads took 0.9x, 10 about the same,
#: on a loaded machine; b0 also times the calls in turn and keeps the faster).
READ_LIMIT_THREADS = 4
#: The host of the events (f) saves one at a time: outside every range read.
SAVE_HOST = "single.save.host"
#: Saves one event at a time; returns the seconds each save took.
SaveEach = Callable[[list[Any]], list[float]]


_APPLIED = MutationOutcome(MutationStatus.APPLIED)


def _with_cpu(fn: Callable[[], Any]) -> tuple[float, float]:
    """Wall seconds and CPU seconds of this process (every thread) of ``fn()``, after a
    full garbage collection."""
    import gc

    gc.collect()
    start, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - start, time.process_time() - cpu


def _refused(index: int, error: Exception) -> None:
    raise AssertionError(f"entry {index} refused: {error!r}")


def same_cells(backend: Any, model: Any, main: tuple[str, int | None],
               current: tuple[str, int | None]) -> None:
    """Check that the model's main and current-value tables hold the cells of the
    tables ``main`` and ``current`` name (each with the rows to compare: the first
    so many, or ``None``, all), each column's newest (the current table may hold
    older versions)."""
    spec = model.__tsmodel__
    newest = ReadFilter(cells_per_column=1)
    for ours, (theirs, rows) in ((spec.table, main), (spec.current_table, current)):
        a = [(r.key, r.cells) for r in backend.read_rows(ReadRequest(ours, filter=newest,
                                                                     limit=rows))]
        b = [(r.key, r.cells) for r in backend.read_rows(ReadRequest(theirs, filter=newest,
                                                                     limit=rows))]
        assert a and a == b, f"{ours} and {theirs} differ"


def limit_requests(events: list[Any]) -> list[tuple[str, bytes]]:
    """The write limit's requests (a0, a1): the main rows of ``events`` and, per batch of
    ``LIMIT_BATCH`` events, the current-value row of each host's newest event, spelled
    out by hand (`_data.plain_rows()`) and serialized with protobuf, a batch a request."""
    from google.cloud.bigtable_v2.types import bigtable as bigtable_types

    request_type: Any = bigtable_types.MutateRowsRequest.pb()
    prefix = "projects/bench/instances/bench/tables/"
    out = []
    for start in range(0, len(events), LIMIT_BATCH):
        batch = events[start:start + LIMIT_BATCH]
        for table, rows in ((LIMIT_MAIN, _data.plain_rows(batch)),
                            (LIMIT_CURRENT, _data.plain_current_rows(batch))):
            request = request_type(table_name=prefix + table)
            for key, cells in rows:
                entry = request.entries.add()
                entry.row_key = key
                for family, qualifier, stamp, value in cells:
                    cell = entry.mutations.add().set_cell
                    cell.family_name, cell.column_qualifier = family, qualifier
                    cell.timestamp_micros, cell.value = stamp, value
            out.append((prefix + table, request.SerializeToString()))
    return out


def limit_write(backend: Any, host_port: str, families: tuple[tuple[str, GcRule], ...],
                requests: list[tuple[str, bytes]]) -> float:
    """Seconds to send ``requests`` into fresh limit tables on a raw gRPC channel,
    ``LIMIT_IN_FLIGHT`` at once, each response stream drained."""
    import concurrent.futures

    import grpc

    for name in (LIMIT_MAIN, LIMIT_CURRENT):
        backend.delete_table(name)
        backend.create_table(TableSpec(name, families))
    channel = grpc.insecure_channel(host_port)
    mutate = channel.unary_stream("/google.bigtable.v2.Bigtable/MutateRows",
                                  request_serializer=lambda data: data,
                                  response_deserializer=lambda data: data)

    def send(item: tuple[str, bytes]) -> int:
        table, data = item
        metadata = (("x-goog-request-params", f"table_name={table}&app_profile_id="),)
        return sum(len(r) for r in mutate(data, metadata=metadata))

    try:
        send(requests[0])  # the channel connected before the clock starts
        with concurrent.futures.ThreadPoolExecutor(LIMIT_IN_FLIGHT) as pool:
            seconds, _ = timed(lambda: list(pool.map(send, requests)))
    finally:
        channel.close()
    return seconds


class BigtableSuite:
    """Everything measured against one emulator, on one set of events."""

    def __init__(self, host_port: str, events: int, runs: int, lookups: int,
                 log: Callable[[str], None], saves: int = 100) -> None:
        self.url = f"bigtable-emulator://{host_port}/bench/bench"
        self.host_port, self.runs, self.lookups, self.log = host_port, runs, lookups, log
        self.model = _data.server_metric_model()
        self.events = _data.generate(events)
        #: The events (f) saves one at a time.
        self.singles = _data.generate(saves, host_names=[SAVE_HOST], seed=7)
        self.hosts = sorted({e.hostname for e in self.events})
        self.end = _data.end_time(events)
        self.conn = ts.connect(self.url, default=False)
        self.client = _official_client(host_port)
        self.families = tuple((f, GcRule(max_versions=1)) for f in self.model.__tsmodel__.families)

    def close(self) -> None:
        self.client.close()
        self.conn.close()

    # -- (a) writes --------------------------------------------------------------------

    def writes(self) -> Result:
        ours, theirs = [], []
        for run in range(self.runs):
            pair = [self._tsmodel_write, self._baseline_write]
            if run % 2:
                pair.reverse()  # alternate, so drift does not favour one side
            times = {fn.__name__: fn() for fn in pair}
            ours.append(len(self.events) / times["_tsmodel_write"])
            theirs.append(len(self.events) / times["_baseline_write"])
            self.log(f"  (a) run {run + 1}: tsmodel {ours[-1]:,.0f} events/s, "
                     f"MutationsBatcher {theirs[-1]:,.0f} rows/s")
        result = ratio_result("a", "save 50k events (rows/s)", "rows/s", ours, theirs, 5.0,
                              target=">= 5x")
        result.what = f"save {len(self.events):,} events (main + current table)"
        result.notes.append(self._same_cells())
        result.notes.append(self._write_breakdown())
        result.notes.append(self._streamed(median(ours)))
        return result

    def _streamed(self, validated_first: float) -> str:
        """The same save streamed (``validate_first=False``): encoding overlaps the calls."""
        rates = [len(self.events) / self._tsmodel_write(validate_first=False)
                 for _ in range(self.runs)]
        return (f"streamed (save_all(validate_first=False)): {median(rates):,.0f} rows/s, "
                f"{median(rates) / validated_first:.2f}x the validated-first save")

    def _write_breakdown(self) -> str:
        """Where a saved event's time goes, in parts that do not overlap (medians).

        A validated save checks every event before its first write, then
        writes, several batches in flight: while the server applies one
        batch, the client plans the next and renders its wire bytes. So the
        wall time splits in two parts timed apart, the check (`prepare_save()`,
        what the save runs first) and the writing (the rest of the save). The
        client's CPU (every thread of this process) splits into the check, the
        planning (batches, flow, outcomes: the save's schedule answered in
        process, no I/O), the wire bytes (the same batches' ``MutateRows``
        requests, serialized, no I/O) and the rest (gRPC, threads, the garbage
        collector): CPU is not wall time, the server works meanwhile.
        """
        n = len(self.events)
        walls, cpus, checks, check_cpus, plans, wires = [], [], [], [], [], []
        for _ in range(self.runs):
            wall, cpu = self._tsmodel_write_cpu()
            walls.append(wall / n * 1e6)
            cpus.append(cpu / n * 1e6)
            seconds, cpu = _with_cpu(lambda: prepare_save(iter(self.events), False))
            checks.append(seconds / n * 1e6)
            check_cpus.append(cpu / n * 1e6)
            plan = _with_cpu(lambda: self._schedule_in_process(wire=False))[1] - cpu
            plans.append(plan / n * 1e6)
            wire = _with_cpu(lambda: self._schedule_in_process(wire=True))[1] - cpu
            wires.append(wire / n * 1e6 - plans[-1])
        total, check, cpu = median(walls), median(checks), median(cpus)
        check_cpu, plan, wire = median(check_cpus), median(plans), median(wires)
        return (f"per event, {total:.1f} us in all: checking every event before the first "
                f"write {check:.1f} us, then writing {total - check:.1f} us (batches in "
                f"flight). Client CPU {cpu:.1f} us per event (all threads; the server works "
                f"meanwhile): the check {check_cpu:.1f} us, planning and outcomes {plan:.1f} "
                f"us, MutateRows wire bytes {wire:.1f} us (both measured apart, without "
                f"I/O), gRPC and the rest {cpu - check_cpu - plan - wire:.1f} us")

    def _tsmodel_write_cpu(self) -> tuple[float, float]:
        """`_tsmodel_write()`'s save: its wall seconds and this process's CPU seconds."""
        self.conn.drop_tables(self.model)
        self.conn.create_tables(self.model)
        seconds, cpu = _with_cpu(lambda: self.conn.save_all(iter(self.events)))
        return seconds, cpu

    def _schedule_in_process(self, wire: bool) -> None:
        """The validated save's plan and schedule of these events, every write answered
        APPLIED in process; with ``wire``, each write's ``MutateRows`` requests are also
        rendered and serialized as the Bigtable backend sends them."""
        from tsmodel.backends._bigtable_wire import entry_requests

        schedule = SaveSchedule(prepare_save(iter(self.events), False), self.conn.batch_size,
                                self.conn.flow, trusted={self.model.__tsmodel__.table})
        while not schedule.done:
            for ticket, step in schedule.ready():
                rows = step.write.rows
                if wire:
                    for request, _ in entry_requests(
                            "projects/bench/instances/bench/tables/" + step.write.table, None,
                            rows, range(len(rows)), 100_000, 20 * 2**20, _refused):
                        request.SerializeToString()
                schedule.answer(ticket, [_APPLIED] * len(rows))
        assert schedule.result().ok

    def _tsmodel_write(self, validate_first: bool = True) -> float:
        self.conn.drop_tables(self.model)
        self.conn.create_tables(self.model)
        seconds, outcome = timed(lambda: self.conn.save_all(
            iter(self.events), validate_first=validate_first))
        assert outcome.ok, outcome.summary()
        return seconds

    def _baseline_write(self) -> float:
        from google.cloud.bigtable.data import RowMutationEntry, SetCell

        for name in (BASE_MAIN, BASE_CURRENT):
            self.conn.backend.delete_table(name)
            self.conn.backend.create_table(TableSpec(name, self.families))

        def write() -> None:  # the hand-written program: encode, then batch
            for name, rows in ((BASE_MAIN, _data.plain_rows(self.events)),
                               (BASE_CURRENT, _data.plain_current_rows(self.events))):
                with self.client.get_table("bench", name) as table, \
                        table.mutations_batcher() as batcher:
                    for key, cells in rows:
                        batcher.append(RowMutationEntry(key, [
                            SetCell(family, qualifier, value, timestamp_micros=ts)
                            for family, qualifier, ts, value in cells]))

        return timed(write)[0]

    def _same_cells(self) -> str:
        """Check that tsmodel and the baseline wrote exactly the same cells."""
        same_cells(self.conn.backend, self.model, (BASE_MAIN, None), (BASE_CURRENT, None))
        return ("tsmodel and the baseline wrote the same cells (checked cell by cell; tsmodel "
                "also writes the current table once per batch of 1,000 events)")

    def write_limit(self) -> Result:
        """(a) beside what the transport takes: the same cells, serialized before the clock.

        The main table's rows and, per batch of 1,000 events, the current-value
        row of each host's newest event (what ``save_all`` writes), as
        ``MutateRows`` requests of 1,000 entries serialized with protobuf before
        the clock starts, sent on a raw gRPC channel to the emulator, four
        requests in flight as tsmodel's default ``WriteFlow`` allows, each
        response stream drained. No encoding, no validation, no outcomes.
        """
        requests = self._limit_requests()
        ours, limits = [], []
        for run in range(self.runs):
            pair = [self._tsmodel_write, lambda: self._limit_write(requests)]
            if run % 2:
                pair.reverse()
            seconds = [fn() for fn in pair]
            if run % 2:
                seconds.reverse()
            ours.append(len(self.events) / seconds[0])
            limits.append(len(self.events) / seconds[1])
            self.log(f"  (a) limit run {run + 1}: tsmodel {ours[-1]:,.0f} events/s, "
                     f"raw MutateRows {limits[-1]:,.0f} events/s")
        result = ratio_result("a0", "", "events/s", ours, limits, 0.5, target=">= 0.5")
        result.what = (f"save {len(self.events):,} events / the write limit (same cells, "
                       "pre-serialized MutateRows on a raw channel)")
        result.notes.append(self._without_collector(median(limits)))
        return result

    def _without_collector(self, limit: float) -> str:
        """The same save with Python's cyclic garbage collector off (by this script, as an
        application may choose to: tsmodel leaves the process-wide collector alone)."""
        import gc

        rates = []
        for _ in range(self.runs):
            gc.collect()
            gc.disable()
            try:
                rates.append(len(self.events) / self._tsmodel_write())
            finally:
                gc.enable()
        return (f"with the cyclic garbage collector off during the save: "
                f"{median(rates):,.0f} events/s, {median(rates) / limit:.2f} of the limit")

    def _limit_requests(self) -> list[tuple[str, bytes]]:
        return limit_requests(self.events)

    def _limit_write(self, requests: list[tuple[str, bytes]]) -> float:
        return limit_write(self.conn.backend, self.host_port, self.families, requests)

    # -- (b) range reads ----------------------------------------------------------------

    def reads(self) -> Result:
        self._tsmodel_write()  # fresh tables, as written by tsmodel
        if not self._has_baseline_tables():
            self._baseline_write()
        ours, theirs = [], []
        for run in range(self.runs):
            pair = [self._tsmodel_read, self._baseline_read]
            if run % 2:
                pair.reverse()
            times = {fn.__name__: fn() for fn in pair}
            ours.append(len(self.events) / times["_tsmodel_read"])
            theirs.append(len(self.events) / times["_baseline_read"])
            self.log(f"  (b) run {run + 1}: tsmodel {ours[-1]:,.0f} instances/s, "
                     f"read_rows {theirs[-1]:,.0f} rows/s")
        result = ratio_result("b", "", "rows/s", ours, theirs, 5.0, target=">= 5x")
        result.what = f"range-read {len(self.events):,} events into instances / Row objects"
        result.notes.append(self._read_breakdown())
        return result

    def read_limits(self) -> list[Result]:
        """(b0) the read limit, and (b1) instances and (b2) ``to_arrow()`` as shares of it.

        The limit reads the same ranges with the very ``ReadRowsRequest`` s
        tsmodel sends, on a raw gRPC channel whose responses are taken as
        bytes, never parsed, in the fastest way found (`_raw_read`): what the
        transport and the emulator take. The three are timed back to back in
        each run, in turn.
        """
        self._tsmodel_write()
        limits, instances, arrow, threaded, in_turn = [], [], [], [], []
        n = len(self.events)
        for run in range(self.runs):
            pair = [self._raw_read_threaded, self._raw_read_in_turn, self._tsmodel_read,
                    self._arrow_read]
            for _ in range(run % 4):
                pair.append(pair.pop(0))
            times = {fn.__name__: fn() for fn in pair}
            threaded.append(n / times["_raw_read_threaded"])
            in_turn.append(n / times["_raw_read_in_turn"])
            limits.append(max(threaded[-1], in_turn[-1]))  # the faster way, run by run
            instances.append(n / times["_tsmodel_read"])
            arrow.append(n / times["_arrow_read"])
            self.log(f"  (b0-b2) run {run + 1}: limit {limits[-1]:,.0f} events/s (calls in "
                     f"turn {in_turn[-1]:,.0f}, {READ_LIMIT_THREADS} at once "
                     f"{threaded[-1]:,.0f}), instances {instances[-1]:,.0f}, "
                     f"to_arrow {arrow[-1]:,.0f}")
        limit = Result("b0", f"read limit: raw ReadRows of (b)'s ranges, {n:,} events, "
                       "unparsed, the faster of two ways", "events/s",
                       median(limits), None, None, "", None, self.runs)
        shares = [ratio_result("b1", "", "events/s", instances, limits, 0.65,
                               target=">= 0.65 of b0"),
                  ratio_result("b2", "", "events/s", arrow, limits, 0.8,
                               target=">= 0.8 of b0")]
        limit.notes.append(
            f"SingleThreadedUnaryStream channel: the calls in turn on one thread (as (b) "
            f"reads the hosts) {median(in_turn):,.0f} events/s, {READ_LIMIT_THREADS} calls at "
            f"once on a thread pool {median(threaded):,.0f}; each run's faster one is b0 "
            "(threads win on a loaded machine, one thread on a quiet one)")
        shares[0].what = "(b) range read into instances, / the read limit"
        shares[1].what = "to_arrow() of the same ranges, / the read limit"
        return [limit, *shares]

    def _raw_read_threaded(self) -> float:
        return self._raw_read(READ_LIMIT_THREADS)

    def _raw_read_in_turn(self) -> float:
        return self._raw_read(1)

    def _raw_read(self, threads: int) -> float:
        """A raw read of (b)'s responses: b0 is the faster of 1 and `READ_LIMIT_THREADS`.

        The very ``ReadRowsRequest`` s tsmodel sends, serialized before the
        clock, on a raw channel with gRPC's ``SingleThreadedUnaryStream``
        option (as tsmodel's backend sets: each message handed over on the
        reading thread), ``threads`` calls at a time on a thread
        pool, responses taken as bytes and never parsed. Tried on the same
        emulator, same run (docs/benchmarks.md, "The read limit (b0)"): the
        default channel, calls in turn, was 4-5x slower than this (what b0
        measured before, slower than tsmodel's own read); the option alone,
        calls in turn, 0.7x; ``grpc.aio`` calls gathered on one event loop,
        0.2x; 2 threads 0.9x and 10 threads 1.0x. Those were measured on a
        loaded machine; on a quiet one the calls in turn on one thread took
        1.9x the threads' rate, so each run times both and takes the faster.
        """
        import concurrent.futures

        import grpc

        from tsmodel.backends import _bigtable_wire as wire
        from tsmodel.backends._client_private import single_threaded_unary_stream

        prefix = "projects/bench/instances/bench/tables/"
        requests = []
        for host in self.hosts:
            for req in self.model.range(_data.START, self.end, hostname=host).using(
                    self.conn).explain().requests:
                pb = wire.read_request(prefix + req.table, None, req)
                metadata = (("x-goog-request-params",
                             f"table_name={prefix + req.table}&app_profile_id="),)
                requests.append((pb.SerializeToString(), metadata))
        channel = grpc.insecure_channel(self.host_port, options=[
            ("grpc.max_receive_message_length", -1), (single_threaded_unary_stream(), 1)])
        read_rows = channel.unary_stream("/google.bigtable.v2.Bigtable/ReadRows",
                                         request_serializer=None, response_deserializer=None)

        def take(item: tuple[bytes, Any]) -> int:
            data, metadata = item
            return sum(len(message) for message in read_rows(data, metadata=metadata))

        try:
            take(requests[0])  # connected before the clock starts
            with concurrent.futures.ThreadPoolExecutor(threads) as pool:
                seconds, size = timed(lambda: sum(pool.map(take, requests)))
        finally:
            channel.close()
        assert size > 0
        return seconds

    def _arrow_read(self) -> float:
        def read() -> int:
            return sum(self.model.range(_data.START, self.end, hostname=host)
                       .using(self.conn).to_arrow().num_rows for host in self.hosts)

        seconds, count = timed(read)
        assert count == len(self.events), count
        return seconds

    def _read_breakdown(self) -> str:
        """Where a read instance's time goes, all streamed: backend, mapper, the rest (medians).

        The backend alone reads the rows as the query does: in column batches where
        the backend and the codec have them (`read_batches`, `batch_instances`),
        else as rows; its ``read_rows`` is timed too."""
        spec, model = self.model.__tsmodel__, self.model
        requests = [req for host in self.hosts for req in model.range(
            _data.START, self.end, hostname=host).using(self.conn).explain().requests]
        backend = self.conn.backend
        batches = getattr(backend, "read_batches", None)
        decoder = getattr(spec.codec, "batch_instances", lambda: None)()

        def read_rows() -> None:
            for request in requests:
                for _ in backend.read_rows(request):
                    pass

        def read() -> None:
            if batches is None or decoder is None:
                return read_rows()
            for request in requests:
                for _ in batches(request):
                    pass

        def read_and_decode() -> None:
            for request in requests:
                if batches is None or decoder is None:
                    for row in backend.read_rows(request):
                        spec.codec.decode(model, row)
                else:
                    for batch in batches(request):
                        decoder(model, batch)

        totals, reads, rows, decodes = [], [], [], []
        n = len(self.events) / 1e6
        for _ in range(self.runs):
            totals.append(self._tsmodel_read() / n)
            reads.append(timed(read)[0] / n)
            rows.append(timed(read_rows)[0] / n)
            decodes.append(timed(read_and_decode)[0] / n - reads[-1])
        total, backend_us, decode = median(totals), median(reads), median(decodes)
        if batches is None or decoder is None:
            return (f"per instance, {total:.1f} us in all: backend read_rows {backend_us:.1f} us "
                    f"(gRPC hands over each message, the emulator sends one row per message), "
                    f"decode_row {decode:.1f} us, the rest (QuerySet) "
                    f"{total - backend_us - decode:.1f} us")
        return (f"per instance, {total:.1f} us in all: backend read_batches {backend_us:.1f} us "
                f"(gRPC hands over each message, the emulator sends one row per message; "
                f"backend read_rows {median(rows):.1f} us), decode_batch {decode:.1f} us, "
                f"the rest (QuerySet) {total - backend_us - decode:.1f} us")

    def _has_baseline_tables(self) -> bool:
        return BASE_MAIN in self.conn.backend.list_tables()

    def _tsmodel_read(self) -> float:
        def read() -> int:
            return sum(len(list(self.model.range(_data.START, self.end, hostname=host)
                                .using(self.conn))) for host in self.hosts)

        seconds, count = timed(read)
        assert count == len(self.events), count
        return seconds

    def _baseline_read(self) -> float:
        from google.cloud.bigtable.data import ReadRowsQuery, RowRange
        from google.cloud.bigtable.data.row_filters import CellsColumnLimitFilter

        def read() -> int:
            count = 0
            with self.client.get_table("bench", BASE_MAIN) as table:
                for host in self.hosts:
                    start, end = _data.row_range(host, _data.START, self.end)
                    query = ReadRowsQuery(row_ranges=RowRange(start_key=start, end_key=end),
                                          row_filter=CellsColumnLimitFilter(1))
                    count += len(table.read_rows(query))
            return count

        seconds, count = timed(read)
        assert count == len(self.events), count
        return seconds

    # -- (f) save() of one event ------------------------------------------------------

    def single_saves(self, requests: Callable[[], int] | None,
                     rtt: float | None) -> list[Result]:
        """``save(event)`` one at a time against ``mutate_row`` on each table in turn."""
        self.ensure_tables()
        results = one_at_a_time(("f1", "f2", "f3"), "save()", self._tsmodel_saves,
                                self._baseline_saves, self.singles, self.runs, requests, rtt,
                                self.log)
        results[0].notes.append(self.same_single_cells())
        return results

    def ensure_tables(self) -> None:
        """tsmodel's tables and the baseline's, created if missing (their rows kept)."""
        self.conn.create_tables(self.model)
        for name in (BASE_MAIN, BASE_CURRENT):
            if name not in self.conn.backend.list_tables():
                self.conn.backend.create_table(TableSpec(name, self.families))

    def _tsmodel_saves(self, events: list[Any]) -> list[float]:
        save, clock, out = self.conn.save, time.perf_counter, []
        for event in events:
            start = clock()
            save(event)
            out.append(clock() - start)
        return out

    def _baseline_saves(self, events: list[Any]) -> list[float]:
        from google.cloud.bigtable.data import SetCell

        clock, out = time.perf_counter, []
        with self.client.get_table("bench", BASE_MAIN) as main, \
                self.client.get_table("bench", BASE_CURRENT) as current:
            for event in events:  # the hand-written program: one call per table, in turn
                start = clock()
                for table, rows in ((main, _data.plain_rows([event])),
                                    (current, _data.plain_current_rows([event]))):
                    for key, cells in rows:
                        table.mutate_row(key, [SetCell(family, qualifier, value,
                                                       timestamp_micros=ts)
                                               for family, qualifier, ts, value in cells])
                out.append(clock() - start)
        return out

    def same_single_cells(self) -> str:
        """Check that tsmodel and the baseline hold the same cells for SAVE_HOST."""
        backend = self.conn.backend
        spec = self.model.__tsmodel__
        newest = ReadFilter(cells_per_column=1)
        host = SAVE_HOST.encode()
        for ours, theirs, rows in (
                (spec.table, BASE_MAIN, RowSet(ranges=(RowRange.prefix(host + b"#"),))),
                (spec.current_table, BASE_CURRENT, RowSet(keys=(host,)))):
            a = [(r.key, r.cells) for r in backend.read_rows(ReadRequest(ours, rows, newest))]
            b = [(r.key, r.cells) for r in backend.read_rows(ReadRequest(theirs, rows, newest))]
            assert a and a == b, f"{ours} and {theirs} differ"
        return (f"the baseline calls mutate_row on {BASE_MAIN}, then on {BASE_CURRENT}, "
                f"keys and values encoded by hand; both wrote the same cells (checked)")

    # -- (c) latest lookups ----------------------------------------------------------------

    def lookups_(self) -> list[Result]:
        self._tsmodel_write()
        if not self._has_baseline_tables():
            self._baseline_write()
        cache = CachingBackend(open_backend(self.url), maxsize=10_000, ttl=60.0)
        cached = ts.Connection(cache)
        try:
            cold, warm, client = [], [], []
            for run in range(self.runs):
                cold.append(self._lookups(self.conn))
                client.append(self._client_lookups())
                cache.clear()
                for host in self.hosts:  # one miss per host, then hits only
                    cached.latest(self.model, hostname=host)
                warm.append(self._lookups(cached))
                self.log(f"  (c) run {run + 1}: cold {cold[-1]:.1f} us, warm {warm[-1]:.2f} us, "
                         f"client read_row {client[-1]:.1f} us per lookup")
            stats = cache.stats
        finally:
            cached.close()
        first = ratio_result("c1", "latest(), cold: one RPC each vs client read_row",
                             "us/lookup", cold, client, 0.0, target="(info)",
                             higher_is_better=False)
        first.met = None
        ratios = [w / c for w, c in zip(warm, cold, strict=True)]
        second = Result("c2", "latest(), warm (cache hit) vs cold", "us/lookup", median(warm),
                        median(cold), median(ratios), "<= 1 %", median(ratios) <= 0.01,
                        len(warm), percent=True)
        wired = getattr(cached, "cache", None) is not None
        second.notes.append(
            f"cache: {stats.hits:,} hits, {stats.misses:,} misses; "
            + ("latest() keeps the decoded instance (Connection.cache is set)" if wired else
               "Connection has no .cache: only the row read is cached, latest() still "
               "compiles its query and decodes the row on every hit"))
        return [first, second]

    def _lookups(self, conn: ts.Connection) -> float:
        hosts, n = self.hosts, self.lookups

        def run() -> None:
            for i in range(n):
                conn.latest(self.model, hostname=hosts[i % len(hosts)])

        return timed(run)[0] / n * 1e6

    def _client_lookups(self) -> float:
        from google.cloud.bigtable.data.row_filters import CellsColumnLimitFilter

        hosts, n = [h.encode() for h in self.hosts], self.lookups
        version = CellsColumnLimitFilter(1)
        with self.client.get_table("bench", BASE_CURRENT) as table:
            def run() -> None:
                for i in range(n):
                    table.read_row(hosts[i % len(hosts)], row_filter=version)

            return timed(run)[0] / n * 1e6


def one_at_a_time(keys: tuple[str, str, str], call: str, ours: SaveEach, theirs: SaveEach,
                  events: list[Any], runs: int, requests: Callable[[], int] | None,
                  rtt: float | None, log: Callable[[str], None]) -> list[Result]:
    """Single saves: latency against the baseline, round trips, gRPC calls per save.

    Each side saves one event untimed first (channels up), then per run every
    event, one at a time, alternating which side goes first; a run's latency
    is the median of its saves. ``requests`` counts the gRPC calls the delay
    proxy has seen (None without a proxy); round trips are the latency over
    ``rtt`` (only when ``rtt`` > 0).
    """
    ours(events[:1])
    theirs(events[:1])
    latency: dict[str, list[float]] = {"ours": [], "theirs": []}
    calls: dict[str, list[float]] = {"ours": [], "theirs": []}
    for run in range(runs):
        pair = [("ours", ours), ("theirs", theirs)]
        if run % 2:
            pair.reverse()
        for side, save_each in pair:
            before = requests() if requests else 0
            latency[side].append(median(save_each(events)) * 1e3)
            if requests:
                calls[side].append((requests() - before) / len(events))
        log(f"  {keys[0]} run {run + 1}: {call} {latency['ours'][-1]:.2f} ms, "
            f"baseline {latency['theirs'][-1]:.2f} ms per event")
    first = ratio_result(keys[0], "", "ms", latency["ours"], latency["theirs"], 0.0,
                         target="(info)", higher_is_better=False)
    first.what = f"{call} of one event (main + current table), median latency"
    first.met = None
    out = [first]
    if rtt:
        trips = median([round_trips(ms, rtt) for ms in latency["ours"]])
        out.append(Result(keys[1], f"{call}: round trips per event (latency / RTT)", "RTT",
                          trips, median([round_trips(ms, rtt) for ms in latency["theirs"]]),
                          None, "1 round trip", trips < 1.5, runs))
    if requests:
        out.append(Result(keys[2], f"{call}: gRPC calls per event (counted by the proxy)",
                          "calls", median(calls["ours"]), median(calls["theirs"]), None,
                          "(info)", None, runs))
    return out


def round_trips(latency_ms: float, rtt_ms: float) -> float:
    """A latency in round trips of ``rtt_ms``: 10.8 ms at 10 ms RTT is 1.08."""
    if rtt_ms <= 0:
        raise ValueError(f"round trips need a round-trip time > 0 ms, not {rtt_ms}")
    return latency_ms / rtt_ms


def _official_client(host_port: str) -> Any:
    """google-cloud-bigtable's data client on the emulator, with its default settings."""
    os.environ["BIGTABLE_EMULATOR_HOST"] = host_port
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from google.cloud.bigtable.data import BigtableDataClient

        return BigtableDataClient(project="bench")
