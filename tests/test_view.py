"""clawgym view: the API over real runs and pools, its guards, and the page in a real headless Chromium.

Runs are real oracle rollouts in bwrap sandboxes on the example tasks; pools are built with the pool's own
helpers (tests/test_pool.py). The browser is Debian's chromium driven by its chromedriver (nothing downloaded).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from clawgym.pool import Pool
from clawgym.view import ViewServer
from conftest import REPO, embedded_model_dir, require
from test_pool import add_trajectory, make_step

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
SHOTS = Path(os.environ.get("CLAWGYM_VIEW_SHOTS", Path(tempfile.gettempdir()) / "clawgym-view-shots"))
EXAMPLES = REPO / "examples" / "tasks.jsonl"
CLI = [sys.executable, "-m", "clawgym"]


def _rollout(out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, "rollout", str(EXAMPLES), "--agent", "oracle", "--sandbox", "bwrap", "-j", "2",
                           "-o", str(out), *extra], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def oracle_run(tmp_path_factory, bwrap_backend) -> Path:
    out = tmp_path_factory.mktemp("view") / "oracle"
    r = _rollout(out)
    assert r.returncode == 0, r.stderr[-2000:]
    return out


@pytest.fixture(scope="module")
def noop_run(tmp_path_factory, bwrap_backend) -> Path:
    """The base side of a comparison: the noop agent on the same tasks (every episode scored 0, no step)."""
    out = tmp_path_factory.mktemp("view") / "noop"
    r = subprocess.run([*CLI, "rollout", str(EXAMPLES), "--agent", "noop", "--sandbox", "bwrap", "-j", "2", "-o",
                        str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return out


def _pool(root: Path) -> Path:
    with Pool(root) as p:
        p.expect_group("g", 2)
        add_trajectory(p, "t#0", "g", 3)
        add_trajectory(p, "t#1", "g", 2)
        p.end_trajectory("t#0", group_id="g", task_id="task-1", status="completed", reward=1.0,
                         verdict={"status": "scored", "checks": {"answer_right": 1.0}, "score": 1.0, "passed": True})
        p.end_trajectory("t#1", group_id="g", task_id="task-1", status="completed", reward=0.0)
        add_trajectory(p, "u#0", "h", 1, task="task-2")
    return root


def _get(url: str, headers: dict | None = None) -> tuple[int, dict]:
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def _post(url: str, body: dict, headers: dict | None = None) -> tuple[int, dict]:
    h = {"Content-Type": "application/json", "X-Clawgym-View": "1", **(headers or {})}
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers=h, method="POST")
    try:
        with urllib.request.urlopen(req) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


# ------------------------------------------------------------------------------------------- API


def test_api_runs_trajectories_files_and_guards(tmp_path: Path, oracle_run: Path) -> None:
    pool = _pool(tmp_path / "pool")
    with ViewServer([str(oracle_run), str(pool)]) as v:
        status, runs = _get(v.url + "/api/runs")
        s = runs["runs"][0]["summaries"][0]
        assert status == 200 and s["episodes"] == 8 and s["mean_score"] == 1.0
        assert s["stats"]["tool_calls"] > 1 and s["stats"]["tool_types"] >= 2 and s["stats"]["rounds"] > 1
        _, page = _get(v.url + "/api/run/r0/trajectories?sort=tool_calls&order=desc&limit=3")
        assert page["total"] == 8 and len(page["items"]) == 3
        assert [r["tool_calls"] for r in page["items"]] == sorted((r["tool_calls"] for r in page["items"]), reverse=True)
        tid = "example-expense-cleanup#0"
        _, t = _get(v.url + "/api/run/r0/trajectory?id=" + urllib.request.quote(tid))
        assert t["verdict"]["checks"]["dates_are_iso"] == 1.0 and t["turns"][0]["action"]["tool_calls"]
        assert any(f["path"] == "expenses/q1_clean.csv" for f in t["files"])
        _, f = _get(v.url + "/api/run/r0/file?id=" + urllib.request.quote(tid) + "&path=expenses/q1_clean.csv")
        assert f["text"].startswith("date,merchant,category,amount")
        # no way out of the workspace
        for bad in ("../../run.json", "/etc/passwd", "expenses/../../../etc/passwd"):
            code, body = _get(v.url + "/api/run/r0/file?id=" + urllib.request.quote(tid) + "&path=" +
                              urllib.request.quote(bad))
            assert code == 400 and "error" in body, bad
        # a missing trajectory or source: one line, 4xx
        code, body = _get(v.url + "/api/run/r0/trajectory?id=nope")
        assert code == 404 and body["error"].startswith("no trajectory")
        # writes need the header and a JSON body; DNS rebinding is refused
        req = urllib.request.Request(v.url + "/api/pool/p1/curate", data=b'{"trajectory_id": "t#0"}', method="POST",
                                     headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as exc:
            urllib.request.urlopen(req)
        assert exc.value.code == 403
        code, _ = _get(v.url + "/api/sources", {"Host": "evil.example:80"})
        assert code == 403
        code, body = _post(v.url + "/api/pool/p1/export", {"format": "sft", "output": "../escape.jsonl"})
        assert code == 400 and "plain file name" in body["error"]


def test_snapshot_symlink_out_of_run_is_refused(tmp_path: Path, oracle_run: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(oracle_run, run, symlinks=True)
    secret = tmp_path / "secret.tar.gz"
    shutil.copy(run / "workspaces" / "example-expense-cleanup_0.tar.gz", secret)
    target = run / "workspaces" / "example-expense-cleanup_0.tar.gz"
    target.unlink()
    target.symlink_to(secret)
    with ViewServer([str(run)]) as v:
        _, t = _get(v.url + "/api/run/r0/trajectory?id=" + urllib.request.quote("example-expense-cleanup#0"))
        assert t["files"] is None and "refused" in t["files_error"]
        code, body = _get(v.url + "/api/run/r0/file?id=" + urllib.request.quote("example-expense-cleanup#0")
                          + "&path=expenses/q1_clean.csv")
        assert code == 400 and "refused" in body["error"]


def test_token_required_beyond_loopback(tmp_path: Path) -> None:
    pool = _pool(tmp_path / "pool")
    with ViewServer([str(pool)], token="s3cret") as v:
        assert _get(v.url + "/api/sources")[0] == 401
        assert _get(v.url + "/api/sources", {"Authorization": "Bearer wrong"})[0] == 401
        assert _get(v.url + "/api/sources", {"Authorization": "Bearer s3cret"})[0] == 200


def test_curation_writes_the_cli_event_and_export_drops_it(tmp_path: Path) -> None:
    pool = _pool(tmp_path / "pool")
    with ViewServer([str(pool)], export_dir=tmp_path / "exports") as v:
        code, res = _post(v.url + "/api/pool/p0/curate", {"trajectory_id": "t#0", "quality": "bad",
                                                          "add_tags": ["loops"], "note": "loops on ls"})
        assert code == 200 and res["event"]["type"] == "curate"
        code, rep = _post(v.url + "/api/pool/p0/export", {"format": "sft", "output": "sft.jsonl"})
        assert code == 200 and rep["dropped"] == {"trajectory not ended": 1, "trajectory quality=bad": 1}
        rows = [json.loads(line) for line in (tmp_path / "exports" / "sft.jsonl").read_text().splitlines()]
        assert [r["trajectory_id"] for r in rows] == ["t#1"]
        code, prev = _post(v.url + "/api/pool/p0/export", {"format": "rl", "algo": "rloo"})
        assert code == 200 and prev["path"] is None and prev["kept"] == 2
    with Pool(pool) as p:
        ev = p.events(type="curate")[-1]
    # the same event `clawgym pool curate` writes, marked as coming from the viewer
    assert ev["trajectory_id"] == "t#0" and ev["quality"] == "bad" and ev["add_tags"] == ["loops"]
    assert ev["note"] == "loops on ls" and ev["by"] == "view"


def test_pool_list_filters_sorts_and_pages(tmp_path: Path) -> None:
    pool = _pool(tmp_path / "pool")
    with ViewServer([str(pool)]) as v:
        _, d = _get(v.url + "/api/pool/p0/trajectories?sort=reward&order=desc")
        assert [r["id"] for r in d["items"]] == ["t#0", "t#1", "u#0"]
        _, d = _get(v.url + "/api/pool/p0/trajectories?min_reward=0.5")
        assert [r["id"] for r in d["items"]] == ["t#0"]
        _, d = _get(v.url + "/api/pool/p0/trajectories?ended=0")
        assert [r["id"] for r in d["items"]] == ["u#0"]
        _, d = _get(v.url + "/api/pool/p0/trajectories?limit=1&offset=1")
        assert d["total"] == 3 and [r["id"] for r in d["items"]] == ["t#1"]
        _, t = _get(v.url + "/api/pool/p0/trajectory?id=" + urllib.request.quote("t#0"))
        assert len(t["turns"]) == 3 and t["group"]["ready"] and t["advantages"]["grpo"] > 0
        assert t["turns"][0]["observation"][0]["role"] == "tool"


def test_pool_pages_and_versions_follow_writes(tmp_path: Path) -> None:
    """The list's pages (ids first, then their columns) agree with one sort of every row at any offset; the
    per-version tally, the policy filter, the cached counts and a trajectory's group follow writes made while
    the viewer runs, as a one-shot query over the whole index says they should."""
    import sqlite3

    pool = _pool(tmp_path / "pool")
    with Pool(pool) as p:
        for k in range(6):
            add_trajectory(p, f"w#{k}", "w", 1 + k % 3, task="task-3")
            if k % 2:
                p.end_trajectory(f"w#{k}", group_id="w", task_id="task-3", status="completed", reward=k / 10)
        p.curate(trajectory_id="w#2", quality="bad")

    def reference() -> list[list]:
        with sqlite3.connect(pool / "index.sqlite") as c:
            rows = c.execute(
                "SELECT v.policy_version, SUM(v.n), COUNT(*), SUM(t.ended_at IS NOT NULL), AVG(t.reward) FROM "
                "(SELECT policy_version, trajectory_id, COUNT(*) AS n FROM steps GROUP BY 1, 2) v "
                "JOIN trajectories t ON t.trajectory_id = v.trajectory_id GROUP BY 1").fetchall()
        rows.sort(key=lambda r: (r[0] is None, r[0] or ""))
        return [[v, n, nt, e, None if r is None else round(r, 9)] for v, n, nt, e, r in rows]

    def versions(d: dict) -> list[list]:
        return [[x["version"], x["steps"], x["trajectories"], x["ended"],
                 None if x["mean_reward"] is None else round(x["mean_reward"], 9)] for x in d["policy_versions"]]

    with ViewServer([str(pool)]) as v:
        _, ov = _get(v.url + "/api/pool/p0")
        assert versions(ov) == reference() and ov["stats"]["steps"] == 18
        assert ov["groups"] == {"total": 3, "ready": 1, "items": []}
        with Pool(pool) as p:
            rows = p.trajectories()
        cols = {"id": "id", "reward": "reward", "steps": "n_steps", "status": "status", "task": "task",
                "group": "group", "ended": "ended_at", "quality": "quality"}
        for sort, key in cols.items():
            for desc in (False, True):
                present = sorted((r for r in rows if r[key] is not None), key=lambda r: r["id"])
                present.sort(key=lambda r: r[key], reverse=desc)  # stable: ties stay in id order
                expected = [r["id"] for r in present] + sorted(r["id"] for r in rows if r[key] is None)
                got = []
                for off in range(0, len(rows), 3):
                    _, d = _get(v.url + f"/api/pool/p0/trajectories?sort={sort}&order={'desc' if desc else 'asc'}"
                                f"&limit=3&offset={off}")
                    got += [r["id"] for r in d["items"]]
                assert got == expected, (sort, desc)
        _, d = _get(v.url + "/api/pool/p0/trajectories?policy=v1&sort=steps&order=desc&offset=8")
        assert d["total"] == 9 and [r["id"] for r in d["items"]] == ["w#3"]  # 3 steps, 2, then 1: u#0 w#0 w#3
        # written while the viewer runs: steps of a new policy version, an end, a curation
        with Pool(pool) as p:
            p.append_step(make_step("u#0", "h", 1, task="task-2").model_copy(update={"policy_version": "v2"}))
            p.append_step(make_step("x#0", "h", 0, task="task-2").model_copy(update={"policy_version": None}))
            p.end_trajectory("u#0", group_id="h", task_id="task-2", status="completed", reward=0.5)
            p.end_trajectory("w#1", group_id="w", task_id="task-3", status="completed", reward=0.9)  # re-ended
            groups = {g["id"]: g for g in p.groups()}
        _, ov = _get(v.url + "/api/pool/p0")
        assert versions(ov) == reference() and ov["stats"]["steps"] == 20
        assert [x["version"] for x in ov["policy_versions"]] == ["v1", "v2", None]
        _, d = _get(v.url + "/api/pool/p0/trajectories?policy=v2")
        assert [r["id"] for r in d["items"]] == ["u#0"] and d["items"][0]["policy_version"] == "v1"
        for gid, tid in (("g", "t#0"), ("h", "u#0"), ("w", "w#1")):
            _, t = _get(v.url + "/api/pool/p0/trajectory?id=" + urllib.request.quote(tid))
            assert t["group"] == groups[gid], gid
        # a rebuilt index (rows numbered again) is tallied again
        with Pool(pool) as p:
            p.rebuild_index()
            p.append_step(make_step("x#0", "h", 1, task="task-2").model_copy(update={"policy_version": "v2"}))
        _, ov = _get(v.url + "/api/pool/p0")
        assert versions(ov) == reference() and ov["stats"]["steps"] == 21


def test_bad_input_is_one_line(tmp_path: Path) -> None:
    r = subprocess.run([*CLI, "view", str(tmp_path / "missing")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "no such run directory" in r.stderr and "Traceback" not in r.stderr
    # a pool with a garbled line and a torn tail, and a run with a bad line: listed, the rest shown
    pool = _pool(tmp_path / "pool")
    seg = sorted((pool / "steps").iterdir())[-1]
    with open(seg, "a") as fh:
        fh.write('{"not": "a step"}\n{"trajectory_id": "torn')
    run = tmp_path / "run"
    run.mkdir()
    (run / "trajectories.jsonl").write_text('{"id": "x"}\n')
    with ViewServer([str(pool), str(run)]) as v:
        _, ov = _get(v.url + "/api/pool/p0")
        assert ov["stats"]["bad_lines"] == 1 and "steps/" in ov["bad_lines"][0]["file"]
        _, runs = _get(v.url + "/api/runs")
        assert runs["runs"][0]["n_bad"] == 1 and "trajectories.jsonl:1" in runs["runs"][0]["bad_lines"][0]


def test_summary_stats_and_prices(tmp_path: Path, oracle_run: Path) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"*": {"input": 1.0, "output": 2.0}}))
    r = subprocess.run([*CLI, "summary", str(oracle_run), "--stats", "--prices", str(prices)], capture_output=True,
                       text=True, timeout=60, env={**os.environ, "COLUMNS": "80"})
    assert r.returncode == 0, r.stderr
    assert "1.000" in r.stdout and "100.0%" in r.stdout and "…" not in r.stdout
    assert "tool types" in r.stdout and "tool calls" in r.stdout
    prices.write_text(json.dumps({"gpt": {"input": "cheap", "output": 1}}))
    r = subprocess.run([*CLI, "summary", str(oracle_run), "--prices", str(prices)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 1 and f"{prices}: gpt.input:" in r.stderr and "Traceback" not in r.stderr


def test_summary_cost_from_usage() -> None:
    from clawgym.rollout.summary import EpisodeDigest, Price, summarize_digests

    d = EpisodeDigest(agent="llm", model="m", status="completed", error_kind=None, verdict_status="scored",
                      score=1.0, passed=True, rounds=3, prompt_tokens=1_000_000, completion_tokens=500_000,
                      tool_calls=2, tool_types=("read", "write"))
    s = summarize_digests([d, d], prices={"m": Price(input=0.5, output=2.0)})[0]
    assert s.cost == pytest.approx(2 * (0.5 + 1.0)) and s.tokens == 1_500_000 and s.tool_types == 2
    assert summarize_digests([d], prices={"other": Price(1, 1)})[0].cost is None


# ------------------------------------------------------------------------------------------- browser


@pytest.fixture(scope="module")
def browser():
    require(os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER),
            "chromium and chromedriver not installed (apt-get install chromium chromium-driver)")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        require(False, "selenium not installed (pip install -e '.[dev]')")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1400,1000"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    driver.set_page_load_timeout(60)
    SHOTS.mkdir(parents=True, exist_ok=True)
    yield driver
    driver.quit()


def _wait(driver, cond, timeout: float = 60):
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    # the page re-renders on live updates and after curation: an element found a moment ago may be gone
    return WebDriverWait(driver, timeout, poll_frequency=0.1,
                         ignored_exceptions=(NoSuchElementException, StaleElementReferenceException)).until(cond)


def _loaded(driver, hash_: str):
    def done(d):
        state = d.find_element("tag name", "body").get_attribute("data-loaded")
        assert state != "error", d.find_element("id", "error").text
        return state == hash_
    return _wait(driver, done)


def test_browser_run_trajectory_curation_and_export(browser, tmp_path: Path, oracle_run: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    pool = _pool(tmp_path / "pool")
    with ViewServer([str(oracle_run), str(pool)], export_dir=tmp_path / "exports") as v:
        d = browser
        d.get(v.url + "/")
        _loaded(d, "#/")
        row = d.find_element(By.CSS_SELECTOR, "#runs-table tr.run-row")
        assert "oracle" in row.text and "1.000" in row.text and "100.0%" in row.text
        d.save_screenshot(str(SHOTS / "home.png"))
        # open the run, then a trajectory: its steps and its checks
        d.find_element(By.LINK_TEXT, str(oracle_run)).click()
        _loaded(d, "#/run/r0")
        assert len(d.find_elements(By.CSS_SELECTOR, "#traj-table tr.traj-row")) == 8
        d.save_screenshot(str(SHOTS / "run.png"))
        d.find_element(By.LINK_TEXT, "example-expense-cleanup#0").click()
        _wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, "#turns .turn"))
        turns = d.find_elements(By.CSS_SELECTOR, "#turns .turn")
        assert len(turns) >= 4 and "read(" in turns[0].text and "observation" in turns[0].text.lower()
        checks = {r.find_elements(By.TAG_NAME, "td")[0].text: r.find_elements(By.TAG_NAME, "td")[1].text
                  for r in d.find_elements(By.CSS_SELECTOR, "#checks tr.check-row")}
        assert checks["dates_are_iso"] == "1.000" and len(checks) == 6
        d.find_element(By.PARTIAL_LINK_TEXT, "expenses/q1_clean.csv").click()
        _wait(d, lambda d: "date,merchant" in d.find_element(By.ID, "file-view").text)
        d.save_screenshot(str(SHOTS / "trajectory.png"))
        # a pool trajectory: mark it bad from the page
        d.get(v.url + "/#/pool/p1/t/" + urllib.request.quote("t#0", safe=""))
        _loaded(d, "#/pool/p1/t/t%230")
        assert len(d.find_elements(By.CSS_SELECTOR, "#turns .turn")) == 3
        form = d.find_element(By.ID, "curate-trajectory")
        Select(form.find_element(By.CSS_SELECTOR, ".curate-quality")).select_by_value("bad")
        form.find_element(By.CSS_SELECTOR, ".curate-note").send_keys("<img src=x onerror=alert(1)>")
        form.find_element(By.CSS_SELECTOR, ".curate-submit").click()
        _wait(d, lambda d: d.find_element(By.CSS_SELECTOR, ".info-quality").text == "bad")
        # hostile text is shown as text, never parsed
        assert "<img src=x onerror=alert(1)>" in d.find_element(By.CSS_SELECTOR, ".info-notes").text
        assert not d.find_elements(By.CSS_SELECTOR, "#main img")
        d.save_screenshot(str(SHOTS / "pool-trajectory.png"))
        with Pool(pool) as p:
            ev = p.events(type="curate")[-1]
        assert ev["trajectory_id"] == "t#0" and ev["quality"] == "bad" and ev["by"] == "view"
        # the batch page: t#0 is gone from the SFT export
        d.get(v.url + "/#/batch/p1")
        _loaded(d, "#/batch/p1")
        d.find_element(By.ID, "b-output").send_keys("sft.jsonl")
        d.find_element(By.ID, "b-export").click()
        _wait(d, lambda d: "wrote 1 trajectories" in d.find_element(By.ID, "batch-result").text)
        assert "trajectory quality=bad" in d.find_element(By.ID, "batch-dropped").text
        d.save_screenshot(str(SHOTS / "batch.png"))
        rows = [json.loads(line) for line in (tmp_path / "exports" / "sft.jsonl").read_text().splitlines()]
        assert [r["trajectory_id"] for r in rows] == ["t#1"]


def test_browser_live_rollout_appears(browser, tmp_path: Path, bwrap_backend) -> None:
    from selenium.webdriver.common.by import By

    run = tmp_path / "live"
    run.mkdir()
    with ViewServer([str(run)], poll_s=0.2) as v:
        d = browser
        d.get(v.url + "/#/run/r0")
        _loaded(d, "#/run/r0")
        assert "No trajectories yet" in d.find_element(By.ID, "notice").text
        _wait(d, lambda d: d.find_element(By.ID, "live").text == "live")
        d.execute_script("window.__same_page = true")
        proc = subprocess.Popen([*CLI, "rollout", str(EXAMPLES), "--agent", "oracle", "--sandbox", "bwrap", "-j", "1",
                                 "-o", str(run)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            # rows appear without a reload, while the rollout still writes
            _wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, "#traj-table tr.traj-row"), timeout=120)
            assert d.execute_script("return window.__same_page === true")  # no reload
            _wait(d, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#traj-table tr.traj-row")) == 8, timeout=180)
            d.save_screenshot(str(SHOTS / "live.png"))
        finally:
            _, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, stderr[-2000:]


def test_browser_token_text_from_the_local_tokenizer(browser, tmp_path: Path) -> None:
    """The token view shows each response token's text, from the tokenizer of the step's model found on this
    machine (nothing downloaded); for a model with no local tokenizer it shows the ids and says why."""
    from selenium.webdriver.common.by import By
    from tokenizers import Tokenizer

    model_dir = embedded_model_dir()  # the embedded model's directory, where the viewer looks for its tokenizer
    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    text = "Totals: 1,234 for the café.\n  Done"
    ids = tok.encode(text).ids
    split = tok.encode(" 日").ids  # one character over several tokens: its bytes, as escapes
    root = tmp_path / "pool"
    with Pool(root) as p:
        p.append_step(make_step("t#0", "g", 0).model_copy(update={
            "prompt_ids": tok.encode("<|im_start|>system\nYou are an agent.<|im_end|>\n").ids,
            "response_ids": ids + split, "logprobs": [-0.2 * (i % 6) for i in range(len(ids) + len(split))]}))
        p.append_step(make_step("o#0", "g", 0).model_copy(update={"model": "gpt-4.1-mini"}))
        for tid in ("t#0", "o#0"):  # ended: the pages do not follow live changes (no re-render under the test)
            p.end_trajectory(tid, group_id="g", task_id="task-1", status="completed", reward=1.0)
    with ViewServer([str(root)]) as v:
        d = browser
        d.get(v.url + "/#/pool/p0/t/" + urllib.request.quote("t#0", safe=""))
        _loaded(d, "#/pool/p0/t/t%230")
        d.find_element(By.CSS_SELECTOR, "#turns .token-button").click()
        _wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, ".tok.text"))
        toks = d.find_elements(By.CSS_SELECTOR, ".tok.text")
        shown = [t.get_attribute("textContent") for t in toks]
        assert "".join(shown[:len(ids)]) == text.replace("\n", "\u21b5\n") and len(shown) == len(ids) + len(split)
        assert "\\x" in "".join(shown[len(ids):])
        assert toks[1].get_attribute("title") == f"id {ids[1]}, logprob -0.200"
        assert "null" not in d.find_element(By.CSS_SELECTOR, "#turns .tokens").text
        assert str(model_dir) in d.find_element(By.CSS_SELECTOR, ".token-tokenizer").text
        d.find_element(By.CSS_SELECTOR, "details.prompt-text summary").click()
        prompt = d.find_element(By.CSS_SELECTOR, "details.prompt-text pre").get_attribute("textContent")
        assert prompt == "<|im_start|>system\nYou are an agent.<|im_end|>\n"
        d.save_screenshot(str(SHOTS / "tokens.png"))
        # an upstream's model: no tokenizer here, the ids and a note
        d.get(v.url + "/#/pool/p0/t/" + urllib.request.quote("o#0", safe=""))
        _loaded(d, "#/pool/p0/t/o%230")
        d.find_element(By.CSS_SELECTOR, "#turns .token-button").click()
        _wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, ".token-note"))
        assert "no local tokenizer for model 'gpt-4.1-mini'" in d.find_element(By.CSS_SELECTOR, ".token-note").text
        assert [t.text for t in d.find_elements(By.CSS_SELECTOR, ".tok")] == ["7", "8", "9"]


def test_browser_two_runs_side_by_side(browser, oracle_run: Path, noop_run: Path) -> None:
    """Base against student on one task: the two runs' episodes in two columns, step i of one beside step i of
    the other, reached from the per-task comparison."""
    from selenium.webdriver.common.by import By

    task = "example-expense-cleanup"
    with ViewServer([str(noop_run), str(oracle_run)]) as v:  # r0: the base (noop), r1: the student (oracle)
        d = browser
        d.get(v.url + "/#/compare/r0/r1")
        _loaded(d, "#/compare/r0/r1")
        d.find_element(By.CSS_SELECTOR, f'#compare-table tr.compare-row[data-task="{task}"] a.side-link').click()
        _loaded(d, f"#/compare/r0/r1/{task}")
        head_a, head_b = (d.find_element(By.CSS_SELECTOR, f"#side-heads .side-{s}") for s in "ab")
        assert str(noop_run) in head_a.text and str(oracle_run) in head_b.text
        assert head_a.find_element(By.CSS_SELECTOR, ".side-score").text.startswith("0.000 (not passed)")
        assert head_b.find_element(By.CSS_SELECTOR, ".side-score").text == "1.000 (passed)"
        _, t = _get(v.url + "/api/run/r1/trajectory?id=" + urllib.request.quote(f"{task}#0"))
        rows = d.find_elements(By.CSS_SELECTOR, "#side-by-side .side-row")
        assert len(rows) == len(t["turns"]) >= 4
        assert "read(" in rows[0].find_element(By.CSS_SELECTOR, ".side-b .turn").text
        # the base never answers: its one turn is the request, then nothing beside the student's further steps
        assert "(no model answer)" in rows[0].find_element(By.CSS_SELECTOR, ".side-a .turn").text
        assert "no step 1: the episode ended after 1" in rows[1].find_element(By.CSS_SELECTOR, ".side-a").text
        # the two columns sit side by side
        a, b = rows[0].find_element(By.CSS_SELECTOR, ".side-a"), rows[0].find_element(By.CSS_SELECTOR, ".side-b")
        assert a.location["y"] == b.location["y"] and a.location["x"] + a.size["width"] <= b.location["x"]
        d.save_screenshot(str(SHOTS / "side-by-side.png"))
