"""Issue #24 on the fake model: collection cheap enough for every train row. The paper's
support-recall labels without answers, one answer per visited state, the per-question request
memo, stratified samples that grow over a fixed corpus, resuming from the shipped gzip
records, cut JSON replies asked again or repaired, the progress line and the summary."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_openai import ChatOpenAI
from openai import LengthFinishReasonError
from openai.types.chat import ChatCompletion
from pydantic import Field

from dynakrag import prompts
from dynakrag.cli import collect as collect_command
from dynakrag.cli.collect import select_questions
from dynakrag.data.datasets import QAExample, open_corpus
from dynakrag.llm.client import LLMClient, Usage, repair_cut_json
from dynakrag.llm.fake import ScriptedChatModel
from dynakrag.policy.learned import LearnedPolicy
from dynakrag.state import ACQUISITION_ACTIONS, ACTIONS
from dynakrag.training import collect as training_collect
from dynakrag.training.collect import collect, training_world_examples
from dynakrag.training.collection_report import CollectionReport
from dynakrag.training.fit import fit_policy
from dynakrag.training.records import TEXT_FIELDS, read_records, shareable
from dynakrag.training.sampling import question_stratum, stratified_order, stratified_sample
from dynakrag.training.workers import corpus_digest
from tests.fakes import demo_responder, prompt_kind
from tests.markers import needs_data
from tests.unit.test_collect_and_train import (
    ANSWERS,
    CFG,
    EXAMPLES,
    TRAIN,
    llm,
    run_cli,
    searcher_for,
)

COLLECT = ["collect", "--dataset", "demo", "--retriever", "bm25"]


class CountingModel:
    """The demo reader, counting the requests it gets by prompt kind and their text."""

    def __init__(self, reader: Callable[[list[BaseMessage]], str] | None = None) -> None:
        self.kinds: Counter[str] = Counter()
        self.prompts: Counter[tuple[str, str]] = Counter()
        self.reader = reader or demo_responder(ANSWERS)

    def __call__(self, messages: list[BaseMessage]) -> str:
        kind = prompt_kind(messages)
        self.kinds[kind] += 1
        self.prompts[(kind, "\n".join(str(m.content) for m in messages))] += 1
        return self.reader(messages)

    def client(self) -> LLMClient:
        return LLMClient(ScriptedChatModel(respond=self))


def collected(labels: str, *, memo: bool = True, examples: Any = None, **options: Any) -> Any:
    """(records, counting model, report) of a collection on the fake model."""
    model = CountingModel()
    report = CollectionReport()
    made = list(
        collect(
            TRAIN[:6] if examples is None else examples,
            searcher_for,
            model.client(),
            CFG,
            progress=False,
            labels=labels,
            memo=memo,
            report=report,
            **options,
        )
    )
    return made, model, report


@pytest.fixture(scope="module")
def recall() -> tuple[list[dict[str, Any]], CountingModel, CollectionReport]:
    return collected("recall")


@pytest.fixture(scope="module")
def answer() -> tuple[list[dict[str, Any]], CountingModel, CollectionReport]:
    """The answer labels of the same questions, every request asked."""
    return collected("answer", memo=False)


# --------------------------------------------------------------------------------------------
# Labels


def test_recall_labels_generate_no_answer(recall: Any) -> None:
    records, model, report = recall
    assert records and model.kinds[prompts.ANSWER] == 0  # no answer in any branch
    assert {r["example_id"] for r in records} == {e.id for e in TRAIN[:6]}
    for r in records:
        action, before, after = r["action"], r["sr_before"], r["sr_after"]
        answer_actions = {
            "sufficiency_check": 1.0 if before >= 1.0 else 0.0,  # the evidence covers SR
            "stop_answer": before,  # the coverage reached
            "compress_answer_evidence": after,  # the coverage kept
        }
        assert action in ACQUISITION_ACTIONS or action in answer_actions
        expected = answer_actions.get(action, after - before)
        assert r["label"] == pytest.approx(expected), r
        assert r["label_version"] == 1 and r["answer"] is None and r["f1_after"] is None
        assert r["continuation"] == r["continuation_support"]
        if action == "stop_answer" or (action == "sufficiency_check" and not r["chosen"]):
            # Labelled from SR(s) alone: never run.
            assert not r["executed"] and set(r["deltas"].values()) == {0}
        else:
            assert r["executed"]
    checks = [r for r in records if r["action"] == "sufficiency_check"]
    assert any(r["chosen"] and r["deltas"]["llm_calls"] > 0 for r in checks)
    assert any(not r["chosen"] for r in checks) and any(r["label"] == 1.0 for r in checks)
    # The report counts what the model answered, question by question.
    assert report.questions == 6 and report.records == len(records) and not report.left_out
    assert report.spent.llm_calls == sum(model.kinds.values())


def test_recall_labels_cost_a_fraction_of_the_answer_labels(recall: Any, answer: Any) -> None:
    records, model, _ = recall
    answer_records, answer_model, _ = answer
    assert answer_model.kinds[prompts.ANSWER] > 0
    # The same states and actions are labelled, with far fewer model calls.
    assert sorted((r["example_id"], r["history"], r["action"]) for r in records) == sorted(
        (r["example_id"], r["history"], r["action"]) for r in answer_records
    )
    assert 3 * sum(model.kinds.values()) < sum(answer_model.kinds.values())


def test_visited_answer_labels_answer_each_visited_state_once(answer: Any) -> None:
    records, model, _ = collected("visited-answer", memo=False)
    answered = set()
    for r in records:
        history = (r["example_id"], tuple(r["history"]))
        if r["action"] == "stop_answer":
            answered.add(history)
            assert r["executed"] and r["label"] == r["f1_after"] == r["f1_before"]
        elif r["action"] in ("compress_answer_evidence", "sufficiency_check"):
            if r["chosen"]:
                answered.add((*history[:1], (*history[1], r["action"])))
                assert r["label_version"] == 2 and r["label"] == r["f1_after"]
            else:  # no answer in a branch no rollout takes: its recall label
                assert r["label_version"] == 1 and r["answer"] is None
    assert model.kinds[prompts.ANSWER] == len(answered)
    assert model.kinds[prompts.ANSWER] < answer[1].kinds[prompts.ANSWER]


def test_unknown_labels_are_refused() -> None:
    with pytest.raises(Exception, match="unknown labels"):
        list(collect(TRAIN[:1], searcher_for, llm(), CFG, progress=False, labels="f1"))


def test_a_policy_fits_from_recall_records(recall: Any, answer: Any, tmp_path: Path) -> None:
    records, _, _ = recall
    policy, report = fit_policy(records, n_estimators=8, progress=False)
    assert report.label_versions == {"1": len(records)}
    assert report.feature_version == policy.feature_version
    assert all(r["feature_version"] == policy.feature_version for r in records)
    assert "warning" not in report.format()
    loaded = LearnedPolicy.load(policy.save(tmp_path / "p.npz"))
    state = records[-1]["state"]
    assert loaded.choose(state, records[-1]["valid"], CFG) in records[-1]["valid"]
    # Pooled with answer-labelled records, the fit says the targets mix two scales.
    _, mixed = fit_policy(records + answer[0], n_estimators=4, progress=False)
    assert set(mixed.label_versions) == {"1", "2"} and "warning" in mixed.format()


# --------------------------------------------------------------------------------------------
# The request memo


def test_the_memo_asks_each_request_once_and_changes_no_record(recall: Any) -> None:
    records, model, report = recall
    plain_records, plain_model, plain_report = collected("recall", memo=False)
    assert records == plain_records  # replies from memory carry their usage: same states
    assert report.memo_hits > 0 and plain_report.memo_hits == 0
    assert sum(model.kinds.values()) + report.memo_hits == sum(plain_model.kinds.values())
    # A rewrite (the sub-query) repeated from several states is generated once per question.
    rewrites = [n for (kind, _), n in plain_model.prompts.items() if kind == prompts.REWRITE]
    assert max(rewrites) > 1
    assert all(n == 1 for (kind, _), n in model.prompts.items() if kind == prompts.REWRITE)
    assert model.kinds[prompts.REWRITE] < plain_model.kinds[prompts.REWRITE]
    assert report.spent.llm_calls < plain_report.spent.llm_calls


# --------------------------------------------------------------------------------------------
# Stratified samples over a fixed corpus


def test_a_stratified_sample_grows_by_prefix_in_proportion() -> None:
    order = stratified_order(EXAMPLES, seed=13)
    assert sorted(e.id for e in order) == sorted(e.id for e in EXAMPLES)
    assert order != list(EXAMPLES) and stratified_order(EXAMPLES, seed=14) != order
    sizes = Counter(question_stratum(e) for e in EXAMPLES)
    assert len(sizes) > 3
    for k in range(1, len(EXAMPLES) + 1):
        sample = stratified_sample(EXAMPLES, k, seed=13)
        assert sample == order[:k]  # a larger sample keeps every question of a smaller one
        counts = Counter(question_stratum(e) for e in sample)
        for stratum, n in sizes.items():
            assert abs(counts[stratum] - k * n / len(EXAMPLES)) <= 1.0, (k, stratum)


def test_the_open_corpus_does_not_depend_on_the_selection() -> None:
    digests = set()
    for options in ({"sample": 3}, {"sample": 9}, {"limit": 2}, {}):
        pool, selected = select_questions("demo", **options)
        digests.add(corpus_digest(open_corpus(pool)))
        assert set(selected) <= set(pool)
    assert len(digests) == 1


@needs_data
def test_the_open_corpus_of_a_dataset_is_its_whole_train_pool() -> None:
    small_pool, small = select_questions("2wiki", sample=5)
    large_pool, large = select_questions("2wiki", sample=20)
    assert small == large[:5]
    assert corpus_digest(open_corpus(small_pool)) == corpus_digest(open_corpus(large_pool))
    assert {p.id for e in large for p in e.passages} <= {p.id for p in open_corpus(large_pool)}


# --------------------------------------------------------------------------------------------
# Resuming and extending


def _sorted_gzip(sources: list[Path], target: Path) -> Path:
    """What make default-policy ships: ``dynakrag pack-records`` of the runs."""
    assert run_cli(["pack-records", *map(str, sources), "--out", str(target)]) == 0
    return target


def _shareable_lines(path: Path) -> list[str]:
    return sorted(json.dumps(shareable(r), ensure_ascii=False) for r in read_records(path))


def _spy_on_collected_questions(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    started: list[str] = []
    real = training_collect.collect

    def spy(examples: Any, *args: Any, **kwargs: Any) -> Any:
        def tracked() -> Any:
            for example in examples:
                started.append(example.id)
                yield example

        return real(tracked(), *args, **kwargs)

    monkeypatch.setattr(training_collect, "collect", spy)
    return started


def test_resume_from_the_shipped_gzip_records_and_extend_the_sample(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(collect_command, "make_llm", lambda cfg, **options: llm())
    started = _spy_on_collected_questions(monkeypatch)
    open_setting = [*COLLECT, "--setting", "open"]
    reference = tmp_path / "reference.jsonl"
    assert run_cli([*open_setting, "--sample", "6", "--out", str(reference)]) == 0
    first = tmp_path / "first.jsonl"
    assert run_cli([*open_setting, "--sample", "4", "--out", str(first)]) == 0
    shipped = _sorted_gzip([first], tmp_path / "records.jsonl.gz")
    started.clear()
    capsys.readouterr()

    # A fresh clone: no runs yet, the shipped records, a larger sample.
    out = tmp_path / "runs" / "demo.jsonl"
    argv = [*open_setting, "--sample", "6", "--resume-from", str(shipped), "--out", str(out)]
    assert run_cli(argv) == 0
    order = [e.id for e in stratified_sample(training_world_examples(), 6, seed=13)]
    assert started == order[4:]  # only the new questions were collected
    assert "4 finished questions taken from the resume points" in capsys.readouterr().out
    lines = out.read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(set(lines))  # no record twice
    assert _shareable_lines(out) == _shareable_lines(reference)
    collections = {json.dumps(r["collection"], sort_keys=True) for r in read_records(out)}
    assert len(collections) == 1  # one corpus digest for samples of 4 and 6

    # Again, with the runs file there and the records shipped from it: nothing to do and
    # nothing written twice.
    shipped = _sorted_gzip([out], tmp_path / "records.jsonl.gz")
    started.clear()
    before = out.read_bytes()
    assert run_cli(argv) == 0
    assert started == [] and out.read_bytes() == before
    assert _sorted_gzip([out], tmp_path / "again.jsonl.gz").read_bytes() == shipped.read_bytes()


def test_packed_records_hold_no_text_of_the_data_and_train_the_same_policy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(collect_command, "make_llm", lambda cfg, **options: llm())
    runs = tmp_path / "demo.jsonl"
    assert run_cli([*COLLECT, "--setting", "open", "--sample", "4", "--out", str(runs)]) == 0
    raw = read_records(runs)
    assert all("state" in r for r in raw)
    packed = _sorted_gzip([runs], tmp_path / "records.jsonl.gz")
    text = gzip.decompress(packed.read_bytes()).decode("utf-8")
    questions = {r["state"]["question"] for r in raw}
    passages = {d["text"] for r in raw for d in r["state"].get("evidence", [])}
    assert questions and passages
    assert not any(q in text for q in questions | passages)
    shipped = read_records(packed)
    assert len(shipped) == len(raw) and not any(k in r for r in shipped for k in TEXT_FIELDS)
    # Packing twice gives the same bytes: it is what make default-policy rebuilds.
    assert _sorted_gzip([packed], tmp_path / "again.jsonl.gz").read_bytes() == packed.read_bytes()
    # The stored features train the policy the text would have given.
    from_raw, _ = fit_policy(raw, n_estimators=20, progress=False)
    from_packed, _ = fit_policy(shipped, n_estimators=20, progress=False)
    state = raw[0]["state"]
    valid = raw[0]["valid"]
    assert from_raw.scores(state, valid, CFG) == from_packed.scores(state, valid, CFG)


def test_records_of_other_settings_are_not_resumed_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(collect_command, "make_llm", lambda cfg, **options: llm())
    started = _spy_on_collected_questions(monkeypatch)
    answers = tmp_path / "answers.jsonl"
    assert run_cli([*COLLECT, "--limit", "2", "--labels", "answer", "--out", str(answers)]) == 0

    def resumed_from(records: Path, out: Path) -> None:
        """Resume ``out`` from ``records`` of other settings: every question is collected."""
        shipped = _sorted_gzip([records], records.with_suffix(".jsonl.gz"))
        started.clear()
        capsys.readouterr()
        argv = [*COLLECT, "--limit", "2", "--resume-from", str(shipped), "--out", str(out)]
        assert run_cli(argv) == 0
        assert started == [e.id for e in training_world_examples()[:2]]
        assert "2 more were collected with other settings" in capsys.readouterr().out

    out = tmp_path / "recall.jsonl"
    resumed_from(answers, out)
    assert {r["label_version"] for r in read_records(out)} == {1}

    # Records of the joint check at the paper's budget describe other decisions than the
    # chain's: the controller's settings are part of the collection's.
    monkeypatch.setenv("DYNAKRAG_SUB_QUESTION_ANSWERING", "joint")
    joint = tmp_path / "joint.jsonl"
    assert run_cli([*COLLECT, "--limit", "2", "--out", str(joint)]) == 0
    assert {
        r["collection"]["controller"]["sub_question_answering"] for r in read_records(joint)
    } == {"joint"}
    monkeypatch.delenv("DYNAKRAG_SUB_QUESTION_ANSWERING")
    resumed_from(joint, tmp_path / "chain.jsonl")


# --------------------------------------------------------------------------------------------
# Replies cut at their token budget


def _cut(partial: str) -> LengthFinishReasonError:
    completion = ChatCompletion.model_validate(
        {
            "id": "cut",
            "object": "chat.completion",
            "created": 0,
            "model": "fake",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "length",
                    "message": {"role": "assistant", "content": partial},
                }
            ],
            "usage": {"prompt_tokens": 100, "completion_tokens": 160, "total_tokens": 260},
        }
    )
    return LengthFinishReasonError(completion=completion)


class BudgetedModel(ChatOpenAI):
    """An OpenAI-compatible model (so requests carry their token budget) answering with the
    demo reader, except that ``cut(kind, question, budget)`` may cut a reply at its budget
    (returning the text it got to). Records each request's (kind, budget)."""

    budgets: list[tuple[str, int]] = Field(default_factory=list)
    cut: Any = None

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        kind = prompt_kind(messages)
        budget = int(kw["extra_body"]["max_tokens"])
        self.budgets.append((kind, budget))
        partial = self.cut(kind, str(messages[-1].content), budget) if self.cut else None
        if partial is not None:
            raise _cut(partial)
        text = demo_responder(ANSWERS)(messages)
        usage = {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}
        message = AIMessage(content=text, usage_metadata=usage)
        return ChatResult(generations=[ChatGeneration(message=message)])


