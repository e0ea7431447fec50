"""Random forests that are fitted with scikit-learn but stored and evaluated as plain arrays.

A fitted ``RandomForestRegressor`` is exported into a :class:`TreeEnsemble`: every tree's
``children_left``, ``children_right``, ``feature``, ``threshold`` and leaf ``value`` arrays,
concatenated, with ``offsets`` marking where each tree starts. ``TreeEnsemble.predict`` walks
the trees with numpy alone (the mean over trees, as scikit-learn does) and reproduces
scikit-learn's predictions: inputs are rounded to float32 first, as scikit-learn's trees do.

An ensemble is stored as those numeric arrays (:meth:`TreeEnsemble.to_arrays`) in a ``.npz``
written and read by :func:`dynakrag.files.write_arrays` / :func:`~dynakrag.files.read_arrays`,
which never run code from the file. A loaded ensemble is validated (index ranges, children
after their parent, finite numbers) so that a crafted file can neither index out of range nor
make prediction loop.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from sklearn.ensemble import RandomForestRegressor

__all__ = ["TreeEnsemble", "fit_forest"]

MAX_DEPTH = 4096
"""Deepest tree accepted (scikit-learn forests here are a few dozen levels deep)."""
_TREE_ARRAYS = ("offsets", "children_left", "children_right", "feature", "threshold", "value")


# --------------------------------------------------------------------------------------------
# The ensemble


class TreeEnsemble:
    """Regression trees as flat arrays; ``predict`` is the mean of the trees' leaf values.

    Arrays (``N`` nodes over ``T`` trees; node indices local to their tree, as in
    scikit-learn's ``tree_``): ``offsets`` int64 ``(T + 1,)``, ``children_left`` and
    ``children_right`` int64 ``(N,)`` (-1 for a leaf), ``feature`` int64 ``(N,)``,
    ``threshold`` float64 ``(N,)`` (go left when ``x[feature] <= threshold``), ``value``
    float64 ``(N,)``. Raises ``ValueError`` when the arrays do not form valid trees.
    """

    def __init__(
        self,
        *,
        n_features: int,
        offsets: np.ndarray,
        children_left: np.ndarray,
        children_right: np.ndarray,
        feature: np.ndarray,
        threshold: np.ndarray,
        value: np.ndarray,
    ) -> None:
        self.n_features = int(n_features)
        self.offsets = _as(offsets, np.int64, "offsets")
        self.children_left = _as(children_left, np.int64, "children_left")
        self.children_right = _as(children_right, np.int64, "children_right")
        self.feature = _as(feature, np.int64, "feature")
        self.threshold = _as(threshold, np.float64, "threshold")
        self.value = _as(value, np.float64, "value")
        self._validate_and_compile()

    # --- construction ---------------------------------------------------------------------

    @classmethod
    def from_sklearn(cls, forest: RandomForestRegressor) -> TreeEnsemble:
        """Export a fitted single-output ``RandomForestRegressor``."""
        trees = [estimator.tree_ for estimator in forest.estimators_]
        if not trees:
            raise ValueError("the forest has no trees")
        if any(tree.n_outputs != 1 for tree in trees):
            raise ValueError("only single-output forests can be exported")
        sizes = [int(tree.node_count) for tree in trees]
        return cls(
            n_features=int(forest.n_features_in_),
            offsets=np.concatenate([[0], np.cumsum(sizes)]),
            children_left=np.concatenate([tree.children_left for tree in trees]),
            children_right=np.concatenate([tree.children_right for tree in trees]),
            feature=np.concatenate([tree.feature for tree in trees]),
            threshold=np.concatenate([tree.threshold for tree in trees]),
            value=np.concatenate([tree.value[:, 0, 0] for tree in trees]),
        )

    def to_arrays(self, prefix: str) -> dict[str, np.ndarray]:
        """The arrays to store, named ``{prefix}.{array}``."""
        return {
            f"{prefix}.offsets": self.offsets,
            f"{prefix}.children_left": self.children_left,
            f"{prefix}.children_right": self.children_right,
            f"{prefix}.feature": self.feature,
            f"{prefix}.threshold": self.threshold,
            f"{prefix}.value": self.value,
        }

    @classmethod
    def from_arrays(
        cls, arrays: Mapping[str, np.ndarray], prefix: str, n_features: int
    ) -> TreeEnsemble:
        """The ensemble stored under ``prefix`` (``ValueError`` when missing or invalid)."""
        missing = [name for name in _TREE_ARRAYS if f"{prefix}.{name}" not in arrays]
        if missing:
            raise ValueError(f"missing arrays {', '.join(f'{prefix}.{m}' for m in missing)}")
        parts = {name: arrays[f"{prefix}.{name}"] for name in _TREE_ARRAYS}
        return cls(n_features=n_features, **parts)

    # --- prediction -----------------------------------------------------------------------

    @property
    def n_trees(self) -> int:
        return len(self.offsets) - 1

    @property
    def n_nodes(self) -> int:
        return len(self.value)

    @property
    def max_depth(self) -> int:
        return self._depth

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Mean leaf value over the trees for each row of ``X`` (shape ``(n, n_features)``)."""
        x = self._rows(X)
        if x.shape[0] == 0:
            return np.zeros(0, dtype=np.float64)
        rows = np.arange(x.shape[0])[:, None]
        nodes = np.tile(self._roots, (x.shape[0], 1))
        for _ in range(self._depth):
            go_left = x[rows, self._feat[nodes]] <= self._thr[nodes]
            nodes = np.where(go_left, self._left[nodes], self._right[nodes])
        return self.value[nodes].mean(axis=1)

    def path_contributions(self, X: np.ndarray) -> tuple[float, np.ndarray]:
        """``(bias, contributions)`` with ``predict(X) == bias + contributions.sum(axis=1)``.

        Path-based attribution (Saabas): walking a row down a tree, each split moves the node
        value from the parent's to the child's; that change is credited to the split's feature.
        A tree's leaf value is then its root value plus the changes along the path, so the
        forest's mean is ``bias`` (the mean root value: the training mean) plus the per-feature
        sums averaged over the trees: exact, from the stored node values, no extra model.
        ``contributions`` has shape ``(n, n_features)``.
        """
        x = self._rows(X)
        contributions = np.zeros((x.shape[0], self.n_features), dtype=np.float64)
        bias = float(self.value[self._roots].mean())
        if x.shape[0] == 0:
            return bias, contributions
        rows = np.arange(x.shape[0])[:, None]
        nodes = np.tile(self._roots, (x.shape[0], 1))
        flat_rows = np.broadcast_to(rows, nodes.shape)
        for _ in range(self._depth):
            features = self._feat[nodes]
            go_left = x[rows, features] <= self._thr[nodes]
            children = np.where(go_left, self._left[nodes], self._right[nodes])
            # A leaf is its own child (delta 0), so finished paths add nothing.
            delta = self.value[children] - self.value[nodes]
            np.add.at(contributions, (flat_rows, features), delta)
            nodes = children
        return bias, contributions / self.n_trees

    def _rows(self, X: np.ndarray) -> np.ndarray:
        """``X`` as checked float64 rows, rounded through float32 as scikit-learn's trees
        compare them (float32 inputs against float64 thresholds)."""
        X = np.asarray(X, dtype=np.float64)
        if X.ndim == 1:
            X = X[None, :]
        if X.ndim != 2 or X.shape[1] != self.n_features:
            raise ValueError(f"expected rows of {self.n_features} features, got {X.shape}")
        if not np.all(np.isfinite(X)):
            raise ValueError("features must be finite")
        return X.astype(np.float32).astype(np.float64)

    # --- validation -----------------------------------------------------------------------

    def _validate_and_compile(self) -> None:
        n = self.n_nodes
        if self.n_features < 1:
            raise ValueError(f"n_features must be >= 1, got {self.n_features}")
        for name in ("children_left", "children_right", "feature", "threshold"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"{name} has {len(getattr(self, name))} entries, value has {n}")
        offsets = self.offsets
        if len(offsets) < 2 or offsets[0] != 0 or offsets[-1] != n:
            raise ValueError(f"offsets must run from 0 to the node count {n}")
        sizes = np.diff(offsets)
        if np.any(sizes < 1):
            raise ValueError("every tree needs at least one node")
        tree_of = np.repeat(np.arange(len(sizes)), sizes)
        local = np.arange(n) - offsets[tree_of]
        size = sizes[tree_of]
        left, right = self.children_left, self.children_right
        leaf = left == -1
        if np.any(leaf != (right == -1)):
            raise ValueError("a node has exactly one child")
        internal = ~leaf
        # Children come after their parent within the tree: prediction always reaches a leaf.
        for name, child in (("children_left", left), ("children_right", right)):
            bad = internal & ((child <= local) | (child >= size))
            if np.any(bad):
                raise ValueError(f"{name} points outside its tree or backwards")
        if np.any(internal & ((self.feature < 0) | (self.feature >= self.n_features))):
            raise ValueError(f"a split feature is outside 0..{self.n_features - 1}")
        if not np.all(np.isfinite(self.threshold[internal])):
            raise ValueError("a split threshold is not finite")
        if not np.all(np.isfinite(self.value)):
            raise ValueError("a leaf value is not finite")
        base = offsets[tree_of]
        index = np.arange(n)
        self._roots = offsets[:-1].copy()
        self._left = np.where(internal, left + base, index)
        self._right = np.where(internal, right + base, index)
        self._feat = np.where(internal, self.feature, 0)
        self._thr = np.where(internal, self.threshold, np.inf)
        self._depth = self._levels(internal)

    def _levels(self, internal: np.ndarray) -> int:
        """Depth of the deepest leaf (number of splits on the longest root-leaf path)."""
        level = np.unique(self._roots)
        depth = 0
        while True:
            inner = level[internal[level]]
            if inner.size == 0:
                return depth
            depth += 1
            if depth > MAX_DEPTH:
                raise ValueError(f"a tree is deeper than {MAX_DEPTH} levels")
            level = np.unique(np.concatenate([self._left[inner], self._right[inner]]))


def _as(array: Any, dtype: type[np.generic], name: str) -> np.ndarray:
    array = np.asarray(array)
    if array.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {array.shape}")
    kind = np.dtype(dtype).kind
    if kind == "i" and array.dtype.kind not in "iu":
        raise ValueError(f"{name} must hold integers, got {array.dtype}")
    if kind == "f" and array.dtype.kind not in "iuf":
        raise ValueError(f"{name} must hold numbers, got {array.dtype}")
    return np.ascontiguousarray(array, dtype=dtype)


# --------------------------------------------------------------------------------------------
# Fitting


def fit_forest(
    X: np.ndarray,
    y: np.ndarray,
    *,
    n_estimators: int = 300,
    min_samples_leaf: int = 8,
    random_state: int = 13,
    n_jobs: int | None = None,
    progress: bool = False,
    desc: str = "fitting trees",
) -> tuple[RandomForestRegressor, TreeEnsemble]:
    """Fit a ``RandomForestRegressor`` and export it.

    With ``progress`` the trees are grown in chunks (``warm_start``, which gives the same
    trees as one fit) under a progress bar on stderr.
    """
    from sklearn.ensemble import RandomForestRegressor

    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if X.ndim != 2 or y.shape != (X.shape[0],) or X.shape[0] == 0:
        raise ValueError(f"need X of shape (n, d) and y of shape (n,), got {X.shape}, {y.shape}")
    if not (np.all(np.isfinite(X)) and np.all(np.isfinite(y))):
        raise ValueError("training data must be finite")
    forest = RandomForestRegressor(
        n_estimators=n_estimators,
        min_samples_leaf=min_samples_leaf,
        random_state=random_state,
        n_jobs=n_jobs,
        warm_start=progress,
    )
    if not progress:
        forest.fit(X, y)
    else:
        from dynakrag.progress import progress_bar

        chunk = max(1, n_estimators // 10)
        with progress_bar(total=n_estimators, desc=desc, unit="tree", file=sys.stderr) as bar:
            grown = 0
            while grown < n_estimators:
                grown = min(n_estimators, grown + chunk)
                forest.set_params(n_estimators=grown)
                forest.fit(X, y)
                bar.update(grown - bar.n)
        forest.set_params(warm_start=False)
    return forest, TreeEnsemble.from_sklearn(forest)
