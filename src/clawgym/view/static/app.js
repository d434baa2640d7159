// clawgym view: the page. Plain JS, no build step. Every piece of run or pool data is put into the page with
// textContent / attributes through h(); nothing from the server is ever parsed as HTML.
"use strict";

const $main = () => document.getElementById("main");
let sources = [];
let current = null; // {render, watch: [source ids]}
let liveTimer = null;

function h(tag, attrs, ...children) {
  const svg = ["svg", "rect", "line", "polyline", "circle", "text", "g", "title"].includes(tag);
  const el = svg ? document.createElementNS("http://www.w3.org/2000/svg", tag) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "className") el.setAttribute("class", v);
    else if (k === "value") el.value = v;
    else if (k === "style") Object.assign(el.style, v); // CSSOM: allowed by the CSP, unlike a style attribute
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function showError(msg) {
  const e = document.getElementById("error");
  e.textContent = msg || "";
  e.hidden = !msg;
}

async function api(path, body) {
  const opts = body === undefined ? {} : {
    method: "POST", body: JSON.stringify(body),
    headers: {"Content-Type": "application/json", "X-Clawgym-View": "1"},
  };
  let r;
  try { r = await fetch(path, opts); } catch (e) { throw new Error("the viewer is not reachable: " + e.message); }
  let data = null;
  try { data = await r.json(); } catch (e) { throw new Error(`${r.status} ${r.statusText}: not a JSON answer`); }
  if (!r.ok) throw new Error((data && data.error) || `${r.status} ${r.statusText}`);
  return data;
}

const fmt = {
  num: (v, d = 3) => (v === null || v === undefined ? "-" : Number(v).toFixed(d)),
  pct: (v) => (v === null || v === undefined ? "-" : (100 * v).toFixed(1) + "%"),
  int: (v) => (v === null || v === undefined ? "-" : Number(v).toLocaleString("en")),
};

function toast(msg) {
  let t = document.getElementById("toast");
  if (!t) { t = h("div", {id: "toast"}); document.body.appendChild(t); }
  t.textContent = msg;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => t.remove(), 4000);
}

function crumbs(...parts) {
  const nav = document.getElementById("crumbs");
  nav.replaceChildren(...parts.flatMap((p, i) => [i ? " / " : "", p]));
}

function srcLabel(id) {
  const s = sources.find((x) => x.id === id);
  return s ? s.label : id;
}

function link(href, text, attrs) { return h("a", Object.assign({href}, attrs || {}), text); }

function parseHash() {
  const raw = location.hash.replace(/^#/, "") || "/";
  const [path, query] = raw.split("?");
  return {parts: path.split("/").filter(Boolean).map(decodeURIComponent), query: new URLSearchParams(query || "")};
}

function setQuery(base, params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== "" && v !== null && v !== undefined) q.set(k, v);
  const s = q.toString();
  location.hash = base + (s ? "?" + s : "");
}

// ---------------------------------------------------------------------------------------------- pages

async function pageHome() {
  crumbs("home");
  const [runs] = await Promise.all([api("/api/runs")]);
  const out = [h("h1", {}, "Runs and pools")];
  const rows = [];
  for (const r of runs.runs) {
    if (r.error) { rows.push(h("tr", {}, h("td", {}, link(`#/run/${r.id}`, r.label)), h("td", {colspan: 14, className: "fail"}, r.error))); continue; }
    if (!r.summaries.length) {
      rows.push(h("tr", {}, h("td", {}, link(`#/run/${r.id}`, r.label)),
        h("td", {colspan: 14, className: "muted"}, r.started ? "no trajectories" : "no trajectories yet (waiting for the run)")));
    }
    for (const s of r.summaries) {
      const st = s.stats;
      rows.push(h("tr", {className: "run-row"},
        h("td", {}, link(`#/run/${r.id}`, r.label)), h("td", {}, s.agent), h("td", {}, s.model || "-"),
        h("td", {className: "num"}, s.episodes), h("td", {className: "num"}, s.scored),
        h("td", {className: "num"}, fmt.num(s.mean_score)), h("td", {className: "num"}, fmt.pct(s.pass_rate)),
        h("td", {className: "num"}, s.infra_errors),
        h("td", {}, Object.entries(s.errors).map(([k, v]) => `${k}=${v}`).join(", ") || "-"),
        h("td", {className: "num"}, fmt.num(st.rounds, 1)), h("td", {className: "num"}, st.tokens === null ? "-" : fmt.int(Math.round(st.tokens))),
        h("td", {className: "num"}, fmt.num(st.tool_calls, 1)), h("td", {className: "num"}, fmt.num(st.tool_types, 1)),
        h("td", {className: "num"}, s.cost === null ? "-" : "$" + s.cost.toFixed(4)),
        h("td", {}, r.pool_id ? link(`#/pool/${r.pool_id}`, "pool") : "", " ", r.has_report ? link(`#/report/${r.id}`, "report") : "")));
    }
  }
  out.push(h("table", {id: "runs-table"},
    h("thead", {}, h("tr", {}, ["run", "agent", "model", "episodes", "scored", "mean", "pass", "infra", "errors by kind",
      "rounds", "tokens", "tool calls", "tool types", "cost", ""].map((c) => h("th", {}, c)))),
    h("tbody", {}, rows)));
  out.push(h("p", {className: "muted"}, "rounds, tokens, tool calls and tool types are means per episode that ran (infrastructure errors and skipped episodes apart)."));
  const pools = sources.filter((s) => s.kind === "pool");
  if (pools.length) out.push(h("h2", {}, "Pools"), h("ul", {}, pools.map((p) => h("li", {}, link(`#/pool/${p.id}`, p.label), " ", link(`#/batch/${p.id}`, "batches")))));
  const rls = sources.filter((s) => s.kind === "rl");
  if (rls.length) out.push(h("h2", {}, "RL training"), h("ul", {}, rls.map((p) => h("li", {}, link(`#/rl/${p.id}`, p.label)))));
  const runSrc = sources.filter((s) => s.kind === "run");
  if (runSrc.length > 1) {
    const a = h("select", {id: "cmp-a"}, runSrc.map((s) => h("option", {value: s.id}, s.label)));
    const b = h("select", {id: "cmp-b"}, runSrc.map((s, i) => h("option", {value: s.id, selected: i === 1}, s.label)));
    out.push(h("h2", {}, "Compare two runs per task"),
      h("div", {className: "box"}, a, " against ", b, " ", h("button", {onclick: () => { location.hash = `#/compare/${a.value}/${b.value}`; }}, "compare")));
  }
  $main().replaceChildren(...out);
  return sources.map((s) => s.id);
}

