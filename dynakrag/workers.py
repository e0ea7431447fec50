"""Fanning questions out over Dask workers, and resuming a run that was cut short.

``dynakrag collect`` and ``dynakrag eval`` answer their questions one after another in one
process by default. With ``--workers N`` they start a Dask ``LocalCluster`` of N worker
processes (one thread each) on this machine; with ``--scheduler tcp://HOST:8786`` they send the
questions to an existing Dask cluster. No home-made queue or server: Dask schedules, and when a
worker dies its question is rescheduled on another one (LangGraph's and Dask's usual division
of labour). Each question is one task, so a dead worker loses at most the question it was on.
A lost scheduler (or a question that killed every worker it ran on) ends the run with one
:class:`ClusterLostError` line; the questions finished before are kept (journal, ``--out``,
``--log``) and the same command, rerun on a live cluster, does only the rest.

* :func:`dask_client`: the client for ``--workers`` / ``--scheduler``, closed (and a local
  cluster stopped) at the end of the ``with`` block.
* :func:`fan_out`: submits one task per item and yields ``(item, result)`` as tasks finish.
* :func:`worker_cached`: what a worker builds once and reuses for every question it runs (its
  graph's searcher, its model client), kept per worker process.
* :func:`resumed`: the one executor of a run over many questions (``dynakrag eval``,
  ``dynakrag collect``, the benchmarks), with the one resume rule: a question is done when its
  whole result is written to the run's store, and anything else is redone.
* :class:`Journal`: the results of finished questions, one JSON line each, appended (and
  flushed to disk) as they arrive, so a rerun after a crash skips them. Its first line is the
  fingerprint of the run's settings: a journal of other settings is refused, not mixed in.
  :class:`RecordJournal`: the same rule over bare records (the benchmarks' journals).

Dask is the ``scale`` extra (``pip install 'dynakrag[scale]'``; ``make setup`` installs it).
Task arguments travel to the workers with Dask's own serialisation (cloudpickle) over the
cluster's connections; nothing here is persisted that way.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import hashlib
import json
import logging
import os
import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable, Collection, Hashable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Protocol, Self, TypeVar

from dynakrag.errors import DynakragError, UserInputError, one_line

__all__ = [
    "JOURNAL_SCHEMA",
    "SCHEDULER_TIMEOUT_S",
    "ClusterLostError",
    "Journal",
    "JournalWriteError",
    "RecordJournal",
    "ResultStore",
    "dask_client",
    "fan_out",
    "fingerprint",
    "in_order",
    "journal_path",
    "pending",
    "release_cached",
    "release_on_workers",
    "resumed",
    "worker_cached",
]

JOURNAL_SCHEMA = "dynakrag-journal/1"
SCHEDULER_TIMEOUT_S = 20
"""Seconds Dask keeps trying to reach a ``--scheduler`` before giving up."""
_INSTALL_HINT = "pip install 'dynakrag[scale]' (make setup installs it)"
_CACHE_SIZE = 4
_cache: OrderedDict[Hashable, Any] = OrderedDict()
_cache_lock = threading.Lock()
Item = TypeVar("Item")
Result = TypeVar("Result")


def _distributed() -> Any:
    try:
        import distributed
    except ImportError:
        raise UserInputError(f"--workers and --scheduler need Dask: {_INSTALL_HINT}") from None
    return distributed


@contextlib.contextmanager
def dask_client(workers: int | None = None, scheduler: str | None = None) -> Iterator[Any]:
    """A ``distributed.Client``: of a new local cluster of ``workers`` processes (one thread
    each, no dashboard, loopback only), or of the cluster whose scheduler is at ``scheduler``.

    Exactly one of the two must be given. A scheduler that cannot be reached is a
    :class:`UserInputError` naming it.
    """
    if (workers is None) == (scheduler is None):
        raise UserInputError("give either --workers N or --scheduler ADDRESS, not both")
    distributed = _distributed()
    logging.getLogger("distributed").setLevel(_log_level())
    if scheduler is not None:
        try:
            client = distributed.Client(scheduler, timeout=SCHEDULER_TIMEOUT_S)
        except (OSError, TimeoutError) as exc:
            reason = " ".join(str(exc).split()) or type(exc).__name__
            raise UserInputError(
                f"cannot reach the Dask scheduler at {scheduler}: {reason}"
            ) from None
        with client:
            yield client
        return
    if workers is None or workers < 1:
        raise UserInputError(f"--workers must be >= 1, got {workers}")
    with warnings.catch_warnings():
        # Without a dashboard the scheduler still serves /health, on 8787 or a free port.
        warnings.filterwarnings("ignore", message="Port .* is already in use")
        cluster = distributed.LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
            silence_logs=_log_level(),
            memory_limit=0,  # no memory-based pausing or restarts: questions are small
        )
    try:
        with distributed.Client(cluster) as client:
            yield client
    finally:
        cluster.close()


def _log_level() -> int:
    """Dask's own logging: everything when this process logs debug lines
    (``DYNAKRAG_DEBUG``), else nothing. A task's error reaches the caller as the task's
    exception; the rest is cluster chatter (e.g. heartbeats cut short at shutdown)."""
    return logging.DEBUG if logging.getLogger().isEnabledFor(logging.DEBUG) else logging.CRITICAL


class ClusterLostError(DynakragError):
    """The Dask cluster stopped running a run's questions: its scheduler went away, or one
    question's task killed every worker Dask tried it on."""


