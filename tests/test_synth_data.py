"""The synthesis data: the shipped taxonomy and personas, and the errors their loaders give for bad files."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from clawgym.core.errors import ClawgymError
from clawgym.core.taxonomy import FILE_KINDS
from clawgym.synth import (
    Persona,
    PersonaError,
    Taxonomy,
    TaxonomyError,
    load_personas,
    load_taxonomy,
    persona_summary,
)
from clawgym.synth.personas import PERSONAS_ENV, REPO_PERSONAS_PATH

BENCH_CATEGORIES = {
    "Productivity & Collaboration",
    "Systems & Automation",
    "Analysis & Reasoning",
    "Content & Domain",
    "Planning & Knowledge",
    "Software Development",
}


@pytest.fixture(scope="module")
def taxonomy() -> Taxonomy:
    return load_taxonomy()


@pytest.fixture(scope="module")
def personas(taxonomy: Taxonomy) -> list[Persona]:
    return load_personas(REPO_PERSONAS_PATH, taxonomy=taxonomy)


def line_of(text: str, needle: str, occurrence: int = 1) -> int:
    """1-based line of the n-th line containing `needle`."""
    hits = [i for i, line in enumerate(text.splitlines(), start=1) if needle in line]
    assert len(hits) >= occurrence, f"{needle!r} occurs {len(hits)} times"
    return hits[occurrence - 1]


def assert_located(exc: ClawgymError, path: Path, line: int) -> None:
    msg = str(exc)
    assert "\n" not in msg
    assert path.name in msg
    assert msg.startswith(f"{path}:{line}: "), msg


# --------------------------------------------------------------------------------------------- shipped taxonomy


def test_shipped_taxonomy_counts(taxonomy: Taxonomy) -> None:
    assert len(taxonomy.categories) == 9
    assert len(taxonomy.subcategories) == 43
    assert len(taxonomy.operation_categories) == 7
    assert len(taxonomy.operations) == 26


def test_shipped_taxonomy_has_the_bench_categories(taxonomy: Taxonomy) -> None:
    assert BENCH_CATEGORIES <= {c.name for c in taxonomy.categories}


def test_shipped_taxonomy_references_resolve(taxonomy: Taxonomy) -> None:
    op_ids = {o.id for o in taxonomy.operations}
    op_cat_ids = {c.id for c in taxonomy.operation_categories}
    assert len(op_ids) == len(taxonomy.operations)
    sub_ids = [s.id for s in taxonomy.subcategories]
    assert len(set(sub_ids)) == len(sub_ids)
    for op in taxonomy.operations:
        assert op.category in op_cat_ids
        assert op.file_kinds and set(op.file_kinds) <= FILE_KINDS
        assert op.description.endswith(".")
    for cat in taxonomy.categories:
        for sub in cat.subcategories:
            # at least two ways to start a task; a subcategory lists only operations that do its kind of work
            # from the first step (Log Monitoring: analyse a log, audit a server), generic ones follow
            assert len(sub.operations) >= 2, sub.id
            assert set(sub.operations) <= op_ids, sub.id
            assert taxonomy.category_of(sub.id) is cat
            assert taxonomy.subcategory(sub.id) is sub
    for oc in taxonomy.operation_categories:
        assert taxonomy.operations_in(oc.id), oc.id


def test_every_operation_is_used(taxonomy: Taxonomy) -> None:
    for op in taxonomy.operations:
        subs = taxonomy.subcategories_for(op.id)
        assert subs, op.id
        assert all(op.id in s.operations for s in subs)
        assert taxonomy.operation(op.id) is op


def test_lookups_of_unknown_ids_raise_keyerror(taxonomy: Taxonomy) -> None:
    for lookup in (taxonomy.operation, taxonomy.subcategory, taxonomy.category_of, taxonomy.subcategories_for,
                   taxonomy.category, taxonomy.operation_category):
        with pytest.raises(KeyError, match="nope"):
            lookup("nope")


# --------------------------------------------------------------------------------------------- shipped personas


def test_shipped_personas_load(personas: list[Persona]) -> None:
    assert len(personas) >= 200
    ids = [p.id for p in personas]
    assert len(set(ids)) == len(ids)
    triples = [(p.occupation, p.domain, p.name) for p in personas]
    assert len(set(triples)) == len(triples)
    assert len({p.name for p in personas}) == len(personas)


def test_shipped_personas_are_well_formed(personas: list[Persona]) -> None:
    for p in personas:
        assert 2 <= len(p.subcategories) <= 5, p.id
        assert 2 <= len(p.goals) <= 3, p.id
        assert 2 <= len(p.interests) <= 3, p.id
        assert p.tools and p.files, p.id
        assert re.fullmatch(r".+, .+", p.location), p.id
        assert len(p.name.split()) >= 2, p.id


def test_shipped_personas_are_diverse(personas: list[Persona]) -> None:
    assert len({p.occupation for p in personas}) >= 150
    assert len({p.location.rsplit(", ", 1)[1] for p in personas}) >= 40
    ages = [p.age for p in personas]
    assert min(ages) < 25 and max(ages) >= 70


def test_every_subcategory_has_at_least_four_personas(taxonomy: Taxonomy, personas: list[Persona]) -> None:
    cover = Counter(s for p in personas for s in p.subcategories)
    thin = {s.id: cover[s.id] for s in taxonomy.subcategories if cover[s.id] < 4}
    assert not thin


def test_default_personas_path_and_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                       personas: list[Persona]) -> None:
    monkeypatch.delenv(PERSONAS_ENV, raising=False)
    assert len(load_personas()) == len(personas)
    own = tmp_path / "mine.yaml"
    own.write_text(PERSONA_OK, encoding="utf-8")
    monkeypatch.setenv(PERSONAS_ENV, str(own))
    assert [p.id for p in load_personas()] == ["ada_lovelace"]


def test_persona_summary(personas: list[Persona]) -> None:
    p = personas[0]
    s = persona_summary(p)
    assert s.startswith(f"{p.name}, {p.age}, {p.occupation}")
    assert p.location in s and p.goals[0] in s and p.tone in s
    assert s.endswith(".") and "\n" not in s


# --------------------------------------------------------------------------------------------- bad taxonomies

TAXONOMY_OK = """\
version: 1
operation_categories:
  - id: files
    name: Files
    description: File work.
