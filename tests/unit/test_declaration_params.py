"""Declaration parameters of the wrong type or out of range are refused at class definition.

Every public declaration helper (``ts.key``, ``ts.timestamp``, ``ts.value``,
``ts.constant``, ``ts.salt``, ``ts.alternate``, ``ts.snapshot``,
``ts.Protobuf``) and every ``@ts.model`` argument is checked when the class
is defined. The error is a ``ts.DeclarationError`` (also a ``TypeError``)
naming the model, the field, the parameter and the value given.
"""

from datetime import datetime, timedelta

import pytest

import tsmodel as ts
from tsmodel.encoding.serialization import Protobuf


def declare(body: dict, annotations: dict, **options):
    opts = {"table": "T", "family": "F", **options}
    annotations = {name: hint for name, hint in annotations.items() if name in body}
    ns = {**body, "__annotations__": annotations, "__module__": __name__}
    return ts.model(**opts)(type("Bad", (), ns))


def refused(words, body, annotations, **options) -> str:
    with pytest.raises(ts.DeclarationError) as info:
        declare(body, annotations, **options)
    message = str(info.value)
    for word in words:
        assert word in message, f"{word!r} not in {message!r}"
    assert isinstance(info.value, TypeError)
    return message


HOST = {"host": ts.key()}
TIME = {"time": ts.timestamp()}
ANN = {"host": str, "time": datetime, "k": str, "v": float}


def key_body(**options):
    return {"k": ts.key(**options), **TIME}


# -- ts.key ------------------------------------------------------------------------------


@pytest.mark.parametrize("options, shown", [
    ({"width": "5"}, "'5'"),
    ({"width": 1.5}, "1.5"),
    ({"width": True}, "True"),
    ({"pad": 5}, "5"),
    ({"pad": None}, "None"),
    ({"pad": "\ud800"}, "'\\ud800'"),
    ({"align": 5}, "5"),
    ({"align": None}, "None"),
    ({"max_length": "10"}, "'10'"),
    ({"max_length": None}, "None"),
    ({"max_length": 2.0}, "2.0"),
])
def test_key_parameters(options, shown):
    (param,) = options
    refused(["Bad.k", f"{param}=", shown, "ts.key"], key_body(**options), ANN)


def test_int_key_width_of_the_wrong_type():
    refused(["Bad.k", "width=", "'10'"], key_body(width="10"), {**ANN, "k": int})


# -- ts.timestamp ------------------------------------------------------------------------


@pytest.mark.parametrize("options, shown", [
    ({"unit": 5}, "5"),
    ({"unit": None}, "None"),
    ({"digits": "13"}, "'13'"),
    ({"digits": 13.0}, "13.0"),
    ({"digits": True}, "True"),
    ({"format": 5}, "5"),
    ({"format": b"%Y"}, "b'%Y'"),
    ({"format": "%Y\ud800%m"}, "\\ud800"),
    ({"millis": "yes"}, "'yes'"),
    ({"reverse": 1}, "1"),
    ({"bucket": 5}, "5"),
    ({"bucket": ["day"]}, "['day']"),
    ({"label": 5, "bucket": "day"}, "5"),
])
def test_timestamp_parameters(options, shown):
    param = next(iter(options))
    refused(["Bad.time", f"{param}=", shown, "ts.timestamp"],
            {**HOST, "time": ts.timestamp(**options)}, ANN)


# -- ts.value ----------------------------------------------------------------------------


@pytest.mark.parametrize("options, shown", [
    ({"qualifier": 5}, "5"),
    ({"qualifier": b"q"}, "b'q'"),
    ({"qualifier": "q\ud800"}, "'q\\ud800'"),
    ({"family": 5}, "5"),
    ({"family": "f\ud800"}, "'f\\ud800'"),
    ({"family": "f:g"}, "'f:g'"),
    ({"family": "Zürich"}, "'Zürich'"),
    ({"codec": 5}, "5"),
    ({"codec": "int64"}, "'int64'"),
    ({"allow_nan": "no"}, "'no'"),
])
def test_value_parameters(options, shown):
    (param,) = options
    refused(["Bad.v", f"{param}=", shown], {**HOST, **TIME, "v": ts.value(**options)}, ANN)


def test_codec_class_instead_of_an_instance():
    refused(["Bad.v", "codec=", "ts.Int64()", "instance"],
            {**HOST, **TIME, "v": ts.value(codec=ts.Int64)}, {**ANN, "v": int})


class NotQuiteACodec:
    name = "half"
    python_type = int

    def encode(self, value):
        return b""


def test_codec_without_decode():
    refused(["Bad.v", "codec=", "decode"],
            {**HOST, **TIME, "v": ts.value(codec=NotQuiteACodec())}, {**ANN, "v": int})


def test_codec_with_a_python_type_that_is_not_a_type():
    codec = NotQuiteACodec()
    codec.decode = lambda data: 0
    codec.python_type = "int"
    refused(["Bad.v", "python_type"], {**HOST, **TIME, "v": ts.value(codec=codec)},
            {**ANN, "v": int})


# -- ts.constant, ts.salt ----------------------------------------------------------------


@pytest.mark.parametrize("text, shown", [(5, "5"), (None, "None"), ("A\ud800", "'A\\ud800'"),
                                         (b"BATTERY", "b'BATTERY'")])
def test_constant_text(text, shown):
    refused(["Bad.c", "ts.constant", shown], {"c": ts.constant(text), **HOST, **TIME}, ANN)


@pytest.mark.parametrize("buckets, shown", [(None, "None"), ("4", "'4'"), (4.0, "4.0"),
                                            (True, "True")])
