"""The request around the step fragments (clawgym.synth.voice), the seeded subcategory mix of a run, and
near-duplicate removal during template runs (issue #20)."""

from __future__ import annotations

import json
import random
import re
from collections import Counter

import pytest

from clawgym.synth import voice
from clawgym.synth.personas import load_personas
from clawgym.synth.pipeline import make_candidate, make_candidates, subcategory_order, synthesize


@pytest.fixture(scope="module")
def personas():
    return load_personas()


@pytest.fixture(scope="module")
def cands():
    return [c for _, _, c in make_candidates(4242, ((i, 0) for i in range(300))) if not isinstance(c, Exception)]


FRAGS = ["Sort `data/in.csv` by date and save it as `out/sorted.csv`.",
         "Email Jamal Kim (jamal.kim@example.org) the number of rows of `out/sorted.csv`."]


def test_fragments_are_kept_byte_for_byte_and_the_same_seed_gives_the_same_request(personas):
    for k, p in enumerate(personas):
        rng = random.Random(k)
        text = voice.compose_request(p, rng, FRAGS, ["out/sorted.csv", None])
        # each fragment whole (a lead-in may lower its first letter, never a name's)
        for f in FRAGS:
            assert f in text or f[:1].lower() + f[1:] in text, text
        assert "jamal Kim" not in text
        assert voice.compose_request(p, random.Random(k), FRAGS, ["out/sorted.csv", None]) == text


def test_requests_vary_in_every_part(cands, personas):
    """Openings, closings and the context around the steps differ from task to task."""
    firsts = Counter(c.task.instruction[:80] for c in cands)
    lasts = Counter(c.task.instruction.rstrip().splitlines()[-1] for c in cands)
    assert len(firsts) > 250 and firsts.most_common(1)[0][1] < 5, firsts.most_common(5)
    assert len(lasts) > 60, lasts.most_common(5)
    by_id = {p.id: p for p in personas}
    signed = sum(by_id[c.task.metadata["persona_id"]].name.split()[0] in c.task.instruction.rstrip().splitlines()[-1]
                 for c in cands)
    assert signed > 40  # many requests end with the persona's first name
    # people and days from the persona's life: a person of flavor.FIRST/LAST, a weekday or a month
    dated = sum(bool(re.search(r"\b(Monday|Tuesday|Wednesday|Thursday|Friday|January|March|June|October|"
                               r"end of the)\b", c.task.instruction)) for c in cands)
    assert dated > 60


def test_quirks_are_realised_in_the_persona_s_own_words(personas):
    by_id = {p.id: p for p in personas}
    amara = by_id["amara_okafor"]  # terse, lowercase; uses "pls", "asap" and "thx"
    q = voice.quirks_of(amara)
    assert q.lowercase and q.please == "pls" and "thx" in q.thanks and "asap" in q.urgent
    texts = [voice.compose_request(amara, random.Random(i), ["Please fix `A/B.csv`: keep the `ID` column."], [None])
             for i in range(60)]
    assert all("Please fix `A/B.csv`: keep the `ID` column." in t for t in texts)  # the fragment untouched
    joined = "\n".join(t.replace("Please fix `A/B.csv`: keep the `ID` column.", "") for t in texts)
    assert joined == joined.lower()  # her own words in lowercase
    assert "thx" in joined and "asap" in joined
    henrik = by_id["henrik_lindqvist"]  # signs off every request with "Best regards, H."
    assert voice.quirks_of(henrik).signoffs == ("Best regards, H.",)
    assert sum(t.rstrip().endswith("Best regards, H.") for t in
               (voice.compose_request(henrik, random.Random(i), FRAGS, [None, None]) for i in range(40))) > 20


def test_lead_ins_keep_names_and_acronyms():
    assert voice.lowerfirst("Jamal Kim emailed me") == "Jamal Kim emailed me"
    assert voice.lowerfirst("Convert the file") == "convert the file"
    assert voice.lowerfirst("HR files") == "HR files"


