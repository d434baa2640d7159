"""Skills: SKILL.md parsing and import (real OpenClaw / ClawHub shapes, broken files), the shipped catalog, rule
and LLM annotation (against the scripted model server), and skill-grounded synthesis validated in bwrap."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from clawgym.core.jsonl import read_records
from clawgym.core.records import Task
from clawgym.core.taxonomy import load_taxonomy
from clawgym.llm import LLMClient
from clawgym.skills import (
    SkillError,
    annotate_catalog,
    import_skills,
    load_catalog,
    parse_skill_md,
    rule_annotations,
    with_annotations,
)
from clawgym.skills.catalog import REPO_SKILLS_DIR
from clawgym.synth.skill_route import SkillRouteConfig, eligible, make_skill_candidate, synthesize_skill_tasks
from clawgym.synth.validate import validate_candidate, validate_candidate_episodes
from scripted_llm import Fault, ScriptedLLM

# ------------------------------------------------------------------------------------------- fixture skills

# OpenClaw's bundled skills write `metadata` as multi-line JSON5-ish YAML (trailing commas included)
GITHUB = """---
name: github
description: "GitHub operations via `gh` CLI: issues, PRs, CI runs, code review. Use when the user asks about a repo."
metadata:
  {
    "openclaw":
      {
        "emoji": "🐙",
        "requires": { "bins": ["gh"] },
        "install":
          [
            { "id": "brew", "kind": "brew", "formula": "gh", "bins": ["gh"], "label": "Install GitHub CLI (brew)" },
          ],
      },
  }
---

# GitHub Skill

Use the `gh` CLI. Check `gh auth status` first; every command needs a logged-in account.

- `gh pr list --repo owner/repo` lists open pull requests.
- `gh run list` shows recent CI runs; `gh run view <id> --log-failed` shows what failed.
- Review a pull request's commits and changed files before commenting.
"""

# a ClawHub download: nested owner/slug folders, extra keys, a single-line JSON metadata string, resources,
# and the CLI's own .clawhub/ folder
TODOIST = """---
name: todoist-tasks
description: Manage Todoist tasks - list, add, complete and reschedule to-dos with due dates - through the Todoist REST API.
version: 1.2.0
homepage: https://example.org/todoist-tasks
user-invocable: true
tags: [productivity, tasks]
metadata: {"openclaw":{"requires":{"env":["TODOIST_API_KEY"],"bins":["curl"]},"primaryEnv":"TODOIST_API_KEY"}}
---

# Todoist tasks

Requires an API key in `TODOIST_API_KEY`.

```bash
curl -s -H "Authorization: Bearer $TODOIST_API_KEY" https://api.todoist.com/rest/v2/tasks
```

Keep the task list tidy: one task per action item, a due date on each, close tasks that are done.
"""

# no `name` (the folder's name is used), lowercase skill.md, Windows line ends
LOGS = ("---\r\ndescription: Summarise application log files - count errors per hour, find the first failure and "
        "write a short incident note with timestamps.\r\n---\r\n\r\n# Log summary\r\n\r\nParse each log line's "
        "timestamp and level; count ERROR lines per hour; quote the first error with its file and line.\r\n")

GERMAN = """---
name: protokoll-schreiben
description: Aus Besprechungsnotizen ein Protokoll mit Beschlüssen und Aufgaben erstellen und die Aufgaben mit Fälligkeit auflisten.
---

# Protokoll schreiben