operations:
  - id: rename
    name: Rename
    category: files
    description: Rename files.
    file_kinds: [txt, md]
  - id: sort
    name: Sort
    category: files
    description: Sort files.
    file_kinds: [csv]
categories:
  - id: home
    name: Home
    description: Home life.
    subcategories:
      - id: declutter
        name: Declutter
        description: Tidy up.
        operations:
          - rename
          - sort
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_small_custom_taxonomy_loads(tmp_path: Path) -> None:
    tax = load_taxonomy(write(tmp_path, "tax.yaml", TAXONOMY_OK))
    assert [o.id for o in tax.operations] == ["rename", "sort"]
    assert tax.category_of("declutter").id == "home"


def test_unknown_operation_id(tmp_path: Path) -> None:
    text = TAXONOMY_OK.replace("          - sort\n", "          - sort\n          - shred\n")
    path = write(tmp_path, "unknown_op.yaml", text)
    with pytest.raises(TaxonomyError) as err:
        load_taxonomy(path)
    assert_located(err.value, path, line_of(text, "- shred"))
    assert "shred" in str(err.value)
    assert "categories[0].subcategories[0].operations[2]" in str(err.value)


def test_duplicate_operation_id(tmp_path: Path) -> None:
    text = TAXONOMY_OK.replace("  - id: sort\n    name: Sort", "  - id: rename\n    name: Sort")
    path = write(tmp_path, "dup_op.yaml", text)
    with pytest.raises(TaxonomyError, match="duplicate operation id 'rename'") as err:
        load_taxonomy(path)
    assert_located(err.value, path, line_of(text, "- id: rename", occurrence=2))
    assert f"first defined at line {line_of(text, '- id: rename')}" in str(err.value)


def test_duplicate_subcategory_id_across_categories(tmp_path: Path) -> None:
    text = TAXONOMY_OK + """\
  - id: work
    name: Work
    description: Work life.
    subcategories:
      - id: declutter
        name: Office declutter
        description: Tidy the office.
        operations: [sort]
"""
    path = write(tmp_path, "dup_sub.yaml", text)
    with pytest.raises(TaxonomyError, match="duplicate subcategory id 'declutter'") as err:
        load_taxonomy(path)
    assert_located(err.value, path, line_of(text, "- id: declutter", occurrence=2))