def budgeted(cut: Any) -> BudgetedModel:
    return BudgetedModel(
        model="fake",
        api_key="not-needed",
        base_url="http://127.0.0.1:9/v1",
        extra_body={"max_tokens": 256},
        cut=cut,
    )


def test_a_cut_json_reply_is_asked_again_with_a_larger_budget() -> None:
    # The decomposition is cut at its 160 tokens once, as the HotpotQA question was.
    def cut(kind: str, text: str, budget: int) -> str | None:
        return '{"sub_questions": ["Who' if kind == prompts.DECOMPOSE and budget < 256 else None

    model = budgeted(cut)
    report = CollectionReport()
    made = list(
        collect(TRAIN[:3], searcher_for, LLMClient(model), CFG, progress=False, report=report)
    )
    assert {r["example_id"] for r in made} == {e.id for e in TRAIN[:3]}
    assert not report.left_out
    asked = [budget for kind, budget in model.budgets if kind == prompts.DECOMPOSE]
    assert asked and asked[:2] == [prompts.DECOMPOSE_MAX_TOKENS, 256]


def test_a_reply_cut_again_is_repaired_or_leaves_its_question_out_with_the_reason(
    caplog: pytest.LogCaptureFixture,
) -> None:
    unlucky = TRAIN[1].question

    def cut(kind: str, text: str, budget: int) -> str | None:
        if kind == prompts.DECOMPOSE:  # always cut, but with a complete first item
            return '{"sub_questions": ["Who is it?", "And th'
        if kind == prompts.SUFFICIENCY and unlucky in text:
            return '{"answ'  # nothing complete to keep
        return None

    model = budgeted(cut)
    report = CollectionReport()
    made = list(
        collect(TRAIN[:3], searcher_for, LLMClient(model), CFG, progress=False, report=report)
    )
    assert {r["example_id"] for r in made} == {TRAIN[0].id, TRAIN[2].id}  # repaired
    assert [(d, q) for d, q, _ in report.left_out] == [("demo", TRAIN[1].id)]
    reason = report.left_out[0][2]
    assert "LengthFinishReasonError" in reason and "length limit" in reason
    assert f"Left out 1 questions:\n  demo {TRAIN[1].id}: a model request failed" in (
        report.summary()
    )
    # Each cut request was asked at most twice: at its budget, then with room to finish.
    kinds = Counter(kind for kind, _ in model.budgets)
    assert kinds[prompts.DECOMPOSE] == 2 * len({e.question for e in TRAIN[:3]})


