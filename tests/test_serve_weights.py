"""Full weights published to the running embedded server (`POST /update_weights_from_disk`, SGLang's route), and
`train rl --full` publishing every version that way: the real server over HTTP on 127.0.0.1, the real SmolLM2
weights, real bwrap sandboxes for the loop."""

from __future__ import annotations

import json
import shutil

import httpx
import pytest
import torch

from conftest import embedded_model_dir

BASE = "smollm2-135m"


def _model_dir():
    return embedded_model_dir(BASE)


def _perturbed_copy(src, dst, scale: float, drop: str | None = None, reshape: str | None = None):
    from safetensors.torch import load_file, save_file

    shutil.copytree(src, dst)
    weights = load_file(str(src / "model.safetensors"))
    gen = torch.Generator().manual_seed(0)
    out = {}
    for k, v in weights.items():
        if k == drop:
            continue
        v = v + torch.randn(v.shape, generator=gen) * scale * v.abs().mean()
        out[k] = v[:-1] if k == reshape else v
    save_file(out, str(dst / "model.safetensors"))
    return dst


def _chat(root: str, content: str) -> dict:
    body = {"messages": [{"role": "user", "content": content}], "max_tokens": 12, "temperature": 0}
    return httpx.post(f"{root}/v1/chat/completions", json=body, timeout=300).json()


def test_full_weights_swap_in_place_and_bad_weights_are_refused(tmp_path):
    from clawgym.serve import ServerProcess

    src = _model_dir()
    new = _perturbed_copy(src, tmp_path / "new", 0.5)
    missing = _perturbed_copy(src, tmp_path / "missing", 0.0, drop="model.norm.weight")
    shaped = _perturbed_copy(src, tmp_path / "shaped", 0.0, reshape="model.layers.0.mlp.up_proj.weight")
    with ServerProcess(BASE, log_path=tmp_path / "server.log", precision="fp32") as server:
        root = f"http://127.0.0.1:{server.port}"
        before = _chat(root, "Name a colour.")["choices"][0]["message"]["content"]
        res = httpx.post(f"{root}/update_weights_from_disk", json={"model_path": str(new)}, timeout=600)
        assert res.status_code == 200 and res.json()["success"] is True
        health = httpx.get(f"{root}/health").json()
        assert health["weights"] == {"path": str(new), "version": 1}
        after = _chat(root, "Name a colour.")["choices"][0]["message"]["content"]
        assert after != before  # the perturbed weights answer (the prefix cache of the old ones is gone)
        for path, why in ((missing, "missing"), (shaped, "shape"), (tmp_path / "nowhere", "no model directory")):
            res = httpx.post(f"{root}/update_weights_from_disk", json={"model_path": str(path)}, timeout=600)
            assert res.status_code == 400 and why in res.json()["message"], res.text
        assert httpx.post(f"{root}/update_weights_from_disk", json={}, timeout=60).status_code == 400
        assert httpx.get(f"{root}/health").json()["weights"]["version"] == 1  # refused loads changed nothing
        assert _chat(root, "Name a colour.")["choices"][0]["message"]["content"] == after


def test_full_weights_reach_the_server_by_vllms_route_too(tmp_path):
    """`train rl --full --weights-route vllm` publishes by vLLM's dev-mode route (`/pause`, `/collective_rpc`
    reload_weights, `/reset_prefix_cache`, `/resume`), which the embedded server serves as vLLM does; `auto`
    takes SGLang's route where the server has it. (A real vLLM server: unmeasured here, no GPU.)"""
    from clawgym.serve import ServerProcess
    from clawgym.train.rl_loop import PolicyServer, RLError

    src = _model_dir()
    new = _perturbed_copy(src, tmp_path / "new", 0.5)
    with ServerProcess(BASE, log_path=tmp_path / "server.log", precision="fp32") as server:
        root = f"http://127.0.0.1:{server.port}"
        before = _chat(root, "Name a colour.")["choices"][0]["message"]["content"]
        vllm = PolicyServer(BASE, f"{root}/v1", tmp_path / "unused.log", "fp32", weights_route="vllm")
        vllm.publish_full(new)
        assert httpx.get(f"{root}/health").json()["weights"] == {"path": str(new), "version": 1}
        assert _chat(root, "Name a colour.")["choices"][0]["message"]["content"] != before
        with pytest.raises(RLError, match=r"vLLM's /collective_rpc reload_weights \(400\).*no model directory"):
            vllm.publish_full(tmp_path / "nowhere")
        bad = httpx.post(f"{root}/collective_rpc", json={"method": "sleep"}, timeout=60)
        assert bad.status_code == 400 and "only the method 'reload_weights'" in bad.text
        PolicyServer(BASE, f"{root}/v1", tmp_path / "unused.log", "fp32").publish_full(src)  # auto: SGLang's
        assert httpx.get(f"{root}/health").json()["weights"] == {"path": str(src), "version": 2}
        assert _chat(root, "Name a colour.")["choices"][0]["message"]["content"] == before
    with pytest.raises(RLError, match="weights route 'tgi'"):
        PolicyServer(BASE, None, tmp_path / "unused.log", "fp32", weights_route="tgi")


def test_train_rl_full_publishes_whole_models(bwrap_backend, tmp_path):
    from clawgym.train.rl_loop import RLOptions, run_rl
    from test_rl_loop import toy_task

    _model_dir()
    out = tmp_path / "rl"
    opts = RLOptions(samples=4, tasks_per_iter=2, iterations=2, temperature=1.0, max_turns=1, max_tokens=8,
                     lr=1e-5, jobs=4, seed=0, full=True)
    rows = run_rl([toy_task(i) for i in range(2)], out, opts, backend=bwrap_backend)
    assert [r["published"] for r in rows] == [1, 2]
    assert not (out / "adapters").exists()
    assert (out / "weights" / "v2" / "model.safetensors").exists() and (out / "weights" / "v1").exists()
    from safetensors.torch import load_file

    w1, w2 = load_file(str(out / "weights" / "v1" / "model.safetensors")), \
        load_file(str(out / "weights" / "v2" / "model.safetensors"))
    changed = [k for k in w1 if not torch.equal(w1[k], w2[k])]
    metrics = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    if metrics[1].get("rows_run"):  # the second update had a learning signal: every weight may move
        assert len(changed) > 100
    # every rollout of v1 ran against the server's swapped weights under the base model's name
    run = json.loads((out / "rollouts" / "v1" / "run.json").read_text())
    assert run["model"] == "smollm2-135m" and run["rl_version"] == 1
