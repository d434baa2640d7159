"""organize_files: a flat folder of mixed files (invoices, photo stubs, notes, mail, spreadsheets) sorted into
sub-folders by a stated rule (by type, or by the month in the file name), with a moves log CSV."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from clawgym.core.records import WorkspaceFile
from clawgym.synth import flavor
from clawgym.synth.grammar import expand, one_of
from clawgym.synth.ops import _files_vocab as V
from clawgym.synth.ops import operation
from clawgym.synth.ops._tables import digest, money
from clawgym.synth.ops.base import (
    TABLE,
    Artifact,
    Check,
    OpContext,
    OperationGenerator,
    StepPlan,
    exec_,
    ls,
    to_csv,
    write,
)

LOG_HEADERS = [["old_path", "new_path"], ["from", "to"], ["source", "destination"], ["before", "after"],
               ["original_path", "moved_to"], ["old_location", "new_location"]]
# the type folders, each with a few names a person might use
TYPE_NAMES = {"invoice": ["invoices", "bills", "billing", "finance"], "photo": ["photos", "images", "pictures"],
              "note": ["notes", "docs", "text"], "mail": ["mail", "email", "correspondence"],
              "sheet": ["spreadsheets", "sheets", "tables", "csv"]}
UNDATED = ["undated", "no_date", "misc", "_unsorted", "other"]
DATE_LAYOUTS = [("%Y-%m", "named YYYY-MM"), ("%Y_%m", "named YYYY_MM"), ("%Y/%m", "by year and then month "
                "(YYYY/MM, e.g. a year folder with month folders 01-12 inside)")]
LOOSE = ["todo.txt", "ideas.md", "passwords_old.txt", "contacts.csv", "scan.jpg", "readme_first.txt", "wishlist.md",
         "notes.txt", "shopping.md", "phone_numbers.csv", "random.jpg", "draft.txt", "links.md", "birthday_list.csv"]


def make_pile(ctx: OpContext, n_min: int = 9, n_max: int = 15, bill: str = "invoice") -> list[dict]:
    """A realistic pile of small text files: each {name, kind, date (or None), content}. Names are unique;
    invoice-like files start with `bill`."""
    rng = ctx.rng
    voc = flavor.vocab(ctx.persona.domain, ctx.persona.occupation)
    topics = V.topics(ctx.persona)
    clients = flavor.orgs(rng, 3)
    people = flavor.people(rng, 4)
    year = rng.choice([2024, 2025, 2026])
    months = sorted(rng.sample(range(1, 13), k=rng.randint(2, 4)))
    out: list[dict] = []
    names: set[str] = set()

    def add(name, kind, d, content):
        if name in names:
            return
        names.add(name)
        out.append({"name": name, "kind": kind, "date": d, "content": content})

    n = rng.randint(n_min, n_max)
    attempts = 0
    while len(out) < n and attempts < 200:
        attempts += 1
        d = flavor.date_in(rng, year, rng.choice(months))
        kind = rng.choice(["invoice", "invoice", "photo", "photo", "note", "mail", "sheet", "undated"])
        if kind == "invoice":
            c = rng.choice(clients)
            no = rng.randint(100, 999)
            name = rng.choice([f"{bill}_{d.isoformat()}_{flavor.slug(c)}.txt", f"{bill}_{no}_{d:%Y%m%d}.pdf.txt",
                               f"{bill}-{d.isoformat()}-{no}.txt"])
            amt = flavor.amount(rng, 40, 2400)
            add(name, kind, d, f"{bill.upper()} {no}\nFrom: {c}\nDate: {d.isoformat()}\nFor: {rng.choice(voc['items'])}\n"
                               f"{rng.choice(['Amount due', 'Total', 'Balance'])}: {money(amt)}\n")
        elif kind == "photo":
            hms = f"{rng.randint(6, 22):02d}{rng.randint(0, 59):02d}{rng.randint(0, 59):02d}"
            name = rng.choice([f"IMG_{d:%Y%m%d}_{hms}.jpg", f"PXL_{d:%Y%m%d}_{rng.randint(1000, 9999)}.jpg",
                               f"Photo {d.isoformat()} {hms[:2]}.{hms[2:4]}.{hms[4:]}.jpg",
                               f"WhatsApp Image {d.isoformat()} at {hms[:2]}.{hms[2:4]}.jpg"])
            add(name, kind, d, f"[photo placeholder] {rng.choice(topics)}, {d.isoformat()}, "
                               f"{rng.choice(['1.8', '2.4', '3.1', '0.9', '4.6'])} MB\n")
        elif kind == "note":
            topic = rng.choice(topics)
            name = rng.choice([f"{d.isoformat()} {topic}.md", f"notes_{d:%Y%m%d}_{flavor.slug(topic)}.md",
                               f"{d.isoformat()}_{flavor.slug(topic)}.txt", f"{flavor.slug(topic)}_{d:%Y%m%d}.txt"])
            add(name, kind, d, f"# {topic.capitalize()} - {d.isoformat()}\n\n- talked to {rng.choice(people)}\n"
                               f"- next: {rng.choice(['order', 'check', 'chase', 'price'])} {rng.choice(voc['items'])}\n")
        elif kind == "mail":
            p = rng.choice(people)
            topic = rng.choice(topics)
            name = rng.choice([f"{d.isoformat()}_{flavor.slug(p.split()[0])}_re_{flavor.slug(topic)}.eml",
                               f"Re_ {topic} ({d:%Y%m%d}).eml"])
            add(name, kind, d, f"From: {p} <{flavor.email_of(p)}>\nTo: me@example.org\nSubject: Re: {topic}\n"
                               f"Date: {d:%a, %d %b %Y} 09:{rng.randint(10, 59)}:00 +0000\n\n"
                               f"{rng.choice(['See you then.', 'Sounds good, thanks.', 'Attached the figures.', 'Can we move it?', 'Noted, will do.'])}\n")
        elif kind == "sheet":
            name = rng.choice([f"{flavor.slug(rng.choice(voc['categories']))}_{d.isoformat()}.csv",
                               f"export_{d:%Y%m%d}.csv", f"{flavor.slug(rng.choice(topics))}_{d:%Y%m%d}.csv"])
            add(name, kind, d, "item,qty\n" + "".join(f"{it},{rng.randint(1, 9)}\n"
                                                      for it in rng.sample(voc["items"], 3)))
        else:
            name = rng.choice(LOOSE)
            ext = name.rsplit(".", 1)[1]
            ukind = {"txt": "note", "md": "note", "csv": "sheet", "jpg": "photo"}[ext]
            add(name, ukind, None, f"{name} - kept for reference ({rng.choice(people)})\n")
    return out


@dataclass
class _Pile:
    """The data stage: the loose files, the sorting rule and the moves it gives, the moves log's place."""

    folder: str
    bill: str  # how invoice-like file names start
    pile: list[dict]  # {name, kind, date, content}
    rule: str  # "type", "month" or "year"
    types: dict[str, str]  # kind -> its folder
    layout: str  # the month folders' strftime layout
    layout_text: str
    undated: str  # the folder for names without a date
    stay: dict | None  # the persona's exception: a file that stays loose
    moves: dict[str, str]
    contents: dict[str, str]  # path -> content, every file of the pile
    header: list[str]  # the log's columns
    log: str


