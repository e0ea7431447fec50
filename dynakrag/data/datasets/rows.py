"""Reading a data file's rows, checking their fields' types, and naming a malformed row."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dynakrag.errors import CorpusError
from dynakrag.files import loads_json


def raw_rows(path: Path) -> list[Any]:
    """Rows of a JSON list or JSON Lines file (row = list position or 0-based line number;
    blank lines are rows holding ``None``)."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise CorpusError(f"cannot read {path}: not UTF-8 text ({exc.reason})") from exc
    except OSError as exc:
        raise CorpusError(f"cannot read {path}: {exc.strerror or exc}") from exc
    if text.lstrip().startswith("["):
        try:
            rows = json.loads(text)
        except json.JSONDecodeError as exc:
            raise CorpusError(
                f"malformed JSON in {path} (line {exc.lineno} column {exc.colno}): {exc.msg}"
            ) from exc
        except RecursionError:  # absurdly deep nesting: malformed, not a crash
            raise CorpusError(f"malformed JSON in {path}: nested too deeply") from None
        if not isinstance(rows, list):
            raise CorpusError(f"{path}: expected a JSON list of rows")
        return rows
    out: list[Any] = []
    for row, line in enumerate(text.splitlines()):
        if not line.strip():
            out.append(None)
            continue
        try:
            out.append(loads_json(line))
        except ValueError as exc:
            raise CorpusError(f"malformed row {row} of {path}: invalid JSON ({exc})") from None
    return out


# What a malformed row can raise while it is parsed.
ROW_ERRORS = (KeyError, TypeError, ValueError, IndexError, AttributeError, ArithmeticError)


def malformed_row(exc: Exception, index: int, path: Path) -> CorpusError:
    """The error naming the file and row that could not be parsed."""
    what = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
    return CorpusError(f"malformed row {index} of {path}: {what}")


def string_field(value: Any, name: str) -> str:
    """``value``, which must be a string (``name`` goes into the error)."""
    if not isinstance(value, str):
        raise TypeError(f"field {name!r} must be a string, got {type(value).__name__}")
    return value


def list_field(value: Any, name: str) -> list[Any]:
    """``value``, which must be a list (``name`` goes into the error)."""
    if not isinstance(value, list):
        raise TypeError(f"field {name!r} must be a list, got {type(value).__name__}")
    return value
