"""The engine's lean decoding step (clawgym.serve.fast_decode) on the real SmolLM2-135M weights: in fp32 it gives
transformers' tokens and log-probabilities, alone and in a left-padded batch, with and without a LoRA adapter;
with `--precision q4` it decodes through the 4-bit blocks the GGUF file holds (with torch's int4 kernel, and with
the compiled kernel of clawgym.serve.q4_kernel where it builds), and its log-probabilities stay within a measured
distance of the fp32 model's."""

from __future__ import annotations

import threading

import pytest

from conftest import embedded_model_dir, require

BASE = "smollm2-135m"
PROMPTS = ["Name a colour.", "What is a CSV file? Answer in one sentence, please, and be precise.",
           "Say something about Mondays."]


def _model_dir():
    return embedded_model_dir(BASE)


def _generate(engine, prompts: list[list[int]], max_tokens: int, adapter: str | None = None):
    """Submit every prompt at once (one batch); (token ids, logprobs) of each."""
    from clawgym.serve.engine import GenerationRequest, SamplingParams

    outs = [([], []) for _ in prompts]
    done = threading.Semaphore(0)

    def emitter(i):
        def emit(ev):
            if ev.finish_reason:
                done.release()
            elif ev.token_id is not None:
                outs[i][0].append(ev.token_id)
                outs[i][1].append(ev.logprob)
        return emit

    for i, p in enumerate(prompts):
        engine.submit(GenerationRequest(list(p), SamplingParams(max_tokens=max_tokens, logprobs=True), emitter(i),
                                        adapter=adapter))
    for _ in prompts:
        assert done.acquire(timeout=600)
    return outs


def _prompt_ids(tokenizer, text: str) -> list[int]:
    chat = tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                         tokenize=False)
    return tokenizer(chat, add_special_tokens=False)["input_ids"]