def test_operation_used_by_no_subcategory(tmp_path: Path) -> None:
    text = TAXONOMY_OK.replace("          - sort\n", "")
    path = write(tmp_path, "unused.yaml", text)
    with pytest.raises(TaxonomyError, match="'sort' is used by no subcategory") as err:
        load_taxonomy(path)
    assert_located(err.value, path, line_of(text, "- id: sort"))


def test_unknown_operation_category(tmp_path: Path) -> None:
    text = TAXONOMY_OK.replace("    category: files\n    description: Sort", "    category: filez\n    description: Sort")
    path = write(tmp_path, "bad_opcat.yaml", text)
    with pytest.raises(TaxonomyError, match="unknown operation category 'filez'") as err:
        load_taxonomy(path)
    assert_located(err.value, path, line_of(text, "category: filez"))


def test_empty_operations_list(tmp_path: Path) -> None:
    text = TAXONOMY_OK.replace("        operations:\n          - rename\n          - sort\n", "        operations: []\n")
    path = write(tmp_path, "empty.yaml", text)
    with pytest.raises(TaxonomyError) as err:
        load_taxonomy(path)
    assert_located(err.value, path, line_of(text, "operations: []"))
    assert "categories[0].subcategories[0].operations" in str(err.value)


def test_unknown_field_and_file_kind(tmp_path: Path) -> None:
    text = TAXONOMY_OK.replace("    file_kinds: [csv]\n", "    file_kinds: [csv]\n    colour: blue\n")
    path = write(tmp_path, "extra.yaml", text)
    with pytest.raises(TaxonomyError, match="unknown field") as err:
        load_taxonomy(path)
    assert_located(err.value, path, line_of(text, "colour: blue"))

    text = TAXONOMY_OK.replace("file_kinds: [csv]", "file_kinds: [csv, docx]")
    path = write(tmp_path, "kind.yaml", text)
    with pytest.raises(TaxonomyError, match="unknown file kind 'docx'") as err:
        load_taxonomy(path)
    assert_located(err.value, path, line_of(text, "docx"))


def test_invalid_taxonomy_yaml(tmp_path: Path) -> None:
    text = TAXONOMY_OK.replace("    name: Sort\n", "    name: [Sort\n")
    path = write(tmp_path, "broken.yaml", text)
    with pytest.raises(TaxonomyError, match="invalid YAML") as err:
        load_taxonomy(path)
    # the flow sequence opened on the `name: [Sort` line is never closed; YAML notices on the next line
    assert_located(err.value, path, line_of(text, "name: [Sort") + 1)


def test_taxonomy_missing_file_and_wrong_shape(tmp_path: Path) -> None:
    with pytest.raises(TaxonomyError, match="file not found"):
        load_taxonomy(tmp_path / "absent.yaml")
    path = write(tmp_path, "list.yaml", "- a\n- b\n")
    with pytest.raises(TaxonomyError, match="expected a mapping") as err:
        load_taxonomy(path)
    assert_located(err.value, path, 1)


# --------------------------------------------------------------------------------------------- bad personas

PERSONA_OK = """\
personas:
  - id: ada_lovelace
    name: Ada Lovelace
    age: 36
    occupation: mathematician
    domain: Computing
    location: London, United Kingdom
    goals:
      - publish her notes on the Analytical Engine
      - keep her correspondence in order
    tone: formal, exacting
    tools: [quill, ledger]
    files: [notes/*.md, letters/*.eml]
    interests: [poetry, horses]
    subcategories:
      - manuscript_projects
      - inbox_management
"""

PERSONA_TWO = """\
  - id: grace_hopper
    name: Grace Hopper
    age: 45
    occupation: naval officer and programmer
    domain: Computing
    location: Arlington, United States
    goals: [teach compilers to everyone]
    tone: blunt and funny
    tools: [UNIVAC]
    files: [src/*.py]
    interests: [nanoseconds]
    subcategories: [bug_fixing, release_and_docs]
"""


def test_small_custom_personas_load(tmp_path: Path, taxonomy: Taxonomy) -> None:
    path = write(tmp_path, "ok.yaml", PERSONA_OK + PERSONA_TWO)
    got = load_personas(path, taxonomy=taxonomy)
    assert [p.id for p in got] == ["ada_lovelace", "grace_hopper"]
    assert got[0].writing_quirks is None
    # a bare top-level list is accepted too
    bare = "\n".join(line[2:] for line in (PERSONA_OK + PERSONA_TWO).splitlines()[1:]) + "\n"
    assert len(load_personas(write(tmp_path, "bare.yaml", bare))) == 2


