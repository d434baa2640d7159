"""organize_notes: a folder of markdown notes with (messy) YAML front matter is filed into one folder per
primary tag with an index page linking every note under its tag, or consolidated into one page per topic
(notes as dated sections) with an index of the topic pages."""

from __future__ import annotations

import datetime as dt

from clawgym.core.records import WorkspaceFile
from clawgym.synth import flavor
from clawgym.synth.grammar import one_of
from clawgym.synth.ops import operation
from clawgym.synth.ops._docs_common import aside, digest, join, long_date, phrase, reqs, wfolder
from clawgym.synth.ops.base import (
    DOCUMENT,
    Artifact,
    Check,
    OpContext,
    OperationGenerator,
    StepPlan,
    exec_,
    ls,
    read,
    write,
)

# tag -> (title templates, body sentence templates)
TOPICS: dict[str, tuple[list[str], list[str]]] = {
    "meetings": (["{org} call recap", "Notes from the {project} meeting", "Stand-up {month}"],
                 ["{person} will follow up on the {item} order.", "We agreed to meet again in two weeks.",
                  "Open point: who owns the {project} budget?"]),
    "budget": (["Budget notes {month}", "Costs of the {project}", "{cat} spending check"],
               ["The {cat} line is {n}% over plan.", "Quote from {org}: {amount} for {item}.",
                "Ask finance about moving money between lines."]),
    "ideas": (["Ideas for the {project}", "Things to try with {item}", "Improvement ideas"],
              ["What if we ordered {item} monthly instead of weekly?", "Try a shared checklist for the {project}.",
               "{person} suggested a short survey."]),
    "suppliers": (["{org} - supplier profile", "Supplier comparison: {item}", "Delivery issues {month}"],
                  ["{org} delivers on Tuesdays and Fridays.", "Minimum order of {n} units of {item}.",
                   "Contact: {person}."]),
    "reading": (["Reading: {book}", "Article notes - {cat}", "Book notes: {book}"],
                ["Key idea: small batches beat big plans.", "Chapter {n} has a good checklist.",
                 "Recommended by {person}."]),
    "travel": (["Trip to {city}", "Packing list for {city}", "{city} conference notes"],
               ["Train leaves at 07:{n}.", "Hotel near the station, booked by {person}.",
                "Remember the adapter and the {item}."]),
    "team": (["Feedback from {person}", "Onboarding {person}", "Team rota thoughts"],
             ["{person} prefers early shifts.", "Plan a 1:1 every second week.", "Share the {project} notes."]),
}
TOPICS.update({
    "recipes": (["{item} stew", "Recipe from {person}", "Batch cooking for {month}"],
                ["Serves a crowd; double it for the {project}.", "Use the good {item}, not the cheap one.",
                 "{person} says it freezes well."]),
    "research": (["Sources on {cat}", "Interview with {person}", "{project} literature notes"],
                 ["Three papers agree on the main figure.", "Follow up with {org} for raw data.",
                  "Open question: does {item} use really drop in {month}?"]),
    "clients": (["Call with {org}", "{org} requirements", "Client feedback {month}"],
                ["They want the {project} draft by {month}.", "Budget still to be confirmed by {org}.",
                 "{person} is the decision maker."]),
    "admin": (["Insurance renewal", "{month} paperwork", "Tax notes {month}"],
              ["The policy number is on the blue folder.", "File the {cat} receipts before the deadline.",
               "Ask {person} where the signed copy is."]),
    "learning": (["Course notes: {cat}", "Workshop on {project}", "What I learned in {month}"],
                 ["One module covered {item} handling.", "{person} recommended a follow-up course.",
                  "Practise twice a week."]),
    "health": (["Running log {month}", "Physio advice", "Sleep notes"],
               ["Easy pace, nothing fancy.", "{person} suggested stretching after each run.",
                "Try to be in bed before midnight."]),
})
ROOTS = ["notes", "vault", "kb", "journal", "wiki", "notebook", "zettel", "brain", "jottings"]
INDEX_NAMES = ["index.md", "readme.md", "_index.md", "contents.md", "home.md", "00_index.md"]
BOOKS = ["Deep Work", "The Checklist Manifesto", "Atomic Habits", "Thinking in Systems", "The Mom Test",
         "Range", "Small Is Beautiful"]


