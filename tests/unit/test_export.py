"""``dynakrag export``: threads of a LangGraph server copied into a trajectory log read back
exactly like runs logged locally. The server is a stand-in at the SDK client's boundary
(``threads.search`` / ``threads.get_history``) that serves, as JSON, the checkpoint history of
real graph runs, shaped like the SDK's ``ThreadState``."""

from __future__ import annotations

import json
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import StateSnapshot

from dynakrag import build_graph, cli
from dynakrag.data.demo import demo_passages
from dynakrag.data.demo_corpus import generate_demo_corpus
from dynakrag.training import export as export_module
from dynakrag.training import read_transitions
from dynakrag.training.export import export_threads
from dynakrag.training.trajectories import list_threads
from tests.fakes import KeywordSearcher, demo_chat_model

CORPUS = generate_demo_corpus(7)
ANSWERS = {q.question: q.answer for q in CORPUS.questions}


def _checkpoint(thread: str, checkpoint_id: str) -> dict[str, Any]:
    return {
        "thread_id": thread,
        "checkpoint_ns": "",
        "checkpoint_id": checkpoint_id,
        "checkpoint_map": None,
    }


def thread_state(snapshot: StateSnapshot) -> dict[str, Any]:
    """A StateSnapshot as the server sends it (``ThreadState``, through JSON)."""
    own = snapshot.config["configurable"]
    parent = (snapshot.parent_config or {}).get("configurable")
    state = {
        "values": snapshot.values,
        "next": list(snapshot.next),
        "checkpoint": _checkpoint(own["thread_id"], own["checkpoint_id"]),
        "metadata": snapshot.metadata,
        "created_at": snapshot.created_at,
        "parent_checkpoint": _checkpoint(own["thread_id"], parent["checkpoint_id"])
        if parent
        else None,
        "tasks": [],
        "interrupts": [],
    }
    return json.loads(json.dumps(state, default=str))


class FakeServer:
    """``client.threads`` of langgraph_sdk's sync client over a graph with an in-memory saver."""

    def __init__(self) -> None:
        self.graph = build_graph(
            KeywordSearcher(demo_passages(CORPUS)),
            demo_chat_model(ANSWERS),
            checkpointer=InMemorySaver(),
        )
        self.threads = self
        self.history_calls = 0

    def run(self, thread: str, question: str) -> dict[str, Any]:
        return self.graph.invoke({"question": question}, {"configurable": {"thread_id": thread}})

    def search(self, *, limit: int = 10, offset: int = 0) -> list[dict[str, Any]]:
        threads = sorted({c.config["configurable"]["thread_id"] for c in self._saver().list(None)})
        return [{"thread_id": t} for t in threads][offset : offset + limit]

    def get_history(
        self, thread_id: str, *, limit: int = 10, before: Mapping[str, Any] | None = None
    ) -> list[dict[str, Any]]:
        self.history_calls += 1
        history = self.graph.get_state_history({"configurable": {"thread_id": thread_id}})
        states = [thread_state(s) for s in history]  # newest first, as the server sends them
        if before:
            states = [
                s for s in states if s["checkpoint"]["checkpoint_id"] < before["checkpoint_id"]
            ]
        return states[:limit]

    def _saver(self) -> InMemorySaver:
        return self.graph.checkpointer


def plain(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def test_exported_threads_read_back_like_local_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = FakeServer()
    server.run("t-1", CORPUS.questions[3].question)
    server.run("t-1", CORPUS.questions[0].question)  # a second run on the same thread
    server.run("t-2", CORPUS.questions[1].question)
    monkeypatch.setattr(export_module, "PAGE_SIZE", 4)  # several pages of threads and history
    log = tmp_path / "exported.sqlite"

    summary = export_threads(server, log)
    assert sorted(summary.threads) == ["t-1", "t-2"] and not summary.empty
    assert sorted(list_threads(log)) == ["t-1", "t-2"]
    for thread in ("t-1", "t-2"):
        original = read_transitions_of(server, thread)
        exported = read_transitions(log, thread)
        assert [t.action for t in exported] == [t.action for t in original]
        assert [plain(t.state) for t in exported] == [plain(t.state) for t in original]
        assert [plain(t.next_state) for t in exported] == [plain(t.next_state) for t in original]
    assert server.history_calls > 3  # it paged through the history

    again = export_threads(server, log, thread_ids=["t-2"])  # an export replaces, not adds
    assert again.threads == ["t-2"]
    assert len(read_transitions(log, "t-2")) == len(read_transitions_of(server, "t-2"))


def read_transitions_of(server: FakeServer, thread: str) -> list[Any]:
    from dynakrag.training.trajectories import _thread_transitions

    return _thread_transitions(
        thread, server.graph.get_state_history({"configurable": {"thread_id": thread}})
    )


def test_export_command_writes_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    langgraph_sdk = pytest.importorskip("langgraph_sdk", reason="needs dynakrag[studio]")
    server = FakeServer()
    server.run("only", CORPUS.questions[2].question)
    seen: dict[str, Any] = {}

    def get_sync_client(*, url: str, api_key: str | None = None) -> FakeServer:
        seen["url"] = url
        return server

    monkeypatch.setattr(langgraph_sdk, "get_sync_client", get_sync_client)
    log = tmp_path / "studio.sqlite"
    code = cli.main(["export", "--server", "http://127.0.0.1:2024", "--log", str(log)])
    out = capsys.readouterr().out
    assert code == 0
    assert seen["url"] == "http://127.0.0.1:2024"
    assert "Exported 1 thread (" in out and str(log) in out
    assert read_transitions(log, "only")[-1].action == "stop_answer"


def test_export_from_an_unreachable_server_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("langgraph_sdk", reason="needs dynakrag[studio]")
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    code = cli.main(
        ["export", "--server", f"http://127.0.0.1:{port}", "--log", str(tmp_path / "x")]
    )
    err = capsys.readouterr().err
    assert code == 1
    assert "cannot read threads" in err and len(err.strip().splitlines()) == 1