function sortHeader(label, key, q, base, numeric) {
  const cur = q.get("sort") === key;
  const desc = cur && q.get("order") === "desc";
  return h("th", {className: "sortable" + (numeric ? " num" : ""), "data-sort": key, onclick: () => {
    const params = Object.fromEntries(q.entries());
    params.sort = key; params.order = cur && !desc ? "desc" : "asc"; params.offset = 0;
    setQuery(base, params);
  }}, label + (cur ? (desc ? " \u25bc" : " \u25b2") : ""));
}

function pager(data, q, base) {
  const off = data.offset, lim = data.limit;
  const go = (o) => { const p = Object.fromEntries(q.entries()); p.offset = o; setQuery(base, p); };
  return h("div", {className: "pager"},
    h("button", {className: "secondary", disabled: off <= 0, onclick: () => go(Math.max(0, off - lim))}, "previous"),
    h("span", {id: "page-info"}, data.total ? `${off + 1}-${Math.min(off + lim, data.total)} of ${data.total}` : "0 of 0"),
    h("button", {className: "secondary", disabled: off + lim >= data.total, onclick: () => go(off + lim)}, "next"));
}

function filterForm(fields, q, base) {
  const inputs = {};
  const form = h("form", {className: "filters", onsubmit: (ev) => {
    ev.preventDefault();
    const p = {};
    for (const [k, el] of Object.entries(inputs)) p[k] = el.value;
    if (q.get("sort")) { p.sort = q.get("sort"); p.order = q.get("order"); }
    setQuery(base, p);
  }});
  for (const f of fields) {
    let el;
    if (f.options) el = h("select", {name: f.name}, h("option", {value: ""}, "any"), f.options.map((o) => h("option", {value: o[0] ?? o, selected: (q.get(f.name) || "") === String(o[0] ?? o)}, o[1] ?? o)));
    else el = h("input", {name: f.name, value: q.get(f.name) || "", size: f.size || 10, placeholder: f.placeholder || ""});
    inputs[f.name] = el;
    form.appendChild(h("label", {}, f.label, el));
  }
  form.appendChild(h("button", {type: "submit", id: "filter-apply"}, "filter"));
  form.appendChild(h("button", {type: "button", className: "secondary", onclick: () => setQuery(base, {})}, "clear"));
  return form;
}

async function pageRun(sid, q) {
  crumbs(link("#/", "home"), srcLabel(sid));
  const base = `#/run/${sid}`;
  const params = new URLSearchParams(q);
  const [run, data] = await Promise.all([api(`/api/run/${sid}`), api(`/api/run/${sid}/trajectories?${params}`)]);
  const out = [h("h1", {}, run.label)];
  if (run.error) { $main().replaceChildren(h("h1", {}, run.label), h("div", {className: "notice", id: "notice"}, run.error)); return [sid]; }
  const links = [];
  if (run.pool_id) links.push(link(`#/pool/${run.pool_id}`, "its pool"));
  if (run.has_report) links.push(link(`#/report/${sid}`, "eval report"));
  for (const s of run.summaries) {
    out.push(h("div", {className: "box"}, `${s.agent}${s.model ? " / " + s.model : ""}: ${s.episodes} episodes, ${s.scored} scored, mean ${fmt.num(s.mean_score)}, pass ${fmt.pct(s.pass_rate)}, infra ${s.infra_errors}`,
      `; per episode: ${fmt.num(s.stats.rounds, 1)} rounds, ${s.stats.tokens === null ? "-" : fmt.int(Math.round(s.stats.tokens))} tokens, ${fmt.num(s.stats.tool_calls, 1)} tool calls, ${fmt.num(s.stats.tool_types, 1)} tool types`,
      s.cost !== null ? `; cost $${s.cost.toFixed(4)}` : ""));
  }
  if (links.length) out.push(h("p", {}, links.flatMap((l, i) => [i ? " | " : "", l])));
  if (data.bad_lines.length) out.push(h("div", {className: "notice", id: "bad-lines"}, `${run.n_bad} bad line(s) skipped:`, h("pre", {}, data.bad_lines.join("\n"))));
  out.push(filterForm([
    {name: "q", label: "id contains", size: 16}, {name: "task", label: "task"},
    {name: "status", label: "status", options: data.facets.status},
    {name: "category", label: "category", options: data.facets.category},
    {name: "operation", label: "operation", options: data.facets.operation},
    {name: "passed", label: "passed", options: [["1", "yes"], ["0", "no"]]},
    {name: "min_reward", label: "reward >=", size: 5}, {name: "max_reward", label: "reward <=", size: 5},
  ], params, base));
  if (!data.started) out.push(h("div", {className: "notice", id: "notice"}, "No trajectories yet: the run has not written trajectories.jsonl. New episodes appear here as they end."));
  const tb = h("tbody", {}, data.items.map((r) => h("tr", {className: "traj-row", "data-id": r.id},
    h("td", {}, link(`#/run/${sid}/t/${encodeURIComponent(r.id)}`, r.id)), h("td", {}, r.task_id), h("td", {}, r.category || "-"),
    h("td", {}, h("span", {className: "pill " + (r.status === "completed" ? "good" : r.status === "infra_error" ? "warn" : "bad")}, r.status)),
    h("td", {className: "num " + (r.passed ? "pass" : "fail")}, fmt.num(r.score)),
    h("td", {className: "num"}, r.rounds), h("td", {className: "num"}, r.tokens === null ? "-" : fmt.int(r.tokens)),
    h("td", {className: "num"}, r.tool_calls), h("td", {className: "num"}, r.tool_types), h("td", {className: "num"}, fmt.num(r.duration_s, 1)))));
  out.push(h("table", {id: "traj-table"}, h("thead", {}, h("tr", {},
    sortHeader("trajectory", "id", params, base), sortHeader("task", "task_id", params, base), sortHeader("category", "category", params, base),
    sortHeader("status", "status", params, base), sortHeader("score", "score", params, base, true), sortHeader("rounds", "rounds", params, base, true),
    sortHeader("tokens", "tokens", params, base, true), sortHeader("tool calls", "tool_calls", params, base, true),
    sortHeader("tool types", "tool_types", params, base, true), sortHeader("seconds", "duration_s", params, base, true))), tb));
  out.push(pager(data, params, base));
  $main().replaceChildren(...out);
  return [sid];
}

