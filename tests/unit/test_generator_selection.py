"""Choosing the embedded generator (``embedded_model``): one assembly and server code path for
every model, each model with its own files, cache identity and server registry."""

from __future__ import annotations

import dataclasses
import hashlib
import os
from pathlib import Path
from typing import Any

import pytest

from dynakrag.configuration import BUILD_TIME_FIELDS, Configuration
from dynakrag.errors import ConfigurationError, ModelUnavailableError
from dynakrag.llm import embedded, embedded_models, factory
from dynakrag.llm.embedded import embedded_available
from dynakrag.llm.embedded_models import DEFAULT_EMBEDDED_MODEL, EMBEDDED_MODELS, embedded_model
from dynakrag.llm.model_assembly import assemble_model, model_path
from dynakrag.llm.shared_server import SharedServer

SMALL = "qwen2.5-coder-0.5b"


@pytest.fixture(autouse=True)
def _no_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("DYNAKRAG_") or name == "OPENAI_API_KEY":
            monkeypatch.delenv(name)


def test_the_setting_selects_a_known_model_and_is_fixed_at_build_time() -> None:
    assert Configuration().embedded_model == DEFAULT_EMBEDDED_MODEL
    assert Configuration(embedded_model=SMALL).embedded_model == SMALL
    assert "embedded_model" in BUILD_TIME_FIELDS
    with pytest.raises(ConfigurationError, match="embedded_model"):
        Configuration.from_env(embedded_model="gpt-2")
    with pytest.raises(ModelUnavailableError, match="unknown embedded model"):
        embedded_model("gpt-2")
    assert embedded_model(None) is EMBEDDED_MODELS[DEFAULT_EMBEDDED_MODEL]


def test_each_model_has_its_own_file_identity_and_description(tmp_path: Path) -> None:
    big, small = Configuration(), Configuration(embedded_model=SMALL)
    assert model_path(tmp_path, SMALL) != model_path(tmp_path)
    assert model_path(tmp_path).name == embedded_models.MODEL_FILENAME
    assert factory.config_identity(big) != factory.config_identity(small)
    assert EMBEDDED_MODELS[SMALL].sha256 in factory.config_identity(small)
    assert "0.5B" in factory.describe_backend(small)
    assert "1.5B" in factory.describe_backend(big)
    # Servers of two models keep separate registries, so they can run side by side.
    shared = [SharedServer(tmp_path, spec=spec) for spec in (None, SMALL)]
    assert shared[0].registry_path != shared[1].registry_path
    assert shared[0].identity != shared[1].identity


def test_the_configured_model_reaches_the_server(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    def chat_model(cache_dir: Any = None, **kwargs: Any) -> str:
        seen.update(kwargs)
        return "model"

    monkeypatch.setattr(embedded, "embedded_chat_model", chat_model)
    assert factory.chat_model_from_config(Configuration(embedded_model=SMALL)) == "model"
    assert seen["spec"] == SMALL


def test_a_missing_small_model_names_its_packages(tmp_path: Path) -> None:
    spec = embedded_model(SMALL)
    missing = dataclasses.replace(spec, part_package_template="dynakrag_none_{}")
    with pytest.raises(ModelUnavailableError, match=r"pandas|embedded-0\.5b|dynakrag-none"):
        assemble_model(tmp_path, spec=missing, progress=False)
    assert embedded_available(missing) is False


def test_assembly_writes_the_requested_model(tmp_path: Path) -> None:
    parts = tmp_path / "parts"
    parts.mkdir()
    data = b"".join(bytes([n]) * 100 for n in range(1, 4))
    for n in range(1, 4):
        (parts / f"part0{n}.bin").write_bytes(bytes([n]) * 100)
    spec = embedded_model(SMALL)
    small = dataclasses.replace(spec, sha256=hashlib.sha256(data).hexdigest())
    path = assemble_model(
        tmp_path / "cache",
        parts=sorted(parts.iterdir()),
        expected_size=len(data),
        spec=small,
        progress=False,
    )
    assert path == model_path(tmp_path / "cache", small) and path.read_bytes() == data


@pytest.mark.slow
@pytest.mark.skipif(
    not embedded_available(SMALL),
    reason="the 0.5B model's packages are not installed (pip install 'dynakrag[embedded-small]')",
)
def test_the_installed_small_model_assembles_and_verifies(tmp_path: Path) -> None:
    path = assemble_model(tmp_path, spec=SMALL, progress=False)
    assert path.stat().st_size == EMBEDDED_MODELS[SMALL].size
    assert path.read_bytes()[:4] == b"GGUF"