def _story(rng, notes: list[dict], root: str) -> str:
    """A drawn sentence about the notes themselves (their topics, the oldest title), or nothing."""
    if rng.random() < 0.2:
        return ""
    tags = sorted({n["primary"] for n in notes if n["primary"] != "misc"})
    oldest = min(notes, key=lambda n: (n["date"], n["title"]))
    return one_of(rng, [
        "[I take notes on|My notes cover] {tags} - [all in one folder|no system at all|whatever comes up].",
        "[Since|Ever since] \"{title}\" ({date}) I've [dumped|thrown|saved] every note [straight |]into `{root}/`.",
        "[I can't find anything|Finding a note takes ages] [in `{root}/`|anymore]: {n} files about {tags}.",
    ], tags=", ".join(tags[:-1]) + " and " + tags[-1] if len(tags) > 1 else (tags[0] if tags else "everything"),
        title=oldest["title"], date=long_date(oldest["date"]), root=root, n=len(notes))


@operation
class OrganizeNotes(OperationGenerator):
    id = "organize_notes"
    consumes: tuple[str, ...] = ()
    produces = (DOCUMENT,)
    standalone = True
    folder_scoped = True

    def _notes(self, ctx: OpContext):
        rng = ctx.rng
        voc = flavor.vocab(ctx.persona.domain, ctx.persona.occupation)
        tags = rng.sample(list(TOPICS), rng.randint(3, 4))
        n = rng.randint(6, 10)
        base = flavor.date_in(rng, 2026)
        notes = []
        used_titles: set[str] = set()
        used_files: set[str] = set()
        for i in range(n):
            tag = tags[i % len(tags)] if i < len(tags) else rng.choice(tags)
            titles, sents = TOPICS[tag]
            d = base + dt.timedelta(days=rng.randint(0, 60))
            fill = dict(org=flavor.org(rng), project=rng.choice(voc["projects"]), month=d.strftime("%B"),
                        cat=rng.choice(voc["categories"]).lower(), item=rng.choice(voc["items"]),
                        person=flavor.person(rng), n=rng.randint(10, 59), amount=f"{flavor.amount(rng, 50, 3000):,.2f}",
                        book=rng.choice(BOOKS), city=rng.choice(flavor.CITIES))
            title = rng.choice(titles).format(**fill)
            title = title[0].upper() + title[1:]
            while title in used_titles:
                title += " (2)"
            used_titles.add(title)
            fname = flavor.slug(title)[:40].strip("_") + ".md"
            while fname in used_files:
                fname = fname[:-3] + "_b.md"
            used_files.add(fname)
            body = " ".join(s.format(**fill) for s in rng.sample(sents, 2))
            extra = [t for t in tags if t != tag]
            note_tags = [tag] + (rng.sample(extra, 1) if rng.random() < 0.4 else [])
            notes.append({"title": title, "file": fname, "date": d, "tags": note_tags, "body": body})
        # one note without front matter (goes to misc)
        untagged = rng.random() < 0.6
        if untagged:
            notes[-1]["tags"] = []
        return notes, tags, untagged

    @staticmethod
    def _render(rng, note: dict) -> str:
        if not note["tags"]:
            return f"# {note['title']}\n\n{note['body']}\n"
        styles = rng.choice(["list", "inline", "plain"])
        tags = [rng.choice([t, t.capitalize(), t.upper()]) if k == 0 else t for k, t in enumerate(note["tags"])]
        if styles == "list" or len(tags) > 1 and styles == "plain":
            tag_line = "tags: [" + ", ".join(tags) + "]"
        elif styles == "inline":
            tag_line = "tags:\n" + "".join(f"  - {t}\n" for t in tags).rstrip("\n")
        else:
            tag_line = f"tags: {tags[0]}"
        title = f'"{note["title"]}"' if ":" in note["title"] else note["title"]
        return (f"---\ntitle: {title}\ndate: {note['date'].isoformat()}\n{tag_line}\n---\n\n"
                f"{note['body']}\n")

    def plan(self, ctx: OpContext, source: Artifact | None) -> StepPlan:
        rng = ctx.rng
        notes, tags, untagged = self._notes(ctx)
        root = wfolder(ctx, ROOTS, 0.3)
        for note in notes:
            note["path"] = ctx.path(f"{root}/{note['file']}")
            note["text"] = self._render(rng, note)
            note["primary"] = note["tags"][0] if note["tags"] else "misc"
        if rng.random() < 0.55:
            return self._file_by_tag(ctx, notes, root, untagged)
        return self._consolidate(ctx, notes, root, untagged)

    def _file_by_tag(self, ctx: OpContext, notes: list[dict], root: str, untagged: bool) -> StepPlan:
        rng = ctx.rng
        index = ctx.path(f"{root}/{rng.choice(INDEX_NAMES)}")
        moves = {}
        for note in notes:
            note["new"] = ctx.path(f"{root}/{note['primary']}/{note['file']}")
            moves[note["path"]] = note["new"]
        groups = sorted({n["primary"] for n in notes})
        lines = ["# Index", ""]
        for g in groups:
            lines += [f"## {g}", ""]
            for note in sorted((n for n in notes if n["primary"] == g), key=lambda n: (n["date"], n["title"])):
                lines.append(f"- [{note['title']}]({g}/{note['file']}) ({note['date'].isoformat()})")
            lines.append("")
        index_text = "\n".join(lines)
        slots = dict(root=root, ex=notes[0]["primary"], index=index, n=len(notes))
        head = one_of(rng, [
            "My notes in `{root}/` are [@mess].",
            "[I have|There are] {n} notes in `{root}/` and [no structure|no order|they're all in one pile].",
            "[Please|Could you] [file|sort|organise] the notes in `{root}/` by tag[.|?]",
            "`{root}/` [has grown|got out of hand|is a flat heap of {n} files].",
            "[Time to|Let's] [tidy|clean up|restructure] `{root}/`: {n} notes, [no folders|one flat list].",
            "[Could|Can] you [give|bring] `{root}/` some [structure|order] - a folder per tag?",
        ], **slots)
        items = [
            phrase(rng, ["move every note into a sub-folder named after its first tag (in lower case, e.g. "
                         "`{root}/{ex}/`), keeping the file names",
                         "[each|every] note [goes|moves] to `{root}/<its first tag, lower-case>/` (e.g. `{root}/{ex}/`), "
                         "[same file name|file name unchanged]",
                         "[file|sort] [the notes|each note] into [folders|sub-folders] by first tag (lower case, like "
                         "`{root}/{ex}/`) without renaming them",
                         "[the first tag|whichever tag comes first] [decides|picks] [the folder|where a note goes]: "
                         "`{root}/<tag in lower case>/` ([so|e.g.] `{root}/{ex}/`), [and keep the file names|names "
                         "untouched]",
                         "[make|create] one [sub-folder|folder] per [leading|first] tag [inside|in] `{root}/` "
                         "([lower-cased|all lower case]: `{root}/{ex}/` [and so on|etc.]) and [move|put] each note "
                         "[in|into] [its|the right] one, [not renamed|under its current name]"], **slots),
            phrase(rng, ["[then|afterwards|finally] write `{index}` with one `## <tag>` section per folder, listing "
                         "each note as a markdown link [whose text is the note's title|`\\[title\\](path)`] to its "
                         "new location (relative paths are fine)",
                         "[after that|once they're moved|last], [an index|a contents page] `{index}`: [a|one] `## "
                         "<tag>` heading [per|for each] folder, [and under it|then] [a link to every note "
                         "there|each note linked], [the note's title as the link text|`\\[title\\](path)` "
                         "style], [pointing at|to] [where it now lives|its new path]",
                         "`{index}` [ties it together|is the map]: [sections|headings] `## <tag>` [matching|for] "
                         "the folders, [with|holding] markdown links ([title as text|`\\[title\\](path)`]) to "
                         "[the moved notes|each note's new location] - relative links [are fine|work]"], **slots),
        ]
        if untagged:
            items.insert(1, phrase(rng, ["a note without tags goes to `{root}/misc/`",
                                         "[untagged notes|notes with no tag] [end up|go] in `{root}/misc/`",
                                         "`{root}/misc/` [takes|catches] [anything|every note] [without a tag|that "
                                         "has no tags]"], **slots))
        instruction = join(_story(rng, notes, root), head, reqs(rng, items, fixed_order=True), aside(rng, ctx.persona))
        checks = [
            Check("notes_filed_by_tag", "files_moved", {"moves": {n["path"]: [n["new"], n["text"]] for n in notes}}),
            Check("index_links_every_note", "docs_md_links", {"path": index, "targets": [n["new"] for n in notes]}),
            Check("index_grouped_by_tag", "docs_sections_have", {"path": index, "sections": {
                g: [n["title"] for n in notes if n["primary"] == g] for g in groups}}),
        ]
        dirs = " ".join(sorted({f"{root}/{g}" for g in groups}))
        cmd = f"mkdir -p {dirs} && " + " && ".join(f"mv {old} {new}" for old, new in moves.items())
        # partial: moved, but the index links point to the old places and lists everything under one heading
        partial_index = "# Index\n\n## notes\n\n" + "".join(
            f"- [{n['title']}]({n['file']})\n" for n in notes) + "\n"
        half = list(moves.items())[: len(moves) // 2]
        partial_cmd = f"mkdir -p {dirs} && " + " && ".join(f"mv {old} {new}" for old, new in half)
        return StepPlan(
            operation=self.id, instruction=instruction, checks=checks,
            files=[WorkspaceFile(path=n["path"], content=n["text"]) for n in notes],
            steps=[ls(root), *(read(n["path"]) for n in notes), exec_(cmd), write(index, index_text)],
            partial=[exec_(partial_cmd), write(index, partial_index)],
            outputs=[Artifact(index, DOCUMENT, index_text, f"the notes index ({index})")],
            summary=f"file {len(notes)} notes by tag with an index",
            fingerprint=digest([(n["title"], n["primary"]) for n in notes]),
        )

    def _consolidate(self, ctx: OpContext, notes: list[dict], root: str, untagged: bool) -> StepPlan:
        rng = ctx.rng
        out_dir = rng.choice(["topics", "by_topic", "merged", "topic_pages", "digest"])
        groups = sorted({n["primary"] for n in notes})
        pages = {g: ctx.path(f"{root}/{out_dir}/{g}.md") for g in groups}
        index = ctx.path(f"{root}/{out_dir}/{rng.choice(INDEX_NAMES)}")
        texts = {}
        for g in groups:
            mine = sorted((n for n in notes if n["primary"] == g), key=lambda n: (n["date"], n["title"]))
            lines = [f"# {g}", ""]
            for n in mine:
                lines += [f"## {n['title']}", "", f"_{long_date(n['date'])}_", "", n["body"], ""]
            texts[pages[g]] = "\n".join(lines)
        index_text = "# Topics\n\n" + "".join(f"- [{g}]({g}.md)\n" for g in groups)
        slots = dict(root=root, dir=out_dir, index=index, n=len(notes))
        head = one_of(rng, [
            "Consolidate my notes in `{root}/` into one page per topic.",
            "[Please|Could you] merge the {n} notes in `{root}/` by topic[.|?]",
            "[I'd rather read|I want] one page per topic instead of {n} [small files|scattered notes] in `{root}/`.",
            "The notes in `{root}/` [need merging|should be combined] by topic.",
            "[Too many|{n}] [small|scattered] notes in `{root}/`: [build|write] topic pages [from them|out of them].",
            "[Turn|Fold] `{root}/` into [a handful of|a few] topic pages, one per tag.",
        ], **slots)
        items = [
            phrase(rng, ["[topic = the note's first tag in lower case|the topic is the first tag, lower-cased]",
                         "a note's [topic|page] [is decided by|follows] its first tag ([in lower case|lower-cased])",
                         "[go by|use] the [leading|first] tag [as the topic|for the topic], [lower case|all "
                         "lower-case]"]),
            phrase(rng, ["one page per topic at `{root}/{dir}/<topic>.md`",
                         "[the pages|topic pages] [live|go] in `{root}/{dir}/`, [named|called] `<topic>.md`",
                         "`{root}/{dir}/<topic>.md` [for each topic|- a file per topic]"], **slots),
            phrase(rng, ["each note [becomes|goes in as] a `## <note title>` section [holding|with] its text",
                         "[inside a page|on each page], [every|each] note [is|gets] [a|its own] `##` section "
                         "[titled|headed] [with its title|by the note's title] [and its full text|followed by "
                         "its body]",
                         "[the note's title as|a] `## <title>` heading [then|and under it] [the note's text|what "
                         "the note says]"], **slots),
            phrase(rng, ["[oldest note first|sorted by date, oldest first] (by the date in the front matter)",
                         "[in date order|chronologically], [earliest|oldest] [first|at the top] - [use|go by] "
                         "the front-matter date",
                         "[sections|notes] [ordered|sorted] [by the `date:` in their front matter|by front-matter "
                         "date], [ascending|old to new]"]),
            phrase(rng, ["[also write|add] `{index}` [linking to|with a link to] every topic page",
                         "[an index|a contents page], `{index}`, [that links|linking] [each|all the] topic "
                         "page[s|]", "`{index}` [with|holding] [links to|a link for] [every|each] [page|topic]"],
                   **slots),
            phrase(rng, ["[leave the original notes where they are|don't delete the originals|keep the original "
                         "files]", "[the|my] [original|source] notes [stay|remain] [put|in place|untouched]",
                         "[nothing|no note] [gets deleted|is removed] from `{root}/`"], **slots),
        ]
        if untagged:
            items.append(phrase(rng, ["a note without tags goes to `{root}/{dir}/misc.md`",
                                      "[untagged notes|notes with no tag] [end up|go] on `{root}/{dir}/misc.md`",
                                      "`{root}/{dir}/misc.md` [takes|collects] [anything|every note] [without a "
                                      "tag|that has no tags]"], **slots))
        instruction = join(_story(rng, notes, root), head, reqs(rng, items, fixed_order=rng.random() < 0.5),
                           aside(rng, ctx.persona))
        under_topic = {"specs": {pages[g]: {n["title"]: [n["body"][:60]] for n in notes if n["primary"] == g}
                                 for g in groups}}
        checks = [
            # a page counts as far as the notes are under their topics (any file at those paths is no topic page)
            Check("topic_pages_exist", "gated", parts=[Check("", "paths_exist", {"paths": list(pages.values())}),
                                                       Check("", "docs_files_sections", under_topic)]),
            Check("notes_under_right_topic", "docs_files_sections", under_topic),
            Check("notes_in_date_order", "min_of", parts=[
                Check("", "docs_order", {"path": pages[g], "needles": [n["title"] for n in sorted(
                    (n for n in notes if n["primary"] == g), key=lambda n: (n["date"], n["title"]))]})
                for g in groups]),
            Check("index_links_topics", "docs_md_links", {"path": index, "targets": list(pages.values())}),
        ]
        # partial: one page with everything, in file order
        first = pages[groups[0]]
        partial_text = "\n".join(f"## {n['title']}\n\n{n['body']}\n" for n in notes)
        return StepPlan(
            operation=self.id, instruction=instruction, checks=checks,
            files=[WorkspaceFile(path=n["path"], content=n["text"]) for n in notes],
            steps=[ls(root), *(read(n["path"]) for n in notes), *(write(p, t) for p, t in texts.items()),
                   write(index, index_text)],
            partial=[write(first, partial_text)],
            outputs=[Artifact(index, DOCUMENT, index_text, f"the topic index ({index})")],
            summary=f"consolidate {len(notes)} notes into {len(groups)} topic pages",
            fingerprint=digest([(n["title"], n["primary"]) for n in notes]),
        )


GENERATORS = [OrganizeNotes()]
