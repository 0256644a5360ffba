"""Game scores under two row keys: the schema guide's denormalization example.

The main table answers "How many games of LoL did Corrie win in March?" with
the key ``GAME#PLAYER#DATE`` (``LoL#Corrie#20150301``). An alternate-key
table, kept in step by every save, answers "all LoL games in March" with
``GAME#DATE#PLAYER`` (``LoL#20150301#Corrie``). Each query reads the table
whose key prefix serves it; ``explain()`` says which. Run it with no server::

    python examples/game_scores.py
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone

import tsmodel as ts


@ts.model(table="GAME", family="GAME", current="CURRENT_GAME",
          alternates=[ts.alternate("GAME_BY_DAY", "game", "time", "player")])
class GameScore:
    """One game of one player on one day."""

    game: str = ts.key()
    player: str = ts.key()
    time: datetime = ts.timestamp(format="%Y%m%d")
    win: bool = ts.value("WIN")
    kda: float = ts.value("KDA")


MARCH = datetime(2015, 3, 1, tzinfo=timezone.utc)
APRIL = datetime(2015, 4, 1, tzinfo=timezone.utc)
SCORES = [("LoL", "Corrie", 1, False, 4.25), ("LoL", "Jo", 2, True, 7.00),
          ("LoL", "Sam", 2, True, 7.00), ("LoL", "Corrie", 3, True, 9.50),
          ("Starcraft", "Eriko", 3, True, 6.00), ("LoL", "Corrie", 17, True, 5.75),
          ("LoL", "Sam", 30, False, 2.00)]


def main() -> None:
    db = ts.connect(os.environ.get("TSMODEL_URL"))
    db.create_tables(GameScore)
    db.save_all(GameScore(game=g, player=p, time=MARCH + timedelta(days=d - 1), win=w, kda=k)
                for g, p, d, w, k in SCORES)

    corrie = GameScore.range(MARCH, APRIL, game="LoL", player="Corrie")
    print("How many games of LoL did Corrie win in March?")
    print(corrie.explain())
    print(f"-> {sum(g.win for g in corrie)} of {corrie.count()}\n")

    lol = GameScore.range(MARCH, APRIL, game="LoL")
    print("All LoL games in March:")
    print(lol.explain())
    for g in lol:
        print(f"  {g.time:%Y-%m-%d}  {g.player:<7} win={g.win!s:<5} kda={g.kda:.2f}")

    print("\nEach player's latest game (CURRENT_GAME):")
    for g in GameScore.current():
        print(f"  {g.game:<9} {g.player:<7} {g.time:%Y-%m-%d}")
    db.close()


if __name__ == "__main__":
    main()
