"""Faults at scale among processes: the embedded model server SIGKILLed mid-generation (the
stdlib stand-in of the supervisor tests) is restarted once, then fails with one clear
error; orphans: a killed process that started a PostgreSQL server or ``langgraph dev``
leaves neither running.

Each test reports a row of RELIABILITY.md's "Faults at scale" table; fast (CI runs them).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import FAKE_MODEL_SERVER
from tests.reliability.scale_faults import FAULT_MARKS, FaultRow, Report
from tests.reliability.support import LANGGRAPH, REPO_ROOT, clean_env

pytestmark = FAULT_MARKS


# --------------------------------------------------------------------------------------------
# The embedded model server killed mid-generation


def _wait_for(condition: Callable[[], bool], timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _pid_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:  # an unreaped child of ours counts as gone
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_model_server_killed_mid_generation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fault_row: Report
) -> None:
    """The shared server is SIGKILLed while it generates: the request is retried on a
    restarted server (same address) and answered; killed again, the next request fails with
    one clear error instead of hanging."""
    from dynakrag.errors import ModelUnavailableError
    from dynakrag.llm import embedded
    from dynakrag.llm.shared_server import SharedServer

    script = tmp_path / "fake_model_server.py"
    script.write_text(FAKE_MODEL_SERVER, encoding="utf-8")
    launches, hold, generating = tmp_path / "launches", tmp_path / "hold", tmp_path / "generating"
    files = [launches, tmp_path / "requests", "", hold, generating]  # no BUSY file

    def factory(port: int) -> list[str]:
        return [sys.executable, str(script), str(port), "0", *map(str, files)]

    servers: list[Any] = []

    def new_server(cache_dir: Any, **_: Any) -> Any:
        servers.append(SharedServer(tmp_path, identity="fake", command_factory=factory, idle_s=0.5))
        return servers[-1]

    monkeypatch.setattr(embedded, "_singleton", None)
    monkeypatch.setattr(embedded, "_new_server", new_server)
    try:
        model = embedded.embedded_chat_model(tmp_path, max_retries=1, timeout=60)
        hold.touch()
        replies: list[Any] = []
        asking = threading.Thread(target=lambda: replies.append(model.invoke("question?")))
        asking.start()
        assert _wait_for(generating.exists), "the request never reached the server"
        first = int(launches.read_text().split()[0])
        killed_at = time.monotonic()
        os.kill(first, signal.SIGKILL)
        hold.unlink()
        asking.join(timeout=120)
        recovery = time.monotonic() - killed_at
        answered = bool(replies) and replies[0].content == "alive"
        pids = [int(p) for p in launches.read_text().split()]
        os.kill(pids[-1], signal.SIGKILL)  # a second death: past the restart budget
        assert _wait_for(lambda: _pid_gone(pids[-1]))
        with pytest.raises(ModelUnavailableError) as error:
            model.invoke("another question?")
        message = " ".join(str(error.value).split())  # how the CLI prints it: one line
    finally:
        for server in servers:
            server.shutdown()
    fault_row(
        FaultRow(
            "embedded model server SIGKILLed mid-generation",
            "chat request (ask)",
            2,
            int(answered),
            0,
            0,
            0,
            recovery,
            f"restarted once ({len(pids)} launches); second death: {message[:60]}...",
        )
    )
    assert answered and len(pids) == 2
    assert message.startswith("the embedded model server died again")


# --------------------------------------------------------------------------------------------
# Orphans

OWNER = textwrap.dedent(
    """
    import sys, time
    from dynakrag.postgres.local_server import LocalPostgres
    server = LocalPostgres(settings={"fsync": "off"})
    server.start()
    print(server.server_pid, flush=True)
    time.sleep(600)
    """
)


def test_killed_owner_leaves_no_postgres(tmp_path: Path, fault_row: Report) -> None:
    """A process that started a LocalPostgres is SIGKILLed (no clean-up of its own runs): its
    watchdog stops the server and removes the data folder."""
    gone, recovery = _child_gone_with_owner([OWNER], signal.SIGKILL, timeout=90)
    fault_row(
        FaultRow(
            "process owning a LocalPostgres SIGKILLed",
            "orphan clean-up",
            1,
            int(gone),
            0,
            0,
            0,
            recovery,
            "server gone (watchdog); model servers: supervisor leases",
        )
    )
    assert gone, "the killed owner's PostgreSQL outlived it"


def _child_gone_with_owner(
    script: list[str], sig: signal.Signals, *, timeout: float, log: Path | None = None
) -> tuple[bool, float]:
    """Run ``python -c script...`` (it prints the pid of the server it owns), send it ``sig``;
    whether the server is gone within ``timeout`` seconds, and how long that took. A server
    found orphaned is killed, not left running."""
    owner = subprocess.Popen(
        [sys.executable, "-c", *script],
        cwd=REPO_ROOT,
        env=clean_env(),
        stdout=subprocess.PIPE,
        text=True,
    )
    pid = None
    try:
        assert owner.stdout is not None
        line = owner.stdout.readline()
        assert line.strip().isdigit(), log.read_text(errors="replace")[-2000:] if log else line
        pid = int(line)
        assert not _pid_gone(pid)
        killed_at = time.monotonic()
        owner.send_signal(sig)
        owner.wait(timeout=30)
        gone = _wait_for(lambda: _pid_gone(pid), timeout=timeout)
        return gone, time.monotonic() - killed_at
    finally:
        if owner.poll() is None:
            owner.kill()
        if pid is not None and not _pid_gone(pid):
            os.kill(pid, signal.SIGKILL)


DEV_SERVER_OWNER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from tests.reliability.support import clean_env, dev_server
    env = clean_env(DYNAKRAG_CACHE_DIR=sys.argv[2], OPENAI_API_KEY="dummy",
                    DYNAKRAG_LLM_BASE_URL="http://127.0.0.1:9/v1")
    with dev_server(env, Path(sys.argv[1])) as server:
        print(server.process.pid, flush=True)
        time.sleep(600)
    """
)


@pytest.mark.skipif(not LANGGRAPH.exists(), reason="needs the langgraph CLI (dynakrag[studio])")
def test_terminated_test_leaves_no_dev_server(tmp_path: Path, fault_row: Report) -> None:
    """A test process serving ``langgraph dev`` (the studio fixtures' launcher) is SIGTERMed,
    as CI does to a job it cancels: Python runs no ``finally`` then, and the server, in a
    session of its own, would be orphaned; the kernel kills it with its parent."""
    log = tmp_path / "dev.log"
    gone, recovery = _child_gone_with_owner(
        [DEV_SERVER_OWNER, str(log), str(tmp_path)], signal.SIGTERM, timeout=10, log=log
    )
    fault_row(
        FaultRow(
            "test process serving langgraph dev SIGTERMed",
            "orphan clean-up",
            1,
            int(gone),
            0,
            0,
            0,
            recovery,
            "dev server gone with its parent (PR_SET_PDEATHSIG)",
        )
    )
    assert gone, "langgraph dev outlived the test process that started it"