def test_persona_missing_occupation(tmp_path: Path) -> None:
    text = PERSONA_OK + PERSONA_TWO.replace("    occupation: naval officer and programmer\n", "")
    path = write(tmp_path, "no_occupation.yaml", text)
    with pytest.raises(PersonaError) as err:
        load_personas(path)
    assert_located(err.value, path, line_of(text, "- id: grace_hopper"))
    assert "personas[1].occupation" in str(err.value)
    assert "Field required" in str(err.value)


def test_persona_unknown_subcategory(tmp_path: Path, taxonomy: Taxonomy) -> None:
    text = PERSONA_OK.replace("      - inbox_management\n", "      - inbox_management\n      - knitting_club\n")
    path = write(tmp_path, "unknown_sub.yaml", text)
    # without a taxonomy, subcategory ids are not checked
    assert load_personas(path)[0].subcategories[-1] == "knitting_club"
    with pytest.raises(PersonaError, match="unknown subcategory 'knitting_club' in persona 'ada_lovelace'") as err:
        load_personas(path, taxonomy=taxonomy)
    assert_located(err.value, path, line_of(text, "- knitting_club"))
    assert "personas[0].subcategories[2]" in str(err.value)


def test_persona_duplicate_id(tmp_path: Path) -> None:
    text = PERSONA_OK + PERSONA_TWO.replace("id: grace_hopper", "id: ada_lovelace")
    path = write(tmp_path, "dup.yaml", text)
    with pytest.raises(PersonaError, match="duplicate persona id 'ada_lovelace'") as err:
        load_personas(path)
    assert_located(err.value, path, line_of(text, "- id: ada_lovelace", occurrence=2))


def test_persona_duplicate_occupation_domain_name(tmp_path: Path) -> None:
    clone = PERSONA_OK.split("\n", 1)[1].replace("id: ada_lovelace", "id: ada_again")
    text = PERSONA_OK + clone
    path = write(tmp_path, "clone.yaml", text)
    with pytest.raises(PersonaError, match="repeats the occupation, domain and name") as err:
        load_personas(path)
    assert_located(err.value, path, line_of(text, "- id: ada_again"))


def test_persona_bad_field_values(tmp_path: Path) -> None:
    text = PERSONA_OK.replace("age: 36", "age: thirty-six")
    path = write(tmp_path, "age.yaml", text)
    with pytest.raises(PersonaError) as err:
        load_personas(path)
    assert_located(err.value, path, line_of(text, "age: thirty-six"))
    assert "personas[0].age" in str(err.value)

    text = PERSONA_OK.replace("    tone: formal, exacting\n", "    tone: formal, exacting\n    mood: sunny\n")
    path = write(tmp_path, "extra.yaml", text)
    with pytest.raises(PersonaError, match="unknown field") as err:
        load_personas(path)
    assert_located(err.value, path, line_of(text, "mood: sunny"))

    text = PERSONA_OK.replace("id: ada_lovelace", "id: Ada-Lovelace")
    path = write(tmp_path, "id.yaml", text)
    with pytest.raises(PersonaError) as err:
        load_personas(path)
    assert_located(err.value, path, line_of(text, "id: Ada-Lovelace"))


def test_invalid_personas_yaml(tmp_path: Path) -> None:
    text = PERSONA_OK.replace("    tone: formal, exacting\n", "    tone: formal, exacting\n  bad indent: here\n")
    path = write(tmp_path, "broken.yaml", text)
    with pytest.raises(PersonaError, match="invalid YAML") as err:
        load_personas(path)
    assert_located(err.value, path, line_of(text, "bad indent: here"))


def test_personas_missing_file_and_wrong_shape(tmp_path: Path) -> None:
    with pytest.raises(PersonaError, match="file not found"):
        load_personas(tmp_path / "absent.yaml")
    path = write(tmp_path, "empty.yaml", "")
    with pytest.raises(PersonaError, match="empty file"):
        load_personas(path)
    path = write(tmp_path, "none.yaml", "personas: []\n")
    with pytest.raises(PersonaError, match="no personas") as err:
        load_personas(path)
    assert_located(err.value, path, 1)
    path = write(tmp_path, "scalar.yaml", "personas:\n  - just a string\n")
    with pytest.raises(PersonaError, match="expected a persona mapping") as err:
        load_personas(path)
    assert_located(err.value, path, 2)