def fan_out(
    client: Any,
    function: Callable[..., Any],
    items: Sequence[Item],
    *args: Any,
    keys: Sequence[str],
) -> Iterator[tuple[Item, Any]]:
    """``function(item, *args)`` for every item as one Dask task; ``(item, result)`` pairs in
    the order tasks finish. ``keys`` name the tasks (unique per item, e.g. question ids).

    An exception a task raises is raised here (with its type, e.g. a
    :class:`~dynakrag.errors.UserInputError` keeps exit code 2), and the remaining tasks are
    cancelled. A task whose worker died is retried by Dask on another worker; a task Dask gave
    up on (the scheduler lost: Dask cancels every task; a task that killed
    ``distributed.scheduler.allowed-failures`` workers) raises :class:`ClusterLostError`.
    """
    distributed = _distributed()
    if len(keys) != len(items) or len(set(keys)) != len(keys):
        raise ValueError("fan_out needs one distinct key per item")
    token = hashlib.sha256(os.urandom(8)).hexdigest()[:8]  # tasks of separate runs stay apart
    futures = {
        client.submit(function, item, *args, key=f"{key}-{token}", pure=False): item
        for item, key in zip(items, keys, strict=True)
    }
    try:
        try:
            for future, result in distributed.as_completed(futures, with_results=True):
                # A cancelled task is not raised by as_completed: its error comes as the result.
                if future.cancelled() or isinstance(result, concurrent.futures.CancelledError):
                    raise ClusterLostError(_cluster_lost(client, result))
                yield futures[future], result
        except distributed.KilledWorker as exc:
            raise ClusterLostError(
                f"Dask gave up on a question: {' '.join(str(exc).split())}{_RESUME_HINT}"
            ) from None
    finally:
        if _connected(client):  # else Dask cancelled them, and a cancel would wait to reconnect
            client.cancel(list(futures))


_RESUME_HINT = "; finished questions are kept: rerun the same command to do the rest"


def _cluster_lost(client: Any, reason: object) -> str:
    where = getattr(getattr(client, "scheduler", None), "address", None) or "the scheduler"
    why = " ".join(str(reason).split()) or type(reason).__name__
    return f"lost the Dask cluster at {where} mid-run ({why}){_RESUME_HINT}"


