"""A small continuous-batching generation engine on top of a transformers causal LM.

Concurrent requests share one forward pass per decoding step: new requests are prefilled together and merged
into the running batch between steps (their key/value caches left-padded to a common length), finished ones
are dropped from the batch at once. Every step returns the engine's own token ids and log-probabilities, so the
server can hand them out exactly (`return_token_ids`, `logprobs`) instead of anybody re-tokenizing text.

One thread owns the model; callers submit a :class:`GenerationRequest` and receive :class:`TokenEvent` s
through its callback. The engine works for any decoder-only model transformers loads with a `DynamicCache`.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch


@dataclass
class SamplingParams:
    max_tokens: int = 512
    temperature: float = 0.0
    top_p: float = 1.0
    stop: list[str] = field(default_factory=list)
    logprobs: bool = False
    top_logprobs: int = 0
    seed: int | None = None


@dataclass
class TokenEvent:
    """One generated token, or (with `finish_reason` set and `token_id` None) the end of a request."""

    token_id: int | None
    logprob: float | None = None
    top_logprobs: list[tuple[int, float]] | None = None
    finish_reason: str | None = None  # stop | length | cancelled | error
    error: str | None = None


@dataclass
class GenerationRequest:
    prompt_ids: list[int]
    params: SamplingParams
    emit: Callable[[TokenEvent], None]
    cancelled: bool = False
    # engine state
    generated: list[int] = field(default_factory=list)
    position: int = 0  # position id of the next token fed to the model
    last_token: int = 0
    generator: torch.Generator | None = None
    submitted_at: float = field(default_factory=time.monotonic)


class EngineError(Exception):
    pass


def _growing_layer_class() -> type:
    """A transformers `DynamicLayer` that keeps spare room after its keys and values and writes each step's new
    ones into it, instead of concatenating the whole cache anew (which, for a batch of long agent prompts, copies
    gigabytes per generated token and costs more than the forward pass itself). `keys`/`values` are views of the
    filled part; the buffers grow by half again when full."""
    from transformers.cache_utils import DynamicLayer

    class GrowingLayer(DynamicLayer):
        is_croppable = False

        def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
            self.dtype, self.device = key_states.dtype, key_states.device
            self._k = self._v = None
            self._n = 0
            self.keys = self.values = key_states[:, :, :0]
            self.is_initialized = True

        def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
                   ) -> tuple[torch.Tensor, torch.Tensor]:
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            n = self._n + key_states.shape[-2]
            if self._k is None or n > self._k.shape[-2]:
                cap = n + max(64, n // 2)
                k = key_states.new_empty((*key_states.shape[:2], cap, key_states.shape[-1]))
                v = value_states.new_empty((*value_states.shape[:2], cap, value_states.shape[-1]))
                if self._n:
                    k[:, :, : self._n] = self._k[:, :, : self._n]
                    v[:, :, : self._n] = self._v[:, :, : self._n]
                self._k, self._v = k, v
            self._k[:, :, self._n : n] = key_states
            self._v[:, :, self._n : n] = value_states
            self._n = n
            self.keys, self.values = self._k[:, :, :n], self._v[:, :, :n]
            return self.keys, self.values

        def get_seq_length(self) -> int:
            return self._n if self.is_initialized else 0

    return GrowingLayer


class PrefixCache:
    """Key/value caches of finished sequences, so a prompt that starts like an earlier one (the same system
    prompt and tools, the conversation so far in an agent loop) prefills only its new tokens.

    Least recently used entries are evicted beyond `max_tokens` cached tokens in all.
    """

    def __init__(self, max_tokens: int = 32_768, min_match: int = 16):
        self.max_tokens = max_tokens
        self.min_match = min_match
        self._entries: list[tuple[list[int], list[tuple[torch.Tensor, torch.Tensor]]]] = []  # most recent last

    def __len__(self) -> int:
        return len(self._entries)

    @staticmethod
    def _common(a: list[int], b: list[int]) -> int:
        n = min(len(a), len(b))
        i = 0
        while i < n and a[i] == b[i]:
            i += 1
        return i

    def lookup(self, prompt: list[int]) -> tuple[int, list[tuple[torch.Tensor, torch.Tensor]] | None]:
        """(matched length, per-layer (k, v) of shape (1, H, matched, D)); at least one prompt token is left
        to prefill, since its logits are needed."""
        best, best_i = 0, -1
        for i, (tokens, _) in enumerate(self._entries):
            n = self._common(tokens, prompt)
            if n > best:
                best, best_i = n, i
        best = min(best, len(prompt) - 1)
        if best < self.min_match:
            return 0, None
        tokens, kv = self._entries.pop(best_i)
        self._entries.append((tokens, kv))
        return best, [(k[:, :, :best], v[:, :, :best]) for k, v in kv]

    def store(self, tokens: list[int], kv: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        if len(tokens) < self.min_match or len(tokens) > self.max_tokens:
            return
        # An entry that is a prefix of the new one adds nothing.
        self._entries = [e for e in self._entries if not (len(e[0]) <= len(tokens) and tokens[: len(e[0])] == e[0])]
        self._entries.append((tokens, kv))
        total = sum(len(t) for t, _ in self._entries)
        while total > self.max_tokens and len(self._entries) > 1:
            total -= len(self._entries.pop(0)[0])


class BatchEngine:
    def __init__(self, model_dir: str | Path, max_batch: int = 16, threads: int | None = None,
                 prefix_cache_tokens: int = 32_768, precision: str = "auto"):
        """`precision`: auto (bf16 where the hardware has native bf16 matmuls, see
        `clawgym.core.precision`), fp32 or bf16; the weights are loaded in that dtype."""
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from clawgym.core.precision import resolve_precision

        self.precision = resolve_precision(precision)
        if threads:
            torch.set_num_threads(threads)  # process-wide: every thread applies it on its first torch call
        self.threads = torch.get_num_threads()
        self.model_dir = Path(model_dir)
        self.tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
        self.model = AutoModelForCausalLM.from_pretrained(
            str(model_dir), dtype=torch.bfloat16 if self.precision == "bf16" else torch.float32)
        self.model.eval()
        self.max_batch = max_batch
        cfg = self.model.config
        self.context_length = int(getattr(cfg, "max_position_embeddings", 4096) or 4096)
        self.eos_ids = self._eos_ids()
        self.vocab_size = int(cfg.vocab_size)
        self._pending: queue.Queue[GenerationRequest] = queue.Queue()
        self._active: list[GenerationRequest] = []
        self._cache: Any = None
        self._mask: torch.Tensor | None = None
        self._stop = threading.Event()
        self._layer_class = _growing_layer_class()
        self._thread = threading.Thread(target=self._loop, name="clawgym-engine", daemon=True)
        self.prefix_cache = PrefixCache(prefix_cache_tokens) if prefix_cache_tokens else None
        self.stats = {"steps": 0, "generated_tokens": 0, "prompt_tokens": 0, "prefix_cached_tokens": 0,
                      "max_batch_seen": 0}
        self._thread.start()

    def _eos_ids(self) -> set[int]:
        ids: set[int] = set()
        tok = self.tokenizer
        if tok.eos_token_id is not None:
            ids.add(int(tok.eos_token_id))
        gen_eos = getattr(self.model.generation_config, "eos_token_id", None)
        if isinstance(gen_eos, int):
            ids.add(gen_eos)
        elif isinstance(gen_eos, list):
            ids.update(int(i) for i in gen_eos)
        for special in ("<|im_end|>", "<|eot_id|>", "<|endoftext|>", "<end_of_turn>"):
            tid = tok.convert_tokens_to_ids(special)
            if isinstance(tid, int) and tid != tok.unk_token_id and tid is not None and tid >= 0:
                ids.add(tid)
        return ids

    # -- public ---------------------------------------------------------------------------------------------
    def submit(self, req: GenerationRequest) -> None:
        if not req.prompt_ids:
            raise EngineError("empty prompt")
        room = self.context_length - len(req.prompt_ids)
        if room <= 0:
            raise EngineError(
                f"the prompt has {len(req.prompt_ids)} tokens; this model's context length is {self.context_length}"
            )
        req.params.max_tokens = max(1, min(req.params.max_tokens, room))
        if req.params.temperature > 0:
            req.generator = torch.Generator()
            req.generator.manual_seed(req.params.seed if req.params.seed is not None else time.time_ns() & 0xFFFFFFFF)
        self._pending.put(req)

    def close(self) -> None:
        self._stop.set()
        self._pending.put(None)  # type: ignore[arg-type]  # wakes the loop
        self._thread.join(timeout=10)

    @property
    def busy(self) -> int:
        return len(self._active) + self._pending.qsize()

    # -- the loop -------------------------------------------------------------------------------------------
    def _loop(self) -> None:
        with torch.inference_mode():
            while not self._stop.is_set():
                try:
                    self._admit(block=not self._active)
                    if self._active:
                        self._step()
                except Exception as exc:  # a failed forward pass ends the requests in it, never the server
                    for r in self._active:
                        r.emit(TokenEvent(None, finish_reason="error", error=f"{type(exc).__name__}: {exc}"))
                    self._active, self._cache, self._mask = [], None, None

    def _admit(self, block: bool) -> None:
        new: list[GenerationRequest] = []
        room = self.max_batch - len(self._active)
        try:
            if block:
                item = self._pending.get()
                if item is None:
                    return
                new.append(item)
            while len(new) < room:
                item = self._pending.get_nowait()
                if item is None:
                    return
                new.append(item)
        except queue.Empty:
            pass
        new = [r for r in new if not self._drop_if_cancelled(r)]
        cold = []
        for r in new:
            matched, kv = self.prefix_cache.lookup(r.prompt_ids) if self.prefix_cache else (0, None)
            if kv is None:
                cold.append(r)
                continue
            # Prefill only what follows the cached prefix, on top of a copy-free view of its cache.
            rest = torch.tensor([r.prompt_ids[matched:]], dtype=torch.long)
            n = len(r.prompt_ids)
            out = self.model(
                input_ids=rest, attention_mask=torch.ones((1, n), dtype=torch.long),
                position_ids=torch.arange(matched, n).unsqueeze(0), past_key_values=self._new_cache(kv),
                use_cache=True, logits_to_keep=1,
            )
            self.stats["prompt_tokens"] += n - matched
            self.stats["prefix_cached_tokens"] += matched
            r.position = n
            self._merge([r], out.past_key_values, torch.ones((1, n), dtype=torch.long))
            self._emit_tokens([r], out.logits[:, -1, :].float(), offset=len(self._active) - 1)
        new = cold
        if not new:
            return
        # Prefill the new requests together (left-padded), then merge their caches into the running batch.
        width = max(len(r.prompt_ids) for r in new)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        ids = torch.full((len(new), width), pad, dtype=torch.long)
        mask = torch.zeros((len(new), width), dtype=torch.long)
        for i, r in enumerate(new):
            n = len(r.prompt_ids)
            ids[i, width - n:] = torch.tensor(r.prompt_ids, dtype=torch.long)
            mask[i, width - n:] = 1
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        out = self.model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True, logits_to_keep=1)
        self.stats["prompt_tokens"] += int(mask.sum())
        logits = out.logits[:, -1, :].float()
        for r in new:
            r.position = len(r.prompt_ids)
        self._merge(new, out.past_key_values, mask)
        self._emit_tokens(new, logits, offset=len(self._active) - len(new))

    def _layers(self, cache: Any) -> list[tuple[torch.Tensor, torch.Tensor]]:
        return [(layer.keys, layer.values) for layer in cache.layers]

    def _new_cache(self, kv: list[tuple[torch.Tensor, torch.Tensor]]) -> Any:
        """A cache holding `kv` (copied) with room to grow in place (see `_growing_layer_class`)."""
        from transformers import DynamicCache

        cache = DynamicCache()
        cache.layers = [self._layer_class() for _ in kv]
        for layer, (k, v) in zip(cache.layers, kv, strict=True):
            layer.update(k, v)
        return cache

    def _merge(self, new: list[GenerationRequest], cache: Any, mask: torch.Tensor) -> None:
        if not self._active:
            self._active, self._cache, self._mask = list(new), self._new_cache(self._layers(cache)), mask
            return
        t_run, t_new = self._mask.shape[1], mask.shape[1]
        width = max(t_run, t_new)

        def left_pad(x: torch.Tensor, t: int) -> torch.Tensor:  # (B, H, T, D) -> (B, H, width, D)
            if t == width:
                return x
            return torch.nn.functional.pad(x, (0, 0, width - t, 0))

        kv = [
            (torch.cat([left_pad(k1, t_run), left_pad(k2, t_new)]), torch.cat([left_pad(v1, t_run), left_pad(v2, t_new)]))
            for (k1, v1), (k2, v2) in zip(self._layers(self._cache), self._layers(cache), strict=True)
        ]
        m = torch.cat([
            torch.nn.functional.pad(self._mask, (width - t_run, 0)), torch.nn.functional.pad(mask, (width - t_new, 0))
        ])
        self._active = self._active + list(new)
        self._cache, self._mask = self._new_cache(kv), m

    def _drop_if_cancelled(self, r: GenerationRequest) -> bool:
        if r.cancelled:
            r.emit(TokenEvent(None, finish_reason="cancelled"))
            return True
        return False

    def _step(self) -> None:
        batch = self._active
        ids = torch.tensor([[r.last_token] for r in batch], dtype=torch.long)
        pos = torch.tensor([[r.position] for r in batch], dtype=torch.long)
        mask = torch.nn.functional.pad(self._mask, (0, 1), value=1)
        out = self.model(input_ids=ids, attention_mask=mask, position_ids=pos, past_key_values=self._cache, use_cache=True)
        self._cache, self._mask = out.past_key_values, mask
        for r in batch:
            r.position += 1
        self.stats["steps"] += 1
        self.stats["max_batch_seen"] = max(self.stats["max_batch_seen"], len(batch))
        self._emit_tokens(batch, out.logits[:, -1, :].float(), offset=0)

    def _sample(self, r: GenerationRequest, logits: torch.Tensor) -> int:
        p = r.params
        if p.temperature <= 0:
            return int(torch.argmax(logits))
        probs = torch.softmax(logits / p.temperature, dim=-1)
        if p.top_p < 1.0:
            sorted_p, idx = torch.sort(probs, descending=True)
            keep = sorted_p.cumsum(-1) - sorted_p < p.top_p
            sorted_p = sorted_p * keep
            probs = torch.zeros_like(probs).scatter(0, idx, sorted_p)
        return int(torch.multinomial(probs, 1, generator=r.generator))

    def _emit_tokens(self, batch: list[GenerationRequest], logits: torch.Tensor, offset: int) -> None:
        """Sample the next token of each request in `batch` (rows `offset`.. of the running batch); drop the
        rows that finished from the batch, keeping their caches for later prompts that share a prefix."""
        done: list[int] = []
        logps = torch.log_softmax(logits, dim=-1) if any(r.params.logprobs for r in batch) else None
        for i, r in enumerate(batch):
            if r.cancelled:
                r.emit(TokenEvent(None, finish_reason="cancelled"))
                done.append(offset + i)
                continue
            tok = self._sample(r, logits[i])
            ev = TokenEvent(tok)
            if logps is not None and r.params.logprobs:
                ev.logprob = float(logps[i, tok])
                if r.params.top_logprobs:
                    vals, idx = torch.topk(logps[i], r.params.top_logprobs)
                    ev.top_logprobs = [(int(t), float(v)) for t, v in zip(idx, vals, strict=True)]
            finish = None
            if tok in self.eos_ids:
                finish = "stop"
            else:
                r.generated.append(tok)
                r.emit(ev)
                self.stats["generated_tokens"] += 1
                if r.params.stop and self._hit_stop(r):
                    finish = "stop"
                elif len(r.generated) >= r.params.max_tokens:
                    finish = "length"
            if finish:
                if tok in self.eos_ids:
                    r.emit(ev)  # the end token itself, so callers can account for it; its text is empty
                r.emit(TokenEvent(None, finish_reason=finish))
                done.append(offset + i)
                continue
            r.last_token = tok
        if done:
            self._finish_rows(done)

    def _hit_stop(self, r: GenerationRequest) -> bool:
        tail = self.tokenizer.decode(r.generated[-16:], skip_special_tokens=False)
        return any(s and s in tail for s in r.params.stop)

    def _finish_rows(self, done: list[int]) -> None:
        layers = self._layers(self._cache)
        if self.prefix_cache is not None:
            for row in done:
                r = self._active[row]
                if r.cancelled:
                    continue
                cols = torch.nonzero(self._mask[row]).squeeze(-1)
                tokens = (r.prompt_ids + r.generated)[: len(cols)]  # what was fed: the last sample never was
                self.prefix_cache.store(tokens, [(k[row:row + 1, :, cols], v[row:row + 1, :, cols]) for k, v in layers])
        self._keep_rows([i for i in range(len(self._active)) if i not in set(done)])

    def _keep_rows(self, keep: list[int]) -> None:
        if not keep:
            self._active, self._cache, self._mask = [], None, None
            return
        idx = torch.tensor(keep, dtype=torch.long)
        mask = self._mask[idx]
        # Columns that are padding for every remaining row can go.
        first = int(torch.nonzero(mask.any(dim=0))[0]) if mask.any() else 0
        kv = [(k[idx, :, first:], v[idx, :, first:]) for k, v in self._layers(self._cache)]
        self._active = [self._active[i] for i in keep]
        self._cache, self._mask = self._new_cache(kv), mask[:, first:]
