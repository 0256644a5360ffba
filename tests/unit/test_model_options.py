"""``@ts.model``'s options are declared once, by `ModelOptions`, whose validators are the checks.

Each option refuses a bad value with a `DeclarationError` naming the model,
the option and the value; the decorator's typed keyword arguments
(``ModelArguments``) list the same options with the same types as the class;
``@ts.model`` without arguments is refused by type checkers and, at run time,
with a message that names the fix.
"""

from __future__ import annotations

import typing
from datetime import datetime, timedelta

import attrs
import pytest
from typing_extensions import Required

import tsmodel as ts
from tsmodel.declare.options import OPTION_NAMES, ModelArguments, ModelOptions
from tsmodel.encoding.serialization import Protobuf

#: For every option, a value its validator refuses and how the message shows it.
BAD: dict[str, tuple[object, str]] = {
    "table": ("no spaces", "'no spaces'"),
    "family": (5, "5"),
    "current": ("a/b", "'a/b'"),
    "separator": (b"#", "b'#'"),
    "serialization": (Protobuf, "Protobuf"),
    "allow_hotspot": (1, "1"),
    "layout": (ts.cells, "cells"),
    "max_rate": (-1.0, "-1.0"),
    "retention": (timedelta(0), "timedelta(0)"),
    "max_versions": (0, "0"),
    "event_time_cells": ("no", "'no'"),
    "unknown_columns": ("skip", "'skip'"),
    "alternates": ("ALT", "'ALT'"),
    "snapshot": ("S_{period:%Y%m%d}", "'S_{period:%Y%m%d}'"),
    "rollups": ([5], "[5]"),
}


def options(**given: object) -> ModelOptions:
    return ModelOptions(name="Metric", **{"table": "T", "family": "F", **given})  # type: ignore[arg-type]


def test_every_option_has_a_refused_value_here() -> None:
    assert sorted(BAD) == sorted(OPTION_NAMES)


@pytest.mark.parametrize("option", sorted(BAD))
def test_each_option_refuses_a_bad_value_naming_model_option_and_value(option: str) -> None:
    value, shown = BAD[option]
    with pytest.raises(ts.DeclarationError) as info:
        options(**{option: value})
    message = str(info.value)
    assert message.startswith("Metric: "), message
    assert f"{option}=" in message or f"{option} " in message, message
    assert shown in message, message


def test_the_decorator_refuses_the_same_values_with_the_same_messages() -> None:
    for option, (value, _) in BAD.items():
        with pytest.raises(ts.DeclarationError) as direct:
            options(**{option: value})
        with pytest.raises(ts.DeclarationError) as declared:
            @ts.model(**{"table": "T", "family": "F", option: value})  # type: ignore[misc]
            class Metric:
                host: str = ts.key()
                time: datetime = ts.timestamp()
        assert str(declared.value) == str(direct.value)


@pytest.mark.parametrize("given, words", [
    ({"current": "T"}, ["current=", "other than table="]),
    ({"separator": "ab"}, ["separator 'ab'", "punctuation"]),
    ({"separator": "a"}, ["separator 'a'", "punctuation"]),
    ({"alternates": [ts.alternate("bad name", "time")]}, ["ts.alternate(table='bad name')"]),
    ({"snapshot": ts.snapshot("S_{period:%Y%m%d}", period=5)}, ["ts.snapshot(period=5)"]),
])
def test_checks_across_an_option_and_inside_its_value(given: dict[str, object],
                                                      words: list[str]) -> None:
    with pytest.raises(ts.DeclarationError) as info:
        options(**given)
    for word in words:
        assert word in str(info.value), str(info.value)


def test_good_options_are_kept_as_given() -> None:
    alt = ts.alternate("ALT", "time", "host")
    built = options(current="C", separator="|", allow_hotspot=True, layout=ts.rows(),
                    max_rate=2, retention=timedelta(days=1), max_versions=3,
                    event_time_cells=False, unknown_columns="error", alternates=[alt])
    assert (built.table, built.family, built.current, built.separator) == ("T", "F", "C", "|")
    assert (built.max_rate, built.retention, built.max_versions) == (2, timedelta(days=1), 3)
    assert (built.allow_hotspot, built.event_time_cells, built.unknown_columns) == (
        True, False, "error")
    assert list(built.alternates) == [alt]


# -- one list of options -----------------------------------------------------------------


def test_the_decorators_keyword_arguments_are_the_options_with_the_same_types() -> None:
    hints = typing.get_type_hints(ModelOptions)
    del hints["name"]
    arguments = typing.get_type_hints(ModelArguments)
    assert list(arguments) == list(OPTION_NAMES) == list(hints)
    assert arguments == hints


def test_the_required_arguments_are_the_options_without_a_default() -> None:
    required = {a.name for a in attrs.fields(ModelOptions)
                if a.default is attrs.NOTHING and a.name != "name"}
    extras = typing.get_type_hints(ModelArguments, include_extras=True)
    marked = {name for name, hint in extras.items() if typing.get_origin(hint) is Required}
    assert required == marked == {"table", "family"}


def test_an_unknown_option_names_the_model_the_option_and_the_options() -> None:
    with pytest.raises(ts.DeclarationError) as info:
        @ts.model(table="T", family="F", tabel="X")  # type: ignore[call-arg]
        class Metric:
            host: str = ts.key()
            time: datetime = ts.timestamp()
    message = str(info.value)
    assert message.startswith("Metric: @ts.model(tabel=...): no such option; did you mean "
                              "table=?"), message
    assert ", ".join(OPTION_NAMES) in message


# -- @ts.model without arguments -----------------------------------------------------------


def test_the_bare_decorator_is_refused_naming_the_class_and_the_fix() -> None:
    with pytest.raises(ts.DeclarationError) as info:
        @ts.model  # type: ignore[arg-type, call-arg]
        class Reading:
            host: str = ts.key()
            time: datetime = ts.timestamp()
    message = str(info.value)
    assert message.startswith("Reading: "), message
    assert '@ts.model(table="TABLE", family="FAMILY")' in message
