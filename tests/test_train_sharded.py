"""`train sft` sharded (#36): the shipped accelerate configs (configs/accelerate/) load with accelerate's own config
loader and map to the launch settings they claim; the DDP and DeepSpeed ZeRO-2 configs run 2 processes on these
CPUs to the loss of 1; FSDP, which accelerate runs on GPUs only, is refused on CPUs instead of trained as DDP."""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import require

REPO = Path(__file__).resolve().parents[1]
CONFIGS = REPO / "configs" / "accelerate"
EXPECTED = {"ddp.yaml": "MULTI_GPU", "fsdp.yaml": "FSDP", "zero2.yaml": "DEEPSPEED", "zero3.yaml": "DEEPSPEED"}


def _records() -> list[dict]:
    return [{"trajectory_id": f"s{i}", "messages": [
        {"role": "system", "content": "You are a careful file agent."},
        {"role": "user", "content": f"Task {i}: summarise " + " ".join(f"w{i}_{k}" for k in range(25 + 5 * i))},
        {"role": "assistant", "content": f"Summary {i}: the words run from w{i}_0 to w{i}_{24 + 5 * i}."}]}
        for i in range(2)]


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _env() -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(REPO / "src"), os.environ.get("PYTHONPATH")) if p)
    # CPU processes whatever the machine has: these tests are about what accelerate does on CPUs
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": path, "CUDA_VISIBLE_DEVICES": ""}


def _sft_args(data: Path, model: Path, out: Path) -> list[str]:
    return ["train", "sft", str(data), "--model", str(model), "--max-steps", "3", "--max-len", "256",
            "--batch-tokens", "256", "--warmup-ratio", "0", "--lr", "1e-3", "--save-steps", "0", "--threads", "1",
            "--precision", "fp32", "-o", str(out)]


def _accelerate(config: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(CONFIGS / config),
            "--num_processes", "2", "--mixed_precision", "no", "--main_process_port", str(_port()), "-m", "clawgym",
            *args]


def _log(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def one_process(smol_dir, tmp_path_factory) -> tuple[Path, Path]:
    """The SFT file and a 1-process run on it: 2 accumulated packed rows a step, 3 steps (the real SmolLM2)."""
    tmp = tmp_path_factory.mktemp("sharded")
    data = tmp / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in _records()))
    out = tmp / "one"
    res = subprocess.run([sys.executable, "-m", "clawgym", *_sft_args(data, smol_dir, out), "--grad-accum", "2"],
                         capture_output=True, text=True, env=_env(), timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    return data, out


def _same_losses_and_adapter(one: Path, two: Path, smol_dir: Path, distributed: str) -> None:
    """2 processes x 1 row equal 1 process x 2 accumulated rows (every step sees both rows): each logged loss
    within 1e-4 relative (fp32; the runs here agreed to ~1e-7), the adapters within 1e-5, and final/ loads."""
    import torch
    from peft import PeftModel
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    a, b = _log(one), _log(two)
    assert [r["step"] for r in b] == [1, 2, 3]  # written once, by rank 0
    for x, y in zip(a, b, strict=True):
        assert x["loss"] == pytest.approx(y["loss"], rel=1e-4), (a, b)
        assert x["tokens"] == y["tokens"] and x["trained_tokens"] == y["trained_tokens"]
    assert b[-1]["loss"] < b[0]["loss"]
    meta = json.loads((two / "train.json").read_text())
    assert meta["processes"] == 2 and meta["distributed"] == distributed and meta["status"] == "done"
    wa = load_file(str(one / "final" / "adapter_model.safetensors"))
    wb = load_file(str(two / "final" / "adapter_model.safetensors"))
    assert wa.keys() == wb.keys() and any("lora_B" in k for k in wb)
    for k in wa:
        assert torch.allclose(wa[k], wb[k], rtol=1e-3, atol=1e-5), k
    assert any(wb[k].abs().max() > 0 for k in wb if "lora_B" in k)  # trained (lora_B starts at zero)
    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(str(smol_dir)), str(two / "final"))
    loaded = dict(model.named_parameters())
    key = next(k for k in wb if "lora_B" in k)
    name = next(n for n in loaded if n.startswith(key.removesuffix(".weight")) and n.endswith(".weight"))
    assert torch.equal(loaded[name].detach(), wb[key])


# ------------------------------------------------------------------------------------------- the shipped configs


