"""The shortcuts that make validation fast must not change what it decides.

* checks that run python (the test suite, a script the agent wrote, expression cases) run in a fork of the
  grading process instead of a fresh `python3`: the outcome must be the fresh interpreter's;
* YAML is parsed by libyaml, an .eml once per grading, the check library indexed without re-splitting it;
* replays that run commands share one long-lived sandbox per worker, reset between tasks: each task must see
  what a sandbox of its own would give.
"""

from __future__ import annotations

import ast
import json
import random
import textwrap
from pathlib import Path

import pytest

from clawgym.checks import CHECKLIB_SOURCE, checklib, checklib_docs
from clawgym.core.records import WorkspaceSpec
from clawgym.core.taxonomy import load_taxonomy
from clawgym.synth.compose import compose_task
from clawgym.synth.ops import registry
from clawgym.synth.personas import load_personas
from clawgym.synth.validate import start_grader, start_replay_sandbox, validate_batch

REPO_TESTS = {
    "pyproject.toml": "[tool.pytest.ini_options]\ntestpaths = [\"checks\"]\n",
    "shop/__init__.py": "",
    "shop/money.py": "def add(a, b):\n    return a + b\n",
    "checks/test_money.py": "import pytest\n\nfrom shop.money import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
                            "def test_raises():\n    with pytest.raises(TypeError):\n        add(1, None)\n",
}

SCRIPTS = {
    # an output file never closed: the interpreter flushes it at exit
    "tools/unclosed.py": "import csv, sys\nf = open(sys.argv[1], 'w')\ncsv.writer(f).writerow(['a', sys.argv[0]])\n"
                         "print('main' if __name__ == '__main__' else 'imported', __file__)\n",
    "tools/exit3.py": "import sys\nprint('bye')\nsys.exit(3)\n",
    "tools/boom.py": "raise ValueError('boom')\n",
    "tools/thread.py": "import sys, threading, time\n\ndef work():\n    time.sleep(0.05)\n"
                       "    open(sys.argv[1], 'w').write('late')\n\nthreading.Thread(target=work).start()\n",
    "tools/at_exit.py": "import atexit, sys\nimport helper\n"
                        "atexit.register(lambda: open(sys.argv[1], 'w').write(str(helper.VALUE)))\n",
    "tools/helper.py": "VALUE = 42\n",
    "tools/path0.py": "import sys\nopen(sys.argv[1], 'w').write(sys.path[0] + ' ' + sys.argv[0])\n",
    # a script folder holding a module named like one the grader has imported: must run in a real python3
    "shadow/json.py": "def dumps(*a, **k):\n    return 'SHADOWED'\n",
    "shadow/use.py": "import sys, json\nopen(sys.argv[1], 'w').write(json.dumps([1]))\n",
}

# Runs in the sandbox with the sandbox's python3, like a grade() source: each check run twice, once as it
# runs in grading (forked where it can) and once with forking disabled (always a fresh python3).
PROBE = r'''
import json, os, subprocess, sys
ns = {}
exec(compile(open("/workspace/checklib_src.py").read(), "grade.py", "exec"), ns)
ws = "/workspace"
out = {}
def both(name, fn):
    forked = fn()
    saved = ns["_forkable"]
    ns["_forkable"] = lambda *a, **k: False
    try:
        fresh = fn()
    finally:
        ns["_forkable"] = saved
    out[name] = [forked, fresh]
args = ["-q", "-p", "no:cacheprovider"]
both("pytest_green", lambda: ns["pytest_passes"](ws, "green", args))
both("pytest_red", lambda: ns["pytest_passes"](ws, "red", args))
both("pytest_missing", lambda: ns["pytest_passes"](ws, "nowhere", args))
out["pytest_command"] = [ns["command_ok"](ws, ["python3", "-m", "pytest", *args], d) for d in ("green", "red")]
cases = [["add(2, 3)", "5"], ["add(0.1, 0.2)", "0.3"], ["raises(add, 1, None)", "'TypeError'"], ["add(1, 1)", "3"]]
both("cases", lambda: ns["sys_py_cases"](ws, "green", "from shop.money import add", cases))
both("cases_bad_setup", lambda: ns["sys_py_cases"](ws, "green", "from shop.nothing import add", cases))
def script(path):
    def run():
        target = "/tmp/out.txt"
        if os.path.exists(target):
            os.unlink(target)
        code, stdout = ns["_run_command"](["python3", path, target], ws, 30)
        return [code, stdout.decode(), open(target).read() if os.path.exists(target) else None]
    return run
for path in ("tools/unclosed.py", "tools/exit3.py", "tools/boom.py", "tools/thread.py", "tools/at_exit.py",
             "tools/path0.py", "tools/missing.py", "shadow/use.py"):
    both(path, script(path))
out["missing_real"] = subprocess.run(["python3", "tools/missing.py", "/tmp/x"], cwd=ws, capture_output=True).returncode
out["forkable"] = {d: ns["_forkable"](ws + "/" + d, False) for d in ("tools", "shadow")}
out["forkable_repo"] = ns["_forkable"](ws + "/green")
print(json.dumps(out))
'''


