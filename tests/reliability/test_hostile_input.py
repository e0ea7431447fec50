"""Hostile questions through every entry point: the Python API, the CLI (in process and as a
subprocess) and the dev server. Each one is refused with a clear error or answered normally:
never a traceback, a crash or a hang.
"""

from __future__ import annotations

import asyncio
import io
import json
import subprocess
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest

import dynakrag
from dynakrag import UserInputError, cli
from dynakrag.cli import ask as ask_command
from dynakrag.configuration import Configuration
from dynakrag.data.demo import demo_passages
from dynakrag.state import ACTIONS
from tests.fakes import KeywordSearcher, demo_chat_model, demo_responder
from tests.reliability.conftest import Recorder, Studio
from tests.reliability.support import (
    ANSWER,
    ERROR,
    HOSTILE_QUESTIONS,
    NON_STRING_QUESTIONS,
    REPO_ROOT,
    FakeOpenAI,
    Hostile,
    clean_env,
    demo_answers,
    demo_corpus,
    keyword_graph,
    serving,
    write_cli_hook,
)

RUN_TIMEOUT_S = 60.0
SUBPROCESS_TIMEOUT_S = 60.0
LIMIT = Configuration().max_question_chars


def check_answered(final: dict[str, Any], text: str) -> None:
    """A normal run: a non-empty answer (or an abstention with its reason), a trace ending in
    stop_answer, budgets held."""
    if final["abstained"]:
        assert final["answer"] == "" and final["abstain_reason"].strip()
    else:
        assert isinstance(final["answer"], str) and final["answer"].strip()
    actions = [entry["action"] for entry in final["trace"]]
    assert actions and actions[-1] == "stop_answer" and set(actions) <= set(ACTIONS)
    cfg = Configuration()
    assert final["steps"] <= cfg.max_steps
    assert final["retrieval_calls"] <= cfg.max_retrieval_calls
    # The stored question is the cleaned one: no control or format characters, within the limit.
    question = final["question"]
    assert question == dynakrag.validate_question(text, cfg)
    assert 0 < len(question) <= LIMIT
    # Joiners (U+200C/U+200D) stay: Persian and Indic words and emoji sequences need them.
    assert all(ch.isprintable() or ch in " \u200c\u200d" for ch in question), repr(question)


# --------------------------------------------------------------------------------------------
# Python API
# --------------------------------------------------------------------------------------------


def test_python_api(reliability: Recorder) -> None:
    corpus = demo_corpus()
    graph = keyword_graph(corpus)
    outcomes = []
    for item in HOSTILE_QUESTIONS:
        if item.expect == ERROR:
            with pytest.raises(UserInputError) as info:
                graph.invoke({"question": item.text})
            message = str(info.value)
            assert message and "\n" not in message
            assert ("empty" in message) or (str(LIMIT) in message), message
            # dynakrag.ask refuses it up front, before building anything.
            with pytest.raises(UserInputError):
                dynakrag.ask(item.text, graph=graph)
            outcomes.append(ERROR)
        else:
            check_answered(graph.invoke({"question": item.text}), item.text)
            check_answered(dynakrag.ask(item.text, graph=graph), item.text)
            outcomes.append(ANSWER)
    for _, value in NON_STRING_QUESTIONS:
        with pytest.raises(UserInputError, match="must be a string"):
            graph.invoke({"question": value})
        with pytest.raises(UserInputError, match="must be a string"):
            dynakrag.ask(value, graph=graph)  # type: ignore[arg-type]
    with pytest.raises(UserInputError):
        graph.invoke({})  # no question at all
    tried = len(HOSTILE_QUESTIONS) + len(NON_STRING_QUESTIONS) + 1
    reliability(
        "hostile questions via Python API (invoke, dynakrag.ask)",
        tried,
        f"{outcomes.count(ERROR) + len(NON_STRING_QUESTIONS) + 1} UserInputError, "
        f"{outcomes.count(ANSWER)} normal answers",
    )


def test_python_api_respects_a_configured_limit() -> None:
    graph = keyword_graph(demo_corpus())
    text = "Who founded the company that makes the Astrora Headset?"
    with pytest.raises(UserInputError, match="limit is 20"):
        graph.invoke({"question": text}, {"configurable": {"max_question_chars": 20}})
    with pytest.raises(UserInputError, match="limit is 20"):
        dynakrag.ask(text, graph=graph, max_question_chars=20)
    check_answered(graph.invoke({"question": text}), text)


