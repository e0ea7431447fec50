"""Choosing llama.cpp's CPU backend variant at run time (dynakrag.llm.cpu_backends)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dynakrag.errors import ConfigurationError
from dynakrag.llm import cpu_backends
from dynakrag.llm.cpu_backends import CpuVariant, choose_variant, installed_variants

needs_cc = pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")


def _fake_backend(path: Path, score: int) -> None:
    """A shared library exporting llama.cpp's ``ggml_backend_score`` returning ``score``."""
    source = path.with_suffix(".c")
    source.write_text(f"int ggml_backend_score(void) {{ return {score}; }}\n", encoding="utf-8")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(path), str(source)], check=True)


@needs_cc
def test_installed_variants_are_scored_and_ordered_best_first(tmp_path: Path) -> None:
    _fake_backend(tmp_path / "libggml-cpu.so", 3)  # the portable backend of a dynamic build
    _fake_backend(tmp_path / "libggml-cpu-zen4.so", 0)  # this "CPU" lacks its instructions
    _fake_backend(tmp_path / "libggml-cpu-haswell.so", 7)
    variants = installed_variants(tmp_path)
    assert [(v.name, v.score) for v in variants] == [("haswell", 7), ("portable", 3), ("zen4", 0)]
    assert choose_variant(variants).name == "haswell"
    assert choose_variant(variants, "portable").name == "portable"


@needs_cc
def test_a_variant_without_a_run_path_finds_the_packages_ggml_base(tmp_path: Path) -> None:
    # A variant compiled apart from the wheel links libggml-base.so.0 but carries no $ORIGIN run
    # path: scoring it must not depend on the dynamic linker finding that library on its own.
    base_source = tmp_path / "base.c"
    base_source.write_text("int ggml_base_answer(void) { return 5; }\n", encoding="utf-8")
    subprocess.run(
        [
            "cc",
            "-shared",
            "-fPIC",
            "-Wl,-soname,libggml-base.so.0",
            "-o",
            str(tmp_path / "libggml-base.so.0"),
            str(base_source),
        ],
        check=True,
    )
    variant_source = tmp_path / "variant.c"
    variant_source.write_text(
        "int ggml_base_answer(void);\n"
        "int ggml_backend_score(void) { return ggml_base_answer(); }\n",
        encoding="utf-8",
    )
    subprocess.run(
        [
            "cc",
            "-shared",
            "-fPIC",
            "-o",
            str(tmp_path / "libggml-cpu-zen4.so"),
            str(variant_source),
            f"-L{tmp_path}",
            "-l:libggml-base.so.0",
        ],
        check=True,
    )
    code = (
        "import sys\nfrom pathlib import Path\n"
        "from dynakrag.llm.cpu_backends import installed_variants\n"
        "print([(v.name, v.score) for v in installed_variants(Path(sys.argv[1]))])\n"
    )
    done = subprocess.run(  # a fresh process: nothing of ggml loaded yet
        [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[('zen4', 5)]"


@needs_cc
def test_a_static_build_has_no_variants(tmp_path: Path) -> None:
    # A static build links a versioned libggml-cpu.so.0 into libggml: nothing to choose.
    _fake_backend(tmp_path / "libggml-cpu.so", 3)
    (tmp_path / "libggml-cpu.so.0").symlink_to(tmp_path / "libggml-cpu.so")
    assert installed_variants(tmp_path) == []


def test_a_variant_this_cpu_cannot_run_is_never_chosen() -> None:
    variants = [CpuVariant("zen4", Path("z.so"), 0), CpuVariant("portable", Path("p.so"), 2)]
    assert choose_variant(variants).name == "portable"
    with pytest.raises(ConfigurationError, match="cannot run"):
        choose_variant(variants, "zen4")
    with pytest.raises(ConfigurationError, match="not installed"):
        choose_variant(variants, "icelake")
    with pytest.raises(ConfigurationError, match="lacks AVX2"):
        choose_variant([CpuVariant("portable", Path("p.so"), 0)])


def test_the_installed_runtime_loads_a_backend_this_cpu_runs() -> None:
    """The real install: the variant ``auto`` picks is one this CPU runs (fresh process)."""
    if cpu_backends.llama_lib_dir() is None:
        pytest.skip("llama-cpp-python is not installed")
    code = (
        "from dynakrag.llm.cpu_backends import installed_variants, load_cpu_backend\n"
        "variants = installed_variants()\n"
        "name = load_cpu_backend('auto')\n"
        "scores = {v.name: v.score for v in variants}\n"
        "assert name == 'static' or scores[name] == max(scores.values()) > 0, (name, scores)\n"
        "import llama_cpp\n"
        "llama_cpp.llama_backend_init()\n"
        "print(name)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()
