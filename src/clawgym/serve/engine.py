"""A small continuous-batching generation engine on top of a transformers causal LM.

Concurrent requests share one forward pass per decoding step: new requests are prefilled together and merged
into the running batch between steps (their key/value caches left-padded to a common length), finished ones
are dropped from the batch at once. Every step returns the engine's own token ids and log-probabilities, so the
server can hand them out exactly (`return_token_ids`, `logprobs`) instead of anybody re-tokenizing text.

One thread owns the model; callers submit a :class:`GenerationRequest` and receive :class:`TokenEvent` s
through its callback. The engine works for any decoder-only model transformers loads with a `DynamicCache`.

LoRA adapters (`clawgym.serve.lora`) are served beside the base model, and loaded or unloaded while it runs:

- Batching: a request names its adapter (`GenerationRequest.adapter`, None for the base model). Requests of
  the base model and of any adapters share the batch and one forward pass per step: every adapted linear layer
  computes the base output for the whole batch, then adds each adapter's low-rank term to that adapter's rows
  only (the *plan* the engine sets before each pass). Base rows get exactly the base layer's output, and every
  row's result is what it would be in a batch of its own (greedy answers alike alone or batched, tested). Prefix
  caches are kept per adapter: keys and values computed under one policy are never reused by another.
- Loading: the adapter's files are read and checked in the caller's thread; its matrices are put into the layers
  by the engine thread between two forward passes (a command the loop runs before admitting requests), so no
  pass ever sees half an adapter. Only then is the name registered, so a request can name it.
- Unloading: the name is unregistered at once (new requests naming it are refused), but requests already
  submitted with it -- running or still queued -- finish with it, so their tokens and log-probabilities are
  those of the policy they started with; its matrices are dropped by the engine thread once the last of them
  is done. Replacing a name in place (`replace=True`, vLLM's `load_inplace`) works the same way: new requests
  get the new weights, running ones finish with the old. When no adapter is left the base layers are
  unwrapped again.

Full weights (`load_weights`, SGLang's `update_weights_from_disk`): the base model's weights are replaced in
place from a model directory of the same architecture, for full fine-tuning (`train rl --full`). The engine
stops admitting requests, lets the running ones finish with the weights they started with, swaps, forgets its
prefix caches (keys and values of the old weights) and rebuilds its decoding step, then admits again: no
request ever sees two versions of the weights.
"""

from __future__ import annotations

