"""The workspace stage: generators read back with real parsers, path safety, atomic builds, snapshots."""

from __future__ import annotations

import base64
import csv
import email
import json
import os
import shutil
import sqlite3
import subprocess
from email import policy
from pathlib import Path
from typing import Any

import openpyxl
import pytest
import yaml

from clawgym.core.records import Task, WorkspaceFile, WorkspaceSpec
from clawgym.workspace import (
    GENERATORS,
    WorkspaceError,
    build_workspaces,
    generate,
    materialize,
    snapshot,
    workspace_dirname,
    write_files,
)

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs the git command")


def gen_file(path: str, kind: str, **params: Any) -> WorkspaceFile:
    return WorkspaceFile(path=path, generate={"kind": kind, "params": params})


def make_task(task_id: str, files: list[WorkspaceFile], **ws: Any) -> Task:
    return Task(
        id=task_id,
        instruction="do it",
        workspace=WorkspaceSpec(files=files, **ws),
        verifier={"code": {"kind": "shell", "entry": "echo 1"}},
    )


def git_out(repo: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1")
    return subprocess.run(
        ["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True
    ).stdout


def unfold(raw: bytes) -> list[str]:
    text = raw.decode("utf-8")
    assert "\n" not in text.replace("\r\n", ""), "bare LF in ics"
    lines: list[str] = []
    for line in text.split("\r\n")[:-1]:
        if line.startswith(" "):
            lines[-1] += line[1:]
        else:
            lines.append(line)
    return lines


# --------------------------------------------------------------------------------------------- generators


def test_registry_lists_all_kinds() -> None:
    assert set(GENERATORS) == {"csv", "json", "yaml", "xlsx", "ics", "eml", "sqlite", "git"}


def test_unknown_kind_and_params_are_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown generator kind 'pdf'"):
        generate("pdf", {}, tmp_path / "x")
    with pytest.raises(ValueError, match="missing required param.*'rows'"):
        generate("csv", {"header": ["a"]}, tmp_path / "x.csv")
    with pytest.raises(ValueError, match="unknown param.*'row'"):
        generate("csv", {"rows": [], "row": []}, tmp_path / "x.csv")
    with pytest.raises(ValueError, match="'rows' must be a list"):
        generate("csv", {"rows": "a,b"}, tmp_path / "x.csv")


def test_csv(tmp_path: Path) -> None:
    dest = tmp_path / "data" / "people.csv"
    rows = [["Ann", 31, None], ["Bo, Jr.", "", "x\"y"], ["ragged"]]
    generate("csv", {"header": ["name", "age", "note"], "rows": rows}, dest)
    with dest.open(newline="", encoding="utf-8") as fh:
        got = list(csv.reader(fh))
    assert got == [["name", "age", "note"], ["Ann", "31", ""], ["Bo, Jr.", "", 'x"y'], ["ragged"]]

    generate("csv", {"rows": [["a", "b"]], "delimiter": ";"}, tmp_path / "semi.csv")
    assert (tmp_path / "semi.csv").read_text() == "a;b\n"
    with pytest.raises(ValueError, match="delimiter"):
        generate("csv", {"rows": [], "delimiter": ";;"}, tmp_path / "bad.csv")


def test_json_and_yaml(tmp_path: Path) -> None:
    data = {"zeta": 1, "alpha": ["ü", None, {"k": True}]}
    generate("json", {"data": data}, tmp_path / "a.json")
    text = (tmp_path / "a.json").read_text(encoding="utf-8")
    assert json.loads(text) == data and "ü" in text and '\n  "zeta"' in text
    generate("json", {"data": [1, 2], "indent": None}, tmp_path / "b.json")
    assert (tmp_path / "b.json").read_text() == "[1, 2]\n"

    generate("yaml", {"data": data}, tmp_path / "c.yaml")
    text = (tmp_path / "c.yaml").read_text(encoding="utf-8")
    assert yaml.safe_load(text) == data
    assert text.index("zeta") < text.index("alpha") and "ü" in text
    with pytest.raises(ValueError, match="missing required param.*'data'"):
        generate("yaml", {}, tmp_path / "d.yaml")


def test_xlsx_reads_back_and_is_deterministic(tmp_path: Path) -> None:
    params = {"sheets": {"Sales": [["region", "q1"], ["north", 10.5], ["south", None]], "Notes": [["hi"]]}}
    generate("xlsx", params, tmp_path / "a.xlsx")
    generate("xlsx", params, tmp_path / "b.xlsx")
    assert (tmp_path / "a.xlsx").read_bytes() == (tmp_path / "b.xlsx").read_bytes()
    wb = openpyxl.load_workbook(tmp_path / "a.xlsx")
    assert wb.sheetnames == ["Sales", "Notes"]
    assert [list(r) for r in wb["Sales"].iter_rows(values_only=True)] == [
        ["region", "q1"], ["north", 10.5], ["south", None]
    ]
    assert wb.properties.created.year == 2025

    generate("xlsx", {**params, "created": "2026-02-03T04:05:06Z"}, tmp_path / "c.xlsx")
    assert openpyxl.load_workbook(tmp_path / "c.xlsx").properties.modified.year == 2026
    with pytest.raises(ValueError, match="sheets"):
        generate("xlsx", {"sheets": {}}, tmp_path / "d.xlsx")


def test_ics(tmp_path: Path) -> None:
    long_desc = "Agenda; budget, hiring\\planning\nline two " + "é" * 60
    params = {
        "calendar_name": "Work",
        "events": [
            {
                "summary": "Standup, daily",
                "start": "2026-03-01T09:00:00",
                "end": "2026-03-01T09:15:00",
                "location": "Room 1",
                "description": long_desc,
                "attendees": ["ann@example.com", "Bo Smith <bo@example.com>"],
                "organizer": "Cy <cy@example.com>",
            },
            {"uid": "fixed-1", "summary": "Flight", "start": "2026-03-02T07:30:00Z", "end": "2026-03-02T10:00:00+01:00"},
            {"summary": "Holiday", "start": "2026-03-05", "end": "2026-03-06"},
        ],
    }
    dest = tmp_path / "cal.ics"
    generate("ics", params, dest)
    raw = dest.read_bytes()
    assert raw.endswith(b"END:VCALENDAR\r\n")
    for physical in raw.split(b"\r\n"):
        assert len(physical) <= 75
    assert any(p.startswith(b" ") for p in raw.split(b"\r\n")), "long description should have been folded"
    raw.decode("utf-8")  # folding never splits a multi-byte character

    lines = unfold(raw)
    assert lines[:2] == ["BEGIN:VCALENDAR", "VERSION:2.0"]
    assert "X-WR-CALNAME:Work" in lines
    assert lines.count("BEGIN:VEVENT") == lines.count("END:VEVENT") == 3
    assert "SUMMARY:Standup\\, daily" in lines
    assert "DTSTART:20260301T090000" in lines and "DTEND:20260301T091500" in lines
    assert "DTSTAMP:20260301T090000Z" in lines
    expected = "DESCRIPTION:Agenda\\; budget\\, hiring\\\\planning\\nline two " + "é" * 60
    assert expected in lines
    assert "ATTENDEE:mailto:ann@example.com" in lines
    assert "ATTENDEE;CN=Bo Smith:mailto:bo@example.com" in lines
    assert "ORGANIZER;CN=Cy:mailto:cy@example.com" in lines
    assert "UID:fixed-1" in lines
    assert "DTSTART:20260302T073000Z" in lines and "DTEND:20260302T090000Z" in lines
    assert "DTSTART;VALUE=DATE:20260305" in lines and "DTEND;VALUE=DATE:20260306" in lines
    uids = [line for line in lines if line.startswith("UID:")]
    assert len(set(uids)) == 3

    generate("ics", params, tmp_path / "again.ics")
    assert (tmp_path / "again.ics").read_bytes() == raw
    with pytest.raises(ValueError, match=r"events\[0\].*'start'"):
        generate("ics", {"events": [{"summary": "x"}]}, tmp_path / "bad.ics")
    with pytest.raises(ValueError, match="both be dates"):
        generate("ics", {"events": [{"summary": "x", "start": "2026-01-01", "end": "2026-01-01T10:00:00"}]},
                 tmp_path / "bad.ics")


def test_eml(tmp_path: Path) -> None:
    params = {
        "from": "Ann Lee <ann@corp.example>",
        "to": ["bo@example.com", "Cy <cy@example.com>"],
        "cc": "dee@example.com",
        "subject": "Q1 numbers — draft",
        "date": "2026-03-01T09:30:00",
        "body": "Hi,\nsee attached.\n",
        "html": "<p>Hi, see attached.</p>",
        "headers": {"X-Priority": "1"},
        "attachments": [
            {"filename": "numbers.csv", "content": "a,b\n1,2\n"},
            {"filename": "logo.png", "content_b64": base64.b64encode(b"\x89PNG\r\n\x1a\n").decode()},
        ],
    }
    dest = tmp_path / "mail" / "q1.eml"
    generate("eml", params, dest)
    raw = dest.read_bytes()
    msg = email.message_from_bytes(raw, policy=policy.default)
    assert msg["Subject"] == "Q1 numbers — draft"
    assert msg["From"].addresses[0].addr_spec == "ann@corp.example"
    assert [a.addr_spec for a in msg["To"].addresses] == ["bo@example.com", "cy@example.com"]
    assert msg["Cc"] == "dee@example.com"
    assert msg["Date"].datetime.isoformat() == "2026-03-01T09:30:00+00:00"
    assert msg["X-Priority"] == "1"
    assert msg["Message-ID"].endswith("@corp.example>")
    assert msg.get_body(("plain",)).get_content() == "Hi,\nsee attached.\n"
    assert "see attached" in msg.get_body(("html",)).get_content()
    atts = {a.get_filename(): a for a in msg.iter_attachments()}
    assert set(atts) == {"numbers.csv", "logo.png"}
    assert atts["numbers.csv"].get_content_type() == "text/csv"
    assert atts["numbers.csv"].get_content() == "a,b\n1,2\n"
    assert atts["logo.png"].get_content() == b"\x89PNG\r\n\x1a\n"

    generate("eml", params, tmp_path / "again.eml")
    assert (tmp_path / "again.eml").read_bytes() == raw, "boundaries and Message-ID must be deterministic"

    generate("eml", {"from": "a@x.org", "to": "b@y.org", "date": "Sun, 01 Mar 2026 09:30:00 +0100"}, tmp_path / "s.eml")
    simple = email.message_from_bytes((tmp_path / "s.eml").read_bytes(), policy=policy.default)
    assert simple["Date"] == "Sun, 01 Mar 2026 09:30:00 +0100" and not simple.is_multipart()
    with pytest.raises(ValueError, match="'to'"):
        generate("eml", {"from": "a@x.org"}, tmp_path / "bad.eml")
    with pytest.raises(ValueError, match="base64"):
        generate("eml", {"from": "a@x.org", "to": "b@y.org",
                         "attachments": [{"filename": "f", "content_b64": "!!"}]}, tmp_path / "bad.eml")


def test_sqlite(tmp_path: Path) -> None:
    dest = tmp_path / "db" / "shop.db"
    dest.parent.mkdir()
    dest.write_text("not a database")  # replaced, not appended to
    params = {
        "tables": {
            "orders": {"columns": ["id INTEGER PRIMARY KEY", "customer", "total REAL"],
                       "rows": [[1, "ann", 9.5], [2, "bo", None]]},
        },
        "sql": "CREATE VIEW big AS SELECT * FROM orders WHERE total > 5;",
    }
    generate("sqlite", params, dest)
    with sqlite3.connect(dest) as db:
        assert db.execute("SELECT id, customer, total FROM orders ORDER BY id").fetchall() == [
            (1, "ann", 9.5), (2, "bo", None)
        ]
        assert db.execute("SELECT customer FROM big").fetchall() == [("ann",)]
    db.close()

    generate("sqlite", {"sql": "CREATE TABLE t(x); INSERT INTO t VALUES (42);"}, tmp_path / "s.db")
    with sqlite3.connect(tmp_path / "s.db") as db:
        assert db.execute("SELECT x FROM t").fetchone() == (42,)
    db.close()
    with pytest.raises(ValueError, match="3 columns"):
        generate("sqlite", {"tables": {"t": {"columns": ["a", "b", "c"], "rows": [[1]]}}}, tmp_path / "b.db")
    with pytest.raises(ValueError, match="sqlite: "):
        generate("sqlite", {"sql": "CREATE TABLE oops("}, tmp_path / "c.db")
    assert not (tmp_path / "c.db").exists()
    with pytest.raises(ValueError, match="'tables' or 'sql'"):
        generate("sqlite", {}, tmp_path / "d.db")


GIT_PARAMS: dict[str, Any] = {
    "branch": "trunk",
    "commits": [
        {"message": "Initial commit", "files": {"README.md": "# demo\n", "src/app.py": "print(1)\n"},
         "author": "Ann Lee <ann@example.com>", "date": "2026-01-05T10:00:00Z"},
        {"message": "Add config", "files": {"config.yaml": "debug: true\n"}},
        {"message": "Remove app", "files": {"src/app.py": None}, "author": "Bo <bo@example.com>"},
    ],
    "uncommitted": {"README.md": "# demo\nwip\n", "notes.txt": "todo\n"},
}


@needs_git
def test_git_history_status_and_determinism(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    generate("git", GIT_PARAMS, repo)
    log = git_out(repo, "log", "--format=%an|%ae|%at|%cn|%ct|%s").splitlines()
    t0 = 1767607200  # 2026-01-05T10:00:00Z; undated commits follow one hour apart, authors carry over
    assert log == [
        f"Bo|bo@example.com|{t0 + 7200}|Bo|{t0 + 7200}|Remove app",
        f"Ann Lee|ann@example.com|{t0 + 3600}|Ann Lee|{t0 + 3600}|Add config",
        f"Ann Lee|ann@example.com|{t0}|Ann Lee|{t0}|Initial commit",
    ]
    assert git_out(repo, "rev-parse", "--abbrev-ref", "HEAD").strip() == "trunk"
    assert git_out(repo, "ls-files").split() == ["README.md", "config.yaml"]
    assert sorted(git_out(repo, "status", "--porcelain").splitlines()) == [" M README.md", "?? notes.txt"]

    again = tmp_path / "again"
    generate("git", GIT_PARAMS, again)
    head = git_out(repo, "rev-parse", "HEAD").strip()
    assert len(head) == 40 and head == git_out(again, "rev-parse", "HEAD").strip()


@needs_git
def test_git_rejects_bad_params(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="inside the repository"):
        generate("git", {"commits": [{"message": "m", "files": {"../evil": "x"}}]}, tmp_path / "r1")
    assert not (tmp_path / "evil").exists()
    with pytest.raises(ValueError, match=".git"):
        generate("git", {"commits": [{"message": "m", "files": {".git/config": "x"}}]}, tmp_path / "r2")
    with pytest.raises(ValueError, match="Name <email>"):
        generate("git", {"commits": [{"message": "m", "author": "nobody"}]}, tmp_path / "r3")


@needs_git
def test_git_ignores_callers_git_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    generate("git", GIT_PARAMS, tmp_path / "plain")
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Intruder")
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "elsewhere"))
    generate("git", GIT_PARAMS, tmp_path / "env")
    assert git_out(tmp_path / "plain", "rev-parse", "HEAD") == git_out(tmp_path / "env", "rev-parse", "HEAD")
    assert not (tmp_path / "elsewhere").exists()


# --------------------------------------------------------------------------------------------- write_files / materialize


def test_write_files_all_sources(tmp_path: Path) -> None:
    assets = tmp_path / "assets"
    (assets / "tree" / "sub").mkdir(parents=True)
    (assets / "report.txt").write_text("asset text")
    (assets / "tree" / "sub" / "deep.txt").write_text("deep")
    files = [
        WorkspaceFile(path="notes/todo.md", content="- [ ] ship\n"),
        WorkspaceFile(path="bin/run.sh", content="#!/bin/sh\necho hi\n", mode=0o755),
        WorkspaceFile(path="img.bin", content_b64=base64.b64encode(b"\x00\x01\xff").decode()),
        WorkspaceFile(path="docs/report.txt", source="report.txt"),
        WorkspaceFile(path="copied", source="tree"),
        gen_file("data/a.json", "json", data={"k": 1}),
    ]
    ws = tmp_path / "ws"
    written = write_files(files, ws, assets)
    assert written == [ws / f.path for f in files]
    assert (ws / "notes/todo.md").read_text() == "- [ ] ship\n"
    assert (ws / "bin/run.sh").stat().st_mode & 0o777 == 0o755
    assert (ws / "img.bin").read_bytes() == b"\x00\x01\xff"
    assert (ws / "docs/report.txt").read_text() == "asset text"
    assert (ws / "copied/sub/deep.txt").read_text() == "deep"
    assert json.loads((ws / "data/a.json").read_text()) == {"k": 1}


def test_write_through_planted_symlink_is_refused(tmp_path: Path) -> None:
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    (ws / "link").symlink_to(outside)
    (ws / "file_link").symlink_to(outside / "target.txt")
    for path in ("link/x.txt", "link/new/dir/x.txt", "file_link"):
        with pytest.raises(WorkspaceError, match="outside the workspace"):
            write_files([WorkspaceFile(path=path, content="pwned")], ws)
    with pytest.raises(WorkspaceError, match="outside the workspace"):
        write_files([gen_file("link/a.json", "json", data=1)], ws)
    assert list(outside.iterdir()) == []


def test_symlinked_asset_dir_is_copied_without_following(tmp_path: Path) -> None:
    assets, secret = tmp_path / "assets", tmp_path / "secret"
    (assets / "tree").mkdir(parents=True)
    (assets / "tree" / "a.txt").write_text("a")
    (assets / "tree" / "inner").symlink_to("a.txt")  # relative, inside the assets dir: copied as a symlink
    secret.mkdir()
    (secret / "key").write_text("s3cret")
    (assets / "leaky").mkdir()
    (assets / "leaky" / "leak").symlink_to(secret)  # leads out of the assets dir: refused
    (assets / "escape").symlink_to(secret / "key")
    ws = tmp_path / "ws"
    write_files([WorkspaceFile(path="t", source="tree")], ws, assets)
    assert (ws / "t" / "inner").is_symlink() and os.readlink(ws / "t" / "inner") == "a.txt"
    with pytest.raises(WorkspaceError, match="leaky/leak' is a symbolic link .* out of the assets dir"):
        write_files([WorkspaceFile(path="l", source="leaky")], tmp_path / "ws1", assets)
    with pytest.raises(WorkspaceError, match="leaves the assets dir"):
        write_files([WorkspaceFile(path="k", source="escape")], tmp_path / "ws2", assets)
    with pytest.raises(ValueError, match="must not leave"):  # refused by the record already
        WorkspaceFile(path="k", source="../secret/key")
    # merging a second copy into the tree must not write through a symlink already there
    (ws / "t" / "leak").symlink_to(secret)
    (assets / "other" / "leak").mkdir(parents=True)
    (assets / "other" / "leak" / "key").write_text("overwrite")
    with pytest.raises(WorkspaceError, match="outside the workspace"):
        write_files([WorkspaceFile(path="t", source="other")], ws, assets)
    assert (secret / "key").read_text() == "s3cret"


def test_missing_asset_and_bad_params_name_the_file(tmp_path: Path) -> None:
    assets = tmp_path / "assets"
    assets.mkdir()
    with pytest.raises(WorkspaceError, match=r"docs/r\.pdf: asset 'r\.pdf' not found"):
        write_files([WorkspaceFile(path="docs/r.pdf", source="r.pdf")], tmp_path / "ws", assets)
    with pytest.raises(WorkspaceError, match="no assets_dir"):
        write_files([WorkspaceFile(path="x", source="x")], tmp_path / "ws")
    with pytest.raises(WorkspaceError, match=r"t\.csv: csv: missing required param"):
        write_files([gen_file("t.csv", "csv")], tmp_path / "ws")


def test_materialize(tmp_path: Path) -> None:
    (tmp_path / "tasks" / "assets").mkdir(parents=True)
    (tmp_path / "tasks" / "assets" / "in.txt").write_text("hello")
    spec = WorkspaceSpec(
        files=[WorkspaceFile(path="in.txt", source="in.txt")], directories=["out", "empty/nested"], assets_dir="assets"
    )
    ws = tmp_path / "ws"
    assert materialize(spec, ws, base_dir=tmp_path / "tasks") == [ws / "in.txt"]
    assert (ws / "in.txt").read_text() == "hello"
    assert (ws / "out").is_dir() and (ws / "empty/nested").is_dir()
    with pytest.raises(WorkspaceError, match="not an empty directory"):
        materialize(spec, ws, base_dir=tmp_path / "tasks")


# --------------------------------------------------------------------------------------------- build_workspaces


def test_build_workspaces_is_atomic_per_task(tmp_path: Path) -> None:
    out = tmp_path / "out"
    tasks = [
        make_task("good-1", [WorkspaceFile(path="a.txt", content="a")]),
        make_task("bad", [WorkspaceFile(path="ok.txt", content="written first"),
                          WorkspaceFile(path="missing.txt", source="nope.txt")], assets_dir="."),
        make_task("good 2?", [gen_file("d.json", "json", data=[1])]),
    ]
    results = dict(build_workspaces(tasks, out, base_dir=tmp_path))
    assert results["good-1"] == out / "good-1"
    assert (out / "good-1" / "a.txt").read_text() == "a"
    assert isinstance(results["bad"], WorkspaceError) and "nope.txt" in str(results["bad"])
    good2 = results["good 2?"]
    assert isinstance(good2, Path) and good2.parent == out and json.loads((good2 / "d.json").read_text()) == [1]
    assert sorted(p.name for p in out.iterdir()) == sorted(["good-1", good2.name]), "no temp or partial dirs"

    # existing workspaces are kept unless overwrite
    (out / "good-1" / "a.txt").write_text("agent edits")
    build_workspaces(tasks[:1], out)
    assert (out / "good-1" / "a.txt").read_text() == "agent edits"
    assert dict(build_workspaces(tasks[:1], out, overwrite=True))["good-1"] == out / "good-1"
    assert (out / "good-1" / "a.txt").read_text() == "a"
    assert sorted(p.name for p in out.iterdir()) == sorted(["good-1", good2.name])


def test_build_workspaces_failed_overwrite_keeps_old(tmp_path: Path) -> None:
    out = tmp_path / "out"
    build_workspaces([make_task("t", [WorkspaceFile(path="a.txt", content="v1")])], out)
    res = build_workspaces([make_task("t", [gen_file("x.csv", "csv")])], out, overwrite=True)
    assert isinstance(res[0][1], WorkspaceError)
    assert (out / "t" / "a.txt").read_text() == "v1"
    assert [p.name for p in out.iterdir()] == ["t"]


def test_workspace_dirname() -> None:
    assert workspace_dirname("task-001.v2") == "task-001.v2"
    assert workspace_dirname("a/b") != workspace_dirname("a_b")
    for tid in ("a/b", "..", ".hidden", "x y", "ü"):
        name = workspace_dirname(tid)
        assert name and "/" not in name and not name.startswith(".")


# --------------------------------------------------------------------------------------------- snapshot


def test_snapshot_copies_symlinks_without_following(tmp_path: Path) -> None:
    ws, secret = tmp_path / "ws", tmp_path / "secret"
    (ws / "sub").mkdir(parents=True)
    secret.mkdir()
    (secret / "big.bin").write_bytes(b"x" * 10_000)
    (ws / "a.txt").write_text("aaaa")
    (ws / "sub" / "b.txt").write_text("bb")
    (ws / "sub" / "huge.bin").write_bytes(b"y" * 1000)
    (ws / "dirlink").symlink_to(secret)
    (ws / "filelink").symlink_to(secret / "big.bin")
    (ws / "dangling").symlink_to(tmp_path / "nowhere")

    stats = snapshot(ws, tmp_path / "snap", max_bytes=100)
    snap = tmp_path / "snap"
    assert stats == {"files": 5, "bytes": 6, "truncated": 1, "errors": 0}
    assert (snap / "a.txt").read_text() == "aaaa" and (snap / "sub" / "b.txt").read_text() == "bb"
    assert not (snap / "sub" / "huge.bin").exists()
    for name in ("dirlink", "filelink", "dangling"):
        assert (snap / name).is_symlink()
    assert os.readlink(snap / "dirlink") == str(secret)
    assert not any(p.name == "big.bin" and not p.is_symlink() for p in snap.rglob("*"))

    full = snapshot(ws, tmp_path / "full")
    assert full["truncated"] == 0 and full["bytes"] == 1006