function renderMessage(m) {
  const cls = "msg " + (m.role || "") + (m.is_error ? " error" : "");
  return h("div", {className: cls},
    h("div", {className: "label muted"}, m.role + (m.name ? ` (${m.name})` : "") + (m.tool_call_id ? ` [${m.tool_call_id}]` : "") + (m.is_error ? " error" : "")),
    m.reasoning ? h("pre", {className: "muted reasoning"}, m.reasoning) : null,
    m.content ? h("pre", {}, m.content) : null,
    (m.tool_calls || []).map((c) => h("div", {className: "call"}, `\u2192 ${c.name}(`, h("pre", {}, c.arguments), ")")));
}

function renderTurns(turns, opts) {
  return h("div", {className: "cards", id: "turns"}, turns.map((t, i) => renderTurn(t, i, opts)));
}

function renderTurn(t, i, opts) {
  const st = t.step;
  const head = [`step ${i}`];
  if (st) head.push(` \u00b7 ${st.model}`, st.policy_version ? ` \u00b7 policy ${st.policy_version}` : "", ` \u00b7 ${st.token_source} tokens (${st.n_prompt} prompt, ${st.n_response} response)`,
    st.latency_s !== undefined && st.latency_s !== null ? ` \u00b7 ${Number(st.latency_s).toFixed(2)} s` : "",
    st.progress_reward !== undefined && st.progress_reward !== null ? ` \u00b7 progress ${st.progress_reward >= 0 ? "+" : ""}${Number(st.progress_reward).toFixed(3)}` : "",
    st.status === "error" ? ` \u00b7 error: ${st.error}` : "");
  if (!st && t.progress_reward !== undefined && t.progress_reward !== null)
    head.push(` \u00b7 progress ${t.progress_reward >= 0 ? "+" : ""}${Number(t.progress_reward).toFixed(3)}`);
  return h("div", {className: "turn", "data-step": st ? st.step_id : i},
    h("h3", {}, head, st ? h("span", {}, " ", h("span", {className: "pill"}, st.trainable ? "trainable" : "not trainable"), st.quality ? h("span", {className: "pill " + (st.quality === "bad" ? "bad" : "")}, "quality " + st.quality) : null) : null),
    h("div", {className: "part"}, h("div", {className: "label"}, "state", t.earlier ? ` (${t.earlier} earlier messages not repeated)` : ""), (t.state.length ? t.state.map(renderMessage) : h("div", {className: "muted"}, "(nothing new)"))),
    h("div", {className: "part"}, h("div", {className: "label"}, "action"), t.action ? renderMessage(t.action) : h("div", {className: "muted"}, "(no model answer)")),
    t.observation.length ? h("div", {className: "part"}, h("div", {className: "label"}, "observation"), t.observation.map(renderMessage)) : null,
    opts && opts.stepTools && st ? opts.stepTools(st) : null);
}

function renderVerdict(v) {
  if (!v) return h("div", {className: "box muted"}, "no verdict");
  return h("div", {className: "box", id: "verdict"},
    h("dl", {className: "kv"}, h("dt", {}, "status"), h("dd", {}, v.status), h("dt", {}, "score"), h("dd", {className: v.passed ? "pass" : "fail"}, `${fmt.num(v.score)} (${v.passed ? "passed" : "not passed"})`),
      h("dt", {}, "code / rubric"), h("dd", {}, `${fmt.num(v.code_score)} / ${fmt.num(v.rubric_score)} (weights ${(v.weights || ["-"]).join(" / ")})`),
      v.error ? [h("dt", {}, "error"), h("dd", {className: "fail"}, v.error)] : null,
      v.notes && v.notes.length ? [h("dt", {}, "notes"), h("dd", {}, v.notes.join("; "))] : null),
    h("table", {id: "checks"}, h("thead", {}, h("tr", {}, h("th", {}, "check"), h("th", {className: "num"}, "result"))),
      h("tbody", {}, Object.entries(v.checks || {}).map(([k, val]) => h("tr", {className: "check-row"}, h("td", {}, k), h("td", {className: "num " + (val >= 1 ? "pass" : "fail")}, fmt.num(val)))))),
    v.output_tail ? h("details", {}, h("summary", {}, "checker output (last lines)"), h("pre", {}, v.output_tail)) : null);
}

