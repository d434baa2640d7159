"""Third-party check functions without editing clawgym: a distribution declares a check-library extension in the
entry point group `clawgym.checks`; its source is appended to the library copied into the grading sandbox, and
the library's sha256 covers it."""

from __future__ import annotations

import pytest

from clawgym.agent.transcript import TranscriptBuilder
from clawgym.checks import (
    UnknownCheckError,
    current_checklib,
    registered_checks,
    render_grade_source,
    validate_call,
)
from clawgym.checks.library import CHECKLIB_SOURCE, EXTENSIONS, library_source, program_checks
from clawgym.core.records import CodeCheck, Task, VerifierSpec
from clawgym.verify import verify_episode
from plugin_dist import install_dist

WORDS = '''"""Acme's check functions: standard library only, the library's helpers used directly."""

import re as _acme_re

try:  # on the host; in the grading sandbox these names come from the library above this source
    from clawgym.checks.checklib import _text, check
except ImportError:
    pass


def _acme_words(text):
    return _acme_re.findall(r"[A-Za-z']+", text)


@check
def acme_min_words(ws, path, n):
    """Partial credit up to `n` words in the file."""
    text = _text(ws, path)
    if text is None:
        return 0.0
    return min(1.0, len(_acme_words(text)) / n)


@check(runs_program=True)
def acme_wc(ws, path):
    import subprocess

    r = subprocess.run(["wc", "-w", path], cwd=str(ws), capture_output=True, text=True, timeout=30)
    return 1.0 if r.returncode == 0 and int(r.stdout.split()[0]) > 0 else 0.0
'''


@pytest.fixture
def extension(tmp_path, monkeypatch):
    """Install a distribution declaring `modules` as check-library extensions; forget them after the test (their
    @check also registered their functions in this process's copy of the library: those are forgotten too)."""
    from clawgym.checks import checklib

    names: list[str] = []
    monkeypatch.setattr(checklib, "REGISTRY", dict(checklib.REGISTRY))
    monkeypatch.setattr(checklib, "RUNS_PROGRAM", set(checklib.RUNS_PROGRAM))

    def _install(modules: dict[str, str]) -> None:
        eps = {f"ext-{i}": name for i, name in enumerate(modules)}
        names.extend(eps)
        install_dist(tmp_path / "site", monkeypatch, "acme-checks", modules, {"clawgym.checks": eps})

    yield _install
    for name in names:
        EXTENSIONS.remove(name)


def transcript() -> list[dict]:
    tb = TranscriptBuilder(cwd="/workspace")
    tb.user("write a note")
    tb.assistant("done")
    return tb.events


def words_task() -> Task:
    return Task.model_validate({
        "id": "w", "instruction": "write a note of four words to note.txt",
        "workspace": {"files": [{"path": "in.txt", "content": "in"}]},
        "verifier": {"code": {"kind": "checks", "checklib": current_checklib()[0].model_dump(), "checks": [
            {"name": "long_enough", "fn": "acme_min_words", "args": {"path": "note.txt", "n": 4}},
            {"name": "counted", "fn": "gated", "parts": [{"fn": "acme_wc", "args": {"path": "note.txt"}},
                                                         {"ref": "long_enough"}]}]}},
    })


def test_an_installed_extension_is_validated_and_graded_in_the_sandbox(extension, bwrap_backend):
    builtin = current_checklib()[0]
    extension({"acme_checks.words": WORDS})
    ref, source = current_checklib()
    assert source.startswith(CHECKLIB_SOURCE) and "def acme_min_words" in source
    assert ref.version == builtin.version and ref.sha256 != builtin.sha256  # the recorded sha256 covers it
    assert {"acme_min_words", "acme_wc"} <= registered_checks() and "acme_wc" in program_checks()
    task = words_task()
    for call in task.verifier.code.checks:
        validate_call(call)
    for prepare, want in (("echo 'one two three four five' > note.txt", {"long_enough": 1.0, "counted": 1.0}),
                          ("echo 'one two' > note.txt", {"long_enough": 0.5, "counted": 0.5}),
                          (None, {"long_enough": 0.0, "counted": 0.0})):
        for t in (task, task.model_copy(update={"verifier": VerifierSpec(
                code=CodeCheck(kind="python", source=render_grade_source(task)))})):
            with bwrap_backend.start(t.workspace) as sb:
                if prepare:
                    assert sb.exec(prepare).exit_code == 0
                v = verify_episode(t, sb, transcript(), "done")
            assert v.status == "scored" and v.checks == want, (t.verifier.code.kind, prepare, v.error, v.checks)
    assert v.checklib is None  # the python render carries its own copy


def test_without_the_extension_its_checks_are_unknown(extension):
    extension({"acme_checks.words": WORDS})
    task = words_task()
    EXTENSIONS.remove("ext-0")
    import sys

    sys.path.remove(next(p for p in sys.path if p.endswith("site")))
    assert "acme_min_words" not in registered_checks() and library_source() == CHECKLIB_SOURCE
    with pytest.raises(UnknownCheckError, match="no check function 'acme_min_words'"):
        validate_call(task.verifier.code.checks[0])


@pytest.mark.parametrize("redefined, why", [
    ("file_exists", "the built-in check function"),
    ("_text", "a name of the check library"),
])
def test_an_extension_redefining_a_library_name_is_refused(extension, redefined, why):
    extension({"acme_checks.bad": WORDS.replace("def acme_min_words", f"def {redefined}")})
    with pytest.raises(ValueError, match=f"extension 'ext-0' \\(acme_checks.bad\\) redefines '{redefined}', {why}"):
        current_checklib()


def test_an_extension_that_registers_nothing_is_refused(extension):
    extension({"acme_checks.empty": "def acme_helper(ws):\n    return 1.0\n"})
    with pytest.raises(ValueError, match="registers no check function"):
        current_checklib()
