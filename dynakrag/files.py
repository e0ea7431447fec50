"""Reading and writing dynakrag's own files: one place for every persistence rule.

A leaf module (standard library, numpy and :mod:`dynakrag.errors` only), used by every package
that persists something:

* **Atomic writes** (:func:`atomic_writer`, :func:`write_bytes_atomic`,
  :func:`write_text_atomic`, :func:`write_json`): the data goes to a private temporary file
  in the target's folder, which is renamed over the target, so a crash never leaves a
  half-written file and a reader sees the old or the new file, never a mix.
* **Hashes**: :func:`sha256_file`, :func:`sha256_bytes` and :func:`records_sha256` (the
  SHA-256 of records as canonical JSON lines, the "training data hash" of policies and
  selectors).
* **JSON**: :func:`read_json` (bounded, with one error type for "not readable JSON"),
  :func:`json_safe` (NaN/inf as null, numpy scalars as numbers), :func:`write_jsonl` and
  :func:`read_jsonl`.
* **Numeric array archives** (``.npz``): :func:`write_arrays` writes ``np.savez``'s layout (an
  uncompressed zip of ``.npy`` arrays) with fixed zip timestamps and sorted entries, so the
  same arrays always give the same bytes, plus the JSON metadata as a ``uint8`` array named
  ``__meta__``. :func:`read_arrays` never runs code from the file: it checks the zip magic
  before anything else (a pickle is refused unopened), bounds the archive's size, reads every
  ``.npy`` header first (plain integer / float dtypes only, declared shapes that fit the stored
  bytes), then loads with ``np.load(path, allow_pickle=False)``. Anything else raises
  :class:`ModelFileError`.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import math
import os
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any, TypeAlias

import numpy as np

from dynakrag.errors import ConfigurationError, UserInputError, one_line

__all__ = [
    "MAX_ARCHIVE_BYTES",
    "META_KEY",
    "JsonObject",
    "JsonValue",
    "ModelFileError",
    "atomic_writer",
    "canonical_json_line",
    "json_safe",
    "jsonl_line",
    "one_line",
    "read_arrays",
    "read_json",
    "read_jsonl",
    "records_sha256",
    "sha256_bytes",
    "sha256_file",
    "write_arrays",
    "write_bytes_atomic",
    "write_json",
    "write_jsonl",
    "write_text_atomic",
]

PathLike = str | os.PathLike[str]

META_KEY = "__meta__"
"""Name of the ``uint8`` array holding an archive's UTF-8 JSON metadata."""
MAX_ARCHIVE_BYTES = 1 << 30
"""Largest uncompressed array archive accepted (1 GiB)."""
_ZIP_MAGIC = b"PK\x03\x04"
_FIXED_TIME = (1980, 1, 1, 0, 0, 0)
_BLOCK = 1 << 20


class ModelFileError(ConfigurationError):
    """A file given as a model (a policy, selector weights) is not one dynakrag wrote.

    Subclasses name the kind of file in ``kind`` (the message reads "<path> is not a dynakrag
    <kind>: <reason>"); ``reason`` alone is kept for callers that re-word it.
    """

    kind = "model file"

    def __init__(self, path: PathLike, reason: str) -> None:
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{path} is not a dynakrag {self.kind}: {reason}")


# --------------------------------------------------------------------------------------------
# Atomic writes


