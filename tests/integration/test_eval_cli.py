"""``dynakrag eval`` end to end through the console entry point (no model is loaded: the runs
that succeed use ``--no-answer`` with the naive method, which makes no LLM call)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dynakrag.cli import main
from tests.markers import needs_data


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DYNAKRAG_CACHE_DIR", str(tmp_path / "cache"))


def one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


@needs_data
def test_eval_writes_json_markdown_and_plot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "runs" / "naive.json"
    argv = ["eval", "--dataset", "hotpotqa", "--split", "eval", "--setting", "distractor",
            "--method", "naive", "--retriever", "bm25", "--limit", "2", "--no-answer",
            "--quiet", "--seed", "3", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "| naive [no answer] | hotpotqa/eval | distractor | bm25 | 2 |" in printed
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["meta"]["seed"] == 3 and result["meta"]["no_answer"] is True
    assert result["summary"]["llm_calls"] == 0 and result["summary"]["n"] == 2
    assert out.with_suffix(".md").is_file() and out.with_suffix(".png").is_file()


@needs_data
def test_eval_open_setting_on_dsrag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "dsrag.json"
    argv = ["eval", "--dataset", "dsrag-comparison", "--setting", "open", "--method", "naive",
            "--retriever", "bm25", "--limit", "1", "--no-answer", "--quiet",
            "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    assert json.loads(out.read_text(encoding="utf-8"))["questions"][0]["id"] == 0
    # DS-RAG has only its corpus: without --setting the open setting is the default.
    argv.remove("--setting")
    argv.remove("open")
    assert main(argv) == 0
    assert json.loads(out.read_text(encoding="utf-8"))["meta"]["setting"] == "open"


def test_missing_data_folder_exits_2_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DYNAKRAG_DATA_DIR", str(tmp_path / "nowhere"))
    argv = ["eval", "--dataset", "hotpotqa", "--method", "naive", "--retriever", "bm25",
            "--out", str(tmp_path / "r.json")]  # fmt: skip
    assert main(argv) == 2
    assert "benchmark data folder not found" in one_line_error(capsys)
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--method", "magic"], "invalid choice"),
        (["--method", "naive", "--dataset", "squad"], "invalid choice"),
        (["--method", "naive", "--setting", "closed"], "invalid choice"),
        (["--method", "naive", "--retriever", "splade"], "invalid choice"),
        (["--method", "naive", "--limit", "0"], "positive integer"),
        (["--method", "naive", "--policy", "uniform"], "--policy applies"),
        (["--method", "ircot", "--k", "3"], "--k applies"),
        (["--method", "dynakrag", "--policy", "bogus"], "unknown policy"),
    ],
)
def test_bad_options_exit_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    argv = ["eval", "--dataset", "hotpotqa", "--out", str(tmp_path / "r.json")]
    # A later --dataset wins in argparse, so the bad-dataset case overrides the good one.
    assert main([*argv, *extra]) == 2
    assert message in one_line_error(capsys)


def test_out_must_be_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["eval", "--dataset", "hotpotqa", "--method", "naive", "--retriever", "bm25",
            "--out", str(tmp_path)]  # fmt: skip
    assert main(argv) == 2
    assert "is a directory" in one_line_error(capsys)


def test_help_lists_the_options(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "--help"]) == 0
    text = capsys.readouterr().out
    for option in ("--dataset", "--setting", "--method", "--retriever", "--no-answer", "--out"):
        assert option in text
