"""Every notebook under ``notebooks/`` runs top to bottom with the fake backend, offline."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat", reason="needs dynakrag[dev]")
nbclient = pytest.importorskip("nbclient", reason="needs dynakrag[dev]")
kernelspec = pytest.importorskip("ipykernel.kernelspec", reason="needs dynakrag[dev]")

pytestmark = pytest.mark.slow

REPO_ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((REPO_ROOT / "notebooks").glob("*.ipynb"))
NEEDS_DATA = {"evaluation"}  # notebooks that read the benchmark samples
EXPECTED_NOTEBOOKS = {
    "quickstart",
    "evaluation",
    "train_policy",
    "dics_walkthrough",
    "retrain_from_logs",
}
PRINTS: dict[str, tuple[str, ...]] = {
    # What a notebook must show besides an answer (its point, not just that it ran).
    "quickstart": ("Answer:   Quarstead",),  # the demo question, followed hop by hop
    "train_policy": ("labelled (state, action) records", "held-out R²", "| retrained |"),
    "retrain_from_logs": (
        "4 runs by support, 2 by answers only",
        "held-out R² per action",
        "decisions of the new policy on the logged states",
        "| retrained |",
    ),
    "dics_walkthrough": (
        "| # | segment | sub-question |",
        "core node: birth date",
        "2 selection criteria",
        "candidate chunks from 3 sub-questions",
        "chosen chunks (criteria",
        "2 chunks instead of a fixed top-4",
    ),
}
PROBE = "import sys\nprint('KERNEL_PREFIX=' + sys.prefix)"


@pytest.fixture(scope="module")
def kernel_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A ``python3`` kernelspec that runs this interpreter, found first through JUPYTER_PATH.

    Whatever ``python3`` kernel is registered elsewhere (another virtualenv, the system), the
    notebooks run with the Python running the tests.
    """
    prefix = tmp_path_factory.mktemp("jupyter")
    kernelspec.install(kernel_name="python3", prefix=str(prefix))
    jupyter_path = os.pathsep.join(
        part for part in (str(prefix / "share" / "jupyter"), os.environ.get("JUPYTER_PATH")) if part
    )
    return {
        "JUPYTER_PATH": jupyter_path,
        "DYNAKRAG_NOTEBOOK_FAKE": "1",
        "DYNAKRAG_CACHE_DIR": str(tmp_path_factory.mktemp("cache")),
        "LANGSMITH_TRACING": "false",
        "PYDEVD_DISABLE_FILE_VALIDATION": "1",
    }


def test_there_are_notebooks() -> None:
    assert NOTEBOOKS, "no notebooks under notebooks/"
    assert {p.stem for p in NOTEBOOKS} >= EXPECTED_NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(
    path: Path, kernel_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    if path.stem in NEEDS_DATA:
        from dynakrag.data.datasets import DataMissingError, data_dir

        try:
            data_dir()
        except DataMissingError as exc:
            pytest.skip(f"{path.name} needs the benchmark data: {exc}")
    for name, value in kernel_env.items():
        monkeypatch.setenv(name, value)
    nb = nbformat.read(path, as_version=4)
    assert all(
        not cell.get("outputs") and cell.get("execution_count") is None
        for cell in nb.cells
        if cell.cell_type == "code"
    ), f"{path.name} is committed with outputs: clear them"
    nb.cells.append(nbformat.v4.new_code_cell(PROBE))

    client = nbclient.NotebookClient(
        nb,
        kernel_name="python3",
        timeout=300,
        resources={"metadata": {"path": str(REPO_ROOT)}},
    )
    client.execute()  # raises CellExecutionError on the first failing cell

    texts: list[str] = []
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            assert output.output_type != "error", f"{output.ename}: {output.evalue}"
            if output.output_type == "stream":
                texts.append(output.text)
            elif "data" in output:
                texts.append(str(output.data.get("text/plain", "")))
                texts.append(str(output.data.get("text/markdown", "")))
    printed = "".join(texts)
    assert f"KERNEL_PREFIX={sys.prefix}" in printed, "the kernel is not this interpreter"
    assert "Answer" in printed
    for text in PRINTS.get(path.stem, ()):
        assert text in printed, f"{path.name} did not show {text!r}"
