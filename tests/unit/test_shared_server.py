"""One embedded model server per machine: found through the registry, shared under leases,
stopped when its last user is gone (crashed users included). A stdlib stand-in plays the server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from dynakrag.llm.shared_server import SharedServer
from tests.fakes import FAKE_MODEL_SERVER


@pytest.fixture
def fake_command(tmp_path: Path) -> Callable[[int], list[str]]:
    script = tmp_path / "fake_chat_server.py"
    script.write_text(FAKE_MODEL_SERVER, encoding="utf-8")
    launches, requests = tmp_path / "launches.txt", tmp_path / "requests.txt"
    busy = tmp_path / "busy"
    return lambda port: [
        sys.executable, str(script), str(port), "0", str(launches), str(requests), str(busy)
    ]  # fmt: skip


@pytest.fixture
def handles() -> Iterator[list[SharedServer]]:
    made: list[SharedServer] = []
    yield made
    for handle in made:
        handle.shutdown()


def _pid_gone(pid: int, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def test_a_second_user_joins_the_running_server(tmp_path: Path, fake_command, handles) -> None:
    first = SharedServer(tmp_path, identity="fake", command_factory=fake_command, idle_s=30)
    second = SharedServer(tmp_path, identity="fake", command_factory=fake_command, idle_s=30)
    handles += [first, second]
    first.start()
    second.start()
    assert first.started_here and not second.started_here
    assert (first.pid, first.base_url) == (second.pid, second.base_url)
    assert len((tmp_path / "launches.txt").read_text().split()) == 1


def test_a_busy_server_is_joined_not_duplicated(tmp_path: Path, fake_command, handles) -> None:
    """A server evaluating a long prompt answers no HTTP; it is still the one to use."""
    first = SharedServer(tmp_path, identity="fake", command_factory=fake_command, idle_s=30)
    second = SharedServer(tmp_path, identity="fake", command_factory=fake_command, idle_s=30)
    handles += [first, second]
    first.start()
    (tmp_path / "busy").touch()
    try:
        second.start()
    finally:
        (tmp_path / "busy").unlink()
    assert not second.started_here and second.pid == first.pid
    assert len((tmp_path / "launches.txt").read_text().split()) == 1


def test_a_replaced_server_stops_with_its_own_last_user(
    tmp_path: Path, fake_command, handles
) -> None:
    """Leases are per server: users of a newer server do not keep an older one alive."""
    first = SharedServer(tmp_path, identity="fake", command_factory=fake_command, idle_s=0.5)
    second = SharedServer(tmp_path, identity="fake", command_factory=fake_command, idle_s=0.5)
    handles += [first, second]
    first.start()
    old_pid = first.pid
    assert old_pid is not None
    # The registry forgets the first server (as when a user judged it dead): a new one starts.
    first.registry_path.write_text(
        json.dumps({"supervisor_pid": 1, "server_pid": 2**22 + 7, "port": 1, "identity": "fake"})
    )
    second.start()
    assert second.started_here and second.pid != old_pid
    first.stop()
    assert _pid_gone(old_pid), "the replaced server outlived its own last user"
    assert second.is_alive()


def test_the_server_stops_after_its_last_user_leaves(tmp_path: Path, fake_command, handles) -> None:
    first = SharedServer(tmp_path, identity="fake", command_factory=fake_command, idle_s=0.5)
    second = SharedServer(tmp_path, identity="fake", command_factory=fake_command, idle_s=0.5)
    handles += [first, second]
    first.start()
    second.start()
    pid = first.pid
    assert pid is not None
    first.stop()
    time.sleep(1.5)
    assert second.is_alive(), "a user still holds a lease: the server must keep running"
    second.stop()
    assert _pid_gone(pid), "the server outlived its last user"
    assert not first.registry_path.exists()


def test_a_killed_user_leaves_no_orphan_server(tmp_path: Path, fake_command) -> None:
    # A user process that starts the server, then is killed outright (no clean-up runs).
    user = tmp_path / "user.py"
    user.write_text(
        textwrap.dedent(
            f"""
            import sys, time
            from dynakrag.llm.shared_server import SharedServer
            argv = {fake_command(0)!r}
            factory = lambda port: [*argv[:2], str(port), *argv[3:]]
            server = SharedServer(sys.argv[1], identity="fake", command_factory=factory, idle_s=0.5)
            server.start()
            print(server.pid, flush=True)
            time.sleep(60)
            """
        ),
        encoding="utf-8",
    )
    process = subprocess.Popen(
        [sys.executable, str(user), str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        server_pid = int(process.stdout.readline())
        os.kill(server_pid, 0)  # running
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)
        assert _pid_gone(server_pid), "the crashed user's server was orphaned"
    finally:
        if process.poll() is None:
            process.kill()


def test_a_server_of_another_model_is_not_reused(tmp_path: Path, fake_command, handles) -> None:
    first = SharedServer(tmp_path, identity="model-a", command_factory=fake_command, idle_s=30)
    other = SharedServer(tmp_path, identity="model-b", command_factory=fake_command, idle_s=30)
    handles += [first, other]
    first.start()
    other.start()
    assert other.started_here and other.pid != first.pid


def test_a_dead_shared_server_is_restarted_once_then_reported(
    tmp_path: Path, fake_command, handles
) -> None:
    from dynakrag.errors import ModelUnavailableError

    server = SharedServer(tmp_path, identity="fake", command_factory=fake_command, idle_s=30)
    handles.append(server)
    server.start()
    port = server.port
    for attempt in range(2):
        pid = server.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        assert _pid_gone(pid)
        if attempt == 0:
            server.ensure_running()
            assert server.is_alive() and server.port == port  # same address again
    with pytest.raises(ModelUnavailableError, match="died again"):
        server.ensure_running()


ASK_PROCESS = textwrap.dedent(
    """
    import sys
    from dynakrag.cli.main import main
    from dynakrag.llm import embedded
    from dynakrag.llm.shared_server import SharedServer

    cache, script, launches, requests = sys.argv[1:5]
    factory = lambda port: [sys.executable, script, str(port), "0", launches, requests]
    # A long idle time: the second process, slow to import on a loaded machine, must still
    # find the first one's server running.
    embedded._new_server = lambda cache_dir, **_: SharedServer(
        cache, identity="fake", command_factory=factory, idle_s=15.0
    )
    sys.exit(main(["ask", "Who founded the company that makes the Astrora Headset?",
                   "--corpus", sys.argv[5], "--max-steps", "1"]))
    """
)


@pytest.mark.slow
def test_two_ask_processes_started_together_use_one_server(tmp_path: Path) -> None:
    """Two ``dynakrag ask`` runs at once: one server is launched and both talk to it."""
    script = tmp_path / "fake_chat_server.py"
    script.write_text(FAKE_MODEL_SERVER, encoding="utf-8")
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        "\n".join(
            json.dumps({"id": f"d{i}", "title": f"Doc {i}", "text": text})
            for i, text in enumerate(
                [
                    "The Astrora Headset is made by Quarstead Labs.",
                    "Quarstead Labs was founded by Mira Quarstead in 2011.",
                    "Headsets are worn on the head.",
                ]
            )
        )
        + "\n",
        encoding="utf-8",
    )
    runner = tmp_path / "ask.py"
    runner.write_text(ASK_PROCESS, encoding="utf-8")
    launches, requests = tmp_path / "launches.txt", tmp_path / "requests.txt"
    argv = [
        sys.executable,
        str(runner),
        str(tmp_path / "cache"),
        str(script),
        str(launches),
        str(requests),
        str(corpus),
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "DYNAKRAG_CACHE_DIR": str(tmp_path / "cache")}
    processes = [
        subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=300) for p in processes]
    for process, (out, err) in zip(processes, outputs, strict=True):
        assert process.returncode == 0, err[-2000:]
        assert "Answer:" in out or out.strip(), out
    assert len(launches.read_text().split()) == 1, "each process started its own server"
    assert len(requests.read_text().splitlines()) >= 2  # both runs called the model
    server_pid = int(launches.read_text().split()[0])
    assert _pid_gone(server_pid, timeout=20), "the server outlived both ask processes"


def test_the_shared_server_is_the_default(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from dynakrag.llm import embedded
    from dynakrag.llm.server_process import EmbeddedServer

    monkeypatch.delenv("DYNAKRAG_SHARED_SERVER", raising=False)
    assert isinstance(embedded._new_server(tmp_path), SharedServer)
    monkeypatch.setenv("DYNAKRAG_SHARED_SERVER", "0")
    assert isinstance(embedded._new_server(tmp_path), EmbeddedServer)
