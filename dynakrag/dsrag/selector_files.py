"""The GS selector's files: weights and metadata, written and checked.

``<name>.npz`` holds the weights (float32 arrays named by the module's ``state_dict`` keys),
written and read by :func:`dynakrag.files.write_arrays` / :func:`~dynakrag.files.read_arrays`:
a zip of ``.npy`` arrays loaded with ``allow_pickle=False`` after every header was checked, so
loading never runs code from the file. ``<name>.json`` beside it holds the metadata: format,
schema version, architecture, encoder, temperature, training settings, training-data SHA-256,
metrics and the SHA-256 of the ``.npz``, which is checked before the weights are opened.
Anything else is refused with :class:`SelectorFileError`.

:meth:`~dynakrag.dsrag.selector.GraphSelector.save` and
:meth:`~dynakrag.dsrag.selector.GraphSelector.load` write and read them through this module.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from dynakrag.dsrag.selector_model import GraphSelectionModel, GSArchitecture
from dynakrag.files import (
    ModelFileError,
    read_arrays,
    read_json,
    sha256_file,
    write_arrays,
    write_json,
)

__all__ = [
    "FILE_FORMAT",
    "SCHEMA_VERSION",
    "SelectorFileError",
    "StoredSelector",
    "read_selector",
    "write_selector_metadata",
    "write_selector_weights",
]

FILE_FORMAT = "dynakrag-gs-selector"
SCHEMA_VERSION = 1
"""Version of the selector file layout (metadata keys and array names)."""
MAX_METADATA_BYTES = 1 << 20
_SHA256 = re.compile(r"[0-9a-f]{64}")
_WEIGHTS_FORMAT = f"{FILE_FORMAT}-weights"


class SelectorFileError(ModelFileError):
    """A file given as a GS selector is not a valid dynakrag selector file."""

    kind = "selector file"


def write_selector_weights(weights: Path, model: GraphSelectionModel) -> None:
    """Write the module's weights to ``weights`` (a ``.npz``) as float32 arrays."""
    arrays = {
        name: tensor.detach().cpu().numpy().astype(np.float32)
        for name, tensor in model.state_dict().items()
    }
    write_arrays(weights, arrays, {"format": _WEIGHTS_FORMAT, "schema": SCHEMA_VERSION})


def write_selector_metadata(weights: Path, metadata: Mapping[str, Any]) -> None:
    """Write ``metadata`` beside ``weights`` (``<name>.json``), with the weights' file name and
    SHA-256."""
    meta = {
        **metadata,
        "weights_file": weights.name,
        "weights_sha256": sha256_file(weights),
    }
    write_json(weights.with_suffix(".json"), meta, sort_keys=True, allow_nan=False)


@dataclass(frozen=True)
class StoredSelector:
    """A selector file's contents, checked: the module with its weights (in eval mode) and what
    its metadata records."""

    model: GraphSelectionModel
    encoder_name: str
    """The text encoder the selector was trained with."""
    temperature: float
    training: dict[str, int | float]
    """The training settings the metadata records in a valid form (the others are left out)."""
    training_data_sha256: str
    metrics: dict[str, Any]
    info: dict[str, Any]


def read_selector(path: str | os.PathLike[str]) -> StoredSelector:
    """Read a selector file (``path``: its ``.npz`` or ``.json``).

    Raises :class:`SelectorFileError` for anything that is not a valid selector file (wrong
    format or schema, hash mismatch, a pickle, garbage, missing or misshapen arrays).
    """
    given = Path(path)
    weights = given.with_suffix(".npz") if given.suffix == ".json" else given
    meta_path = weights.with_suffix(".json")
    meta = _read_metadata(given, meta_path)

    def refuse(reason: str) -> SelectorFileError:
        return SelectorFileError(given, reason)

    try:
        architecture = GSArchitecture(**_architecture_fields(meta.get("architecture")))
    except (TypeError, ValueError) as exc:
        raise refuse(f"bad architecture in its metadata ({exc})") from None
    encoder = meta.get("encoder")
    if not isinstance(encoder, dict) or not isinstance(encoder.get("name"), str):
        raise refuse("its metadata does not name the text encoder")
    temperature = meta.get("temperature")
    if not _positive_number(temperature):
        raise refuse("temperature must be a positive number")
    digest = meta.get("training_data_sha256")
    if not isinstance(digest, str) or not (digest == "" or _SHA256.fullmatch(digest)):
        raise refuse("training_data_sha256 is not a SHA-256 hex digest")
    _check_weights_hash(given, weights, meta)
    try:
        arrays, weights_meta = read_arrays(weights)
    except ModelFileError as exc:
        raise refuse(f"its weights {weights.name}: {exc.reason}") from None
    if weights_meta.get("format") != _WEIGHTS_FORMAT:
        raise refuse(f"{weights.name} does not hold selector weights")
    torch.manual_seed(0)  # the module's random init is overwritten below
    model = GraphSelectionModel(architecture)
    model.load_state_dict(_state_dict(given, model, arrays))
    model.eval()
    metrics, info = meta.get("metrics"), meta.get("info")
    return StoredSelector(
        model,
        encoder["name"],
        float(temperature),
        _training_settings(meta.get("training")),
        digest,
        metrics if isinstance(metrics, dict) else {},
        info if isinstance(info, dict) else {},
    )


