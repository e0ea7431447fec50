"""Controller comparisons in the evaluation: ``--policy`` / ``--ablate`` of the ``dynakrag``
method, gold for the oracle only, SR per retrieval call in the summary, and the eval CLI.

No model is loaded: fake readers and searchers, hand-built forests for the learned policy.
Tests reading benchmark rows skip when ``$DYNAKRAG_DATA_DIR`` has no data.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dynakrag import build_graph, cli
from dynakrag.actions.common import Resources
from dynakrag.configuration import Configuration
from dynakrag.data.datasets import QAExample, load_examples
from dynakrag.errors import UserInputError
from dynakrag.eval.methods import Method, MethodResult, get_method
from dynakrag.eval.methods.dynakrag import ABLATIONS, DynakragMethod
from dynakrag.eval.oracle import OraclePolicy
from dynakrag.eval.records import EvalRecord
from dynakrag.eval.report import compare_table
from dynakrag.eval.runner import evaluate, question_record, summarize_records
from dynakrag.graph.replay import replay
from dynakrag.llm.client import LLMClient
from dynakrag.policy.ablation import WithoutActions
from dynakrag.policy.features import FEATURE_NAMES, N_STATE_FEATURES
from dynakrag.policy.learned import LearnedPolicy
from dynakrag.policy.value_model import TreeEnsemble
from dynakrag.training.collect import demo_examples
from tests.fakes import KeywordSearcher, demo_chat_model
from tests.joint import joint_configuration
from tests.markers import needs_data

CFG = joint_configuration()  # the controller benchmark's setting: the paper's joint check
EXAMPLES = demo_examples()
ANSWERS = {e.question: e.answers[0] for e in EXAMPLES}
SAMPLE = EXAMPLES[:48:8] + EXAMPLES[48::3]


def llm() -> LLMClient:
    return LLMClient(demo_chat_model(ANSWERS))


def searcher() -> KeywordSearcher:
    return KeywordSearcher(EXAMPLES[0].passages)


def _tree(feature: list[int], threshold: list[float], value: list[float], n: int) -> TreeEnsemble:
    """One tree; ``feature[i] == -2`` marks leaf i; internal node i splits to 2i+1, 2i+2."""
    left = [2 * i + 1 if f >= 0 else -1 for i, f in enumerate(feature)]
    right = [2 * i + 2 if f >= 0 else -1 for i, f in enumerate(feature)]
    return TreeEnsemble(
        n_features=n,
        offsets=np.array([0, len(feature)]),
        children_left=np.array(left),
        children_right=np.array(right),
        feature=np.array(feature),
        threshold=np.array(threshold),
        value=np.array(value),
    )


@pytest.fixture(scope="module")
def learned_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A learned policy that prefers stopping (0.8) over acquiring (0.3), with a continuation
    model that always predicts a gain of 0.5: the guard keeps it going."""
    stop = FEATURE_NAMES.index("act_stop_answer")
    value = _tree([stop, -2, -2], [0.5, -2.0, -2.0], [0.0, 0.3, 0.8], len(FEATURE_NAMES))
    continuation = _tree([-2], [-2.0], [0.5], N_STATE_FEATURES)
    policy = LearnedPolicy(value, continuation)
    return policy.save(tmp_path_factory.mktemp("policy") / "guarded.npz")


def run_method(method: DynakragMethod, example: Any, **kwargs: Any) -> MethodResult:
    return method.run(example.question, searcher(), llm(), CFG, **kwargs)


# --------------------------------------------------------------------------------------------
# The dynakrag method: policies and ablations


def test_the_oracle_is_gold_aware_and_refuses_without_gold() -> None:
    method = DynakragMethod(policy="oracle")
    assert method.needs_gold and not DynakragMethod(policy="uniform").needs_gold
    with pytest.raises(UserInputError, match="gold"):
        run_method(method, EXAMPLES[0])
    result = run_method(method, EXAMPLES[0], gold=EXAMPLES[0].gold_sets)
    assert result.details["oracle"]["lookahead_steps"] > 0
    assert method.options()["policy"] == "oracle" and method.options()["oracle_horizon"] == 2