Die Notizen werden gelesen und die Beschlüsse werden von den Diskussionen getrennt. Jede Aufgabe bekommt eine
verantwortliche Person und ein Datum. Die Zusammenfassung ist kurz und enthält nicht mehr als fünf Punkte.
"""

BROKEN = {
    "broken/no-front-matter/SKILL.md": ("# Just a heading\n\nNo front matter here.\n", 1, "front matter"),
    "broken/unterminated/SKILL.md": ("---\nname: unterminated\ndescription: never closed\n", 1, "front matter"),
    "broken/bad-yaml/SKILL.md": ("---\nname: bad-yaml\ndescription: fine\nmetadata: {\"openclaw\": [1, 2}\n---\nbody\n", 4,
                          "front matter"),
    "broken/no-description/SKILL.md": ("---\nname: no-description\nversion: 1.0.0\n---\nbody\n", 1, "description"),
    "broken/bad-metadata/SKILL.md": ("---\nname: bad-metadata\ndescription: d\nmetadata: '{\"openclaw\": nope}'\n---\nb\n", 4,
                              "metadata"),
    "broken/bad-annotation/SKILL.md": (
        "---\nname: bad-annotation\ndescription: d\nmetadata: {\"clawgym\":{\"operations\":[\"fly_to_moon\"],"
        "\"language\":\"en\",\"summary\":\"s\",\"auth_required\":false,\"has_risk\":false,\"required_env\":[],"
        "\"text_only_compatible\":true}}\n---\nb\n", 4, "metadata.clawgym.operations[0]"),
    "zz-copies/github/SKILL.md": (GITHUB, 2, "name"),  # a second skill named github
}


def write(root: Path, rel: str, text: str, newline: str | None = None) -> Path:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8", newline=newline if newline is not None else "\n")
    return p


@pytest.fixture
def user_skills(tmp_path: Path) -> Path:
    """A folder laid out like a user's OpenClaw skills plus a ClawHub download, with some broken skills."""
    root = tmp_path / "downloads"
    write(root, "openclaw/github/SKILL.md", GITHUB)
    write(root, "clawhub/acme/todoist-tasks/SKILL.md", TODOIST)
    write(root, "clawhub/acme/todoist-tasks/references/api.md", "# API notes\n\nGET /tasks lists tasks.\n")
    write(root, "clawhub/acme/todoist-tasks/scripts/list.py", "print('tasks')\n")
    write(root, "clawhub/acme/todoist-tasks/.clawhub/origin.json", '{"registry": "https://clawhub.ai"}\n')
    write(root, "log-summary/skill.md", LOGS, newline="")
    write(root, "de/protokoll-schreiben/SKILL.md", GERMAN)
    for rel, (text, _, _) in BROKEN.items():
        write(root, rel, text)
    return root


@pytest.fixture(scope="module")
def tax():
    return load_taxonomy()


# ------------------------------------------------------------------------------------------- parsing and import


def test_parse_real_shapes(user_skills: Path) -> None:
    gh = parse_skill_md(user_skills / "openclaw/github/SKILL.md")
    assert gh.name == "github" and gh.description.startswith("GitHub operations via `gh` CLI")
    assert gh.openclaw["requires"] == {"bins": ["gh"]} and gh.declared_bins == ["gh"] and gh.annotations is None
    td = parse_skill_md(user_skills / "clawhub/acme/todoist-tasks/SKILL.md")
    assert td.frontmatter["version"] == "1.2.0" and td.frontmatter["user-invocable"] is True
    assert td.declared_env == ["TODOIST_API_KEY"]
    logs = parse_skill_md(user_skills / "log-summary/skill.md")
    assert logs.name == "log-summary" and logs.body.startswith("\r\n# Log summary")


@pytest.mark.parametrize("rel", sorted(BROKEN))
def test_broken_skill_names_file_line_and_field(user_skills: Path, rel: str, tax) -> None:
    _, line, field = BROKEN[rel]
    path = user_skills / rel
    errors = {str(e).split(":")[0]: str(e) for e in load_catalog(user_skills, taxonomy=tax, strict=False).errors}
    assert len(errors) == len(BROKEN)
    msg = errors[str(path)]
    assert msg.startswith(f"{path}:{line}: {field}: ") and "\n" not in msg, msg
    if not rel.startswith("zz-"):
        with pytest.raises(SkillError, match=re.escape(f"{path}:{line}: {field}: ")):
            load_catalog(path.parent, taxonomy=tax)


