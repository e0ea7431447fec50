"""The evaluation runner, methods and report, on real benchmark rows with fake models.

Benchmark data comes from ``$DYNAKRAG_DATA_DIR`` (default ``<repo>/../shared/data``); tests that
need it are skipped with a message when it is absent. Retrieval is BM25 or a deterministic fake
embedding, the generator a scripted fake: no model is loaded.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.messages import BaseMessage

from dynakrag import prompts
from dynakrag.configuration import Configuration
from dynakrag.data.datasets import load_examples
from dynakrag.errors import UserInputError
from dynakrag.eval.methods import METHODS, get_method
from dynakrag.eval.methods.decompose import DecomposeMethod
from dynakrag.eval.methods.dynakrag import AnswerlessLLM
from dynakrag.eval.methods.ircot import IRCoTMethod
from dynakrag.eval.methods.naive import NaiveMethod
from dynakrag.eval.report import compare_table, report_paths
from dynakrag.eval.runner import SUMMARY_KEYS, evaluate
from dynakrag.llm.client import LLMClient
from dynakrag.llm.fake import ScriptedChatModel
from dynakrag.retrieval.passage import Passage
from tests.fakes import KeywordSearcher, demo_responder, passages_in, prompt_kind
from tests.markers import have_data, needs_data

QUESTION_KEYS = {
    "id",
    "question",
    "prediction",
    "gold_answers",
    "gold_support",
    "evidence",
    "actions",
    "retrieval_calls",
    "llm_calls",
    "prompt_tokens",
    "completion_tokens",
    "latency_s",
    "support_recall",
    "em",
    "f1",
    "context_precision",
    "context_recall",
    "context_f1",
    "anls",
    "abstained",
    "abstain_reason",
    "answer_citations",
}
META_KEYS = {
    "method",
    "dataset",
    "split",
    "setting",
    "retriever",
    "models",
    "git_commit",
    "configuration",
    "llm_cache",
}


class Recorder:
    """A gold-aware fake reader (``tests.fakes.demo_responder``, plus IRCoT) that records the
    system prompt of every call the model really receives."""

    def __init__(self, answers: Mapping[str, str], hops: Mapping[str, Sequence[str]] | None = None):
        self.inner = demo_responder(answers, hops)
        self.answers = answers
        self.kinds: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, messages: list[BaseMessage]) -> str:
        system = prompt_kind(messages)
        with self._lock:
            self.kinds.append(system)
        if system == prompts.IRCOT_SYSTEM:
            last = str(messages[-1].content)
            question = last.rsplit("Question: ", 1)[1].splitlines()[0].strip()
            answer = self.answers.get(question, "")
            if answer and answer.lower() in passages_in(last).lower():
                return f"So the answer is: {answer}."
            return "The passages name a person to look up next."
        return self.inner(messages)

    def count(self, system: str) -> int:
        return sum(1 for s in self.kinds if s == system)


@pytest.fixture(scope="module")
def hotpot() -> list[Any]:
    if not have_data():
        pytest.skip("benchmark data not found: set DYNAKRAG_DATA_DIR")
    return load_examples("hotpotqa", "eval", 2)


@pytest.fixture
def cfg(tmp_path: Path) -> Configuration:
    return Configuration(cache_dir=tmp_path / "cache")


def fake_model(examples: Sequence[Any]) -> tuple[ScriptedChatModel, Recorder]:
    recorder = Recorder({ex.question: ex.answers[0] for ex in examples})
    return ScriptedChatModel(respond=recorder), recorder


def run(hotpot, cfg, method: str, setting: str = "distractor", **kwargs: Any) -> dict[str, Any]:
    model, _ = fake_model(hotpot)
    kwargs.setdefault("chat_model", model)
    return evaluate(
        "hotpotqa",
        "eval",
        setting,
        method,
        retriever=kwargs.pop("retriever", "bm25"),
        limit=2,
        cfg=cfg,
        progress=False,
        **kwargs,
    )


# --------------------------------------------------------------------------------------------
# Every method, both settings
# --------------------------------------------------------------------------------------------


@needs_data
@pytest.mark.parametrize("setting", ["distractor", "open"])
@pytest.mark.parametrize("method", sorted(METHODS))
def test_every_method_runs_and_reports_everything(
    hotpot, cfg: Configuration, tmp_path: Path, method: str, setting: str
) -> None:
    out = tmp_path / "run" / f"{method}-{setting}.json"
    result = run(hotpot, cfg, method, setting, out=out)
    written = json.loads(out.read_text(encoding="utf-8"))
    assert written["summary"] == result["summary"]
    assert written["meta"].keys() >= META_KEYS
    assert set(SUMMARY_KEYS) <= written["summary"].keys()
    assert written["summary"]["n"] == 2
    assert written["meta"]["method"] == method and written["meta"]["setting"] == setting
    assert {"hits", "misses"} <= written["meta"]["llm_cache"].keys()
    md_path, png_path = report_paths(out)
    assert png_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "| method |" in md_path.read_text(encoding="utf-8")

    by_id = {ex.id: ex for ex in hotpot}
    recomputed = []
    for record in written["questions"]:
        assert record.keys() >= QUESTION_KEYS
        assert record["id"] in by_id
        assert all(set(doc) == {"id", "title", "text"} for doc in record["evidence"])
        assert record["actions"], "every method reports its actions"
        assert record["retrieval_calls"] >= 1
        # Support recall recomputed here from the evidence and the dataset's own gold ids.
        gold = set(by_id[record["id"]].support)
        found = {doc["id"] for doc in record["evidence"]}
        recomputed.append(len(gold & found) / len(gold))
        assert record["support_recall"] == pytest.approx(recomputed[-1])
        assert record["gold_support"] == list(by_id[record["id"]].support)
        # An answer, or an abstention (scored as the empty answer) with its reason.
        assert record["prediction"] or (record["abstained"] and record["abstain_reason"])
    assert written["summary"]["support_recall"] == pytest.approx(sum(recomputed) / 2)
    if setting == "distractor":
        for record in written["questions"]:
            own = {p.id for p in by_id[record["id"]].passages}
            assert {doc["id"] for doc in record["evidence"]} <= own


@needs_data
@pytest.mark.parametrize("method", sorted(METHODS))
def test_no_answer_makes_no_answer_call(hotpot, cfg: Configuration, method: str) -> None:
    model, recorder = fake_model(hotpot)
    result = run(hotpot, cfg, method, chat_model=model, no_answer=True)
    assert recorder.count(prompts.ANSWER) == 0
    assert all(q["prediction"] == "" for q in result["questions"])
    assert all("answer" not in q["actions"] for q in result["questions"])
    assert result["summary"]["em"] is None and result["summary"]["anls"] is None
    assert result["summary"]["support_recall"] is not None
    # With answers, the same run does ask the answer prompt once per question (abstention off:
    # its checks may decide before the answer is asked).
    model, recorder = fake_model(hotpot)
    answering = cfg.model_copy(update={"cache_dir": cfg.cache_dir / "b", "abstain": False})
    run(hotpot, answering, method, chat_model=model)
    assert recorder.count(prompts.ANSWER) == 2


@needs_data
def test_a_rerun_is_answered_from_the_cache(hotpot, cfg: Configuration) -> None:
    model, recorder = fake_model(hotpot)
    first = run(hotpot, cfg, "dynakrag", chat_model=model)
    calls = len(recorder.kinds)
    assert calls > 0 and first["meta"]["llm_cache"]["misses"] == calls
    second = run(hotpot, cfg, "dynakrag", chat_model=model)
    assert len(recorder.kinds) == calls, "the rerun called the model"
    assert second["meta"]["llm_cache"]["hits"] == calls
    assert second["meta"]["llm_cache"]["misses"] == 0
    strip = ("latency_s",)
    for a, b in zip(first["questions"], second["questions"], strict=True):
        assert {k: v for k, v in a.items() if k not in strip} == {
            k: v for k, v in b.items() if k not in strip
        }
    # cache=False never touches the cache file.
    third = run(hotpot, cfg, "dynakrag", chat_model=model, cache=False)
    assert third["meta"]["llm_cache"] == {"enabled": False}
    assert len(recorder.kinds) == 2 * calls


@needs_data
def test_dense_distractor_embeds_each_passage_once(hotpot, cfg: Configuration) -> None:
    embeddings = DeterministicFakeEmbedding(size=32)
    result = run(hotpot, cfg, "naive", retriever="dense", embeddings=embeddings)
    distinct = {p.id for ex in hotpot for p in ex.passages}
    assert result["meta"]["embedded_passages"] == len(distinct)
    assert result["meta"]["models"]["embeddings"] == "DeterministicFakeEmbedding"
    hybrid = run(hotpot, cfg, "naive", retriever="hybrid", embeddings=embeddings)
    assert hybrid["summary"]["n"] == 2


@needs_data
@pytest.mark.parametrize("setting", ["distractor", "open"])
def test_routed_retriever_runs_in_both_settings(hotpot, cfg: Configuration, setting: str) -> None:
    embeddings = DeterministicFakeEmbedding(size=16)
    result = run(hotpot, cfg, "naive", setting, retriever="routed", embeddings=embeddings)
    assert result["meta"]["retriever"] == "routed" and result["summary"]["n"] == 2
    assert result["meta"]["configuration"]["retriever"] == "routed"
    assert all(record["evidence"] for record in result["questions"])


@needs_data
def test_open_dense_index_is_stored_and_reused(hotpot, cfg: Configuration) -> None:
    embeddings = DeterministicFakeEmbedding(size=16)
    first = run(hotpot, cfg, "naive", "open", retriever="dense", embeddings=embeddings)
    assert first["meta"]["embedded_passages"] == first["meta"]["corpus_size"] > 1000
    second = run(hotpot, cfg, "naive", "open", retriever="dense", embeddings=embeddings)
    assert second["meta"]["embedded_passages"] == 0  # loaded from <cache_dir>/eval-indexes
    assert [q["evidence"] for q in first["questions"]] == [
        q["evidence"] for q in second["questions"]
    ]


@needs_data
def test_dsrag_rows_are_identified_by_row_and_need_the_open_setting(cfg: Configuration) -> None:
    with pytest.raises(UserInputError, match="open"):
        evaluate("dsrag-ranking", "eval", "distractor", "naive", retriever="bm25", limit=1,
                 cfg=cfg, progress=False, no_answer=True)  # fmt: skip
    result = evaluate(
        "dsrag-ranking", "eval", "open", "naive", retriever="bm25", limit=2, cfg=cfg,
        progress=False, no_answer=True,
    )  # fmt: skip
    assert [q["id"] for q in result["questions"]] == [0, 1]
    assert result["meta"]["corpus_size"] > 1000
    for record in result["questions"]:
        # Gold groups: a copy of a gold sentence in any chunk of its group counts.
        found = {doc["id"] for doc in record["evidence"]}
        hit = sum(1 for group in record["gold_sets"] if found & set(group))
        assert record["support_recall"] == pytest.approx(hit / len(record["gold_sets"]))


def test_bad_arguments_are_user_errors(cfg: Configuration, tmp_path: Path) -> None:
    with pytest.raises(UserInputError, match="setting"):
        evaluate("hotpotqa", setting="closed", cfg=cfg, progress=False)
    with pytest.raises(UserInputError, match="retriever"):
        evaluate("hotpotqa", retriever="splade", cfg=cfg, progress=False)
    with pytest.raises(UserInputError, match="method"):
        evaluate("hotpotqa", method="magic", cfg=cfg, progress=False)
    with pytest.raises(UserInputError, match="dataset"):
        evaluate("nope", cfg=cfg, progress=False, retriever="bm25")
    with pytest.raises(UserInputError, match="report"):
        evaluate("hotpotqa", out=tmp_path / "x.md", cfg=cfg, progress=False)
    with pytest.raises(UserInputError, match="method 'naive'"):
        get_method("naive", policy="uniform")


# --------------------------------------------------------------------------------------------
# Methods on a tiny synthetic corpus
# --------------------------------------------------------------------------------------------

WORLD = [
    Passage("kestrel", "Kestrel Labs", "Kestrel Labs was founded by Ada Voss in 1999."),
    Passage("ada", "Ada Voss", "Ada Voss was born in Lindholm, a port town."),
    Passage("tom", "Tom Reyl", "Tom Reyl was born in Marsk in 1970."),
    Passage("lind", "Lindholm", "Lindholm lies on the river Aller."),
    Passage("noise", "Orbis Devices", "Orbis Devices makes phones in Marsk."),
]


class FixedSearcher:
    """Returns its passages in a fixed order, whatever the query."""

    def __init__(self, passages: Sequence[Passage]) -> None:
        self.passages = list(passages)

    def search(self, query: str, k: int) -> list[tuple[Passage, float]]:
        return [(p, 1.0 / (i + 1)) for i, p in enumerate(self.passages[:k])]


def scripted(handler: Callable[[str, str], str]) -> tuple[LLMClient, list[str]]:
    """An LLMClient whose replies come from ``handler(system, last message)``; logs prompts."""
    seen: list[str] = []
    lock = threading.Lock()

    def respond(messages: list[BaseMessage]) -> str:
        with lock:
            seen.append(str(messages[-1].content))
        return handler(prompt_kind(messages), str(messages[-1].content))

    return LLMClient(ScriptedChatModel(respond=respond), max_retries=0), seen


def test_decompose_chains_answers_validates_and_runs_independent_parts_in_parallel() -> None:
    question = "Where was the founder of Kestrel Labs born, and where was Tom Reyl born?"
    subs = ["Who founded Kestrel Labs?", "Where was #1 born?", "Where was Tom Reyl born?"]
    replies = {"Who founded Kestrel Labs?": "Ada Voss", "Where was Ada Voss born?": "Lindholm",
               "Where was Tom Reyl born?": "Marsk"}  # fmt: skip

    def handler(system: str, last: str) -> str:
        if system == prompts.DECOMPOSE:
            return json.dumps({"sub_questions": subs})
        if system == prompts.SUFFICIENCY:
            sub = re.search(r"^1\. (.*)$", last, flags=re.MULTILINE).group(1)
            return json.dumps({"answers": [replies.get(sub, "UNKNOWN")]})
        assert system == prompts.ANSWER
        assert "- Where was Ada Voss born? Lindholm" in last  # validated facts are given
        return "Lindholm"

    llm, _ = scripted(handler)
    searcher = KeywordSearcher(WORLD)
    cfg = Configuration(docs_per_action=1, max_retrieval_calls=4)
    result = DecomposeMethod().run(question, searcher, llm, cfg)
    assert result.prediction == "Lindholm"
    assert result.details["waves"] == [[0, 2], [1]]  # independent parts first, together
    resolved = [s["question"] for s in result.details["sub_questions"]]
    assert resolved == ["Who founded Kestrel Labs?", "Where was Ada Voss born?",
                        "Where was Tom Reyl born?"]  # fmt: skip
    assert all(s["verified"] for s in result.details["sub_questions"])
    assert "Where was Ada Voss born?" in [q for q, _ in searcher.calls]  # chained query
    assert {doc["id"] for doc in result.evidence} == {"kestrel", "ada", "tom"}
    assert result.retrieval_calls == 3
    assert result.llm_calls == 1 + 3 + 1  # decompose, one per part, final answer


def test_decompose_retries_an_ungrounded_answer_within_budget() -> None:
    def handler(system: str, last: str) -> str:
        if system == prompts.DECOMPOSE:
            return json.dumps({"sub_questions": ["Where was Ada Voss born?"]})
        if system == prompts.SUFFICIENCY:
            # Marsk is not stated together with Ada Voss: validation must reject it.
            return json.dumps({"answers": ["Lindholm" if "Lindholm" in last else "Marsk"]})
        return "Lindholm"

    llm, _ = scripted(handler)
    searcher = FixedSearcher([WORLD[2], WORLD[1], WORLD[4]])  # the distractor ranks first
    cfg = Configuration(docs_per_action=1, max_retrieval_calls=2)
    result = DecomposeMethod().run("Where was Ada Voss born?", searcher, llm, cfg)
    (sub,) = result.details["sub_questions"]
    assert result.actions.count("retry") == 1
    assert [doc["id"] for doc in result.evidence] == ["tom", "ada"]
    assert result.retrieval_calls == 2
    assert sub["verified"] and sub["answer"] == "Lindholm"


def test_ircot_stops_when_the_reasoning_has_the_answer() -> None:
    def handler(system: str, last: str) -> str:
        if system == prompts.IRCOT_SYSTEM:
            if "Lindholm" in last:
                return "Ada Voss was born in Lindholm. So the answer is: Lindholm."
            return "Kestrel Labs was founded by Ada Voss, so look up Ada Voss born."
        return "Lindholm"

    llm, _ = scripted(handler)
    searcher = KeywordSearcher(WORLD)
    cfg = Configuration(docs_per_action=1, max_retrieval_calls=4)
    result = IRCoTMethod().run("Where was the founder of Kestrel Labs born?", searcher, llm, cfg)
    assert result.actions == ["retrieve", "reason", "retrieve", "reason", "answer"]
    assert searcher.calls[1][0].startswith("Kestrel Labs was founded by Ada Voss")
    assert [doc["id"] for doc in result.evidence] == ["kestrel", "ada"]
    assert result.prediction == "Lindholm"
    assert result.retrieval_calls == 2 and result.llm_calls == 3


def test_ircot_keeps_to_the_retrieval_budget() -> None:
    llm, _ = scripted(lambda system, last: "Nothing found yet about this.")
    searcher = KeywordSearcher(WORLD)
    cfg = Configuration(docs_per_action=1, max_retrieval_calls=3)
    result = IRCoTMethod(no_answer=True).run("Who founded Kestrel Labs?", searcher, llm, cfg)
    assert result.retrieval_calls == 3 and len(searcher.calls) == 3
    assert result.actions == ["retrieve", "reason", "retrieve", "reason", "retrieve"]
    assert result.prediction == ""


def test_naive_retrieves_k_and_answers_insufficient_without_evidence() -> None:
    llm, seen = scripted(lambda system, last: "Ada Voss")
    off = Configuration(abstain=False)  # test_abstention.py: the same with abstention
    result = NaiveMethod(k=2).run("Who was born in Marsk?", FixedSearcher(WORLD), llm, off)
    assert [d["id"] for d in result.evidence] == ["kestrel", "ada"]
    assert result.prediction == "Ada Voss"
    empty = NaiveMethod().run("zzz", KeywordSearcher(WORLD), llm, off)
    assert empty.prediction == prompts.INSUFFICIENT_EVIDENCE and empty.llm_calls == 0
    assert len(seen) == 1


def test_answerless_llm_declines_only_the_answer_prompt() -> None:
    llm, seen = scripted(lambda system, last: '{"answers": ["x"]}')
    wrapped = AnswerlessLLM(llm)
    assert wrapped.text(prompts.answer_messages("q", [{"title": "t", "text": "x"}])) == (
        None,
        wrapped.text(prompts.answer_messages("q", []))[1],
    )
    assert wrapped.declined == 2 and seen == []
    reply, usage = wrapped.json(prompts.sufficiency_messages("q", ["a"], []))
    assert reply == {"answers": ["x"]} and usage.llm_calls == 1


def test_compare_table_has_one_row_per_run() -> None:
    results = [
        {
            "meta": {"method": name, "dataset": "hotpotqa", "split": "eval", "setting": "open",
                     "retriever": "bm25", "method_options": {"policy": policy}},
            "summary": {"n": 3, "support_recall": 0.5, "em": None, "latency_s": 1.25},
        }
        for name, policy in (("naive", None), ("dynakrag", "uniform"))
    ]  # fmt: skip
    table = compare_table(results).splitlines()
    assert len(table) == 4
    assert table[2].startswith("| naive | hotpotqa/eval | open | bm25 | 3 | 0.500 | – |")
    assert table[3].startswith("| dynakrag (uniform) |")


@needs_data
def test_a_sequential_run_cut_short_resumes_from_its_journal(hotpot, cfg, tmp_path: Path) -> None:
    """Kill a one-process ``eval --out`` after its first question; the same command again
    answers only the second, and the finished output is what one uncut run writes."""
    from dynakrag.workers import journal_path

    out = tmp_path / "run.json"
    _, recorder = fake_model(hotpot)
    calls = {"n": 0}

    def dies_on_the_second_question(messages: list[BaseMessage]) -> str:
        if any(hotpot[1].question in str(message.content) for message in messages):
            raise KeyboardInterrupt  # the user's Ctrl-C half-way
        calls["n"] += 1
        return recorder(messages)

    with pytest.raises(KeyboardInterrupt):
        run(
            hotpot,
            cfg,
            "naive",
            chat_model=ScriptedChatModel(respond=dies_on_the_second_question),
            out=out,
            cache=False,
        )
    assert journal_path(out).is_file() and not out.exists()
    first_calls = calls["n"]
    assert first_calls >= 1

    resumed_model, resumed = fake_model(hotpot)
    result = run(hotpot, cfg, "naive", chat_model=resumed_model, out=out, cache=False)
    assert [q["id"] for q in result["questions"]] == [ex.id for ex in hotpot]
    assert len(resumed.kinds) == first_calls  # only the second question was asked again
    assert not journal_path(out).exists()
    assert json.loads(out.read_text())["questions"][0]["id"] == hotpot[0].id


@needs_data
def test_question_ids_keep_those_questions_and_the_open_corpus(hotpot, cfg) -> None:
    chosen = run(hotpot, cfg, "naive", setting="open", question_ids=[hotpot[1].id])
    assert [q["id"] for q in chosen["questions"]] == [hotpot[1].id]
    whole = run(hotpot, cfg, "naive", setting="open")
    assert chosen["meta"]["corpus_size"] == whole["meta"]["corpus_size"]  # searched the same
    with pytest.raises(UserInputError, match="not in hotpotqa/eval"):
        run(hotpot, cfg, "naive", question_ids=["no-such-question"])


@needs_data
def test_a_journal_record_that_is_not_an_eval_record_fails_in_one_line(
    hotpot, cfg, tmp_path: Path
) -> None:
    """Resuming reads the journal's records through EvalRecord: a record with a mistyped key
    fails naming the journal and the line, not later as a KeyError in the summary."""
    from dynakrag.workers import journal_path

    out = tmp_path / "run.json"
    with pytest.raises(KeyboardInterrupt):
        run(hotpot, cfg, "naive", chat_model=_dies_on(hotpot[1].question), out=out, cache=False)
    journal = journal_path(out)
    header, line = journal.read_text(encoding="utf-8").splitlines()
    entry = json.loads(line)
    entry["value"]["predicton"] = entry["value"].pop("prediction")  # the mistyped key
    journal.write_text(f"{header}\n{json.dumps(entry)}\n", encoding="utf-8")
    with pytest.raises(UserInputError) as refused:
        run(hotpot, cfg, "naive", out=out, cache=False)
    message = str(refused.value)
    assert message.startswith(f"{journal} line 2: prediction: Field required")
    assert "\n" not in message


def _dies_on(question: str) -> ScriptedChatModel:
    """A model that answers until it is asked about ``question``, then is interrupted."""

    def respond(messages: list[BaseMessage]) -> str:
        if any(question in str(message.content) for message in messages):
            raise KeyboardInterrupt
        return "Unknown"

    return ScriptedChatModel(respond=respond)


@needs_data
def test_the_gold_setting_searches_only_each_questions_gold_paragraphs(
    hotpot, cfg: Configuration
) -> None:
    result = run(hotpot, cfg, "naive", "gold")
    by_id = {ex.id: ex for ex in hotpot}
    assert result["meta"]["setting"] == "gold"
    for record in result["questions"]:
        gold = set(by_id[record["id"]].support)
        found = {doc["id"] for doc in record["evidence"]}
        assert found and found <= gold
        assert record["support_recall"] == pytest.approx(len(found) / len(gold))
