"""The `data` group of operation generators (aggregate, reconcile, extract, convert, organize, rename,
de-duplicate, inventory): every generated task validates in a real sandbox (reference 1.0, untouched workspace 0
on every check, partial strictly between), chains consume the previous step's output, and generation is
deterministic."""

from __future__ import annotations

import json
import random

import pytest

from clawgym.core.records import GeneratedContent, WorkspaceFile
from clawgym.core.taxonomy import load_taxonomy
from clawgym.synth.compose import compose_task
from clawgym.synth.ops import (
    aggregate_and_report,
    batch_rename,
    clean_data,
    convert_format,
    deduplicate_files,
    extract_structured_data,
    inventory_and_archive,
    organize_files,
    reconcile_records,
)
from clawgym.synth.ops.base import CONFIG, MESSAGES, RECORDS, Artifact, Check, OpContext, StepPlan, write
from clawgym.synth.personas import load_personas
from clawgym.synth.validate import validate_candidate

MODULES = [aggregate_and_report, reconcile_records, extract_structured_data, convert_format, organize_files,
           batch_rename, deduplicate_files, inventory_and_archive]
GENS = {m.GENERATORS[0].id: m.GENERATORS[0] for m in MODULES}
CLEAN = clean_data.GENERATORS[0]


@pytest.fixture(scope="module")
def tax():
    return load_taxonomy()


@pytest.fixture(scope="module")
def personas(tax):
    return load_personas(taxonomy=tax)


def _check(cand, backend):
    v = validate_candidate(cand, backend)
    assert v.ok, (f"{cand.task.operations}: {v.reason}: {v.detail}\n"
                  f"partial={v.partial.checks if v.partial else None}\n{cand.task.instruction}")
    return v


def _chain(tax, persona, sub, registry, want, seed):
    """compose_task with `registry` until the chain is exactly `want` (the composer picks starters at random)."""
    for k in range(200):
        cand = compose_task(f"t{seed}-{k}", persona, sub, tax, registry, random.Random(seed * 1000 + k), len(want))
        if cand.task.operations == want:
            return cand
    raise AssertionError(f"could not compose the chain {want}")


# --------------------------------------------------------------------------------------------- single steps


@pytest.mark.parametrize("op", sorted(GENS))
def test_single_op_validates(op, tax, personas, bwrap_backend):
    gen = GENS[op]
    subs = tax.subcategories_for(op)
    for seed in range(6):
        persona = personas[(seed * 37 + len(op)) % len(personas)]
        sub = subs[seed % len(subs)]
        cand = compose_task(f"{op}-{seed}", persona, sub, tax, {op: gen}, random.Random(seed), 1)
        assert cand.task.operations == [op]
        plan = cand.plans[0]
        assert 3 <= len(plan.checks) <= 6
        assert all(c.name and c.name == c.name.lower() and " " not in c.name for c in plan.checks)
        assert plan.fingerprint and plan.summary and plan.outputs
        _check(cand, bwrap_backend)


@pytest.mark.parametrize("op", sorted(GENS))
def test_deterministic(op, tax, personas):
    gen = GENS[op]
    sub = tax.subcategories_for(op)[0]
    a = compose_task("d", personas[3], sub, tax, {op: gen}, random.Random(42), 1)
    b = compose_task("d", personas[3], sub, tax, {op: gen}, random.Random(42), 1)
    c = compose_task("d", personas[3], sub, tax, {op: gen}, random.Random(43), 1)
    assert a.task.model_dump_json() == b.task.model_dump_json()
    assert a.plans[0] == b.plans[0]
    assert a.fingerprint == b.fingerprint != c.fingerprint


# --------------------------------------------------------------------------------------------- chains


CHAINS = [
    ("clean_data", "aggregate_and_report"),
    ("extract_structured_data", "convert_format"),
    ("reconcile_records", "convert_format"),
    ("clean_data", "reconcile_records"),
    ("clean_data", "convert_format"),
    ("aggregate_and_report", "extract_structured_data"),
    ("aggregate_and_report", "convert_format"),
    ("extract_structured_data", "aggregate_and_report"),
    ("reconcile_records", "aggregate_and_report"),
]


