"""Companion tables on every backend: alternate keys, snapshots, and repair.

Failures are injected by :class:`FaultyBackend`, a proxy over the real
backend of the session (embedded store or Cloud Bigtable emulator) that
refuses writes to chosen tables without applying them.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

import tsmodel as ts
from tests.backends.passthrough import PassThrough
from tsmodel.backends.base import (
    Backend,
    DeleteCells,
    MutationOutcome,
    MutationStatus,
    ReadRequest,
    Row,
    RowMutation,
)
from tsmodel.encoding.timestamps import to_micros
from tsmodel.plan.events import encode_event

UTC = timezone.utc
MARCH = datetime(2015, 3, 1, tzinfo=UTC)


class FaultyBackend(PassThrough):
    """The real backend, except that writes to some tables fail (and are not applied)."""

    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.features = inner.features
        self.fail: dict[str, MutationStatus] = {}
        self.fail_after_calls: dict[str, int] = {}
        self.calls: dict[str, int] = {}

    def mutate_rows(self, table: str, entries: Sequence[RowMutation]) -> list[MutationOutcome]:
        self.calls[table] = self.calls.get(table, 0) + 1
        status = self.fail.get(table)
        if table in self.fail_after_calls and self.calls[table] > self.fail_after_calls[table]:
            status = MutationStatus.UNKNOWN
        if status is None:
            return self.inner.mutate_rows(table, entries)
        error = ts.BackendError(f"injected failure writing {table}")
        return [MutationOutcome(status, error) for _ in entries]

    def read_rows(self, request: ReadRequest) -> Iterator[Row]:
        return self.inner.read_rows(request)

    def close(self) -> None:
        """The session's backend outlives this proxy."""


def game_model() -> Any:
    suffix = uuid.uuid4().hex[:8]

    @ts.model(table=f"GAME_{suffix}", family="GAME", current=f"CURRENT_GAME_{suffix}",
              alternates=[ts.alternate(f"GAME_BY_DAY_{suffix}", "game", "time", "player")])
    class Game:
        game: str = ts.key()
        player: str = ts.key()
        time: datetime = ts.timestamp(format="%Y%m%d")
        win: bool = ts.value("WIN")
        kda: float = ts.value("KDA")

    return Game


SCORES = [("LoL", "Corrie", 1, False, 4.25), ("LoL", "Jo", 2, True, 7.0),
          ("LoL", "Sam", 2, True, 7.0), ("LoL", "Corrie", 3, True, 9.5),
          ("Starcraft", "Eriko", 3, True, 6.0), ("LoL", "Corrie", 28, True, 3.0),
          ("LoL", "Jo", 31, False, 1.5)]


def games(model: Any) -> list[Any]:
    return [model(game=g, player=p, time=MARCH + timedelta(days=d - 1), win=w, kda=k)
            for g, p, d, w, k in SCORES]


@pytest.fixture
def faulty(backend: Backend) -> FaultyBackend:
    return FaultyBackend(backend)


@pytest.fixture
def conn(faulty: FaultyBackend) -> ts.Connection:
    return ts.Connection(faulty)  # type: ignore[arg-type]


def table_cells(backend: Backend, table: str) -> list[tuple[bytes, Any]]:
    """Every row's newest cells, for comparing tables."""
    rows = backend.read_rows(ReadRequest(table))
    return [(r.key, sorted((c.family, c.qualifier, c.timestamp, c.value) for c in r.cells))
            for r in rows]


def test_game_keys_of_the_reference(conn: ts.Connection, backend: Backend) -> None:
    Game = game_model()
    conn.create_tables(Game)
    conn.save_all(games(Game))
    spec = Game.__tsmodel__
    main_keys = [k for k, _ in table_cells(backend, spec.table)]
    alt_keys = [k for k, _ in table_cells(backend, spec.alternates[0].table)]
    assert b"LoL#Corrie#20150301" in main_keys and b"Starcraft#Eriko#20150303" in main_keys
    assert alt_keys[:3] == [b"LoL#20150301#Corrie", b"LoL#20150302#Jo", b"LoL#20150302#Sam"]


