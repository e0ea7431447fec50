"""Keeps one shared model server running while some process on the machine uses it.

Run as a script (standard library and :mod:`filelock` only, so it starts fast and imports
nothing of dynakrag)::

    python server_supervisor.py --port P --identity ID --registry R --users U --lock L \
        --idle S -- SERVER ARGV...

It starts the server as its child, writes the registry file (``{"supervisor_pid", "server_pid",
"port", "identity"}``) and then watches its users file: every process that uses the server holds
a shared ``flock`` on it, which the kernel drops when that process exits or crashes. When no
process has held one for ``--idle`` seconds, the supervisor takes the registry lock (so no new
user can join meanwhile), stops the server, removes the registry entry and exits. It also exits
when the server dies, and stops the server when it is terminated itself. The server's stdin is
a pipe from the supervisor: a server run through dynakrag's llama.cpp watchdog exits when the
supervisor is killed outright, so no server outlives both its supervisor and its users.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from filelock import FileLock


def _nobody_holds(users: Path) -> bool:
    """True when no process holds a shared lock on ``users`` (checked without blocking).

    Plain ``flock``, as the users' leases (:mod:`dynakrag.llm.shared_server`): filelock has no
    shared mode, and both sides of this check must use the same primitive."""
    with users.open("a+") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
        return True


def _remove_entry(registry: Path, users: Path) -> None:
    """Delete the registry file if it still names this supervisor, and this server's users file
    (users still holding a lease keep their open descriptor)."""
    with contextlib.suppress(OSError, ValueError):
        if json.loads(registry.read_text()).get("supervisor_pid") == os.getpid():
            registry.unlink()
    with contextlib.suppress(OSError):
        users.unlink()


def stop_process(child: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL after 5 s; returns once the process is gone."""
    if child.poll() is None:
        child.terminate()
        try:
            child.wait(timeout=5)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--identity", required=True)
    parser.add_argument("--registry", type=Path, required=True)
    parser.add_argument("--users", type=Path, required=True)
    parser.add_argument("--lock", type=Path, required=True)
    parser.add_argument("--idle", type=float, default=10.0)
    parser.add_argument("--poll", type=float, default=0.25)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no server command given")

    child = subprocess.Popen(command, stdin=subprocess.PIPE)

    def on_signal(signum: int, frame: object) -> None:
        stop_process(child)
        _remove_entry(args.registry, args.users)
        os._exit(0)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    entry = {
        "supervisor_pid": os.getpid(),
        "server_pid": child.pid,
        "port": args.port,
        "identity": args.identity,
    }
    temporary = args.registry.with_suffix(f".{os.getpid()}.tmp")
    temporary.write_text(json.dumps(entry))
    os.replace(temporary, args.registry)

    idle_since: float | None = None
    while True:
        time.sleep(args.poll)
        if child.poll() is not None:
            _remove_entry(args.registry, args.users)
            return 0
        if not _nobody_holds(args.users):
            idle_since = None
            continue
        now = time.monotonic()
        idle_since = idle_since if idle_since is not None else now
        if now - idle_since < args.idle:
            continue
        # Under the registry lock no new user can join between the check and the stop. The
        # same lock as the users' (model_assembly.exclusive_file_lock), waited for as long.
        with FileLock(args.lock, preserve_lock_file=True):
            if _nobody_holds(args.users):
                stop_process(child)
                _remove_entry(args.registry, args.users)
                return 0
        idle_since = None


if __name__ == "__main__":
    sys.exit(main())