async function pageRunTrajectory(sid, tid) {
  crumbs(link("#/", "home"), link(`#/run/${sid}`, srcLabel(sid)), tid);
  const t = await api(`/api/run/${sid}/trajectory?id=${encodeURIComponent(tid)}`);
  const out = [h("h1", {}, t.id)];
  out.push(h("div", {className: "box"}, h("dl", {className: "kv"}, [
    ["task", t.task_id + (t.task && t.task.category ? ` (${t.task.category}${t.task.operations.length ? ": " + t.task.operations.join(", ") : ""})` : "")],
    ["agent / model", `${t.agent} / ${t.model || "-"}`], ["status", t.status + (t.error ? ` (${t.error.kind}: ${t.error.message})` : "")],
    ["rounds / tool calls / tool types", `${t.row.rounds} / ${t.tool_calls} (${t.tool_errors} errors) / ${t.row.tool_types}`],
    ["tokens", t.row.tokens === null ? "-" : fmt.int(t.row.tokens)], ["duration", `${fmt.num(t.duration_s, 1)} s, ${t.attempts} attempt(s)`]].map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])),
    t.in_pool ? h("p", {}, link(`#/pool/${t.pool_id}/t/${encodeURIComponent(t.id)}`, "its steps in the pool (tokens, curation)")) : null));
  out.push(h("h2", {}, "Verdict"), renderVerdict(t.verdict));
  if (t.final_message) out.push(h("h2", {}, "Final message"), h("pre", {className: "box"}, t.final_message));
  out.push(h("h2", {}, `Steps (${t.turns.length})`), renderTurns(t.turns));
  out.push(h("h2", {}, "Final workspace"));
  if (t.files_error) out.push(h("div", {className: "notice"}, t.files_error));
  else {
    const viewer = h("div", {id: "file-view", className: "muted"}, "pick a file");
    const list = h("ul", {id: "file-list"}, t.files.map((f) => h("li", {},
      f.kind === "symlink" ? h("span", {className: "muted"}, `${f.path} \u2192 ${f.target} (symlink, not followed)`)
        : link("#", `${f.path} (${fmt.int(f.size)} B)`, {onclick: async (ev) => {
          ev.preventDefault();
          try {
            const d = await api(`/api/run/${sid}/file?id=${encodeURIComponent(tid)}&path=${encodeURIComponent(f.path)}`);
            viewer.replaceChildren(h("div", {className: "muted"}, f.path + (d.truncated ? " (truncated)" : "")), d.binary ? h("p", {}, `binary file, ${d.size} bytes`) : h("pre", {}, d.text));
          } catch (e) { viewer.replaceChildren(h("div", {className: "fail"}, e.message)); }
        }}))));
    out.push(h("div", {className: "files box"}, list, viewer));
  }
  $main().replaceChildren(...out);
  return []; // a trajectory record is final once written
}

async function pagePool(sid, q) {
  crumbs(link("#/", "home"), srcLabel(sid));
  const base = `#/pool/${sid}`;
  const params = new URLSearchParams(q);
  const [ov, data] = await Promise.all([api(`/api/pool/${sid}`), api(`/api/pool/${sid}/trajectories?${params}`)]);
  const s = ov.stats;
  const out = [h("h1", {}, ov.label)];
  out.push(h("div", {className: "box", id: "pool-stats"}, `${fmt.int(s.steps)} steps, ${fmt.int(s.trajectories)} trajectories (${fmt.int(s.ended)} ended), ${fmt.int(s.groups)} groups (${fmt.int(s.ready_groups)} ready), ${fmt.int(s.trainable_steps)} trainable steps, ${fmt.int(s.events)} events`,
    " | ", link(`#/batch/${sid}`, "build a training batch")));
  if (ov.bad_lines.length) out.push(h("div", {className: "notice", id: "bad-lines"}, `${s.bad_lines} line(s) of the pool are not valid records and were skipped:`, h("pre", {}, ov.bad_lines.map((b) => `${b.file}:${b.line}: ${b.error}`).join("\n"))));
  if (ov.policy_versions.length > 1 || (ov.policy_versions[0] && ov.policy_versions[0].version !== null)) {
    out.push(h("details", {}, h("summary", {}, "policy versions"), h("table", {}, h("thead", {}, h("tr", {}, ["version", "steps", "trajectories", "ended", "mean reward"].map((c) => h("th", {}, c)))),
      h("tbody", {}, ov.policy_versions.map((v) => h("tr", {}, h("td", {}, v.version ?? "-"), h("td", {className: "num"}, v.steps), h("td", {className: "num"}, v.trajectories), h("td", {className: "num"}, v.ended), h("td", {className: "num"}, fmt.num(v.mean_reward))))))));
  }
  out.push(filterForm([
    {name: "q", label: "id contains", size: 16}, {name: "group", label: "group"}, {name: "task", label: "task"},
    {name: "status", label: "status", size: 9}, {name: "quality", label: "quality", size: 7},
    {name: "trainable", label: "trainable", options: [["1", "yes"], ["0", "no"]]},
    {name: "curated", label: "curated", options: [["1", "yes"], ["0", "no"]]},
    {name: "ended", label: "ended", options: [["1", "yes"], ["0", "no"]]}, {name: "tag", label: "tag", size: 7},
    {name: "policy", label: "policy version", options: ov.policy_versions.filter((v) => v.version !== null).map((v) => v.version)},
    {name: "min_reward", label: "reward >=", size: 5}, {name: "max_reward", label: "reward <=", size: 5},
  ], params, base));
  const tb = h("tbody", {}, data.items.map((r) => h("tr", {className: "traj-row", "data-id": r.id},
    h("td", {}, link(`#/pool/${sid}/t/${encodeURIComponent(r.id)}`, r.id)), h("td", {}, r.group || "-"), h("td", {}, r.task || "-"),
    h("td", {}, r.status || (r.ended ? "-" : h("span", {className: "pill warn"}, "running"))), h("td", {className: "num"}, fmt.num(r.reward)),
    h("td", {className: "num"}, r.n_steps), h("td", {}, r.policy_version ?? "-"),
    h("td", {}, r.trainable ? "yes" : "no"), h("td", {className: r.quality === "bad" ? "fail" : ""}, r.quality || "-"),
    h("td", {}, r.tags.join(", ") || "-"))));
  out.push(h("table", {id: "traj-table"}, h("thead", {}, h("tr", {},
    sortHeader("trajectory", "id", params, base), sortHeader("group", "group", params, base), sortHeader("task", "task", params, base),
    sortHeader("status", "status", params, base), sortHeader("reward", "reward", params, base, true), sortHeader("steps", "steps", params, base, true),
    h("th", {}, "policy"), h("th", {}, "trainable"), sortHeader("quality", "quality", params, base), h("th", {}, "tags"))), tb));
  out.push(pager(data, params, base));
  $main().replaceChildren(...out);
  return [sid];
}

