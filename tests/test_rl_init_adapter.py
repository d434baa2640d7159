"""`train rl --init-adapter`: RL continues a LoRA adapter (an SFT student's, unmerged) instead of a fresh one.

Real parts: the embedded server with the real SmolLM2 weights, hot-loaded adapters, the gateway and pool, bwrap
sandboxes. Policy v0 must be the base model *with* the starting adapter (the engine's log-probabilities of v0's
episodes are that model's, not the base's), and v1 must be that adapter trained further (its rank, its values
moved a little), not a fresh adapter."""

from __future__ import annotations

import pytest
import torch

from clawgym.core.records import Task
from clawgym.train.rl_loop import RLError, RLOptions, run_rl
from test_rl_loop import model_ready  # noqa: F401  (the module's fixture)

# a reward that differs between samples almost surely (the answer's length mod 7), so the group has an advantage
GRADE = '''
def grade(transcript, workspace_path):
    said = [e["message"] for e in transcript if e.get("type") == "message" and e["message"].get("role") == "assistant"]
    text = " ".join(p.get("text", "") for m in said for p in (m.get("content") or []) if isinstance(p, dict))
    return {"length_mod_7": (len(text) % 7) / 6}
'''


def toy_task(i: int) -> Task:
    return Task.model_validate({
        "id": f"any-answer-{i}", "instruction": "Name a colour.", "operations": ["toy"],
        "verifier": {"code": {"kind": "python", "source": GRADE}},
    })


def _start_adapter(path) -> None:
    """A rank-4 LoRA adapter of SmolLM2 whose B matrices are not zero: a policy that differs from the base."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from clawgym.llm.models import resolve_model_dir

    base = AutoModelForCausalLM.from_pretrained(str(resolve_model_dir("smollm2-135m")), dtype=torch.float32)
    model = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "down_proj"],
                                            task_type="CAUSAL_LM"))
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.02)
    model.save_pretrained(str(path))


def _adapter_tensors(path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(path / "adapter_model.safetensors"))


def _logps(adapter, step) -> list[float]:
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from clawgym.llm.models import resolve_model_dir
    from clawgym.train.rl_objective import build_batch, token_logps

    model = AutoModelForCausalLM.from_pretrained(str(resolve_model_dir("smollm2-135m")), dtype=torch.float32)
    if adapter is not None:
        model = PeftModel.from_pretrained(model, str(adapter))
    b = build_batch([{"prompt_ids": step.prompt_ids, "response_ids": step.response_ids, "advantage": 0.0}])
    with torch.no_grad():
        lp, _ = token_logps(model.eval(), b)
    return lp[b.response_mask.bool()].tolist()


def test_rl_starts_from_the_given_adapter_and_trains_it_further(model_ready, bwrap_backend, tmp_path):  # noqa: F811
    from clawgym.pool import Pool

    start = tmp_path / "sft_adapter"
    _start_adapter(start)
    out = tmp_path / "rl"
    opts = RLOptions(samples=4, tasks_per_iter=1, iterations=1, temperature=1.0, max_turns=1, max_tokens=6,
                     lr=1e-3, jobs=2, seed=0, init_adapter=str(start), precision="fp32")
    rows = run_rl([toy_task(0)], out, opts, backend=bwrap_backend)
    assert [r["published"] for r in rows] == [1]

    with Pool(out / "pool") as pool:
        steps = [s for s in pool.steps() if s.policy_version == "0"]
    assert steps and all(s.model == "policy-v0" for s in steps), {s.model for s in steps}
    step = next(s for s in steps if s.logprobs and len(s.response_ids) >= 2)
    engine = step.logprobs[:len(step.response_ids)]
    with_adapter, base = _logps(start, step), _logps(None, step)
    # v0's tokens were drawn by the base model with the starting adapter (fp32 serving: float rounding apart)
    assert max(abs(a - b) for a, b in zip(engine, with_adapter, strict=True)) < 1e-3
    assert max(abs(a - b) for a, b in zip(engine, base, strict=True)) > 1e-2

    first, trained = _adapter_tensors(start), _adapter_tensors(out / "adapters" / "v1")
    assert trained.keys() == first.keys()  # the starting adapter's modules and rank (4, not --lora-r's 16)
    a_key = next(k for k in first if "lora_A" in k)
    assert trained[a_key].shape == first[a_key].shape and first[a_key].shape[0] == 4
    moved = sum(float((trained[k] - first[k]).norm()) for k in first)
    size = sum(float(first[k].norm()) for k in first)
    assert 0 < moved < 0.1 * size, (moved, size)  # trained further from the start, not drawn again


@pytest.mark.parametrize("change, message", [
    ({"kl_coef": 0.1}, "--kl-coef"),
    ({"full": True}, "--full"),
    ({"init_adapter": "/nonexistent/adapter"}, "adapter_config.json"),
])
def test_init_adapter_refuses_what_it_cannot_do(tmp_path, change, message):
    start = tmp_path / "a"
    start.mkdir()
    (start / "adapter_config.json").write_text("{}")
    opts = RLOptions(**{"init_adapter": str(start), **change})
    with pytest.raises(RLError, match=message.replace("-", r"\-")):
        run_rl([toy_task(0)], tmp_path / "out", opts, backend=None)
