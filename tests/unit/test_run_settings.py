"""Per-run settings as the graph's context schema, the environment read by pydantic-settings,
and the controller's routing visible in the graph's edges."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from dynakrag import ConfigurationError, RunSettings
from dynakrag.configuration import BUILD_TIME_FIELDS, BuildSettings, Configuration
from dynakrag.data.demo_corpus import DemoCorpus, generate_demo_corpus
from dynakrag.state import ACTIONS
from tests.unit.test_graph import graph_for, question


@pytest.fixture(scope="module")
def corpus() -> DemoCorpus:
    return generate_demo_corpus(7)


def actions(final: dict[str, Any]) -> list[str]:
    return [entry["action"] for entry in final["trace"]]


def test_the_two_kinds_of_settings_split_the_configuration() -> None:
    run, build = set(RunSettings.model_fields), set(BuildSettings.model_fields)
    assert not run & build
    assert run | build == set(Configuration.model_fields)
    assert build == BUILD_TIME_FIELDS
    assert {"llm", "retriever", "cache_dir", "embedded_model"} <= build
    assert all(field.description for field in Configuration.model_fields.values())


def test_a_run_context_changes_that_run_only(corpus: DemoCorpus) -> None:
    q = question(corpus, "q-hq-00").question
    graph = graph_for(corpus)
    default = graph.invoke({"question": q})
    short = graph.invoke({"question": q}, context=RunSettings(max_steps=1))
    assert short["steps"] == 1 and default["steps"] > 1
    # A dict is coerced to the schema; the older configurable path gives the same run.
    as_dict = graph.invoke({"question": q}, context={"max_steps": 1})
    configurable = graph.invoke({"question": q}, {"configurable": {"max_steps": 1}})
    assert actions(as_dict) == actions(configurable) == actions(short)
    assert actions(graph.invoke({"question": q})) == actions(default)


def test_the_context_wins_over_configurable(corpus: DemoCorpus) -> None:
    q = question(corpus, "q-hq-00").question
    final = graph_for(corpus).invoke(
        {"question": q}, {"configurable": {"max_steps": 3}}, context={"max_steps": 1}
    )
    assert final["steps"] == 1


@pytest.mark.parametrize("field", ["llm", "retriever", "cache_dir"])
def test_a_context_cannot_name_a_build_time_setting(corpus: DemoCorpus, field: str) -> None:
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        RunSettings(**{field: "x"})
    with pytest.raises(ValidationError, match=field):
        graph_for(corpus).invoke({"question": "Where?"}, context={field: "x"})


def test_for_run_explains_a_build_time_field_in_a_context_mapping() -> None:
    with pytest.raises(ConfigurationError, match=r"^'llm_model' is fixed when the graph is built"):
        Configuration().for_run(None, {"llm_model": "other"})
    with pytest.raises(ConfigurationError, match="invalid setting 'max_steps'"):
        Configuration().for_run(None, {"max_steps": 0})


def test_the_controller_routes_to_every_action_by_command(corpus: DemoCorpus) -> None:
    drawn = graph_for(corpus).get_graph()
    targets = {edge.target for edge in drawn.edges if edge.source == "controller"}
    assert targets == set(ACTIONS)


def test_studio_form_lists_the_run_settings(corpus: DemoCorpus) -> None:
    schema = graph_for(corpus).get_context_jsonschema()
    assert set(schema["properties"]) == set(RunSettings.model_fields)
    assert schema["properties"]["max_steps"]["description"]


def test_the_chain_is_the_default_and_the_joint_check_stays_available(isolated_env: None) -> None:
    cfg = Configuration.from_env()
    assert (cfg.sub_question_answering, cfg.max_steps, cfg.max_retrieval_calls) == ("chain", 16, 10)
    assert RunSettings() == RunSettings(
        sub_question_answering="chain", max_steps=16, max_retrieval_calls=10
    )
    for mode in ("joint", "sequential"):
        assert Configuration(sub_question_answering=mode).sub_question_answering == mode


def test_environment_variables_are_read_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    # Values other than the defaults (the chain, 16 and 10), so each is read from its variable.
    monkeypatch.setenv("DYNAKRAG_SUB_QUESTION_ANSWERING", "joint")
    monkeypatch.setenv("DYNAKRAG_MAX_STEPS", "4")
    monkeypatch.setenv("DYNAKRAG_MAX_RETRIEVAL_CALLS", "4")
    monkeypatch.setenv("DYNAKRAG_LLM", "openai:gpt-4o-mini")
    monkeypatch.setenv("DYNAKRAG_RETRIEVER", "bm25")
    monkeypatch.setenv("DYNAKRAG_CACHE_DIR", "/tmp/dynakrag-cache")
    monkeypatch.setenv("DYNAKRAG_TOKEN_BUDGET", "")  # empty: unset
    cfg = Configuration.from_env(seed=5, policy=None)
    assert (cfg.sub_question_answering, cfg.max_steps, cfg.max_retrieval_calls) == ("joint", 4, 4)
    assert (cfg.llm, cfg.retriever, cfg.seed, cfg.token_budget) == (
        "openai:gpt-4o-mini",
        "bm25",
        5,
        None,
    )
    assert cfg.cache_dir == Path("/tmp/dynakrag-cache") and cfg.policy == Configuration().policy
    assert type(cfg) is Configuration
    # What the environment and the caller set counts as chosen; the rest are defaults.
    assert "max_steps" in cfg.model_fields_set and "policy" not in cfg.model_fields_set
    # Keyword arguments win over the environment.
    assert Configuration.from_env(max_steps=2).max_steps == 2


def test_a_bad_environment_value_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DYNAKRAG_MAX_STEPS", "99")
    with pytest.raises(ConfigurationError, match=r"^invalid setting 'max_steps'"):
        Configuration.from_env()