function curationForm(sid, target, onDone) {
  const quality = h("select", {className: "curate-quality"}, h("option", {value: ""}, "(unchanged)"), ["good", "bad", "suspect"].map((x) => h("option", {value: x}, x)), h("option", {value: "__clear"}, "(clear)"));
  const trainable = h("select", {className: "curate-trainable"}, h("option", {value: ""}, "(unchanged)"), h("option", {value: "true"}, "trainable"), h("option", {value: "false"}, "not trainable"));
  const tags = h("input", {className: "curate-tags", size: 12, placeholder: "add tags, comma"});
  const untags = h("input", {className: "curate-untags", size: 12, placeholder: "remove tags"});
  const note = h("input", {className: "curate-note", size: 24, placeholder: "note"});
  const split = (s) => s.split(",").map((x) => x.trim()).filter(Boolean);
  return h("div", {className: "form curate"}, quality, " ", trainable, " ", tags, " ", untags, " ", note, " ",
    h("button", {className: "curate-submit", onclick: async () => {
      const body = Object.assign({}, target, {
        quality: quality.value === "__clear" ? "" : quality.value || null,
        trainable: trainable.value === "" ? null : trainable.value === "true",
        add_tags: split(tags.value), remove_tags: split(untags.value), note: note.value || null});
      try {
        const r = await api(`/api/pool/${sid}/curate`, body);
        toast("curated: event written at " + r.event.at);
        onDone();
      } catch (e) { showError(e.message); }
    }}, "save"));
}

function tokenView(sid, st) {
  const box = h("div", {className: "tokens"});
  return h("div", {className: "part"}, h("button", {className: "secondary token-button", onclick: async () => {
    try {
      const d = await api(`/api/pool/${sid}/tokens?step=${encodeURIComponent(st.step_id)}`);
      const shade = (lp) => (lp === null || lp === undefined) ? "#eef2f6" : `hsl(${Math.round(120 * Math.exp(lp))}, 70%, 82%)`;
      const texts = d.response_tokens; // null: no local tokenizer for the step's model
      const tip = (id, i) => `id ${id}` + (d.logprobs ? `, logprob ${Number(d.logprobs[i]).toFixed(3)}` : "");
      // a newline in a token is shown as \u21b5 and then breaks the line, so the tokens read as the text
      const shown = (t) => t.replace(/\n/g, "\u21b5\n");
      box.replaceChildren(...[
        h("div", {className: "label muted"}, `token source ${d.token_source}; response ${texts ? "tokens as text" : "ids"} shaded by logprob (green likely, red unlikely); hover for id and logprob`),
        texts ? h("div", {className: "muted token-tokenizer"}, `tokenizer of ${d.model}: ${d.tokenizer}`) : null,
        d.tokenizer_note ? h("div", {className: "notice token-note"}, d.tokenizer_note) : null,
        h("div", {className: "tok-line"}, d.response_ids.map((id, i) => h("span", {className: "tok" + (texts ? " text" : ""), "data-id": id, style: {background: shade(d.logprobs ? d.logprobs[i] : null)}, title: tip(id, i)}, texts ? shown(texts[i]) : id))),
        d.prompt_text !== null && d.prompt_text !== undefined ? h("details", {className: "prompt-text"}, h("summary", {}, `prompt as text (${d.prompt_ids.length} tokens)`), h("pre", {}, d.prompt_text)) : null,
        h("details", {}, h("summary", {}, `prompt ids (${d.prompt_ids.length})`), h("pre", {}, d.prompt_ids.slice(0, 4000).join(" ") + (d.prompt_ids.length > 4000 ? " ..." : "")))].filter(Boolean));
    } catch (e) { box.replaceChildren(h("div", {className: "fail"}, e.message)); }
  }}, "tokens"), box);
}

async function pagePoolTrajectory(sid, tid) {
  crumbs(link("#/", "home"), link(`#/pool/${sid}`, srcLabel(sid)), tid);
  const d = await api(`/api/pool/${sid}/trajectory?id=${encodeURIComponent(tid)}`);
  const t = d.trajectory;
  const rerender = () => route();
  const out = [h("h1", {}, t.id)];
  const g = d.group;
  out.push(h("div", {className: "box", id: "traj-info"}, h("dl", {className: "kv"}, [
    ["group", g ? `${g.id}: ${g.n_ended}/${g.expected ?? g.n_trajectories} ended, ${g.ready ? "ready" : "not ready"}, mean reward ${fmt.num(g.mean_reward)}` : t.group],
    ["task", t.task || "-"], ["status", t.status || (t.ended ? "-" : "running")], ["reward", fmt.num(t.reward)],
    ["advantage", Object.keys(d.advantages).length ? Object.entries(d.advantages).map(([k, v]) => `${k} ${fmt.num(v)}`).join(", ") : "- (not in a curated group baseline)"],
    ["trainable", t.trainable ? "yes" : "no"], ["quality", t.quality || "-"], ["tags", t.tags.join(", ") || "-"],
    ["notes", t.notes.map((n) => typeof n === "string" ? n : `${n.note ?? n.text ?? JSON.stringify(n)}${n.by ? " (" + n.by + ")" : ""}`).join(" | ") || "-"]].map(([k, v]) => [h("dt", {}, k), h("dd", {className: "info-" + k}, v)]))));
  out.push(h("h2", {}, "Curate this trajectory"), h("div", {className: "box", id: "curate-trajectory"}, curationForm(sid, {trajectory_id: t.id}, rerender)));
  if (t.verdict) out.push(h("h2", {}, "Verdict"), renderVerdict(t.verdict));
  out.push(h("h2", {}, `Steps (${d.turns.length})`), renderTurns(d.turns, {stepTools: (st) => h("div", {}, tokenView(sid, st),
    h("details", {}, h("summary", {}, "curate this step"), curationForm(sid, {step_id: st.step_id}, rerender)))}));
  const shown = (e) => JSON.stringify(Object.fromEntries(Object.entries(e).filter(([k, v]) =>
    !["seq", "type", "verdict"].includes(k) && v !== null && !(Array.isArray(v) && !v.length))));
  const evRows = d.events.map((e) => h("tr", {className: "event-row"}, h("td", {className: "num"}, e.seq), h("td", {}, e.type),
    h("td", {}, h("pre", {}, shown(e)))));
  out.push(h("h2", {}, "Events"), h("table", {id: "events"}, h("tbody", {}, evRows)));
  $main().replaceChildren(...out);
  return t.ended ? [] : [sid]; // steps still coming: follow them (forms keep focus, see startLive)
}

