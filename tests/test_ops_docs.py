"""The `docs` operation generators (documents, mail, calendars, contacts, plans, notes, trackers): every op
validates alone in a real sandbox for several seeds and personas (reference 1.0, untouched 0 on every check,
partial strictly between), every consumed artifact kind validates in a two-step chain, and generation is
deterministic."""

from __future__ import annotations

import dataclasses
import random

import pytest

from clawgym.core.taxonomy import load_taxonomy
from clawgym.synth.compose import compose_task
from clawgym.synth.ops import registry
from clawgym.synth.ops.base import OpContext
from clawgym.synth.personas import load_personas
from clawgym.synth.validate import validate_candidate

DOCS_OPS = ["edit_document", "summarize_documents", "generate_from_template", "triage_inbox", "draft_message",
            "schedule_events", "manage_contacts", "build_plan", "organize_notes", "track_tasks"]
SEEDS = [3, 11, 29, 47]


@pytest.fixture(scope="module")
def world():
    tax = load_taxonomy()
    personas = load_personas(taxonomy=tax)
    subs = [s for c in tax.categories for s in c.subcategories]
    return tax, personas, subs, registry()


def _subs_for(subs, op):
    own = [s for s in subs if op in s.operations]
    return own or subs


def _explain(v) -> str:
    return (f"{v.reason}: {v.detail} oracle={v.oracle.checks if v.oracle else None} "
            f"noop={v.noop.checks if v.noop else None} partial={v.partial.checks if v.partial else None}")


@pytest.mark.parametrize("op", DOCS_OPS)
def test_single_op_validates(op, world, bwrap_backend):
    tax, personas, subs, reg = world
    mine = _subs_for(subs, op)
    for seed in SEEDS:
        persona = personas[(seed * 7 + len(op)) % len(personas)]
        sub = mine[seed % len(mine)]
        cand = compose_task(f"docs-{op}-{seed}", persona, sub, tax, {op: reg[op]}, random.Random(seed), 1)
        assert [p.operation for p in cand.plans] == [op]
        plan = cand.plans[0]
        assert 3 <= len(plan.checks) <= 6, [c.name for c in plan.checks]
        assert plan.fingerprint and plan.summary
        # some personas' requests are lower-cased as a whole, so every path the task names must be lower case
        paths = [f.path for f in plan.files] + [s.arguments["path"] for s in plan.steps if s.name == "write"]
        assert all(p == p.lower() for p in paths), paths
        v = validate_candidate(cand, bwrap_backend)
        assert v.ok, f"{op} seed {seed}: {_explain(v)}"


def _chain(world, first: str, second: str, want_kind: str | None = None, start: int = 0):
    """A two-step candidate first -> second (searching seeds until the composer builds that chain and, when
    asked, the first step hands over an artifact of `want_kind`)."""
    tax, personas, subs, reg = world
    for seed in range(start, start + 300):
        rng = random.Random(seed)
        persona = personas[seed % len(personas)]
        sub = subs[seed % len(subs)]
        cand = compose_task(f"docs-chain-{seed}", persona, sub, tax, {first: reg[first], second: reg[second]}, rng, 2)
        if [p.operation for p in cand.plans] != [first, second]:
            continue
        kinds = [a.kind for a in cand.plans[0].outputs if a.kind in reg[second].consumes]
        if want_kind and (not kinds or kinds[0] != want_kind):
            continue
        return cand
    raise AssertionError(f"no seed composes {first} -> {second} ({want_kind})")


CHAINS = [
    ("summarize_documents", "edit_document", "document"),
    ("edit_document", "summarize_documents", "document"),
    ("generate_from_template", "summarize_documents", "messages"),
    ("clean_data", "generate_from_template", "table"),
    ("triage_inbox", "generate_from_template", "records"),
    ("clean_data", "draft_message", "table"),
    ("triage_inbox", "draft_message", "records"),
    ("schedule_events", "draft_message", "events"),
    ("organize_notes", "draft_message", "document"),
    ("build_plan", "schedule_events", "events"),
    ("clean_data", "schedule_events", "table"),
    ("manage_contacts", "schedule_events", "table"),
    ("clean_data", "build_plan", "table"),
    ("triage_inbox", "build_plan", "records"),
    ("edit_document", "track_tasks", "document"),
    ("triage_inbox", "track_tasks", "records"),
    ("generate_from_template", "track_tasks", "messages"),
]


@pytest.mark.parametrize(("first", "second", "kind"), CHAINS, ids=[f"{a}->{b}:{k}" for a, b, k in CHAINS])
def test_chain_validates(first, second, kind, world, bwrap_backend):
    cand = _chain(world, first, second, kind)
    assert len(cand.plans) == 2 and len(cand.task.operations) == 2
    src = next(a for a in cand.plans[0].outputs if a.kind == kind)
    assert src.path in cand.plans[1].instruction or src.description in cand.plans[1].instruction
    v = validate_candidate(cand, bwrap_backend)
    assert v.ok, f"{first} -> {second}: {_explain(v)}"