def _training_settings(training: Any) -> dict[str, int | float]:
    settings: dict[str, int | float] = {}
    if isinstance(training, dict):
        for key in ("epochs", "batch_size", "random_state"):
            if isinstance(training.get(key), int) and not isinstance(training[key], bool):
                settings[key] = training[key]
        for key in ("learning_rate", "weight_decay"):
            if _positive_number(training.get(key)) or training.get(key) == 0:
                settings[key] = float(training[key])
    return settings


def _architecture_fields(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TypeError("architecture is not an object")
    names = {"dim", "heads", "layers", "mlp_hidden", "dropout", "directed"}
    if set(value) != names:
        raise TypeError(f"architecture keys must be {sorted(names)}")
    return dict(value)


def _positive_number(value: Any) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )


def _read_metadata(given: Path, meta_path: Path) -> dict[str, Any]:
    try:
        meta = read_json(meta_path, max_bytes=MAX_METADATA_BYTES)
    except OSError as exc:
        raise SelectorFileError(
            given, f"cannot read its metadata {meta_path.name} ({exc.strerror or exc})"
        ) from None
    except ValueError as exc:
        raise SelectorFileError(
            given, f"its metadata {meta_path.name} is not JSON ({exc})"
        ) from None
    if not isinstance(meta, dict):
        raise SelectorFileError(given, "its metadata is not a JSON object")
    if meta.get("format") != FILE_FORMAT:
        raise SelectorFileError(
            given, f"its metadata format is {meta.get('format')!r}, not {FILE_FORMAT!r}"
        )
    if meta.get("schema_version") != SCHEMA_VERSION:
        raise SelectorFileError(
            given,
            f"schema version {meta.get('schema_version')!r}; this dynakrag reads version "
            f"{SCHEMA_VERSION} (retrain the selector)",
        )
    return meta


def _check_weights_hash(given: Path, weights: Path, meta: Mapping[str, Any]) -> None:
    """Compare the ``.npz``'s SHA-256 with the metadata's before the weights are opened."""
    expected = meta.get("weights_sha256")
    if not isinstance(expected, str) or not _SHA256.fullmatch(expected):
        raise SelectorFileError(given, "its metadata has no valid weights_sha256")
    try:
        digest = sha256_file(weights)
    except OSError as exc:
        raise SelectorFileError(
            given, f"cannot read its weights {weights.name} ({exc.strerror or exc})"
        ) from None
    if digest != expected:
        raise SelectorFileError(
            given,
            f"the SHA-256 of {weights.name} is {digest}, its metadata says "
            f"{expected} (the weights were altered or belong to another model)",
        )


def _state_dict(
    given: Path, model: GraphSelectionModel, arrays: Mapping[str, np.ndarray]
) -> dict[str, torch.Tensor]:
    """The stored arrays as a state dict, refusing missing, extra, misshapen or non-finite
    ones."""
    expected = model.state_dict()
    if set(arrays) != set(expected):
        odd = sorted(set(arrays) ^ set(expected))
        raise SelectorFileError(given, f"unexpected or missing arrays: {', '.join(odd)}")
    out: dict[str, torch.Tensor] = {}
    for name, reference in expected.items():
        array = arrays[name]
        if tuple(array.shape) != tuple(reference.shape):
            raise SelectorFileError(
                given, f"array {name} has shape {array.shape}, expected {tuple(reference.shape)}"
            )
        if not np.all(np.isfinite(array)):
            raise SelectorFileError(given, f"array {name} holds non-finite numbers")
        out[name] = torch.from_numpy(np.ascontiguousarray(array, dtype=np.float32))
    return out