def test_repair_keeps_the_complete_items_of_a_cut_json_object() -> None:
    assert repair_cut_json('{"sub_questions": ["Who made X?", "Where was he bo') == {
        "sub_questions": ["Who made X?"]
    }
    assert repair_cut_json('{"answers": ["a", "b"], "more": [') == {"answers": ["a", "b"]}
    assert repair_cut_json('{"answers": ["a \\"b\\"", "c') == {"answers": ['a "b"']}
    assert repair_cut_json('{"ans') is None and repair_cut_json("") is None


# --------------------------------------------------------------------------------------------
# Progress and summary


def test_collect_prints_progress_with_an_eta_and_a_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(collect_command, "make_llm", lambda cfg, **options: llm())
    out = tmp_path / "t.jsonl"
    assert run_cli([*COLLECT, "--sample", "3", "--out", str(out)]) == 0
    captured = capsys.readouterr()
    progress = [line for line in captured.err.splitlines() if line.startswith("collecting:")]
    assert [line.split()[1] for line in progress] == ["1/3", "2/3", "3/3"]
    assert all("s/question, ETA" in line for line in progress)
    assert "Collected 3 questions" in captured.out and "LLM calls" in captured.out
    assert "Left out: none" in captured.out
    # The defaults are the cheap settings, and the records say so.
    settings = read_records(out)[0]["collection"]
    assert settings["labels"] == "recall" and settings["rollouts"] == 1