@pytest.mark.parametrize("first,second", CHAINS)
def test_chain_validates(first, second, tax, personas, bwrap_backend):
    registry = {**GENS, CLEAN.id: CLEAN}
    registry = {first: registry[first], second: registry[second]}
    sub = next(s for s in tax.subcategories if first not in s.operations and second not in s.operations)
    for seed in range(2):
        cand = _chain(tax, personas[seed * 11 % len(personas)], sub, registry, [first, second], seed)
        assert len(cand.plans) == 2 and 3 <= len(cand.plans[1].checks) <= 6
        src = cand.plans[0].outputs
        assert any(f"`{a.path}`" in cand.plans[1].instruction for a in src), cand.plans[1].instruction
        assert not cand.plans[1].files or second in ("reconcile_records",)  # the consumer uses the given input
        _check(cand, bwrap_backend)


class HandMade:
    """A stand-in predecessor whose output is a hand-built artifact (messages, records, config)."""

    consumes: tuple[str, ...] = ()
    standalone = True

    def __init__(self, kind: str, files: list[WorkspaceFile], artifact: Artifact):
        self.id = f"hand_{kind}"
        self.produces = (kind,)
        self.files, self.artifact = files, artifact

    def plan(self, ctx: OpContext, source: Artifact | None) -> StepPlan:
        ctx.used_paths.update(f.path for f in self.files)
        ctx.used_paths.add("ack.txt")
        return StepPlan(operation=self.id, instruction=f"Have a look at `{self.artifact.path}` and write ok into "
                        "`ack.txt`.", checks=[Check("ack_written", "file_exists", {"path": "ack.txt"})],
                        steps=[write("ack.txt", "ok\n")], partial=[], files=list(self.files),
                        outputs=[self.artifact], summary="ack", fingerprint=self.id)


def _messages() -> HandMade:
    msgs = [
        {"from": "Nadia Karimi <nadia.karimi@example.org>", "to": "me@example.org", "subject": "Rota for May",
         "date": "2026-04-28T09:15:00", "body": "Can you check the May rota?"},
        {"from": "olu.bello@example.org", "to": "me@example.org", "subject": "Invoice 118 overdue",
         "date": "2026-04-21T16:40:00", "body": "Invoice 118 is overdue."},
        {"from": "Lars Nilsen <lars.nilsen@example.org>", "to": "me@example.org", "subject": "Re: supplies",
         "date": "2026-04-30T08:05:00", "body": "Gloves arrive Friday."},
    ]
    files = [WorkspaceFile(path=f"mail_in/{i + 1:02d}.eml", generate=GeneratedContent(kind="eml", params=m))
             for i, m in enumerate(msgs)]
    return HandMade(MESSAGES, files, Artifact("mail_in", MESSAGES, msgs, "the messages in my inbox folder (mail_in)"))


def _records() -> HandMade:
    recs = [{"name": "Mei Chen", "room": "B12", "seats": 4, "booked": True, "rate": 12.5},
            {"name": "Ivan Volkov", "room": "A03", "seats": 2, "booked": False, "rate": None},
            {"name": "Rosa Garcia", "room": "C07", "seats": 6, "booked": True, "rate": 18.0}]
    text = json.dumps(recs, indent=2) + "\n"
    return HandMade(RECORDS, [WorkspaceFile(path="bookings.json", content=text)],
                    Artifact("bookings.json", RECORDS, recs, "the room bookings (bookings.json)"))


def _config() -> HandMade:
    cfg = {"service": "intake", "port": 8443, "debug": False, "workers": 3.5,
           "db": {"host": "db.internal", "pool": {"min": 1, "max": 8}}, "admins": ["a@example.org", "b@example.org"],
           "proxy": None}
    text = json.dumps(cfg, indent=2) + "\n"
    return HandMade(CONFIG, [WorkspaceFile(path="intake_service.json", content=text)],
                    Artifact("intake_service.json", CONFIG, cfg, "the intake service config (intake_service.json)"))


