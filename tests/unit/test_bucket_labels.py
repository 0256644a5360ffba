"""Time buckets without I/O: labels, boundaries, declaration checks, GC and size guards."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tsmodel as ts
from tsmodel.encoding.buckets import make_bucket
from tsmodel.encoding.timestamps import from_micros, to_micros

UTC = timezone.utc


def us(*args: int) -> int:
    return to_micros(datetime(*args, tzinfo=UTC))


@pytest.mark.parametrize(("size", "when", "label"), [
    ("minute", us(2021, 3, 5, 12, 4, 59), b"202103051204"),
    ("hour", us(2021, 3, 5, 12, 59), b"2021030512"),
    ("day", us(2017, 7, 26, 23, 59), b"20170726"),
    ("week", us(2021, 3, 5, 12), b"2021-W09"),
    ("week", us(2021, 1, 1), b"2020-W53"),   # ISO year, not the calendar year
    ("week", us(2024, 12, 30), b"2025-W01"),
    ("month", us(2017, 7, 31, 23), b"201707"),
    (timedelta(minutes=15), us(2021, 3, 5, 12, 29), b"202103051215"),
    (timedelta(days=2), us(1970, 1, 4, 5), b"19700103"),
])
def test_labels(size: str | timedelta, when: int, label: bytes) -> None:
    bucket = make_bucket(size)
    start = bucket.start(when)
    assert bucket.label(start) == label
    assert bucket.parse(label) == start
    assert start <= when < bucket.next(start)
    assert len(label) == bucket.width


def test_week_starts_on_monday_utc() -> None:
    week = make_bucket("week")
    assert from_micros(week.start(us(2021, 3, 7, 23, 59))) == datetime(2021, 3, 1, tzinfo=UTC)
    assert from_micros(week.start(us(2021, 3, 8))) == datetime(2021, 3, 8, tzinfo=UTC)


def test_month_next_crosses_the_year() -> None:
    month = make_bucket("month")
    assert month.next(us(2021, 12, 1)) == us(2022, 1, 1)


@given(st.sampled_from(["minute", "hour", "day", "week", "month", timedelta(minutes=15),
                        timedelta(hours=6), timedelta(seconds=90)]),
       st.integers(0, us(9000, 1, 1)), st.integers(0, us(9000, 1, 1)))
@settings(max_examples=300, deadline=None)
def test_labels_sort_like_bucket_starts(size: str | timedelta, a: int, b: int) -> None:
    bucket = make_bucket(size)
    sa, sb = bucket.start(a), bucket.start(b)
    la, lb = bucket.label(sa), bucket.label(sb)
    assert (la < lb) == (sa < sb) and (la == lb) == (sa == sb)
    assert bucket.parse(la) == sa


@given(st.sampled_from(["minute", "hour", "day", "week", "month", timedelta(minutes=15),
                        timedelta(hours=6), timedelta(seconds=90)]),
       st.lists(st.integers(0, us(9000, 1, 1)), min_size=1, max_size=6),
       st.lists(st.tuples(st.integers(0, 5), st.integers(-3 * 86400 * 10**6, 3 * 86400 * 10**6)),
                min_size=1, max_size=40))
@settings(max_examples=200, deadline=None)
def test_a_bucket_segment_labels_every_time_as_its_bucket_does(
        size: str | timedelta, bases: list[int], offsets: list[tuple[int, int]]) -> None:
    """The key segment keeps the labels of the buckets it met (by their start, a few
    at a time here): times in the same buckets, at and around their edges, in any
    order and again, are labelled as a bucket made afresh labels them."""
    from tsmodel.encoding import keys

    times = [max(0, bases[i % len(bases)] + d) for i, d in offsets]
    times += [t for s in times for t in (make_bucket(size).start(s), make_bucket(size).start(s)
                                          - 1) if t >= 0]
    fresh = make_bucket(size)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(keys, "_KNOWN_LABELS", 3)
        segment = keys.BucketSegment("time", make_bucket(size))
        for when in times + times[::-1]:
            assert segment.encode(when) == fresh.label(fresh.start(when)), when


@pytest.mark.parametrize(("size", "label", "why"), [
    ("week", "week%V", "week10 sorts before week9"),
    ("week", "%Y-W%V", "ISO year"),
    ("week", "%V", "ISO year"),
    ("month", "%m%Y", "year then"),
    ("day", "%d%m%Y", "does not sort"),
    ("hour", "%Y%m%d", "coarser"),
    (timedelta(milliseconds=500), None, "whole number of seconds"),
    ("fortnight", None, "unknown bucket size"),
])
def test_labels_that_do_not_sort_are_refused(size: str | timedelta, label: str | None,
                                             why: str) -> None:
    with pytest.raises(ts.DeclarationError, match=why):
        @ts.model(table="T", family="f", layout=ts.cells(), retention=timedelta(days=1))
        class M:
            host: str = ts.key()
            time: datetime = ts.timestamp(bucket=size, label=label)
            v: float = ts.value()


def test_custom_sortable_labels() -> None:
    @ts.model(table="T", family="f", layout=ts.cells(), max_rate=1.0)
    class Daily:
        host: str = ts.key()
        time: datetime = ts.timestamp(bucket="day", label="%Y-%m-%d")
        v: float = ts.value()

    m = Daily(host="h", time=datetime(2017, 7, 26, 5, tzinfo=UTC), v=1.0)
    assert ts.row_key(m) == b"h#2017-07-26"
    assert ts.decode_row_key(Daily, b"h#2017-07-26")["time"] == datetime(2017, 7, 26, tzinfo=UTC)


def declare(layout: ts.Layout, **options: object) -> type:
    @ts.model(table="T", family="f", layout=layout, **options)  # type: ignore[arg-type]
    class M:
        host: str = ts.key()
        time: datetime = ts.timestamp(bucket="week")
        v: float = ts.value()

    return M


def test_new_cells_need_a_gc_rule() -> None:
    with pytest.raises(ts.DeclarationError, match="garbage-collection rule"):
        declare(ts.cells())


def test_version_limit_derived_from_the_rate() -> None:
    M = declare(ts.cells(), max_rate=1 / 60)
    assert M.__tsmodel__.max_versions == 7 * 24 * 60
    (main,) = ts.table_specs(M.__tsmodel__)
    assert dict(main.families)["f"] == ts.GcRule(max_versions=10_080)


def test_retention_becomes_a_max_age_rule() -> None:
    M = declare(ts.cells(), max_rate=1 / 60, retention=timedelta(days=90))
    (main,) = ts.table_specs(M.__tsmodel__)
    assert dict(main.families)["f"] == ts.GcRule(max_versions=10_080,
                                                 max_age=timedelta(days=90))


def test_cells_per_column_over_the_version_limit_are_refused() -> None:
    with pytest.raises(ts.DeclarationError, match="over max_versions=100"):
        declare(ts.cells(), max_rate=1.0, max_versions=100)


def test_rows_over_100_mb_are_refused() -> None:
    with pytest.raises(ts.DeclarationError, match="100 MB.*smaller bucket"):
        declare(ts.cells(), max_rate=1000.0)


def test_layout_needs_a_bucket_and_a_bucket_needs_a_layout() -> None:
    with pytest.raises(ts.DeclarationError, match="needs ts.timestamp"):
        @ts.model(table="T", family="f", layout=ts.cells(), max_rate=1.0)
        class A:
            host: str = ts.key()
            time: datetime = ts.timestamp()
            v: float = ts.value()
    with pytest.raises(ts.DeclarationError, match="bucket layout"):
        @ts.model(table="T", family="f")
        class B:
            host: str = ts.key()
            time: datetime = ts.timestamp(bucket="day")
            v: float = ts.value()


def test_columns_layout_holds_exactly_one_value() -> None:
    with pytest.raises(ts.DeclarationError, match="exactly one value field"):
        @ts.model(table="T", family="f", layout=ts.columns(), max_rate=1.0)
        class M:
            host: str = ts.key()
            time: datetime = ts.timestamp(bucket="day")
            a: float = ts.value()
            b: float = ts.value()


def test_offsets_step_must_divide_the_bucket() -> None:
    with pytest.raises(ts.DeclarationError, match="does not divide"):
        @ts.model(table="T", family="f", layout=ts.offsets(timedelta(minutes=7)))
        class M:
            host: str = ts.key()
            time: datetime = ts.timestamp(bucket="hour")
            v: float = ts.value()


@pytest.mark.parametrize(("size", "step", "when", "qualifier"), [
    ("day", timedelta(minutes=15), datetime(2017, 7, 26, 23, 45, tzinfo=UTC), b"2345"),
    ("day", timedelta(seconds=30), datetime(2017, 7, 26, 0, 0, 30, tzinfo=UTC), b"000030"),
    ("hour", timedelta(minutes=1), datetime(2017, 7, 26, 5, 7, tzinfo=UTC), b"0507"),
    ("week", timedelta(hours=1), datetime(2021, 3, 7, 22, tzinfo=UTC), b"72200"),
    ("month", timedelta(hours=1), datetime(2021, 3, 31, 22, tzinfo=UTC), b"312200"),
    (timedelta(days=2), timedelta(hours=1), datetime(1970, 1, 4, 5, tzinfo=UTC), b"29"),
])
def test_offset_qualifiers_round_trip(size: str | timedelta, step: timedelta, when: datetime,
                                      qualifier: bytes) -> None:
    @ts.model(table="T", family="f", layout=ts.offsets(step))
    class M:
        host: str = ts.key()
        time: datetime = ts.timestamp(bucket=size)
        v: float = ts.value()

    spec = M.__tsmodel__
    layout = spec.layout
    bucket = spec.bucket
    t = to_micros(when)
    assert layout.qualifier(bucket, t) == qualifier  # type: ignore[attr-defined]
    assert layout.time_of(bucket, bucket.start(t), qualifier) == t  # type: ignore[attr-defined]


def test_values_over_10_mb_are_refused_at_write_time() -> None:
    @ts.model(table="T", family="f")
    class Blob:
        host: str = ts.key()
        time: datetime = ts.timestamp()
        data: bytes = ts.value()

    big = Blob(host="h", time=datetime(2021, 1, 1, tzinfo=UTC), data=b"x" * (11 * 1024 * 1024))
    with ts.connect("memory://", default=False) as conn:
        conn.create_tables(Blob)
        with pytest.raises(ts.ValidationError, match="10 MB"):
            conn.save(big)
