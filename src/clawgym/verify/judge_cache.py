"""The rubric judge's answer cache on disk, keyed by a hash of what was asked."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from clawgym.core.atomic import write_json

CACHE_VERSION = 1


class JudgeCache:
    """Judge answers on disk, one JSON file per content hash (`ROOT/ab/abcdef....json`), written atomically."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    @staticmethod
    def key(model: str, messages: list[dict[str, Any]], params: dict[str, Any], sample: int) -> str:
        blob = json.dumps({"v": CACHE_VERSION, "model": model, "messages": messages, "params": params,
                           "sample": sample}, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        try:
            data = json.loads(self._path(key).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None  # absent, or torn by a crash: a miss
        return data if isinstance(data, dict) and data.get("key") == key else None

    def put(self, key: str, entry: dict[str, Any]) -> None:
        path = self._path(key)
        write_json(path, {**entry, "key": key}, indent=None, fsync=False, ensure_ascii=False)

    def count(self) -> int:
        return sum(1 for _ in self.root.glob("*/*.json"))