def _table(kind: str) -> HandMade:
    from clawgym.synth.ops.base import TABLE
    from clawgym.synth.ops.clean_data import to_csv

    if kind == "counts":  # a category column, no numbers -> rows per category
        header, roles = ["task", "owner", "status"], {"name": "task", "group": "status"}
        rows = [["Order gloves", "Mei Chen", "open"], ["Book room", "Lars Nilsen", "done"],
                ["Call supplier", "Mei Chen", "open"], ["Fix rota", "Uma Patel", "blocked"],
                ["Send report", "Lars Nilsen", "open"]]
    elif kind == "ranking":  # one row per item with a number -> ranking with shares
        header, roles = ["endpoint", "errors", "last_error"], {"name": "endpoint", "value": "errors"}
        rows = [["/api/login", "7", "2026-03-01 10:00:01"], ["/", "3", "2026-03-01 09:12:44"],
                ["/healthz", "3", "2026-03-01 11:40:00"], ["/api/orders", "12", "2026-03-01 08:02:19"]]
    else:  # keyed records -> reconcile against another system's copy
        header, roles = ["name", "email", "phone", "company"], {"name": "name", "group": "company"}
        rows = [["Amara Zhang", "amara.zhang@river.example", "+16175890342", "River Supplies"],
                ["Bjorn Rossi", "bjorn.rossi@bright.example", "+12121716397", "Bright Foods"],
                ["Diego Brown", "diego.brown@north.example", "", "North Studio"],
                ["Emeka Eze", "emeka.eze@river.example", "+16175882071", "River Supplies"]]
    path = f"{kind}.csv"
    return HandMade(TABLE, [WorkspaceFile(path=path, content=to_csv(header, rows))],
                    Artifact(path, TABLE, {"header": header, "rows": rows}, f"the {kind} sheet ({path})", roles=roles))


def _ini(ext: str) -> HandMade:
    if ext == "env":
        cfg = {"APP_PORT": "8080", "DEBUG": "false", "DB_URL": "postgres://db.internal/app", "RATIO": "0.75",
               "ZIP": "00123"}
        text = "".join(f"{k}={v}\n" for k, v in cfg.items())
        path = "deploy/production.env"
    else:
        cfg = {"server": {"port": "8443", "debug": "True", "host": "0.0.0.0"},
               "cache": {"ttl": "600", "backend": "redis", "ratio": "1.5"}}
        text = "".join(f"[{s}]\n" + "".join(f"{k} = {v}\n" for k, v in kv.items()) + "\n" for s, kv in cfg.items())
        path = "deploy/service.ini"
    return HandMade(CONFIG, [WorkspaceFile(path=path, content=text)],
                    Artifact(path, CONFIG, cfg, f"the updated service config ({path})"))


def _kv_doc() -> HandMade:
    from clawgym.synth.ops.base import DOCUMENT

    text = ("# Certificate: C-102\n\n- name: Rosa Garcia\n- course: First aid basics\n- hours: 12\n"
            "- completed: 2026-03-14\n\nPrepared by the training office.\n")
    return HandMade(DOCUMENT, [WorkspaceFile(path="certs/c-102.md", content=text)],
                    Artifact("certs/c-102.md", DOCUMENT, text, "the first certificate (certs/c-102.md)"))