async function pageBatch(sid) {
  crumbs(link("#/", "home"), link(`#/pool/${sid}`, srcLabel(sid)), "batches");
  const ov = await api(`/api/pool/${sid}`);
  const f = {
    format: h("select", {id: "b-format"}, h("option", {value: "sft"}, "SFT (a conversation per trajectory)"), h("option", {value: "rl"}, "RL (a row per step)")),
    algo: h("select", {id: "b-algo"}, ["grpo", "dr-grpo", "rloo", "reinforce++"].map((a) => h("option", {value: a}, a))),
    credit: h("select", {id: "b-credit"}, h("option", {value: "outcome"}, "outcome"), h("option", {value: "step"}, "step")),
    gamma: h("input", {id: "b-gamma", value: "1.0", size: 4}), min_reward: h("input", {id: "b-min-reward", size: 4}),
    ready: h("input", {id: "b-ready", type: "checkbox"}), drop: h("input", {id: "b-drop", value: "bad", size: 10}),
    output: h("input", {id: "b-output", size: 22, placeholder: "batch.jsonl"}),
  };
  const result = h("div", {id: "batch-result"});
  const body = () => ({format: f.format.value, algo: f.algo.value, credit: f.credit.value, gamma: Number(f.gamma.value || 1),
    min_reward: f.min_reward.value === "" ? null : Number(f.min_reward.value), ready_only: f.ready.checked,
    drop_quality: f.drop.value.split(",").map((x) => x.trim()).filter(Boolean)});
  const show = (r) => result.replaceChildren(h("div", {className: "box"},
    h("p", {id: "batch-kept"}, `${r.path ? "wrote" : "would keep"} ${fmt.int(r.kept)} ${r.format === "sft" ? "trajectories" : "steps"}` + (r.path ? ` to ${r.path}` : "")),
    h("table", {id: "batch-dropped"}, h("thead", {}, h("tr", {}, h("th", {}, "dropped because"), h("th", {className: "num"}, "count"))),
      h("tbody", {}, Object.entries(r.dropped).map(([k, v]) => h("tr", {}, h("td", {}, k), h("td", {className: "num"}, v))))),
    r.sample && r.sample.length ? h("details", {}, h("summary", {}, "first rows"), h("pre", {}, r.sample.join(""))) : null));
  const run = async (withOutput) => {
    showError("");
    try { show(await api(`/api/pool/${sid}/export`, Object.assign(body(), withOutput ? {output: f.output.value} : {}))); }
    catch (e) { showError(e.message); }
  };
  $main().replaceChildren(h("h1", {}, "Training batch from " + ov.label),
    h("p", {className: "muted"}, `${fmt.int(ov.stats.trainable_steps)} trainable steps, ${fmt.int(ov.stats.ready_groups)} of ${fmt.int(ov.stats.groups)} groups ready. Exports use the same code as clawgym pool export.`),
    h("div", {className: "box form"}, h("label", {}, "format", f.format), h("label", {}, "algorithm preset (rl)", f.algo), h("label", {}, "credit (rl)", f.credit),
      h("label", {}, "gamma (step credit)", f.gamma), h("label", {}, "min reward", f.min_reward), h("label", {}, "ready groups only", f.ready),
      h("label", {}, "drop quality (comma; none keeps all)", f.drop),
      h("p", {}, h("button", {id: "b-preview", onclick: () => run(false)}, "preview"), " ", f.output, " ", h("button", {id: "b-export", onclick: () => run(true)}, "export to file"))),
    result);
  return [];
}

function barChart(groups) {
  const W = Math.max(360, 90 * groups.length + 60), H = 220, top = 10, bottom = 60, left = 36;
  const bw = 26, plotH = H - top - bottom;
  const svg = h("svg", {width: W, height: H, viewBox: `0 0 ${W} ${H}`, id: "report-chart"});
  for (const t of [0, 0.5, 1]) {
    const y = top + plotH * (1 - t);
    svg.appendChild(h("line", {x1: left, x2: W, y1: y, y2: y, stroke: "#dde3e9"}));
    svg.appendChild(h("text", {x: 4, y: y + 4}, t.toFixed(1)));
  }
  groups.forEach((g, i) => {
    const x = left + 10 + i * 90;
    [[g.mean_score, "#2764c5", "mean"], [g.pass_rate, "#1f8a4c", "pass"]].forEach(([v, col, what], j) => {
      const hgt = plotH * (v || 0);
      svg.appendChild(h("rect", {x: x + j * (bw + 2), y: top + plotH - hgt, width: bw, height: hgt, fill: col}, h("title", {}, `${g.name} ${what} ${fmt.num(v)}`)));
    });
    svg.appendChild(h("text", {x, y: H - bottom + 14}, g.name.length > 14 ? g.name.slice(0, 13) + "\u2026" : g.name));
  });
  return svg;
}

async function pageReport(sid) {
  crumbs(link("#/", "home"), link(`#/run/${sid}`, srcLabel(sid)), "report");
  const r = await api(`/api/run/${sid}/report`);
  const groups = [...r.categories.filter((g) => g.scored), Object.assign({}, r.overall, {name: "overall"})];
  const s = r.settings || {};
  $main().replaceChildren(h("h1", {}, `${r.suite}: ${s.agent || "?"}${s.model ? " / " + s.model : ""} (k=${r.k})`),
    h("div", {className: "box"}, barChart(groups), h("div", {className: "muted"}, "blue: mean score, green: pass rate")),
    h("table", {id: "report-table"}, h("thead", {}, h("tr", {}, ["category", "tasks", "scored", "mean", "pass", "pass@k", "mean \u00b1 std (runs)", "infra", "not scored"].map((c) => h("th", {}, c)))),
      h("tbody", {}, [...r.categories, Object.assign({}, r.overall, {name: "overall"})].map((g) => h("tr", {},
        h("td", {}, g.name), h("td", {className: "num"}, g.tasks), h("td", {className: "num"}, g.scored), h("td", {className: "num"}, fmt.num(g.mean_score)),
        h("td", {className: "num"}, fmt.pct(g.pass_rate)), h("td", {}, Object.entries(g.pass_at || {}).map(([k, v]) => `${k}=${fmt.pct(v)}`).join(" ") || "-"),
        h("td", {className: "num"}, g.mean_over_runs === null ? "-" : `${fmt.num(g.mean_over_runs)} \u00b1 ${fmt.num(g.std_over_runs)}`),
        h("td", {className: "num"}, g.infra_errors), h("td", {className: "num"}, g.skipped + g.unscored))))),
    r.infra_errors && r.infra_errors.length ? h("div", {className: "notice"}, `${r.infra_errors.length} infrastructure error(s), not scored`) : "");
  return [sid];
}