def test_queries_pick_the_table_whose_key_serves_them(conn: ts.Connection) -> None:
    Game = game_model()
    conn.create_tables(Game)
    conn.save_all(games(Game))
    april = MARCH + timedelta(days=31)
    # "How many games of LoL did Corrie win in March?" - the main key serves it.
    corrie = Game.range(MARCH, april, game="LoL", player="Corrie").using(conn)
    assert corrie.explain().table == Game.__tsmodel__.table
    assert sum(g.win for g in corrie) == 2
    # "All LoL games in March" - only the alternate key has the time after the game.
    lol = Game.range(MARCH, MARCH + timedelta(days=3), game="LoL").using(conn)
    plan = lol.explain()
    assert plan.table == Game.__tsmodel__.alternates[0].table
    assert "alternate-key table" in plan.reason and "time range in the row key" in plan.reason
    assert [(g.player, g.time.day) for g in lol] == [("Corrie", 1), ("Jo", 2), ("Sam", 2),
                                                     ("Corrie", 3)]
    # The same events as a scan of the main table.
    scanned = Game.range(MARCH, MARCH + timedelta(days=3), game="LoL", player="Corrie")
    assert [g for g in lol if g.player == "Corrie"] == list(scanned.using(conn))


def test_alternate_and_main_agree_on_every_event(conn: ts.Connection) -> None:
    Game = game_model()
    conn.create_tables(Game)
    rng = random.Random(4)
    events = [Game(game=rng.choice(["LoL", "Dota"]), player=f"p{rng.randrange(20)}",
                   time=MARCH + timedelta(days=rng.randrange(60)), win=rng.random() < 0.5,
                   kda=round(rng.random() * 10, 2)) for _ in range(300)]
    events = list({ts.row_key(e): e for e in events}.values())  # one game per player per day
    conn.save_all(events)
    for game in ("LoL", "Dota"):
        via_alt = list(Game.range(MARCH, MARCH + timedelta(days=60), game=game).using(conn))
        by_main = [e for e in events if e.game == game]
        assert sorted(via_alt, key=ts.row_key) == sorted(by_main, key=ts.row_key)


def test_companion_failure_is_partial_and_repair_converges(
    conn: ts.Connection, faulty: FaultyBackend, backend: Backend,
) -> None:
    Game, Clean = game_model(), game_model()
    for model in (Game, Clean):
        conn.create_tables(model)
    spec = Game.__tsmodel__
    faulty.fail[spec.current_table] = MutationStatus.FAILED
    faulty.fail[spec.alternates[0].table] = MutationStatus.UNKNOWN
    result = conn.save_all(games(Game), raise_on_failure=False)
    assert [r.status for r in result.results] == [ts.WriteStatus.PARTIAL] * len(SCORES)
    assert all(dict(r.tables)[spec.table].ok for r in result.results)
    faulty.fail.clear()
    report = ts.repair(Game, MARCH, MARCH + timedelta(days=31), connection=conn)
    assert report.ok and report.events == len(SCORES)
    conn.save_all(games(Clean))
    clean = Clean.__tsmodel__
    for mine, theirs in ((spec.current_table, clean.current_table),
                         (spec.alternates[0].table, clean.alternates[0].table)):
        assert table_cells(backend, mine) == table_cells(backend, theirs)
    # Every current-value row was lost, and each was restored: counted (issue 26, item 7).
    assert report.current_rows_fixed == len(table_cells(backend, clean.current_table)) > 0
    # Repairing again changes nothing.
    again = ts.repair(Game, MARCH, MARCH + timedelta(days=31), connection=conn)
    assert again.alternate_events_deleted == 0 and again.current_rows_fixed == 0


def test_repair_replaying_old_events_keeps_the_newest_current(
    conn: ts.Connection, faulty: FaultyBackend,
) -> None:
    Game = game_model()
    conn.create_tables(Game)
    conn.save_all(games(Game))
    # Only the first half of March is repaired: the newer events must stay current.
    report = ts.repair(Game, MARCH, MARCH + timedelta(days=15), connection=conn)
    assert report.ok
    assert conn.latest(Game, game="LoL", player="Corrie").time == MARCH + timedelta(days=27)
    assert conn.latest(Game, game="LoL", player="Jo").kda == 1.5


