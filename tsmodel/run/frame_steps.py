"""The steps of one ``save_frame()``, shared by the sync and the async connection.

`frame_steps()` is the whole sequence but the calls of ``save_all``: a
generator that yields each chunk's save (the entities, the progress hook
and the ``validate_first`` to give ``save_all``), takes its `WriteResult`
back (``send``) or the `ValidationError` it raised (``throw``), and returns
the frame's `FrameResult` (counts, and the rows not written: nothing kept
per row written). The connections only make the calls, with or without
``await``.

Each chunk is saved as ``save_all(validate_first=True)`` saves: its rows
checked, then written as one plan. A frame validated first (every row
checked before the first write, column-wise where the model allows:
`tsmodel.io.frames`) checks its rows again there, and still saves faster
than a streamed save of the chunk (``validate_first=False``, which
encodes each batch while the batches before it are on the way): about
1.7x on the emulator (docs/benchmarks.md, a1). A frame saved chunk by
chunk checks each chunk before its first write.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Iterator
from typing import Any

from tsmodel import errors
from tsmodel.io.frames import Chunk, FrameSave
from tsmodel.plan.results import FrameResult, WriteResult
from tsmodel.run.progress import Progress, WriteProgress

__all__ = ["ChunkSave", "FrameResult", "frame_steps"]

#: One chunk's save: its entities, the ``progress=`` hook and ``validate_first`` of
#: its ``save_all``.
ChunkSave = tuple[Iterable[Any], Callable[[int, int | None], None], bool]


def _refusing(save: FrameSave, chunks: Iterator[Chunk]) -> Iterator[Chunk]:
    """``chunks``, a row refused as its chunk is read raised as `FrameSave.refused`."""
    try:
        yield from chunks
    except errors.ValidationError as exc:
        raise save.refused(exc) from None


def frame_steps(save: FrameSave, progress: Progress,
                raise_on_failure: bool) -> Generator[ChunkSave, WriteResult, FrameResult]:
    """The save of ``save``'s frame, a chunk's ``save_all`` per step (see the module).

    Raises:
        ValidationError: a row cannot be stored (its ``row`` set; ``result``
            the chunks written before, when validated chunk by chunk).
        SaveError: with ``raise_on_failure``, when some writes failed.
    """
    meter = WriteProgress(progress, "save")
    try:
        save.validate()
        advance = meter.start(save.total)
        for chunk in _refusing(save, save.chunks()):
            counted = [0]  # the chunk's entities answered so far

            def batch_done(done: int, total: int | None, counted: list[int] = counted) -> None:
                advance(done - counted[0])
                counted[0] = done

            try:
                done = yield save.entities(chunk), batch_done, True
            except errors.ValidationError as exc:
                raise save.refused(exc) from None
            save.saved(chunk, done)
            del done  # the chunk's results: let go before the next chunk is made
    finally:
        meter.close()
    result = save.result()
    if raise_on_failure:
        result.raise_for_failures()
    return result