def test_shipped_accelerate_configs_load_and_map_to_their_launch_settings(tiny_model, monkeypatch):
    from accelerate.commands.config.config_args import load_config_from_file
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils import FullyShardedDataParallelPlugin
    from accelerate.utils.launch import prepare_deepspeed_cmd_env, prepare_multi_gpu_env
    from transformers import AutoModelForCausalLM

    assert sorted(p.name for p in CONFIGS.glob("*.yaml")) == sorted(EXPECTED)
    for name, kind in EXPECTED.items():
        path = CONFIGS / name
        header = path.read_text().split("\ncompute_environment:")[0]
        assert f"accelerate launch --config_file configs/accelerate/{name}" in header, name
        cfg = load_config_from_file(str(path))  # accelerate's own loader: unknown keys are refused
        assert cfg.distributed_type.value == kind and cfg.mixed_precision == "bf16" and not cfg.use_cpu
        args = launch_command_parser().parse_args(["--config_file", str(path), "-m", "clawgym", "train", "sft",
                                                   "d.jsonl"])
        args, defaults, _ = _validate_launch_command(args)
        assert args.num_processes == 8 and args.mixed_precision == "bf16"
        assert (args.use_fsdp, args.use_deepspeed, args.multi_gpu) == (kind == "FSDP", kind == "DEEPSPEED",
                                                                      kind == "MULTI_GPU")
        if kind == "DEEPSPEED":
            args.deepspeed_fields_from_accelerate_config = ",".join([*defaults.deepspeed_config, "mixed_precision"])
            _, env = prepare_deepspeed_cmd_env(args)
            stage = name.removeprefix("zero").removesuffix(".yaml")
            assert env["ACCELERATE_USE_DEEPSPEED"] == "true" and env["ACCELERATE_DEEPSPEED_ZERO_STAGE"] == stage
            if stage == "3":  # final/ is gathered into one state dict
                assert env["ACCELERATE_DEEPSPEED_ZERO3_SAVE_16BIT_MODEL"] == "true"
            continue
        env = prepare_multi_gpu_env(args)
        if kind == "MULTI_GPU":
            assert "ACCELERATE_USE_FSDP" not in env
            continue
        for k, v in env.items():
            if k.startswith(("ACCELERATE_", "FSDP_")):
                monkeypatch.setenv(k, v)
        plugin = FullyShardedDataParallelPlugin()  # what accelerate builds in each process from that environment
        assert plugin.fsdp_version == 2 and plugin.reshard_after_forward is True
        assert "FULL_STATE_DICT" in str(plugin.state_dict_type)
        plugin.set_auto_wrap_policy(AutoModelForCausalLM.from_pretrained(str(tiny_model)))
        assert plugin.auto_wrap_policy.keywords["transformer_layer_cls"] == {
            type(m) for m in AutoModelForCausalLM.from_pretrained(str(tiny_model)).model.layers}


def test_sharding_options_are_checked_before_loading(tmp_path):
    from typer.testing import CliRunner

    from clawgym.cli.app import app

    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps(_records()[0]) + "\n")
    ds = tmp_path / "ds.json"
    ds.write_text("{}")
    runner = CliRunner()
    res = runner.invoke(app, ["train", "sft", str(data), "-o", str(tmp_path / "o"), "--fsdp", "full_shard auto_wrap",
                              "--deepspeed", str(ds)])
    assert res.exit_code != 0 and "--fsdp and --deepspeed exclude each other" in res.output
    res = runner.invoke(app, ["train", "sft", str(data), "-o", str(tmp_path / "o"), "--deepspeed",
                              str(tmp_path / "nope.json")])
    assert res.exit_code != 0 and "--deepspeed" in res.output and "no such file" in res.output
    res = runner.invoke(app, ["train", "sft", str(data), "-o", str(tmp_path / "o"), "--fsdp-config", str(ds)])
    assert res.exit_code != 0 and "--fsdp-config needs --fsdp" in res.output
    assert not (tmp_path / "o").exists()


# ------------------------------------------------------------------------------------------- processes


def test_ddp_config_runs_two_processes_to_the_loss_of_one(smol_dir, one_process, tmp_path):
    """configs/accelerate/ddp.yaml through `accelerate launch` (on CPUs: DDP over gloo), fp32 (--mixed_precision
    no overrides the config's bf16 so that the losses compare)."""
    data, one = one_process
    two = tmp_path / "two"
    res = subprocess.run(_accelerate("ddp.yaml", *_sft_args(data, smol_dir, two), "--grad-accum", "1"),
                         capture_output=True, text=True, env=_env(), timeout=900)
    assert res.returncode == 0, (res.stdout[-2000:], res.stderr[-3000:])
    _same_losses_and_adapter(one, two, smol_dir, "MULTI_CPU")


def test_fsdp_on_cpus_is_refused_not_trained_as_ddp(tiny_model, tmp_path):
    """accelerate (1.15) enables FSDP only for accelerator process groups: on CPUs it drops the FSDP plugin and
    trains plain DDP over gloo. `train sft` refuses that in one line, from the shipped config and from --fsdp."""
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in _records()))
    launches = {
        "config": _accelerate("fsdp.yaml", *_sft_args(data, tiny_model, tmp_path / "config")),
        "flag": [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port",
                 str(_port()), "-m", "clawgym", *_sft_args(data, tiny_model, tmp_path / "flag"), "--fsdp",
                 "full_shard auto_wrap"],
    }
    for name, cmd in launches.items():
        res = subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=600)
        assert res.returncode != 0, name
        assert ("error: FSDP was asked for but accelerate runs MULTI_CPU here (accelerate runs FSDP on GPUs only)"
                in res.stderr), (name, res.stderr[-3000:])
        assert not (tmp_path / name / "final").exists() and not (tmp_path / name / "log.jsonl").exists()


@pytest.mark.slow
def test_deepspeed_zero2_config_runs_two_processes_to_the_loss_of_one(smol_dir, one_process, tmp_path):
    """configs/accelerate/zero2.yaml through `accelerate launch` on CPUs: DeepSpeed's CPU accelerator, gloo. Slow:
    the first run builds DeepSpeed's shared-memory communication op (about 90 s here)."""
    require(importlib.util.find_spec("deepspeed") is not None,
            "deepspeed is not installed (pip install --no-build-isolation deepspeed)")
    data, one = one_process
    two = tmp_path / "two"
    res = subprocess.run(_accelerate("zero2.yaml", *_sft_args(data, smol_dir, two), "--grad-accum", "1"),
                         capture_output=True, text=True, env=_env(), timeout=900)
    assert res.returncode == 0, (res.stdout[-2000:], res.stderr[-3000:])
    _same_losses_and_adapter(one, two, smol_dir, "DEEPSPEED")