@operation
class OrganizeFiles(OperationGenerator):
    id = "organize_files"
    consumes: tuple[str, ...] = ()
    produces = (TABLE,)
    standalone = True
    folder_scoped = True

    def plan(self, ctx: OpContext, source: Artifact | None) -> StepPlan:
        pile = self._pile(ctx)
        instruction = self._request(ctx, pile)
        folder, moves, header, log, contents = pile.folder, pile.moves, pile.header, pile.log, pile.contents
        log_rows = [[old, new] for old, new in moves.items()]
        subs = sorted({new.rsplit("/", 1)[0] for new in moves.values()})
        cmd = "mkdir -p " + " ".join(shlex.quote(s) for s in subs) + " && " + " && ".join(
            f"mv {shlex.quote(o)} {shlex.quote(n)}" for o, n in moves.items())
        items = list(moves.items())
        some = items[: max(1, len(items) // 2)]
        pcmd = "mkdir -p " + " ".join(shlex.quote(s) for s in sorted({n.rsplit('/', 1)[0] for _, n in some})) + \
            " && " + " && ".join(f"mv {shlex.quote(o)} {shlex.quote(n)}" for o, n in some)
        ctx.used_paths.update(contents)
        return StepPlan(
            operation=self.id,
            instruction=instruction,
            files=[WorkspaceFile(path=p, content=c) for p, c in contents.items()],
            checks=self._checks(pile),
            steps=[ls(folder), exec_(cmd), write(log, to_csv(header, log_rows))],
            partial=[exec_(pcmd), write(log, to_csv(header, [[o, n] for o, n in some]))],
            outputs=[Artifact(log, TABLE, {"header": header, "rows": log_rows}, f"the moves log ({log})",
                              roles={"name": header[1]})],
            summary=f"sort {folder}/ by {pile.rule} and log the moves in {log}",
            fingerprint=digest([pile.rule, sorted(contents.items())]),
        )

    # ----------------------------------------------------------------------------------------- data
    @staticmethod
    def _pile(ctx: OpContext) -> _Pile:
        """The folder and its pile of files, the rule (by type, month or year; the folders' names), the file that
        may stay loose, where each other file moves, and the log's columns and path."""
        rng = ctx.rng
        persona = ctx.persona
        folder = ctx.path(V.folder_name(persona, rng, ["downloads", "inbox_files", "desktop_dump", "unsorted",
                                                       "phone_export", "scans", "Desktop", "to_sort", "shared_drop"]))
        bill = rng.choice(["invoice", "invoice", "bill", "receipt", "inv"])
        pile = make_pile(ctx, bill=bill)
        rule = rng.choice(["type", "month", "month", "year"])
        types = {k: rng.choice(v) for k, v in TYPE_NAMES.items()}
        layout, layout_text = rng.choice(DATE_LAYOUTS)
        undated = rng.choice(UNDATED)
        # the persona's exception: one file stays where it is (it must not be moved)
        stay = None
        if rng.random() < 0.35:
            stay = rng.choice(pile)
        moves: dict[str, str] = {}
        for f in pile:
            if f is stay:
                continue
            if rule == "type":
                sub = types[f["kind"]]
            elif rule == "month":
                sub = f["date"].strftime(layout) if f["date"] else undated
            else:
                sub = f"{f['date']:%Y}" if f["date"] else undated
            moves[f"{folder}/{f['name']}"] = f"{folder}/{sub}/{f['name']}"
        header = list(rng.choice(LOG_HEADERS))
        log = ctx.path(rng.choice(["moves_log.csv", "moved_files.csv", "file_moves.csv", "what_moved.csv",
                                   "sorting_log.csv", f"{folder.rsplit('/', 1)[-1].casefold()}_moves.csv"]))
        contents = {f"{folder}/{f['name']}": f["content"] for f in pile}
        return _Pile(folder, bill, pile, rule, types, layout, layout_text, undated, stay, moves, contents, header, log)

    # ----------------------------------------------------------------------------------------- phrasing
    @staticmethod
    def _rules(ctx: OpContext, p: _Pile) -> tuple[list[str], str]:
        """The rule's items (what goes where, that nothing is renamed, the exception) and its lead-in."""
        rng = ctx.rng
        folder, types, undated = p.folder, p.types, p.undated
        if p.rule == "type":
            to = "[{e} files [go |]to {f}/|{e} files belong in {f}/|put {e} files in {f}/|{e} -> {f}/]"
            others = [V.phrase(to, rng, e=".jpg", f=types["photo"]),
                      V.phrase("the [other|remaining] {e} and {e2} files [go |]to {f}/", rng, e=".md", e2=".txt",
                               f=types["note"]),
                      V.phrase(to, rng, e=".eml", f=types["mail"]),
                      V.phrase(to, rng, e=".csv", f=types["sheet"])]
            rng.shuffle(others)
            items = [V.phrase("[first: |]anything whose name starts with {bill} goes to {f}/[ (whatever its "
                              "extension)|, whatever the extension|]", rng, bill=p.bill, f=types["invoice"])] + others
            lead = V.phrase("[by type|by kind of file|by file type] into sub-folders of `{folder}/`:", rng,
                            folder=folder)
        elif p.rule == "month":
            items = [V.one_phrase(rng, ["[use|go by|take] the date in each file name (written as YYYY-MM-DD or "
                                        "YYYYMMDD)",
                                        "the month [comes from|is read off] the file name's date ([either "
                                        "YYYY-MM-DD or YYYYMMDD|YYYYMMDD or YYYY-MM-DD]), not [the disk "
                                        "timestamps|when the file was saved]",
                                        "[trust|read] the [date in the name|name's date] (YYYY-MM-DD [or|and] "
                                        "YYYYMMDD [both occur|are both used]) [rather than|and ignore] the "
                                        "modification times"]),
                     V.one_phrase(rng, ["files with no date in the name go to `{folder}/{u}/`",
                                        "[undated files|anything whose name has no date] [end up|go] in "
                                        "`{folder}/{u}/`",
                                        "`{folder}/{u}/` [is for|takes] [files|names] [without a date|with no "
                                        "date in them]"], folder=folder, u=undated)]
            lead = V.phrase("by month into sub-folders of `{folder}/` {lt}:", rng, folder=folder, lt=p.layout_text)
        else:
            items = [V.one_phrase(rng, ["the year comes from the date in the file name (YYYY-MM-DD or YYYYMMDD)",
                                        "[read|take] the year [off|from] the name's date ([YYYY-MM-DD or "
                                        "YYYYMMDD|both YYYYMMDD and YYYY-MM-DD occur]), not the [file's "
                                        "timestamp|modification time]",
                                        "[go by|use] the [date in the name|name's date] (YYYY-MM-DD [or|and] "
                                        "YYYYMMDD) [to pick|for] the year"]),
                     V.phrase("[anything without a date in the name goes|files without a date in the name go] to "
                              "`{folder}/{u}/`", rng, folder=folder, u=undated)]
            lead = V.phrase("by year into sub-folders of `{folder}/` named YYYY (e.g. `{folder}/{y}/`):", rng,
                            folder=folder, y=p.pile[0]["date"].year if p.pile[0]["date"] else 2025)
        items.append(V.one_phrase(rng, ["[don't|do not|never] rename or [change|edit] [any file|the files|anything "
                                        "inside them]",
                                        "[names|file names] and [contents|what's inside] [stay exactly as they "
                                        "are|are not to be touched]",
                                        "[only move|just move] [them|the files] - [no renaming|no new names], "
                                        "[no edits|nothing edited]"]))
        if p.stay is not None:
            items.append(V.one_phrase(rng, [
                "[leave|keep] `{p}` where it is[ - | (]{why}[|)]",
                "`{p}` stays [loose|at the top of the folder|put] ({why}) and is not logged",
            ], p=f"{folder}/{p.stay['name']}", why=V.one_phrase(rng, [
                "[a script|my {tool} import|{tool}] [reads|expects] it there",
                "{who} [links to|bookmarked] it",
                "I open it [every day|daily|all the time]",
            ], tool=V.tool(ctx.persona, rng), who=flavor.person(rng).split()[0])))
        return items, lead

    def _request(self, ctx: OpContext, p: _Pile) -> str:
        """The request: an opening, the rules, a hint at what the pile holds, the log's columns, the persona's
        story and asides; a quarter of them in a terse register instead."""
        rng = ctx.rng
        persona, folder, pile, log, bill = ctx.persona, p.folder, p.pile, p.log, p.bill
        items, lead = self._rules(ctx, p)
        rules = V.requirements_text(rng, items, fixed_order=p.rule == "type")
        head = one_of(rng, [
            "My `{folder}/` folder is a flat mess[ - {n} files at the top level|]. Sort [every file|the files|"
            "everything] in it {lead}",
            "Please tidy `{folder}/`: move each file {lead}",
            "Could you tidy `{folder}/` for me? Move [each|every] file {lead}",
            "[Organise|Organize|Sort out] the files sitting loose in `{folder}/` - {lead}",
            "[Can you|Could you] [file away|put away|sort] what's [piled up|lying around] in `{folder}/`? [Go|Sort] "
            "{lead}",
            "[I need|Please give] `{folder}/` [some structure|a proper structure|sub-folders]. [Everything|Each "
            "file] [goes|should go] {lead}",
            "[Filing day|Sorting time]: [the|all the] {n} files [loose|sitting] in `{folder}/` [go|need to go] "
            "{lead}",
        ], folder=folder, lead=lead, n=len(pile))
        cols = ",".join(p.header)
        log_sent = one_of(rng, [
            "[Then|Afterwards|Finally,] log each move in `{log}` with the columns {cols} ({rel}, one row per file).",
            "Record what you moved in `{log}` (header {cols}; {rel}).",
            "Write a CSV `{log}` listing {cols} for every file you moved ({rel}).",
            "I'd like a [log|list] of the moves [in|as] `{log}`: columns {cols}, {rel}, [one row per moved file|"
            "a row for each file moved].",
            "[So I can find things again|So {who} can follow what happened], `{log}` [should record|lists] [every "
            "move|each file you moved] ({cols}; {rel}).",
            "`{log}` [gets|should hold] [the moves|one line per move] - [header|columns] {cols}, {rel}.",
        ], log=log, who=flavor.person(rng).split()[0], cols=cols, rel=V.paths_rel(rng))
        tail = [log_sent, V.aside(persona, rng, f"`{folder}/`")]
        if p.stay is None:
            tail.insert(1, one_of(rng, ["Nothing should stay loose in the top of the folder.",
                                       "[When you're done|Afterwards], nothing [should be|is] left loose at the top.",
                                       ""]))
        kinds = {}
        for f in pile:
            kinds[f["kind"]] = kinds.get(f["kind"], 0) + 1
        words = {"invoice": "invoices" if bill == "inv" else f"{bill}s", "photo": rng.choice(["photos", "pictures", "phone photos"]),
                 "note": "notes", "mail": rng.choice(["saved emails", "emails", ".eml files"]),
                 "sheet": rng.choice(["spreadsheets", "CSV exports", "sheets"])}
        parts = [f"{c} {words[k] if c > 1 else words[k][:-1]}" for k, c in sorted(kinds.items(), key=lambda kc: (-kc[1], kc[0]))]
        hint = one_of(rng, ["", "[Roughly|About|There are] {parts} in `{folder}/`.", "[It's|Right now it's] {parts}[, all "
                           "in one heap|, all mixed together|].", "{n} files [at the moment|right now]: {parts}."],
                     parts=V.listing(parts), n=len(pile), folder=folder)
        instruction = V.glue(V.story(persona, rng, "organize", 0.3), head, rules, hint,
                             V.mention(persona, rng, f"{folder}/{rng.choice(pile)['name']}"), *tail, V.timing(rng))
        if rng.random() < 0.25:  # the terse register
            instruction = V.glue(expand("[Sort|File] `{folder}/` {lead} {items}. Log -> `{log}` ({cols}, {rel}).",
                                        rng, folder=folder, lead=lead.rstrip(":") + ":", items="; ".join(items),
                                        log=log, cols=cols, rel=V.paths_rel(rng)), V.timing(rng))
        return instruction

    # ----------------------------------------------------------------------------------------- checks
    @staticmethod
    def _checks(p: _Pile) -> list[Check]:
        """Every moved file at its new place, unchanged; the log's rows; nothing left loose but the exception."""
        expected = {old: [new, p.contents[old]] for old, new in p.moves.items()}
        log_rows = [[old, new] for old, new in p.moves.items()]
        kept = {f"{p.folder}/{p.stay['name']}": p.stay["content"]} if p.stay is not None else {}
        return [
            Check("files_in_right_folders", "files_moved", {"moves": expected}),
            Check("moves_logged", "data_path_rows", {"path": p.log, "header": p.header, "rows": log_rows,
                                                     "path_columns": p.header, "base": p.folder}),
            Check("nothing_left_loose", "data_removed_kept", {"removed": sorted(p.moves), "kept": kept}),
        ]


GENERATORS = [OrganizeFiles()]