import itertools
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from clawgym.serve.fast_decode import fast_decoder, q4_supported
from clawgym.serve.lora import Adapter, AdapterError, LoraLinear, read_adapter


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
    adapter: str | None = None  # the name of a loaded LoRA adapter; None: the base model
    # engine state
    lora: Adapter | None = None  # resolved from `adapter` by submit()
    ended: bool = False  # its final event was emitted
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

    Entries are kept per `key` (the adapter's uid, None for the base model): a cache computed with one policy is
    never reused by another. Least recently used entries are evicted beyond `max_tokens` cached tokens in all.
    """

    def __init__(self, max_tokens: int = 32_768, min_match: int = 16):
        self.max_tokens = max_tokens
        self.min_match = min_match
        # (key, tokens, per-layer (k, v)), most recent last
        self._entries: list[tuple[int | None, list[int], list[tuple[torch.Tensor, torch.Tensor]]]] = []

    def __len__(self) -> int:
        return len(self._entries)

    @staticmethod
    def _common(a: list[int], b: list[int]) -> int:
        n = min(len(a), len(b))
        i = 0
        while i < n and a[i] == b[i]:
            i += 1
        return i

    def lookup(self, prompt: list[int], key: int | None = None
               ) -> tuple[int, list[tuple[torch.Tensor, torch.Tensor]] | None]:
        """(matched length, per-layer (k, v) of shape (1, H, matched, D)); at least one prompt token is left
        to prefill, since its logits are needed."""
        best, best_i = 0, -1
        for i, (k, tokens, _) in enumerate(self._entries):
            if k != key:
                continue
            n = self._common(tokens, prompt)
            if n > best:
                best, best_i = n, i
        best = min(best, len(prompt) - 1)
        if best < self.min_match:
            return 0, None
        entry = self._entries.pop(best_i)
        self._entries.append(entry)
        return best, [(k[:, :, :best], v[:, :, :best]) for k, v in entry[2]]

    def store(self, tokens: list[int], kv: list[tuple[torch.Tensor, torch.Tensor]], key: int | None = None) -> None:
        if len(tokens) < self.min_match or len(tokens) > self.max_tokens:
            return
        # An entry that is a prefix of the new one adds nothing.
        self._entries = [e for e in self._entries
                         if not (e[0] == key and len(e[1]) <= len(tokens) and tokens[: len(e[1])] == e[1])]
        self._entries.append((key, tokens, kv))
        total = sum(len(t) for _, t, _ in self._entries)
        while total > self.max_tokens and len(self._entries) > 1:
            total -= len(self._entries.pop(0)[1])

    def drop(self, key: int | None) -> None:
        """Forget the entries of `key` (an unloaded adapter)."""
        self._entries = [e for e in self._entries if e[0] != key]

    def clear(self) -> None:
        """Forget everything (the base weights changed)."""
        self._entries = []


class BatchEngine:
    def __init__(self, model_dir: str | Path, max_batch: int = 16, threads: int | None = None,
                 prefix_cache_tokens: int = 32_768, precision: str = "auto"):
        """`precision`: auto (bf16 where the hardware has native bf16 matmuls, see
        `clawgym.core.precision`), fp32 or bf16; the weights are loaded in that dtype."""
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from clawgym.core.precision import resolve_precision

        q4 = precision == "q4"  # fp32 weights, decoding through their 4-bit blocks (see fast_decode)
        self.precision = "q4" if q4 else resolve_precision(precision)
        if q4 and not q4_supported():
            raise EngineError("--precision q4 needs a CPU that computes bf16 natively (AVX512-BF16 or AMX) and "
                              "torch's CPU int4 kernel; use fp32 or bf16 here")
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
                      "max_batch_seen": 0, "mixed_adapter_steps": 0}
        # LoRA adapters (see the module's docstring). `_lock` guards the registry and the users counts;
        # `_load_lock` makes loads one at a time; the layers and the plan belong to the engine thread.
        self._lock = threading.Lock()
        self._load_lock = threading.Lock()
        self._adapters: dict[str, Adapter] = {}  # served names, in load order
        self._retired: dict[int, Adapter] = {}  # unloaded or replaced, still used by submitted requests
        self._uids = itertools.count(1)
        self._plan: list[tuple[int, torch.Tensor | None]] = []
        self._wrapped: dict[str, LoraLinear] = {}
        self._linear_shapes = {name: (m.in_features, m.out_features) for name, m in self.model.named_modules()
                               if isinstance(m, torch.nn.Linear)}
        self._commands: queue.Queue[tuple[Callable[[], Any], Future]] = queue.Queue()
        self._admitting: list[GenerationRequest] = []
        self._swap: tuple[dict[str, torch.Tensor], str, Future] | None = None  # full weights waiting for a drain
        self.weights = {"path": str(self.model_dir), "version": 0}
        # every generated token after the prompt's first: a lean step where the architecture allows it
        self._fast = fast_decoder(self.model, self._plan, weights="q4" if q4 else "model")
        if q4 and (self._fast is None or not self._fast.q4_matrices):
            raise EngineError(f"--precision q4: {model_dir} is not a Llama-architecture model whose weights are "
                              "4-bit blocks (a model loaded from a Q4_1/Q8_0 GGUF file); use fp32 or bf16")
        self.decode = {"path": "fast" if self._fast is not None else "transformers",
                       "q4_matrices": self._fast.q4_matrices if self._fast is not None else 0}
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
        """Queue `req`. EngineError for a prompt that cannot run, AdapterError (404) when `req.adapter` names no
        loaded adapter."""
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
        if req.adapter is not None:
            with self._lock:  # atomic with unloading: a request is either refused or keeps its adapter alive
                lora = self._adapters.get(req.adapter)
                if lora is None:
                    raise AdapterError(f"The model `{req.adapter}` does not exist.", 404, "NotFoundError")
                lora.users += 1
                req.lora = lora
        self._pending.put(req)

    # -- adapters -------------------------------------------------------------------------------------------
    def has_adapter(self, name: str) -> bool:
        with self._lock:
            return name in self._adapters

    def adapters(self) -> list[Adapter]:
        """The served adapters, in load order."""
        with self._lock:
            return list(self._adapters.values())

    def adapter_status(self) -> dict:
        """For /health: the served adapters, those unloaded but still finishing requests, and the policy version
        (the name of the adapter loaded last; None when only the base model is served)."""
        with self._lock:
            served = [a.info() for a in self._adapters.values()]
            draining = [a.info() for a in self._retired.values()]
        latest = max(served, key=lambda a: a["id"])["name"] if served else None
        return {"policy_version": latest, "adapters": served, "unloading_adapters": draining}

    def load_adapter(self, name: str, path: str, replace: bool = False, timeout: float = 600.0) -> Adapter:
        """Load the LoRA adapter at `path` and serve it as `name`. AdapterError: 400 when `name` is already
        served (unless `replace`: then new requests get the new weights, running ones finish with the old) or
        the adapter does not fit the model, 404 when there is no adapter at `path`."""
        if not name or not path:
            raise AdapterError("Both 'lora_name' and 'lora_path' must be provided.", 400, "InvalidUserInput")
        with self._load_lock:
            if self.has_adapter(name) and not replace:
                raise AdapterError(f"The lora adapter '{name}' has already been loaded.", 400, "InvalidUserInput")
            t0 = time.perf_counter()
            weights, rank = read_adapter(name, path, self._linear_shapes, self.model.dtype)
            adapter = Adapter(name=name, path=str(path), uid=next(self._uids), rank=rank, modules=len(weights))
            self._call(lambda: self._install(adapter, weights), timeout)
            adapter.load_seconds = time.perf_counter() - t0
            adapter.loaded_at = time.time()
            with self._lock:
                old = self._adapters.pop(name, None)
                self._adapters[name] = adapter
                if old is not None:
                    self._retired[old.uid] = old
            if old is not None:
                self._pending.put(None)  # wake the loop, which drops the old weights once unused
            return adapter

    def unload_adapter(self, name: str) -> Adapter:
        """Stop serving `name` (AdapterError 404 if it is not served). Requests already submitted with it finish
        with it; its weights are dropped after the last of them."""
        with self._lock:
            adapter = self._adapters.pop(name, None)
            if adapter is None:
                raise AdapterError(f"The lora adapter '{name}' cannot be found.", 404, "NotFoundError")
            self._retired[adapter.uid] = adapter
        self._pending.put(None)
        return adapter

    def load_weights(self, path: str | Path, timeout: float = 600.0) -> dict:
        """Replace the base model's weights with those of the model directory `path` (its safetensors files):
        read and checked here (EngineError for a missing directory or a tensor the model does not have or whose
        shape differs), swapped by the engine thread once the running requests are done (see the module)."""
        from safetensors.torch import load_file

        src = Path(path)
        files = sorted(src.glob("*.safetensors")) if src.is_dir() else []
        if not files:
            raise EngineError(f"{path}: no model directory with safetensors weights")
        params = self._base_parameters()
        tied = bool(getattr(self.model.config, "tie_word_embeddings", False))
        state: dict[str, torch.Tensor] = {}
        for f in files:
            for name, t in load_file(str(f)).items():
                if name not in params:
                    if tied and name == "lm_head.weight":
                        continue
                    raise EngineError(f"{f}: tensor {name!r} is not a weight of the served model")
                if tuple(t.shape) != tuple(params[name].shape):
                    raise EngineError(f"{f}: {name} has shape {tuple(t.shape)}, the model's is "
                                      f"{tuple(params[name].shape)}")
                state[name] = t
        missing = sorted(set(params) - set(state))
        if missing:
            raise EngineError(f"{path}: {len(missing)} of the model's weights are missing (e.g. {missing[0]})")
        fut: Future = Future()
        with self._load_lock:
            self._swap = (state, str(src), fut)
            self._pending.put(None)  # wakes the loop
            return fut.result(timeout)

    def _base_parameters(self) -> dict[str, torch.Tensor]:
        """The base model's parameters by their names in a model file (a LoRA wrapper's `.base.` left out)."""
        return {n.replace(".base.", "."): p for n, p in self.model.named_parameters()}

    def _do_swap(self) -> None:
        state, path, fut = self._swap
        self._swap = None
        try:
            params = self._base_parameters()
            with torch.no_grad():
                for name, t in state.items():
                    params[name].copy_(t)  # in place: fused views (fast_decode) share this storage
            if self.prefix_cache is not None:
                self.prefix_cache.clear()
            if self._fast is not None:  # its 4-bit packs (q4) are copies: made again from the new weights
                self._fast = fast_decoder(self.model, self._plan, weights=self._fast.weights)
                if self.precision == "q4" and (self._fast is None or not self._fast.q4_matrices):
                    raise EngineError(f"{path}: the new weights are not 4-bit blocks; --precision q4 cannot "
                                      "serve them")
            self.weights = {"path": path, "version": self.weights["version"] + 1}
            fut.set_result(dict(self.weights))
        except BaseException as exc:  # noqa: BLE001 (reported to the caller, never the end of the loop)
            fut.set_exception(exc)

    def _call(self, fn: Callable[[], Any], timeout: float) -> Any:
        """Run `fn` in the engine thread between two forward passes, and return its result."""
        fut: Future = Future()
        self._commands.put((fn, fut))
        self._pending.put(None)  # wakes the loop if it waits for requests
        return fut.result(timeout)

    def _install(self, adapter: Adapter, weights: dict[str, tuple[torch.Tensor, torch.Tensor]]) -> None:
        for module, (a, b) in weights.items():
            layer = self._wrapped.get(module)
            if layer is None:
                parent, _, child = module.rpartition(".")
                owner = self.model.get_submodule(parent) if parent else self.model
                layer = LoraLinear(getattr(owner, child), self._plan)
                setattr(owner, child, layer)
                self._wrapped[module] = layer
            layer.deltas[adapter.uid] = (a, b)

    def _reap(self) -> None:
        """Drop the weights of unloaded adapters no request uses any more (engine thread)."""
        if not self._retired:
            return
        with self._lock:
            gone = [a for a in self._retired.values() if a.users <= 0]
            for a in gone:
                del self._retired[a.uid]
        for a in gone:
            for layer in self._wrapped.values():
                layer.deltas.pop(a.uid, None)
            if self.prefix_cache is not None:
                self.prefix_cache.drop(a.uid)
        # No adapter's weights left (an adapter being loaded has its weights in place before it has a name):
        # the base model runs unwrapped again, at its own speed.
        if gone and not any(layer.deltas for layer in self._wrapped.values()):
            for module, layer in self._wrapped.items():
                parent, _, child = module.rpartition(".")
                setattr(self.model.get_submodule(parent) if parent else self.model, child, layer.base)
            self._wrapped = {}

    def _run_commands(self) -> None:
        while True:
            try:
                fn, fut = self._commands.get_nowait()
            except queue.Empty:
                return
            try:
                fut.set_result(fn())
            except BaseException as exc:  # noqa: BLE001 (reported to the caller, never the end of the loop)
                fut.set_exception(exc)

    def _end(self, r: GenerationRequest, finish: str, error: str | None = None) -> None:
        """Emit `r`'s final event (once) and release its adapter."""
        if r.ended:
            return
        r.ended = True
        if r.lora is not None:
            with self._lock:
                r.lora.users -= 1
        r.emit(TokenEvent(None, finish_reason=finish, error=error))

    def _forward(self, reqs: list[GenerationRequest], **kwargs: Any) -> Any:
        """One forward pass for `reqs` (the batch's rows, in order), each row with its own adapter."""
        self._set_plan(reqs)
        return self.model(**kwargs)

    def _set_plan(self, reqs: list[GenerationRequest]) -> None:
        """Tell the adapted layers which rows of the next pass are whose (see `LoraLinear`)."""
        if self._wrapped:
            groups: dict[int, list[int]] = {}
            for i, r in enumerate(reqs):
                if r.lora is not None:
                    groups.setdefault(r.lora.uid, []).append(i)
            self._plan[:] = [(uid, None if len(rows) == len(reqs) else torch.tensor(rows, dtype=torch.long))
                             for uid, rows in groups.items()]
            if len(groups) + (sum(map(len, groups.values())) < len(reqs)) > 1:
                self.stats["mixed_adapter_steps"] += 1

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
                    self._run_commands()
                    self._reap()
                    if self._swap is not None and not self._active:
                        self._do_swap()
                    if self._swap is None:  # new weights waiting: the running requests finish first
                        self._admit(block=not self._active and self._commands.empty())
                    if self._active:
                        self._step()
                except Exception as exc:  # noqa: BLE001 (a failed forward pass ends the requests in it, never the server)
                    for r in self._active + self._admitting:
                        self._end(r, "error", f"{type(exc).__name__}: {exc}")
                    self._active, self._cache, self._mask, self._admitting = [], None, None, []

    def _admit(self, block: bool) -> None:
        new: list[GenerationRequest] = []
        room = self.max_batch - len(self._active)
        try:
            if block:
                item = self._pending.get()
                if item is None:  # a wake-up (a command, an unload, close): back to the loop
                    return
                new.append(item)
            while len(new) < room:
                item = self._pending.get_nowait()
                if item is None:
                    break
                new.append(item)
        except queue.Empty:
            pass
        new = [r for r in new if not self._drop_if_cancelled(r)]
        self._admitting = new  # answered with an error by the loop should the prefill fail
        self._prefill(new)
        self._admitting = []

    def _prefill(self, new: list[GenerationRequest]) -> None:
        cold = []
        for r in new:
            key = r.lora.uid if r.lora is not None else None
            matched, kv = self.prefix_cache.lookup(r.prompt_ids, key) if self.prefix_cache else (0, None)
            if kv is None:
                cold.append(r)
                continue
            # Prefill only what follows the cached prefix, on top of a copy-free view of its cache.
            rest = torch.tensor([r.prompt_ids[matched:]], dtype=torch.long)
            n = len(r.prompt_ids)
            out = self._forward(
                [r], input_ids=rest, attention_mask=torch.ones((1, n), dtype=torch.long),
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
        out = self._forward(new, input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True,
                            logits_to_keep=1)
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
            self._end(r, "cancelled")
            return True
        return False

    def _step(self) -> None:
        batch = self._active
        ids = torch.tensor([[r.last_token] for r in batch], dtype=torch.long)
        pos = torch.tensor([[r.position] for r in batch], dtype=torch.long)
        mask = torch.nn.functional.pad(self._mask, (0, 1), value=1)
        if self._fast is not None:
            self._set_plan(batch)
            logits = self._fast.step(ids, pos, mask, self._cache)
        else:
            out = self._forward(batch, input_ids=ids, attention_mask=mask, position_ids=pos,
                                past_key_values=self._cache, use_cache=True)
            self._cache, logits = out.past_key_values, out.logits[:, -1, :]
        self._mask = mask
        for r in batch:
            r.position += 1
        self.stats["steps"] += 1
        self.stats["max_batch_seen"] = max(self.stats["max_batch_seen"], len(batch))
        self._emit_tokens(batch, logits.float(), offset=0)

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
                self._end(r, "cancelled")
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
                self._end(r, finish)
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
                self.prefix_cache.store(tokens, [(k[row:row + 1, :, cols], v[row:row + 1, :, cols]) for k, v in layers],
                                        r.lora.uid if r.lora is not None else None)
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
