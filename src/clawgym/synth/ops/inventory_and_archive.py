"""inventory_and_archive: move stale files of a folder (by the date in their name, or by the last-modified column
of a provided listing; never by real mtimes) under <folder>/archive/<year>/, and write a manifest CSV
(path, size_bytes, type) of everything in the folder afterwards."""

from __future__ import annotations

import datetime as dt
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
    read,
    to_csv,
    write,
)

MANIFEST_HEADERS = [["path", "size_bytes", "type"], ["file", "bytes", "extension"], ["path", "size", "ext"],
                    ["relative_path", "size_in_bytes", "file_type"], ["path", "bytes", "kind"]]
LISTING_HEADERS = [["path", "last_modified", "modified_by"], ["file", "modified", "owner"],
                   ["path", "mtime", "user"], ["name", "changed", "changed_by"], ["path", "last_edit", "editor"]]
ARCHIVE_DIRS = ["archive", "archive", "_archive", "old", "archived", "Archive"]


def _content(rng, kind: str, title: str, voc: dict, people: list[str]) -> str:
    if kind == "csv":
        rows = "".join(f"{it},{rng.randint(1, 40)},{money(flavor.amount(rng, 1, 300))}\n"
                       for it in rng.sample(voc["items"], rng.randint(2, 5)))
        return "item,qty,cost\n" + rows
    if kind == "json":
        return ('{\n  "title": "' + title + '",\n  "owner": "' + rng.choice(people) + '",\n  "items": '
                + str(rng.randint(1, 60)) + "\n}\n")
    if kind == "yaml":
        return (f"title: {title}\nowner: {rng.choice(people)}\nitems:\n"
                + "".join(f"  - {it}\n" for it in rng.sample(voc["items"], rng.randint(1, 4))))
    if kind == "tsv":
        return "item\tqty\n" + "".join(f"{it}\t{rng.randint(1, 40)}\n" for it in rng.sample(voc["items"], 3))
    if kind == "log":
        return "".join(f"[{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}] {rng.choice(['sync ok', 'backup ok', 'warn: retry', 'job done'])}\n"
                       for _ in range(rng.randint(2, 6)))
    lines = [f"# {title}", "", f"- {rng.choice(people)}: {rng.choice(voc['projects'])}",
             f"- budget line: {rng.choice(voc['categories'])}"]
    lines += [f"- {it}" for it in rng.sample(voc["items"], rng.randint(0, 4))]
    return "\n".join(lines) + "\n"


@dataclass
class _Folder:
    """The data stage: the folder's files, which of them are stale, where they go and the manifest afterwards."""

    folder: str
    people: list[str]
    mode: str  # "names": a file's date is in its name; "listing": in the last-modified column of a listing
    cutoff: dt.date
    kinds: list[str]  # the file types the folder holds
    date_pos: str  # where a name has its date: "start" or "end"
    adir: str  # the archive folder's name
    mheader: list[str]  # the manifest's columns
    entries: list[dict]  # {path, name, date, type, content, new}
    exempt: dict | None  # the persona's exception: a stale file that stays
    moves: dict[str, str]
    manifest: list[list[str]]
    files: list[WorkspaceFile]
    out: str  # the manifest


@dataclass
class _Request:
    """The phrasing stage: what the reference reads first, and the request."""

    reads: list
    instruction: str


