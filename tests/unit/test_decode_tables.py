"""``ts.decode_row_key(..., table=...)``: keys of the current-value and alternate-key tables.

The game scores of the reference: the main table keys ``LoL#Corrie#20150301``,
the alternate-key table (all games of a day) ``LoL#20150301#Corrie``, the
current-value table ``LoL#Corrie``.
"""

from datetime import datetime, timezone

import pytest

import tsmodel as ts

UTC = timezone.utc
MARCH_1 = datetime(2015, 3, 1, tzinfo=UTC)


@ts.model(table="GAME", family="GAME", current="CURRENT_GAME",
          alternates=[ts.alternate("GAME_BY_DAY", "game", "time", "player")])
class Game:
    game: str = ts.key()
    player: str = ts.key()
    time: datetime = ts.timestamp(format="%Y%m%d")
    win: bool = ts.value("WIN")
    kda: float = ts.value("KDA")


CORRIE = Game(game="LoL", player="Corrie", time=MARCH_1, win=True, kda=4.25)
FIELDS = {"game": "LoL", "player": "Corrie", "time": MARCH_1}


def test_the_main_table_is_the_default_and_can_be_named() -> None:
    assert ts.decode_row_key(Game, b"LoL#Corrie#20150301") == FIELDS
    assert ts.decode_row_key(Game, b"LoL#Corrie#20150301", table="GAME") == FIELDS


def test_alternate_key_table() -> None:
    fields = ts.decode_row_key(Game, "LoL#20150301#Corrie", table="GAME_BY_DAY")
    assert fields == FIELDS
    assert list(fields) == ["game", "time", "player"]  # in the table's key order


def test_current_value_table_has_no_time() -> None:
    assert ts.decode_row_key(Game, ts.current_row_key(CORRIE), table="CURRENT_GAME") == {
        "game": "LoL", "player": "Corrie"}


@pytest.mark.parametrize(("table", "key", "reason"), [
    ("GAME_BY_DAY", b"LoL#Corrie#20150301", "no separator at offset 12"),  # a main key
    ("GAME_BY_DAY", b"LoL#20150301#Cor rie", "contains byte b' '"),  # not what tsmodel writes
    ("CURRENT_GAME", b"LoL#Corrie#20150301", "contains the separator"),  # player 'Corrie#2015..'
])
def test_a_key_of_another_layout_is_refused_naming_the_table(table: str, key: bytes,
                                                            reason: str) -> None:
    with pytest.raises(ts.KeyDecodingError) as info:
        ts.decode_row_key(Game, key, table=table)
    assert str(info.value).startswith(f"Game: row key {key!r} of table {table!r}: "), info.value
    assert reason in str(info.value)


def test_an_unknown_table_lists_the_models_tables() -> None:
    with pytest.raises(ts.QueryError) as info:
        ts.decode_row_key(Game, b"LoL#Corrie", table="CURRENT")
    assert str(info.value) == (
        "Game has no table 'CURRENT': its tables are 'GAME' (main), 'GAME_BY_DAY' "
        "(alternate key), 'CURRENT_GAME' (current value)")


def test_a_model_without_companions_has_only_its_main_table() -> None:
    @ts.model(table="QUOTE", family="MD")
    class Quote:
        symbol: str = ts.key(width=5)
        time: datetime = ts.timestamp(unit="ms")
        bid: float = ts.value("BID")

    with pytest.raises(ts.QueryError, match=r"its tables are 'QUOTE' \(main\)$"):
        ts.decode_row_key(Quote, b"IBM  ", table="CURRENT_QUOTE")


def test_encoded_keys_decode_in_every_table() -> None:
    spec = ts.spec_of(Game)
    encoded = ts.row_key(CORRIE), ts.current_row_key(CORRIE)
    assert ts.decode_row_key(Game, encoded[0], table=spec.table) == FIELDS
    assert ts.decode_row_key(Game, encoded[1], table=spec.current_table)["player"] == "Corrie"
