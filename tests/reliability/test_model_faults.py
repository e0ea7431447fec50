"""Model-server faults: every run still ends within its budget, with an answer or exactly
"insufficient evidence", after a bounded number of model calls and in bounded time.

Two layers are tested: a seeded fault-injecting fake chat model behind ``LLMClient`` (retries
done by dynakrag), and the real ``ChatOpenAI`` client of ``chat_model_from_config`` against a
stdlib HTTP server on loopback that answers 429 / 5xx / garbage / nothing (retries done by the
OpenAI client, ``llm_max_retries``).
"""

from __future__ import annotations

import io
import itertools
import time
from collections import Counter
from contextlib import redirect_stderr, redirect_stdout
from typing import Any

import pytest

from dynakrag import cli, prompts
from dynakrag.cli import ask as ask_command
from dynakrag.configuration import Configuration
from dynakrag.data.demo import demo_passages
from dynakrag.errors import ModelUnavailableError
from dynakrag.graph.builder import build_graph
from dynakrag.llm.client import LLMClient
from dynakrag.state import ACTIONS
from tests.fakes import KeywordSearcher, demo_responder
from tests.joint import JOINT
from tests.reliability.conftest import Recorder
from tests.reliability.support import (
    FAULT_KINDS,
    NON_JSON_REPLY,
    OK,
    FakeOpenAI,
    demo_answers,
    demo_corpus,
    faulty_chat_model,
    free_port,
    serving,
)

RUNS = 100
FAULT_RATE = 0.3
MAX_RETRIES = 2
# Budgets cycled over the runs (max_steps, max_retrieval_calls).
BUDGETS = ((4, 4), (1, 1), (2, 3), (6, 2), (8, 8))


def max_model_calls(max_steps: int, max_retries: int) -> int:
    """The most model invocations one run may make.

    Logical requests: one decomposition (the first sufficiency check only; afterwards the
    sub-questions are known), at most one per control step (sufficiency_check or
    rewrite_query; acquisition actions other than rewrite make none), and one for the final
    answer. Each logical request is tried at most 1 + max_retries times (json_retries is 0).
    """
    return (1 + max_steps + 1) * (1 + max_retries)


def check_run(final: dict[str, Any], max_steps: int, max_retrieval_calls: int) -> None:
    actions = [entry["action"] for entry in final["trace"]]
    assert actions and actions[-1] == "stop_answer" and actions.count("stop_answer") == 1
    assert set(actions) <= set(ACTIONS)
    assert final["steps"] <= max_steps
    assert final["retrieval_calls"] <= max_retrieval_calls
    assert isinstance(final["answer"], str) and final["answer"].strip()


