"""A provider's chat model named by one string (``llm``, ``--llm``, ``DYNAKRAG_LLM``), built by
LangChain's ``init_chat_model``: ``openai:<model>`` against a fake OpenAI server on loopback,
and the one-line errors of a name that cannot be built."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain_openai import ChatOpenAI

from dynakrag import cli
from dynakrag.cli import ask as ask_command
from dynakrag.configuration import BUILD_TIME_FIELDS, Configuration
from dynakrag.data.demo import demo_passages
from dynakrag.data.demo_corpus import generate_demo_corpus
from dynakrag.errors import ConfigurationError
from dynakrag.llm.client import Usage
from dynakrag.llm.factory import (
    config_identity,
    describe_backend,
    llm_client_from_config,
    llm_description,
    provider_chat_model,
    uses_embedded,
)
from dynakrag.llm.fake import ScriptedChatModel
from tests.fakes import KeywordSearcher, RecordingChatServer, demo_responder

MESSAGES = [("system", "You answer."), ("human", "Question: where?")]
REPLY = '{"answers": ["Velford"]}'


@pytest.fixture(autouse=True)
def _no_models_no_settings(no_models: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """No embedded model, and no DYNAKRAG_* or OPENAI_* setting from the caller's shell."""
    for name in list(os.environ):
        if name.startswith(("DYNAKRAG_", "OPENAI_")):
            monkeypatch.delenv(name)


def run_main(argv: Sequence[str]) -> int:
    try:
        return cli.main(list(argv))
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1


