"""Diversity metrics of task sets (`clawgym synth stats`): how varied the requests of a tasks file are.

Every metric is computed on each task's request, the text dedup embeds (:func:`clawgym.synth.dedup.task_text`:
the instruction, then each further session prompt, joined by newlines):

- **words**: the mean number of whitespace-separated words (``len(text.split())``) per request.
- **distinct-n** (n = 2 and 4): distinct word n-grams / all word n-grams, counted over the whole set. Words here
  are lowercased ``\\w+`` tokens (``re.findall(r"\\w+", text.lower())``, so ``input/data.csv`` is three); the
  n-grams of a request are taken within it, never across two requests. 1.0: no n-gram repeats anywhere.
- **gzip ratio**: ``len(gzip.compress(data, compresslevel=9, mtime=0)) / len(data)``, where ``data`` is the
  requests joined by one ``"\\n"``, in set order, encoded as UTF-8 (the compressed size includes gzip's 18 bytes of
  header and trailer). Lower: more repetition across the set.
- **nearest-neighbour cosine**: for each task, the highest cosine similarity of its all-MiniLM-L6-v2 embedding
  (dedup's :class:`~clawgym.synth.dedup.Embedder`: mean-pooled, normalised, the first 256 tokens; fp32 by
  default, so the numbers are sentence-transformers' and do not move with the CPU's bf16 support) to any other
  task of the set; the mean, p50 and p90 of those (linear interpolation). Identical requests embed once (the same
  vector), and a cosine within 1e-6 of 1 is reported as 1.0, so two equal requests are at exactly 1.0.
- **near-duplicate rate**: the share of tasks whose nearest neighbour is at or above the threshold (0.90, dedup's
  and ClawGym's). Both tasks of a close pair count; unlike dedup, across categories too.
- **counts** per category, subcategory and operation (a task of several operations counts once for each of them;
  a task without one, as imported formats often are, counts as ``unknown``).

distinct-n and the gzip ratio depend on the size of the set and the length of its requests (a larger set repeats
more n-grams and compresses better), so compare sets at equal n: :func:`sample_tasks` draws a seeded random
subset.
"""

from __future__ import annotations

import gzip
import random
import re
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from clawgym.core.errors import ClawgymError
from clawgym.core.jsonl import read_records_lenient
from clawgym.core.records import Task
from clawgym.synth.dedup import (
    DEFAULT_THRESHOLD,
    EMBEDDING_MODEL,
    Embedder,
    EmbeddingCache,
    default_cache_path,
    task_text,
)

UNKNOWN = "unknown"
COMBINED = "combined"
EMBED_BATCH = 16  # requests per forward pass: as fast as 64 here (256 requests: 12.7 s, 15.2 s), 0.35 GB less memory
NN_BLOCK = 1024  # rows of the similarity matrix computed at once: 1,024 x n floats, not n x n
NOTE = ("distinct-n and gzip ratio depend on the number of tasks and the length of their requests: compare sets at "
        "equal n (--sample N --seed S).")
_WORD = re.compile(r"\w+")
ONE_EPS = 1e-6  # a nearest-neighbour cosine this close to 1 is reported as 1.0


def words(text: str) -> int:
    """Whitespace-separated words of a request."""
    return len(text.split())


def tokens(text: str) -> list[str]:
    """The lowercased ``\\w+`` tokens that distinct-n counts."""
    return _WORD.findall(text.lower())


def distinct_n(texts: Sequence[str], n: int) -> float | None:
    """Distinct word n-grams / all word n-grams of the texts (n-grams within each text); None when there are none."""
    seen: set[tuple[str, ...]] = set()
    total = 0
    for text in texts:
        toks = tokens(text)
        grams = [tuple(toks[i:i + n]) for i in range(len(toks) - n + 1)]
        total += len(grams)
        seen.update(grams)
    return len(seen) / total if total else None


def gzip_ratio(texts: Sequence[str]) -> float | None:
    """Compressed / raw size of the texts joined by newlines (UTF-8, gzip level 9, mtime 0); None for no text."""
    data = "\n".join(texts).encode("utf-8")
    return len(gzip.compress(data, compresslevel=9, mtime=0)) / len(data) if data else None