def worker_cached(key: tuple[Hashable, ...], build: Callable[[], Any]) -> Any:
    """``build()``'s result, made once per worker process for each ``key`` (the few most
    recent keys are kept), so every question a worker runs reuses its searcher and model.
    ``key[0]`` names the run (see :func:`release_on_workers`)."""
    with _cache_lock:
        if key in _cache:
            _cache.move_to_end(key)
            return _cache[key]
    value = build()
    with _cache_lock:
        _cache[key] = value
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return value


def release_cached(run: Hashable) -> int:
    """Drop what this process keeps for ``run`` (keys starting with it), closing what has a
    ``close()`` (database pools, cache files); how many were dropped."""
    with _cache_lock:
        keys = [key for key in _cache if isinstance(key, tuple) and key[:1] == (run,)]
        values = [_cache.pop(key) for key in keys]
    for value in values:
        close = getattr(value, "close", None)
        if callable(close):
            with contextlib.suppress(Exception):
                close()
    return len(values)


def release_on_workers(client: Any, run: Hashable) -> None:
    """:func:`release_cached` on every worker of ``client`` at the end of a run (a long-lived
    cluster keeps no connections of finished runs)."""
    if not _connected(client):  # the cluster is gone, and what its workers kept with it
        return
    with contextlib.suppress(Exception):  # a worker that died has nothing left to release
        client.run(release_cached, run)


def _connected(client: Any) -> bool:
    """Whether ``client`` still talks to its scheduler (not reconnecting after losing it)."""
    return getattr(client, "status", "running") == "running"


# --------------------------------------------------------------------------------------------
# Resuming


def journal_path(out: str | os.PathLike[str]) -> Path:
    """Where the journal of a run writing ``out`` lives: ``<out>.partial.jsonl`` beside it."""
    path = Path(out)
    return path.with_name(path.name + ".partial.jsonl")


