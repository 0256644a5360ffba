"""Model declarations: every mistake is refused when the class is defined.

Each refused declaration raises ``ts.DeclarationError`` (also a ``TypeError``)
with a message that says what is wrong and how to fix it; the tests check
the key words of that message.
"""

import sys
from datetime import datetime, timedelta
from typing import ClassVar, Optional

import attrs
import pytest

import tsmodel as ts


def declare(body: dict, annotations: dict, **options):
    """Declare a model from a class body, so each test states only what differs."""
    opts = {"table": "T", "family": "F", **options}
    ns = dict(body)
    ns["__annotations__"] = annotations
    ns["__module__"] = __name__
    cls = type("Bad", (), ns)
    return ts.model(**opts)(cls)


def refused(*words: str, body: dict, annotations: dict, **options) -> str:
    """Assert the declaration is refused; return the message after checking ``words``."""
    with pytest.raises(ts.DeclarationError) as info:
        declare(body, annotations, **options)
    message = str(info.value)
    for word in words:
        assert word.lower() in message.lower(), f"{word!r} not in {message!r}"
    assert isinstance(info.value, TypeError)
    assert isinstance(info.value, ts.TsModelError)
    return message


HOST_TIME = ({"host": ts.key(), "time": ts.timestamp()}, {"host": str, "time": datetime})


def with_time(fmt=None, **ts_options):
    body = {"host": ts.key(), "time": ts.timestamp(format=fmt, **ts_options)}
    return body, {"host": str, "time": datetime}


# -- a good model ------------------------------------------------------------------


@ts.model(table="METRIC", family="METRIC", current="CURRENT_METRIC")
class ServerMetric:
    hostname: str = ts.key()
    time: datetime = ts.timestamp(unit="ms")
    cpu1_usr: float = ts.value("CPU/CPU1_USR")
    blk_read: int = ts.value("IO/BLK_READ")
    note: str | None = ts.value(default=None)
    units: ClassVar[str] = "percent"


@ts.model(table="QUOTE", family="MD")
class Quote:
    exchange: str = ts.key(width=6)
    symbol: str = ts.key(width=5)
    time: datetime = ts.timestamp()
    bid: float = ts.value("BID")


def test_good_model_is_an_attrs_class():
    assert attrs.has(ServerMetric)
    names = [f.name for f in attrs.fields(ServerMetric)]
    assert names == ["hostname", "time", "cpu1_usr", "blk_read", "note"]


def test_good_model_is_keyword_only():
    with pytest.raises(TypeError):
        ServerMetric("server1", datetime(2020, 1, 1), 0.1, 1)  # type: ignore[misc]
    assert all(f.kw_only for f in attrs.fields(ServerMetric))


def test_good_model_compares_by_value():
    from datetime import timezone
    t = datetime(2020, 1, 1, tzinfo=timezone.utc)
    a = ServerMetric(hostname="h", time=t, cpu1_usr=0.1, blk_read=1)
    b = ServerMetric(hostname="h", time=t, cpu1_usr=0.1, blk_read=1)
    assert a == b
    assert a != attrs.evolve(b, blk_read=2)
    assert a.note is None


def test_typing_optional_and_union_syntax_both_make_a_value_optional():
    M = declare({"host": ts.key(), "time": ts.timestamp(), "a": ts.value(default=None),
                 "b": ts.value(default=None), "c": ts.value()},
                {"host": str, "time": datetime, "a": Optional[int],  # noqa: UP045
                 "b": int | None, "c": int})
    spec = ts.spec_of(M)
    assert (spec.value("a").optional, spec.value("b").optional, spec.value("c").optional) == (
        True, True, False)
    assert isinstance(spec.value("a").codec, ts.Int64)
    assert isinstance(spec.value("b").codec, ts.Int64)


def test_class_var_is_not_a_field():
    assert ServerMetric.units == "percent"
    assert "units" not in {f.name for f in attrs.fields(ServerMetric)}


def test_each_model_has_its_own_does_not_exist():
    assert issubclass(ServerMetric.DoesNotExist, ts.DoesNotExist)
    assert issubclass(Quote.DoesNotExist, ts.DoesNotExist)
    assert ServerMetric.DoesNotExist is not Quote.DoesNotExist
    assert ServerMetric.DoesNotExist is not ts.DoesNotExist
    assert not issubclass(ServerMetric.DoesNotExist, Quote.DoesNotExist)
    assert issubclass(ServerMetric.DoesNotExist, LookupError)
    assert ServerMetric.DoesNotExist.__qualname__ == "ServerMetric.DoesNotExist"
    with pytest.raises(ServerMetric.DoesNotExist):
        raise ServerMetric.DoesNotExist("none")