def test_import_copies_annotates_and_reports(user_skills: Path, tmp_path: Path, tax) -> None:
    dest = tmp_path / "catalog"
    res = import_skills(user_skills, dest, taxonomy=tax)
    assert sorted(s.name for s in res.imported) == ["github", "log-summary", "protokoll-schreiben", "todoist-tasks"]
    assert len(res.errors) == len(BROKEN)
    assert sorted(str(e).split(":")[0] for e in res.errors) == sorted(str(user_skills / r) for r in BROKEN)
    # whole skill folders, without the ClawHub CLI's own state
    td = dest / "todoist-tasks"
    assert (td / "references/api.md").read_text() == "# API notes\n\nGET /tasks lists tasks.\n"
    assert (td / "scripts/list.py").exists() and not (td / ".clawhub").exists()
    assert (dest / "log-summary/SKILL.md").exists()  # skill.md normalised to SKILL.md
    # the body and every other front-matter line are byte-identical; metadata is one JSON line OpenClaw reads
    for name, original in (("github", GITHUB), ("todoist-tasks", TODOIST)):
        new = (dest / name / "SKILL.md").read_text(encoding="utf-8")
        assert new.split("\n---\n", 1)[1] == original.split("\n---\n", 1)[1]
        front = new.split("\n---\n", 1)[0].splitlines()[1:]
        assert all(re.match(r"^[a-z][a-z0-9_-]*: \S", ln) for ln in front), front
        meta = json.loads(next(ln for ln in front if ln.startswith("metadata: "))[len("metadata: "):])
        assert meta["openclaw"] == parse_skill_md(user_skills.glob(f"**/{name}/SKILL.md").__next__()).openclaw
        assert meta["clawgym"]["annotated_by"] == "rules"
        kept = [ln for ln in original.split("\n---\n", 1)[0].splitlines()[1:] if re.match(r"^[a-z-]+: ", ln)
                and not ln.startswith("metadata:")]
        assert all(ln in front for ln in kept)
    crlf = (dest / "log-summary/SKILL.md").read_bytes()
    assert crlf.count(b"\r\n") == LOGS.count("\r\n") + 1 and b"\n" not in crlf.replace(b"\r\n", b"")
    # rules got the obvious facts right
    cat = load_catalog(dest, taxonomy=tax)
    assert cat.get("todoist-tasks").annotations.auth_required is True
    assert cat.get("todoist-tasks").annotations.required_env == ["TODOIST_API_KEY"]
    assert "track_tasks" in cat.get("todoist-tasks").annotations.operations
    assert cat.get("github").annotations.auth_required is True
    assert "analyze_logs" in cat.get("log-summary").annotations.operations
    assert cat.get("protokoll-schreiben").annotations.language == "de"
    # importing again skips what is there; --overwrite replaces
    again = import_skills(user_skills, dest, taxonomy=tax)
    assert not again.imported and set(again.skipped) == {s.name for s in res.imported}
    write(user_skills, "log-summary/skill.md", LOGS.replace("short incident note", "brief incident note"), newline="")
    over = import_skills(user_skills, dest, taxonomy=tax, overwrite=True)
    assert len(over.imported) == 4 and "brief incident note" in (dest / "log-summary/SKILL.md").read_text()
    assert not list(dest.glob(".*"))  # no temporary folders left behind


def test_with_annotations_round_trip(user_skills: Path, tax) -> None:
    skill = parse_skill_md(user_skills / "clawhub/acme/todoist-tasks/SKILL.md")
    ann = rule_annotations(skill, tax)
    text = with_annotations(skill, ann)
    p = user_skills / "clawhub/acme/todoist-tasks/SKILL.md"
    p.write_text(text, encoding="utf-8")
    back = parse_skill_md(p)
    assert back.annotations == ann and back.openclaw == skill.openclaw and back.body == skill.body
    assert with_annotations(back, ann) == text  # idempotent


# ------------------------------------------------------------------------------------------- the shipped catalog


def test_shipped_catalog(tax) -> None:
    cat = load_catalog(taxonomy=tax)
    assert len(cat) >= 60 and not cat.errors
    for s in cat:
        assert s.folder.name == s.name and re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", s.name)
        assert s.annotations is not None and s.annotations.annotated_by == "catalog", s.name
        # OpenClaw's embedded parser: single-line keys, metadata one line of JSON
        front = s.text.split("\n---\n", 1)[0].splitlines()[1:]
        assert all(re.match(r"^[a-z][a-z0-9_-]*: \S", ln) for ln in front), s.name
        assert len([ln for ln in s.body.splitlines() if ln.strip()]) >= 15, f"{s.name}: body too thin"
    ops = Counter(o for s in cat if eligible(s) for o in s.annotations.operations)
    assert set(ops) == {o.id for o in tax.operations}  # all 26 operations can ground a task
    assert {s.annotations.language for s in cat} >= {"en", "de", "es"}
    assert any(s.annotations.auth_required for s in cat) and any(not s.annotations.text_only_compatible for s in cat)


def test_rules_agree_with_the_hand_annotations(tax) -> None:
    """The rules were written against this catalog, so this guards regressions rather than measuring
    accuracy on unseen skills (the imported fixtures above are the unseen ones)."""
    cat = load_catalog(taxonomy=tax)
    n = len(cat)
    agree = Counter()
    for s in cat:
        r, a = rule_annotations(s, tax), s.annotations
        for f in ("auth_required", "has_risk", "text_only_compatible", "language"):
            agree[f] += getattr(r, f) == getattr(a, f)
        agree["top_op"] += r.operations[0] in a.operations
        assert r.annotated_by == "rules" and 1 <= len(r.operations) <= 4
    for f in ("auth_required", "has_risk", "text_only_compatible", "language"):
        assert agree[f] / n >= 0.95, (f, agree[f], n)
    assert agree["top_op"] / n >= 0.9, agree