function lineChart(rows, keys) {
  const W = 560, H = 240, left = 40, right = 10, top = 10, bottom = 30;
  const xs = rows.map((r, i) => (r.version ?? i));
  const n = Math.max(1, rows.length - 1);
  const svg = h("svg", {width: W, height: H, viewBox: `0 0 ${W} ${H}`, id: "rl-chart"});
  const X = (i) => left + (W - left - right) * (rows.length > 1 ? i / n : 0.5);
  const Y = (v) => top + (H - top - bottom) * (1 - Math.max(0, Math.min(1, v || 0)));
  for (const t of [0, 0.5, 1]) { svg.appendChild(h("line", {x1: left, x2: W - right, y1: Y(t), y2: Y(t), stroke: "#dde3e9"})); svg.appendChild(h("text", {x: 4, y: Y(t) + 4}, t.toFixed(1))); }
  rows.forEach((r, i) => svg.appendChild(h("text", {x: X(i) - 8, y: H - 10}, "v" + xs[i])));
  keys.forEach(([k, col]) => {
    svg.appendChild(h("polyline", {fill: "none", stroke: col, "stroke-width": 2, points: rows.map((r, i) => `${X(i)},${Y(r[k])}`).join(" ")}));
    rows.forEach((r, i) => svg.appendChild(h("circle", {cx: X(i), cy: Y(r[k]), r: 3, fill: col}, h("title", {}, `v${xs[i]} ${k} ${fmt.num(r[k])}`))));
  });
  return svg;
}

async function pageRL(sid) {
  crumbs(link("#/", "home"), srcLabel(sid));
  const d = await api(`/api/rl/${sid}`);
  const out = [h("h1", {}, "RL training: " + d.label)];
  if (d.errors.length) out.push(h("div", {className: "notice"}, d.errors.join("\n")));
  if (d.state) out.push(h("div", {className: "box"}, `last published policy version: ${d.state.version ?? "-"}`));
  out.push(h("h2", {}, "Reward per iteration"));
  if (d.metrics.length) {
    out.push(h("div", {className: "box"}, lineChart(d.metrics, [["mean_reward", "#2764c5"], ["pass_rate", "#1f8a4c"]]), h("div", {className: "muted"}, "blue: mean reward, green: pass rate, by the policy version rolled out")));
    const cols = ["version", "published", "episodes", "mean_reward", "pass_rate", "batch_rows", "staleness_mean", "rollout_s", "train_s"];
    out.push(h("table", {id: "rl-metrics"}, h("thead", {}, h("tr", {}, cols.map((c) => h("th", {}, c)))),
      h("tbody", {}, d.metrics.map((r) => h("tr", {}, cols.map((c) => h("td", {className: "num"}, typeof r[c] === "number" && !Number.isInteger(r[c]) ? fmt.num(r[c]) : (r[c] ?? "-"))))))));
  } else out.push(h("p", {className: "muted"}, "no iteration finished yet"));
  out.push(h("h2", {}, "Policy versions in the pool"));
  out.push(h("table", {id: "rl-versions"}, h("thead", {}, h("tr", {}, ["version", "steps", "trajectories", "ended", "mean reward"].map((c) => h("th", {}, c)))),
    h("tbody", {}, d.policy_versions.map((v) => h("tr", {}, h("td", {}, d.pool_id && v.version !== null ? link(`#/pool/${d.pool_id}?policy=${encodeURIComponent(v.version)}`, v.version) : (v.version ?? "-")),
      h("td", {className: "num"}, v.steps), h("td", {className: "num"}, v.trajectories), h("td", {className: "num"}, v.ended), h("td", {className: "num"}, fmt.num(v.mean_reward)))))));
  if (d.run_ids.length) out.push(h("h2", {}, "Rollouts"), h("ul", {}, d.run_ids.map((r) => h("li", {}, link(`#/run/${r}`, srcLabel(r))))));
  $main().replaceChildren(...out);
  return [sid, d.pool_id].filter(Boolean);
}

async function pageCompare(a, b) {
  crumbs(link("#/", "home"), "compare");
  const d = await api(`/api/compare?a=${encodeURIComponent(a)}&b=${encodeURIComponent(b)}`);
  const cell = (sid, eps) => h("td", {}, eps.map((e, i) => [i ? ", " : "", link(`#/run/${sid}/t/${encodeURIComponent(e.id)}`, `${fmt.num(e.score, 2)}`, {title: `${e.id}: ${e.status}, ${e.rounds} rounds, ${e.tool_calls} tool calls`})]));
  $main().replaceChildren(h("h1", {}, `${d.a.label} against ${d.b.label}`),
    h("table", {id: "compare-table"}, h("thead", {}, h("tr", {}, h("th", {}, "task"), h("th", {className: "num"}, "mean A"), h("th", {className: "num"}, "mean B"), h("th", {}, "episodes A"), h("th", {}, "episodes B"), h("th", {}, ""))),
      h("tbody", {}, d.tasks.map((t) => h("tr", {className: "compare-row", "data-task": t.task_id}, h("td", {}, t.task_id), h("td", {className: "num"}, fmt.num(t.mean_a)), h("td", {className: "num " + ((t.mean_b ?? 0) > (t.mean_a ?? 0) ? "pass" : (t.mean_b ?? 0) < (t.mean_a ?? 0) ? "fail" : "")}, fmt.num(t.mean_b)),
        cell(d.a.id, t.a), cell(d.b.id, t.b), h("td", {}, link(`#/compare/${a}/${b}/${encodeURIComponent(t.task_id)}`, "side by side", {className: "side-link"})))))));
  return [a, b];
}

