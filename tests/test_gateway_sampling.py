"""The gateway's per-run sampling overrides (clawgym.gateway.sampling), between an agent's requests and a real
HTTP upstream on 127.0.0.1 that answers with what it received: the run's temperature and a seed per trajectory
and call reach the model over whatever the agent sent, the token fields are still asked for, the step keeps the
agent's request and what was changed, and without an override nothing is touched."""

from __future__ import annotations

import json

import httpx

from clawgym.gateway import GatewayThread, SamplingOverride
from clawgym.gateway.sampling import call_seed
from clawgym.pool.store import Pool
from scripted_llm import ScriptedLLM

ECHOED = ("temperature", "top_p", "seed", "return_token_ids", "logprobs", "max_tokens")


def _echo(body: dict) -> str:
    """The upstream's answer: the sampling fields of the body it received, as JSON text."""
    return json.dumps({k: body.get(k) for k in ECHOED})


def _chat(url: str, stream: bool, **params) -> dict:
    """One chat call as an agent makes it; returns what the upstream said it received."""
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": stream, **params}
    r = httpx.post(url + "/chat/completions", json=body, timeout=30)
    assert r.status_code == 200, r.text
    if not stream:
        data = r.json()
        assert "token_ids" not in data["choices"][0] and data["choices"][0].get("logprobs") is None
        return json.loads(data["choices"][0]["message"]["content"])
    text = ""
    for line in r.text.splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            for c in json.loads(line[6:]).get("choices") or []:
                text += (c.get("delta") or {}).get("content") or ""
    return json.loads(text)


def test_override_reaches_the_upstream_over_the_agents_parameters(tmp_path):
    override = SamplingOverride(temperature=1.0, seed=7)
    with ScriptedLLM({}, responder=_echo) as llm, Pool(tmp_path / "pool") as pool, \
            GatewayThread(llm.base_url, pool, sampling=override, policy_version="3") as gw:
        seen = {}
        for traj in ("v0.r1.t#0", "v0.r1.t#1"):
            url = gw.url_for(traj, "v0.t")
            # the agent asks for its own temperature and top_p, streamed and not
            seen[traj] = [_chat(url, False, temperature=0.2, top_p=0.5, max_tokens=9),
                          _chat(url, True, temperature=0.2, max_tokens=9)]
        steps = pool.steps()
        received = list(llm.requests)
    for traj, calls in seen.items():
        for i, got in enumerate(calls):
            assert got["temperature"] == 1.0  # the run's, not the agent's 0.2
            assert got["seed"] == call_seed(7, traj, i)
            assert got["return_token_ids"] is True and got["logprobs"] is True  # still asked for
            assert got["max_tokens"] == 9  # what the override does not name is the agent's
        assert calls[0]["top_p"] == 0.5 and calls[1]["top_p"] is None
    seeds = [c["seed"] for calls in seen.values() for c in calls]
    assert len(set(seeds)) == 4 and all(0 <= s < 2 ** 31 for s in seeds)  # one per trajectory and call
    assert all(b["temperature"] == 1.0 for b in received) and len(received) == 4
    # the step: the agent's request as it was, and what the gateway changed
    assert len(steps) == 4
    for s in steps:
        assert s.request["params"]["temperature"] == 0.2 and s.policy_version == "3"
        assert s.request["sampling_override"] == {"temperature": 1.0,
                                                  "seed": call_seed(7, s.trajectory_id, s.step_index)}


def test_seeds_are_the_same_in_another_run_and_process():
    # fixed values: the seed is not Python's per-process salted hash(), so a rerun samples the same way
    assert call_seed(7, "v0.r1.t#0", 0) == call_seed(7, "v0.r1.t#0", 0)
    assert call_seed(7, "v0.r1.t#0", 0) != call_seed(8, "v0.r1.t#0", 0) != call_seed(7, "v0.r1.t#0", 1)
    assert call_seed(0, "a", 0) == 1474268390


def test_override_survives_an_upstream_that_refuses_the_token_fields(tmp_path):
    with ScriptedLLM({}, responder=_echo, reject_token_fields=True) as llm, Pool(tmp_path / "pool") as pool, \
            GatewayThread(llm.base_url, pool, sampling=SamplingOverride(temperature=0.9)) as gw:
        got = _chat(gw.url_for("t", "g"), False)
    assert got["temperature"] == 0.9 and got["seed"] is None and got["return_token_ids"] is None


def test_without_an_override_the_body_is_forwarded_as_sent(tmp_path):
    with ScriptedLLM({}, responder=_echo) as llm, Pool(tmp_path / "pool") as pool, \
            GatewayThread(llm.base_url, pool, sampling=SamplingOverride()) as gw:
        url = gw.url_for("t", "g")
        plain = _chat(url, False)
        own = _chat(url, True, temperature=0.3, seed=5)
        steps = pool.steps()
    assert plain["temperature"] is None and plain["seed"] is None  # not added
    assert own["temperature"] == 0.3 and own["seed"] == 5
    assert plain["return_token_ids"] is True and plain["logprobs"] is True
    assert all("sampling_override" not in s.request for s in steps)