def test_named_policies_and_ablations_are_checked_when_the_method_is_built(
    learned_file: Path,
) -> None:
    with pytest.raises(UserInputError, match="unknown ablation"):
        get_method("dynakrag", ablate=["everything"])
    with pytest.raises(UserInputError, match="unknown policy"):
        get_method("dynakrag", policy="nope")
    for policy in ("uniform", "heuristic", "oracle"):
        with pytest.raises(UserInputError, match="learned policy"):
            get_method("dynakrag", policy=policy, ablate=["continuation"])
    method = get_method("dynakrag", policy=str(learned_file), ablate=list(ABLATIONS))
    assert method.options()["ablate"] == list(ABLATIONS)


def test_sufficiency_ablation_takes_the_check_out_of_the_valid_set() -> None:
    method = DynakragMethod(policy="heuristic", ablate=["sufficiency"])
    policy = method.make_policy(CFG, searcher(), llm())
    assert isinstance(policy, WithoutActions)
    assert "sufficiency_check" not in policy.allowed(["retrieve_more", "sufficiency_check"])
    baseline = DynakragMethod(policy="heuristic")
    assert any("sufficiency_check" in run_method(baseline, e).actions for e in SAMPLE)
    for example in SAMPLE:
        assert "sufficiency_check" not in run_method(method, example).actions
        final = build_graph(searcher(), policy=policy, llm=llm()).invoke(
            {"question": example.question}
        )
        assert all("sufficiency_check" not in entry["scores"] for entry in final["trace"])
    oracle = DynakragMethod(policy="oracle", ablate=["sufficiency"])
    made = oracle.make_policy(CFG, searcher(), llm(), EXAMPLES[0].gold_sets)
    assert isinstance(made, OraclePolicy) and made.withheld == {"sufficiency_check"}


def test_compression_ablation_passes_the_evidence_through() -> None:
    method = DynakragMethod(policy="fixed", ablate=["compression"])
    assert method.configured(CFG).compression == "passthrough"
    assert DynakragMethod(policy="fixed").configured(CFG).compression == CFG.compression
    dropped = {"heuristic": 0, "ablated": 0}
    for example in SAMPLE:
        for name, m in (("heuristic", DynakragMethod(policy="fixed")), ("ablated", method)):
            for step in run_method(m, example).details["trace"]:
                if step["action"] == "compress_answer_evidence":
                    dropped[name] += step["dropped"]
    assert dropped["ablated"] == 0 < dropped["heuristic"]


def test_continuation_ablation_switches_the_guard_off(learned_file: Path) -> None:
    guarded = DynakragMethod(policy=str(learned_file))
    ablated = DynakragMethod(policy=str(learned_file), ablate=["continuation"])
    on, off = (
        guarded.make_policy(CFG, searcher(), llm()),
        ablated.make_policy(CFG, searcher(), llm()),
    )
    assert isinstance(on, LearnedPolicy) and isinstance(off, LearnedPolicy)
    assert off.ablate_continuation and not on.ablate_continuation
    state = replay(EXAMPLES[0].question, ["retrieve_more"], Resources(searcher(), llm()), CFG)
    valid = ["retrieve_more", "bridge_entity_expand", "stop_answer"]
    assert on.guard_active(state, valid, CFG) and not off.guard_active(state, valid, CFG)
    # Without the guard it stops right after the first retrieval; with it, it goes on.
    assert run_method(ablated, EXAMPLES[0]).actions == ["retrieve_more", "stop_answer"]
    assert run_method(guarded, EXAMPLES[0]).actions.count("retrieve_more") > 1


# --------------------------------------------------------------------------------------------
# The runner and the summary