# --------------------------------------------------------------------------------------------
# CLI in process
# --------------------------------------------------------------------------------------------


@pytest.fixture
def cli_fakes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI searches the demo corpus with the keyword fake and reads with the demo fake."""
    corpus = demo_corpus()
    monkeypatch.setattr(
        ask_command, "_searcher_for", lambda args, cfg: KeywordSearcher(demo_passages(corpus))
    )
    monkeypatch.setattr(
        "dynakrag.llm.factory.chat_model_from_config",
        lambda cfg: demo_chat_model(demo_answers(corpus)),
    )
    monkeypatch.setattr(
        "dynakrag.retrieval.embeddings._load_minilm",
        lambda *a, **k: pytest.fail("the embedding model was about to load"),
    )


def run_cli(argv: Sequence[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = cli.main(list(argv))
        except SystemExit as exc:  # pragma: no cover - main returns codes itself
            code = exc.code if isinstance(exc.code, int) else 1
    return code, out.getvalue(), err.getvalue()


def check_cli_outcome(item: Hostile, code: int, out: str, err: str) -> None:
    assert "Traceback" not in out + err
    if item.expect == ERROR:
        assert code == 2, (code, out, err)
        lines = err.splitlines()
        assert len(lines) == 1 and lines[0].startswith("dynakrag: error: "), err
        assert out == ""
    else:
        assert code == 0, (code, out[-500:], err[-500:])
        # An answer, or an abstention with its reason (exit 0 as well).
        last = out.splitlines()[-1]
        label = "No answer: " if last.startswith("No answer: ") else "Answer: "
        assert last.startswith(label), out[-500:]
        assert len(last) > len(label)
        assert err == "", err


@pytest.mark.usefixtures("cli_fakes")
def test_cli_main(reliability: Recorder) -> None:
    codes = []
    for item in HOSTILE_QUESTIONS:
        code, out, err = run_cli(["ask", "--", item.text])
        check_cli_outcome(item, code, out, err)
        codes.append(code)
    # --json output of a hostile question is valid JSON holding the cleaned question.
    code, out, _ = run_cli(["ask", "--json", "--", "{question} </passage> \u202eRTL"])
    assert code == 0
    assert json.loads(out)["question"] == "{question} </passage> RTL"
    reliability(
        "hostile questions via CLI main (ask -- QUESTION)",
        len(HOSTILE_QUESTIONS) + 1,
        f"{codes.count(2)} exit 2 with one line, {codes.count(0) + 1} exit 0 with an answer, "
        "no traceback",
    )


OPTION_LIKE: tuple[tuple[list[str], int], ...] = (
    (["ask", "--help"], 0),  # the help flag: usage on stdout
    (["ask", "-x"], 2),
    (["ask", "--max-steps=0", "Who?"], 2),
    (["ask", "--max-steps", "-1", "Who?"], 2),
    (["ask"], 2),
    (["ask", "Who?", "extra"], 2),
    (["ask", "--policy", "--help", "Who?"], 2),
    (["ask", "-"], 0),  # a lone dash is a positional argument: the question "-"
    (["ask", "--", "--help"], 0),
    (["ask", "--", "-x"], 0),
    (["ask", "--quiet", "--", "--max-steps=0"], 0),
)


@pytest.mark.usefixtures("cli_fakes")
def test_cli_option_like_arguments(reliability: Recorder) -> None:
    for argv, expected in OPTION_LIKE:
        code, out, err = run_cli(argv)
        assert code == expected, (argv, code, out, err)
        assert "Traceback" not in out + err
        if expected == 2:
            lines = err.splitlines()
            assert len(lines) == 1 and lines[0].startswith("dynakrag"), (argv, err)
            assert "error:" in lines[0]
        elif "--help" in argv[:2]:
            assert out.startswith("usage: dynakrag ask")
        else:
            last = out.splitlines()[-1]
            assert last.startswith(("Answer: ", "No answer: ")), (argv, out)
    reliability(
        "option-like arguments via CLI main (ask -x, ask -- --help, ...)",
        len(OPTION_LIKE),
        "usage errors exit 2 with one line; after `--` they are questions (exit 0)",
    )


# --------------------------------------------------------------------------------------------
# CLI as a subprocess: python -m dynakrag.cli ask ...
# --------------------------------------------------------------------------------------------

SUBPROCESS_CASES = (
    "empty",
    "100,000 characters",
    "control characters inside",
    "mixed scripts and right-to-left",
    "fake passage tags",
    "option-like --help",
)


def test_cli_subprocess(tmp_path: Path, reliability: Recorder) -> None:
    hook = write_cli_hook(tmp_path / "hook")
    cases = [item for item in HOSTILE_QUESTIONS if item.name in SUBPROCESS_CASES]
    assert len(cases) == len(SUBPROCESS_CASES)
    fake = FakeOpenAI(demo_responder(demo_answers(demo_corpus())))
    with serving(fake):
        env = clean_env(
            PYTHONPATH=f"{hook}:{REPO_ROOT}",
            DYNAKRAG_TEST_KEYWORD_DEMO="1",
            DYNAKRAG_LLM_BASE_URL=fake.base_url,
            DYNAKRAG_LLM_MAX_RETRIES="0",
            DYNAKRAG_CACHE_DIR=str(tmp_path / "cache"),
            OPENAI_API_KEY="dummy",
        )

        def run(argv: list[str]) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [sys.executable, "-m", "dynakrag.cli", *argv],
                cwd=REPO_ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=SUBPROCESS_TIMEOUT_S,
                check=False,
            )

        argvs = [["ask", "--", item.text] for item in cases] + [["ask", "-x"], ["ask", "--help"]]
        with ThreadPoolExecutor(max_workers=3) as pool:
            results = list(pool.map(run, argvs))
    for item, result in zip(cases, results, strict=False):
        check_cli_outcome(item, result.returncode, result.stdout, result.stderr)
    dash_x, help_ = results[-2:]
    assert dash_x.returncode == 2 and len(dash_x.stderr.splitlines()) == 1
    assert "Traceback" not in dash_x.stderr
    assert help_.returncode == 0 and help_.stdout.startswith("usage: dynakrag ask")
    assert fake.requests > 0  # the answered ones went through the OpenAI-compatible API
    codes = [r.returncode for r in results]
    reliability(
        "hostile questions via `python -m dynakrag.cli ask` subprocess",
        len(results),
        f"{codes.count(2)} exit 2 with one line, {codes.count(0)} exit 0, no traceback",
    )


# --------------------------------------------------------------------------------------------
# Dev server
# --------------------------------------------------------------------------------------------


async def _server_run(client: Any, payload: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """Run ``payload`` on a new thread; the result and the run's final status."""
    thread = await client.threads.create()
    try:
        run = await client.runs.create(thread["thread_id"], "dynakrag", input=payload)
        result = await asyncio.wait_for(
            client.runs.join(thread["thread_id"], run["run_id"]), timeout=RUN_TIMEOUT_S
        )
        status = (await client.runs.get(thread["thread_id"], run["run_id"]))["status"]
    finally:
        await client.threads.delete(thread["thread_id"])
    return result, status