@pytest.mark.parametrize("maker,op", [
    (_messages, "extract_structured_data"), (_kv_doc, "extract_structured_data"),
    (_records, "convert_format"), (_config, "convert_format"),
    (lambda: _ini("ini"), "convert_format"), (lambda: _ini("env"), "convert_format"),
    (lambda: _table("counts"), "aggregate_and_report"), (lambda: _table("ranking"), "aggregate_and_report"),
    (lambda: _table("keyed"), "reconcile_records"),
])
def test_chain_from_hand_made_artifact(maker, op, tax, personas, bwrap_backend):
    hand = maker()
    registry = {hand.id: hand, op: GENS[op]}
    sub = next(s for s in tax.subcategories if op not in s.operations)
    for seed in range(2):
        cand = _chain(tax, personas[(seed * 5 + 2) % len(personas)], sub, registry, [hand.id, op], seed)
        assert len(cand.plans) == 2 and 3 <= len(cand.plans[1].checks) <= 6
        assert f"`{hand.artifact.path}`" in cand.plans[1].instruction
        if op != "reconcile_records":
            assert not cand.plans[1].files  # everything comes from the previous step
        else:  # only the other side of the comparison is new
            assert len(cand.plans[1].files) == 1
        _check(cand, bwrap_backend)


# --------------------------------------------------------------------------------------------- check primitives


def test_checklib_data_primitives(tmp_path):
    from clawgym.checks import checklib_data as cd

    (tmp_path / "log.csv").write_text("old_path,new_path\n./inv.txt,invoices/inv.txt\ndl/a.jpg,dl/photos/a.jpg\n")
    rows = [["dl/inv.txt", "dl/invoices/inv.txt"], ["dl/a.jpg", "dl/photos/a.jpg"]]
    assert cd.data_path_rows(tmp_path, "log.csv", ["old_path", "new_path"], rows, ["old_path", "new_path"],
                             base="dl") == 1.0
    assert cd.data_path_rows(tmp_path, "log.csv", ["old_path", "new_path"], rows, ["old_path", "new_path"]) == 0.5
    assert cd.data_path_rows(tmp_path, "missing.csv", ["old_path"], [["x"]]) == 0.0

    recs = [{"item": "gloves", "qty": 3, "price": 2.5, "note": None}, {"item": "masks", "qty": 10, "price": 1.0,
                                                                       "note": "yes"}]
    (tmp_path / "r.json").write_text('[{"Item": "gloves", "qty": "3", "price": "2.50", "note": ""},'
                                     ' {"item": "masks", "qty": 10, "price": 1, "note": "yes"}]')
    assert cd.data_records(tmp_path, "r.json", recs) == 1.0
    assert cd.data_records(tmp_path, "r.json", recs, typed=True) == 0.5
    (tmp_path / "r.yaml").write_text("- {item: masks, qty: 10, price: 1.0, note: yes}\n"
                                     "- {item: gloves, qty: 3, price: 2.5, note: null}\n")
    assert cd.data_records(tmp_path, "r.yaml", recs, typed=True) == 1.0
    assert cd.data_records(tmp_path, "r.yaml", recs, ordered=True) == 0.0

    (tmp_path / "report.md").write_text("# Summary\n\nGrand total: **$7,985.88**; top: Travel (3,610.50).\n")
    assert cd.data_numbers_in_text(tmp_path, "report.md", [7985.88, 3610.5], ["travel"]) == 1.0
    assert cd.data_numbers_in_text(tmp_path, "report.md", [7900.0, 1.0]) == 0.0

    (tmp_path / "keep.md").write_text("a\n")
    assert cd.data_removed_kept(tmp_path, ["gone.md", "keep.md"], {"keep.md": "a"}) == 0.5
    assert cd.data_removed_kept(tmp_path, ["gone.md"], {"keep.md": "b"}) == 0.0

    cfg = {"port": 8080, "debug": False, "db": {"host": "x", "tags": ["a", "b"]}, "limit": None}
    (tmp_path / "c.yaml").write_text("port: '8080'\ndebug: false\ndb:\n  host: x\n  tags: [a, b]\nlimit: null\n")
    assert cd.data_config_types(tmp_path, "c.yaml", cfg) == 0.8
    assert cd.data_config_keys(tmp_path, "c.yaml", ["port", "debug", "db", "limit"]) == 1.0
    assert cd.data_header_is(tmp_path, "log.csv", ["old_path", "new_path"]) == 1.0
    assert cd.data_header_is(tmp_path, "log.csv", ["new_path", "old_path"]) == 0.0