def fingerprint(settings: Mapping[str, Any]) -> str:
    """A short hash of a run's settings (canonical JSON; non-JSON values by ``str``)."""
    text = json.dumps(settings, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class JournalWriteError(DynakragError, OSError):
    """The journal of a run could not be written (a full disk, a read-only folder)."""


class _LineJournal:
    """What every journal shares: the resume rule and the durable, append-only file.

    The one resume rule: a question is done when its whole line is in the file; anything
    else (a last line a crash or a full disk cut, a question never reached) is redone, and a
    cut line is cut away before the next line is appended, so the file stays JSON Lines. ``done``
    maps each finished key to its value; ``add(key, value)`` appends and flushes one line;
    ``remove()`` deletes the file once the run's real output is written. Subclasses say how a
    line looks (:meth:`_line`, :meth:`_entry`) and what heads the file.

    ``load`` and ``dump`` make the values typed: ``dump(value)`` is what a line stores (JSON
    safe; default: the value itself) and ``load(stored)`` the value read back into ``done``
    (default: the stored JSON). A ``load`` that raises ``ValueError`` (such as a pydantic
    model's ``model_validate``) refuses the line: :class:`UserInputError`, one line naming the
    file, the line and the problem.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        load: Callable[[Any], Any] | None = None,
        dump: Callable[[Any], Any] | None = None,
    ) -> None:
        self.path = Path(path)
        self.load = load
        self.dump = dump
        self.done: dict[str, Any] = {}
        self.cut_line = False
        """Whether the file ends in a line a crash or a full disk cut (cut away on the next
        :meth:`add`)."""
        self._file: IO[str] | None = None

    def _read(self) -> None:
        if not self.path.is_file():
            return
        data = self.path.read_bytes()
        whole = data[: data.rfind(b"\n") + 1]
        self.cut_line = len(whole) < len(data)
        lines = whole.decode("utf-8", errors="replace").splitlines()
        for number, line in self._body(lines):
            entry = self._entry(_json_line(line), number)
            if entry is not None:
                self.done[entry[0]] = self._load(entry[1], number)

    def _body(self, lines: list[str]) -> list[tuple[int, str]]:
        """``(line number, line)`` of the entries among the file's whole lines."""
        return [(number, line) for number, line in enumerate(lines, start=1) if line.strip()]

    def _entry(self, line: Any, number: int) -> tuple[str, Any] | None:
        """``(key, value)`` of a whole line (None: no entry)."""
        raise NotImplementedError

    def _line(self, key: str, value: Any) -> Any:
        """The JSON written for ``key`` finished with ``value``."""
        raise NotImplementedError

    def _header(self) -> Mapping[str, Any] | None:
        """The first line of a new file (None: none)."""
        return None

    def _load(self, stored: Any, number: int) -> Any:
        if self.load is None:
            return stored
        try:
            return self.load(stored)
        except ValueError as exc:  # pydantic's ValidationError is one
            raise UserInputError(
                f"{self.path} line {number}: {one_line(exc)} (delete the journal to start afresh)"
            ) from None

    def add(self, key: str, value: Any) -> None:
        """Record ``key`` as finished with ``value`` (JSON-safe, or made so by ``dump``),
        durably. A write that fails
        (the disk full) raises :class:`JournalWriteError` and leaves the lines before it
        readable: the cut line is ignored on reading and cut away before the next one."""
        try:
            if self._file is None:
                self._open()
            self._write(self._line(key, value if self.dump is None else self.dump(value)))
        except OSError as exc:
            self.close()  # the next add reopens and cuts the cut line away first
            raise JournalWriteError(
                f"cannot write the journal {self.path}: {exc.strerror or exc} (its finished "
                "questions are kept: free space and rerun the same command to resume)"
            ) from None
        self.done[key] = value

    def _open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = self.path.open("a", encoding="utf-8")
        size = self._file.tell()
        whole = _whole_lines_size(self.path, size)
        if whole < size:  # a line cut by a crash or a full disk: cut it away, then append
            self._file.truncate(whole)
            self._file.seek(whole)
        if whole == 0:  # a new file, or its header never got written whole
            header = self._header()
            if header is not None:
                self._write(header)

    def _write(self, entry: Any) -> None:
        assert self._file is not None
        self._file.write(json.dumps(entry, ensure_ascii=False, default=str) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        """Close the file (the journal stays for a rerun)."""
        if self._file is not None:
            with contextlib.suppress(OSError):  # buffered text a full disk refuses: cut line
                self._file.close()
            self._file = None

    def remove(self) -> None:
        """Close and delete the journal: the run finished and its output is written."""
        self.close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class Journal(_LineJournal):
    """Finished questions of a run that may be cut short (``dynakrag eval --out``'s
    ``<out>.partial.jsonl``): a header line with the fingerprint of the run's settings, then
    ``{"key": ..., "value": ...}`` a finished question (the resume rule of
    :class:`_LineJournal`).

    A journal written with other ``settings`` raises :class:`UserInputError`, and so does a
    whole line whose value ``load`` refuses (see :class:`_LineJournal`).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        settings: Mapping[str, Any],
        *,
        load: Callable[[Any], Any] | None = None,
        dump: Callable[[Any], Any] | None = None,
    ) -> None:
        super().__init__(path, load=load, dump=dump)
        self.fingerprint = fingerprint(settings)
        self._read()

    def _body(self, lines: list[str]) -> list[tuple[int, str]]:
        if not lines:  # empty, or the header cut by a crash or a full disk: no entries
            return []
        header = _json_line(lines[0])
        if not isinstance(header, dict) or header.get("schema") != JOURNAL_SCHEMA:
            raise UserInputError(
                f"{self.path} is not a dynakrag journal: move it away to start afresh"
            )
        if header.get("fingerprint") != self.fingerprint:
            raise UserInputError(
                f"{self.path} holds a partial run with other settings: rerun with the same "
                "options to resume it, or delete it to start afresh"
            )
        return super()._body(lines)[1:]

    def _entry(self, line: Any, number: int) -> tuple[str, Any] | None:
        if isinstance(line, dict) and isinstance(line.get("key"), str):
            return line["key"], line.get("value")
        return None

    def _line(self, key: str, value: Any) -> Any:
        return {"key": key, "value": value}

    def _header(self) -> Mapping[str, Any] | None:
        return {"schema": JOURNAL_SCHEMA, "fingerprint": self.fingerprint}


class RecordJournal(_LineJournal):
    """A journal of bare records, one JSON object a line keyed by its own ``key_field`` (no
    header): the benchmarks' per-question journals (``<name>-runs/*.jsonl``), readable as
    plain JSON Lines. The resume rule is :class:`_LineJournal`'s; a whole line that is not a
    record with a string ``key_field`` raises :class:`UserInputError` naming it."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        key_field: str = "id",
        load: Callable[[Any], Any] | None = None,
        dump: Callable[[Any], Any] | None = None,
    ) -> None:
        super().__init__(path, load=load, dump=dump)
        self.key_field = key_field
        self._read()

    def _entry(self, line: Any, number: int) -> tuple[str, Any] | None:
        if not isinstance(line, dict) or not isinstance(line.get(self.key_field), str):
            raise UserInputError(
                f"{self.path} line {number}: not a record with a {self.key_field!r} "
                "(move the journal away to start afresh)"
            )
        return line[self.key_field], line

    def _line(self, key: str, value: Any) -> Any:
        if not isinstance(value, Mapping) or value.get(self.key_field) != key:
            raise ValueError(f"a record of {self.path} must carry {self.key_field}={key!r}")
        return value


class ResultStore(Protocol):
    """Where a run writes each finished question's whole result: a journal, or a collection's
    records file and trajectory log (:class:`~dynakrag.training.collection_store.
    CollectionStore`). What it holds is done; ``add`` writes one question whole."""

    @property
    def done(self) -> Mapping[str, Any]: ...

    def add(self, key: str, value: Any) -> None: ...


def resumed(
    items: Sequence[Item],
    key: Callable[[Item], str],
    run: Callable[[list[Item]], Iterable[tuple[Item, Result]]],
    store: ResultStore | None = None,
    *,
    bar: Callable[[int, int], contextlib.AbstractContextManager[Any]] | None = None,
) -> Iterator[tuple[Item, Result]]:
    """The one executor of a run over many questions, with the one resume rule: the items
    whose key ``store`` holds are done (their whole result was written) and skipped; ``run``
    computes the rest (in this process or on Dask workers, ``(item, result)`` as each
    finishes), and each result is written to ``store`` before it is passed on.

    ``bar(total, done before)`` makes the progress bar (updated per item finished now). An
    item ``run`` gives no result for (a question left out) stays undone: a rerun tries it.
    """
    done = store.done if store is not None else {}
    todo = pending(items, key, done)
    before = len(items) - len(todo)
    with bar(len(items), before) if bar is not None else contextlib.nullcontext() as shown:
        for item, result in run(todo):
            if store is not None:
                store.add(key(item), result)
            yield item, result
            if shown is not None:
                shown.update(1)


def in_order(
    items: Iterable[Item], key: Callable[[Item], str], done: Mapping[str, Result]
) -> list[Result]:
    """The results of ``items`` in their order, from ``done`` (every one must be there)."""
    return [done[key(item)] for item in items]


def _whole_lines_size(path: Path, size: int) -> int:
    """How many of the first ``size`` bytes of ``path`` are whole lines (up to the last
    newline), read backwards a block at a time."""
    block = 1 << 16
    with path.open("rb") as file:
        end = size
        while end > 0:
            start = max(0, end - block)
            file.seek(start)
            newline = file.read(end - start).rfind(b"\n")
            if newline >= 0:
                return start + newline + 1
            end = start
    return 0


def _json_line(line: str) -> Any:
    try:
        return json.loads(line)
    except ValueError:
        return None


def pending(items: Iterable[Item], key: Callable[[Item], str], done: Collection[str]) -> list[Item]:
    """The items whose key is not among ``done``, in their order (asked by membership: a
    store of files answers for a key it could not list back)."""
    return [item for item in items if key(item) not in done]
