"""dynakrag.files: atomic writes, hashes, JSON and JSONL (the array archives: test_forest)."""

from __future__ import annotations

import hashlib
import json
import math
import stat
from pathlib import Path

import numpy as np
import pytest

from dynakrag.errors import UserInputError
from dynakrag.files import (
    atomic_writer,
    canonical_json_line,
    json_safe,
    read_json,
    read_jsonl,
    records_sha256,
    sha256_bytes,
    sha256_file,
    write_bytes_atomic,
    write_json,
    write_jsonl,
    write_text_atomic,
)


class Crash(BaseException):
    """Stands for the process dying mid-write."""


def test_atomic_writes_replace_whole_files_and_leave_no_temporaries(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "f.bin"
    assert write_bytes_atomic(target, b"old") == target  # the folder is created
    with pytest.raises(Crash), atomic_writer(target) as handle:
        handle.write(b"half of the new")
        raise Crash
    assert target.read_bytes() == b"old"
    with pytest.raises(ValueError), atomic_writer(target) as handle:
        handle.write(b"refused by a check")
        raise ValueError("checksum mismatch")
    assert target.read_bytes() == b"old"
    write_text_atomic(target, "né\n")
    assert target.read_bytes() == "né\n".encode()
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    with atomic_writer(target, durable=True) as handle:
        handle.write(b"synced")
    assert target.read_bytes() == b"synced"
    assert [p.name for p in target.parent.iterdir()] == ["f.bin"]


def test_write_json_matches_json_dumps(tmp_path: Path) -> None:
    data = {"b": [1, 2.5], "a": "é", "n": float("nan")}
    path = write_json(tmp_path / "d.json", data)
    assert path.read_text() == json.dumps(data, indent=2) + "\n"
    write_json(path, data, sort_keys=True, ensure_ascii=False, indent=None)
    assert (
        path.read_text(encoding="utf-8")
        == json.dumps(data, sort_keys=True, ensure_ascii=False) + "\n"
    )
    with pytest.raises(ValueError):
        write_json(path, data, allow_nan=False)
    write_json(path, {"p": tmp_path}, default=str)
    assert read_json(path) == {"p": str(tmp_path)}


def test_hashes(tmp_path: Path) -> None:
    data = np.random.default_rng(0).bytes(3 << 20)  # more than one read block
    path = write_bytes_atomic(tmp_path / "blob", data)
    seen: list[int] = []
    assert sha256_file(path, on_block=seen.append) == hashlib.sha256(data).hexdigest()
    assert sum(seen) == len(data) and len(seen) == 3
    assert sha256_bytes(b"abc") == hashlib.sha256(b"abc").hexdigest()
    with pytest.raises(OSError):
        sha256_file(tmp_path / "missing")


def test_records_sha256_hashes_canonical_lines() -> None:
    records = [{"b": 1, "a": [1, 2]}, {"x": "é"}]
    lines = "".join(canonical_json_line(r) + "\n" for r in records)
    assert canonical_json_line(records[0]) == '{"a":[1,2],"b":1}'
    assert records_sha256(records) == hashlib.sha256(lines.encode()).hexdigest()
    assert records_sha256([{"a": [1, 2], "b": 1}, records[1]]) == records_sha256(records)
    assert records_sha256(reversed(records)) != records_sha256(records)
    with pytest.raises(ValueError):
        records_sha256([{"a": math.nan}])


def test_read_json_refuses_with_a_short_reason(tmp_path: Path) -> None:
    good = write_json(tmp_path / "good.json", {"a": 1})
    assert read_json(good) == {"a": 1}
    cases = {
        "not UTF-8": b"\x80\x04N.",
        "invalid JSON": b"{nope",
        "nested too deeply": b"[" * 100_000 + b"]" * 100_000,
    }
    for reason, content in cases.items():
        path = write_bytes_atomic(tmp_path / "bad.json", content)
        with pytest.raises(ValueError, match=reason):
            read_json(path)
    with pytest.raises(ValueError, match="larger than 5 bytes"):
        read_json(good, max_bytes=5)
    with pytest.raises(OSError):
        read_json(tmp_path / "missing.json")


def test_json_safe() -> None:
    value = {1: (np.float32(0.5), float("inf")), "n": [np.int64(3), math.nan, "s"]}
    assert json_safe(value) == {"1": [0.5, None], "n": [3, None, "s"]}


def test_jsonl_round_trip_and_refusals(tmp_path: Path) -> None:
    records = [{"schema": "s/1", "i": i, "t": "é"} for i in range(3)]
    path = tmp_path / "deep" / "r.jsonl"
    assert write_jsonl(iter(records), path) == 3
    assert read_jsonl(path) == records
    assert read_jsonl([path, path], schema="s/1") == records * 2
    with pytest.raises(UserInputError, match="line 1: not a s/2 record"):
        read_jsonl(path, schema="s/2")
    listed = write_bytes_atomic(tmp_path / "list.jsonl", b"\n[1, 2]\n")
    with pytest.raises(UserInputError, match="line 2: not a JSON object"):
        read_jsonl(listed)
    broken = write_bytes_atomic(tmp_path / "broken.jsonl", b'{"a": 1}\n{oops\n')
    with pytest.raises(UserInputError, match="line 2: invalid JSON"):
        read_jsonl(broken)
    with pytest.raises(UserInputError, match="cannot read trajectories"):
        read_jsonl(tmp_path / "missing.jsonl", what="trajectories")