def test_spec_is_attached_once_and_frozen():
    spec = ts.spec_of(ServerMetric)
    assert isinstance(spec, ts.ModelSpec)
    assert spec is ts.spec_of(ServerMetric) is ServerMetric.__tsmodel__
    assert spec.table == "METRIC" and spec.current_table == "CURRENT_METRIC"
    assert spec.key_fields == ("hostname",)
    assert spec.timestamp_field == "time"
    assert [v.qualifier for v in spec.values] == [b"CPU/CPU1_USR", b"IO/BLK_READ", b"note"]
    assert spec.value("note").optional and not spec.value("cpu1_usr").optional
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        spec.table = "OTHER"  # type: ignore[misc]


def test_model_gets_query_class_methods():
    for name in ("range", "latest", "current"):
        assert callable(getattr(ServerMetric, name))


def test_spec_of_a_plain_class_is_a_type_error():
    class Plain:
        pass

    with pytest.raises(TypeError, match="not a tsmodel model"):
        ts.spec_of(Plain)
    with pytest.raises(TypeError, match="not a tsmodel model"):
        ts.row_key(Plain())


def test_subclassing_the_model_base_class_works():
    @ts.model(table="T", family="F")
    class Sub(ts.Model):
        host: str = ts.key()
        time: datetime = ts.timestamp()
        cpu: float = ts.value()

    assert issubclass(Sub, ts.Model)
    assert ts.spec_of(Sub).key_fields == ("host",)


def test_a_model_extending_another_model_is_refused_naming_the_base():
    # It was refused as having "no timestamp field", which it has (inherited).
    @ts.model(table="T", family="F")
    class Base:
        host: str = ts.key()
        time: datetime = ts.timestamp()
        cpu: float = ts.value()

    with pytest.raises(ts.DeclarationError) as info:
        @ts.model(table="T2", family="F")
        class Extended(Base):
            mem: int = ts.value(default=0)
    message = str(info.value)
    assert "Extended" in message and "Base" in message and "host, time, cpu" in message
    assert "no timestamp field" not in message


def test_a_model_taking_its_fields_from_a_plain_base_class_is_refused():
    class Fields:
        host: str = ts.key()
        time: datetime = ts.timestamp()

    with pytest.raises(ts.DeclarationError) as info:
        @ts.model(table="T", family="F")
        class Metric(Fields):
            cpu: float = ts.value()
    message = str(info.value)
    assert "Metric" in message and "Fields" in message and "host, time" in message
    assert "no timestamp field" not in message


# -- decorator use -----------------------------------------------------------------


def test_model_without_arguments_is_refused():
    with pytest.raises(ts.DeclarationError, match="with arguments"):
        @ts.model
        class M:
            host: str = ts.key()
            time: datetime = ts.timestamp()


@pytest.mark.parametrize("options", [{"table": "T"}, {"family": "F"}])
def test_model_needs_table_and_family(options):
    with pytest.raises(ts.DeclarationError, match="table=.*family="):
        @ts.model(**options)
        class M:
            host: str = ts.key()
            time: datetime = ts.timestamp()


@pytest.mark.parametrize("options, words", [
    ({"table": "bad table"}, ["table=", "letters"]),
    ({"table": ""}, ["table="]),
    ({"family": "fam/ily"}, ["family="]),
    ({"current": "T"}, ["current=", "other than table"]),
    ({"current": "a b"}, ["current="]),
])
def test_bad_table_and_family_names(options, words):
    refused(*words, body=HOST_TIME[0], annotations=HOST_TIME[1], **options)


# -- hotspotting ------------------------------------------------------------------


def test_timestamp_first_is_refused_as_hotspotting():
    msg = refused("hotspot", "allow_hotspot=True", "same node",
                  body={"time": ts.timestamp(), "v": ts.value()},
                  annotations={"time": datetime, "v": float})
    assert "<time>" in msg


def test_timestamp_after_only_constants_is_refused():
    msg = refused("hotspot", body={"k": ts.constant("BATTERY"), "time": ts.timestamp()},
                  annotations={"time": datetime})
    assert "BATTERY#<time>" in msg


def test_allow_hotspot_permits_a_leading_timestamp():
    M = declare({"time": ts.timestamp(), "v": ts.value()}, {"time": datetime, "v": float},
                allow_hotspot=True)
    assert ts.spec_of(M).key_fields == ()


def test_salt_before_the_timestamp_avoids_hotspotting():
    M = declare({"k": ts.constant("BATTERY"), "s": ts.salt(3, on="time"), "time": ts.timestamp()},
                {"time": datetime})
    assert ts.spec_of(M).salt.buckets == 3


