"""Untrusted files: crafted pickles are never unpickled, and malformed data files are refused
with a CorpusError naming the file and the row.

The crafted pickle's ``__reduce__`` creates a marker file when unpickled; every entry point that
takes a file (``--policy``, ``Configuration(policy=...)``, ``build_graph(policy=...)``,
``DenseIndex.load``, ``--index``, ``--corpus``, the benchmark loaders) must refuse it with a
clear message and leave no marker behind.
"""

from __future__ import annotations

import hashlib
import io
import json
import pickle
import re
import shutil
import subprocess
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from dynakrag import ConfigurationError, CorpusError, cli
from dynakrag.cli import ask as ask_command
from dynakrag.configuration import Configuration
from dynakrag.data.datasets import DATA_DIR_ENV, load_examples
from dynakrag.retrieval.corpus import load_corpus
from dynakrag.retrieval.dense import DenseIndex
from dynakrag.retrieval.passage import Passage
from tests.reliability.conftest import Recorder
from tests.reliability.support import REPO_ROOT, demo_corpus, keyword_graph


class _Evil:
    """Unpickling this creates ``marker`` (any code could run instead)."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (self.marker, "w"))


def evil_pickle(marker: Path, protocol: int = pickle.HIGHEST_PROTOCOL) -> bytes:
    return pickle.dumps(_Evil(marker), protocol=protocol)


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    return tmp_path / "PWNED"


def test_the_crafted_pickle_is_live(tmp_path: Path) -> None:
    """Control: unpickling the payload does create the marker (the checks below mean it)."""
    control = tmp_path / "control-marker"
    for protocol in (0, pickle.HIGHEST_PROTOCOL):
        control.unlink(missing_ok=True)
        handle = pickle.loads(evil_pickle(control, protocol))
        handle.close()
        assert control.exists()
    control.unlink()
    _policy_files(tmp_path, control)
    with np.load(tmp_path / "policy.npz", allow_pickle=True) as data:
        data["value"][0].close()
    assert control.exists()


def _policy_files(directory: Path, marker: Path) -> list[Path]:
    """Crafted policy files: raw pickles under common model suffixes, and an .npz whose array
    is a pickled object (what ``np.load(allow_pickle=True)`` would run)."""
    files = []
    for name in ("policy.pkl", "policy.pt", "policy.joblib", "policy.bin"):
        path = directory / name
        path.write_bytes(evil_pickle(marker, 0 if name.endswith(".bin") else 4))
        files.append(path)
    npz = directory / "policy.npz"
    payload = np.empty(1, dtype=object)
    payload[0] = _Evil(marker)
    np.savez(npz, value=payload)
    files.append(npz)
    return files


def _run_cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = cli.main(argv)
    return code, out.getvalue(), err.getvalue()


# ``no_models`` (tests/conftest.py): refusals must come before any model or index loads.


@pytest.mark.usefixtures("no_models")
def test_pickled_policy_is_refused_everywhere(
    tmp_path: Path, marker: Path, monkeypatch: pytest.MonkeyPatch, reliability: Recorder
) -> None:
    files = _policy_files(tmp_path, marker)
    corpus = demo_corpus()
    question = corpus.questions[0].question
    tried = 0
    for path in files:
        # CLI --policy FILE: exit 2, one line naming the file, before the index is built.
        monkeypatch.setattr(ask_command, "_searcher_for", lambda *a: pytest.fail("index was built"))
        code, out, err = _run_cli(["ask", question, "--policy", str(path)])
        assert code == 2 and out == "", (code, out, err)
        assert len(err.splitlines()) == 1 and str(path) in err and "Traceback" not in err
        # DYNAKRAG_POLICY=FILE
        monkeypatch.setenv("DYNAKRAG_POLICY", str(path))
        code, _, err = _run_cli(["ask", question])
        assert code == 2 and str(path) in err
        monkeypatch.delenv("DYNAKRAG_POLICY")
        # Configuration(policy=FILE) -> build_graph
        with pytest.raises(ConfigurationError, match=re.escape(str(path))):
            keyword_graph(corpus, configuration=Configuration(policy=str(path)))
        # build_graph(policy=FILE)
        with pytest.raises(ConfigurationError, match=re.escape(str(path))):
            keyword_graph(corpus, policy=str(path))
        # A run's configurable policy=FILE
        graph = keyword_graph(corpus)
        with pytest.raises(ConfigurationError, match=re.escape(str(path))):
            graph.invoke({"question": question}, {"configurable": {"policy": str(path)}})
        tried += 5
        assert not marker.exists(), f"{path} was unpickled"
    reliability(
        "crafted pickle as policy (--policy, DYNAKRAG_POLICY, Configuration, build_graph, "
        "configurable)",
        tried,
        "refused with a message naming the file; never unpickled (no marker file)",
    )


def _pickled_index(directory: Path, marker: Path, *, matching_manifest: bool) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name in ("index.faiss", "passages.jsonl", "manifest.json"):
        (directory / name).write_bytes(evil_pickle(marker))
    if matching_manifest:  # a manifest that vouches for the pickles
        manifest = {
            "format_version": 1,
            "embedding_model": "DeterministicFakeEmbedding",
            "dimension": 16,
            "count": 1,
            "metric": "inner_product",
            "passages_sha256": hashlib.sha256(
                (directory / "passages.jsonl").read_bytes()
            ).hexdigest(),
            "index_sha256": hashlib.sha256((directory / "index.faiss").read_bytes()).hexdigest(),
        }
        (directory / "manifest.json").write_text(json.dumps(manifest))
    return directory


@pytest.mark.usefixtures("no_models")
def test_pickled_index_files_are_refused(
    tmp_path: Path, marker: Path, reliability: Recorder
) -> None:
    embeddings = DeterministicFakeEmbedding(size=16)
    messages = []
    for matching in (False, True):
        directory = _pickled_index(tmp_path / f"idx-{matching}", marker, matching_manifest=matching)
        with pytest.raises(CorpusError) as info:
            DenseIndex.load(directory, embeddings)
        messages.append(str(info.value))
        assert str(directory) in str(info.value)
        # Only passages.jsonl left as a pickle, the FAISS file real: still refused.
        real = DenseIndex.build(
            [Passage(id="a", title="A", text="alpha")], embeddings, progress=False
        ).save(tmp_path / f"real-{matching}")
        shutil.copy(directory / "passages.jsonl", real / "passages.jsonl")
        manifest = json.loads((real / "manifest.json").read_text())
        manifest["passages_sha256"] = hashlib.sha256(
            (real / "passages.jsonl").read_bytes()
        ).hexdigest()
        (real / "manifest.json").write_text(json.dumps(manifest))
        with pytest.raises(CorpusError, match=r"passages\.jsonl"):
            DenseIndex.load(real, embeddings)
        # CLI --index DIR: exit 2 with one line.
        code, _, err = _run_cli(["ask", "Who?", "--index", str(directory)])
        assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err
    # CLI --corpus with a pickle named .jsonl: exit 2 with one line.
    corpus_file = tmp_path / "corpus.jsonl"
    corpus_file.write_bytes(evil_pickle(marker, 0))
    code, _, err = _run_cli(["ask", "Who?", "--corpus", str(corpus_file)])
    assert code == 2 and str(corpus_file) in err and "line 1" in err
    assert not marker.exists()
    reliability(
        "pickles as dense index files / corpus (DenseIndex.load, --index, --corpus)",
        7,
        "CorpusError / exit 2 naming the file; never unpickled (no marker file)",
    )


# --------------------------------------------------------------------------------------------
# No unsafe deserialisation anywhere in dynakrag/
# --------------------------------------------------------------------------------------------

UNSAFE_CALLS: dict[str, re.Pattern[str]] = {
    "pickle.load(s)": re.compile(r"\b(?:c?[Pp]ickle|_pickle|dill|cloudpickle)\.loads?\s*\("),
    "Unpickler": re.compile(r"\bUnpickler\s*\("),
    "from pickle import load": re.compile(
        r"from\s+(?:c?pickle|_pickle|dill|cloudpickle|joblib)\s+import\s+[^\n]*\bloads?\b"
    ),
    "joblib.load": re.compile(r"\bjoblib\.load\s*\("),
    "numpy allow_pickle=True": re.compile(r"allow_pickle\s*=\s*True"),
    "pandas read_pickle": re.compile(r"\bread_pickle\s*\("),
    "shelve.open": re.compile(r"\bshelve\.open\s*\("),
    "marshal.load(s)": re.compile(r"\bmarshal\.loads?\s*\("),
    "yaml.load without SafeLoader": re.compile(r"\byaml\.(?:unsafe_)?load\s*\((?![^)]*Safe)"),
}
TORCH_LOAD = re.compile(r"\btorch\.load\s*\(")


def _call_text(source: str, open_paren: int) -> str:
    """The argument text of the call whose '(' is at ``open_paren``."""
    depth = 0
    for position in range(open_paren, len(source)):
        depth += {"(": 1, ")": -1}.get(source[position], 0)
        if depth == 0:
            return source[open_paren : position + 1]
    return source[open_paren:]


def unsafe_deserialisation(source: str) -> list[str]:
    """Findings in one Python source: unsafe loader calls, torch.load without
    weights_only=True."""
    findings = [name for name, pattern in UNSAFE_CALLS.items() if pattern.search(source)]
    for match in TORCH_LOAD.finditer(source):
        call = _call_text(source, match.end() - 1)
        if not re.search(r"weights_only\s*=\s*True", call):
            findings.append(f"torch.load without weights_only=True: {call[:80]}")
    return findings


def test_the_scanner_finds_unsafe_calls() -> None:
    assert unsafe_deserialisation("x = pickle.load(f)")
    assert unsafe_deserialisation("x = pickle.loads(b)")
    assert unsafe_deserialisation("from pickle import loads as l")
    assert unsafe_deserialisation("m = joblib.load('m.joblib')")
    assert unsafe_deserialisation("s = torch.load(path)")
    assert unsafe_deserialisation("s = torch.load(\n  path,\n  weights_only=False)")
    assert unsafe_deserialisation("a = np.load(p, allow_pickle=True)")
    assert unsafe_deserialisation("y = yaml.load(text)")
    assert not unsafe_deserialisation(
        "s = torch.load(\n  path, map_location='cpu',\n  weights_only=True)"
    )
    assert not unsafe_deserialisation("y = yaml.load(text, Loader=yaml.SafeLoader)")
    assert not unsafe_deserialisation("data = pickle.dumps(obj)")


def test_no_unsafe_deserialisation_in_the_package(reliability: Recorder) -> None:
    if shutil.which("git") is None or not (REPO_ROOT / ".git").exists():
        pytest.skip("needs git and the repository")
    candidates = subprocess.run(
        [
            "git",
            "grep",
            "-l",
            "-I",
            "--untracked",
            "-E",
            r"pickle|joblib|torch\.load|allow_pickle|shelve|marshal|yaml\.|Unpickler|dill",
            "--",
            "dynakrag/",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert candidates.returncode in (0, 1), candidates.stderr  # 1: no match at all
    files = [line for line in candidates.stdout.splitlines() if line.endswith(".py")]
    problems = {
        name: found
        for name in files
        if (found := unsafe_deserialisation((REPO_ROOT / name).read_text(encoding="utf-8")))
    }
    assert not problems, problems
    scanned = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "dynakrag/"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    reliability(
        "git grep of dynakrag/ for pickle/joblib/torch.load/yaml.load/allow_pickle",
        len([f for f in scanned if f.endswith(".py")]),
        "no unsafe deserialisation call in any module",
    )


# --------------------------------------------------------------------------------------------
# Data loaders: malformed rows are refused naming the file and the row
# --------------------------------------------------------------------------------------------


def _standard_row(qid: str) -> dict[str, Any]:
    return {
        "_id": qid,
        "question": "Which?",
        "answer": "A",
        "supporting_facts": [["Alpha", 0], ["Beta", 1]],
        "context": [
            ["Alpha", ["Alpha is a letter.", " It comes first."]],
            ["Beta", ["Beta is a letter.", " It comes second."]],
        ],
    }


def _changed(**changes: Any) -> str:
    row = _standard_row("q1")
    for key, value in changes.items():
        if value is _DROP:
            del row[key]
        else:
            row[key] = value
    return json.dumps(row)


_DROP = object()

MALFORMED_ROWS: dict[str, str] = {
    "a string": '"just a string"',
    "a number": "42",
    "a list": "[1, 2]",
    "id not a string": _changed(_id=5),
    "no question": _changed(question=_DROP),
    "no answer": _changed(answer=_DROP),
    "answer a list": _changed(answer=["A"]),
    "context an object": _changed(context={"Alpha": 1}),
    "sentences numbers": _changed(context=[["Alpha", [1, 2]]]),
    "unknown supporting title": _changed(supporting_facts=[["Zeta", 0]]),
    "supporting fact arity": _changed(supporting_facts=[["Alpha"]]),
    "sentence id a word": _changed(supporting_facts=[["Alpha", "first"]]),
    "sentence id null": _changed(supporting_facts=[["Alpha", None]]),
    "sentence id NaN": _changed(supporting_facts=[["Alpha", 0]]).replace(
        '["Alpha", 0]]', '["Alpha", NaN]]'
    ),
    "invalid JSON": '{"_id": "q1", "question": ',
    "a pickle (protocol 0)": "",  # filled in by the test: an ASCII pickle line
}

EXTREME_ROWS: dict[str, tuple[str, str]] = {
    "sentence id 1e400": (
        _changed(supporting_facts=[["Alpha", 0]]).replace('["Alpha", 0]]', '["Alpha", 1e400]]'),
        "datasets._parsed_file does not catch OverflowError: int(float('inf')) of a "
        "supporting_facts sentence id 1e400 escapes as OverflowError",
    ),
    "nested 100,000 deep": (
        '{"_id": ' + "[" * 100_000 + "]" * 100_000 + "}",
        "datasets._raw_rows catches JSONDecodeError but not RecursionError: a deeply "
        "nested row escapes as RecursionError",
    ),
}


def _data_dir(tmp_path: Path, line: str) -> Path:
    root = tmp_path / "data"
    (root / "hotpotqa").mkdir(parents=True)
    bad = root / "hotpotqa" / "bad.jsonl"
    bad.write_text(json.dumps(_standard_row("q0")) + "\n" + line + "\n", encoding="utf-8")
    splits = {"files": {"hotpotqa/bad.jsonl": {"train": "all"}}}
    (root / "splits.json").write_text(json.dumps(splits))
    return bad


def test_malformed_dataset_rows_name_file_and_row(
    tmp_path: Path, marker: Path, monkeypatch: pytest.MonkeyPatch, reliability: Recorder
) -> None:
    rows = dict(MALFORMED_ROWS)
    rows["a pickle (protocol 0)"] = evil_pickle(marker, 0).decode("ascii").splitlines()[0]
    for number, (name, line) in enumerate(rows.items()):
        case = tmp_path / f"case{number}"
        bad = _data_dir(case, line)
        monkeypatch.setenv(DATA_DIR_ENV, str(case / "data"))
        with pytest.raises(CorpusError) as info:
            load_examples("hotpotqa", "train")
        message = str(info.value)
        assert str(bad) in message, (name, message)
        assert "row 1" in message, (name, message)
        assert "\n" not in message
    # A pickle listed as a data file: not UTF-8, refused naming the file; never unpickled.
    root = tmp_path / "pickled"
    (root / "musique").mkdir(parents=True)
    (root / "musique" / "m.json").write_bytes(evil_pickle(marker))
    (root / "splits.json").write_text(json.dumps({"files": {"musique/m.json": {"eval": "all"}}}))
    monkeypatch.setenv(DATA_DIR_ENV, str(root))
    with pytest.raises(CorpusError, match=r"m\.json.*not UTF-8"):
        load_examples("musique", "eval")
    assert not marker.exists()
    reliability(
        "malformed benchmark rows (hotpotqa loader, temp DYNAKRAG_DATA_DIR) and a pickled file",
        len(rows) + 1,
        "CorpusError naming the file and row 1 (the pickled file: named, not UTF-8)",
    )


@pytest.mark.parametrize("name", sorted(EXTREME_ROWS))
def test_malformed_dataset_rows_beyond_the_caught_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    line, _why = EXTREME_ROWS[name]  # why such a row once escaped as a non-Corpus error
    bad = _data_dir(tmp_path, line)
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "data"))
    with pytest.raises(CorpusError, match=rf"row 1 of {re.escape(str(bad))}"):
        load_examples("hotpotqa", "train")


def test_deeply_nested_corpus_row_is_a_corpus_error(tmp_path: Path) -> None:
    path = tmp_path / "corpus.jsonl"
    path.write_text('{"text": "ok"}\n{"text": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    with pytest.raises(CorpusError, match="line 2"):
        load_corpus(path)
