"""The phrasing grammar of the template generators (clawgym.synth.grammar) and the persona's world names."""

from __future__ import annotations

import random

import pytest

from clawgym.synth import grammar, world
from clawgym.synth.grammar import GrammarError, expand, requirements
from clawgym.synth.personas import load_personas


def test_expand_draws_every_alternative_and_only_those():
    seen = {expand("[a|b|c] x", random.Random(i)) for i in range(200)}
    assert seen == {"A x", "B x", "C x"}


def test_expand_nested_optional_and_synonyms():
    seen = {expand("sort [[them|the rows] |]now, [@save] it", random.Random(i)) for i in range(400)}
    firsts = {s.split(",")[0] for s in seen}
    assert firsts == {"Sort them now", "Sort the rows now", "Sort now"}
    assert {s.split(", ")[1].split()[0] for s in seen} == set(grammar.SYNONYMS["save"])


def test_slots_are_filled_after_the_choices_and_never_parsed():
    text = expand("write `{path}` as [JSON|json]: {example}", random.Random(1), path="out/[a|b].json",
                  example='["x", "y"]')
    assert "`out/[a|b].json`" in text and text.endswith('["x", "y"]')


def test_same_seed_same_text():
    t = "[Please|Kindly] [@sort] the [rows|lines] [by date|chronologically] [and [@save] them|]"
    assert expand(t, random.Random(7)) == expand(t, random.Random(7))


def test_escapes_and_literal_bar():
    assert expand(r"a \[1\] | b", random.Random(0)) == "A [1] | b"


@pytest.mark.parametrize("bad", ["[a|b", "a]b", "[@nosuchset]"])
def test_bad_templates_fail_clearly(bad):
    with pytest.raises(GrammarError):
        expand(bad, random.Random(0))


def test_missing_slot_fails():
    with pytest.raises(GrammarError, match="path"):
        expand("write {path}", random.Random(0))


def test_requirements_styles_keep_every_item():
    items = ["write dates as YYYY-MM-DD", "drop blank rows", "sort by date"]
    for style in grammar.STYLES:
        text = requirements(random.Random(3), items, style=style)
        assert all(i.casefold() in text.casefold() for i in items), (style, text)
    assert requirements(random.Random(3), items, style="sentence", fixed_order=True) == (
        "Write dates as YYYY-MM-DD, drop blank rows and sort by date.")
    numbered = requirements(random.Random(3), items, style="numbered", fixed_order=True, lead="Do this:")
    assert numbered.splitlines() == ["Do this:", "1. write dates as YYYY-MM-DD", "2. drop blank rows",
                                     "3. sort by date"]


def test_world_names_come_from_the_persona_files():
    personas = {p.id: p for p in load_personas()}
    amara = personas["amara_okafor"]  # files: rota/2024-*.xlsx, vaccine_stock.csv, inbox/*.eml, cpd_hours.md
    assert world.folders(amara) == ["rota", "inbox"]
    assert world.stems(amara) == ["vaccine_stock", "cpd_hours"]
    got = {world.folder(amara, random.Random(i), ["data"]) for i in range(100)}
    assert got == {"rota", "inbox", "data"}


def test_world_draws_the_same_number_of_values_with_or_without_names():
    personas = load_personas()
    with_names = next(p for p in personas if world.folders(p))
    a, b = random.Random(5), random.Random(5)
    world.folder(with_names, a, ["x"])
    world.folder(with_names.model_copy(update={"files": ["*.csv"]}), b, ["x"])
    assert a.random() == b.random()


def test_a_clause_keeps_its_first_letter_and_leading_space():
    assert expand(" [leave|keep] {x} out.", random.Random(0), clause=True, x="A").startswith((" leave A", " keep A"))
    assert expand(" [leave|keep] {x} out.", random.Random(0), x="A").startswith(("Leave A", "Keep A"))


def test_a_file_extension_keeps_its_space_while_an_empty_choice_before_a_full_stop_folds():
    assert expand("book it in the .ics file[ now|].", random.Random(0)) in ("Book it in the .ics file now.",
                                                                           "Book it in the .ics file.")
    assert expand("a short .md note [x|] , then b [y|] .", random.Random(3)).startswith("A short .md note")
    assert " ," not in expand("a [|] , b", random.Random(0)) and " ." not in expand("a [|] .", random.Random(0))