# -- timestamp formats -------------------------------------------------------------


@pytest.mark.parametrize("fmt, words", [
    ("%d%m%Y", ["does not sort in time order", "most significant"]),
    ("%m%d%Y", ["does not sort in time order"]),
    ("%Y%d", ["does not sort in time order", "no gap"]),
    ("%Y%m%H", ["no gap"]),
    ("%Y%m%d%M", ["no gap"]),
    ("%y%m%d", ["%y", "two-digit years"]),
    ("%Y%b%d", ["%b", "month names"]),
    ("%Y%B%d", ["month names"]),
    ("%Y%m%d%I%M", ["12-hour"]),
    ("%Y%m%d%H%M%z", ["%z", "UTC"]),
    ("%Y%m%d %a", ["weekday"]),
    ("%Y%m%d%Q", ["%Q", "not allowed"]),
    ("%Y%m", ["month or year", "time bucket"]),
    ("%Y", ["month or year"]),
    ("%Y%m%j", ["does not sort in time order"]),
])
def test_formats_that_do_not_sort_are_refused(fmt, words):
    body, ann = with_time(fmt)
    msg = refused(*words, body=body, annotations=ann)
    assert "Bad.time" in msg


def test_millis_needs_seconds_last():
    body, ann = with_time("%Y%m%d%H%M", millis=True)
    refused("millis", "%S", body=body, annotations=ann)


def test_reverse_needs_epoch_digits():
    body, ann = with_time("%Y%m%d", reverse=True)
    refused("reverse=True", "epoch", body=body, annotations=ann)


@pytest.mark.parametrize("fmt", ["%Y%m%d", "%Y-%m-%d-%H%M", "%Y%m%d%H%M%S", "%Y%j", "%Y%j%H",
                                 "%Y%m%d%H%M%S%f", "T%Y.%m.%d"])
def test_formats_that_sort_are_accepted(fmt):
    body, ann = with_time(fmt)
    M = declare(body, ann)
    assert ts.spec_of(M).timestamp.encoding.fmt == fmt


@pytest.mark.parametrize("fmt", ["", "fixed"])
def test_format_without_directives_is_a_declaration_error(fmt):
    body, ann = with_time(fmt)
    refused("format", body=body, annotations=ann)


# -- epoch units and digits ---------------------------------------------------------


@pytest.mark.parametrize("unit, digits", [("ms", 12), ("us", 15), ("s", 9), ("ms", 1)])
def test_too_few_epoch_digits_are_refused(unit, digits):
    body = {"host": ts.key(), "time": ts.timestamp(unit=unit, digits=digits)}
    refused(f"{digits} digits", "time order", "at least",
            body=body, annotations={"host": str, "time": datetime})


def test_unknown_unit_is_refused():
    body = {"host": ts.key(), "time": ts.timestamp(unit="ns")}
    refused("unit='ns'", "'ms'", body=body, annotations={"host": str, "time": datetime})


def test_timestamp_must_be_annotated_datetime():
    refused("annotated 'datetime'", body={"host": ts.key(), "time": ts.timestamp()},
            annotations={"host": str, "time": int})


# -- key size ------------------------------------------------------------------------


def test_variable_width_key_that_can_exceed_4kb_is_refused():
    refused("4 KB", "max_length", body={"host": ts.key(max_length=5000), "time": ts.timestamp()},
            annotations={"host": str, "time": datetime})


def test_keys_that_add_up_over_4kb_are_refused():
    body = {"a": ts.key(max_length=2048), "b": ts.key(width=2048), "time": ts.timestamp()}
    refused("4 KB", body=body, annotations={"a": str, "b": str, "time": datetime})


def test_int_key_too_wide_for_4kb_is_refused():
    refused("4 KB", body={"n": ts.key(width=5000), "time": ts.timestamp()},
            annotations={"n": int, "time": datetime})


def test_key_just_under_the_limit_is_accepted():
    # 4082 + len('#') + 13 digits = 4096 bytes, exactly Bigtable's limit
    M = declare({"host": ts.key(max_length=4082), "time": ts.timestamp()},
                {"host": str, "time": datetime})
    assert ts.spec_of(M).key.max_length == 4096


# -- salts ---------------------------------------------------------------------------


def test_salt_without_a_timestamp_is_refused():
    refused("no timestamp", "salted", body={"host": ts.key(), "s": ts.salt(3, on="host")},
            annotations={"host": str})


