#!/usr/bin/env bash
# Installs llama-cpp-python with llama.cpp's dynamic CPU backends, so the embedded generator runs
# the best instruction set of the machine it runs on, chosen at run time:
#   1. llama-cpp-python built with GGML_BACKEND_DL=ON: its own CPU backend (libggml-cpu.so) is the
#      portable AVX2 build, the reference and the fallback;
#   2. extra CPU backend variants compiled from the same source (ggml alone, a minute or two each)
#      and installed beside it as libggml-cpu-<variant>.so.
# At run time dynakrag.llm.cpu_backends asks every variant for llama.cpp's own feature score and
# loads the best one this CPU can run (a variant scores 0 on a CPU that lacks one of its
# instructions, so it is never loaded there); if none scores, the portable backend is loaded.
# Any failed step says so in one line and leaves a working install: the portable dynamic build,
# or, if even that fails, the portable static build (-DGGML_NATIVE=OFF) used before.
#
# Usage: scripts/install-llama-cpp.sh PYTHON [VARIANT ...]    (default variants: zen4)
set -uo pipefail

python=${1:?usage: install-llama-cpp.sh PYTHON [VARIANT ...]}
shift
variants=("$@")
[ ${#variants[@]} -eq 0 ] && variants=(zen4)
version=0.3.36
jobs=$(nproc 2>/dev/null || echo 2)

# Instruction sets of each variant: the same lists as llama.cpp's GGML_CPU_ALL_VARIANTS.
variant_flags() {
  local base="-DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_F16C=ON -DGGML_FMA=ON -DGGML_AVX2=ON -DGGML_BMI2=ON"
  case "$1" in
    haswell) echo "$base" ;;
    skylakex) echo "$base -DGGML_AVX512=ON" ;;
    icelake) echo "$base -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON" ;;
    zen4) echo "$base -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON" ;;
    alderlake) echo "$base -DGGML_AVX_VNNI=ON" ;;
    *) return 1 ;;
  esac
}

# --no-cache-dir: pip caches a built wheel by version, not by CMAKE_ARGS, so a cached build of other
# flags would be reused. --force-reinstall --no-deps: rebuild an installed static build in place
# (its dependencies come with the project's own install).
pip_build() {
  CMAKE_ARGS="$1" "$python" -m pip install -q --no-cache-dir --force-reinstall --no-deps \
    "llama-cpp-python==$version"
}
if ! pip_build "-DGGML_NATIVE=OFF -DGGML_BACKEND_DL=ON"; then
  echo "install-llama-cpp: the dynamic-backend build failed; installing the portable build" >&2
  pip_build "-DGGML_NATIVE=OFF"
  exit $?
fi

lib_dir=$("$python" -c 'import importlib.util, pathlib; print(pathlib.Path(importlib.util.find_spec("llama_cpp").origin).parent / "lib")')
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if ! "$python" -m pip download -q --no-deps --no-binary :all: "llama-cpp-python==$version" -d "$work" \
    || ! tar xzf "$work"/llama_cpp_python-"$version".tar.gz -C "$work"; then
  echo "install-llama-cpp: could not fetch the llama.cpp source; CPU variants skipped (portable backend only)" >&2
  exit 0
fi
# The whole llama.cpp tree is configured (the sdist's ggml alone lacks files a standalone ggml
# build needs), but only the ggml-cpu target is built.
llama_src="$work/llama_cpp_python-$version/vendor/llama.cpp"

for variant in "${variants[@]}"; do
  if ! flags=$(variant_flags "$variant"); then
    echo "install-llama-cpp: unknown CPU variant '$variant' skipped" >&2
    continue
  fi
  build="$work/build-$variant"
  # shellcheck disable=SC2086  # $flags is a list of -D options
  # The variant is copied beside the wheel's libraries: it finds their libggml-base through $ORIGIN.
  if cmake -S "$llama_src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON \
        -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON '-DCMAKE_INSTALL_RPATH=$ORIGIN' \
        -DGGML_BACKEND_DL=ON -DGGML_NATIVE=OFF $flags -DLLAMA_BUILD_TESTS=OFF \
        -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TOOLS=OFF \
        -DLLAMA_BUILD_COMMON=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF >"$work/$variant.log" 2>&1 \
      && cmake --build "$build" --target ggml-cpu -j "$jobs" >>"$work/$variant.log" 2>&1; then
    built=$(find "$build" -name 'libggml-cpu.so' -print -quit)
    if [ -n "$built" ] && cp "$built" "$lib_dir/libggml-cpu-$variant.so"; then
      echo "install-llama-cpp: CPU backend variant '$variant' installed" >&2
      continue
    fi
  fi
  reason=$(grep -m 1 -i 'error' "$work/$variant.log" || tail -n 1 "$work/$variant.log")
  echo "install-llama-cpp: building CPU variant '$variant' failed ($reason); the portable backend stays" >&2
done