@operation
class InventoryAndArchive(OperationGenerator):
    id = "inventory_and_archive"
    consumes: tuple[str, ...] = ()
    produces = (TABLE,)
    standalone = True
    folder_scoped = True

    def plan(self, ctx: OpContext, source: Artifact | None) -> StepPlan:
        box = self._folder(ctx)
        ask = self._request(ctx, box)
        folder, moves, entries, out, mheader, manifest = box.folder, box.moves, box.entries, box.out, box.mheader, \
            box.manifest
        dirs = sorted({new.rsplit("/", 1)[0] for new in moves.values()})
        cmd = "mkdir -p " + " ".join(shlex.quote(d) for d in dirs) + " && " + " && ".join(
            f"mv {shlex.quote(o)} {shlex.quote(n)}" for o, n in moves.items())
        some = list(moves.items())[: max(1, len(moves) // 2)]
        pdirs = sorted({n.rsplit("/", 1)[0] for _, n in some})
        pcmd = "mkdir -p " + " ".join(shlex.quote(d) for d in pdirs) + " && " + " && ".join(
            f"mv {shlex.quote(o)} {shlex.quote(n)}" for o, n in some)
        # partial manifest: the paths before archiving, sizes guessed from line counts
        pman = [[e["path"], str(e["content"].count("\n") * 20), e["type"]] for e in entries]
        ctx.used_paths.update(f.path for f in box.files)
        return StepPlan(
            operation=self.id,
            instruction=ask.instruction,
            files=box.files,
            checks=self._checks(box),
            steps=ask.reads + [exec_(cmd), write(out, to_csv(mheader, manifest))],
            partial=[exec_(pcmd), write(out, to_csv(mheader, pman))],
            outputs=[Artifact(out, TABLE, {"header": mheader, "rows": manifest}, f"the file manifest ({out})",
                              roles={"name": mheader[0], "group": mheader[2], "value": mheader[1]})],
            summary=f"archive stale files of {folder}/ and write the manifest {out}",
            fingerprint=digest([box.mode, box.cutoff.isoformat(), [(e["path"], e["date"].isoformat(), e["content"])
                                                                  for e in entries]]),
        )

    # ----------------------------------------------------------------------------------------- data
    def _folder(self, ctx: OpContext) -> _Folder:
        """The folder and its 7-12 files (some in a sub-folder), each dated before or after the cutoff, at least
        two of each; a stale one may be the persona's exception. The stale ones move to <archive>/<year>/, and the
        manifest lists every file at its place afterwards."""
        rng = ctx.rng
        voc = flavor.vocab(ctx.persona.domain, ctx.persona.occupation)
        people = flavor.people(rng, 3)
        persona = ctx.persona
        folder = ctx.path(V.folder_name(persona, rng, ["projects", "shared", "work_files", "office", "team_share",
                                                       "documents", "admin", "records", "common"]))
        mode = rng.choice(["names", "listing"])
        cutoff = dt.date(rng.choice([2025, 2026]), rng.randint(1, 12), rng.choice([1, 1, 15]))
        n = rng.randint(7, 12)
        topics = V.topics(persona) + voc["items"]
        kinds = rng.sample(["md", "md", "txt", "csv", "json", "log", "yaml", "tsv"], k=rng.randint(3, 5))
        date_pos = rng.choice(["start", "start", "end"])
        adir = rng.choice(ARCHIVE_DIRS)
        mheader = list(rng.choice(MANIFEST_HEADERS))
        entries = []  # {path, date, content, type}
        used: set[str] = set()
        sub = rng.choice(["", "", "reports", "data", "minutes", "drafts", "exports"])
        tries = 0
        while len(entries) < n and tries < 200:
            tries += 1
            stale = len(entries) < 2 or rng.random() < 0.45
            if len(entries) in (2, 3):
                stale = False
            days = rng.randint(1, 900) if stale else rng.randint(0, 200)
            d = cutoff - dt.timedelta(days=days) if stale else cutoff + dt.timedelta(days=days)
            kind = rng.choice(kinds)
            topic = flavor.slug(rng.choice(topics))
            if mode == "names":
                name = f"{d.isoformat()}_{topic}.{kind}" if date_pos == "start" else f"{topic}_{d.isoformat()}.{kind}"
            else:
                name = f"{topic}.{kind}"
            where = f"{folder}/{sub}" if sub and rng.random() < 0.3 else folder
            if name in used:
                continue
            used.add(name)
            entries.append({"path": f"{where}/{name}", "name": name, "date": d, "type": kind,
                            "content": _content(rng, kind, topic.replace("_", " ").capitalize(), voc, people)})
        rng.shuffle(entries)
        # the persona's exception: one stale file that stays where it is
        stale_entries = [e for e in entries if e["date"] < cutoff]
        exempt = rng.choice(stale_entries) if len(stale_entries) >= 2 and rng.random() < 0.35 else None
        moves, manifest = {}, []
        for e in entries:
            if e["date"] < cutoff and e is not exempt:
                new = f"{folder}/{adir}/{e['date'].year}/{e['name']}"
                moves[e["path"]] = new
            else:
                new = e["path"]
            e["new"] = new
            manifest.append([new, str(len(e["content"].encode("utf-8"))), e["type"]])
        manifest.sort(key=lambda r: r[0])
        files = [WorkspaceFile(path=e["path"], content=e["content"]) for e in entries]
        base = folder.rsplit("/", 1)[-1].casefold()
        out = ctx.path(rng.choice(["manifest.csv", f"{base}_manifest.csv", "inventory.csv", f"{base}_inventory.csv",
                                   "file_inventory.csv", "contents_list.csv"]))
        return _Folder(folder, people, mode, cutoff, kinds, date_pos, adir, mheader, entries, exempt, moves, manifest,
                       files, out)

    @staticmethod
    def _listing(ctx: OpContext, box: _Folder) -> tuple[str, str]:
        """In "listing" mode: the file server's listing (path, last modified, by whom) added to the files; its
        last-modified column and its path."""
        rng = ctx.rng
        lh = list(rng.choice(LISTING_HEADERS))
        listing = ctx.path(rng.choice(["file_listing.csv", "server_listing.csv", "drive_export.csv",
                                       "nas_export.csv", "share_report.csv", "sharepoint_export.csv"]))
        lrows = sorted([[e["path"], f"{e['date'].isoformat()} {rng.randint(7, 19):02d}:{rng.randint(0, 59):02d}",
                         rng.choice(box.people)] for e in box.entries], key=lambda r: r[0])
        box.files.append(WorkspaceFile(path=listing, content=to_csv(lh, lrows)))
        return lh[1], listing

    # ----------------------------------------------------------------------------------------- phrasing
    @staticmethod
    def _age(ctx: OpContext, box: _Folder, cut: str, col: str, listing: str) -> str:
        """The request's rule for what is stale (the listing's column `col`, or the date in the names) and where
        it goes, and the exception, if any."""
        rng = ctx.rng
        folder, adir = box.folder, box.adir
        if box.mode == "listing":
            age = one_of(rng, [
                "A file is stale when its {col} date in `{listing}` ([an export from the file server|exported from "
                "the [NAS|share|drive]]; the timestamps on disk are [meaningless|wrong|all from the copy]) is before "
                "{cut}; archive it under `{folder}/{adir}/<year of {col}>/` keeping its file name.",
                "[Go by|Use] the {col} column of `{listing}`, not the [timestamps on disk|file dates on disk] "
                "([those got reset|they were reset] when I copied [everything|the folder]): anything [last touched|"
                "modified] before {cut} is stale and moves to `{folder}/{adir}/<year of {col}>/`, same file name.",
                "`{listing}` is [the|an] export [from the file server|of the share] with a {col} column - that's "
                "the [real|only reliable] date. Everything with {col} before {cut} moves to "
                "`{folder}/{adir}/<year of {col}>/` (names unchanged); [disk timestamps|file dates on disk] don't "
                "count.",
            ], col=col, listing=listing, cut=cut, folder=folder, adir=adir)
        else:
            where_date = "starts" if box.date_pos == "start" else "ends (before the extension)"
            age = one_of(rng, [
                "Each file name {wd} with the date it was last worked on (YYYY-MM-DD); ignore the timestamps on "
                "disk. A file dated before {cut} is stale: move it to `{folder}/{adir}/<that year>/`, keeping its "
                "file name.",
                "[The date in each file name|Each name's date] (YYYY-MM-DD, the name {wd} with it) is what counts, "
                "not the disk timestamps: [everything|anything] dated before {cut} [goes to|belongs in] "
                "`{folder}/{adir}/<year>/` [under the same name|with its name unchanged].",
                "Cutoff is {cut}: files whose name-date (YYYY-MM-DD; the name {wd} with it) is earlier [get "
                "archived|are stale] - move them to `{folder}/{adir}/<year of that date>/`, names unchanged. [The "
                "dates on disk mean nothing|Ignore the disk timestamps].",
                "[What counts as old|How to tell what's stale]: [every|each] name {wd} with a YYYY-MM-DD date "
                "([the disk timestamps are|file times on disk are] [useless|from the copy]). [Anything|Files] "
                "[from before|dated earlier than] {cut} [go into|move to] `{folder}/{adir}/<year>/`, [keeping "
                "the name|same file name].",
                "[I date every file in its name|My file names carry the date] (YYYY-MM-DD; the name {wd} with "
                "it) - [go by that|use that], not [what the disk says|the modified time]. [Before|Older than] "
                "{cut} [means archive|= stale]: `{folder}/{adir}/<that year>/`, [name unchanged|no renaming].",
            ], wd=where_date, cut=cut, folder=folder, adir=adir)
        if box.exempt is not None:
            age += " " + one_of(rng, [
                "[Except|But leave] `{p}`[: |, ]{why} - it stays where it is.",
                "One exception: `{p}` stays put ({why}), stale or not.",
                "[Don't archive|Leave out] `{p}` [even though it's old|however old it is] - {why}.",
                "`{p}` [is staying|must stay] [where it is|at its current path]: {why}.",
            ], p=box.exempt["path"], why=V.one_phrase(rng, [
                "[it's the template I copy every [year|term|season]|I still [use|update] it]",
                "{who} [links to|reads] it [there|at that path]",
                "[the auditors|the inspectors|{who}] want it [in place|where it is] [until the review|for now]",
            ], who=flavor.person(rng).split()[0]))
        return age

    def _request(self, ctx: OpContext, box: _Folder) -> _Request:
        """The request: an opening, the persona's story and a hint at the folder's contents, the staleness rule,
        the manifest's columns; a quarter of them in a terse register instead."""
        rng = ctx.rng
        persona, folder, adir, out, mheader, entries, kinds = ctx.persona, box.folder, box.adir, box.out, \
            box.mheader, box.entries, box.kinds
        reads = [ls(folder)]
        cut = V.date_text(rng, box.cutoff)
        col = listing = ""
        if box.mode == "listing":
            col, listing = self._listing(ctx, box)
            reads.append(read(listing))
        age = self._age(ctx, box, cut, col, listing)
        mcols = ",".join(mheader)
        spec = one_of(rng, [
            "[Then|Afterwards|After that] write a manifest `{out}` of every file under `{folder}/` as it is "
            "afterwards (archived ones at their new place), with the columns {c0} ({rel}), {c1} (exact size in "
            "bytes) and {c2} (the file extension without the dot, e.g. {ex}).",
            "Afterwards save `{out}` listing every file in `{folder}/` (including the {adir} folder) with the "
            "header {mcols} - {c0} [relative to the workspace root|from the workspace root|workspace-relative], "
            "{c1} in bytes, {c2} = extension like {ex}.",
            "[I also need|And please write] `{out}`: one row per file under `{folder}/` after the move, columns "
            "{mcols}, where {c1} is the [exact |]size in bytes and {c2} the extension [without the dot|minus the "
            "dot] (e.g. {ex}); {c0} is the path [relative to the workspace root|from the workspace root].",
            "[Once that's done|When the old files are moved], [take stock|do the inventory]: `{out}` [with|"
            "having] {mcols} [as header|as its columns] and [a row|one line] [per|for every] file [left |]under "
            "`{folder}/` ([archived ones included|the {adir} ones too]) - {c0} {rel}, {c1} [the byte count|in "
            "bytes, exact], {c2} [the bare extension|the extension with no dot] ([like|e.g.] {ex}).",
            "[The manifest|An inventory] goes to `{out}` [afterwards|at the end]: {mcols}; [every|each] file "
            "[that's now|currently] in `{folder}/` [(the archive included)|, archived or not], {c0} {rel}, "
            "{c1} = [exact size in bytes|bytes], {c2} = [extension, no dot|extension minus the dot] ({ex} "
            "[for example|say]).",
        ], out=out, folder=folder, c0=mheader[0], c1=mheader[1], c2=mheader[2], mcols=mcols, adir=adir,
            rel=V.paths_rel(rng), ex=rng.choice(kinds))
        head = one_of(rng, [
            "Time to archive old material in `{folder}/`.",
            "Please do an inventory-and-archive pass over `{folder}/`.",
            "Could you do an [inventory-and-archive|archive-and-inventory] pass over `{folder}/`?",
            "`{folder}/` [has grown|is getting] [too big|unwieldy|hard to navigate] - {n} files, [lots of|many] "
            "[them stale|them old]. [Let's|Please] archive [the old stuff|what's stale] and take stock.",
            "[Before the [new term|new quarter|audit|year end]|Ahead of the [review|audit]], I [want|need] "
            "`{folder}/` [archived and inventoried|cleaned up with a proper inventory].",
            "[Old files|Stale stuff|Last year's files] [are clogging|clutter] `{folder}/`. [Move them into an "
            "archive|Archive them] and [give me|write] a [manifest|file list] [of what's left|afterwards].",
            "[I'd like to|Let's] [retire|put away] the [old|stale] material in `{folder}/` and [know|record] "
            "exactly what's [in there|left] [by size and type|afterwards].",
        ], folder=folder, n=len(entries))
        oldest = min(e["date"] for e in entries)
        hint = one_of(rng, ["", "[Some of it|The oldest stuff] goes back to {y}.", "[There are|It has] {n} files"
                           "[, the oldest from {y}| ({k})|].", "Mostly {k} files[, {n} in total|]."],
                       y=oldest.year, n=len(entries), k=V.listing(sorted(set(kinds))))
        instruction = V.glue(head, V.story(persona, rng, "archive"), hint,
                             V.mention(persona, rng, rng.choice(entries)["path"]), age, spec,
                             V.aside(persona, rng, f"`{folder}/`"), V.timing(rng))
        if rng.random() < 0.25:  # the terse register
            crit = (V.phrase("its `{col}` value in `{listing}` (ignore [disk times|the timestamps on disk])", rng,
                             col=col, listing=listing) if box.mode == "listing" else
                    V.phrase("the YYYY-MM-DD date [at the {pos} of|in] its name (ignore [disk times|the timestamps "
                             "on disk])", rng, pos="start" if box.date_pos == "start" else "end"))
            exc = V.phrase(" Not `{p}`: it stays.", rng, p=box.exempt["path"]) if box.exempt is not None else ""
            instruction = V.glue(expand(
                "[Archive + inventory|Archive and inventory] `{folder}/`. Stale = {crit} before {cut} -> "
                "`{folder}/{adir}/<year>/`, same name.{exc} Then `{out}` with {mcols} for every file under "
                "`{folder}/` afterwards ({c0} {rel}, {c1} exact bytes, {c2} = extension without the dot).", rng,
                folder=folder, crit=crit, cut=cut, adir=adir, exc=exc, out=out, mcols=mcols, c0=mheader[0],
                c1=mheader[1], c2=mheader[2], rel=V.phrase("[relative to the workspace root|from the workspace "
                                                             "root]", rng)), V.timing(rng))
        return _Request(reads, instruction)

    # ----------------------------------------------------------------------------------------- checks
    @staticmethod
    def _checks(box: _Folder) -> list[Check]:
        """The stale files at their archive paths, unchanged; the manifest's paths (counting as far as it has
        the sizes and types too), sizes and types; the exception left in place."""
        folder, mheader, manifest, exempt = box.folder, box.mheader, box.manifest, box.exempt
        expected_moves = {old: [new, next(e["content"] for e in box.entries if e["path"] == old)]
                          for old, new in box.moves.items()}
        checks = [
            Check("stale_files_archived", "files_moved", {"moves": expected_moves}),
            # the paths count as far as the manifest describes the files (their sizes, their types): a listing of
            # paths copied from the server export is no manifest
            Check("manifest_paths", "gated", parts=[
                Check("", "data_path_rows", {"path": box.out, "header": mheader[:1],
                                             "rows": [[r[0]] for r in manifest], "path_columns": mheader[:1],
                                             "base": folder}),
                Check("", "mean_of", parts=[
                    Check("", "data_path_rows", {"path": box.out, "header": mheader[:2],
                                                 "rows": [r[:2] for r in manifest], "path_columns": mheader[:1],
                                                 "base": folder, "tol": 0.0}),
                    Check("", "data_path_rows", {"path": box.out, "header": [mheader[0], mheader[2]],
                                                 "rows": [[r[0], r[2]] for r in manifest], "path_columns": mheader[:1],
                                                 "base": folder})])]),
            Check("manifest_sizes", "data_path_rows", {"path": box.out, "header": mheader[:2],
                                                       "rows": [r[:2] for r in manifest], "path_columns": mheader[:1],
                                                       "base": folder, "tol": 0.0}),
            Check("manifest_types", "data_path_rows", {"path": box.out, "header": [mheader[0], mheader[2]],
                                                       "rows": [[r[0], r[2]] for r in manifest],
                                                       "path_columns": mheader[:1], "base": folder}),
        ]
        if exempt is not None:  # the persona's exception stays in place, unchanged (once the others moved)
            checks.append(Check("exception_left_in_place", "gated", parts=[
                Check("", "text_equals", {"path": exempt["path"], "expected": exempt["content"]}),
                Check("", "files_moved", {"moves": expected_moves})]))
        return checks


GENERATORS = [InventoryAndArchive()]
