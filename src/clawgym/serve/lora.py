"""LoRA adapters served beside the base model, loaded and unloaded while the server runs.

An adapter is a directory as peft's `save_pretrained` writes it: `adapter_config.json` and
`adapter_model.safetensors` (pickled `adapter_model.bin` files are refused: a path given over HTTP must never
run code). Its weights are read here, without peft, into one pair of matrices per adapted `nn.Linear`:
``A^T`` (in x r) and ``(scaling * B)^T`` (r x out), so that the adapted layer computes
``base(x) + (x @ A^T) @ (scaling B)^T`` -- what peft's LoRA layer computes, ``base(x) + B(A(x)) * scaling``, with
``scaling = lora_alpha / r`` (``/ sqrt(r)`` with `use_rslora`; `alpha_pattern` and `rank_pattern` honoured).

Plain LoRA on linear layers is what `clawgym train sft` (and the RL stage) write. Anything that changes what a
layer computes beyond that -- DoRA, bias terms, `modules_to_save`, LoRA on embeddings, trainable tokens, other
variants -- is refused with a clear error rather than served wrongly.

:class:`LoraLinear` wraps an adapted `nn.Linear` of the base model. It holds the matrices of every loaded adapter
and applies, per forward pass, the ones a shared *plan* names, each to its own rows of the batch, so one forward
pass serves requests of the base model and of several adapters at once (see `clawgym.serve.engine`). With an
empty plan it computes exactly the base layer.
"""

from __future__ import annotations

import json
import math
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
# Configuration fields that make an adapter compute something else than plain LoRA on linear layers.
_REFUSED = {
    "use_dora": "DoRA", "lora_bias": "LoRA bias terms", "modules_to_save": "modules_to_save",
    "trainable_token_indices": "trainable tokens", "target_parameters": "LoRA on parameters",
    "layer_replication": "layer replication", "alora_invocation_tokens": "activated LoRA", "use_bdlora": "BD-LoRA",
    "velora_config": "VeLoRA", "monteclora_config": "MonteCLoRA", "arrow_config": "Arrow", "kasa_config": "KaSA",
    "fan_in_fan_out": "fan_in_fan_out (Conv1D layers)",
}
_KEY = re.compile(r"^(?:base_model\.model\.)?(?P<module>.+)\.lora_(?P<ab>[AB])\.weight$")


class AdapterError(Exception):
    """A refused load or unload, or a request for a model that is not served; `status` is the HTTP code vLLM
    answers with (400 a bad request, 404 not found)."""

    def __init__(self, message: str, status: int = 400, kind: str = "BadRequestError"):
        super().__init__(message)
        self.status = status
        self.kind = kind


@dataclass(eq=False)
class Adapter:
    """One loaded adapter. `uid` is unique for the server's lifetime (vLLM's `lora_int_id`): a name loaded again
    after an unload, or replaced in place, is a new adapter, whose requests never share caches with the old one."""

    name: str
    path: str
    uid: int
    rank: int
    modules: int
    loaded_at: float = field(default_factory=time.time)
    load_seconds: float = 0.0
    users: int = 0  # requests submitted with it and not finished yet

    def info(self) -> dict:
        return {"name": self.name, "path": self.path, "id": self.uid, "rank": self.rank, "modules": self.modules,
                "loaded_at": self.loaded_at,
                "loaded_at_iso": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.loaded_at)),
                "load_seconds": round(self.load_seconds, 4), "running": self.users}


def _pattern_value(patterns: dict, module: str, default: float) -> float:
    """peft's `get_pattern_key`: a pattern applies to a module whose name ends with it (at a dot)."""
    for key, value in (patterns or {}).items():
        if re.match(rf"(.*\.)?({key})$", module):
            return value
    return default