@pytest.fixture(scope="module")
def adapter_dir(tmp_path_factory):
    """A peft adapter with random non-zero lora_B (it surely changes answers)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(_model_dir()), dtype=torch.float32)
    peft_model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules=[
        "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]))
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in peft_model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.2)
    path = tmp_path_factory.mktemp("fast-decode") / "adapter"
    peft_model.save_pretrained(str(path))
    return str(path)


def test_fast_fp32_step_gives_transformers_tokens_and_logprobs(monkeypatch, adapter_dir):
    from clawgym.serve.engine import BatchEngine

    model_dir = _model_dir()
    results = {}
    for path in ("transformers", "fast"):
        monkeypatch.setenv("CLAWGYM_FAST_DECODE", "0" if path == "transformers" else "1")
        engine = BatchEngine(model_dir, max_batch=8, precision="fp32", prefix_cache_tokens=0)
        try:
            assert engine.decode["path"] == path
            prompts = [_prompt_ids(engine.tokenizer, p) for p in PROMPTS]
            engine.load_adapter("a", adapter_dir)
            results[path] = {
                "alone": [_generate(engine, [p], 20)[0] for p in prompts],
                "batch": _generate(engine, prompts, 20),  # prompts of different lengths: left-padded rows
                "adapter": _generate(engine, prompts[:2], 20, adapter="a"),
            }
        finally:
            engine.close()
    ref, fast = results["transformers"], results["fast"]
    for case in ("alone", "batch", "adapter"):
        for (t_ref, lp_ref), (t_fast, lp_fast) in zip(ref[case], fast[case], strict=True):
            assert t_fast == t_ref, case
            assert max(abs(a - b) for a, b in zip(lp_ref, lp_fast, strict=True)) < 1e-3, case
    assert fast["adapter"][0][0] != fast["alone"][0][0]  # the adapter is applied on the fast path too


@pytest.mark.parametrize("kernel", ["1", "0"])  # "0": torch's int4 kernel alone (where the q4 kernel cannot build)
def test_q4_weights_are_the_gguf_blocks_and_logprobs_stay_close_to_fp32(monkeypatch, kernel):
    import torch

    from clawgym.serve.engine import BatchEngine
    from clawgym.serve.fast_decode import Q4Matrix, _int4_parts, q4_supported

    require(q4_supported(), "--precision q4 needs a CPU with native bf16 (AVX512-BF16 or AMX)")
    monkeypatch.setenv("CLAWGYM_Q4_KERNEL", kernel)
    model_dir = _model_dir()
    engine = BatchEngine(model_dir, max_batch=4, precision="q4", prefix_cache_tokens=0)
    try:
        if kernel == "0":
            assert engine._fast.kernel is None and engine._fast.kernel_layers is None
        # every matrix of the 30 layers (q/k/v fused, o, gate/up fused, down) and the tied head (Q8_0, in 2 parts)
        assert engine.decode == {"path": "fast", "q4_matrices": 30 * 4 + 1}
        model = engine.model
        w = model.model.layers[3].mlp.down_proj.weight.detach()
        x = torch.randn(2, w.shape[1])
        ref = torch.nn.functional.linear(x.bfloat16().float(), w)  # the products' inputs are bf16
        got = Q4Matrix(_int4_parts(w))(x)
        assert (got - ref).abs().max() <= 0.02 * ref.abs().max()  # the scales' bf16 rounding
        head = _int4_parts(model.lm_head.weight)
        assert head is not None and len(head) == 2  # Q8_0 as two 4-bit parts
        assert _int4_parts(torch.randn(64, 64)) is None  # not 4-bit blocks: stays as it is

        prompts = [_prompt_ids(engine.tokenizer, p) for p in PROMPTS]
        outs = _generate(engine, prompts, 24)
        # the fp32 model's logprobs of the very tokens q4 decoding chose (teacher-forced)
        gaps = []
        with torch.inference_mode():
            for p, (toks, lps) in zip(prompts, outs, strict=True):
                ids = torch.tensor([p + toks])
                logp = torch.log_softmax(model(input_ids=ids).logits[0].float(), dim=-1)
                for j, (t, lp) in enumerate(zip(toks, lps, strict=True)):
                    gaps.append(abs(float(logp[len(p) - 1 + j, t]) - lp))
        assert len(gaps) >= 30
        # the first token comes from the fp32 prefill; the others from 4-bit decoding (measured: mean ~0.01)
        assert sum(gaps) / len(gaps) < 0.08 and max(gaps) < 1.0, gaps
    finally:
        engine.close()


def test_q4_is_refused_with_a_reason_for_a_model_that_is_not_4_bit(tmp_path):
    import shutil

    import torch
    from safetensors.torch import load_file, save_file

    from clawgym.serve.engine import BatchEngine, EngineError
    from clawgym.serve.fast_decode import q4_supported

    require(q4_supported(), "--precision q4 needs a CPU with native bf16 (AVX512-BF16 or AMX)")
    src, dst = _model_dir(), tmp_path / "m"
    shutil.copytree(src, dst)
    weights = load_file(str(src / "model.safetensors"))
    gen = torch.Generator().manual_seed(0)
    save_file({k: v + torch.randn(v.shape, generator=gen) * 1e-3 for k, v in weights.items()},  # off the grid
              str(dst / "model.safetensors"))
    with pytest.raises(EngineError, match="4-bit blocks"):
        BatchEngine(dst, precision="q4")


def test_q4_kernel_is_the_product_of_the_gguf_blocks_with_8_bit_rows():
    """The compiled kernel (clawgym.serve.q4_kernel) on the real model's Q4_1 layers and Q8_0 head: exactly the
    product of the GGUF's weights with the input rounded to 8 bits per block of 32 (float summation order
    aside), within the 8-bit rounding of the fp32 product, and the same on two threads."""
    import torch

    from clawgym.serve import q4_kernel
    from clawgym.serve.engine import BatchEngine
    from clawgym.serve.fast_decode import _blocks, q4_supported

    require(q4_supported(), "--precision q4 needs a CPU with native bf16 (AVX512-BF16 or AMX)")
    lib = q4_kernel.load()
    require(lib is not None, f"the q4 kernel does not build here: {q4_kernel.UNAVAILABLE}")
    engine = BatchEngine(_model_dir(), max_batch=1, precision="fp32", prefix_cache_tokens=0)
    engine.close()
    model = engine.model
    gen = torch.Generator().manual_seed(0)
    for w, expected in ((model.model.layers[5].mlp.down_proj.weight, "q4_1"),
                        (model.model.layers[0].self_attn.o_proj.weight, "q4_1"), (model.lm_head.weight, "q8_0")):
        w = w.detach()
        kind, q, d, m = _blocks(w)
        assert kind == expected
        matrix = q4_kernel.q4_1(lib, q, d, m) if kind == "q4_1" else q4_kernel.q8_0(lib, q, d)
        for rows in (1, 3):
            x = torch.randn((rows, w.shape[1]), generator=gen)
            blk = x.reshape(rows, -1, 32)
            dx = blk.abs().amax(-1, keepdim=True) / 127
            x8 = (torch.round(blk / dx) * dx).reshape(rows, -1)  # the kernel's rounding of the input
            ref8 = (x8.double() @ w.double().T).float()
            got = matrix(x)
            assert got.shape == (rows, w.shape[0])
            assert (got - ref8).abs().max() <= 1e-4 * ref8.abs().max(), kind
            ref = x @ w.T
            assert (got - ref).abs().max() <= 0.02 * ref.abs().max(), kind
            lib.cg_threads(2)  # the rows split with a worker thread: the same numbers
            try:
                assert torch.equal(matrix(x), got)
            finally:
                lib.cg_threads(1)


def test_q4_kernel_decodes_one_sequence_close_to_fp32_and_keeps_adapters(monkeypatch, adapter_dir):
    """One request at a time, q4 decodes through the C layers of the kernel: logprobs within the measured
    distance of the fp32 model's; a request with an adapter takes the torch step (the adapter's terms) and its
    answer changes."""
    import torch

    from clawgym.serve import q4_kernel
    from clawgym.serve.engine import BatchEngine
    from clawgym.serve.fast_decode import q4_supported

    require(q4_supported(), "--precision q4 needs a CPU with native bf16 (AVX512-BF16 or AMX)")
    require(q4_kernel.load() is not None, f"the q4 kernel does not build here: {q4_kernel.UNAVAILABLE}")
    engine = BatchEngine(_model_dir(), max_batch=1, precision="q4", prefix_cache_tokens=0)
    try:
        assert engine._fast.kernel_layers is not None
        prompts = [_prompt_ids(engine.tokenizer, p) for p in PROMPTS]
        outs = [_generate(engine, [p], 24)[0] for p in prompts]
        steps = engine._fast.kernel_steps
        assert steps == sum(len(t) for t, _ in outs) - len(prompts)  # every token after the prefill's
        gaps = []
        with torch.inference_mode():
            for p, (toks, lps) in zip(prompts, outs, strict=True):
                logp = torch.log_softmax(engine.model(input_ids=torch.tensor([p + toks])).logits[0].float(), dim=-1)
                gaps += [abs(float(logp[len(p) - 1 + j, t]) - lp) for j, (t, lp) in enumerate(zip(toks, lps,
                                                                                                  strict=True))]
        assert len(gaps) >= 30
        assert sum(gaps) / len(gaps) < 0.08 and max(gaps) < 1.0, gaps  # measured: mean ~0.03, max ~0.1

        engine.load_adapter("a", adapter_dir)
        adapted = _generate(engine, [prompts[0]], 12, adapter="a")[0]
        assert engine._fast.kernel_steps == steps  # the adapter's steps went through torch
        assert adapted[0] != outs[0][0][:12]
        plain = _generate(engine, [prompts[0]], 12)[0]  # the adapter loaded but not asked for: C layers again
        assert engine._fast.kernel_steps > steps and plain[0] == outs[0][0][:12]
    finally:
        engine.close()