def test_the_report_gives_the_eta_from_the_seconds_per_question() -> None:
    lines: list[str] = []

    class Stream:
        def write(self, text: str) -> None:
            lines.append(text)

        def flush(self) -> None:
            pass

    report = CollectionReport(total=4, done_before=6, stream=Stream())  # type: ignore[arg-type]
    example = QAExample("q", "?", ("a",), ("p",), (), "demo", 0, "train")
    report.collected(example, 20.0, Usage(3, 300, 30), 1, 10)
    report.leave_out(example, "a model request failed (boom)", 10.0)
    assert report.seconds_per_question == 15.0 and report.eta_seconds() == 30.0
    assert lines[-1].startswith("collecting: 8/10 questions, 15.0 s/question, ETA 30 s")
    assert report.to_dict()["per_question"]["llm_calls"] == 3.0


# --------------------------------------------------------------------------------------------
# The collection-cost benchmark


@needs_data
def test_the_collection_cost_benchmark_measures_each_lever(tmp_path: Path) -> None:
    from tests.benchmark_scripts import benchmark_module

    argv = ["--datasets", "hotpotqa", "--limit", "3", "--fake", "--retriever", "bm25"]
    argv += ["--n-estimators", "5", "--out-dir", str(tmp_path), "--name", "cost"]
    with benchmark_module("collection_cost") as module:
        assert module.main(argv) == 0
    result = json.loads((tmp_path / "cost.json").read_text())
    rows = result["rows"]
    assert [row["lever"] for row in rows] == list(module.DEFAULT_LEVERS)
    assert result["meta"]["run_order"] == list(module.DEFAULT_LEVERS)[::-1]
    calls = [row["per_question"]["llm_calls"] for row in rows]
    tokens = [row["per_question"]["prompt_tokens"] for row in rows]
    assert calls == sorted(calls, reverse=True) and calls[-1] < calls[0] / 3
    assert tokens == sorted(tokens, reverse=True)
    assert all(row["questions"] == 3 and not row["left_out"] for row in rows)
    assert rows[2]["memo_hits"] > 0 and rows[1]["memo_hits"] == 0
    assert rows[0]["records"] == rows[1]["records"] == rows[2]["records"] > rows[3]["records"]
    assert set(rows[0]["r2_by_action"]) == set(ACTIONS)
    table = (tmp_path / "cost.md").read_text()
    assert "| + rollouts 1 | recall | yes | 1 |" in table and "Held-out R²" in table

    # Each lever x dataset is stored whole: a rerun computes nothing, the same rows come out.
    def refuse(messages: list[BaseMessage]) -> str:
        raise AssertionError("a stored lever run was collected again")

    with benchmark_module("collection_cost") as module:
        assert module.main(argv, chat_model=ScriptedChatModel(respond=refuse)) == 0
    again = json.loads((tmp_path / "cost.json").read_text())
    assert again["rows"] == rows and len(list((tmp_path / "cost-runs").glob("*.json"))) == 4