@pytest.mark.parametrize(
    "kinds",
    [(), *((kind,) for kind in FAULT_KINDS), FAULT_KINDS],
    ids=["no-faults-baseline", *FAULT_KINDS, "mixed"],
)
def test_fault_injecting_model(kinds: tuple[str, ...], reliability: Recorder) -> None:
    corpus = demo_corpus()
    rate = FAULT_RATE if kinds else 0.0
    model, injector = faulty_chat_model(corpus, rate=rate, kinds=kinds, seed=1234)
    llm = LLMClient(model, max_retries=MAX_RETRIES, backoff_s=0)
    graph = build_graph(KeywordSearcher(demo_passages(corpus)), llm=llm)
    outcomes: Counter[str] = Counter()
    worst_calls = 0
    for run in range(RUNS):
        question = corpus.questions[run % len(corpus.questions)]
        max_steps, max_retrieval = BUDGETS[run % len(BUDGETS)]
        configurable = {"max_steps": max_steps, "max_retrieval_calls": max_retrieval}
        before = injector.calls
        started = time.monotonic()
        final = graph.invoke({"question": question.question}, {"configurable": configurable})
        elapsed = time.monotonic() - started
        calls = injector.calls - before
        check_run(final, max_steps, max_retrieval)
        assert calls <= max_model_calls(max_steps, MAX_RETRIES), (run, calls)
        # Accounting is honest under faults: every attempt, failed or not, is counted.
        assert final["llm_calls"] == calls, (run, final["llm_calls"], calls)
        assert elapsed < 10.0, (run, elapsed)
        worst_calls = max(worst_calls, calls)
        answer = final["answer"]
        if answer == question.answer:
            outcomes["correct"] += 1
        elif answer == prompts.INSUFFICIENT_EVIDENCE:
            outcomes["insufficient evidence"] += 1
        else:
            # Only a garbage reply to the final-answer prompt is taken as an answer as is.
            assert "non_json" in kinds and answer == NON_JSON_REPLY.splitlines()[0], answer
            outcomes["garbage reply as answer"] += 1
    if kinds:  # the faults really happened, every kind of them
        assert sum(injector.faults.values()) > 0.2 * injector.calls
        assert set(injector.faults) == set(kinds)
    summary = ", ".join(f"{n} {what}" for what, n in outcomes.most_common())
    what = f"failing {FAULT_RATE:.0%} of calls: {'/'.join(kinds)}" if kinds else "without faults"
    reliability(
        f"fake model {what} (LLMClient max_retries={MAX_RETRIES})",
        RUNS,
        f"all within budget; <= {worst_calls} model calls a run "
        f"(bound (max_steps+2)x(1+{MAX_RETRIES})); {summary}; "
        f"{sum(injector.faults.values())} of {injector.calls} calls faulty",
    )


# --------------------------------------------------------------------------------------------
# The real OpenAI client against a loopback server
# --------------------------------------------------------------------------------------------


def http_graph(base_url: str, **settings: Any) -> Any:
    """The graph with the configured model: ChatOpenAI via chat_model_from_config."""
    corpus = demo_corpus()
    # Abstention off: these runs count answers the fake states without passages to ground them.
    cfg = Configuration(
        llm_base_url=base_url, llm_model="fake", abstain=False, **{**JOINT, **settings}
    )
    return build_graph(KeywordSearcher(demo_passages(corpus)), configuration=cfg), corpus


def test_http_429_then_500_then_reply(reliability: Recorder) -> None:
    corpus = demo_corpus()
    fake = FakeOpenAI(
        demo_responder(demo_answers(corpus)),
        itertools.cycle(["429", "500", OK]),
        # Servers may ask for a delay; a short one keeps the test fast.
        error_headers={"retry-after-ms": "5"},
    )
    questions = corpus.questions[:3]
    with serving(fake):
        graph, _ = http_graph(fake.base_url, llm_max_retries=2, llm_timeout_s=2)
        for question in questions:
            started = time.monotonic()
            final = graph.invoke({"question": question.question})
            assert time.monotonic() - started < 20
            check_run(final, 4, 4)
            # Every request got through on its third attempt: the answer is the right one.
            assert final["answer"] == question.answer
    counts = Counter(fake.outcomes)
    assert counts["429"] == counts["500"] == counts[OK] > 0
    reliability(
        "HTTP server answering 429, then 500, then a reply (ChatOpenAI, llm_max_retries=2)",
        len(questions),
        f"all answered correctly; {fake.requests} HTTP requests, 1 in 3 a success",
    )


HTTP_FAULTS = ("429", "500", "503", "garbage", "empty", "close", "hang")


def test_http_fault_mix_is_bounded(reliability: Recorder) -> None:
    corpus = demo_corpus()
    # Every other request fails, cycling through the faults.
    script = itertools.cycle([entry for fault in HTTP_FAULTS for entry in (fault, OK)])
    fake = FakeOpenAI(
        demo_responder(demo_answers(corpus)), script, error_headers={"retry-after-ms": "5"}
    )
    timeout, retries, runs = 0.3, 1, 6
    with serving(fake):
        graph, _ = http_graph(fake.base_url, llm_max_retries=retries, llm_timeout_s=timeout)
        for question in corpus.questions[:runs]:
            before = fake.requests
            started = time.monotonic()
            final = graph.invoke({"question": question.question})
            elapsed = time.monotonic() - started
            check_run(final, 4, 4)
            assert final["answer"] in {question.answer, prompts.INSUFFICIENT_EVIDENCE}
            requests = fake.requests - before
            assert requests <= max_model_calls(4, retries)
            # Time: each attempt ends by its timeout; the client's retry waits are short.
            assert elapsed < requests * (timeout + 1.5) + 2, (elapsed, requests)
    counts = Counter(fake.outcomes)
    assert set(HTTP_FAULTS) <= set(counts), counts
    reliability(
        "HTTP fault mix: 429/500/503/non-JSON body/empty/closed/hung (50% of requests)",
        runs,
        f"all ended within budget and time; {fake.requests} requests, "
        f"{sum(counts[f] for f in HTTP_FAULTS)} faulty",
    )