def nearest_cosines(emb: np.ndarray, block: int = NN_BLOCK) -> np.ndarray:
    """For each row of unit vectors, its highest cosine to any other row (empty for fewer than two rows)."""
    n = len(emb)
    if n < 2:
        return np.zeros(0, np.float32)
    out = np.empty(n, np.float32)
    for start in range(0, n, block):
        stop = min(start + block, n)
        sims = emb[start:stop] @ emb.T
        rows = np.arange(stop - start)
        sims[rows, rows + start] = -np.inf  # not itself
        out[start:stop] = sims.max(axis=1)
    # an identical request's embedding is the same vector, whose float32 dot with itself rounds to 1 +- 1e-7
    return np.where(out >= 1.0 - ONE_EPS, np.float32(1.0), out)


def sample_tasks(tasks: Sequence[Task], n: int | None, seed: int) -> list[Task]:
    """`n` tasks drawn at random with `seed` (kept in file order); all of them when n is None or >= their number."""
    if n is None or n >= len(tasks):
        return list(tasks)
    picked = sorted(random.Random(seed).sample(range(len(tasks)), n))
    return [tasks[i] for i in picked]


def counts(tasks: Sequence[Task]) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
    """Tasks per category, subcategory and operation (most first; ``unknown`` where a task has none)."""
    cat: Counter[str] = Counter()
    sub: Counter[str] = Counter()
    ops: Counter[str] = Counter()
    for t in tasks:
        cat[t.category or UNKNOWN] += 1
        sub[t.subcategory or UNKNOWN] += 1
        ops.update(dict.fromkeys(t.operations or [UNKNOWN], 1))  # an operation twice in one task counts once
    return dict(cat.most_common()), dict(sub.most_common()), dict(ops.most_common())


@dataclass
class SetStats:
    """The metrics of one set of tasks (a file, a sample of it, or several files as one)."""

    name: str
    files: list[str]
    read: int  # tasks read, before sampling
    n: int  # tasks measured
    words: float | None = None
    distinct_2: float | None = None
    distinct_4: float | None = None
    gzip_ratio: float | None = None
    nn_mean: float | None = None
    nn_p50: float | None = None
    nn_p90: float | None = None
    threshold: float = DEFAULT_THRESHOLD
    near_duplicates: int = 0
    by_category: dict[str, int] = field(default_factory=dict)
    by_subcategory: dict[str, int] = field(default_factory=dict)
    by_operation: dict[str, int] = field(default_factory=dict)

    @property
    def near_duplicate_rate(self) -> float | None:
        return self.near_duplicates / self.n if self.n >= 2 else None

    def as_dict(self) -> dict[str, Any]:
        def r(x: float | None) -> float | None:
            return None if x is None else round(x, 4)

        return {
            "name": self.name, "files": self.files, "read": self.read, "n": self.n, "words": r(self.words),
            "distinct_2": r(self.distinct_2), "distinct_4": r(self.distinct_4), "gzip_ratio": r(self.gzip_ratio),
            "nn_cosine": {"mean": r(self.nn_mean), "p50": r(self.nn_p50), "p90": r(self.nn_p90)},
            "near_duplicates": {"threshold": self.threshold, "count": self.near_duplicates,
                                "rate": r(self.near_duplicate_rate)},
            "by_category": self.by_category, "by_subcategory": self.by_subcategory, "by_operation": self.by_operation,
        }


def set_stats(name: str, tasks: Sequence[Task], emb: np.ndarray, *, threshold: float = DEFAULT_THRESHOLD,
              files: Sequence[str] = (), read: int | None = None) -> SetStats:
    """The metrics of `tasks`, whose request embeddings are the rows of `emb` (same order)."""
    texts = [task_text(t) for t in tasks]
    s = SetStats(name=name, files=list(files), read=len(tasks) if read is None else read, n=len(tasks),
                 threshold=threshold)
    s.by_category, s.by_subcategory, s.by_operation = counts(tasks)
    if texts:
        s.words = sum(words(t) for t in texts) / len(texts)
    s.distinct_2, s.distinct_4 = distinct_n(texts, 2), distinct_n(texts, 4)
    s.gzip_ratio = gzip_ratio(texts)
    nn = nearest_cosines(emb)
    if len(nn):
        s.nn_mean = float(nn.mean())
        s.nn_p50, s.nn_p90 = (float(x) for x in np.percentile(nn, [50, 90]))
        s.near_duplicates = int((nn >= threshold).sum())
    return s


