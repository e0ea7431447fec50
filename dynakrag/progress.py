"""Progress of long work, shaped for where it goes.

On a terminal: tqdm's live bar. Into a file or a pipe (``nohup ... > log``): one plain line
every ``LINE_EVERY_PERCENT`` percent (or every ``LINE_EVERY_S`` seconds when the total is
unknown), each with the count, rate and ETA, instead of hundreds of carriage-return frames.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import IO, Any, TypeVar

from tqdm import tqdm

T = TypeVar("T")

LINE_EVERY_PERCENT = 5
LINE_EVERY_S = 30.0


class _Lines:
    """A file for tqdm that turns each carriage-return frame into one line."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream

    def write(self, text: str) -> None:
        line = text.replace("\r", "").strip()
        if line:
            self.stream.write(line + "\n")

    def flush(self) -> None:
        self.stream.flush()


def _is_terminal(stream: IO[str]) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def progress_bar(
    iterable: Iterable[T] | None = None,
    *,
    total: float | None = None,
    file: IO[str] | None = None,
    **options: Any,
) -> tqdm:
    """``tqdm(iterable, total=..., **options)`` on a terminal; periodic plain lines elsewhere.

    ``file`` defaults to stderr. Options are tqdm's (``desc``, ``unit``, ``disable``, ...).
    """
    stream = file if file is not None else sys.stderr
    if total is None and iterable is not None and hasattr(iterable, "__len__"):
        total = len(iterable)  # type: ignore[arg-type]
    if _is_terminal(stream):
        return tqdm(iterable, total=total, file=stream, **options)
    if total:
        # Fixed iteration steps (dynamic miniters off), so a line lands every few percent.
        options.setdefault("miniters", max(1, int(total * LINE_EVERY_PERCENT / 100)))
        options.setdefault("mininterval", 0.0)
    else:
        options.setdefault("mininterval", LINE_EVERY_S)
    options.setdefault("ascii", True)
    options.setdefault("ncols", 100)
    return tqdm(iterable, total=total, file=_Lines(stream), dynamic_ncols=False, **options)
