"""A lean decoding step for Llama-architecture models (SmolLM2, Llama, and the like), used by the engine for
every generated token after the prompt.

Why: on a CPU a 135M-parameter model's decoding step is cheap arithmetic (~0.3 GFLOP) wrapped in a lot of
Python. transformers' forward pass (module calls, keyword plumbing, mask and cache utilities, one call per
projection) spends about three quarters of a step outside the matrix products: 18 tokens/s for one request
where llama.cpp does 76 on the same model. This step does the same arithmetic in the same order with about a
tenth of the dispatches: q/k/v and gate/up are one matrix product each (the base weights become views of one
fused matrix, so no memory is added), the rotary tables are computed once for every position, and attention is
one `scaled_dot_product_attention` call with grouped heads.

It changes nothing else: the prompt is still prefilled by transformers' forward pass, the key/value cache is the
engine's (each layer's `update` as transformers would call it), and LoRA adapters are applied the way
:class:`clawgym.serve.lora.LoraLinear` applies them (each adapter's low-rank term to its own rows only, from the
engine's plan). The tokens are the ones transformers' forward pass gives, and the log-probabilities differ by
float rounding only (`benchmarks/perf/serve.py` measures both).

`--precision q4` (weights="q4") multiplies by the GGUF's 4-bit blocks instead of the fp32 weights: a batch
through torch's int4 kernel, up to four rows through the compiled kernel of :mod:`clawgym.serve.q4_kernel`
(8-bit integer products, as llama.cpp), and one sequence without an adapter through that kernel's whole
layers in C (norms, rotary, attention over the engine's cache, which it writes in place), which leaves a
step about 32 Python-level calls instead of about 1,300 dispatches: twice the tokens per CPU-second of the
torch step here. Where the kernel does not build (no C compiler, no AVX512-VNNI, `CLAWGYM_Q4_KERNEL=0`) q4
uses torch's kernel alone. Neither path gives fp32's tokens; the logprob gap to fp32 is what serve.py reports.
torch.compile of the q4 step was tried and not kept: a per-layer graph (dynamic shapes, torch's int4 kernel
inside) compiled in about 35 s and ran no faster than the eager step (21 tokens/s against 19-30, under load).

:func:`fast_decoder` returns None for a model this step does not cover (another architecture, biases, a
non-default rotary scaling, or `CLAWGYM_FAST_DECODE=0`); the engine then uses transformers' forward pass.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

log = logging.getLogger("clawgym.serve")

def _lora_of(module: torch.nn.Module):
    """(base linear, the LoRA wrapper or None) of a projection the engine may have wrapped."""
    from clawgym.serve.lora import LoraLinear

    if isinstance(module, LoraLinear):
        return module.base, module
    return module, None


GROUP = 32  # GGUF's block size (Q4_0, Q4_1, Q8_0): one scale (and offset) per 32 weights of a row


def _blocks(w: torch.Tensor) -> tuple[str, torch.Tensor, torch.Tensor, torch.Tensor | None] | None:
    """`w` (N, K) as GGUF blocks of 32 weights, if it is one exactly (or None): ("q4_1", q, d, m) with every
    block `d*q + m`, q in 0..15, or ("q8_0", q, d, None) with every block `d*q`, q in -127..127; q (N, K/32, 32),
    d and m (N, K/32)."""
    n, k = w.shape
    if k % GROUP:
        return None
    w = w.detach().float()
    blk = w.reshape(n, k // GROUP, GROUP)
    lo, hi = blk.amin(-1), blk.amax(-1)
    d = (hi - lo) / 15
    q = torch.round((blk - lo[..., None]) / torch.where(d > 0, d, 1)[..., None]).clamp(0, 15)
    if _on_grid(q * d[..., None] + lo[..., None], blk, d):
        return "q4_1", q, d, lo
    d = blk.abs().amax(-1) / 127
    q = torch.round(blk / torch.where(d > 0, d, 1)[..., None])
    if not _on_grid(q * d[..., None], blk, d):
        return None
    return "q8_0", q, d, None


def _int4_parts(w: torch.Tensor, blocks: tuple | None = None) -> list[tuple[torch.Tensor, torch.Tensor]] | None:
    """`w` (N, K) as a sum of 4-bit matrices with one scale and offset per group of 32, in the packed form of
    torch's CPU int4 kernel, if it is one exactly (or None):

    - Q4_1 (every block `d*q + m`, q in 0..15): one part, scale d and offset m (the kernel computes
      `(q - 8) * scale + zero`, so zero = m + 8d);
    - Q8_0 (every block `d*q`, q in -127..127): two parts, q = 16*hi + lo with lo in 0..15 and hi in -8..7.

    A model loaded from a GGUF file (the embedded one) holds these values exactly: its linear layers are Q4_1,
    its embeddings (the tied output head) Q8_0. The kernel takes its scales in bf16, which rounds them (to 8
    significant bits): that, and the bf16 inputs of the products, is the only difference from the fp32 weights."""
    blocks = blocks or _blocks(w)
    if blocks is None:
        return None
    kind, q, d, m = blocks
    if kind == "q4_1":
        return [_pack(q, d, m + 8 * d)]
    low = torch.remainder(q, 16)
    high = (q - low) / 16
    return [_pack(low, d, 8 * d), _pack(high + 8, 16 * d, torch.zeros_like(d))]


def _on_grid(rebuilt: torch.Tensor, blk: torch.Tensor, step: torch.Tensor) -> bool:
    """Whether every weight is its block's grid value (up to the float rounding of recomputing the grid, far
    below the bf16 rounding of the kernel's scales)."""
    return bool(((rebuilt - blk).abs() <= 1e-4 * step[..., None] + 1e-12).all())


