"""batch_rename: messily named invoice/quote/statement files renamed to a convention built from what is inside
each file (date, client, number), with the folder's index updated to the new names and a rename map CSV."""

from __future__ import annotations

import datetime as dt
import re
import shlex
from collections.abc import Callable
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
    read,
    to_csv,
    write,
)

MAP_HEADERS = [["old_name", "new_name"], ["old", "new"], ["before", "after"], ["original_name", "renamed_to"],
               ["from", "to"], ["old_filename", "new_filename"]]
DATE_FORMATS = ["%d %B %Y", "%B %d, %Y", "%Y-%m-%d", "%d %b %Y", "%a %d %b %Y", "%d/%m/%Y", "%d.%m.%Y"]

# Document kinds per domain: (word, slug in the new name, what the counterparty is called in the file, its
# placeholder in the naming pattern, the label of the number line)
DOCS: dict[str, list[tuple[str, str, str, str, str]]] = {
    "general": [("invoice", "invoice", "Client", "client", "Invoice no."), ("quote", "quote", "Client", "client",
                "Quote ref"), ("receipt", "receipt", "Vendor", "vendor", "Receipt #"),
                ("statement", "statement", "Account", "account", "Statement no.")],
    "finance": [("invoice", "invoice", "Client", "client", "Invoice no."), ("statement", "statement", "Account holder",
                "account", "Statement no."), ("receipt", "receipt", "Vendor", "vendor", "Receipt #"),
                ("remittance advice", "remittance", "Payer", "payer", "Remittance ref")],
    "software": [("invoice", "invoice", "Client", "client", "Invoice no."), ("quote", "quote", "Customer", "customer",
                 "Quote no."), ("purchase order", "po", "Supplier", "supplier", "PO number"),
                 ("contract", "contract", "Counterparty", "party", "Contract no.")],
    "health": [("invoice", "invoice", "Supplier", "supplier", "Invoice no."), ("lab report", "lab-report",
               "Laboratory", "lab", "Report no."), ("purchase order", "po", "Supplier", "supplier", "PO number"),
               ("referral letter", "referral", "Referring practice", "practice", "Referral ref")],
    "education": [("invoice", "invoice", "Supplier", "supplier", "Invoice no."), ("purchase order", "po", "Supplier",
                  "supplier", "PO number"), ("receipt", "receipt", "Vendor", "vendor", "Receipt #"),
                  ("booking confirmation", "booking", "Venue", "venue", "Booking ref")],
    "food": [("invoice", "invoice", "Supplier", "supplier", "Invoice no."), ("delivery note", "delivery-note",
             "Supplier", "supplier", "Delivery note no."), ("purchase order", "po", "Supplier", "supplier",
             "PO number"), ("catering quote", "quote", "Client", "client", "Quote ref")],
    "farm": [("invoice", "invoice", "Buyer", "buyer", "Invoice no."), ("delivery note", "delivery-note", "Supplier",
             "supplier", "Docket no."), ("vet bill", "vet-bill", "Practice", "practice", "Bill no."),
             ("receipt", "receipt", "Merchant", "merchant", "Receipt #")],
    "creative": [("invoice", "invoice", "Client", "client", "Invoice no."), ("quote", "quote", "Client", "client",
                 "Estimate no."), ("licence", "licence", "Licensee", "licensee", "Licence no."),
                 ("contract", "contract", "Client", "client", "Contract ref")],
    "legal": [("invoice", "invoice", "Client", "client", "Bill no."), ("engagement letter", "engagement", "Client",
              "client", "Matter no."), ("filing receipt", "filing", "Court", "court", "Receipt no."),
              ("invoice", "invoice", "Client", "client", "Invoice no.")],
}
EXAMPLE_PARTIES = ["acme-trading", "north-star", "blue-hill-co", "riverside-ltd", "kestrel-group", "oakwood",
                   "pinnacle-ltd", "lime-street"]


def client_slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.casefold()).strip("-")


