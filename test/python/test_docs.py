"""Every Python snippet in docs/packed.md, docs/columnar.md and docs/trainers.md runs as written.

Each ```python block runs on its own, in a fresh interpreter, in a folder that holds the files the
docs' commands write (from SPEC's worked example and a screenshot replaced in place) and an
``examples`` link to the repository's, as if run from a checkout."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from conftest import ROOT, callforest

DOCS = ("docs/packed.md", "docs/columnar.md", "docs/trainers.md")


def snippets() -> list:
    return list(_snippets())


def _snippets():
    for doc in DOCS:
        text = (ROOT / doc).read_text()
        for match in re.finditer(r"^```python\n(.*?)^```", text, re.S | re.M):
            line = text.count("\n", 0, match.start()) + 1
            yield pytest.param(match.group(1), id=f"{doc}:{line}")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    work = tmp_path_factory.mktemp("docs")
    rollouts = str(work / "rollouts.jsonl")
    callforest("convert", str(ROOT / "examples" / "login-bug.json"), str(ROOT / "examples" / "screenshot-swap.json"),
               "-o", rollouts)  # fmt: skip
    for name, options in {
        "rows.parquet": [],
        "trees.jsonl": ["--layout", "packed"],
        "trees.parquet": ["--layout", "packed"],
        "trees.arrow": ["--layout", "packed"],
        "bins.arrows": ["--capacity", "8192"],
        "bins.arrow": ["--capacity", "256"],
    }.items():
        callforest("rows", "--strict", "--quiet", *options, rollouts, "-o", str(work / name))
    (work / "examples").symlink_to(ROOT / "examples")
    return work


def test_the_docs_have_snippets():
    assert len(snippets()) >= 5


@pytest.mark.parametrize("code", snippets())
def test_snippet_runs(workdir, code):
    env = {**os.environ, "HF_HOME": str(workdir / "hf"), "PYTHONPATH": ""}
    run = subprocess.run([sys.executable, "-c", code], cwd=workdir, env=env, capture_output=True, text=True)
    assert run.returncode == 0, f"snippet failed:\n{code}\n{run.stdout}\n{run.stderr[-3000:]}"
    assert run.stdout.strip(), "a snippet prints what it computed"