def test_salt_buckets(buckets, shown):
    refused(["Bad.s", "buckets=", shown, "ts.salt"],
            {**HOST, "s": ts.salt(buckets, on="time"), **TIME}, ANN)


@pytest.mark.parametrize("on, shown", [(5, "5"), ([5], "5"), (None, "None"), (b"time", "b'time'")])
def test_salt_on(on, shown):
    refused(["Bad.s", "on=", shown], {**HOST, "s": ts.salt(4, on=on), **TIME}, ANN)


# -- ts.alternate, ts.snapshot -------------------------------------------------------------


@pytest.mark.parametrize("table, shown", [(5, "5"), ("ALT\ud800", "'ALT\\ud800'"),
                                          ("BY DAY", "'BY DAY'"), ("ÄLT", "'ÄLT'")])
def test_alternate_table(table, shown):
    refused(["Bad", "alternate", shown], {**HOST, **TIME}, ANN,
            alternates=[ts.alternate(table, "time", "host")], allow_hotspot=True)


def test_alternate_segment_of_the_wrong_type_names_the_model():
    refused(["Bad", "ALT", "5"], {**HOST, **TIME}, ANN,
            alternates=[ts.alternate("ALT", "host", 5, "time")])


@pytest.mark.parametrize("kwargs, words", [
    ({"pattern": 5}, ["pattern=", "5"]),
    ({"pattern": "S_{period:%Y%m%d}", "period": 5}, ["period=", "5"]),
    ({"pattern": "S_{period:%Y%m%d}", "key": 5}, ["key=", "5"]),
])
def test_snapshot_parameters(kwargs, words):
    pattern = kwargs.pop("pattern")
    refused(["Bad", "ts.snapshot", *words], {**HOST, **TIME}, ANN,
            snapshot=ts.snapshot(pattern, **kwargs))


# -- @ts.model ---------------------------------------------------------------------------


@pytest.mark.parametrize("options, shown", [
    ({"table": 5}, "5"),
    ({"family": 5}, "5"),
    ({"family": "fam\ud800"}, "'fam\\ud800'"),
    ({"family": "Zürich"}, "'Zürich'"),
    ({"table": "Zürich"}, "'Zürich'"),
    ({"current": 5}, "5"),
    ({"separator": 5}, "5"),
    ({"separator": b"#"}, "b'#'"),
    ({"serialization": 5}, "5"),
    ({"serialization": Protobuf}, "Protobuf"),
    ({"allow_hotspot": "yes"}, "'yes'"),
    ({"layout": 5}, "5"),
    ({"layout": ts.rows}, "rows"),
    ({"max_rate": "5"}, "'5'"),
    ({"max_rate": True}, "True"),
    ({"max_rate": float("nan")}, "nan"),
    ({"max_rate": float("inf")}, "inf"),
    ({"retention": 5}, "5"),
    ({"retention": "1d"}, "'1d'"),
    ({"max_versions": "3"}, "'3'"),
    ({"max_versions": 2.5}, "2.5"),
    ({"max_versions": 0}, "0"),
    ({"alternates": 5}, "5"),
    ({"alternates": [5]}, "5"),
    ({"alternates": ts.alternate("ALT", "host", "time")}, "Alternate"),
    ({"snapshot": 5}, "5"),
    ({"snapshot": "S_{period:%Y%m%d}"}, "'S_{period:%Y%m%d}'"),
])
def test_model_arguments(options, shown):
    (param,) = options
    refused(["Bad", f"{param}=", shown], {**HOST, **TIME}, ANN, **options)


def test_model_applied_to_something_that_is_not_a_class():
    with pytest.raises(ts.DeclarationError, match="class"):
        ts.model(table="T", family="F")(5)


def test_retention_that_is_a_timedelta_is_still_accepted():
    M = declare({**HOST, **TIME}, ANN, retention=timedelta(days=7), max_rate=1)
    assert ts.spec_of(M).retention == timedelta(days=7)


# -- ts.Protobuf --------------------------------------------------------------------------


@pytest.mark.parametrize("protobuf, words", [
    (Protobuf(message=5), ["message=", "5", "message class"]),
    (Protobuf(message=object), ["message=", "object", "message class"]),
    (Protobuf(qualifier=5), ["qualifier=", "5"]),
    (Protobuf(qualifier="b\ud800"), ["qualifier=", "'b\\ud800'"]),
])
def test_protobuf_parameters(protobuf, words):
    refused(["Bad", "ts.Protobuf", *words], {**HOST, **TIME, "v": ts.value()}, ANN,
            serialization=protobuf)


def test_protobuf_message_instance_instead_of_a_class():
    message = ts.spec_of(declare({**HOST, **TIME, "v": ts.value()}, ANN,
                                 serialization=Protobuf())).serialization.message_class()
    refused(["Bad", "message=", "class"], {**HOST, **TIME, "v": ts.value()}, ANN,
            serialization=Protobuf(message=message))


# -- field names -------------------------------------------------------------------------


def test_field_name_with_a_leading_underscore_is_refused():
    """attrs names its __init__ argument without the underscore: rows could not be read back."""
    refused(["Bad._v", "underscore"], {**HOST, **TIME, "_v": ts.value()}, {**ANN, "_v": float})


def test_non_ascii_names_in_a_generated_message_are_refused():
    refused(["Bad.é", "protobuf", "ASCII"], {**HOST, **TIME, "é": ts.value()},
            {**ANN, "é": float}, serialization=Protobuf())


@pytest.mark.parametrize("marker", [ts.constant("BATTERY"), ts.salt(4, on="time")])
def test_annotated_constant_or_salt_is_refused(marker):
    """An annotation made attrs require the marker as an argument of every instance."""
    refused(["Bad.m", "without an annotation"], {"m": marker, **HOST, **TIME},
            {**ANN, "m": int})