class Spy(Method):
    """Records the keyword arguments ``run`` gets."""

    name = "spy"

    def __init__(self, *, no_answer: bool = False, gold_aware: bool = False) -> None:
        super().__init__(no_answer=no_answer)
        self.gold_aware = gold_aware
        self.calls: list[dict[str, Any]] = []

    @property
    def needs_gold(self) -> bool:
        return self.gold_aware

    def run(self, question: str, searcher: Any, llm: Any, cfg: Any, **kwargs: Any) -> Any:
        self.calls.append(kwargs)
        return MethodResult(prediction="", evidence=[], actions=["noop"], retrieval_calls=1)


@needs_data
@pytest.mark.parametrize("gold_aware", [False, True])
def test_only_a_gold_aware_method_is_given_gold(tmp_path: Path, gold_aware: bool) -> None:
    spy = Spy(gold_aware=gold_aware)
    cfg = Configuration(cache_dir=tmp_path)
    result = evaluate("2wiki", "eval", "distractor", spy, retriever="bm25", limit=2, cfg=cfg,
                      progress=False, cache=False, no_answer=True)  # fmt: skip
    examples = load_examples("2wiki", "eval", 2)
    if gold_aware:
        assert [call["gold"] for call in spy.calls] == [ex.gold_sets for ex in examples]
    else:
        assert spy.calls == [{}, {}]
    assert result["meta"]["gold_aware"] is gold_aware


@needs_data
def test_oracle_through_the_runner(tmp_path: Path) -> None:
    examples = load_examples("2wiki", "eval", 2)
    model = demo_chat_model({ex.question: ex.answers[0] for ex in examples})
    result = evaluate("2wiki", "eval", "open", DynakragMethod(policy="oracle"),
                      retriever="bm25", limit=2, cfg=Configuration(cache_dir=tmp_path),
                      chat_model=model, progress=False, cache=False)  # fmt: skip
    summary = result["summary"]
    assert result["meta"]["method_options"]["policy"] == "oracle"
    assert summary["sr_per_retrieval_call"] == pytest.approx(
        summary["support_recall"] / summary["retrieval_calls"]
    )
    for record in result["questions"]:
        assert record["details"]["oracle"]["lookahead_steps"] > 0
        assert record["retrieval_calls"] >= 1 and record["prediction"]


def test_summary_has_sr_per_retrieval_call_as_a_ratio_of_means() -> None:
    example = QAExample(
        id="q", question="Q?", answers=("A",), support=("p",), passages=(), dataset="2wiki",
        row=0, split="eval",
    )  # fmt: skip
    answered = question_record(example, MethodResult("A", [], []), 0.1)

    def record(support_recall: float, retrieval_calls: int) -> EvalRecord:
        update = {"support_recall": support_recall, "retrieval_calls": retrieval_calls}
        return answered.model_copy(update=update)

    summary = summarize_records([record(1.0, 1), record(0.0, 0), record(0.5, 5)])
    assert summary.sr_per_retrieval_call == pytest.approx(0.5 / 2.0)
    assert summarize_records([record(1.0, 0)]).sr_per_retrieval_call is None
    assert summarize_records([]).sr_per_retrieval_call is None


def test_compare_table_shows_policy_ablations_and_sr_per_call() -> None:
    result = {
        "meta": {"method": "dynakrag", "dataset": "2wiki", "split": "eval", "setting": "open",
                 "retriever": "bm25", "method_options": {"policy": "/x/y/learned.npz",
                                                         "ablate": ["sufficiency"]}},
        "summary": {"n": 2, "support_recall": 0.5, "retrieval_calls": 2.0,
                    "sr_per_retrieval_call": 0.25},
    }  # fmt: skip
    lines = compare_table([result]).splitlines()
    assert "SR/retr." in lines[0]
    assert lines[2].startswith("| dynakrag (learned.npz, w/o sufficiency) | 2wiki/eval |")
    assert "| 0.250 |" in lines[2]