@dataclass
class StatsReport:
    sets: list[SetStats]
    errors: list[str] = field(default_factory=list)  # one line per bad line or unreadable file
    sample: int | None = None
    seed: int = 0
    threshold: float = DEFAULT_THRESHOLD
    precision: str = ""
    requests: int = 0  # distinct requests of all the sets, each embedded once
    embedded: int = 0  # of those, embedded by the model (the others came from the cache)
    embed_s: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "sets": [s.as_dict() for s in self.sets], "errors": self.errors, "sample": self.sample,
            "seed": self.seed, "threshold": self.threshold, "model": EMBEDDING_MODEL, "precision": self.precision,
            "distinct_requests": self.requests, "embedded_by_model": self.embedded,
            "embed_s": round(self.embed_s, 3), "note": NOTE,
        }


def read_task_file(path: Path) -> tuple[list[Task], list[str]]:
    """The good tasks of a tasks file and one line per problem (bad lines, or a file that cannot be read)."""
    if not path.exists():
        return [], [f"{path}: no such file"]
    try:
        read = read_records_lenient(path, Task)
    except ClawgymError as exc:
        return [], [str(exc)]
    return read.records, [str(e) for e in read.errors]


def embed_sets(task_sets: Sequence[Sequence[Task]], embedder: Embedder) -> list[np.ndarray]:
    """The request embeddings of each set; every distinct request is embedded once, however many sets hold it."""
    index: dict[str, int] = {}
    for tasks in task_sets:
        for t in tasks:
            index.setdefault(task_text(t), len(index))
    texts = list(index)
    emb = embedder.encode(texts) if texts else np.zeros((0, embedder.dim), np.float32)
    return [emb[[index[task_text(t)] for t in tasks]] if tasks else np.zeros((0, embedder.dim), np.float32)
            for tasks in task_sets]


def stats_of_files(paths: Sequence[Path], *, sample: int | None = None, seed: int = 0, combined: bool = False,
                   threshold: float = DEFAULT_THRESHOLD, embedder: Embedder | None = None, precision: str = "fp32",
                   cache: bool = False) -> StatsReport:
    """The metrics of each tasks file (a `sample`-task subset drawn with `seed`, when given) and, with `combined`,
    of all of them as one set (sampled from their union). Bad lines are reported in `errors` and skipped; a file
    that cannot be read is reported and left out. Without an `embedder`, one is made with `precision` (and, with
    `cache`, dedup's embedding cache under ~/.cache/clawgym/embeddings)."""
    named: list[tuple[str, list[str], int, list[Task]]] = []
    errors: list[str] = []
    every: list[Task] = []
    for path in paths:
        tasks, errs = read_task_file(path)
        errors += errs
        if errs and not tasks and not path.is_file():
            continue
        every += tasks
        named.append((str(path), [str(path)], len(tasks), sample_tasks(tasks, sample, seed)))
    if combined:
        named.append((COMBINED, [n for n, *_ in named], len(every), sample_tasks(every, sample, seed)))
    report = StatsReport(sets=[], errors=errors, sample=sample, seed=seed, threshold=threshold)
    if not any(tasks for *_, tasks in named):
        return report
    if embedder is None:
        embedder = Embedder(precision=precision, batch_size=EMBED_BATCH)
        if cache:
            embedder.cache = EmbeddingCache(default_cache_path(embedder.precision))
    before = embedder.computed
    t0 = time.perf_counter()
    embs = embed_sets([tasks for *_, tasks in named], embedder)
    report.embed_s = time.perf_counter() - t0
    report.embedded = embedder.computed - before
    report.requests = len({task_text(t) for *_, tasks in named for t in tasks})
    report.precision = embedder.precision
    report.sets = [set_stats(name, tasks, emb, threshold=threshold, files=files, read=read)
                   for (name, files, read, tasks), emb in zip(named, embs, strict=True)]
    return report
