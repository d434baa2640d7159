"""ClawGym-Bench, ClawGym's published evaluation set, as a suite: 200 task folders (`data_entry.json`,
`input_files/`, `reward/reward.sh`, `reward/check.py`; ClawGym-Agents `RL/data/clawgym_eval`, on the Hugging Face
Hub as the dataset `RUC-AIBOX/ClawGym-Bench`).

Where the folders come from, first found wins:

1. `--data PATH` (`load_suite(..., data=PATH)`);
2. `$CLAWGYM_BENCH_DATA`;
3. the Hub, with `huggingface_hub.snapshot_download` (repo type `dataset`): cached in the Hugging Face cache
   (`HF_HOME` / `HF_HUB_CACHE` move it), offline with `HF_HUB_OFFLINE=1` (the cached snapshot, if any). When the
   Hub cannot be reached and nothing is cached, one line says so and names `--data` and the variable.

PATH may be the folder of task folders, one level above it (a ClawGym-Agents checkout's `RL/data`, a snapshot
holding `clawgym_eval/`), or up to three levels above.

The tasks are imported with the ClawGym folder importer (:func:`clawgym.importers.import_clawgym`) and annotated
here, in `metadata`:

* `requires_network` / `network_reason`: the task cannot be done as asked without the network (the sandboxes
  have none). See :func:`network_reason` for the rule;
* `checker_programs`: the programs the checker runs (`bash` and `python3` for every `reward.sh`, and the first
  word of each literal `subprocess` command line in the checker's Python files, `sys.executable` read as
  `python3`): the sandbox image must have them;
* `checker_imports`: the modules outside Python's standard library that the checker's Python files import.
"""

from __future__ import annotations

import ast
import os
import re
import sys
from pathlib import Path
from typing import Any

from clawgym.core.errors import ClawgymError
from clawgym.core.records import Task

HUB_REPO = "RUC-AIBOX/ClawGym-Bench"
DATA_ENV = "CLAWGYM_BENCH_DATA"
DATA_ENTRY = "data_entry.json"
SEARCH_DEPTH = 3


class ClawgymBenchError(ClawgymError):
    pass


# ------------------------------------------------------------------------------------------ where from