# --------------------------------------------------------------------------------------------
# The command line


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, Any]:
    """``dynakrag eval`` with ``evaluate`` replaced: what it was called with, no model, no data."""
    for name in list(os.environ):
        if name.startswith("DYNAKRAG_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("DYNAKRAG_CACHE_DIR", str(tmp_path))
    calls: dict[str, Any] = {}

    def fake_evaluate(dataset: str, split: str, setting: str, method: Any, **kwargs: Any) -> Any:
        calls.update(method=method, **kwargs)
        meta = {"method": method.name, "dataset": dataset, "split": split, "setting": setting,
                "retriever": kwargs["retriever"], "method_options": method.options(),
                "llm_cache": {"enabled": False}}  # fmt: skip
        return {"meta": meta, "summary": {"n": 0}, "questions": []}

    # A module that binds ``evaluate`` when first imported must not bind the fake for good
    # (calibrate did, when these tests ran first, and a later calibrate test got the fake).
    import dynakrag.training.calibrate  # noqa: F401

    monkeypatch.setattr("dynakrag.eval.runner.evaluate", fake_evaluate)
    return calls


def eval_argv(tmp_path: Path, *extra: str) -> list[str]:
    return ["eval", "--dataset", "2wiki", "--method", "dynakrag", "--retriever", "bm25",
            "--out", str(tmp_path / "run.json"), "--quiet", *extra]  # fmt: skip


def test_cli_passes_policy_ablations_and_oracle_horizon(
    captured: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = eval_argv(tmp_path, "--policy", "oracle", "--ablate", "sufficiency", "--ablate",
                     "compression", "--oracle-horizon", "3", "--no-answer")  # fmt: skip
    assert cli.main(argv) == 0
    method = captured["method"]
    assert isinstance(method, DynakragMethod) and method.no_answer
    assert method.policy == "oracle" and method.ablate == ("sufficiency", "compression")
    assert method.oracle_horizon == 3
    # the oracle is never a configured policy: the configuration keeps its default
    assert captured["cfg"].policy == Configuration().policy != "oracle"
    assert "dynakrag (oracle, w/o sufficiency, w/o compression)" in capsys.readouterr().out

    assert cli.main(eval_argv(tmp_path, "--policy", "fixed")) == 0
    assert captured["method"].policy == "fixed" and captured["cfg"].policy == "fixed"


def test_cli_accepts_a_policy_file_with_the_continuation_ablation(
    captured: dict[str, Any], tmp_path: Path, learned_file: Path
) -> None:
    argv = eval_argv(tmp_path, "--policy", str(learned_file), "--ablate", "continuation")
    assert cli.main(argv) == 0
    assert captured["method"].ablate == ("continuation",)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--ablate", "continuation", "--policy", "uniform"], "learned policy"),
        (["--ablate", "continuation", "--policy", "oracle"], "learned policy"),
        (["--oracle-horizon", "2"], "--oracle-horizon applies"),
        (["--policy", "no-such-policy"], "unknown policy"),
    ],
)
def test_cli_refuses_bad_combinations_before_anything_loads(
    captured: dict[str, Any],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    extra: list[str],
    message: str,
) -> None:
    assert cli.main(eval_argv(tmp_path, *extra)) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err
    assert not captured  # evaluate was never called


def test_cli_refuses_ablations_of_other_methods_and_unknown_names(
    captured: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["eval", "--dataset", "2wiki", "--method", "naive", "--ablate", "sufficiency",
            "--out", str(tmp_path / "r.json")]  # fmt: skip
    assert cli.main(argv) == 2
    assert "--ablate applies to --method dynakrag only" in capsys.readouterr().err
    assert cli.main(eval_argv(tmp_path, "--ablate", "everything")) == 2  # argparse choices
    assert "invalid choice" in capsys.readouterr().err
    assert not captured


def test_ask_refuses_the_oracle(
    captured: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["ask", "Who founded it?", "--policy", "oracle"]) == 2
    assert "gold support" in capsys.readouterr().err


def test_eval_help_documents_policies_and_ablations(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["eval", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    for word in ("--policy", "oracle", "fixed", "uniform", "--ablate", "sufficiency",
                 "compression", "continuation", "--oracle-horizon"):  # fmt: skip
        assert word in text
