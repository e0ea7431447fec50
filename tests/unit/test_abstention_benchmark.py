"""benchmarks/abstention.py: the set is built from train rows and the demo corpus only, the
table reports abstention on and off per method, and a rerun resumes from its journals; with
``--reworded`` the answerable questions come again in other words (demo_world's wordings, the
generator's paraphrases that keep every name)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dynakrag.data.datasets import load_examples
from tests.benchmark_scripts import benchmark_module
from tests.markers import needs_data


@needs_data
def test_the_set_uses_train_rows_and_removes_the_gold_paragraphs() -> None:
    with benchmark_module("abstention") as bench:
        items, corpora = bench.build_set(["hotpotqa"], 3)
    eval_questions = {ex.question for ex in load_examples("hotpotqa", "eval")}
    assert not eval_questions & {item.question for item in items}
    pool_ids = {p.id for p in corpora["hotpotqa"]}
    removed = [item for item in items if item.kind == "removed_support"]
    answerable = [item for item in items if item.kind == "answerable"]
    assert removed and all(not set(item.removed) & pool_ids for item in removed)
    unanswerable = [item for item in items if not item.answerable]
    assert len(answerable) == len(unanswerable) + (3 - len(removed))
    assert {"absent_entity", "malformed"} <= {item.kind for item in items}


@needs_data
def test_smoke_run_reports_on_and_off_and_resumes(tmp_path: Path) -> None:
    # The heuristic: its searches land on another company with the same headquarters city,
    # the case withdrawn below (the forest expands the bridge and reads the right company).
    argv = ["--parts", "set", "--fake-llm", "--retriever", "bm25", "--limit", "2", "--quiet",
            "--policy", "heuristic", "--out-dir", str(tmp_path)]  # fmt: skip
    with benchmark_module("abstention") as bench:
        assert bench.main(argv) == 0
        result = json.loads((tmp_path / "abstention.json").read_text(encoding="utf-8"))
        rows = {(row["method"], row["abstain"]): row for row in result["set"]["rows"]}
        assert set(rows) == {(m, s) for m in ("naive", "dynakrag") for s in ("off", "on")}
        for method in ("naive", "dynakrag"):
            # The scripted reader invents a name for every unanswerable question: only the
            # grounding check withholds it.
            assert rows[(method, "on")]["recall"] == 1.0
            assert rows[(method, "on")]["recall"] > rows[(method, "off")]["recall"]
        assert rows[("naive", "on")]["answerable_f1"] == rows[("naive", "off")]["answerable_f1"]
        # The scripted hop model resolves no hop, and the reader gives the gold answer anyway:
        # where only a passage about something else states it (another company with the same
        # headquarters city), the incomplete chain's answer is withdrawn, and the reason names
        # the hop the chain stopped at.
        runs = result["set"]["runs"]
        answered_off = {r["id"] for r in runs["dynakrag-off"] if r["prediction"]}
        withdrawn = [
            r for r in runs["dynakrag-on"]
            if r["kind"] == "answerable" and r["abstained"] and r["id"] in answered_off
        ]  # fmt: skip
        assert withdrawn
        assert all(r["abstain_reason"].startswith("the evidence does not state") for r in withdrawn)
        assert (
            rows[("dynakrag", "on")]["answerable_f1"] <= rows[("dynakrag", "off")]["answerable_f1"]
        )
        markdown = (tmp_path / "abstention.md").read_text(encoding="utf-8")
        assert "| naive | on |" in markdown and "reworded" not in markdown  # off by default
        assert result["set"]["rewording"] is None
        assert all(row["n_answerable_reworded"] == 0 for row in rows.values())
        journals = sorted((tmp_path / "abstention-runs").glob("*.jsonl"))
        sizes = [len(p.read_text(encoding="utf-8").splitlines()) for p in journals]
        assert bench.main(argv) == 0  # everything journalled: nothing recomputed
        assert [len(p.read_text(encoding="utf-8").splitlines()) for p in journals] == sizes


@needs_data
def test_smoke_run_with_reworded_adds_the_reworded_kind_and_resumes(tmp_path: Path) -> None:
    argv = ["--parts", "set", "--fake-llm", "--retriever", "bm25", "--limit", "2", "--quiet",
            "--reworded", "--out-dir", str(tmp_path)]  # fmt: skip
    with benchmark_module("abstention") as bench:
        assert bench.main(argv) == 0
        result = json.loads((tmp_path / "abstention.json").read_text(encoding="utf-8"))
        part = result["set"]
        items = [item for item in part["items"] if item["kind"] == "answerable_reworded"]
        answerable = [item for item in part["items"] if item["kind"] == "answerable"]
        # Every answerable question once more in other words (the scripted paraphrase keeps
        # every name), under its own id, with the question it rewords.
        assert len(items) == len(answerable) and part["rewording"]["dropped"] == 0
        assert {item["original"] for item in items} == {item["question"] for item in answerable}
        assert all(item["question"] != item["original"] for item in items)
        assert {item["reworded_by"] for item in items if item["corpus"] == "hotpotqa"} == {
            "generator"
        }
        assert not {item["id"] for item in items} & {item["id"] for item in answerable}
        for row in part["rows"]:
            assert row["n_answerable_reworded"] == row["n_answerable"] == len(answerable)
            assert row["answerable_reworded_f1"] is not None
            assert row["precision_reworded"] is not None
        markdown = (tmp_path / "abstention.md").read_text(encoding="utf-8")
        header = next(line for line in markdown.splitlines() if line.startswith("| method"))
        assert "| reworded | precision (reworded) | abstain rate | F1 |" in header
        naive_on = next(line for line in markdown.splitlines() if line.startswith("| naive | on"))
        assert naive_on.count("|") == header.count("|")
        assert "2 of 2 dataset questions paraphrased by the generator (0 dropped)" in markdown
        runs = tmp_path / "abstention-runs"
        records = [json.loads(line) for line in (runs / "naive-on.jsonl").open(encoding="utf-8")]
        reworded = {r["id"]: r for r in records if r["kind"] == "answerable_reworded"}
        assert {r["reworded_by"] for r in reworded.values()} == {
            "generator",
            "demo_world.REWORDINGS",
        }
        hotpot = [r for r in reworded.values() if r["id"].startswith("hotpotqa-reworded-")]
        assert len(hotpot) == 2
        assert all(r["question"] == "Put another way: " + r["original_question"] for r in hotpot)
        journals = sorted(runs.glob("*.jsonl"))
        assert runs / "paraphrases.jsonl" in journals
        sizes = [len(p.read_text(encoding="utf-8").splitlines()) for p in journals]
        assert bench.main(argv) == 0  # everything journalled, the paraphrases too
        assert [len(p.read_text(encoding="utf-8").splitlines()) for p in journals] == sizes


def test_a_paraphrase_must_keep_every_name_title_and_number() -> None:
    with benchmark_module("abstention") as bench:
        original = 'Were Scott Derrickson and Ed Wood in "Big Stone Gap" of 2,014 reels?'
        kept = "In 2014 reels of big stone gap, were Ed Wood's and Scott Derrickson's the same?"
        assert bench.missing_names(original, kept) == []
        assert bench.paraphrase_verdict(original, kept) is None
        dropped = 'Did Derrickson and Ed Wood share "Big Stone Gap" of 2,014 reels?'
        assert bench.missing_names(original, dropped) == ["Scott"]
        assert bench.paraphrase_verdict(original, dropped) == "drops Scott"
        no_title = "Were Scott Derrickson and Ed Wood in Big Gap Stone of 2014 reels?"
        assert bench.missing_names(original, no_title) == ['"Big Stone Gap"']
        no_number = 'Were Scott Derrickson and Ed Wood in "Big Stone Gap" of 214 reels?'
        assert bench.missing_names(original, no_number) == ["2,014"]
        again = '  were scott derrickson AND ed wood in "big stone gap" of 2,014 reels'
        assert bench.paraphrase_verdict(original, again) == "same question"
        assert bench.paraphrase_verdict(original, "") == "no paraphrase"
        assert bench.clean_paraphrase('Reworded question: "Who is older?"\nAnd more') == (
            "Who is older?"
        )


def test_paraphrased_items_keep_drop_count_and_replay_their_journal(tmp_path: Path) -> None:
    from dynakrag.llm.client import LLMClient
    from dynakrag.llm.fake import ScriptedChatModel

    replies = {
        "Who is older, Annie Morton or Terry Richardson?": "Of Terry Richardson and Annie "
        "Morton, who was born first?",
        "Which band did Ed Wood join in 1990?": "Which band did Wood join in 1990?",
        "What city is Lawrence in?": "What city is Lawrence in?",
        "Is Kansas big?": "",
    }
    calls: list[str] = []

    def respond(messages: list) -> str:
        asked = str(messages[-1].content).split("Question: ", 1)[1].splitlines()[0]
        calls.append(asked)
        return replies[asked]

    with benchmark_module("abstention") as bench:
        items = [
            bench.Item(f"hotpotqa-answerable-{n}", "answerable", "hotpotqa", q, ("x",))
            for n, q in enumerate(replies)
        ]
        items.append(bench.Item("demo-answerable-q-hq-00", "answerable", "demo", "Who?", ("y",)))
        llm = LLMClient(ScriptedChatModel(respond=respond), max_retries=0)
        journal = tmp_path / "paraphrases.jsonl"
        kept, account = bench.paraphrased_items(items, llm, journal, quiet=True)
        assert [item.id for item in kept] == ["hotpotqa-reworded-0"]
        assert kept[0].question.startswith("Of Terry Richardson") and kept[0].answers == ("x",)
        assert kept[0].original == items[0].question and kept[0].kind == "answerable_reworded"
        assert account["asked"] == 4 and account["kept"] == 1 and account["dropped"] == 3
        assert account["dropped_by_reason"] == {
            "drops a name": 1,
            "same question": 1,
            "no paraphrase": 1,
        }
        assert {e["dropped"] for e in account["dropped_items"]} >= {"drops Ed"}
        assert "Who?" not in calls  # demo questions keep demo_world's wordings
        calls.clear()
        again, _ = bench.paraphrased_items(items, llm, journal, quiet=True)
        assert calls == [] and again == kept  # replayed from the journal, no model call

        def broken(messages: list) -> str:
            raise ConnectionError("refused")

        down = LLMClient(ScriptedChatModel(respond=broken), max_retries=0)
        with pytest.raises(RuntimeError, match="paraphrase call failed"):
            bench.paraphrased_items(items, down, tmp_path / "other.jsonl", quiet=True)
        assert not (tmp_path / "other.jsonl").exists() or not (tmp_path / "other.jsonl").read_text(
            encoding="utf-8"
        )  # an outage is not journalled as a dropped paraphrase


def test_the_demo_rewordings_are_demo_worlds(monkeypatch: pytest.MonkeyPatch) -> None:
    from dynakrag.data.demo import DEMO_SEED
    from dynakrag.data.demo_corpus import generate_demo_corpus

    questions = {q.id: q for q in generate_demo_corpus(DEMO_SEED).questions}
    with benchmark_module("abstention") as bench:
        items, _ = bench.build_set([], 1, reworded=True)
        reworded = [it for it in items if it.kind == "answerable_reworded"]
        assert len(reworded) == sum(1 for it in items if it.kind == "answerable")
        for item in reworded:
            question = questions[item.id.removeprefix("demo-reworded-")]
            assert item.original == question.question and item.answers == (question.answer,)
            assert item.question == bench.demo_world.reworded(question, DEMO_SEED)
            assert item.question != item.original
        # One table of wordings: changing demo_world's changes the set.
        pattern, _ = bench.demo_world.REWORDINGS["hq"]
        monkeypatch.setitem(
            bench.demo_world.REWORDINGS, "hq", (pattern, ("Where does {e}'s employer sit?",))
        )
        items, _ = bench.build_set([], 1, reworded=True)
        hq = [it for it in items if it.id.startswith("demo-reworded-q-hq-")]
        assert hq and all(it.question.startswith("Where does ") for it in hq)


@needs_data
def test_settings_on_alone_runs_only_the_abstaining_runs(tmp_path: Path) -> None:
    argv = ["--parts", "set", "--fake-llm", "--retriever", "bm25", "--limit", "1", "--quiet",
            "--methods", "naive", "--settings", "on", "--out-dir", str(tmp_path)]  # fmt: skip
    with benchmark_module("abstention") as bench:
        assert bench.main(argv) == 0
    result = json.loads((tmp_path / "abstention.json").read_text(encoding="utf-8"))
    assert [(row["method"], row["abstain"]) for row in result["set"]["rows"]] == [("naive", "on")]
    assert [p.name for p in (tmp_path / "abstention-runs").glob("*.jsonl")] == ["naive-on.jsonl"]