@contextlib.contextmanager
def atomic_writer(path: PathLike, *, durable: bool = False) -> Iterator[IO[bytes]]:
    """A binary handle whose content replaces ``path`` when the block ends without error.

    The parent folder is created. On an error raised in the block (or a ``BaseException`` such
    as ``KeyboardInterrupt``) the temporary file is removed and ``path`` is left as it was, so
    a check of the written data can refuse it by raising. ``durable`` syncs the data to disk
    before the rename (for large files whose loss after a power cut would be costly).
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    # A unique name per write: two processes saving the same file never share a temporary.
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes it private; what we write are ordinary files
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_bytes_atomic(path: PathLike, data: bytes) -> Path:
    """Replace ``path`` with ``data`` atomically (see :func:`atomic_writer`)."""
    with atomic_writer(path) as handle:
        handle.write(data)
    return Path(path)


def write_text_atomic(path: PathLike, text: str) -> Path:
    """Replace ``path`` with ``text`` (UTF-8) atomically."""
    return write_bytes_atomic(path, text.encode("utf-8"))


def write_json(
    path: PathLike,
    data: Any,
    *,
    indent: int | None = 2,
    sort_keys: bool = False,
    ensure_ascii: bool = True,
    allow_nan: bool = True,
    default: Callable[[Any], Any] | None = None,
) -> Path:
    """Write ``data`` as JSON plus a final newline, atomically (options as ``json.dumps``)."""
    text = json.dumps(
        data,
        indent=indent,
        sort_keys=sort_keys,
        ensure_ascii=ensure_ascii,
        allow_nan=allow_nan,
        default=default,
    )
    return write_text_atomic(path, text + "\n")


# --------------------------------------------------------------------------------------------
# Hashes


def sha256_bytes(data: bytes) -> str:
    """Hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: PathLike, *, on_block: Callable[[int], object] | None = None) -> str:
    """Hex SHA-256 of a file's content, read in blocks (``OSError`` when unreadable);
    ``on_block`` is told each block's size (a progress bar's ``update``)."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for block in iter(lambda: handle.read(_BLOCK), b""):
            digest.update(block)
            if on_block is not None:
                on_block(len(block))
    return digest.hexdigest()


def canonical_json_line(record: Mapping[str, Any]) -> str:
    """``record`` as one JSON line with sorted keys and no spaces (NaN refused)."""
    return json.dumps(record, sort_keys=True, separators=(",", ":"), allow_nan=False)


def records_sha256(records: Iterable[Mapping[str, Any]]) -> str:
    """SHA-256 of records as canonical JSON lines (each followed by ``\\n``), in the given
    order: the training-data hash stored in policy and selector files."""
    digest = hashlib.sha256()
    for record in records:
        digest.update(canonical_json_line(record).encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()


# --------------------------------------------------------------------------------------------
# JSON and JSONL


def read_json(path: PathLike, *, max_bytes: int | None = None) -> Any:
    """The JSON value in ``path``.

    Raises ``OSError`` when the file cannot be read and ``ValueError`` (with a short reason:
    not UTF-8, invalid JSON, nested too deeply, larger than ``max_bytes``) when it is not
    JSON; callers turn both into their own error naming the file.
    """
    with Path(path).open("rb") as handle:
        raw = handle.read() if max_bytes is None else handle.read(max_bytes + 1)
    if max_bytes is not None and len(raw) > max_bytes:
        raise ValueError(f"larger than {max_bytes} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("not UTF-8") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"invalid JSON: {exc}") from None
    except RecursionError:
        raise ValueError("nested too deeply") from None


def loads_json(text: str) -> Any:
    """The JSON value in ``text``; ``ValueError`` with a short reason (the parser's message, or
    "nested too deeply") when it is not JSON, for the caller's error naming the source."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(exc.msg) from None
    except RecursionError:  # absurdly deep nesting: malformed, not a crash
        raise ValueError("nested too deeply") from None


JsonValue: TypeAlias = "str | int | float | bool | list[JsonValue] | dict[str, JsonValue] | None"
"""Any value JSON holds, as :func:`json.loads` gives it."""
JsonObject: TypeAlias = "dict[str, JsonValue]"
"""A JSON object as :func:`json.loads` gives it: for data whose shape is not fixed yet (a
model's reply before it is validated)."""


def json_safe(value: Any) -> Any:
    """``value`` made JSON-ready: NaN/inf floats as None, numpy scalars as Python numbers,
    tuples as lists, mapping keys as strings."""
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def jsonl_line(record: Mapping[str, Any]) -> str:
    """``record`` as one JSONL line (no newline), as :func:`write_jsonl` writes it."""
    return json.dumps(record, ensure_ascii=False, allow_nan=False)