def test_repair_deletes_companion_events_the_main_table_lacks(
    conn: ts.Connection, faulty: FaultyBackend, backend: Backend,
) -> None:
    Game = game_model()
    conn.create_tables(Game)
    conn.save_all(games(Game))
    spec = Game.__tsmodel__
    # A main write with an unknown outcome that was in fact not applied: the
    # companions got the event, the main table did not.
    ghost = Game(game="LoL", player="Corrie", time=MARCH + timedelta(days=29), win=True, kda=99.0)
    faulty.fail[spec.table] = MutationStatus.UNKNOWN
    result = conn.save_all([ghost], raise_on_failure=False)
    assert result.unknown and conn.latest(Game, game="LoL", player="Corrie").kda == 99.0
    faulty.fail.clear()
    report = ts.repair(Game, MARCH, MARCH + timedelta(days=31), connection=conn)
    assert report.alternate_events_deleted == 1 and report.current_rows_fixed == 1
    assert conn.latest(Game, game="LoL", player="Corrie").time == MARCH + timedelta(days=27)
    alt_keys = [k for k, _ in table_cells(backend, spec.alternates[0].table)]
    assert b"LoL#20150330#Corrie" not in alt_keys


def test_repair_deletes_every_newer_current_event_the_main_table_lacks(
    conn: ts.Connection, faulty: FaultyBackend, backend: Backend,
) -> None:
    """Two unknown main writes that did not happen, both newer than the newest event held.

    One repair leaves no current value the main table lacks (the first one
    left the older of the two current), and a second changes nothing.
    """
    Game = game_model()
    conn.create_tables(Game)
    conn.save_all(games(Game))
    faulty.fail[Game.__tsmodel__.table] = MutationStatus.UNKNOWN
    for day, kda in ((29, 99.0), (30, 98.0)):
        ghost = Game(game="LoL", player="Corrie", time=MARCH + timedelta(days=day), win=True,
                     kda=kda)
        assert conn.save_all([ghost], raise_on_failure=False).unknown
    faulty.fail.clear()
    report = ts.repair(Game, MARCH, MARCH + timedelta(days=31), connection=conn)
    assert report.ok and report.alternate_events_deleted == 2
    newest = conn.latest(Game, game="LoL", player="Corrie")
    assert (newest.time, newest.kda) == (MARCH + timedelta(days=27), 3.0)
    again = ts.repair(Game, MARCH, MARCH + timedelta(days=31), connection=conn)
    assert again.alternate_events_deleted == 0 and again.current_rows_fixed == 0


def test_repair_of_a_current_row_whose_older_versions_gc_collected_in_part(
    conn: ts.Connection, backend: Backend,
) -> None:
    """A ghost in the current row, an older event written after it, then GC.

    The ghost (a main write that did not happen) clears the optional note's
    older versions; the older event arrives after it and writes its cells
    under the ghost's; ``max_versions=1`` GC then collects the older event's
    cells of every column the ghost also set, and keeps its note. Once the
    ghost's cells are deleted, the row holds a note alone: no event. The
    repair must not stop there (it raised ``CellDecodingError``), and must
    leave the entity's newest event current.
    """
    suffix = uuid.uuid4().hex[:10]

    @ts.model(table=f"GHOST_{suffix}", family="F", current=f"GHOST_CUR_{suffix}")
    class Metric:
        host: str = ts.key()
        time: datetime = ts.timestamp(unit="ms")
        cpu: float = ts.value("CPU")
        note: str | None = ts.value("NOTE", default=None)

    spec = ts.spec_of(Metric)
    conn.create_tables(Metric)
    ghost = Metric(host="h", time=MARCH + timedelta(hours=2), cpu=9.0, note=None)
    row = encode_event(spec, ghost).current_row_mutation()
    assert row is not None
    backend.mutate_rows(spec.current_table, [row])
    older = Metric(host="h", time=MARCH + timedelta(hours=1), cpu=1.0, note="x")
    conn.save(older)
    # What max_versions=1 GC collects: the older CPU cell (the ghost's is newer).
    t1 = to_micros(older.time)
    backend.mutate_rows(spec.current_table, [RowMutation(row.key, (
        DeleteCells("F", b"CPU", t1, t1 + 1000),))])
    report = ts.repair(Metric, MARCH, MARCH + timedelta(days=1), connection=conn)
    assert report.ok and report.current_rows_fixed == 1
    assert conn.latest(Metric, host="h") == older
    assert list(conn.current(Metric, allow_scan=True)) == [older]


