"""Deterministic stand-ins for the generator and the retriever, used across the tests."""

from __future__ import annotations

import http.server
import json
import re
import textwrap
import threading
import time
import zlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings
from langchain_core.messages import BaseMessage

from dynakrag import prompts
from dynakrag.configuration import Configuration
from dynakrag.llm.fake import ScriptedChatModel
from dynakrag.policy.base import Policy
from dynakrag.policy.features import N_STATE_FEATURES
from dynakrag.policy.value_model import TreeEnsemble
from dynakrag.retrieval.passage import Passage
from dynakrag.state import ACTIONS, State

_WORD = re.compile(r"[a-z0-9]+")


class KeywordSearcher:
    """Ranks passages by shared lower-cased words with the query (title words count double)."""

    def __init__(self, passages: Sequence[Passage]) -> None:
        self.passages = list(passages)
        self.calls: list[tuple[str, int]] = []

    def search(self, query: str, k: int) -> list[tuple[Passage, float]]:
        self.calls.append((query, k))
        words = set(_WORD.findall(query.lower()))
        scored = []
        for order, passage in enumerate(self.passages):
            body = set(_WORD.findall(passage.text.lower()))
            title = set(_WORD.findall(passage.title.lower()))
            score = len(words & body) + 2 * len(words & title)
            if score:
                scored.append((-score, order, passage))
        scored.sort(key=lambda item: (item[0], item[1]))
        return [(passage, float(-neg)) for neg, _, passage in scored[:k]]


def prompt_kind(messages: Sequence[BaseMessage]) -> str:
    """The graph call ``messages`` make (``prompts.task_of``), else their system text."""
    return prompts.task_of(messages) or str(messages[0].content)


def passages_in(text: str) -> str:
    """The text of every <passage> block in a prompt."""
    return " ".join(re.findall(r"<passage[^>]*>(.*?)</passage>", text, flags=re.DOTALL))


def demo_responder(answers: Mapping[str, str], hops: Mapping[str, Sequence[str]] | None = None):
    """A reader that knows each question's answer but says it only when the evidence states it.

    ``hops`` optionally gives, per question, the sub-questions to decompose into.
    """

    def respond(messages: list[BaseMessage]) -> str:
        system = prompt_kind(messages)
        last = str(messages[-1].content)
        question = _main_question(last)
        answer = answers.get(question, "")
        found = bool(answer) and answer.lower() in passages_in(last).lower()
        if system == prompts.DECOMPOSE:
            parts = list((hops or {}).get(question, [question]))
            return json.dumps({"sub_questions": parts})
        if system == prompts.SUFFICIENCY:
            count = len(re.findall(r"^\d+\. ", last, flags=re.MULTILINE))
            reply = [prompts.UNKNOWN] * count
            if found and count:
                reply = ["known"] * (count - 1) + [answer]
            return json.dumps({"answers": reply})
        if system == prompts.HOP:  # one hop of a chain, asked alone
            return json.dumps({"answer": answer if found else prompts.UNKNOWN})
        if system == prompts.REWRITE:
            return f"{question} details"
        if system == prompts.ANSWER:
            return answer if found else prompts.INSUFFICIENT_EVIDENCE
        raise AssertionError(f"unexpected prompt: {system[:60]}")

    return respond


def _main_question(text: str) -> str:
    for marker in ("Main question: ", "Question: "):
        if marker in text:
            return text.rsplit(marker, 1)[1].splitlines()[0].strip()
    return text.strip()


def demo_chat_model(answers: Mapping[str, str], hops=None) -> ScriptedChatModel:
    """A ScriptedChatModel over ``demo_responder``."""
    return ScriptedChatModel(respond=demo_responder(answers, hops))


_WORKS_AT = re.compile(r"company where (?P<person>.+) works\?$")


def demo_chain_script(corpus: Any) -> tuple[dict[str, str], dict[str, list[str]]]:
    """The answers and plans a scripted reader needs to follow a generated demo corpus's
    headquarters questions hop by hop, as the default chain asks them ("In which city is the
    headquarters of the company where X works?": the employer, then its headquarters); every
    other question answered as by ``demo_responder`` alone. For ``demo_responder(*script)``."""
    titles = {p["id"]: p["title"] for p in corpus.passages}
    answers = {q.question: q.answer for q in corpus.questions}
    hops: dict[str, list[str]] = {}
    for q in corpus.questions:
        match = _WORKS_AT.search(q.question)
        if match is None or len(q.support) != 2:
            continue
        employer = titles[q.support[1]]
        first = f"Which company does {match['person']} work for?"
        hops[q.question] = [first, "In which city is the headquarters of #1?"]
        answers[first] = employer
        answers[f"In which city is the headquarters of {employer}?"] = q.answer
    return answers, hops


def demo_chain_model(corpus: Any) -> ScriptedChatModel:
    """``demo_chat_model`` over :func:`demo_chain_script`."""
    return demo_chat_model(*demo_chain_script(corpus))


class RecordingChatServer:
    """An OpenAI-compatible ``/v1/chat/completions`` on loopback, in this process: records each
    request body and replies ``respond(messages)`` (messages with a ``.content``, as the
    scripted responders read them). A context manager; ``base_url`` ends in ``/v1``."""

    def __init__(self, respond: Callable[[list[Any]], str]) -> None:
        self.respond = respond
        self.bodies: list[dict[str, Any]] = []
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                owner.bodies.append(body)
                messages = [
                    SimpleNamespace(content=message.get("content") or "")
                    for message in body.get("messages", [])
                ]
                reply = chat_completion_body(
                    owner.respond(messages),
                    model=body.get("model", "fake"),
                    number=len(owner.bodies),
                    prompt_tokens=sum(len(m.content) for m in messages) // 4,
                )
                data = json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> RecordingChatServer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()