@dataclass
class _Papers:
    """The data stage: the documents to rename and the naming convention."""

    doc: str  # the kind of document ("invoice", "delivery note", ...)
    dslug: str  # its slug in the new names
    plabel: str  # what the counterparty is called in the file
    pword: str  # the counterparty's placeholder in the pattern
    plural: str
    year: int
    folder: str
    clients: list[str]
    convention: str  # date_first, number_first or party_first
    compact: bool  # YYYYMMDD instead of YYYY-MM-DD
    pad: int
    ext: str
    dpat: str
    npat: str
    new_name: Callable[[dt.date, str, int], str]  # (date, party slug, number) -> the new file name
    skip_party: str | None  # whose files keep their names
    entries: list[dict]  # {old, new, content, client, amount, no, date, skip}


@dataclass
class _Index:
    """The folder's index, before (the workspace's) and after (the reference's) the renames."""

    index: str
    index_name: str
    old_index: str
    new_index: str


@dataclass
class _Request:
    """The phrasing stage: the rename map's header and path, the naming pattern, the request."""

    map_header: list[str]
    mapping: str
    pattern: str
    instruction: str


@operation
class BatchRename(OperationGenerator):
    id = "batch_rename"
    consumes: tuple[str, ...] = ()
    produces = (TABLE,)
    standalone = True
    folder_scoped = True

    def plan(self, ctx: OpContext, source: Artifact | None) -> StepPlan:
        pp = self._papers(ctx)
        ix = self._index(ctx, pp)
        ask = self._request(ctx, pp, ix)
        moves, map_rows = self._renames(pp)
        checks = self._checks(pp, ix, ask, moves, map_rows)
        folder, entries, index, mapping, map_header = pp.folder, pp.entries, ix.index, ask.mapping, ask.map_header
        # the reference moves every file at once; the partial moves half of them and maps only those
        cmd = " && ".join(f"mv {shlex.quote(o)} {shlex.quote(n)}" for o, (n, _) in moves.items())
        some = list(moves.items())[: max(1, len(moves) // 2)]
        pcmd = " && ".join(f"mv {shlex.quote(o)} {shlex.quote(n)}" for o, (n, _) in some)
        files = [WorkspaceFile(path=f"{folder}/{e['old']}", content=e["content"]) for e in entries]
        files.append(WorkspaceFile(path=index, content=ix.old_index))
        ctx.used_paths.update(f.path for f in files)
        return StepPlan(
            operation=self.id,
            instruction=ask.instruction,
            files=files,
            checks=checks,
            steps=[ls(folder), read(index), exec_(cmd), write(index, ix.new_index),
                   write(mapping, to_csv(map_header, map_rows))],
            partial=[exec_(pcmd), write(mapping, to_csv(map_header, map_rows[: len(some)]))],
            outputs=[Artifact(mapping, TABLE, {"header": map_header, "rows": map_rows}, f"the rename map ({mapping})",
                              roles={"name": map_header[1]})],
            summary=f"rename the {pp.plural} in {folder}/ to {ask.pattern} and update {index}",
            fingerprint=digest([pp.convention, [(e["old"], e["new"], e["content"]) for e in entries]]),
        )

    # ------------------------------------------------------------------------------------------ data
    def _papers(self, ctx: OpContext) -> _Papers:
        """The documents: their kind, folder and parties, the naming convention, the party whose files stay as
        they are (if any), and each file's old name, new name and content."""
        rng = ctx.rng
        persona = ctx.persona
        voc = flavor.vocab(persona.domain, persona.occupation)
        dom = V.domain(persona)
        doc, dslug, plabel, pword, nolabel = rng.choice(DOCS.get(dom, DOCS["general"]))
        plural = doc + "s"
        year = rng.choice([2025, 2026, 2026])
        dfold = dslug.replace("-", "_") + "s"
        folder = ctx.path(V.folder_name(persona, rng, [dfold, f"{dfold}_{year}", f"{pword}_{dfold}", f"scans_{dfold}",
                                                       f"{dslug.split('-')[0]}_inbox", "to_file", "paperwork"]))
        clients = flavor.orgs(rng, rng.randint(2, 4))
        n = rng.randint(4, 7)
        numbers = sorted(rng.sample(range(5, 900 if rng.random() < 0.5 else 400), n))
        convention = rng.choice(["date_first", "number_first", "party_first"])
        compact = rng.random() < 0.35  # YYYYMMDD instead of YYYY-MM-DD in the new names
        pad = rng.choice([3, 3, 4])
        ext = rng.choice([".pdf.txt", ".pdf.txt", ".txt"])
        dpat = "YYYYMMDD" if compact else "YYYY-MM-DD"
        npat = "N" * pad

        def new_name(d, cs, no):
            ds = d.strftime("%Y%m%d") if compact else d.isoformat()
            num = f"{dslug}-{no:0{pad}d}"
            if convention == "date_first":
                return f"{ds}_{cs}_{num}{ext}"
            if convention == "number_first":
                return f"{num}_{cs}_{ds}{ext}"
            return f"{cs}_{ds}_{num}{ext}"

        skip_party = rng.choice(clients) if rng.random() < 0.4 and len(clients) >= 3 else None
        entries = []
        used_old: set[str] = set()
        for i, no in enumerate(numbers):
            c = clients[i % len(clients)] if i < len(clients) else rng.choice(clients)
            d = flavor.date_in(rng, year)
            amt = flavor.amount(rng, 60, 4800)
            cs = client_slug(c)
            new = new_name(d, cs, no)
            word = doc.capitalize()
            short = dslug.split("-")[0]
            candidates = [
                f"{word} {no} - {c}{ext}",
                f"{short[:3]}_{no:04d}_{cs.replace('-', '')}{ext}",
                f"{c.casefold()} {doc} #{no} ({d:%B}){ext}",
                f"{short.upper()}-{no} FINAL{ext}",
                f"scan{rng.randint(1000, 9999)}{ext}",
                f"{word}_{no}_{d:%d%m%y}{ext}",
                f"Copy of {doc} {no}{ext}",
                f"IMG_{rng.randint(1000, 9999)}{ext}",
                f"{c.split()[0]}_{d:%b}_{no}{ext}",
                f"doc{rng.randint(10, 99)} ({no}){ext}",
                f"{short} {d:%d.%m} {c.split()[0].casefold()}{ext}",
            ]
            old = next(o for o in rng.sample(candidates, len(candidates)) if o not in used_old)
            used_old.add(old)
            head = rng.choice([doc.upper(), f"{c.upper()} - {doc.upper()}", f"{word}", f"*** {doc.upper()} ***"])
            date_label = rng.choice(["Date", "Issued", "Dated", "Issue date", "Date of issue"])
            desc_label = rng.choice(["Description", "For", "Re", "Details", "Subject"])
            amt_label = rng.choice(["Amount", "Total", "Amount due", "Total (incl. tax)", "Sum"])
            desc = f"{rng.choice(voc['items'])} / {rng.choice(V.topics(persona))}"
            lines = [head, "", f"{nolabel}: {no}", f"{date_label}: {d.strftime(rng.choice(DATE_FORMATS))}",
                     f"{plabel}: {c}"]
            if rng.random() < 0.4:
                lines.append(f"Contact: {flavor.person(rng)}")
            lines += ["", f"{desc_label}: {desc}", f"{amt_label}: {money(amt)}", "",
                      rng.choice(["[text layer of a scanned PDF]", "[OCR text]", "[exported from the portal]",
                                  "[scanned on the office copier]", "[photo of a paper copy, OCR'd]"])]
            content = "\n".join(lines) + "\n"
            entries.append({"old": old, "new": new, "content": content, "client": c, "amount": amt, "no": no,
                            "date": d, "skip": c == skip_party})
        if skip_party and (all(e["skip"] for e in entries) or not any(e["skip"] for e in entries)):
            skip_party = None
            for e in entries:
                e["skip"] = False
        for e in entries:
            if e["skip"]:
                e["new"] = e["old"]
        return _Papers(doc, dslug, plabel, pword, plural, year, folder, clients, convention, compact, pad, ext, dpat,
                       npat, new_name, skip_party, entries)

    def _index(self, ctx: OpContext, pp: _Papers) -> _Index:
        """The folder's index: its name, its title and owner line, a status per file, with the old names (the
        workspace's) and the new ones (the reference's)."""
        rng = ctx.rng
        persona = ctx.persona
        doc, dslug, plabel, plural, year, folder, entries = (pp.doc, pp.dslug, pp.plabel, pp.plural, pp.year, pp.folder,
                                                             pp.entries)
        idx_name = rng.choice(["index.md", "contents.md", "overview.md", "README.md", "register.md", "_list.md",
                               f"{dslug}_register.md", "what_is_here.md"])
        index = ctx.path(f"{folder}/{idx_name}")
        index_name = index.rsplit("/", 1)[1]
        title = rng.choice([f"{doc.capitalize()}s {year}", f"{doc.capitalize()} register", "What's in this folder",
                            f"{plural.capitalize()} - {persona.name.split()[0]}", f"{year} {plural}"])
        status_pool = rng.choice([["paid", "open", "overdue", "sent"], ["filed", "to check", "queried", "done"],
                                  ["approved", "pending", "disputed", "received"]])
        kept_by = rng.choice([f"Kept by {persona.name}.", f"Maintained by {persona.name.split()[0]}.",
                              f"Owner: {persona.name}.", "Updated by hand."])

        def render(name_key: str) -> str:
            lines = [f"# {title}", "", f"{kept_by} One line per {doc}.", "",
                     f"| File | {plabel} | Amount | Status |", "|---|---|---:|---|"]
            for e in sorted(entries, key=lambda e: e["no"]):
                status = rng_status[e["no"]]
                lines.append(f"| `{e[name_key]}` | {e['client']} | {money(e['amount'])} | {status} |")
            lines += ["", f"Newest: `{max(entries, key=lambda e: e['date'])[name_key]}`", ""]
            return "\n".join(lines)

        rng_status = {e["no"]: rng.choice(status_pool) for e in entries}
        old_index = render("old")
        new_index = render("new")
        return _Index(index, index_name, old_index, new_index)

    # ------------------------------------------------------------------------------------------ phrasing
    def _request(self, ctx: OpContext, pp: _Papers, ix: _Index) -> _Request:
        """The rename map's header and path, the naming pattern with an example, the rules, and the request (or
        its terse register)."""
        rng = ctx.rng
        persona = ctx.persona
        doc, dslug, pword, plural, year, folder, clients = (pp.doc, pp.dslug, pp.pword, pp.plural, pp.year, pp.folder,
                                                            pp.clients)
        convention, compact, pad, ext, dpat, npat, new_name = (pp.convention, pp.compact, pp.pad, pp.ext, pp.dpat,
                                                               pp.npat, pp.new_name)
        skip_party, entries, index, index_name = pp.skip_party, pp.entries, ix.index, ix.index_name
        map_header = list(rng.choice(MAP_HEADERS))
        mapping = ctx.path(rng.choice(["rename_map.csv", "renamed_files.csv", "rename_log.csv", "renames.csv",
                                       f"{dslug}_renames.csv", "name_changes.csv"]))
        parts = {"date": dpat, "party": pword, "num": f"{dslug}-{npat}"}
        order = {"date_first": ["date", "party", "num"], "number_first": ["num", "party", "date"],
                 "party_first": ["party", "date", "num"]}[convention]
        pattern = "_".join(parts[k] for k in order) + ext
        ex_d = dt.date(year, rng.randint(1, 12), rng.randint(1, 28))
        ex = new_name(ex_d, rng.choice(EXAMPLE_PARTIES), rng.randint(1, 99))
        what_date = "YYYYMMDD (no dashes)" if compact else "YYYY-MM-DD"
        rule_items = [
            V.phrase("[the date, {pw} and number come from inside each file, not from its current name|"
                   "[read|take] the date, {pw} and number from the [contents|text] of each file - the current "
                   "names are [unreliable|wrong half the time|not to be trusted]|[go by|use] what's written "
                   "inside each {doc}, [never|not] the old file name]", rng, pw=pword, doc=doc),
            V.phrase("[the {pw} [part ]is [lowercase|all lower case] with hyphens [instead of|in place of|for] "
                   "spaces[ and no other punctuation|]|write the {pw} in lower case, spaces turned into hyphens|"
                   "{pw}: the name as it appears in the file, lower-cased, with hyphens between the words]", rng,
                   pw=pword),
            V.phrase("[{npat} is the {doc} number [padded|zero-padded] to {pad} digits|pad the {doc} number with "
                   "leading zeros to {pad} digits ({npat})|{npat} = the number, always {pad} digits]", rng,
                   npat=npat, doc=doc, pad=pad),
            V.phrase("[the date [is written|goes in as|appears as] {wd}|dates [as|in the form] {wd}, whatever "
                   "format the file uses|[convert|normalise] every date to {wd}]", rng, wd=what_date),
            V.phrase("[for example|e.g.|so one would look like|an example:] `{ex}`", rng, ex=ex),
        ]
        if skip_party:
            rule_items.append(V.phrase(
                "[leave|don't touch|skip] the {plural} from {party} ([that account is [disputed|closed|under "
                "review]|{who} [still has them|is checking them] under their current names|the [accountant|auditor] "
                "already [has|references] them by [the|their] old names]): they keep their [current |]names and "
                "stay out of the [map|mapping|rename log]", rng, plural=plural, party=skip_party, who=flavor.person(rng).split()[0]))
        idx_ref = rng.choice([f"`{index}`", f"`{index_name}` (in the same folder)", f"the index `{index}`"])
        rules = V.requirements_text(rng, rule_items)
        map_cols = f"{map_header[0]},{map_header[1]}"
        head = one_of(rng, [
            "The {plural} in `{folder}/` have [inconsistent|random|messy|all sorts of] names. [Rename|Please rename] "
            "each one to `{pattern}`.",
            "[Could you|Can you] bring the file names in `{folder}/` into line? Every {doc} should be "
            "called `{pattern}`.",
            "Please [bring|get] the file names in `{folder}/` into line: [every|each] {doc} [should be|needs to be] "
            "called `{pattern}`.",
            "I [need|want] [the|all the] {plural} in `{folder}/` renamed to [one|a single|a consistent] "
            "[convention|scheme|pattern]: `{pattern}`.",
            "[Naming chaos|Total chaos|What a mess] in `{folder}/` - [scans|downloads|exports] [called|named] "
            "things like `{ex_old}`. [Let's|Please] rename them all to `{pattern}`.",
            "Could you rename the {plural} sitting in `{folder}/` so they [all |]follow `{pattern}`?",
            "[Renaming job|A renaming chore|File-naming job] for you: [everything|each {doc}] in `{folder}/` "
            "[gets|should get] a name of the form `{pattern}`.",
            "[I'm tired of|I can't stand] [opening|guessing at] files [called|named] `{ex_old}`. [Please give|Give] "
            "[the|every] {doc} in `{folder}/` a proper name: `{pattern}`.",
            "[From now on|Going forward] [our|my] {plural} [follow|use] `{pattern}` - [could you|can you|please] "
            "[convert|rename] the ones [already |]in `{folder}/`[?|.]",
        ], plural=plural, folder=folder, pattern=pattern, doc=doc, ex_old=entries[0]["old"])
        idx_sent = one_of(rng, [
            "{idx} [lists|tracks|references] the files, so [fix|update|change] the names there too "
            "([leave|keep] everything else in it as is).",
            "[Update|Fix|Also update] {idx} so it [refers to|points at|uses] the new names[; nothing else in it should "
            "change|, leaving the rest of it alone|].",
            "[Don't forget|Remember|And mind] {idx}: [it names every file|every file is listed there], so it has "
            "to [use|show] the new names [afterwards|too] (the rest [stays|unchanged]).",
            "{idx} [still|currently] [mentions|shows] the old names; [swap them for|replace them with] the new "
            "ones [and change nothing else there|, nothing more].",
            "[Keep|Make sure] {idx} [in sync|consistent] [with the renames|with the new names]: [only|just] the "
            "file names [in it |]change, [every other line|the rest of it] [stays as it is|is kept].",
        ], idx=idx_ref)
        map_sent = one_of(rng, [
            "[Save|Write|Put] the old -> new mapping [as|in|into] `{mapping}` ([header|columns] {cols}; file names "
            "only, one row per renamed file).",
            "[And|Also,|Finally,] [I need|please write|leave me] `{mapping}` with the columns {cols} - [just |]the "
            "file names, [not full paths|without the folder], one row [per|for each] file you renamed.",
            "[Log|Record] every rename in `{mapping}` ({cols} as the header, [file names only|bare file names], "
            "one row per [renamed file|rename]).",
            "[So I can trace them back|In case someone asks for an old name], `{mapping}` [should map|maps] "
            "[each|every] old name to its new one ({cols}; [names without folders|no folder paths]; [a row per "
            "renamed file|one line per rename]).",
            "`{mapping}` [gets|holds] [the renames|a line per rename]: [header|columns] {cols}, [bare file "
            "names|file names only, no folders].",
        ], mapping=mapping, cols=map_cols)
        tail = [idx_sent, map_sent]
        rng.shuffle(tail)
        hint = one_of(rng, ["", "[There are|It's] {n} {plural}[ in there|], from {parties}.", "[They're|These are] "
                           "from {parties}[ ({n} files)|].", "{n} files[, all {year}|] - {parties}."],
                     n=len(entries), plural=plural, parties=V.listing(clients), year=year)
        instruction = V.glue(head, V.story(persona, rng, "rename"), hint,
                             V.mention(persona, rng, f"{folder}/{rng.choice(entries)['old']}", 0.35), rules, *tail,
                             V.aside(persona, rng, f"`{folder}/`"), V.timing(rng))
        if rng.random() < 0.25:  # the terse register: one dense paragraph
            skip_txt = V.phrase(" [Skip|Leave out] {party} ([their|its] {plural} keep their names and stay out of "
                                "the map).", rng, party=skip_party, plural=plural) if skip_party else ""
            instruction = V.glue(expand(
                "[Rename|Batch-rename] [the|all] {plural} in `{folder}/` [to|as] `{pattern}`[ (e.g. `{ex}`)|]. "
                "{pw} = [lowercase, hyphens for spaces|lower-case slug with hyphens]; {npat} = {doc} number, {pad} "
                "digits; date as {wd}; [all three|date, {pw} and number] [from the file contents|read from inside "
                "the files], not the old names.{skip} [Update|Fix] `{index}` [to match|accordingly]. Map -> "
                "`{mapping}` ({cols}, [file names only|bare names]).", rng, plural=plural, folder=folder,
                pattern=pattern, ex=ex, pw=pword, npat=npat, doc=doc, pad=pad, wd=what_date, skip=skip_txt,
                index=index, mapping=mapping, cols=map_cols), V.timing(rng))
        return _Request(map_header, mapping, pattern, instruction)

    # ------------------------------------------------------------------------------------------ checks
    @staticmethod
    def _renames(pp: _Papers) -> tuple[dict[str, list[str]], list[list[str]]]:
        """The moves (old path -> [new path, content]) and the rename map's rows, the skipped files left out."""
        folder, entries = pp.folder, pp.entries
        renamed = [e for e in entries if not e["skip"]]
        moves = {f"{folder}/{e['old']}": [f"{folder}/{e['new']}", e["content"]] for e in renamed}
        map_rows = [[e["old"], e["new"]] for e in renamed]
        return moves, map_rows

    @staticmethod
    def _checks(pp: _Papers, ix: _Index, ask: _Request, moves: dict, map_rows: list) -> list[Check]:
        """The files renamed, the index updated (new names in, old ones out), the rename map, and the
        persona's exception left alone."""
        folder, entries, index, mapping, map_header = pp.folder, pp.entries, ix.index, ask.mapping, ask.map_header
        renamed = [e for e in entries if not e["skip"]]
        skipped = [e for e in entries if e["skip"]]
        new_names = [e["new"] for e in entries]
        old_names = [e["old"] for e in renamed if not any(e["old"] in t for t in new_names)]
        index_check = [Check("", "text_has", {"path": index, "needles": new_names})]
        if old_names:
            index_check.append(Check("", "text_has_none", {"path": index, "needles": old_names}))
        checks = [
            Check("files_renamed", "files_moved", {"moves": moves}),
            Check("index_updated", "min_of", parts=index_check),
            Check("rename_map", "data_path_rows", {"path": mapping, "header": map_header, "rows": map_rows,
                                                   "path_columns": map_header, "base": folder}),
        ]
        if skipped:  # the persona's exception: those files keep their names and content (once the rest is done)
            checks.append(Check("exception_left_alone", "gated", parts=[
                Check("", "mean_of", parts=[Check("", "text_equals", {"path": f"{folder}/{e['old']}",
                                                                       "expected": e["content"]}) for e in skipped]),
                Check("", "files_moved", {"moves": moves})]))
        return checks


GENERATORS = [BatchRename()]
