"""Near-duplicate removal during a template run with bf16 embeddings (`--dedup-precision`): the workers embed in
bf16, and every task within RECHECK_MARGIN of the threshold is decided again from fp32 embeddings, so the kept
tasks, the matches and the written file are those of an fp32 run."""

from __future__ import annotations

import numpy as np
import pytest

from clawgym.synth.pipeline import (
    RECHECK_MARGIN,
    RunDedup,
    embed_request,
    resolve_dedup_precision,
    synthesize,
)
from test_synth_voice import near_copies

A = ("Hi, could you tidy the March expenses in `finance/march.csv`: drop the duplicate rows, write the dates as "
     "YYYY-MM-DD and save the result to `finance/march_clean.csv`. Thanks, Dana")
B = ("Hello, please clean up the April expenses in `finance/april.csv`: remove repeated rows, write every date as "
     "YYYY-MM-DD and save it as `finance/april_clean.csv`. Cheers, Dana")


def _decisions(precision: str, threshold: float, texts: list[str]):
    run = RunDedup(threshold, precision)
    out = []
    for i, text in enumerate(texts):
        m = run.check(f"t{i}", "one category", {"instruction": text})
        out.append(None if m is None else (m.duplicate_of, round(m.similarity, 6)))
    return out, run


def test_bf16_decides_a_pair_at_the_threshold_as_fp32_does():
    """A pair whose fp32 cosine sits just above, then just below, the threshold: bf16 alone could land on either
    side (it moves cosines by up to ~0.006), the recheck makes both decisions fp32's."""
    c = float(embed_request(A, "fp32") @ embed_request(B, "fp32"))
    c16 = float(embed_request(A, "bf16") @ embed_request(B, "bf16"))
    assert 0.5 < c < 0.99 and abs(c - c16) < RECHECK_MARGIN
    for threshold, dup in ((c - 1e-4, True), (c + 1e-4, False)):
        want, _ = _decisions("fp32", threshold, [A, B])
        got, run = _decisions("bf16", threshold, [A, B])
        assert got == want and (got[1] is not None) == dup
        assert run.rechecked == 1 and run.recheck_max_error == pytest.approx(abs(c - c16), abs=1e-6)
        d = run.as_dict()
        assert d["model"] == "all-MiniLM-L6-v2 (bf16)" and d["rechecked"] == 1


def test_bf16_keeps_far_pairs_without_a_recheck():
    got, run = _decisions("bf16", 0.999, [A, B])
    assert got == [None, None] and run.rechecked == 0 and "rechecked" not in RunDedup(0.9, "fp32").as_dict()


def test_a_bf16_run_writes_the_bytes_of_an_fp32_run(tmp_path):
    a, b = tmp_path / "fp32.jsonl", tmp_path / "bf16.jsonl"
    ra = synthesize(6, 7, a, jobs=2, validate=False, make=near_copies, dedup=True, dedup_precision="fp32")
    rb = synthesize(6, 7, b, jobs=2, validate=False, make=near_copies, dedup=True, dedup_precision="bf16")
    assert a.read_bytes() == b.read_bytes()
    assert ra.near_duplicates["dropped"] == rb.near_duplicates["dropped"] == 5
    # near copies are far above the threshold: no recheck needed; a resumed bf16 run writes the same file too
    part = tmp_path / "part.jsonl"
    synthesize(3, 7, part, jobs=1, validate=False, make=near_copies, dedup=True, dedup_precision="bf16")
    synthesize(6, 7, part, jobs=1, validate=False, make=near_copies, dedup=True, dedup_precision="bf16")
    assert part.read_bytes() == a.read_bytes()


def test_dedup_precision_is_checked_and_auto_follows_the_cpu(monkeypatch):
    import clawgym.synth.dedup as dedup

    with pytest.raises(Exception, match="unknown dedup precision 'fp16'"):
        resolve_dedup_precision("fp16")
    monkeypatch.setattr(dedup, "fast_bf16", lambda: False)
    assert resolve_dedup_precision("auto") == "fp32" and resolve_dedup_precision("bf16") == "bf16"
    monkeypatch.setattr(dedup, "fast_bf16", lambda: True)
    assert resolve_dedup_precision("auto") == "bf16"
    assert np.isclose(np.linalg.norm(embed_request(A, "bf16")), 1.0, atol=1e-3)
