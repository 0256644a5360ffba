"""The fold of per-table outcomes into an entity's status (`tsmodel.plan.results.Outcomes`).

The expected status is worked out here from the rule of `WriteStatus`'s
documentation, by the role of each table written (never by the position of
its outcome): the main table's outcome decides FAILED or UNKNOWN; once it is
APPLIED, any other table's outcome that is not makes the entity PARTIAL.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tsmodel.backends.base import MutationOutcome, MutationStatus, RowMutation
from tsmodel.plan.results import Outcomes, TableOutcome, TableRole, TableWrite, WriteStatus

COMPANIONS = [TableRole.CURRENT, TableRole.ALTERNATE, TableRole.SNAPSHOT, TableRole.ROLLUP]


def expected(main: MutationStatus | None, others: list[MutationStatus]) -> WriteStatus:
    if main is MutationStatus.FAILED:
        return WriteStatus.FAILED
    if main is MutationStatus.UNKNOWN:
        return WriteStatus.UNKNOWN
    if any(s is not MutationStatus.APPLIED for s in others):
        return WriteStatus.PARTIAL
    return WriteStatus.WRITTEN


writes = st.lists(st.tuples(st.sampled_from(COMPANIONS), st.sampled_from(MutationStatus)),
                  max_size=4)


@given(main=st.sampled_from(MutationStatus), before=writes, after=writes,
       grouped=st.booleans())
def test_the_main_table_decides_wherever_its_outcome_was_recorded(
        main: MutationStatus, before: list[tuple[TableRole, MutationStatus]],
        after: list[tuple[TableRole, MutationStatus]], grouped: bool) -> None:
    """Companion outcomes recorded before the main one do not stand for it."""
    log = Outcomes(2)
    members = ((0, 1),) if grouped else (0,)
    row = (RowMutation(b"k", ()),)

    def write(table: str, role: TableRole, status: MutationStatus) -> None:
        outcome = MutationOutcome(status)
        log.record(TableWrite(table, row, members, grouped=grouped, role=role), [outcome])

    for n, (role, status) in enumerate(before):
        write(f"B{n}", role, status)
    write("MAIN", TableRole.MAIN, main)
    for n, (role, status) in enumerate(after):
        write(f"A{n}", role, status)

    results = log.results(["first", "second"])
    status = expected(main, [s for _, s in before + after])
    assert results[0].status is status
    assert results[1].status is (status if grouped else WriteStatus.WRITTEN)
    tables = results[0].tables
    assert [t.table for t in tables] == [*(f"B{n}" for n in range(len(before))), "MAIN",
                                         *(f"A{n}" for n in range(len(after)))]
    assert all(isinstance(t, TableOutcome) for t in tables)
    assert dict(tables)["MAIN"].status is main  # still (table, outcome) pairs


def test_a_refusal_stands_for_the_main_outcome() -> None:
    """An entity refused before anything was sent (its read failed) is FAILED, and is
    neither pending nor live for the steps that follow."""
    log = Outcomes(2)
    error = RuntimeError("read failed")
    log.not_sent(0, TableRole.MAIN, "ALT", error)
    assert log.recorded(0) and log.failed(0)
    assert not log.recorded(1) and not log.failed(1)
    (refused, untouched) = log.results(["a", "b"])
    assert refused.status is WriteStatus.FAILED and refused.error is error
    assert refused.tables == (("ALT", MutationOutcome(MutationStatus.FAILED, error)),)
    assert untouched.status is WriteStatus.WRITTEN and untouched.tables == ()


# Runs of entities sharing outcomes, as a save records them (one shared APPLIED outcome).
_OUTCOMES = [MutationOutcome(MutationStatus.APPLIED),
             MutationOutcome(MutationStatus.FAILED, ValueError("no")),
             MutationOutcome(MutationStatus.UNKNOWN, TimeoutError("late"))]


@given(st.lists(st.tuples(st.integers(1, 4), st.sampled_from([None, *_OUTCOMES]),
                          st.lists(st.sampled_from(_OUTCOMES), max_size=2)), max_size=6))
def test_results_made_when_read_are_those_of_the_outcomes(
        runs: list[tuple[int, MutationOutcome | None, list[MutationOutcome]]]) -> None:
    """`EntityResults`: each entity's status by the rule above, its tables as recorded;
    counted without making them, equal to the tuple of them, pickled as that tuple."""
    import pickle

    from tsmodel.plan.results import EntityResult, EntityResults, WriteResult

    log = Outcomes()
    wanted: list[EntityResult] = []
    for n, main, others in runs:
        tables = tuple([TableOutcome("M", main)] if main is not None else []) + tuple(
            TableOutcome(f"C{k}", o) for k, o in enumerate(others))
        start = len(log.main)
        log.extend(n)
        for i in range(start, start + n):
            log.main[i] = main
            log.tables[i] = tables  # shared by the run, as `record()` shares it
            wanted.append(EntityResult(f"e{i}", expected(
                None if main is None else main.status, [o.status for o in others]), tables))
    made = log.results([r.entity for r in wanted])
    assert isinstance(made, EntityResults)
    counts: dict[WriteStatus, int] = {}
    for r in wanted:
        counts[r.status] = counts.get(r.status, 0) + 1
    assert made.counts() == counts and made._made is None  # nothing made to count them
    result = WriteResult(made)
    assert result.ok == all(r.status is WriteStatus.WRITTEN for r in wanted)
    assert len(result) == len(wanted)
    assert made == tuple(wanted) and tuple(wanted) == made and list(made) == wanted
    assert result == WriteResult(tuple(wanted))
    assert [made[i] for i in range(len(wanted))] == wanted and made[1:] == tuple(wanted[1:])
    assert made.counts() == counts  # the same once made
    back = pickle.loads(pickle.dumps(made))  # a tuple (errors compare by identity)
    assert type(back) is tuple
    assert [(r.entity, r.status, len(r.tables)) for r in back] == [
        (r.entity, r.status, len(r.tables)) for r in wanted]


# A save's writes as `record()` gets them: runs of entities, one shared outcome for most
# rows, groups (current-value rows), an entity twice in a write (an alternate's rows).
_members = st.lists(st.integers(0, 11), min_size=1, max_size=12)
_write = st.tuples(
    st.sampled_from([TableRole.MAIN, TableRole.CURRENT, TableRole.ALTERNATE]),
    st.one_of(st.builds(lambda a, n: list(range(a, a + n)), st.integers(0, 6),
                        st.integers(1, 6)),
              _members),
    st.booleans(), st.one_of(st.sampled_from(_OUTCOMES),
                             st.lists(st.sampled_from(_OUTCOMES), min_size=12, max_size=12)))


@given(st.lists(_write, max_size=6), st.booleans())
def test_recorded_outcomes_are_those_of_each_row_in_turn(
        writes: list[tuple[TableRole, list[int], bool, Any]], shared: bool) -> None:
    """`record()`, which shares one tuple of outcomes between entities, leaves per
    entity what recording its rows one by one leaves: each table's outcome
    appended in order, the first main outcome."""
    log = Outcomes(12)
    main: list[MutationOutcome | None] = [None] * 12
    tables: list[list[TableOutcome]] = [[] for _ in range(12)]
    if shared:  # entities holding one tuple, as a save's runs do
        start = (TableOutcome("FIRST", _OUTCOMES[0]),)
        log.tables[:] = [start] * 12
        for held in tables:
            held.append(start[0])
    for n, (role, indices, grouped, given_outcomes) in enumerate(writes):
        if grouped:  # consecutive indices in groups of up to three
            members: Any = tuple(tuple(indices[k:k + 3]) for k in range(0, len(indices), 3))
        else:
            members = tuple(indices)
        outcomes = [given_outcomes] * len(members) if isinstance(
            given_outcomes, MutationOutcome) else given_outcomes[:len(members)]
        table = f"T{n}"
        rows = tuple(RowMutation(b"k", ()) for _ in members)
        log.record(TableWrite(table, rows, members, grouped=grouped, role=role), outcomes)
        for row, outcome in zip(members, outcomes, strict=True):
            for i in (row if grouped else (row,)):
                tables[i].append(TableOutcome(table, outcome))
                if role is TableRole.MAIN and main[i] is None:
                    main[i] = outcome
    assert all(a is b for a, b in zip(log.main, main, strict=True))
    assert [list(t) for t in log.tables] == tables
    assert all(a.outcome is b.outcome for got, wanted in zip(log.tables, tables, strict=True)
               for a, b in zip(got, wanted, strict=True))


class _OneByOne(Outcomes):
    """`Outcomes` recording every write entity by entity (no whole-list step)."""

    __slots__ = ()

    def _record_alike(self, write: TableWrite, outcomes: Any) -> bool:
        return False


_APPLIED = MutationOutcome(MutationStatus.APPLIED)
_ERROR = RuntimeError("lost")
#: Outcomes a row may get: the backends' shared APPLIED, an equal one, other ones.
_ROW_OUTCOMES = st.sampled_from([_APPLIED, MutationOutcome(MutationStatus.APPLIED),
                             MutationOutcome(MutationStatus.UNKNOWN, _ERROR),
                             MutationOutcome(MutationStatus.FAILED, _ERROR)])


@st.composite
def _writes(draw: Any, n: int) -> tuple[TableWrite, list[MutationOutcome]]:
    """A write to a table of a run of entities (or of any of them), a row per entity or
    rows standing for groups, with one outcome for all rows or one each."""
    lo = draw(st.integers(0, n - 1))
    run = list(range(lo, draw(st.integers(lo + 1, n))))
    entities = run if draw(st.booleans()) else draw(st.lists(
        st.integers(0, n - 1), min_size=1, max_size=n))
    if draw(st.booleans()):
        entities = draw(st.permutations(entities))
    grouped = draw(st.booleans())
    if grouped:
        cuts = sorted(draw(st.sets(st.integers(1, max(len(entities) - 1, 1)), max_size=3)))
        members: Any = tuple(tuple(entities[a:b]) for a, b in
                             zip([0, *cuts], [*cuts, len(entities)], strict=True)
                             if entities[a:b])
    else:
        members = tuple(entities)
    one = draw(_ROW_OUTCOMES)
    outcomes = [one] * len(members) if draw(st.booleans()) else [
        draw(_ROW_OUTCOMES) for _ in members]
    role = draw(st.sampled_from([TableRole.MAIN, *COMPANIONS]))
    rows = tuple(RowMutation(b"k%d" % i, ()) for i in range(len(members)))
    return TableWrite(draw(st.sampled_from(["T", "U"])), rows, members, grouped=grouped,
                      role=role), outcomes


@given(data=st.data(), n=st.integers(1, 12))
def test_writes_recorded_in_whole_list_steps_are_recorded_as_one_by_one(
        data: Any, n: int) -> None:
    """`Outcomes.record()`'s step for a batch of entities with one outcome gives each
    entity the table outcomes and main outcome that recording them one by one gives."""
    fast, slow = Outcomes(n), _OneByOne(n)
    for _ in range(data.draw(st.integers(1, 6))):
        write, outcomes = data.draw(_writes(n))
        fast.record(write, outcomes)
        slow.record(write, outcomes)
        # Equal outcomes (same status, same error object) may be recorded as one.
        assert fast.tables == slow.tables
        assert fast.main == slow.main
        batch = range(data.draw(st.integers(0, n - 1)), n)
        assert list(fast.not_failed(batch)) == list(slow.not_failed(batch)) == [
            i for i in batch if not slow.failed(i)]
    names = [f"e{i}" for i in range(n)]
    assert [(r.status, r.tables) for r in fast.results(names)] == \
        [(r.status, r.tables) for r in slow.results(names)]