def meter_model() -> Any:
    suffix = uuid.uuid4().hex[:8]

    @ts.model(table=f"SENSOR_{suffix}", family="METER", layout=ts.offsets(timedelta(minutes=15)),
              snapshot=ts.snapshot(f"SENSOR_{suffix}_{{period:%Y%m%d}}"))
    class Meter:
        meter: int = ts.key(width=10)
        time: datetime = ts.timestamp(bucket="day")
        kwh: float = ts.value()

    return Meter


DAY = datetime(2017, 7, 26, tzinfo=UTC)


def meter_readings(model: Any, meters: int = 12, days: int = 3) -> list[Any]:
    rng = random.Random(7)
    return [model(meter=m, time=DAY - timedelta(days=1) + timedelta(minutes=15 * i),
                  kwh=round(rng.random() * 30, 2))
            for m in range(meters) for i in range(96 * days)]


def test_snapshot_equals_the_main_tables_period(conn: ts.Connection, backend: Backend) -> None:
    Meter = meter_model()
    conn.create_tables(Meter)
    readings = meter_readings(Meter)
    conn.save_all(readings)
    report = ts.build_snapshot(Meter, DAY + timedelta(hours=5), connection=conn, batch_size=100,
                               progress=False)
    table = report.table
    assert table.endswith("_20170726") and report.events_written == 12 * 96
    assert report.period_start == DAY and report.period_end == DAY + timedelta(days=1)
    expected = sorted((r for r in readings if DAY <= r.time < DAY + timedelta(days=1)),
                      key=lambda r: (r.meter, r.time))
    assert list(Meter.snapshot(DAY).using(conn)) == expected
    assert list(Meter.snapshot(DAY, meter=3).using(conn)) == [r for r in expected if r.meter == 3]
    first = table_cells(backend, table)
    again = ts.build_snapshot(Meter, DAY, connection=conn, progress=False)
    assert again.already_complete
    rebuilt = ts.build_snapshot(Meter, DAY, connection=conn, progress=False, restart=True)
    assert rebuilt.events_written == 12 * 96
    assert table_cells(backend, table) == first  # idempotent: the same cells


def test_interrupted_snapshot_resumes(conn: ts.Connection, faulty: FaultyBackend,
                                      backend: Backend) -> None:
    Meter, Reference = meter_model(), meter_model()
    for model in (Meter, Reference):
        conn.create_tables(model)
        conn.save_all(meter_readings(model))
    table = Meter.__tsmodel__.snapshot.table_for(to_micros(DAY))
    faulty.fail_after_calls[table] = 3  # the 4th batch fails
    with pytest.raises(ts.SnapshotError, match="run the job again"):
        ts.build_snapshot(Meter, DAY, connection=conn, batch_size=96, progress=False)
    faulty.fail_after_calls.clear()
    resumed = ts.build_snapshot(Meter, DAY, connection=conn, batch_size=96, progress=False)
    assert resumed.resumed_after is not None
    assert resumed.events_written == 12 * 96 - 3 * 96
    done = ts.build_snapshot(Reference, DAY, connection=conn, batch_size=96, progress=False)
    assert done.events_written == 12 * 96
    mine = [(k[-20:], cells) for k, cells in table_cells(backend, table)]
    theirs = [(k[-20:], cells) for k, cells in table_cells(backend, done.table)]
    assert mine == theirs