def test_half_choices_draw_from_one_half_and_share_the_rng():
    opts = ["a", "b", "c", "d", "e"]
    for half, allowed in ((0, {"a", "c", "e"}), (1, {"b", "d"})):
        h = grammar.HalfChoices(random.Random(3), half)
        assert {h.choice(opts) for _ in range(200)} == allowed
        assert h.choice(["only"]) == "only"  # one option: nothing to split
        assert h.choice("xy") == "xy"[half] and h.choice(range(10)) % 2 == half
    base, view = random.Random(5), grammar.HalfChoices(random.Random(5), 0)
    view.choice(opts)
    base.choice(opts[0::2])
    assert view.random() == base.random()  # the view advances the RNG it wraps, nothing else
    with pytest.raises(ValueError):
        grammar.HalfChoices(random.Random(0), 2)
    texts = {h: {expand("[one|two|three|four] [@save]", grammar.HalfChoices(random.Random(s), h))
                 for s in range(100)} for h in (0, 1)}
    assert not texts[0] & texts[1]


def test_phrasing_halves_give_the_same_operations_in_disjoint_wording(tmp_path):
    """synth persona --phrasing-half: same seed, same operations and personas per index; the two halves share
    few word 4-grams, and a file is resumed only with the half it was made with."""
    import json
    import re

    from clawgym.core.errors import ClawgymError
    from clawgym.synth.pipeline import synthesize

    opts = dict(validate=False, operations=["clean_data", "build_plan", "draft_message"], max_ops=1)
    files = {}
    for h in (0, 1):
        files[h] = tmp_path / f"h{h}.jsonl"
        synthesize(12, 4, files[h], phrasing_half=h, **opts)
    tasks = {h: [json.loads(line) for line in files[h].read_text().splitlines()] for h in (0, 1)}
    assert [t["operations"] for t in tasks[0]] == [t["operations"] for t in tasks[1]]
    assert [t["metadata"]["persona_id"] for t in tasks[0]] == [t["metadata"]["persona_id"] for t in tasks[1]]
    assert {t["metadata"]["phrasing_half"] for t in tasks[0]} == {0}

    def grams(ts):
        out = set()
        for t in ts:
            w = re.findall(r"\w+", t["instruction"].lower())
            out |= {tuple(w[i:i + 4]) for i in range(len(w) - 3)}
        return out

    g0, g1, g0b = grams(tasks[0][:6]), grams(tasks[1][6:]), grams(tasks[0][6:])
    assert len(g1 & g0) / len(g1) < 0.5 * len(g0b & g0) / len(g0b)
    plain = tmp_path / "plain.jsonl"
    synthesize(2, 4, plain, **opts)
    assert "phrasing_half" not in json.loads(plain.read_text().splitlines()[0])["metadata"]
    before = files[0].read_bytes()
    with pytest.raises(ClawgymError, match="made with --phrasing-half 0; resume with the same options"):
        synthesize(14, 4, files[0], phrasing_half=1, **opts)
    with pytest.raises(ClawgymError, match="made with --phrasing-half 0"):
        synthesize(14, 4, files[0], **opts)
    assert files[0].read_bytes() == before
    with pytest.raises(ClawgymError, match="must be 0 or 1"):
        synthesize(1, 4, tmp_path / "x.jsonl", phrasing_half=2, **opts)


@pytest.mark.parametrize("domain,occupation,key", [
    ("Banking", "software engineer", "software"),  # the occupation first
    ("Audit", "junior auditor", "finance"),  # not software because "audit / " holds "it "
    ("Retired", "retired civil engineer", "general"),  # an engineer is not a software one
    ("Oil & gas", "petroleum engineer", "general"),
    ("Non-profit", "charity fundraising director", "general"),  # "profit" holds "it"
    ("Comics", "webtoon artist", "creative"),  # not "web"
    ("Hospitality", "motel owner", "food"),  # not a hospital
    ("Transport", "taxi company owner", "general"),  # not tax
    ("Healthcare", "pediatric nurse", "health"),
    ("Cloud", "DevOps contractor", "software"),
])
def test_domain_key_reads_the_occupation_first_in_whole_word_starts(domain, occupation, key):
    from clawgym.synth.flavor import domain_key

    assert domain_key(domain, occupation) == key