// one task of two runs, in two columns: an episode of each (pickers when a run has several), their outcome and
// verdict, then their steps row by row (step i of A beside step i of B)
async function pageCompareTask(a, b, task, q) {
  const base = `#/compare/${a}/${b}/${encodeURIComponent(task)}`;
  crumbs(link("#/", "home"), link(`#/compare/${a}/${b}`, "compare"), task);
  const d = await api(`/api/compare?a=${encodeURIComponent(a)}&b=${encodeURIComponent(b)}&task=${encodeURIComponent(task)}`);
  const row = d.tasks[0];
  if (!row) throw new Error(`task ${task}: in neither run`);
  const pick = {a: q.get("ea") || (row.a[0] && row.a[0].id), b: q.get("eb") || (row.b[0] && row.b[0].id)};
  const [ta, tb] = await Promise.all([a, b].map((sid, i) => {
    const id = pick[i ? "b" : "a"];
    return id ? api(`/api/run/${sid}/trajectory?id=${encodeURIComponent(id)}`) : Promise.resolve(null);
  }));
  const head = (side, src, eps, t) => {
    const sel = h("select", {className: "episode-pick", onchange: (ev) => {
      const p = {ea: pick.a, eb: pick.b};
      p["e" + side] = ev.target.value;
      setQuery(base, p);
    }}, eps.map((e) => h("option", {value: e.id, selected: e.id === pick[side]}, `${e.id} (${fmt.num(e.score, 2)}, ${e.status})`)));
    const v = t && t.verdict;
    return h("div", {className: `box side-head side-${side}`},
      h("h2", {}, `${side.toUpperCase()}: ${src.label}`),
      eps.length ? h("label", {}, "episode ", sel) : h("p", {className: "muted"}, "no episode of this task in this run"),
      t ? h("dl", {className: "kv"}, [
        ["agent / model", `${t.agent} / ${t.model || "-"}`],
        ["status", t.status + (t.error ? ` (${t.error.kind}: ${t.error.message})` : "")],
        ["score", v ? `${fmt.num(v.score)} (${v.passed ? "passed" : "not passed"})` : "-"],
        ["steps / tool calls", `${t.turns.length} / ${t.tool_calls}`],
        ["checks", v && v.checks ? Object.entries(v.checks).map(([k, x]) => `${k} ${fmt.num(x, 2)}`).join(", ") || "-" : "-"],
      ].map(([k, x]) => [h("dt", {}, k), h("dd", {className: "side-" + k.split(" ")[0]}, x)])) : null,
      t ? link(`#/run/${src.id}/t/${encodeURIComponent(t.id)}`, "the whole trajectory (workspace, checker output)") : null);
  };
  const turnsA = ta ? ta.turns : [], turnsB = tb ? tb.turns : [];
  const n = Math.max(turnsA.length, turnsB.length);
  const none = (t, i) => h("div", {className: "turn muted"}, t ? `no step ${i}: the episode ended after ${t.turns.length}` : "-");
  const rows = [];
  for (let i = 0; i < n; i++) {
    rows.push(h("div", {className: "grid2 side-row", "data-step": i},
      h("div", {className: "side-a"}, i < turnsA.length ? renderTurn(turnsA[i], i) : none(ta, i)),
      h("div", {className: "side-b"}, i < turnsB.length ? renderTurn(turnsB[i], i) : none(tb, i))));
  }
  const finals = (ta && ta.final_message) || (tb && tb.final_message) ? h("div", {className: "grid2 side-row side-final"},
    h("pre", {className: "box side-a"}, (ta && ta.final_message) || "(no final message)"),
    h("pre", {className: "box side-b"}, (tb && tb.final_message) || "(no final message)")) : null;
  const out = [h("h1", {}, `${task}: ${d.a.label} against ${d.b.label}`),
    h("div", {className: "grid2", id: "side-heads"}, head("a", d.a, row.a, ta), head("b", d.b, row.b, tb)),
    h("h2", {}, `Steps side by side (${turnsA.length} against ${turnsB.length})`),
    h("div", {className: "cards", id: "side-by-side"}, rows.length ? rows : h("p", {className: "muted"}, "neither episode has a step"))];
  if (finals) out.push(h("h2", {}, "Final messages"), finals);
  $main().replaceChildren(...out);
  return [a, b];
}

// ---------------------------------------------------------------------------------------------- router

async function route() {
  const {parts, query} = parseHash();
  showError("");
  try {
    if (!sources.length) sources = (await api("/api/sources")).sources;
    let watch;
    const [kind, sid, sub, id] = parts;
    if (!kind) watch = await pageHome();
    else if (kind === "run" && sub === "t") watch = await pageRunTrajectory(sid, id);
    else if (kind === "run") watch = await pageRun(sid, query);
    else if (kind === "pool" && sub === "t") watch = await pagePoolTrajectory(sid, id);
    else if (kind === "pool") watch = await pagePool(sid, query);
    else if (kind === "batch") watch = await pageBatch(sid);
    else if (kind === "report") watch = await pageReport(sid);
    else if (kind === "rl") watch = await pageRL(sid);
    else if (kind === "compare" && id !== undefined) watch = await pageCompareTask(sid, sub, id, query);
    else if (kind === "compare") watch = await pageCompare(sid, sub);
    else throw new Error("unknown page " + location.hash);
    current = {watch: watch || []};
    document.body.setAttribute("data-loaded", location.hash || "#/");
    // the page's main content is in the DOM: benchmarks/perf/view.py reads this mark (time to first render)
    performance.mark("clawgym:rendered", {detail: location.hash || "#/"});
  } catch (e) {
    showError(e.message);
    if ($main().textContent === "loading...") $main().replaceChildren();
    document.body.setAttribute("data-loaded", "error");
  }
}

function startLive() {
  const el = document.getElementById("live");
  const es = new EventSource("/api/live");
  es.onopen = () => { el.textContent = "live"; el.className = "on"; };
  es.onerror = () => { el.textContent = "live: reconnecting"; el.className = ""; };
  es.addEventListener("change", (ev) => {
    let changed = [];
    try { changed = JSON.parse(ev.data).sources; } catch (e) { return; }
    if (!current || !changed.some((s) => current.watch.includes(s))) return;
    // the batch and curation forms keep their state: only list and read-only pages refresh by themselves
    if (document.activeElement && ["INPUT", "SELECT", "TEXTAREA"].includes(document.activeElement.tagName)) return;
    clearTimeout(liveTimer);
    liveTimer = setTimeout(route, 250);
  });
}

window.addEventListener("hashchange", route);
window.addEventListener("DOMContentLoaded", () => { route(); startLive(); });
