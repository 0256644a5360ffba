"""``ts.decode_row_key`` and ``ts.encode_row_key`` on every table of a model.

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


# -- encode_row_key ---------------------------------------------------------------------


@ts.model(table="BATTERY", family="METRIC", current="CURRENT_BATTERY")
class SaltedBattery:
    kind = ts.constant("BATTERY")
    salt = ts.salt(3, on="time")
    user: str = ts.key()
    time: datetime = ts.timestamp(format="%Y%m%d%H%M%S", millis=True)
    percentage: int = ts.value("PERCENTAGE")


@pytest.mark.parametrize("table", [None, "GAME", "GAME_BY_DAY", "CURRENT_GAME"])
def test_encode_is_what_a_save_writes_and_decode_reverses(table: str | None) -> None:
    key = ts.encode_row_key(Game, FIELDS, table=table)
    written = {None: ts.row_key(CORRIE), "GAME": ts.row_key(CORRIE),
               "GAME_BY_DAY": b"LoL#20150301#Corrie", "CURRENT_GAME": ts.current_row_key(CORRIE)}
    assert key == written[table]
    assert ts.encode_row_key(Game, ts.decode_row_key(Game, key, table=table),
                             table=table) == key


def test_encode_refuses_what_a_save_refuses() -> None:
    late = {**FIELDS, "time": datetime(2015, 3, 1, 23, 59, tzinfo=UTC)}
    with pytest.raises(ts.KeyEncodingError) as saved:
        ts.row_key(Game(**late, win=True, kda=1.0))
    with pytest.raises(ts.KeyEncodingError) as encoded:
        ts.encode_row_key(Game, late)
    assert str(encoded.value) == str(saved.value)
    assert "is not a whole number of days" in str(encoded.value)


def test_encode_takes_any_instant_of_a_bucket() -> None:
    @ts.model(table="DAILY", family="F", layout=ts.cells(), max_rate=1 / 60)
    class Daily:
        host: str = ts.key()
        time: datetime = ts.timestamp(bucket="day")
        cpu: float = ts.value()

    late = datetime(2015, 3, 1, 23, 59, 59, 999000, tzinfo=UTC)
    assert ts.encode_row_key(Daily, {"host": "h", "time": late}) == ts.row_key(
        Daily(host="h", time=late, cpu=0.5))
    assert ts.decode_row_key(Daily, ts.encode_row_key(Daily, {"host": "h", "time": late}))[
        "time"] == MARCH_1


def test_encode_computes_the_salt_and_checks_a_given_one() -> None:
    fields = {"user": "Jo", "time": datetime(2015, 3, 1, 12, 45, 1, 3000, tzinfo=UTC)}
    key = ts.encode_row_key(SaltedBattery, fields)
    assert key == ts.row_key(SaltedBattery(**fields, percentage=50))
    decoded = ts.decode_row_key(SaltedBattery, key)
    assert ts.encode_row_key(SaltedBattery, decoded) == key
    wrong = (decoded["__salt__"] + 1) % 3
    with pytest.raises(ts.KeyEncodingError, match=f"its fields hash to {decoded['__salt__']}"):
        ts.encode_row_key(SaltedBattery, {**decoded, "__salt__": wrong})
    current = ts.encode_row_key(SaltedBattery, {"user": "Jo"}, table="CURRENT_BATTERY")
    assert current == b"BATTERY#Jo"


@pytest.mark.parametrize(("fields", "error", "message"), [
    ({"game": "LoL", "time": MARCH_1}, ts.KeyEncodingError,
     "Game.player: no value given; the row key of table 'GAME' is <game>#<player>#<time>"),
    ({**FIELDS, "win": True}, ts.QueryError,
     "Game has no key field 'win' (key fields: game, player, time)"),
    ({**FIELDS, "player": "Cor#rie"}, ts.KeyEncodingError, "Game.player: 'Cor#rie' contains"),
    ({**FIELDS, "player": 7}, ts.KeyTypeError, "Game.player: expected str, got int 7"),
    ({**FIELDS, "time": datetime(2015, 3, 1)}, ts.ValidationError,
     "Game.time: naive datetime 2015-03-01T00:00:00 refused"),
])
def test_encode_errors_name_the_model_field_and_value(fields: dict[str, object],
                                                      error: type[Exception],
                                                      message: str) -> None:
    with pytest.raises(error) as info:
        ts.encode_row_key(Game, fields)
    assert str(info.value).startswith(message), info.value


def test_the_current_value_table_needs_no_time() -> None:
    assert ts.encode_row_key(Game, {"game": "LoL", "player": "Corrie"},
                             table="CURRENT_GAME") == b"LoL#Corrie"
    with pytest.raises(ts.KeyEncodingError, match=r"^Game\.time: no value given"):
        ts.encode_row_key(Game, {"game": "LoL", "player": "Corrie"}, table="GAME_BY_DAY")
