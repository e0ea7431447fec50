"""The command line of the embedded model's llama.cpp server.

:func:`llama_server_command` is the argv of ``python -m llama_cpp.server`` for a model and
:class:`ServerSettings`, run through a small wrapper (``_WATCHDOG``) that bounds the RAM prompt
cache by what its states really hold, loads the llama.cpp CPU backend this machine runs best, and
ends the server when its owner dies.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path

from dynakrag.errors import ModelUnavailableError
from dynakrag.llm.embedded_models import INSTALL_HINT
from dynakrag.llm.server_settings import ServerSettings

MODEL_ALIAS = "local"
"""The model name the server answers to (``--model_alias``); its clients ask for it."""

# Packages `llama_cpp.server` needs beyond llama_cpp itself (the `[server]` extra).
_SERVER_MODULES = (
    "llama_cpp",
    "uvicorn",
    "fastapi",
    "sse_starlette",
    "starlette_context",
    "pydantic_settings",
)


def missing_server_modules() -> list[str]:
    """The modules ``llama_cpp.server`` needs that are not installed (empty: it can run)."""
    return [name for name in _SERVER_MODULES if importlib.util.find_spec(name) is None]


# Runs `python -m llama_cpp.server ARGS` and exits when its stdin closes, i.e. when the owning
# Python process dies without calling stop() (killed, crashed): no orphaned 2 GB servers.
# Its first argument names the llama.cpp CPU backend to load before the server initialises
# llama.cpp (dynakrag.llm.cpu_backends: "auto" picks the best one this CPU can run).
# It reads fd 0 directly: a daemon thread blocked in sys.stdin aborts interpreter shutdown.
# llama-cpp-python 0.3.36's RAM prompt cache weighs a saved state by its KV bytes only, not by
# the copy of the logits each state carries (n_batch x vocabulary floats, about 310 MB for
# Qwen2.5): a 1 GB cache held some 50 states and grew past 22 GB until the kernel killed the
# server. The size below counts every array a state keeps, so --cache_size bounds the memory.
_WATCHDOG = (
    "import os, runpy, sys, threading\n"
    "import llama_cpp.llama_cache as _cache\n"
    "_cache.LlamaRAMCache.cache_size = property(lambda self: sum(\n"
    "    s.llama_state_size + s.scores.nbytes + s.input_ids.nbytes\n"
    "    for s in self.cache_state.values()))\n"
    "def _watch():\n"
    "    while os.read(0, 65536):\n"
    "        pass\n"
    "    os._exit(0)\n"
    "threading.Thread(target=_watch, daemon=True).start()\n"
    "from dynakrag.llm.cpu_backends import load_cpu_backend\n"
    "print('dynakrag: llama.cpp CPU backend', load_cpu_backend(sys.argv.pop(1)), flush=True)\n"
    "sys.argv = [sys.argv[1], *sys.argv[2:]]\n"
    "runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)\n"
)


def llama_server_command(
    model: Path,
    port: int,
    *,
    host: str = "127.0.0.1",
    settings: ServerSettings | None = None,
) -> list[str]:
    """The argv of ``python -m llama_cpp.server`` serving ``model`` as ``local`` on ``port``
    with ``settings`` (default: the environment's configuration, see :class:`ServerSettings`).

    A prompt cache (``settings.prompt_cache_mb`` > 0) keeps the KV state of earlier prompts for
    a prompt that starts like one of them, also when another prompt came in between (several
    users of the shared server).
    """
    settings = settings or ServerSettings.from_configuration()
    return [
        sys.executable,
        "-c",
        _WATCHDOG,
        settings.cpu_variant,
        "llama_cpp.server",
        "--model",
        str(model),
        "--host",
        host,
        "--port",
        str(port),
        *settings.server_arguments(),
        "--model_alias",
        MODEL_ALIAS,
    ]


def llama_command_factory(
    model: Path,
    *,
    host: str = "127.0.0.1",
    settings: ServerSettings | None = None,
) -> Callable[[int], list[str]]:
    """``port -> argv`` of the llama.cpp server for ``model``; checks the runtime is installed."""
    missing = missing_server_modules()
    if missing:
        raise ModelUnavailableError(
            f"the embedded model runtime is not installed (missing {', '.join(missing)}); "
            f"{INSTALL_HINT}"
        )

    def factory(port: int) -> list[str]:
        return llama_server_command(model, port, host=host, settings=settings)

    return factory