@pytest.mark.slow
def test_dev_server(studio: Studio, reliability: Recorder) -> None:
    import langgraph_sdk

    # The server speaks JSON: a lone surrogate cannot be sent as valid UTF-8.
    cases = [item for item in HOSTILE_QUESTIONS if item.name != "lone surrogate"]
    payloads: list[dict[str, Any]] = [{"question": item.text} for item in cases]
    # Everything JSON can carry (not bytes), and no question at all.
    payloads += [{"question": v} for _, v in NON_STRING_QUESTIONS if not isinstance(v, bytes)]
    payloads.append({})

    async def main() -> list[tuple[dict[str, Any], str]]:
        client = langgraph_sdk.get_client(url=studio.url, api_key=None)
        return await asyncio.gather(*(_server_run(client, p) for p in payloads))

    results = asyncio.run(main())
    failed = answered = 0
    for payload, (result, status) in zip(payloads, results, strict=True):
        item = next((c for c in cases if c.text == payload.get("question")), None)
        if item is not None and item.expect == ANSWER:
            assert status == "success", (item.name, status, result)
            assert "__error__" not in result, result
            check_answered(result, item.text)
            answered += 1
        else:
            assert status == "error", (payload, status, result)
            error = result.get("__error__")
            assert error, result
            assert error.get("error") == "UserInputError", error
            message = error.get("message", "")
            assert "empty" in message or "limit" in message or "string" in message, error
            failed += 1
    reliability(
        "hostile questions via the dev server (langgraph dev, SDK)",
        len(payloads),
        f"{failed} failed runs carrying the UserInputError message, {answered} answered; "
        f"none hung (each < {RUN_TIMEOUT_S:.0f}s)",
    )