def _pack(q: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(packed weights, scales and zeros) for `torch.ops.aten._weight_int4pack_mm_for_cpu`."""
    n = q.shape[0]
    packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(q.reshape(n, -1).to(torch.int32), 2)
    scales_zeros = torch.stack([scale, zero], dim=-1).transpose(0, 1).contiguous().to(torch.bfloat16)
    return packed, scales_zeros


class Q4Matrix:
    """A weight matrix as 4-bit parts (see `_int4_parts`): `x @ W.T` in bf16 through torch's CPU int4 kernel,
    returned in `x`'s dtype. Reads an eighth of the fp32 matrix's bytes, which is what a decoding step on a CPU
    is bound by. With `few` (the same blocks for :mod:`clawgym.serve.q4_kernel`), up to `FEW_ROWS` rows go
    through that kernel instead (8-bit integer products, as llama.cpp; the same blocks, fp16 scales)."""

    FEW_ROWS = 4  # the kernel computes row by row; torch's kernel shares the unpacking between more rows

    def __init__(self, parts: list[tuple[torch.Tensor, torch.Tensor]], few: Callable | None = None):
        self.parts = parts
        self.few = few

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        if self.few is not None and x.numel() <= self.FEW_ROWS * shape[-1]:
            return self.few(x).to(x.dtype)
        xb = x.reshape(-1, shape[-1]).to(torch.bfloat16)
        y = None
        for packed, sz in self.parts:
            part = torch.ops.aten._weight_int4pack_mm_for_cpu(xb, packed, GROUP, sz).float()
            y = part if y is None else y + part
        return y.reshape(*shape[:-1], y.shape[-1]).to(x.dtype)


def q4_supported() -> bool:
    """Whether this torch has the CPU int4 kernel and the CPU computes bf16 natively (where the kernel is
    fast; elsewhere it is slower than fp32)."""
    if not hasattr(torch.ops.aten, "_weight_int4pack_mm_for_cpu"):
        return False
    try:
        return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())
    except AttributeError:
        return False


class FastDecoder:
    """One decoding step (one new token per row) of a transformers LlamaForCausalLM, on the engine's cache."""

    def __init__(self, model: Any, plan: list, weights: str = "model", kernel: bool = True):
        """`weights`: "model" (the products in the model's own dtype) or "q4" (the matrices that are 4-bit
        blocks, see `_int4_parts`, through the int4 kernel; the others in the model's dtype). `kernel` (q4):
        a few rows at a time through :mod:`clawgym.serve.q4_kernel` where it builds (False: torch's int4 kernel
        only, to compare)."""
        self.model = model
        self.plan = plan  # the engine's adapter plan (shared list, set before each pass)
        self.weights = weights
        self.q4_matrices = 0  # how many matrices run as 4-bit blocks
        self.kernel = None  # the compiled q4 kernel, when q4 decoding uses it
        if weights == "q4" and _int4_parts(model.model.layers[0].mlp.down_proj.weight) is None:
            self.weights = "model"  # not a model of 4-bit blocks (e.g. a merged fine-tune): say so at once
        if self.weights == "q4" and kernel:
            from clawgym.serve import q4_kernel

            self.kernel = q4_kernel.load()
            if self.kernel is None and q4_kernel.UNAVAILABLE:
                log.warning("q4 decodes through torch's int4 kernel only: the q4 kernel is unavailable (%s)",
                            q4_kernel.UNAVAILABLE)
        cfg = model.config
        self.eps = float(cfg.rms_norm_eps)
        self.n_heads = int(cfg.num_attention_heads)
        self.n_kv = int(cfg.num_key_value_heads)
        self.head_dim = int(getattr(cfg, "head_dim", None) or cfg.hidden_size // self.n_heads)
        self.scale = self.head_dim**-0.5
        inner = model.model
        self.embed = inner.embed_tokens.weight
        self.norm = inner.norm.weight
        self.layers = []
        for layer in inner.layers:
            attn, mlp = layer.self_attn, layer.mlp
            qkv = self._fuse([attn.q_proj, attn.k_proj, attn.v_proj])
            gate_up = self._fuse([mlp.gate_proj, mlp.up_proj])
            self.layers.append({
                "ln1": layer.input_layernorm.weight, "ln2": layer.post_attention_layernorm.weight,
                "qkv": self._matrix(qkv), "gate_up": self._matrix(gate_up),
                "o": self._matrix(attn.o_proj.weight), "down": self._matrix(mlp.down_proj.weight),
                "attn": attn, "mlp": mlp,
            })
        self.head = self._matrix(model.lm_head.weight)
        self.kernel_layers = self._kernel_layers()  # one sequence's whole layers in C (q4 with the kernel)
        self.kernel_steps = 0  # steps that ran through them
        # the rotary tables for every position, by the model's own rotary module (its dtype and rounding)
        n = int(getattr(cfg, "max_position_embeddings", 4096) or 4096)
        with torch.inference_mode():
            probe = torch.zeros((1, 1, self.head_dim), dtype=self.embed.dtype)
            cos, sin = inner.rotary_emb(probe, torch.arange(n).unsqueeze(0))
        self.cos, self.sin = cos[0], sin[0]  # (positions, head_dim)

    @staticmethod
    def _fuse(mods: list[torch.nn.Linear]) -> torch.Tensor:
        """One weight matrix for several projections of the same input; each projection's weight becomes a view
        of it, so nothing is stored twice and a later change to the fused matrix is seen by both paths."""
        fused = torch.cat([m.weight.detach() for m in mods], dim=0).contiguous()
        start = 0
        for m in mods:
            rows = m.weight.shape[0]
            m.weight.data = fused[start:start + rows]
            start += rows
        return fused

    def _matrix(self, w: torch.Tensor) -> Callable[[torch.Tensor], torch.Tensor]:
        """`x -> x @ w.T` in the chosen form."""
        if self.weights == "q4":
            blocks = _blocks(w)
            if blocks is not None:
                self.q4_matrices += 1
                return Q4Matrix(_int4_parts(w, blocks), self._few_rows(blocks))
        return lambda x: F.linear(x, w)

    def _kernel_layers(self) -> list | None:
        """The layers as :class:`clawgym.serve.q4_kernel.Layer`, when every matrix has the kernel's form and the
        shapes suit it (else None: the step stays in torch)."""
        from clawgym.serve import q4_kernel

        if self.kernel is None or self.head_dim % 16 or self.n_heads % self.n_kv:
            return None
        cfg = self.model.config
        dims = (int(cfg.hidden_size), int(cfg.intermediate_size), self.n_heads, self.n_kv, self.head_dim)
        if any(n % 64 for n in (dims[0], dims[1], self.n_heads * self.head_dim)):
            return None
        out = []
        for layer in self.layers:
            mats = [layer[k] for k in ("qkv", "o", "gate_up", "down")]
            if not all(isinstance(m, Q4Matrix) and isinstance(m.few, q4_kernel.BlockMatrix) for m in mats):
                return None
            out.append(q4_kernel.Layer(self.kernel, [m.few for m in mats], layer["ln1"], layer["ln2"], dims,
                                       self.eps, self.scale))
        return out

    def _step_kernel(self, ids: torch.Tensor, positions: torch.Tensor, cache: Any) -> torch.Tensor | None:
        """`step` for one sequence with no adapter through the C layers, or None where the cache does not suit
        them (then the torch step runs; nothing has been written)."""
        pos = int(positions[0, 0])
        kvs = []
        blank = torch.zeros((1, self.n_kv, 1, self.head_dim), dtype=torch.float32)
        for kv in cache.layers:
            if kv.is_initialized and (kv.keys.dtype != torch.float32 or kv.keys.shape[-2] != pos):
                return None
        for kv in cache.layers:
            keys, values = kv.update(blank, blank)  # this position's entries, written by the kernel
            kvs.append((keys, values))
        if any(k.stride(-1) != 1 or k.stride(-2) != self.head_dim or k.stride() != v.stride() for k, v in kvs):
            raise RuntimeError("fast_decode: a cache layout the C layers cannot write")
        h = self.embed[int(ids[0, 0])].clone()
        cos, sin = self.cos[pos], self.sin[pos]
        for layer, (keys, values) in zip(self.kernel_layers, kvs, strict=True):
            layer(h, cos, sin, keys, values, pos)
        self.kernel_steps += 1
        h = self._rms(h.view(1, -1), self.norm)
        return self.head(h)

    def _few_rows(self, blocks: tuple) -> Callable | None:
        if self.kernel is None:
            return None
        from clawgym.serve import q4_kernel

        kind, q, d, m = blocks
        return q4_kernel.q4_1(self.kernel, q, d, m) if kind == "q4_1" else q4_kernel.q8_0(self.kernel, q, d)

    def _rms(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        # as transformers' LlamaRMSNorm: in float32, then back to the input's dtype, then the weight
        dtype = x.dtype
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return w * h.to(dtype)

    def _project(self, x: torch.Tensor, fused: Callable, mods: list[torch.nn.Module]) -> list[torch.Tensor]:
        """The outputs of projections `mods` (fused into `fused`) of `x`, with their adapters' terms."""
        y = fused(x)
        outs, start = [], 0
        for m in mods:
            base, wrapper = _lora_of(m)
            rows = base.weight.shape[0]
            part = y[..., start:start + rows]
            if wrapper is not None and self.plan:
                wrapper.add_terms(part, x)
            outs.append(part)
            start += rows
        return outs

    def _linear(self, x: torch.Tensor, matrix: Callable, m: torch.nn.Module) -> torch.Tensor:
        _, wrapper = _lora_of(m)
        y = matrix(x)
        if wrapper is not None and self.plan:
            wrapper.add_terms(y, x)
        return y

    def step(self, ids: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor | None, cache: Any) -> torch.Tensor:
        """Logits (B, vocab) for the next token of each row. `ids` and `positions` are (B, 1); `mask` (B, T) the
        valid cache entries including the new one (None: all valid); `cache` the engine's transformers cache,
        whose layers get this step's keys and values."""
        b = ids.shape[0]
        if self.kernel is not None:  # the engine's threads for the kernel's products, unless told otherwise
            self.kernel.cg_threads(int(os.environ.get("CLAWGYM_Q4_KERNEL_THREADS") or torch.get_num_threads()))
        if self.kernel_layers is not None and b == 1 and not self.plan and (mask is None or bool(mask.all())):
            logits = self._step_kernel(ids, positions, cache)
            if logits is not None:
                return logits
        h = F.embedding(ids, self.embed)  # (B, 1, hidden)
        cos = self.cos[positions].unsqueeze(1)  # (B, 1, 1, D)
        sin = self.sin[positions].unsqueeze(1)
        half = self.head_dim // 2
        attn_mask = None
        if mask is not None and not bool(mask.all()):
            attn_mask = mask.bool()[:, None, None, :]
        for layer, kv in zip(self.layers, cache.layers, strict=True):
            attn = layer["attn"]
            x = self._rms(h, layer["ln1"])
            q, k, v = self._project(x, layer["qkv"], [attn.q_proj, attn.k_proj, attn.v_proj])
            q = q.view(b, 1, self.n_heads, self.head_dim).transpose(1, 2)
            k = k.view(b, 1, self.n_kv, self.head_dim).transpose(1, 2)
            v = v.view(b, 1, self.n_kv, self.head_dim).transpose(1, 2)
            q = q * cos + torch.cat((-q[..., half:], q[..., :half]), dim=-1) * sin
            k = k * cos + torch.cat((-k[..., half:], k[..., :half]), dim=-1) * sin
            keys, values = kv.update(k, v)
            o = F.scaled_dot_product_attention(q, keys, values, attn_mask=attn_mask, scale=self.scale,
                                               enable_gqa=self.n_kv != self.n_heads)
            o = o.transpose(1, 2).reshape(b, 1, self.n_heads * self.head_dim)
            h = h + self._linear(o, layer["o"], attn.o_proj)
            mlp = layer["mlp"]
            x = self._rms(h, layer["ln2"])
            gate, up = self._project(x, layer["gate_up"], [mlp.gate_proj, mlp.up_proj])
            h = h + self._linear(F.silu(gate) * up, layer["down"], mlp.down_proj)
        h = self._rms(h, self.norm)
        return self._linear(h[:, -1, :], self.head, self.model.lm_head)


def fast_decoder(model: Any, plan: list, weights: str = "model") -> FastDecoder | None:
    """A :class:`FastDecoder` for `model`, or None when it is not a plain Llama-architecture model (see the
    module) or `CLAWGYM_FAST_DECODE=0`."""
    if os.environ.get("CLAWGYM_FAST_DECODE", "1") == "0":
        return None
    if not supports(model):
        return None
    return FastDecoder(model, plan, weights)


def supports(model: Any) -> bool:
    """Whether :class:`FastDecoder` computes `model`'s forward pass (see the module)."""
    cfg = getattr(model, "config", None)
    if cfg is None or getattr(cfg, "model_type", None) != "llama":
        return False
    if getattr(cfg, "attention_bias", False) or getattr(cfg, "mlp_bias", False):
        return False
    if getattr(cfg, "hidden_act", "silu") != "silu" or getattr(cfg, "pretraining_tp", 1) != 1:
        return False
    # the rotary tables are the model's own for every position, so any static scaling is covered; "dynamic"
    # changes them with the sequence's length
    rope = getattr(cfg, "rope_parameters", None) or getattr(cfg, "rope_scaling", None) or {}
    return (rope.get("rope_type") or rope.get("type") or "default") not in ("dynamic", "longrope")