def test_snapshot_declaration_errors() -> None:
    with pytest.raises(ts.DeclarationError, match="same table"):
        @ts.model(table="S", family="f", snapshot=ts.snapshot("SENSOR_{period:%Y}"))
        class A:
            meter: int = ts.key(width=4)
            time: datetime = ts.timestamp()
            kwh: float = ts.value()
    with pytest.raises(ts.QueryError, match="no snapshot"):
        ts.build_snapshot(game_model(), DAY)


def test_alternate_declaration_errors() -> None:
    with pytest.raises(ts.DeclarationError, match="lacks player"):
        @ts.model(table="G", family="f", alternates=[ts.alternate("G2", "game", "time")])
        class A:
            game: str = ts.key()
            player: str = ts.key()
            time: datetime = ts.timestamp()
            kda: float = ts.value()
    with pytest.raises(ts.DeclarationError, match="names no field"):
        @ts.model(table="G", family="f", alternates=[ts.alternate("G2", "nope", "time")])
        class B:
            game: str = ts.key()
            time: datetime = ts.timestamp()
            kda: float = ts.value()
    with pytest.raises(ts.DeclarationError, match="hotspot"):
        @ts.model(table="G", family="f", alternates=[ts.alternate("G2", "time", "game")])
        class C:
            game: str = ts.key()
            time: datetime = ts.timestamp()
            kda: float = ts.value()


def test_promoted_value_field(conn: ts.Connection) -> None:
    suffix = uuid.uuid4().hex[:8]

    @ts.model(table=f"BAT_{suffix}", family="METRIC",
              alternates=[ts.alternate(f"BAT_BY_USER_{suffix}", ts.constant("BATTERY"),
                                       "user", "time")])
    class Battery:
        kind = ts.constant("BATTERY")
        salt = ts.salt(3, on="time")
        time: datetime = ts.timestamp(format="%Y%m%d%H%M%S", millis=True)
        user: str = ts.value("USER")
        percentage: int = ts.value("PERCENTAGE")

    conn.create_tables(Battery)
    t = datetime(2015, 3, 1, 12, 45, 1, 1000, tzinfo=UTC)
    events = [Battery(time=t + timedelta(milliseconds=i), user=u, percentage=p)
              for i, (u, p) in enumerate([("Corrie", 98), ("Jo", 54), ("Corrie", 96)])]
    conn.save_all(events)
    alt = Battery.__tsmodel__.alternates[0]
    assert alt.codec.encode(events[0]).key == b"BATTERY#Corrie#20150301124501001"
    corrie = Battery.range(t, t + timedelta(seconds=1), user="Corrie").using(conn)
    assert corrie.explain().table == alt.table
    assert [e.percentage for e in corrie] == [98, 96]


def test_repair_of_a_key_prefix_leaves_other_entities_alone(
    conn: ts.Connection, faulty: FaultyBackend,
) -> None:
    Game = game_model()
    conn.create_tables(Game)
    conn.save_all(games(Game))
    ghost = Game(game="LoL", player="Corrie", time=MARCH + timedelta(days=29), win=True, kda=99.0)
    faulty.fail[Game.__tsmodel__.table] = MutationStatus.UNKNOWN
    conn.save_all([ghost], raise_on_failure=False)
    faulty.fail.clear()
    april = MARCH + timedelta(days=31)
    jo = ts.repair(Game, MARCH, april, connection=conn, game="LoL", player="Jo")
    assert (jo.events, jo.alternate_events_deleted, jo.current_rows_fixed) == (2, 0, 0)
    assert conn.latest(Game, game="LoL", player="Corrie").kda == 99.0  # untouched
    corrie = ts.repair(Game, MARCH, april, connection=conn, game="LoL", player="Corrie")
    assert (corrie.alternate_events_deleted, corrie.current_rows_fixed) == (1, 1)
    assert conn.latest(Game, game="LoL", player="Corrie").kda == 3.0


def test_scan_refusal_names_the_alternate_keys_too() -> None:
    Game = game_model()
    with pytest.raises(ts.ScanRefusedError, match=r"no alternate-key table serves them either: "
                                                  r"GAME_BY_DAY_\w+: <game>#<time>#<player>"):
        Game.range(MARCH, MARCH + timedelta(days=1), player="Corrie")