def chat_completion_body(text: str, *, model: str, number: int, prompt_tokens: int) -> dict:
    """An OpenAI chat-completion response body, as fake model servers send it."""
    completion_tokens = len(text) // 4 + 1
    return {
        "id": f"chatcmpl-fake-{number}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


class HashedWords(Embeddings):
    """Deterministic bag-of-words vectors (each word hashed into one of ``dim`` signed buckets):
    a stand-in for MiniLM that needs no model. ``calls`` counts the documents embedded."""

    model_name = "test-hashed-words"
    _WORD = re.compile(r"[a-z0-9]+")

    def __init__(self, dim: int = 64) -> None:
        self.dim = dim
        self.calls = 0

    def _vector(self, text: str) -> list[float]:
        vector = np.zeros(self.dim)
        for word in self._WORD.findall(text.lower()):
            h = zlib.crc32(word.encode())
            vector[h % self.dim] += 1.0 if (h >> 16) & 1 else -1.0
        return vector.tolist()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls += len(texts)
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


def tiny_selector_file(directory: Path, dim: int, mlp_hidden: int = 16) -> Path:
    """A tiny GS selector file over :class:`HashedWords` of ``dim`` (untrained, seeded: it
    scores as the cosine of a criterion's anchor text and a passage)."""
    import torch

    from dynakrag.dsrag.selector import GraphSelector
    from dynakrag.dsrag.selector_model import GraphSelectionModel

    selector = GraphSelector(HashedWords(dim), heads=2, mlp_hidden=mlp_hidden, dropout=0.0)
    torch.manual_seed(0)
    selector.model_ = GraphSelectionModel(selector.architecture(dim))  # the fitted attribute
    return selector.save(directory / "tiny.npz")


class ScriptedPolicy(Policy):
    """retrieve_more, then sufficiency_check, then compress_answer_evidence (then the edge to
    stop_answer), whatever the state: for tests of what those actions do."""

    name = "scripted"
    order = ("retrieve_more", "sufficiency_check", "compress_answer_evidence", "stop_answer")

    def value(self, state: State, actions: Sequence[str], cfg: Configuration) -> dict[str, float]:
        done = [entry["action"] for entry in state.get("trace", [])]
        wanted = next((a for a in self.order if a not in done), "stop_answer")
        return {a: (1.0 if a == wanted else -float(ACTIONS.index(a))) for a in actions}


def constant_tree(value: float, n_features: int = N_STATE_FEATURES) -> TreeEnsemble:
    """A one-leaf tree ensemble that predicts ``value`` for every row of ``n_features``."""
    return TreeEnsemble(
        n_features=n_features,
        offsets=np.array([0, 1]),
        children_left=np.array([-1]),
        children_right=np.array([-1]),
        feature=np.array([-2]),
        threshold=np.array([-2.0]),
        value=np.array([value]),
    )


# A stdlib stand-in for ``llama_cpp.server``, run as a script:
#   python fake_model_server.py PORT DELAY_S [LAUNCHES REQUESTS [BUSY [HOLD GENERATING]]]
# It answers ``GET /v1/models`` and every chat completion with "alive"; with the two files it
# appends its pid to LAUNCHES on start and one line per chat request to REQUESTS. While the
# file BUSY exists, GET hangs; while HOLD exists, a chat request hangs mid-generation and
# creates GENERATING (pass "" for a file not wanted).
FAKE_MODEL_SERVER = textwrap.dedent(
    """
    import http.server, json, os, sys, time
    port, delay = int(sys.argv[1]), float(sys.argv[2])
    launches, requests = (sys.argv[3], sys.argv[4]) if len(sys.argv) > 4 else (None, None)
    busy = sys.argv[5] if len(sys.argv) > 5 else None  # while this file exists, GET hangs
    hold, generating = (sys.argv[6], sys.argv[7]) if len(sys.argv) > 7 else (None, None)
    time.sleep(delay)
    if launches:
        with open(launches, "a") as f:
            f.write(f"{os.getpid()}\\n")

    class Handler(http.server.BaseHTTPRequestHandler):
        def _send(self, body):
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            while busy and os.path.exists(busy):  # llama.cpp, mid-prompt, answers nothing
                time.sleep(0.05)
            if self.path != "/v1/models":
                self.send_error(404)
                return
            self._send(b'{"object": "list", "data": [{"id": "local", "object": "model"}]}')

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            while hold and os.path.exists(hold):  # mid-generation until killed or released
                open(generating, "w").close()
                time.sleep(0.05)
            if requests:
                with open(requests, "a") as f:
                    f.write("chat\\n")
            self._send(json.dumps({
                "id": "x", "object": "chat.completion", "created": 0, "model": "local",
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": "alive"}}],
                "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
            }).encode())

        def log_message(self, *args):
            pass

    print("fake server starting on", port, file=sys.stderr, flush=True)
    http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
    """
)


class FixedSearcher:
    """Returns the same passages for every query (none: an empty corpus)."""

    def __init__(self, passages: Sequence[Passage]) -> None:
        self.passages = list(passages)

    def search(self, query: str, k: int) -> list[tuple[Passage, float]]:
        return [(p, 1.0) for p in self.passages[:k]]