def test_subcategory_mix_is_balanced_per_round_and_drawn_from_the_seed():
    n = 37
    a, b = subcategory_order(1, 0, n), subcategory_order(2, 0, n)
    assert sorted(a) == list(range(n)) and sorted(b) == list(range(n))
    assert a != b and a != subcategory_order(1, 1, n)
    assert subcategory_order(1, 0, n) == a
    # a seed's first tasks: each subcategory once per round, in an order that differs between seeds
    subs = [[c.task.metadata["subcategory_id"] for _, _, c in make_candidates(seed, ((i, 0) for i in range(12)))]
            for seed in (5, 6)]
    assert subs[0] != subs[1]
    assert make_candidate(5, 3, 0).task.model_dump_json() == make_candidate(5, 3, 0).task.model_dump_json()


def near_copies(seed: int, index: int, attempt: int):
    """Attempt 0 of every index: index 0's request with one word changed (a near-duplicate, not an exact one);
    later attempts: the real candidate. All in one category."""
    cand = make_candidate(seed, index, attempt)
    if attempt == 0:
        base = make_candidate(seed, 0, 0).task.instruction
        cand.task.instruction = base if index == 0 else base + f" (copy {index})"
    cand.task.category = "one category"
    return cand


def test_near_duplicates_are_replaced_by_the_next_attempt(tmp_path):
    out = tmp_path / "t.jsonl"
    report = synthesize(4, 7, out, jobs=1, validate=False, make=near_copies, dedup=True)
    assert report.written == 4
    nd = report.near_duplicates
    assert nd["dropped"] == 3 and nd["replaced"] == 3 and nd["unreplaced"] == 0
    assert report.rejected["near_duplicate"] == 3
    saved = json.loads(out.with_name(out.name + ".report.json").read_text())
    assert saved["near_duplicates"]["dropped"] == 3
    lines = out.read_text().splitlines()
    assert [json.loads(x)["id"] for x in lines] == [f"persona-s7-{i:06d}" for i in range(4)]
    # resumed with the same setting: the same file
    part = tmp_path / "part.jsonl"
    synthesize(2, 7, part, jobs=1, validate=False, make=near_copies, dedup=True)
    synthesize(4, 7, part, jobs=1, validate=False, make=near_copies, dedup=True)
    assert part.read_bytes() == out.read_bytes()
    # without it, the near-copies are written
    plain = tmp_path / "plain.jsonl"
    r = synthesize(4, 7, plain, jobs=1, validate=False, make=near_copies)
    assert r.near_duplicates is None and "near_duplicates" not in json.loads(
        plain.with_name(plain.name + ".report.json").read_text())
    assert sum("(copy " in json.loads(x)["instruction"] for x in plain.read_text().splitlines()) == 3


def test_dedup_run_gives_the_same_bytes_whatever_the_workers(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    synthesize(12, 8, a, jobs=1, validate=False, dedup=True)
    synthesize(12, 8, b, jobs=2, validate=False, dedup=True)
    assert a.read_bytes() == b.read_bytes() and len(a.read_text().splitlines()) == 12


def test_context_never_puts_off_a_file_the_steps_work_on(personas):
    """"My {things} can wait for another day" is about the persona's other files: a folder or file the steps
    use (or its plural) is never the {things} of the request's context."""
    from clawgym.synth import world

    seen = 0
    for p in personas[:40]:
        names = [re.sub(r"[_-]+", " ", n).strip() for n in world.stems(p) + world.folders(p)]
        names = [n for n in names if n and not n.startswith(".")]
        if len(names) < 2:
            continue
        used = names[0]
        plural = used if used.endswith("s") or len(used) < 4 else used + "s"
        steps = f"Rename every file in `{plural.replace(' ', '_')}/` to lowercase."  # the plural of one of them
        for seed in range(20):
            things = voice.Voice(p, random.Random(seed), avoid=steps).slots["things"]
            assert voice._stem(used.casefold().split()[0]) not in {voice._stem(w) for w in
                                                                   things.casefold().split()}, (p.id, used, things)
        free = {voice.Voice(p, random.Random(seed)).slots["things"] for seed in range(60)}
        seen += used in free  # without the steps' text the same name is drawn
    assert seen > 0