def write_jsonl(
    records: Iterable[Mapping[str, Any]], path: PathLike, *, append: bool = False
) -> int:
    """Write records one JSON object a line (streaming, flushed per record, so a long
    collection can be followed and a crash keeps what was written); the count. ``append``
    adds them after the lines already in ``path`` (a resumed collection)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with target.open("a" if append else "w", encoding="utf-8") as handle:
        for record in records:
            handle.write(jsonl_line(record) + "\n")
            handle.flush()
            count += 1
    return count


def read_jsonl(
    paths: PathLike | Iterable[PathLike],
    *,
    schema: str | None = None,
    what: str = "JSONL",
    check: Callable[[dict[str, Any]], object] | None = None,
) -> list[dict[str, Any]]:
    """The JSON objects of one or more JSONL files (``.gz``: gzip-compressed), in order (blank
    lines skipped).

    With ``schema``, every object must carry ``"schema": schema``; with ``check`` (such as a
    pydantic model's ``model_validate``), every object must pass it. Raises
    :class:`~dynakrag.errors.UserInputError` naming the file (and line) for an unreadable
    file, invalid JSON or a line that is not such an object (with what ``check`` found wrong);
    ``what`` names the files in the "cannot read" message.
    """
    if isinstance(paths, str | os.PathLike):
        paths = [paths]
    records: list[dict[str, Any]] = []
    for path in paths:
        source = Path(path)
        try:
            if source.suffix == ".gz":  # compressed records (the shipped policy's)
                lines = gzip.decompress(source.read_bytes()).decode("utf-8").splitlines()
            else:
                lines = source.read_text(encoding="utf-8").splitlines()
        except (OSError, EOFError, UnicodeDecodeError) as exc:
            raise UserInputError(f"cannot read {what} {source}: {exc}") from None
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                record = loads_json(line)
            except ValueError as exc:
                raise UserInputError(f"{source} line {number}: invalid JSON ({exc})") from None
            if schema is not None and (
                not isinstance(record, dict) or record.get("schema") != schema
            ):
                raise UserInputError(f"{source} line {number}: not a {schema} record")
            if not isinstance(record, dict):
                raise UserInputError(f"{source} line {number}: not a JSON object")
            if check is not None:
                try:
                    check(record)
                except ValueError as exc:  # pydantic's ValidationError is one
                    raise UserInputError(f"{source} line {number}: {one_line(exc)}") from None
            records.append(record)
    return records


# --------------------------------------------------------------------------------------------
# Numeric array archives


def write_arrays(path: PathLike, arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any]) -> Path:
    """Write ``arrays`` and ``meta`` (JSON) as one ``.npz``, atomically and reproducibly.

    The archive is what ``np.savez_compressed`` writes (a deflated zip of ``.npy`` files,
    readable by ``np.load``) but with fixed timestamps and sorted entries, and object arrays
    refused. Deflate, because a forest's arrays shrink about 5x (the shipped policy: 16.7 to
    3.3 MB), and zlib at its default level writes the same bytes for the same arrays.
    """
    entries = dict(arrays)
    if META_KEY in entries:
        raise ValueError(f"{META_KEY!r} is reserved for the metadata")
    text = json.dumps(meta, sort_keys=True, ensure_ascii=True, allow_nan=False)
    entries[META_KEY] = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
    for name, array in entries.items():
        if np.asarray(array).dtype.kind not in "iuf":
            raise ValueError(f"array {name!r} has dtype {np.asarray(array).dtype}: numbers only")
    with atomic_writer(path) as handle, zipfile.ZipFile(handle, "w", allowZip64=True) as zf:
        for name in sorted(entries):
            info = zipfile.ZipInfo(f"{name}.npy", date_time=_FIXED_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            with zf.open(info, "w", force_zip64=True) as member:
                np.lib.format.write_array(
                    member, np.ascontiguousarray(entries[name]), allow_pickle=False
                )
    return Path(path)


def read_arrays(path: PathLike) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The arrays and metadata of a file written by :func:`write_arrays`.

    Raises :class:`ModelFileError` for anything else, without unpickling or executing
    anything from the file.
    """
    source = Path(path)
    try:
        with source.open("rb") as handle:
            magic = handle.read(len(_ZIP_MAGIC))
    except OSError as exc:
        raise ModelFileError(path, f"cannot read it ({exc.strerror or exc})") from None
    if magic != _ZIP_MAGIC:
        raise ModelFileError(path, "not an .npz archive (it was not opened any further)")
    try:
        with zipfile.ZipFile(source) as zf:
            infos = zf.infolist()
            if sum(info.file_size for info in infos) > MAX_ARCHIVE_BYTES:
                raise ModelFileError(path, f"its arrays exceed {MAX_ARCHIVE_BYTES} bytes")
            names = [info.filename for info in infos]
            if (
                not names
                or any(not n.endswith(".npy") for n in names)
                or len(set(names)) < len(names)
            ):
                raise ModelFileError(path, "the archive must hold distinct .npy arrays only")
            for info in infos:
                reason = _header_problem(zf, info)
                if reason:
                    raise ModelFileError(path, f"{info.filename}: {reason}")
        with np.load(source, allow_pickle=False) as data:
            arrays = {name: np.asarray(data[name]) for name in data.files}
    except ModelFileError:
        raise
    except (ValueError, OSError, EOFError, KeyError, MemoryError, zipfile.BadZipFile) as exc:
        raise ModelFileError(path, f"unreadable archive ({type(exc).__name__}: {exc})") from None
    for name, array in arrays.items():
        if array.dtype.kind not in "iuf":
            raise ModelFileError(path, f"array {name!r} has dtype {array.dtype}")
    raw = arrays.pop(META_KEY, None)
    if raw is None or raw.dtype != np.uint8 or raw.ndim != 1:
        raise ModelFileError(path, f"no {META_KEY} metadata array")
    try:
        meta = json.loads(raw.tobytes().decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ModelFileError(path, f"unreadable metadata ({type(exc).__name__})") from None
    if not isinstance(meta, dict):
        raise ModelFileError(path, "the metadata is not a JSON object")
    return arrays, meta


def _header_problem(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> str | None:
    """Why a member's ``.npy`` header is unacceptable (read before any array data), or None.

    Only plain numeric dtypes are accepted, and the declared shape must fit in the member, so
    neither a pickled object array nor a huge declared shape is ever loaded.
    """
    with zf.open(info) as member:
        version = np.lib.format.read_magic(member)
        if version == (1, 0):
            shape, _, dtype = np.lib.format.read_array_header_1_0(member)
        elif version == (2, 0):
            shape, _, dtype = np.lib.format.read_array_header_2_0(member)
        else:
            return f"unsupported .npy version {version}"
    if dtype.hasobject or dtype.kind not in "iuf" or dtype.fields is not None:
        return f"dtype {dtype} is not a plain number type"
    if math.prod(shape) * dtype.itemsize > info.file_size:
        return f"declared shape {shape} is larger than the stored data"
    return None