# ------------------------------------------------------------------------------------------- LLM annotation


def _answer(ops: list[str], **over) -> str:
    ans = {"operations": ops, "language": "en", "summary": "Does the job.", "auth_required": False,
           "has_risk": False, "required_env": [], "text_only_compatible": True, **over}
    return json.dumps(ans)


def test_llm_annotation_validated_with_rule_fallback(user_skills: Path, tmp_path: Path, tax) -> None:
    dest = tmp_path / "catalog"
    import_skills(user_skills, dest, taxonomy=tax, annotate=False)
    answers = {
        "github": "```json\n" + _answer(["review_repository"], auth_required=True, required_env=["GH_TOKEN"]) + "\n```",
        "todoist-tasks": "Sure! The skill manages tasks; it needs an API key.",  # no JSON at all
        "log-summary": _answer(["read_tea_leaves"]),  # not an operation of the taxonomy
        "protokoll-schreiben": _answer(["summarize_documents", "track_tasks"], language="german"),  # bad code
    }

    def responder(body: dict) -> str | None:
        user = body["messages"][-1]["content"]
        name = re.search(r"Annotate the skill `([^`]+)`", user).group(1)
        assert "track_tasks: " in user and re.search(r"SKILL.md:\n<<<\n---\r?\n", user)  # taxonomy, the file
        return answers[name]

    with ScriptedLLM(responder=responder) as server:
        client = LLMClient("scripted-model", server.base_url, max_retries=0)
        report = annotate_catalog(dest, taxonomy=tax, client=client, jobs=2)
        assert len(server.requests) == 4
    gh = report.annotated["github"]
    assert gh.annotated_by == "llm:scripted-model" and gh.note is None and gh.required_env == ["GH_TOKEN"]
    assert report.fallbacks["todoist-tasks"].startswith("llm:scripted-model failed: answer has no JSON object")
    assert "answer invalid: operations.0" in report.fallbacks["log-summary"]
    assert "answer invalid: language" in report.fallbacks["protokoll-schreiben"]
    cat = load_catalog(dest, taxonomy=tax)  # written back, and valid
    assert cat.get("github").annotations == gh
    td = cat.get("todoist-tasks").annotations
    assert td.annotated_by == "rules" and td.auth_required and "no JSON object" in td.note
    # a second run keeps them; a dead endpoint falls back to rules with the reason
    assert set(annotate_catalog(dest, taxonomy=tax, client=client).kept) == set(answers)
    with ScriptedLLM(faults={"": Fault(status=503)}, responder=lambda b: None) as dead:
        dead_client = LLMClient("scripted-model", dead.base_url, max_retries=0)
        again = annotate_catalog(dest, taxonomy=tax, client=dead_client, force=True, names=["github"], write=False)
    assert "call failed" in again.fallbacks["github"]


# ------------------------------------------------------------------------------------------- synthesis


def test_skill_tasks_validate_in_bwrap(bwrap_backend, tax) -> None:
    cfg = SkillRouteConfig()
    cat = load_catalog(taxonomy=tax)
    seen_ops: set[str] = set()
    for index in range(0, 61, 6):
        cand = make_skill_candidate(cfg, 11, index, 0)
        t = cand.task
        info = t.metadata["skills"]
        assert t.id == f"skill-s11-{index:06d}" and t.source == "synth-skill"
        assert t.skills == [info["primary"], *info["supporting"]] and len(info["by_step"]) == len(t.operations)
        # the skills are in the workspace where OpenClaw finds them, byte for byte
        files = {f.path: f for f in t.workspace.files}
        for name, path in zip(t.skills, info["paths"], strict=True):
            assert path == f"skills/{name}/SKILL.md" and files[path].content == cat.get(name).text
        assert f"skills/{info['primary']}" in t.instruction
        # the reference reads each skill's SKILL.md before the first step it serves
        reads = [s.arguments["path"] for s in t.reference.steps if s.name == "read"
                 and s.arguments["path"].startswith("skills/")]
        assert reads == [f"skills/{n}/SKILL.md" for n in dict.fromkeys(info["by_step"])]
        assert t.reference.steps[0].arguments["path"] == f"skills/{info['by_step'][0]}/SKILL.md"
        assert set(t.operations) <= {o for n in t.skills for o in cat.get(n).annotations.operations}
        seen_ops |= set(t.operations)
        v = validate_candidate(cand, bwrap_backend)
        assert v.ok, (t.id, v.reason, v.detail)
        assert v.oracle.score == 1.0 and all(x == 0 for x in v.noop.checks.values()) and 0 < v.partial.score < 1
    assert len(seen_ops) >= 8
    # the fast validation agrees with three real rollout episodes
    slow = validate_candidate_episodes(make_skill_candidate(cfg, 11, 0, 0), bwrap_backend)
    assert slow.ok and slow.oracle.score == 1.0 and slow.noop.score == 0.0