def test_salt_on_an_unknown_field_is_refused():
    refused("salt(on='nope')", "no key field",
            body={"s": ts.salt(3, on="nope"), "host": ts.key(), "time": ts.timestamp()},
            annotations={"host": str, "time": datetime})


def test_salt_on_a_value_field_is_refused():
    refused("salt(on='v')",
            body={"s": ts.salt(3, on="v"), "host": ts.key(), "time": ts.timestamp(),
                  "v": ts.value()},
            annotations={"host": str, "time": datetime, "v": float})


def test_salt_needs_two_buckets():
    refused("at least 2 buckets",
            body={"s": ts.salt(1, on="time"), "host": ts.key(), "time": ts.timestamp()},
            annotations={"host": str, "time": datetime})


def test_salt_after_the_timestamp_is_refused():
    refused("after the timestamp",
            body={"host": ts.key(), "time": ts.timestamp(), "s": ts.salt(3, on="time")},
            annotations={"host": str, "time": datetime})


def test_salt_on_several_fields():
    M = declare({"s": ts.salt(4, on=["host", "time"]), "host": ts.key(), "time": ts.timestamp()},
                {"host": str, "time": datetime})
    assert ts.spec_of(M).salt.on == ("host", "time")


def test_salt_on_nothing_is_refused():
    refused("salt", body={"s": ts.salt(3, on=()), "host": ts.key(), "time": ts.timestamp()},
            annotations={"host": str, "time": datetime})


# -- fields ----------------------------------------------------------------------------


def test_duplicate_qualifiers_are_refused():
    refused("'a'", "'b'", "F:X", "own qualifier",
            body={"host": ts.key(), "time": ts.timestamp(), "a": ts.value("X"),
                  "b": ts.value("X")},
            annotations={"host": str, "time": datetime, "a": float, "b": float})


def test_qualifier_defaulting_to_another_fields_qualifier_is_refused():
    refused("both use the column",
            body={"host": ts.key(), "time": ts.timestamp(), "a": ts.value(),
                  "b": ts.value("a")},
            annotations={"host": str, "time": datetime, "a": float, "b": float})


def test_same_qualifier_in_two_families_is_accepted():
    M = declare({"host": ts.key(), "time": ts.timestamp(), "a": ts.value("X"),
                 "b": ts.value("X", family="G")},
                {"host": str, "time": datetime, "a": float, "b": float})
    assert ts.spec_of(M).families == ("F", "G")


def test_empty_qualifier_is_refused():
    refused("qualifier", body={"host": ts.key(), "time": ts.timestamp(), "a": ts.value("")},
            annotations={"host": str, "time": datetime, "a": float})


def test_two_timestamps_are_refused():
    refused("two timestamp fields", "t1", "t2", "value fields",
            body={"host": ts.key(), "t1": ts.timestamp(), "t2": ts.timestamp()},
            annotations={"host": str, "t1": datetime, "t2": datetime})


def test_no_timestamp_is_refused():
    refused("no timestamp field", "tsmodel.timestamp()",
            body={"host": ts.key(), "v": ts.value()}, annotations={"host": str, "v": float})


def test_key_after_the_timestamp_is_refused():
    msg = refused("after the timestamp", "declare the timestamp last",
                  body={"time": ts.timestamp(), "host": ts.key()},
                  annotations={"time": datetime, "host": str})
    assert "Bad.host" in msg


def test_constant_after_the_timestamp_is_refused():
    refused("after the timestamp",
            body={"host": ts.key(), "time": ts.timestamp(), "k": ts.constant("X")},
            annotations={"host": str, "time": datetime})


def test_value_fields_may_follow_the_timestamp():
    M = declare({"host": ts.key(), "time": ts.timestamp(), "v": ts.value()},
                {"host": str, "time": datetime, "v": float})
    assert [v.name for v in ts.spec_of(M).values] == ["v"]


@pytest.mark.parametrize("width", [None, 0])
def test_int_key_without_width_is_refused(width):
    refused("width=N", "numeric order", body={"n": ts.key(width=width), "time": ts.timestamp()},
            annotations={"n": int, "time": datetime})


@pytest.mark.parametrize("hint", [float, bytes, Optional[str]])  # noqa: UP045
def test_key_annotation_must_be_str_or_int(hint):
    refused("str or int", body={"k": ts.key(), "time": ts.timestamp()},
            annotations={"k": hint, "time": datetime})


@pytest.mark.parametrize("options, words", [
    ({"pad": "ab"}, ["pad", "one ASCII character"]),
    ({"pad": "é"}, ["pad"]),
    ({"align": "center"}, ["align"]),
    ({"width": 0}, ["width", "at least 1"]),
])
def test_bad_string_key_options(options, words):
    refused(*words, body={"k": ts.key(**options), "time": ts.timestamp()},
            annotations={"k": str, "time": datetime})