@pytest.mark.parametrize("op", DOCS_OPS)
def test_deterministic(op, world):
    tax, personas, subs, reg = world
    persona, sub = personas[5 % len(personas)], _subs_for(subs, op)[0]

    def plan(seed: int):
        ctx = OpContext(persona=persona, subcategory=sub, rng=random.Random(seed), step=0, dir="")
        return dataclasses.asdict(reg[op].plan(ctx, None))

    assert plan(7) == plan(7)
    assert plan(7) != plan(8)
    a = compose_task("x", persona, sub, tax, {op: reg[op]}, random.Random(13), 1)
    b = compose_task("x", persona, sub, tax, {op: reg[op]}, random.Random(13), 1)
    assert a.task.model_dump_json() == b.task.model_dump_json()
    assert a.fingerprint == b.fingerprint


def test_docs_checklib_primitives(tmp_path):
    from clawgym.checks import checklib_docs as cl

    (tmp_path / "a.md").write_text("# T\n\n## Budget\n\nSpent **$1,234.50** on Thursday 12 March at 2pm.\n\n"
                                   "## Team\n\n- [Note](sub/n.md)\n", encoding="utf-8")
    assert cl.docs_section_has(tmp_path, "a.md", "budget", ["1234.5", "date:2026-03-12", "time:14:00"]) == 1.0
    assert cl.docs_section_has(tmp_path, "a.md", "team", ["1234.5"]) == 0.0
    assert cl.docs_section_has(tmp_path, "missing.md", "budget", ["x"]) == 0.0
    assert cl.docs_md_links(tmp_path, "a.md", ["sub/n.md", "other.md"]) == 0.5
    assert cl.docs_headings(tmp_path, "a.md", present=["Budget"], absent=["Risks"]) == 1.0
    (tmp_path / "t.json").write_text('[{"file": "inbox/01.eml", "priority": "High", "needs_reply": "yes"}]')
    recs = [{"file": "01.eml", "priority": "high", "needs_reply": True}, {"file": "02.eml", "priority": "low",
                                                                         "needs_reply": False}]
    assert cl.docs_records(tmp_path, "t.json", "file", recs, ["priority", "needs_reply"]) == 0.5
    (tmp_path / "tr.csv").write_text("task,owner,due,status\nSend the vendor list,Ana,2026-03-14,open\n")
    row = {"task": ["vendor list"], "owner": "ana", "due": "2026-03-14", "status": "open"}
    assert cl.docs_tracker_rows(tmp_path, "tr.csv", [row]) == 1.0
    assert cl.docs_tracker_rows(tmp_path, "tr.csv", [dict(row, due="2026-03-15")]) == 0.0
    (tmp_path / "m.eml").write_bytes("From: a@x.org\nTo: Zoë <z@y.org>\nSubject: Re: totals\n\nTotal €1,234.50\n"
                                     .encode())
    assert cl.docs_eml(tmp_path, "m.eml", to=["z@y.org"], subject_has=["re:"], body_has=["1234.50"]) == 1.0


def test_merge_kinds_fill_from_row_fields():
    # every kind of merged document (the general ones and each domain's) names an id field first, a prefix, and
    # placeholders that are all among its fields
    from clawgym.synth.ops.generate_from_template import DOMAIN_KINDS, KINDS, PREFIX, kinds_for

    ids = {"member_id", "cert_id", "invoice_no", "ref", "receipt_no", "badge_id"}
    specs = dict(KINDS) | {k: spec for k, (_, spec) in DOMAIN_KINDS.items()}
    for kind, spec in specs.items():
        assert spec["fields"][0] in ids and kind in PREFIX, kind
        tvals = {f: f"<{f}>" for f in spec["fields"]}
        body = spec["body"].format(org="Org", me="Me", **tvals)
        spec["subject"].format(org="Org", **tvals)
        assert body.startswith("# ") and "\n\n" in body, kind
    assert set(kinds_for("education")) > set(KINDS) and "parent_letter" in kinds_for("education")
    assert "parent_letter" not in kinds_for("finance")


def test_phrase_keeps_acronyms_and_i():
    from clawgym.synth.ops._docs_common import phrase

    rng = random.Random(1)
    assert phrase(rng, ["JSON with {k}"], k="x").startswith("JSON")
    assert phrase(rng, ["I only answer these"]).startswith("I ")
    assert phrase(rng, ["A CSV file"]) == "a CSV file"
