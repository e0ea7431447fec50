"""Forests exported to numpy: the same predictions as scikit-learn, safe files."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import numpy as np
import pytest
from sklearn.ensemble import RandomForestRegressor

from dynakrag.errors import ConfigurationError
from dynakrag.files import META_KEY, ModelFileError, read_arrays, write_arrays
from dynakrag.policy.value_model import TreeEnsemble, fit_forest


def data(seed: int = 0, n: int = 400, d: int = 9) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X[:, 1] = rng.integers(0, 3, size=n)  # counts and one-hots, as in the real features
    X[:, 2] = rng.integers(0, 2, size=n)
    X[:, 3] = np.round(X[:, 3], 1)  # many ties at one decimal: thresholds between float32s
    y = X[:, 0] * X[:, 1] + 0.5 * X[:, 2] - X[:, 3] ** 2 + rng.normal(scale=0.1, size=n)
    return X, y


def test_export_predicts_like_sklearn() -> None:
    X, y = data()
    forest, ensemble = fit_forest(X, y, n_estimators=40, min_samples_leaf=8, random_state=13)
    assert isinstance(forest, RandomForestRegressor)
    assert ensemble.n_trees == 40 and ensemble.n_features == X.shape[1]
    X_new, _ = data(seed=1, n=300)
    for inputs in (X, X_new, X_new[:1], X_new[0]):
        np.testing.assert_allclose(
            ensemble.predict(inputs), forest.predict(np.atleast_2d(inputs)), rtol=0, atol=1e-9
        )
    # Values exactly on a threshold, or one float64 step either side of it (float32 rounding),
    # go the way scikit-learn sends them.
    internal = np.flatnonzero(ensemble.children_left >= 0)[:200]
    edges = np.repeat(X_new[:1], 3 * len(internal), axis=0)
    for row, node in enumerate(internal):
        threshold = ensemble.threshold[node]
        for shift, value in enumerate(
            (threshold, np.nextafter(threshold, -np.inf), np.nextafter(threshold, np.inf))
        ):
            edges[3 * row + shift, ensemble.feature[node]] = value
    np.testing.assert_allclose(ensemble.predict(edges), forest.predict(edges), rtol=0, atol=1e-9)


def test_progress_fit_grows_the_same_trees() -> None:
    X, y = data(2)
    _, plain = fit_forest(X, y, n_estimators=25, random_state=13)
    _, chunked = fit_forest(X, y, n_estimators=25, random_state=13, progress=True)
    for name in ("offsets", "children_left", "feature", "threshold", "value"):
        assert np.array_equal(getattr(plain, name), getattr(chunked, name)), name


def test_predict_refuses_bad_inputs() -> None:
    X, y = data()
    _, ensemble = fit_forest(X, y, n_estimators=3)
    with pytest.raises(ValueError, match="features"):
        ensemble.predict(np.zeros((2, 4)))
    bad = X[:2].copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="finite"):
        ensemble.predict(bad)
    assert ensemble.predict(np.zeros((0, X.shape[1]))).shape == (0,)


def test_arrays_round_trip_through_one_reproducible_npz(tmp_path: Path) -> None:
    X, y = data()
    forest, ensemble = fit_forest(X, y, n_estimators=10)
    first = write_arrays(tmp_path / "a.npz", ensemble.to_arrays("m"), {"k": [1, "two"]})
    second = write_arrays(tmp_path / "b.npz", ensemble.to_arrays("m"), {"k": [1, "two"]})
    assert first.read_bytes() == second.read_bytes()
    arrays, meta = read_arrays(first)
    assert meta == {"k": [1, "two"]}
    loaded = TreeEnsemble.from_arrays(arrays, "m", X.shape[1])
    np.testing.assert_allclose(loaded.predict(X), forest.predict(X), atol=1e-9)
    # It is an ordinary npz: numpy reads it without pickles.
    with np.load(first, allow_pickle=False) as raw:
        assert META_KEY in raw.files and raw[META_KEY].dtype == np.uint8
    assert not list(tmp_path.glob(".*.tmp"))


def test_write_refuses_object_arrays(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="numbers only"):
        write_arrays(tmp_path / "x.npz", {"a": np.array([object()], dtype=object)}, {})
    assert not (tmp_path / "x.npz").exists()


def tree(**changes: list) -> dict[str, np.ndarray]:
    """A valid two-tree ensemble (a stump and a single leaf), with ``changes`` applied."""
    parts = {
        "offsets": [0, 3, 4],
        "children_left": [1, -1, -1, -1],
        "children_right": [2, -1, -1, -1],
        "feature": [1, -2, -2, -2],
        "threshold": [0.5, -2.0, -2.0, -2.0],
        "value": [0.0, 1.0, 3.0, 10.0],
    }
    parts.update(changes)
    return {name: np.asarray(values) for name, values in parts.items()}


def test_hand_made_ensemble_predicts_the_mean_of_its_trees() -> None:
    ensemble = TreeEnsemble(n_features=2, **tree())
    assert ensemble.predict(np.array([[0.0, 0.0], [0.0, 1.0]])).tolist() == [5.5, 6.5]
    assert ensemble.max_depth == 1


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"children_left": [0, -1, -1, -1]}, "backwards"),
        ({"children_left": [3, -1, -1, -1]}, "outside"),
        ({"children_right": [2, -1, 5, -1]}, "exactly one child"),
        ({"feature": [2, -2, -2, -2]}, "feature"),
        ({"feature": [-1, -2, -2, -2]}, "feature"),
        ({"threshold": [np.nan, 0.0, 0.0, 0.0]}, "threshold"),
        ({"value": [0.0, np.inf, 0.0, 0.0]}, "value"),
        ({"offsets": [0, 3, 5]}, "offsets"),
        ({"offsets": [0, 0, 4]}, "at least one node"),
        ({"value": [0.0, 1.0, 3.0]}, "entries"),
        ({"feature": [1.5, 0, 0, 0]}, "integers"),
        ({"value": [[0.0, 1.0, 3.0, 10.0]]}, "one-dimensional"),
    ],
)
def test_invalid_trees_are_refused(changes: dict, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        TreeEnsemble(n_features=2, **tree(**changes))


class Boom:
    """Unpickling this creates a marker file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple:
        return (os.makedirs, (str(self.marker),))


