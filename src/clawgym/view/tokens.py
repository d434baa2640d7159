"""Token ids as text for the token view: the tokenizer of the model a step names, loaded from this machine only.

A step records the model its call named (``smollm2-135m``, a local model directory, or an upstream's name). The
tokenizer is looked for where ``clawgym serve`` would find the model, and nowhere else -- nothing is ever
downloaded:

* an embedded model's converted directory in the cache (``~/.cache/clawgym/models/<name>/``, made the first
  time the model was served; the viewer never converts one itself);
* a local Hugging Face model directory (a path with a ``config.json``).

``tokenizer.json`` is read with the ``tokenizers`` library; a directory with only a slow tokenizer goes through
``transformers.AutoTokenizer`` with ``local_files_only=True`` (no remote code). Anything else -- an upstream's
model, an adapter name -- has no local tokenizer: the page shows the ids and says why.

Each token's text is its own bytes: for byte-level BPE (GPT-2, Llama 3, SmolLM2) the token's symbols mapped back
to bytes, shown as UTF-8 when they are whole characters and as ``\\xNN`` escapes when a character is split over
several tokens, so the tokens of a response put together give exactly its text.
"""

from __future__ import annotations

import logging
import re
import threading
from pathlib import Path
from typing import Any

log = logging.getLogger("clawgym.view")

_PLAIN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,200}$")
_lock = threading.Lock()
_cache: dict[str, tuple[Any, str | None, str | None]] = {}  # model -> (decoder, path, None): the loaded ones


def _byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level alphabet, inverted: the symbol of each byte -> the byte."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs, strict=True)}


class TokenText:
    """Token ids -> the text of each token (see the module docstring)."""

    def __init__(self, tokenizer: Any, kind: str):
        self.tok, self.kind = tokenizer, kind
        self._bytes: dict[str, int] | None = None
        if kind == "tokenizers" and type(tokenizer.decoder).__name__ == "ByteLevel":
            self._bytes = _byte_decoder()

    def _piece(self, i: int) -> str | None:
        if self.kind == "tokenizers":
            return self.tok.id_to_token(i)
        return self.tok.convert_ids_to_tokens(i)

    def token(self, i: int) -> str:
        piece = self._piece(int(i))
        if piece is None:
            return f"<unknown id {i}>"
        if self._bytes is not None and all(ch in self._bytes for ch in piece):
            raw = bytes(self._bytes[ch] for ch in piece)
            try:
                return raw.decode("utf-8")
            except UnicodeDecodeError:
                # a character split over tokens: the longest whole prefix, then the rest as escapes
                for cut in range(len(raw) - 1, 0, -1):
                    try:
                        head = raw[:cut].decode("utf-8")
                    except UnicodeDecodeError:
                        continue
                    return head + "".join(f"\\x{b:02x}" for b in raw[cut:])
                return "".join(f"\\x{b:02x}" for b in raw)
        if self.kind == "tokenizers":
            return self.tok.decode([int(i)], skip_special_tokens=False)
        return self.tok.convert_tokens_to_string([piece])

    def tokens(self, ids: list[int]) -> list[str]:
        return [self.token(i) for i in ids]

    def text(self, ids: list[int]) -> str:
        return self.tok.decode([int(i) for i in ids], skip_special_tokens=False)


def candidate_dirs(model: str) -> list[Path]:
    """Where a local tokenizer of `model` may be: the embedded model's cache directory, a local model dir."""
    from clawgym.llm.models import cache_root

    out = []
    if _PLAIN_NAME.match(model):
        out.append(cache_root() / "models" / model)
    path = Path(model).expanduser()
    if path.is_absolute() or model.startswith((".", "~")) or "/" in model:
        out.append(path)
    return [p for p in out if p.is_dir() and (p / "config.json").exists()]


def _load(model: str) -> tuple[TokenText | None, str | None, str | None]:
    dirs = candidate_dirs(model)
    if not dirs:
        return None, None, (f"no local tokenizer for model {model!r} (an embedded model served once, or a local "
                            "model directory): showing token ids")
    d = dirs[0]
    try:
        if (d / "tokenizer.json").is_file():
            from tokenizers import Tokenizer

            return TokenText(Tokenizer.from_file(str(d / "tokenizer.json")), "tokenizers"), str(d), None
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(str(d), local_files_only=True, trust_remote_code=False)
        return TokenText(tok, "transformers"), str(d), None
    except Exception as exc:  # noqa: BLE001 (any failure to load means ids only, said on the page)
        log.warning("view: tokenizer of %r in %s: %s", model, d, exc)
        return None, str(d), f"the tokenizer in {d} could not be loaded ({type(exc).__name__}): showing token ids"


def token_text(model: str | None) -> tuple[TokenText | None, str | None, str | None]:
    """(decoder or None, its directory, a note when there is none), loaded once per model name."""
    if not model:
        return None, None, "the step names no model: showing token ids"
    with _lock:
        if model in _cache:
            return _cache[model]
        found = _load(model)
        if found[0] is not None:  # a miss is looked for again next time (the model may be served meanwhile)
            _cache[model] = found
        return found