def test_unsupported_value_annotation_without_codec_is_refused():
    refused("no codec", "codec=", body={"host": ts.key(), "time": ts.timestamp(),
                                        "tags": ts.value()},
            annotations={"host": str, "time": datetime, "tags": list})


def test_unsupported_annotation_with_a_codec_is_accepted():
    M = declare({"host": ts.key(), "time": ts.timestamp(),
                 "price": ts.value(codec=ts.Text(float))},
                {"host": str, "time": datetime, "price": object})
    assert isinstance(ts.spec_of(M).value("price").codec, ts.Text)


def test_unannotated_value_is_refused():
    refused("no codec", body={"host": ts.key(), "time": ts.timestamp(), "v": ts.value()},
            annotations={"host": str, "time": datetime})


@pytest.mark.parametrize("sep", ["##", "", "a", "1", " ", "\t", "é"])
def test_bad_separator_is_refused(sep):
    refused("separator", "punctuation", body=HOST_TIME[0], annotations=HOST_TIME[1],
            separator=sep)


@pytest.mark.parametrize("sep", ["|", "/", "!", "~"])
def test_punctuation_separators_are_accepted(sep):
    M = declare(*HOST_TIME, separator=sep)
    assert ts.spec_of(M).key.separator == sep.encode()


@pytest.mark.parametrize("sep", ["\x00", "\x7f"])
def test_control_character_separator_is_refused(sep):
    refused("separator", body=HOST_TIME[0], annotations=HOST_TIME[1], separator=sep)


@pytest.mark.parametrize("text", ["", "A#B"])
def test_bad_constant_is_refused(text):
    refused("constant", "separator",
            body={"k": ts.constant(text), "host": ts.key(), "time": ts.timestamp()},
            annotations={"host": str, "time": datetime})


@pytest.mark.parametrize("name", ["range", "latest", "current"])
@pytest.mark.parametrize("kind", ["key", "value"])
def test_reserved_names_are_refused(name, kind):
    if kind == "key":
        body = {name: ts.key(), "time": ts.timestamp()}
        ann = {name: str, "time": datetime}
    else:
        body = {"host": ts.key(), "time": ts.timestamp(), name: ts.value()}
        ann = {"host": str, "time": datetime, name: str}
    msg = refused("reserved", body=body, annotations=ann)
    assert repr(name) in msg


def test_reserved_constant_name_is_refused():
    refused("reserved", body={"range": ts.constant("X"), "host": ts.key(),
                              "time": ts.timestamp()},
            annotations={"host": str, "time": datetime})


def test_annotated_field_not_declared_with_tsmodel_is_refused():
    msg = refused("tsmodel.key()", "tsmodel.value()", "ClassVar",
                  body={"host": ts.key(), "time": ts.timestamp(), "note": "x"},
                  annotations={"host": str, "time": datetime, "note": str})
    assert "Bad.note" in msg


def test_annotated_field_without_default_not_declared_is_refused():
    refused("must be declared", body={"host": ts.key(), "time": ts.timestamp()},
            annotations={"host": str, "time": datetime, "extra": int})


def test_unresolvable_annotation_is_a_declaration_error():
    refused("cannot resolve", body={"host": ts.key(), "time": ts.timestamp()},
            annotations={"host": "str", "time": "NoSuchType"})


def test_protobuf_value_in_another_family_is_refused():
    refused("another family", body={"host": ts.key(), "time": ts.timestamp(),
                                    "v": ts.value(family="G")},
            annotations={"host": str, "time": datetime, "v": float},
            serialization=ts.Protobuf())


@pytest.mark.parametrize("layout", [ts.offsets(timedelta(minutes=15)), ts.cells(), ts.columns()],
                         ids=lambda layout: layout.name)
def test_a_bucket_layout_without_a_bucket_names_the_model_and_field(layout):
    """Issue 26, item 5: refused with a DeclarationError under plain Python, not an
    empty AssertionError from inside the layout (the check ran after the codec)."""
    assert sys.flags.optimize == 0  # asserts run: the check must not rest on them
    with pytest.raises(ts.DeclarationError) as caught:
        @ts.model(table="M", family="F", layout=layout)
        class Meter:
            meter: str = ts.key()
            when: datetime = ts.timestamp(unit="ms")
            kwh: float = ts.value()
    message = str(caught.value)
    assert message.startswith("Meter: ")
    assert "'when'" in message and "ts.timestamp(bucket=...)" in message