def _is_task_root(path: Path) -> bool:
    """A folder of task folders (subfolders holding data_entry.json), or one task folder."""
    if (path / DATA_ENTRY).is_file():
        return True
    try:
        return any((p / DATA_ENTRY).is_file() for p in path.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:
        return False


def find_task_root(path: Path) -> Path | None:
    """`path` when it holds ClawGym task folders, else the first folder under it (breadth first, sorted by
    name, at most SEARCH_DEPTH levels down, hidden folders skipped) that does; None when there is none."""
    level = [path]
    for _ in range(SEARCH_DEPTH + 1):
        nxt: list[Path] = []
        for d in level:
            if _is_task_root(d):
                return d
            try:
                nxt += sorted(p for p in d.iterdir() if p.is_dir() and not p.is_symlink() and not p.name.startswith("."))
            except OSError:
                continue
        level = nxt
    return None


def _hub_hint() -> str:
    return f"give the folder with --data PATH or ${DATA_ENV} (ClawGym-Agents' RL/data/clawgym_eval)"


def hub_snapshot(repo_id: str = HUB_REPO, revision: str | None = None) -> Path:
    """The local folder of the dataset `repo_id` from the Hugging Face Hub (downloaded or taken from the cache by
    `snapshot_download`). Any failure is one ClawgymBenchError line naming the dataset, --data and the variable."""
    from clawgym.core.hub import HubError, snapshot_dataset

    try:
        return snapshot_dataset(repo_id, revision)
    except HubError as exc:
        raise ClawgymBenchError(f"clawgym-bench: {exc}; {_hub_hint()}") from None


def locate(data: Path | str | None = None) -> tuple[Path, str, list[str]]:
    """The folder of ClawGym-Bench task folders, a description of where it came from (recorded as the suite's
    source), and notes. `data` (--data) first, then $CLAWGYM_BENCH_DATA, then the Hub."""
    notes: list[str] = []
    given, how = (data, "--data") if data not in (None, "") else (os.environ.get(DATA_ENV) or None, f"${DATA_ENV}")
    if given is not None:
        path = Path(given).expanduser()
        if not path.is_dir():
            raise ClawgymBenchError(f"clawgym-bench: {how} {path}: not a directory (want ClawGym-Bench's task folders)")
        root = find_task_root(path)
        if root is None:
            raise ClawgymBenchError(f"clawgym-bench: {how} {path}: no ClawGym task folders (folders holding "
                                    f"{DATA_ENTRY}) in it or up to {SEARCH_DEPTH} levels below")
        return root, str(root), notes
    snap = hub_snapshot()
    root = find_task_root(snap)
    if root is None:
        raise ClawgymBenchError(f"clawgym-bench: the Hub snapshot of {HUB_REPO} at {snap} holds no ClawGym task "
                                f"folders ({DATA_ENTRY}); {_hub_hint()}")
    revision = snap.name if snap.parent.name == "snapshots" else "?"
    notes.append(f"from the Hugging Face Hub: {HUB_REPO} at revision {revision} ({root})")
    return root, f"hf://datasets/{HUB_REPO}@{revision}/{root.relative_to(snap).as_posix()}".rstrip("/."), notes


# --------------------------------------------------------------------------------- what a task needs


# A request needs the network when one of its clauses (split at line ends and at . ; ! ? before a space) asks for it and no
# negation ("no", "not", "don't", "never", "without") comes before the asking words in that clause:
# - "Internet" with a word of demand in the clause (required, essential, mandatory, step, source, research,
#   retrieval, requirement, install, download, fetch): "Internet step (essential)", "use Internet to install",
#   "Internet retrieval is mandatory"; "Do not use the Internet", "no Internet access is required" and "the
#   town's internet café" do not count;
# - "search engine": "use a search engine to locate official pages";
# - downloading from an official source: "Download the official IANA registry", "Download the Iris data file from
#   the official UCI repository" ("do not download large files" does not count).
_CLAUSE = re.compile(r"[.;!?](?=\s|$)|\n")
_NEG = re.compile(r"\b(?:no|not|don['’]t|never|without)\b", re.I)
_DEMAND = r"(?:required|requirements?|essential|mandatory|step|source|research|retrieval|install\w*|download\w*|fetch\w*)"
_ASKS = [
    re.compile(rf"\binternet\b(?=.*\b{_DEMAND}\b)|\b{_DEMAND}\b(?=.*\binternet\b)", re.I),
    re.compile(r"\bsearch engine\b", re.I),
    re.compile(r"\bdownload(?:ed)?\b(?=[^\n]{0,60}\bofficial\b)", re.I),
]
# A checker uses the network when its Python imports a network client or calls urlopen, runs curl or wget
# (subprocess), or its shell files run curl or wget.
_NET_MODULES = {"requests", "httpx", "aiohttp", "urllib3", "socket", "ftplib", "smtplib", "http.client",
                "urllib.request", "websocket", "websockets"}
_SHELL_NET = re.compile(r"(?:^|[|;&(`]\s*|\$\(\s*)(?:curl|wget)\b", re.M)


def _request_reason(text: str) -> str | None:
    for clause in _CLAUSE.split(text):
        for pat in _ASKS:
            m = pat.search(clause)
            if m and not _NEG.search(clause[:m.start()]):
                return "the request asks for it: " + " ".join(clause.split())[:160]
    return None


def _py_calls_and_imports(source: str) -> tuple[list[str], set[str]]:
    """(first words of the literal subprocess/os command lines, imported module names) of one Python file."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return [], set()
    programs: list[str] = []
    imports: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imports.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            imports.add(node.module)
            imports.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            owner = node.func.value.id if isinstance(node.func.value, ast.Name) else None
            if (owner, node.func.attr) not in {("subprocess", n) for n in ("run", "call", "check_call", "check_output",
                                                                         "Popen")} | {("os", "system")}:
                continue
            arg = node.args[0]
            first: ast.AST | None = arg.elts[0] if isinstance(arg, (ast.List, ast.Tuple)) and arg.elts else arg
            if isinstance(first, ast.Constant) and isinstance(first.value, str) and first.value.split():
                programs.append(first.value.split()[0])
            elif isinstance(first, ast.Attribute) and ast.unparse(first) == "sys.executable":
                programs.append("python3")
        elif isinstance(node, ast.Name) and node.id == "urlopen":
            imports.add("urllib.request")
    return programs, imports


def _code_files(task: Task) -> list[tuple[str, str]]:
    code = task.verifier.code
    return [(f.path, f.content) for f in (code.files if code else []) if f.content is not None]


def checker_needs(task: Task) -> dict[str, Any]:
    """What the task's checker runs and imports, and whether it uses the network (None when it does not)."""
    programs: set[str] = set()
    modules: set[str] = set()
    net: str | None = None
    code = task.verifier.code
    if code is not None and code.kind == "shell":
        programs.update(w for w in (code.entry or "").split()[:1])
        programs.update(w for w in (code.subscores_entry or "").split()[:1])
    for path, text in _code_files(task):
        if path.endswith(".py"):
            progs, imports = _py_calls_and_imports(text)
            programs.update(progs)
            modules.update(imports)
            used = sorted(m for m in imports if m in _NET_MODULES)
            if progs and {"curl", "wget"} & set(progs):
                used.append("curl/wget")
            if used and net is None:
                net = f"its checker {path} uses the network ({', '.join(used)})"
        elif path.endswith(".sh"):
            for line in text.splitlines():
                words = line.split()
                if words and words[0] in ("python3", "python", "bash", "sh", "node", "ruby", "perl"):
                    programs.add(words[0])
            if _SHELL_NET.search(text) and net is None:
                net = f"its checker {path} runs curl or wget"
    outside = sorted({m.split(".")[0] for m in modules} - set(sys.stdlib_module_names))
    return {"programs": sorted(programs), "imports": outside, "network": net}


def network_reason(task: Task) -> str | None:
    """Why the task needs the network, or None: its checker uses it, or its request asks for it (the rule is in
    the comments above)."""
    return checker_needs(task)["network"] or _request_reason(task.instruction)


def annotate(task: Task) -> Task:
    """The task with `requires_network`, `network_reason`, `checker_programs` and `checker_imports` in metadata."""
    needs = checker_needs(task)
    reason = needs["network"] or _request_reason(task.instruction)
    meta = {**task.metadata, "benchmark": "ClawGym-Bench", "requires_network": reason is not None,
            "checker_programs": needs["programs"], "checker_imports": needs["imports"]}
    if reason is not None:
        meta["network_reason"] = reason
    return task.model_copy(update={"metadata": meta})


def load_clawgym_bench(data: Path | str | None = None) -> tuple[list[Task], str, list[str]]:
    """ClawGym-Bench's tasks (annotated), where they came from, and notes (import failures, network tasks)."""
    from clawgym.importers import import_clawgym

    root, source, notes = locate(data)
    res = import_clawgym(root)
    tasks = [annotate(t) for t in res.tasks]
    notes += [f"not imported: {f}" for f in res.failures]
    if not tasks:
        raise ClawgymBenchError(f"clawgym-bench: no task imported from {root}"
                                + (f" (first failure: {res.failures[0]})" if res.failures else ""))
    return tasks, source, notes


def suite_network_note(tasks: list[Task]) -> str | None:
    """One line naming the tasks that need the network, or None."""
    ids = [t.id for t in tasks if t.metadata.get("requires_network")]
    if not ids:
        return None
    return (f"{len(ids)} of {len(tasks)} tasks need the network (metadata requires_network), which the sandboxes do "
            f"not give: {', '.join(ids)}")