def test_determinism_and_resume(tmp_path: Path, bwrap_backend) -> None:
    a, b, part = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "part.jsonl"
    synthesize_skill_tasks(6, 3, a, jobs=1)
    synthesize_skill_tasks(6, 3, b, jobs=2)
    assert a.read_bytes() == b.read_bytes()
    tasks = read_records(a, Task)
    assert [t.id for t in tasks] == [f"skill-s3-{i:06d}" for i in range(6)]
    assert len({t.instruction for t in tasks}) == 6
    synthesize_skill_tasks(3, 3, part, jobs=1)
    report = synthesize_skill_tasks(6, 3, part, jobs=2)
    assert report.resumed == 3 and report.written == 3 and part.read_bytes() == a.read_bytes()
    counts = json.loads((tmp_path / "part.jsonl.report.json").read_text())
    assert sum(counts["by_primary_skill"].values()) == 6
    with pytest.raises(Exception, match="another seed"):
        synthesize_skill_tasks(6, 4, part)


def test_imported_catalog_grounds_tasks(user_skills: Path, tmp_path: Path, bwrap_backend, tax) -> None:
    """A user's own skills, imported and annotated by rules, ground validated tasks."""
    dest = tmp_path / "catalog"
    import_skills(user_skills, dest, taxonomy=tax)
    out = tmp_path / "t.jsonl"
    report = synthesize_skill_tasks(3, 0, out, skills_dir=dest, skills=["log-summary"])
    assert report.written == 3
    ops = set(load_catalog(dest).get("log-summary").annotations.operations)
    for t in read_records(out, Task):
        assert t.skills[0] == "log-summary" and ops & set(t.operations)
        assert any(f.path == "skills/log-summary/SKILL.md" for f in t.workspace.files)
        assert "github" not in t.skills and "todoist-tasks" not in t.skills  # need an account: not eligible
    with pytest.raises(Exception, match="'github' \\(not eligible\\)"):
        synthesize_skill_tasks(1, 0, tmp_path / "x.jsonl", skills_dir=dest, skills=["github"])


# ------------------------------------------------------------------------------------------- the CLI


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "clawgym", *args], capture_output=True, text=True, timeout=300)


def test_cli(user_skills: Path, tmp_path: Path, bwrap_backend) -> None:
    dest = tmp_path / "catalog"
    r = run_cli("skills", "import", str(user_skills), "--into", str(dest))
    assert r.returncode == 1 and "4 imported" in r.stdout, r.stdout + r.stderr
    errs = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert len(errs) == len(BROKEN) and any(f"{user_skills / 'broken/bad-yaml/SKILL.md'}:4: front matter" in e
                                            for e in errs)
    r = run_cli("skills", "list", "--catalog", str(dest), "--json")
    recs = [json.loads(ln) for ln in r.stdout.splitlines()]
    assert r.returncode == 0 and {x["name"] for x in recs} == {"github", "log-summary", "protokoll-schreiben",
                                                               "todoist-tasks"}
    assert {x["name"] for x in recs if x["synth_eligible"]} == {"log-summary", "protokoll-schreiben"}
    before = (dest / "github/SKILL.md").read_bytes()
    r = run_cli("skills", "annotate", "--catalog", str(dest), "--force", "--skill", "github", "--dry-run")
    assert r.returncode == 0 and "github: [rules]" in r.stdout and (dest / "github/SKILL.md").read_bytes() == before
    r = run_cli("skills", "annotate", "--catalog", str(dest), "--skill", "nope")
    assert r.returncode == 1 and "no skill named 'nope'" in r.stderr
    out = tmp_path / "tasks.jsonl"
    r = run_cli("synth", "skill", "-n", "2", "--seed", "5", "-o", str(out), "--catalog", str(dest), "-j", "1")
    assert r.returncode == 0, r.stderr
    assert [t.id for t in read_records(out, Task)] == ["skill-s5-000000", "skill-s5-000001"]
    r = run_cli("synth", "skill", "-n", "2", "-o", str(tmp_path / "no.jsonl"), "--skill", "no-such-skill")
    assert r.returncode == 1 and "no such skill" in r.stderr and not (tmp_path / "no.jsonl").exists()
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1


def test_repo_catalog_dir_is_the_default() -> None:
    assert REPO_SKILLS_DIR == Path(__file__).resolve().parents[1] / "skills"
