"""llama.cpp's CPU backend variants: which ones are installed, which this CPU can run, load one.

``make setup`` (``scripts/install-llama-cpp.sh``) builds llama-cpp-python with dynamic backends
(``GGML_BACKEND_DL``): the package's own ``libggml-cpu.so`` is the portable AVX2 build, and
variants compiled for newer instruction sets sit beside it as ``libggml-cpu-<variant>.so``. Each
variant exports llama.cpp's ``ggml_backend_score``: 0 when this CPU lacks one of its
instructions, else higher for more of them. :func:`load_cpu_backend` loads the best one (or the
one asked for) before llama.cpp initialises, in the process that runs the model. A static build
(the CPU backend linked in) has nothing to choose: it reports ``"static"``.
"""

from __future__ import annotations

import ctypes
import importlib.util
from dataclasses import dataclass
from pathlib import Path

from dynakrag.errors import ConfigurationError

__all__ = [
    "AUTO",
    "PORTABLE",
    "STATIC",
    "CpuVariant",
    "choose_variant",
    "installed_variants",
    "llama_lib_dir",
    "load_cpu_backend",
]

PORTABLE = "portable"
"""The package's own CPU backend (``libggml-cpu.so``, AVX2): the reference and the fallback."""
STATIC = "static"
"""A llama-cpp-python built without dynamic backends: its CPU backend is linked in."""
AUTO = "auto"


@dataclass(frozen=True)
class CpuVariant:
    """One installed CPU backend library and llama.cpp's score of it on this CPU."""

    name: str
    path: Path
    score: int
    """0: this CPU lacks an instruction the variant uses (it must not be loaded)."""


def llama_lib_dir() -> Path | None:
    """The directory of llama-cpp-python's shared libraries, or None when it is not installed."""
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent / "lib"


def _score(path: Path) -> int:
    # The score function is compiled without the variant's instruction flags, so calling it is
    # safe on any CPU; llama.cpp's own loader does the same.
    library = ctypes.CDLL(str(path))
    score = getattr(library, "ggml_backend_score", None)
    if score is None:
        return 0
    score.restype = ctypes.c_int
    return int(score())


def _load_ggml_base(lib_dir: Path) -> None:
    """Load the ``libggml-base`` every backend links, from the package's own directory.

    A variant compiled apart from the wheel may not say where its ``libggml-base.so.0`` lives
    (no ``$ORIGIN`` run path); once a library of that name is loaded, the dynamic linker reuses it.
    """
    for name in ("libggml-base.so.0", "libggml-base.so"):
        if (lib_dir / name).exists():
            ctypes.CDLL(str(lib_dir / name), mode=ctypes.RTLD_GLOBAL)
            return


def installed_variants(lib_dir: Path | None = None) -> list[CpuVariant]:
    """The CPU backends of a dynamic build, best first (empty for a static build)."""
    lib_dir = lib_dir or llama_lib_dir()
    if lib_dir is None:
        return []
    _load_ggml_base(lib_dir)
    variants = [
        CpuVariant(path.name.removeprefix("libggml-cpu-").removesuffix(".so"), path, _score(path))
        for path in sorted(lib_dir.glob("libggml-cpu-*.so"))
    ]
    portable = lib_dir / "libggml-cpu.so"
    if portable.exists() and not _links_cpu_backend(lib_dir):
        variants.append(CpuVariant(PORTABLE, portable, _score(portable)))
    return sorted(variants, key=lambda variant: -variant.score)


def _links_cpu_backend(lib_dir: Path) -> bool:
    """Whether this is a static build: its CPU backend is a versioned shared library that
    ``libggml.so`` links in; a dynamic build's backends are unversioned modules."""
    return (lib_dir / "libggml-cpu.so.0").exists()


def _loaded_ggml_path(lib_dir: Path) -> Path:
    """The ``libggml`` file libllama loaded (through its soname, ``libggml.so.0``).

    The wheel ships ``libggml.so`` and ``libggml.so.0`` as separate copies: opening the other
    copy would give a second backend registry that llama.cpp never reads.
    """
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        maps = ""
    for line in maps.splitlines():
        path = line.split(maxsplit=5)[-1]
        if Path(path).name.startswith("libggml.so"):
            return Path(path)
    versioned = sorted(lib_dir.glob("libggml.so.*"), key=lambda p: len(p.name))
    return versioned[0] if versioned else lib_dir / "libggml.so"


def _ggml(lib_dir: Path) -> ctypes.CDLL:
    import llama_cpp.llama_cpp  # noqa: F401  (loads libllama and the libggml it links)

    ggml = ctypes.CDLL(str(_loaded_ggml_path(lib_dir)))
    ggml.ggml_backend_reg_count.restype = ctypes.c_size_t
    ggml.ggml_backend_load.restype = ctypes.c_void_p
    ggml.ggml_backend_load.argtypes = [ctypes.c_char_p]
    return ggml


def load_cpu_backend(variant: str = AUTO) -> str:
    """Load a CPU backend into this process before the model is created; returns its name.

    ``auto``: the best-scoring variant this CPU can run, else the portable backend. A named
    variant (``portable``, ``zen4``, ...) is loaded as asked; asking for one this CPU cannot run,
    or one not installed, raises :class:`ConfigurationError`. A static build returns ``static``
    (and refuses a named variant other than ``auto``/``static``).
    """
    lib_dir = llama_lib_dir()
    if lib_dir is None:
        raise ConfigurationError("llama-cpp-python is not installed")
    variants = installed_variants(lib_dir)
    if not variants:
        if variant not in (AUTO, STATIC):
            raise ConfigurationError(
                f"CPU variant {variant!r} asked for, but llama-cpp-python has no dynamic CPU "
                "backends (a static build); reinstall with scripts/install-llama-cpp.sh"
            )
        return STATIC
    chosen = choose_variant(variants, variant)
    ggml = _ggml(lib_dir)
    if ggml.ggml_backend_reg_count() > 0:
        raise ConfigurationError("a llama.cpp backend is already loaded in this process")
    if not ggml.ggml_backend_load(str(chosen.path).encode()):
        raise ConfigurationError(f"llama.cpp could not load its CPU backend {chosen.path}")
    return chosen.name


def choose_variant(variants: list[CpuVariant], requested: str = AUTO) -> CpuVariant:
    """The variant to load: ``requested`` by name, or for ``auto`` the best one this CPU runs."""
    if requested == AUTO:
        runnable = [v for v in variants if v.score > 0]
        if not runnable:
            raise ConfigurationError(
                "no installed llama.cpp CPU backend can run on this CPU (it lacks AVX2): "
                "reinstall llama-cpp-python with CMAKE_ARGS=-DGGML_AVX2=OFF"
            )
        return max(runnable, key=lambda v: v.score)
    by_name = {v.name: v for v in variants}
    if requested not in by_name:
        raise ConfigurationError(
            f"CPU variant {requested!r} is not installed; installed: {', '.join(by_name)}"
        )
    if by_name[requested].score <= 0:
        raise ConfigurationError(
            f"this CPU cannot run llama.cpp's {requested!r} backend (an instruction is missing)"
        )
    return by_name[requested]