def read_adapter(name: str, path: str, linear_shapes: dict[str, tuple[int, int]], dtype: torch.dtype
                 ) -> tuple[dict[str, tuple[torch.Tensor, torch.Tensor]], int]:
    """The adapter at `path` as {module name: (A^T, (scaling B)^T)} in `dtype`, checked against the base model's
    linear layers (`linear_shapes`: module name -> (in_features, out_features)), and its largest rank.

    Raises AdapterError: 404 when there is no adapter at `path` (vLLM's "No adapter found"), 400 when there is
    one that cannot be served on this model."""
    p = Path(path).expanduser()
    if not (p / ADAPTER_CONFIG).is_file():
        raise AdapterError(f"Loading lora {name} failed: No adapter found for {path}", 404, "NotFoundError")

    def bad(why: str) -> AdapterError:
        return AdapterError(f"Loading lora {name} failed: {why}", 400, "BadRequestError")

    try:
        cfg = json.loads((p / ADAPTER_CONFIG).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise bad(f"{ADAPTER_CONFIG} is not readable JSON ({exc})") from None
    if not isinstance(cfg, dict):
        raise bad(f"{ADAPTER_CONFIG} is not a JSON object")
    if str(cfg.get("peft_type") or "LORA").upper() != "LORA":
        raise bad(f"peft_type {cfg.get('peft_type')!r} is not LORA")
    refused = [what for key, what in _REFUSED.items() if cfg.get(key)]
    if str(cfg.get("bias") or "none") != "none":
        refused.append(f"bias={cfg.get('bias')!r}")
    if refused:
        raise bad("not supported by the embedded server: " + ", ".join(refused))
    weights = p / ADAPTER_WEIGHTS
    if not weights.is_file():
        other = " (adapter_model.bin is a pickle and is not loaded; save with safe_serialization)" \
            if (p / "adapter_model.bin").exists() else ""
        raise bad(f"{ADAPTER_WEIGHTS} is missing{other}")
    try:
        from safetensors.torch import load_file

        state = load_file(str(weights), device="cpu")
    except Exception as exc:  # noqa: BLE001 (a truncated or foreign file: safetensors raises its own error types)
        raise bad(f"{ADAPTER_WEIGHTS} is not readable ({type(exc).__name__}: {exc})") from None

    pairs: dict[str, dict[str, torch.Tensor]] = {}
    for key, tensor in state.items():
        m = _KEY.match(key)
        if not m:
            raise bad(f"unsupported weight {key!r} (only lora_A/lora_B of linear layers are served)")
        pairs.setdefault(m["module"], {})[m["ab"]] = tensor
    if not pairs:
        raise bad(f"{ADAPTER_WEIGHTS} holds no LoRA weights")
    try:
        alpha, r_cfg = float(cfg.get("lora_alpha") or 8), int(cfg.get("r") or 8)
    except (TypeError, ValueError):
        raise bad("lora_alpha and r must be numbers") from None
    rslora = bool(cfg.get("use_rslora"))
    out: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    max_rank = 0
    for module, ab in sorted(pairs.items()):
        if set(ab) != {"A", "B"}:
            raise bad(f"{module} has lora_{next(iter(ab))} without its pair")
        if module not in linear_shapes:
            raise bad(f"the base model has no linear layer {module!r} (an adapter for another model?)")
        a, b = ab["A"].float(), ab["B"].float()
        n_in, n_out = linear_shapes[module]
        if a.dim() != 2 or b.dim() != 2 or a.shape[1] != n_in or b.shape[0] != n_out or a.shape[0] != b.shape[1]:
            raise bad(f"{module}: lora_A {tuple(a.shape)} and lora_B {tuple(b.shape)} do not fit a linear layer "
                      f"of {n_in} -> {n_out} features (an adapter for another model?)")
        r = a.shape[0]
        if r != int(_pattern_value(cfg.get("rank_pattern"), module, r_cfg)):
            raise bad(f"{module}: rank {r} differs from the configuration's")
        a_alpha = float(_pattern_value(cfg.get("alpha_pattern"), module, alpha))
        scaling = a_alpha / (math.sqrt(r) if rslora else r)
        if not (torch.isfinite(a).all() and torch.isfinite(b).all()):
            raise bad(f"{module}: weights are not finite")
        out[module] = (a.t().contiguous().to(dtype), (b * scaling).t().contiguous().to(dtype))
        max_rank = max(max_rank, r)
    return out, max_rank


class LoraLinear(torch.nn.Module):
    """An `nn.Linear` of the base model plus the LoRA matrices of every loaded adapter that adapts it.

    `plan` is shared by all wrapped layers and set by the engine before each forward pass: a list of
    (adapter uid, rows) -- rows a LongTensor of batch indices, or None for the whole batch. Rows not named by the
    plan get the base layer's output, bit for bit."""

    def __init__(self, base: torch.nn.Linear, plan: list[tuple[int, torch.Tensor | None]]):
        super().__init__()
        self.base = base
        self.plan = plan
        self.deltas: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.base(x)
        self.add_terms(y, x)
        return y

    def add_terms(self, y: torch.Tensor, x: torch.Tensor) -> None:
        """Add each planned adapter's low-rank term of `x` to its rows of `y` (the base layer's output, or a slice
        of a fused output holding it), in place."""
        for uid, rows in self.plan:
            d = self.deltas.get(uid)
            if d is None:
                continue
            a, b = d
            if rows is None:
                y += (x @ a) @ b
            else:
                y.index_add_(0, rows, (x.index_select(0, rows) @ a) @ b)