def test_pickles_and_broken_archives_are_refused_unopened(tmp_path: Path) -> None:
    marker = tmp_path / "unpickled"
    object_npz = tmp_path / "object.npz"
    np.savez(object_npz, a=np.array([Boom(marker)], dtype=object))  # a pickle inside a zip
    assert not marker.exists()
    truncated = tmp_path / "truncated.npz"
    good = write_arrays(tmp_path / "good.npz", {"a": np.arange(3)}, {"ok": True})
    truncated.write_bytes(good.read_bytes()[:100])
    random_file = tmp_path / "random.npz"
    random_file.write_bytes(np.random.default_rng(0).bytes(2048))
    fake_zip = tmp_path / "fake.npz"
    fake_zip.write_bytes(b"PK\x03\x04" + b"\0" * 200)
    text = tmp_path / "notes.npz"
    text.write_text("hello")
    no_meta = tmp_path / "nometa.npz"
    np.savez(no_meta, a=np.arange(3))
    other_member = tmp_path / "member.npz"
    with zipfile.ZipFile(other_member, "w") as zf:
        zf.writestr("evil.pkl", b"\x80\x04N.")
    huge = tmp_path / "huge.npz"
    with zipfile.ZipFile(huge, "w") as zf, zf.open("a.npy", "w") as member:
        header = {"descr": "<f8", "fortran_order": False, "shape": (10**12,)}
        np.lib.format.write_array_header_1_0(member, header)
        member.write(b"\0" * 64)
    paths = (object_npz, truncated, random_file, fake_zip, text, no_meta, other_member, huge)
    for path in paths:
        with pytest.raises(ModelFileError) as info:
            read_arrays(path)
        assert str(info.value).startswith(f"{path} is not a dynakrag model file: ")
        assert isinstance(info.value, ConfigurationError)
    assert not marker.exists()
    with pytest.raises(ModelFileError, match="cannot read"):
        read_arrays(tmp_path / "missing.npz")
