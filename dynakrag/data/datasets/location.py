"""Where the benchmark data is: the data folder, its files, and splits.json's train and eval rows.

Every cache of parsed data is keyed by the (mtime, size) stamps of the files it read, so an edited
file is read again.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from dynakrag.errors import CorpusError

DATA_DIR_ENV = "DYNAKRAG_DATA_DIR"
_REPO_ROOT = Path(__file__).resolve().parents[3]


class DataMissingError(CorpusError):
    """The benchmark data (or one of its files) is not where it was looked for."""


def data_dir(*, must_exist: bool = True) -> Path:
    """The data folder: ``$DYNAKRAG_DATA_DIR`` if set, else ``<repo>/../shared/data``.

    Raises :class:`DataMissingError` when ``must_exist`` and the folder does not exist.
    """
    configured = os.environ.get(DATA_DIR_ENV)
    path = Path(configured).expanduser() if configured else _REPO_ROOT.parent / "shared" / "data"
    if must_exist and not path.is_dir():
        how = f"${DATA_DIR_ENV}" if configured else f"the default (${DATA_DIR_ENV} is unset)"
        raise DataMissingError(f"benchmark data folder not found: {path} (from {how})")
    return path


def require_file(root: Path, relative: str) -> Path:
    """``root / relative``; :class:`DataMissingError` naming both when it is not a file."""
    path = root / relative
    if not path.is_file():
        raise DataMissingError(
            f"benchmark data file {relative!r} not found: looked for {path} "
            f"(data folder from ${DATA_DIR_ENV} or <repo>/../shared/data)"
        )
    return path


FileStamp = tuple[int, int] | None


def file_stamp(path: Path) -> FileStamp:
    """(mtime_ns, size) of a file, None when absent: part of every cache key, so an edited
    file is re-read."""
    try:
        info = path.stat()
    except OSError:
        return None
    return (info.st_mtime_ns, info.st_size)


def split_files(root: Path) -> dict[str, dict[str, Any]]:
    """splits.json's ``files``: each data file's ``train`` and ``eval`` rows."""
    return _splits_cached(str(root), file_stamp(root / "splits.json"))


@lru_cache(maxsize=8)
def _splits_cached(root_str: str, stamp: FileStamp) -> dict[str, dict[str, Any]]:
    path = require_file(Path(root_str), "splits.json")
    try:
        spec = json.loads(path.read_text(encoding="utf-8"))
        files = spec["files"]
        if not isinstance(files, dict):
            raise TypeError("'files' is not an object")
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
        raise CorpusError(f"unreadable splits file {path}: {exc}") from exc
    return files


def row_numbers(spec: Any, n_rows: int, path: Path, split: str) -> list[int]:
    """Expand a splits.json entry (``"all"`` or ``[[start, stop), ...]``) to row numbers."""
    if spec == "all":
        return list(range(n_rows))
    rows: list[int] = []
    try:
        for start, stop in spec:
            if not (isinstance(start, int) and isinstance(stop, int) and 0 <= start <= stop):
                raise ValueError(f"bad range {[start, stop]}")
            if stop > n_rows:
                raise ValueError(f"range {[start, stop]} runs past the file's {n_rows} rows")
            rows.extend(range(start, stop))
    except (TypeError, ValueError) as exc:
        raise CorpusError(f"splits.json entry {split!r} for {path}: {exc}") from exc
    return rows