def test_an_openai_model_by_name_answers_from_the_providers_endpoint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with RecordingChatServer(lambda messages: REPLY) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        cfg = Configuration.from_env(llm="openai:tiny-local", llm_max_tokens=64)
        llm = llm_client_from_config(cfg)
        text, usage = llm.text(MESSAGES, max_tokens=16)
        reply, _ = llm.json(MESSAGES)
    assert text == REPLY and reply == {"answers": ["Velford"]}
    prompt_tokens = sum(len(content) for _, content in MESSAGES) // 4
    assert usage == Usage(1, prompt_tokens, len(REPLY) // 4 + 1)  # as the server counted
    first, second = server.bodies
    assert first["model"] == second["model"] == "tiny-local"
    assert first["temperature"] == 0
    # The call's budget, and the configured one when the call names none.
    assert (first["max_tokens"], second["max_tokens"]) == (16, 64)
    assert "response_format" not in first
    assert second["response_format"] == {"type": "json_object"}  # JSON mode: it is ChatOpenAI
    assert isinstance(llm.model, ChatOpenAI) and llm.model.max_retries == 0
    assert not uses_embedded(cfg)
    assert describe_backend(cfg) == "openai:tiny-local (init_chat_model)"
    assert config_identity(cfg) == "chat-model:openai:tiny-local|temperature=0|max_tokens=64"
    assert llm_description(cfg)["llm_identity"] == config_identity(cfg)


def test_llm_base_url_is_the_providers_base_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    with RecordingChatServer(lambda messages: "Velford") as server:
        cfg = Configuration.from_env(llm="openai:tiny-local", llm_base_url=server.base_url)
        text, _ = llm_client_from_config(cfg).text(MESSAGES)
    assert text == "Velford"
    assert [body["model"] for body in server.bodies] == ["tiny-local"]
    assert describe_backend(cfg) == f"openai:tiny-local at {server.base_url} (init_chat_model)"


def test_the_named_model_gets_the_configured_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    cfg = Configuration(llm="openai:tiny-local", llm_max_tokens=99, llm_timeout_s=7.5)
    model = provider_chat_model(cfg)
    assert isinstance(model, ChatOpenAI) and model.model_name == "tiny-local"
    assert (model.temperature, model.request_timeout, model.max_retries) == (0, 7.5, 0)
    # The budget where llama.cpp and vLLM read it (as the llm_base_url path puts it).
    assert model.extra_body == {"max_tokens": 99} and model.max_tokens is None


def test_the_environment_names_the_model_and_a_run_cannot_change_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DYNAKRAG_LLM", "openai:gpt-4o-mini")
    cfg = Configuration.from_env()
    assert cfg.llm == "openai:gpt-4o-mini"
    # An explicit value wins; a model name keeps its own colons.
    assert Configuration.from_env(llm="ollama:llama3.1:8b").llm == "ollama:llama3.1:8b"
    assert "llm" in BUILD_TIME_FIELDS
    with pytest.raises(ConfigurationError, match="'llm' is fixed"):
        cfg.for_run({"llm": "openai:gpt-4o"})


def test_a_chat_model_object_still_wins_over_the_named_one() -> None:
    cfg = Configuration(llm="nosuchprovider:model")  # never built: the object is used
    model = ScriptedChatModel(respond=lambda messages: "Velford")
    llm = llm_client_from_config(cfg, chat_model=model)
    assert llm.text(MESSAGES)[0] == "Velford"
    assert llm_description(cfg, model)["llm"] == "ScriptedChatModel"


@pytest.mark.parametrize(
    ("value", "named"),
    [
        ("gpt-4o-mini", "expected 'provider:model'"),
        (":gpt-4o-mini", "expected 'provider:model'"),
        ("openai:", "expected 'provider:model'"),
    ],
)
def test_a_name_without_provider_and_model_is_refused(value: str, named: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        Configuration.from_env(llm=value)
    message = str(caught.value)
    assert named in message and "'llm'" in message and "\n" not in message


@pytest.mark.parametrize(
    ("value", "named"),
    [
        ("nosuchprovider:model", "nosuchprovider"),  # no such provider: the known ones listed
        ("mistralai:mistral-small", "langchain-mistralai"),  # its package is not installed
        ("openai:gpt-4o-mini", "OPENAI_API_KEY"),  # no credentials
    ],
)
def test_a_model_that_cannot_be_built_is_one_configuration_error_line(
    value: str, named: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "langchain_mistralai", None)  # as if not installed
    cfg = Configuration.from_env(llm=value)
    with pytest.raises(ConfigurationError) as caught:
        llm_client_from_config(cfg)  # built at once, not on the first request
    message = str(caught.value)
    assert named in message and repr(value) in message and "\n" not in message


def test_ask_with_llm_answers_through_the_named_model(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], joint_env: None
) -> None:
    # The joint check (joint_env): the scripted reader answers its prompt, not a hop's.
    corpus = generate_demo_corpus(7)
    question = corpus.questions[0]
    monkeypatch.setattr(
        ask_command, "_searcher_for", lambda args, cfg: KeywordSearcher(demo_passages(corpus))
    )
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    with RecordingChatServer(demo_responder({question.question: question.answer})) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        code = run_main(["ask", "--llm", "openai:tiny-local", "--quiet", question.question])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert captured.out.strip() == f"Answer: {question.answer}"
    assert server.bodies and {body["model"] for body in server.bodies} == {"tiny-local"}


@pytest.mark.parametrize(
    ("value", "named"),
    [("gpt-4o-mini", "provider:model"), ("nosuchprovider:model", "nosuchprovider")],
)
def test_a_bad_llm_exits_2_with_one_line_before_anything_loads(
    value: str, named: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the index or the data was about to load")

    monkeypatch.setattr(ask_command, "_searcher_for", refuse)
    monkeypatch.setattr("dynakrag.eval.runner.evaluate", refuse)
    commands = [
        ["ask", "--llm", value, "Where?"],
        ["demo", "--llm", value],
        ["eval", "--dataset", "hotpotqa", "--method", "naive", "--out", str(tmp_path / "r.json")],
    ]
    commands[2] += ["--llm", value]
    for argv in commands:
        assert run_main(argv) == 2, argv
        captured = capsys.readouterr()
        lines = captured.err.splitlines()
        assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
        assert lines[0].startswith("dynakrag: error:") and named in lines[0]
        assert captured.out == ""