def test_closed_port_ends_in_bounded_time(reliability: Recorder) -> None:
    port = free_port()  # nothing listens there
    graph, corpus = http_graph(f"http://127.0.0.1:{port}/v1", llm_max_retries=1, llm_timeout_s=1)
    question = corpus.questions[0]
    started = time.monotonic()
    try:
        final = graph.invoke({"question": question.question})
    except ModelUnavailableError as exc:  # also acceptable: a clear, immediate error
        assert str(exc)
        held = "ModelUnavailableError"
    else:
        check_run(final, 4, 4)
        assert final["answer"] == prompts.INSUFFICIENT_EVIDENCE
        held = '"insufficient evidence"'
    elapsed = time.monotonic() - started
    assert elapsed < 15, elapsed
    reliability(
        "model endpoint on a closed port (connection refused, llm_max_retries=1)",
        1,
        f"{held} after {elapsed:.1f}s",
    )


def test_hung_server_ends_in_bounded_time(reliability: Recorder) -> None:
    corpus = demo_corpus()
    fake = FakeOpenAI(demo_responder(demo_answers(corpus)), itertools.repeat("hang"))
    timeout = 0.25
    with serving(fake):
        graph, _ = http_graph(fake.base_url, llm_max_retries=0, llm_timeout_s=timeout)
        started = time.monotonic()
        try:
            final = graph.invoke({"question": corpus.questions[0].question})
        except ModelUnavailableError as exc:  # also acceptable: a clear error
            assert str(exc)
            held = "ModelUnavailableError"
        else:
            check_run(final, 4, 4)
            assert final["answer"] == prompts.INSUFFICIENT_EVIDENCE
            held = '"insufficient evidence"'
        elapsed = time.monotonic() - started
    assert 0 < fake.requests <= max_model_calls(4, 0)
    assert elapsed < fake.requests * (timeout + 0.5) + 2, elapsed
    reliability(
        f"model server that never replies (llm_timeout_s={timeout})",
        1,
        f"{held} after {fake.requests} timed-out requests, {elapsed:.1f}s",
    )


def test_cli_unreachable_model_exits_1(monkeypatch: pytest.MonkeyPatch) -> None:
    corpus = demo_corpus()
    monkeypatch.setattr(
        ask_command, "_searcher_for", lambda args, cfg: KeywordSearcher(demo_passages(corpus))
    )
    monkeypatch.setenv("DYNAKRAG_LLM_BASE_URL", f"http://127.0.0.1:{free_port()}/v1")
    monkeypatch.setenv("DYNAKRAG_LLM_MAX_RETRIES", "0")
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = cli.main(["ask", "--quiet", corpus.questions[0].question])
    assert code == 1, (code, out.getvalue(), err.getvalue())
    assert len(err.getvalue().splitlines()) == 1


@pytest.fixture(autouse=True)
def _abstention_off(monkeypatch: pytest.MonkeyPatch, joint_env: None) -> None:
    """These tests count answers of fakes that state them without passages to ground them
    (abstention would turn each into a no-answer); abstention has its own tests. The joint
    check at the paper's budget (joint_env): the fakes answer its prompt, and the bound on
    model calls counts its requests."""
    monkeypatch.setenv("DYNAKRAG_ABSTAIN", "0")