def _files(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def test_forked_python_checks_agree_with_a_fresh_interpreter(tmp_path, bwrap_backend):
    ws = tmp_path / "ws"
    _files(ws / "green", REPO_TESTS)
    _files(ws / "red", {**REPO_TESTS, "shop/money.py": "def add(a, b):\n    return a - b\n"})
    _files(ws, SCRIPTS)
    (ws / "checklib_src.py").write_text(CHECKLIB_SOURCE)
    sb = bwrap_backend.start(WorkspaceSpec(), prebuilt=ws)
    try:
        res = sb.exec(["python3", "-I", "-c", PROBE], timeout=120)
    finally:
        sb.stop()
    assert res.exit_code == 0, res.stderr
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["forkable"] == {"tools": True, "shadow": False} and out["forkable_repo"] is True
    for name, value in out.items():
        if name.startswith("forkable") or name in ("pytest_command", "missing_real"):
            continue
        forked, fresh = value
        assert forked == fresh, (name, forked, fresh)
    assert out["pytest_green"] == [1.0, 1.0] and out["pytest_red"] == [0.0, 0.0]
    assert out["pytest_command"] == [1.0, 0.0]
    assert out["cases"][0] == 0.75 and out["cases_bad_setup"][0] == 0.0
    assert out["tools/unclosed.py"][0] == [0, "main /workspace/tools/unclosed.py\n", "a,tools/unclosed.py\n"]
    assert out["tools/exit3.py"][0][0] == 3 and out["tools/boom.py"][0][0] == 1
    assert out["tools/thread.py"][0][2] == "late" and out["tools/at_exit.py"][0][2] == "42"
    assert out["tools/path0.py"][0][2] == "/workspace/tools tools/path0.py"
    # a fresh python3 imports the folder's json.py: so must the check (it ran in a real python3, not a fork)
    assert out["tools/missing.py"][0][0] == out["missing_real"] == 2 and out["shadow/use.py"][0][2] == "SHADOWED"


def test_yaml_load_is_safe_load():
    yaml = pytest.importorskip("yaml")
    docs = ["a: 1\nb: [x, 'y', 2.5]\n", "- {k: v}\n- null\n- 2026-03-01\n", "x: &a {p: 1}\ny: *a\n",
            "s: 'quoted: colon'\nt: \"esc\\n\"\n# comment\n", "on: yes\noff: no\n", "", "k: !!python/object:os.system x\n",
            "a: b: c\n"]
    for text in docs:
        try:
            want = ("ok", yaml.safe_load(text))
        except yaml.YAMLError as exc:
            want = ("error", type(exc).__mro__[-3].__name__)
        try:
            got = ("ok", checklib._yaml_load(text))
        except yaml.YAMLError as exc:
            got = ("error", type(exc).__mro__[-3].__name__)
        assert got == want, text


def test_an_eml_is_parsed_once_per_grading(tmp_path, monkeypatch):
    (tmp_path / "out.eml").write_text("From: a@x.org\nTo: b@y.org\nSubject: Totals for March\n\nTotal: 1,234.50\n")
    calls = []
    real = checklib_docs._docs_parse_eml_bytes
    monkeypatch.setattr(checklib_docs, "_docs_parse_eml_bytes", lambda raw: calls.append(raw) or real(raw))
    monkeypatch.setattr(checklib_docs, "_DOCS_EML_SEEN", {})
    assert checklib_docs.docs_eml(tmp_path, "out.eml", to=["b@y.org"]) == 1.0
    assert checklib_docs.docs_eml(tmp_path, "out.eml", subject_has=["march"], body_has=["1234.5"]) == 1.0
    assert len(calls) == 1
    (tmp_path / "out.eml").write_text("From: a@x.org\nTo: c@y.org\nSubject: x\n\nnothing\n")
    assert checklib_docs.docs_eml(tmp_path, "out.eml", to=["b@y.org"]) == 0.0  # new bytes: parsed again
    assert len(calls) == 2


def test_library_index_keeps_the_exact_source_segments():
    tree = ast.parse(CHECKLIB_SOURCE)
    want = {}
    for node in tree.body:
        names = ([node.name] if isinstance(node, (ast.FunctionDef, ast.ClassDef)) else
                 [t.id for t in node.targets if isinstance(t, ast.Name)] if isinstance(node, ast.Assign) else [])
        for name in names:
            want[name] = ast.get_source_segment(CHECKLIB_SOURCE, node)
    from clawgym.checks.library import _library_index

    assert {k: v[1] for k, v in _library_index(CHECKLIB_SOURCE)[1].items()} == want


def _command_candidates(n: int):
    """Candidates whose solutions run commands (git, mv/rm, python scripts), from the real generators."""
    tax = load_taxonomy()
    personas = load_personas(taxonomy=tax)
    ops = registry()
    wanted = ["fix_failing_tests", "organize_files", "deduplicate_files", "write_automation_script"]
    out = []
    rng = random.Random(11)
    for i in range(200):
        op = wanted[i % len(wanted)]
        subs = [s for s in tax.subcategories if op in s.operations] or tax.subcategories
        sub = rng.choice(subs)
        cand = compose_task(f"t{i}", rng.choice(personas), sub, tax, {op: ops[op]}, rng, 1)
        if any(s.name == "exec" for s in cand.task.reference.steps):
            out.append(cand)
        if len(out) == n:
            break
    return out


def test_a_shared_replay_sandbox_gives_what_fresh_sandboxes_give(bwrap_backend):
    cands = _command_candidates(6)
    assert len(cands) == 6
    grader = start_grader(bwrap_backend)
    replay = start_replay_sandbox(bwrap_backend)
    try:
        shared = validate_batch(cands, bwrap_backend, grader, replay=replay)
        # what a command left outside the workspace is gone, as in a fresh sandbox
        planted = replay.exec(["sh", "-c", "echo x > /tmp/left && echo y > /root/.hidden && mkdir /dev/shm/d && "
                                           "echo z > /workspace/new.txt && (sleep 300 &) && ls -A /tmp /root"])
        assert planted.exit_code == 0 and planted.stdout.split() == ["/root:", ".hidden", "/tmp:", "left"]
        from clawgym.synth.validate import _reset_replay_sandbox

        _reset_replay_sandbox(replay)
        left = replay.exec(["sh", "-c", "ls -A /tmp /root /home /run /var/tmp /dev/shm; ls -A /workspace; "
                                        "ps -eo comm | grep -c sleep"])
        assert left.stdout.split() == ["/dev/shm:", "/home:", "/root:", "/run:", "/tmp:", "/var/tmp:", "0"], left.stdout
        own = validate_batch(cands, bwrap_backend, grader)
    finally:
        grader.stop()
        replay.stop()
    for a, b in zip(shared, own, strict=True):
        assert a.ok and b.ok, (a.reason, a.detail, b.reason, b.detail)
        for x, y in ((a.oracle, b.oracle), (a.noop, b.noop), (a.partial, b.partial)):
            assert (x.checks, x.score) == (y.checks, y.score)


def test_grade_sources_stay_self_contained_with_the_fork_helpers(tmp_path):
    """A task using the script check embeds the helpers it needs, and runs on the host too."""
    from clawgym.checks import library_subset

    src = library_subset({"sys_script_table", "pytest_passes", "sys_py_cases"})
    for name in ("_run_forked", "_forkable", "_run_command"):
        assert f"def {name}(" in src
    ns: dict = {}
    exec(compile(src, "grade.py", "exec"), ns)  # our own library source, run on the host in this test
    (tmp_path / "s.py").write_text(textwrap.dedent("""\
        import sys
        open(sys.argv[1], "w").write("name,n\\nx,1\\n")
    """))
    assert ns["sys_script_table"](tmp_path, ["python3", "s.py", "{out}"], ["name", "n"], [["x", "1"]]) == 1.0


ODD_MAILS = [
    b"From: =?utf-8?q?J=C3=BCrgen?= <j@x.de>\nTo: a@b.c,\n  \"Smith, Bob\" <bob@x.org>\nSubject: =?utf-8?b?w6TDtsO8?= caf\xc3\xa9\n"
    b"Content-Type: multipart/alternative; boundary=XX\n\n--XX\nContent-Type: text/html; charset=utf-8\n\n<p>hi</p>\n"
    b"--XX\nContent-Type: text/plain; charset=\"latin-1\"\nContent-Transfer-Encoding: quoted-printable\n\nsch=F6n\n--XX--\n",
    b"Subject: x\nContent-Type: text/plain; charset=bogus\n\nbody\n",
    b"garbage without headers",
    b"",
    b"To: a@b.c\nContent-Transfer-Encoding: base64\n\naGVsbG8gd29ybGQ=\n",
    b"To: a@b.c\nContent-Disposition: attachment; filename=x.txt\n\nattached\n",
    b"From: Zo\xc3\xab <z@x.org>\nTo: b@y.org\nCc: c@y.org\nSubject: \xe2\x82\xac 12\n\n\xe2\x82\xac 12 total\n",
    b"From: a@x.org\r\nTo: b@y.org\r\nSubject: Totals\r\nContent-Type: text/plain; charset=utf-8\r\n"
    b"Content-Transfer-Encoding: 8bit\r\n\r\nTotal: 1,234.50\r\n",
]


def test_the_parse_once_policy_reads_mails_as_the_default_policy():
    import email
    from email import policy

    for raw in ODD_MAILS * 2:  # twice: the second time every header comes from the memo
        want = email.message_from_bytes(raw, policy=policy.default)
        got = email.message_from_bytes(raw, policy=checklib_docs._docs_eml_policy())
        for h in ("from", "to", "cc", "subject", "content-type", "content-transfer-encoding"):
            assert str(got.get(h, "")) == str(want.get(h, "")), (raw, h)
        assert got.is_multipart() == want.is_multipart()
        bodies = []
        for m in (want, got):
            part = m.get_body(preferencelist=("plain", "html"))
            try:
                bodies.append(None if part is None else part.get_content())
            except LookupError:
                bodies.append("LookupError")
        assert bodies[0] == bodies[1], raw
