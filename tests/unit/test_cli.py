"""The command line: user errors exit 2 with one stderr line, before any model loads."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from dynakrag import __version__, cli
from dynakrag.cli import ask as ask_command
from dynakrag.cli import output
from dynakrag.data.demo import demo_passages
from dynakrag.data.demo_corpus import generate_demo_corpus
from dynakrag.graph.builder import build_graph
from tests.fakes import KeywordSearcher, demo_chat_model
from tests.joint import joint_configuration

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _no_models_no_settings(no_models: None, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("DYNAKRAG_"):
            monkeypatch.delenv(name)


def run_main(argv: Sequence[str]) -> int:
    """``cli.main``'s exit status, whether it returns it or argparse raises SystemExit."""
    try:
        return cli.main(list(argv))
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert "Traceback" not in captured.err
    assert lines[0].startswith("dynakrag"), lines[0]
    assert "error:" in lines[0]
    assert captured.out == ""
    return lines[0]


@pytest.mark.parametrize("question", ["", "   ", "\t\n", "\x00\x07"])
def test_empty_question_exits_2_with_one_line(
    question: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_main(["ask", question]) == 2
    assert "empty" in one_error_line(capsys)


def test_too_long_question_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_main(["ask", "x" * 5000]) == 2
    assert "4000" in one_error_line(capsys)


def test_demo_with_an_empty_question_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_main(["demo", "--question", " "]) == 2
    one_error_line(capsys)


@pytest.mark.parametrize("value", ["0", "-3", "many", "1.5"])
def test_bad_max_steps_exits_2(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_main(["ask", "Q", "--max-steps", value]) == 2
    assert "--max-steps" in one_error_line(capsys)


def test_max_steps_above_the_limit_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_main(["ask", "Where?", "--max-steps", "99"]) == 2
    assert "max_steps" in one_error_line(capsys)


@pytest.mark.parametrize(
    "argv",
    [["ask", "Q", "--bogus"], ["--bogus"], ["frobnicate"], [], ["ask"], ["index"]],
    ids=["ask-option", "top-option", "command", "nothing", "no-question", "no-subcommand"],
)
def test_usage_errors_exit_2_with_one_line(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_main(argv) == 2
    line = one_error_line(capsys)
    if argv[:1] == ["ask"] and "--bogus" in argv:
        assert "unrecognized arguments: --bogus" in line


def test_missing_corpus_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_main(["ask", "Where?", "--corpus", "/nonexistent/corpus.jsonl"]) == 2
    assert "/nonexistent/corpus.jsonl" in one_error_line(capsys)


def test_empty_index_directory_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_main(["ask", "Where?", "--index", str(tmp_path)]) == 2
    assert str(tmp_path) in one_error_line(capsys)


def test_missing_index_directory_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_main(["ask", "Where?", "--index", str(tmp_path / "nope")]) == 2
    one_error_line(capsys)


def test_malformed_jsonl_corpus_exits_2_naming_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"id": "a", "text": "fine"}\n\n{"id": "b", "text": \n', encoding="utf-8")
    assert run_main(["ask", "Where?", "--corpus", str(corpus)]) == 2
    line = one_error_line(capsys)
    assert "line 3" in line and str(corpus) in line


def test_corpus_row_without_text_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"id": "a", "title": "no text"}\n', encoding="utf-8")
    assert run_main(["ask", "Where?", "--corpus", str(corpus)]) == 2
    assert "line 1" in one_error_line(capsys)


def test_index_build_with_a_missing_corpus_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "x"
    assert (
        run_main(["index", "build", "--corpus", str(tmp_path / "missing"), "--out", str(out)]) == 2
    )
    one_error_line(capsys)
    assert not out.exists()


def test_index_build_requires_out(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_main(["index", "build", "--corpus", "c.jsonl"]) == 2
    assert "--out" in one_error_line(capsys)


def test_corpus_and_index_together_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["ask", "Where?", "--corpus", str(tmp_path), "--index", str(tmp_path)]
    assert run_main(argv) == 2
    line = one_error_line(capsys)
    assert "--corpus" in line and "--index" in line


def test_version_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_main(["--version"]) == 0
    captured = capsys.readouterr()
    assert captured.out.strip() == f"dynakrag {__version__}"
    assert captured.err == ""


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_main(["ask", "--help"]) == 0
    assert "--corpus" in capsys.readouterr().out


def test_invalid_environment_setting_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DYNAKRAG_MAX_STEPS", "lots")
    assert run_main(["ask", "Where?", "--corpus", "/nonexistent"]) == 2
    assert "max_steps" in one_error_line(capsys)


def test_unknown_policy_fails_before_the_index_is_built(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def searcher_for(*args: Any) -> Any:
        raise AssertionError("the index was about to be built")

    monkeypatch.setattr(ask_command, "_searcher_for", searcher_for)
    assert run_main(["ask", "Where?", "--policy", "nope"]) == 2
    assert "nope" in one_error_line(capsys)


def test_cli_module_exits_2_without_a_traceback() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DYNAKRAG_")}
    result = subprocess.run(
        [sys.executable, "-m", "dynakrag.cli", "ask", ""],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == ["dynakrag: error: the question is empty"]
    assert result.stdout == ""


# --- output --------------------------------------------------------------------------------


def test_format_step_for_an_acquisition() -> None:
    entry = {
        "step": 3,
        "action": "gap_query",
        "scores": {"gap_query": 0.7, "stop_answer": 0.1234},
        "search_query": "Selkthorn Robotics headquarters",
        "added": ["company-selkthorn-robotics", "city-quarstead"],
    }
    assert output.format_step(entry) == (
        "[3] gap_query  valid: {gap_query=0.70, stop_answer=0.12}\n"
        "    query: Selkthorn Robotics headquarters\n"
        "    added: company-selkthorn-robotics, city-quarstead"
    )


def test_format_step_for_sufficiency_checks_and_the_answer() -> None:
    base = {"step": 2, "action": "sufficiency_check", "scores": {"sufficiency_check": 0.8}}
    assert output.format_step({**base, "sufficient": True, "gaps": []}) == (
        "[2] sufficiency_check  valid: {sufficiency_check=0.80}\n    sufficient"
    )
    assert output.format_step({**base, "sufficient": False, "gaps": ["Who founded X?"]}) == (
        "[2] sufficiency_check  valid: {sufficiency_check=0.80}\n    gaps: ['Who founded X?']"
    )
    # Nothing added, no query, no scores: one line.
    assert output.format_step({"step": 5, "action": "stop_answer", "added": []}) == (
        "[5] stop_answer  valid: {}"
    )


def test_stream_run_prints_each_step_and_returns_the_final_state() -> None:
    corpus = generate_demo_corpus(7)
    q = corpus.questions[0]
    graph = build_graph(
        KeywordSearcher(demo_passages(corpus)),
        demo_chat_model({q.question: q.answer}),
        configuration=joint_configuration(),  # the scripted reader answers the joint check
    )
    out = io.StringIO()
    final = output.stream_run(graph, q.question, out)
    printed = out.getvalue()
    assert final["answer"]
    for entry in final["trace"]:
        assert f"[{entry['step']}] {entry['action']}" in printed
    assert printed.count("\n[") + 1 == len(final["trace"])
    silent = output.stream_run(graph, q.question, None)
    assert silent["answer"] == final["answer"]
