"""deduplicate_files: a folder with identical copies ("budget (1).md", "Copy of budget.md") and superseded
drafts ("report_v1.md" .. "report_v3.md"); keep one canonical copy of each, delete the rest and log what was
removed and why. A look-alike name with different content is not a duplicate and must stay."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from clawgym.core.records import WorkspaceFile
from clawgym.synth import flavor
from clawgym.synth.grammar import expand, one_of
from clawgym.synth.ops import _files_vocab as V
from clawgym.synth.ops import operation
from clawgym.synth.ops._tables import digest
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

LOG_HEADERS = [["removed", "reason", "kept"], ["deleted_file", "why", "kept_file"], ["path", "reason", "replaced_by"],
               ["file", "reason", "kept_copy"], ["removed_path", "reason", "surviving_path"]]
REASONS = [("duplicate", "superseded"), ("copy", "old_version"), ("identical", "older_draft"),
           ("exact_copy", "outdated"), ("dup", "superseded")]
# how copies get named: (pattern, how the request describes it)
COPY_MARKS = [("{b} (1)", "\"(1)\""), ("Copy of {b}", "\"Copy of\""), ("{b} - copy", "\"- copy\""),
              ("{b}_backup", "\"_backup\""), ("{b} copy", "\" copy\""), ("{b} (conflicted copy)", "\"(conflicted copy)\""),
              ("{b}_OLD", "\"_OLD\""), ("{b}-dup", "\"-dup\"")]
VERSION_MARKS = [("{b}_v{n}", "name_v1, name_v2, ..."), ("{b}-v{n}", "name-v1, name-v2, ..."),
                 ("{b}_rev{n}", "name_rev1, name_rev2, ..."), ("{b}_draft{n}", "name_draft1, name_draft2, ..."),
                 ("{b} v{n}", "\"name v1\", \"name v2\", ...")]
LINE_VERBS = ["Order", "Check", "Budget for", "Follow up on", "Review", "Confirm", "Chase", "Price up", "Book",
              "Ask about", "Count", "Update"]
REVISIONS = ["revised figures", "added comments", "final wording", "fixed typos", "new dates", "cut section 3",
             "{who}'s edits merged", "numbers checked", "layout tidied", "added appendix"]


def _doc_text(rng, title: str, voc: dict, people: list[str], ext: str, topics: list[str], extra: int = 0) -> str:
    if ext == "csv":
        head = rng.choice(["item,qty,owner", "task,due,owner", "line,amount,who"])
        rows = [f"{rng.choice(voc['items'])},{rng.randint(1, 60)},{rng.choice(people).split()[0]}"
                for _ in range(rng.randint(2, 5) + extra)]
        return head + "\n" + "\n".join(rows) + "\n"
    lines = [f"# {title}" if ext == "md" else title.upper(), "",
             f"{rng.choice(['Owner', 'Author', 'Prepared by', 'Last edited by'])}: {rng.choice(people)}", ""]
    for _ in range(rng.randint(2, 4) + extra):
        lines.append(f"- {rng.choice(LINE_VERBS)} {rng.choice(voc['items'])} ({rng.choice(topics)})")
    return "\n".join(lines) + "\n"


@dataclass
class _Folder:
    """The data stage: the folder's files, what is removed and what is kept."""

    folder: str
    exts: list[str]
    pool: list[str]  # the persona's topics
    topics: list[str]  # the ones the documents are about, in order
    header: list[str]  # the log's columns: removed, reason, kept
    dup_word: str  # the reason for an exact copy
    sup_word: str  # the reason for a superseded draft
    marks: list[tuple[str, str]]  # how copies are named here
    vdesc: str  # how the request describes the draft numbering
    files: dict[str, str]  # path -> content
    order: list[str]  # the files in the order the workspace lists them
    removed: list[list[str]]  # [path, reason, kept path]
    kept: dict[str, str]  # path -> content
    n_docs: int  # documents (copied, drafted or unique)
    exception: tuple[str, str] | None  # an old draft the persona wants to keep: (path, why)


@dataclass
class _Request:
    """The phrasing stage: the log's path and the request."""

    log: str
    instruction: str


@operation
class DeduplicateFiles(OperationGenerator):
    id = "deduplicate_files"
    consumes: tuple[str, ...] = ()
    produces = (TABLE,)
    standalone = True
    folder_scoped = True

    def plan(self, ctx: OpContext, source: Artifact | None) -> StepPlan:
        fo = self._folder(ctx)
        ask = self._request(ctx, fo)
        checks = self._checks(fo, ask)
        folder, files, removed, header, dup_word, log = fo.folder, fo.files, fo.removed, fo.header, fo.dup_word, ask.log
        # the reference deletes every copy and old draft; the partial only the exact copies
        dup_removed = [r[0] for r in removed if r[1] == dup_word]
        cmd = "rm -- " + " ".join(shlex.quote(r[0]) for r in removed)
        pcmd = "rm -- " + " ".join(shlex.quote(p) for p in dup_removed)
        ctx.used_paths.update(files)
        return StepPlan(
            operation=self.id,
            instruction=ask.instruction,
            files=[WorkspaceFile(path=p, content=files[p]) for p in fo.order],
            checks=checks,
            steps=[ls(folder), exec_(cmd),
                   write(log, to_csv(header, removed))],
            partial=[exec_(pcmd), write(log, to_csv(header, [r for r in removed if r[1] == dup_word]))],
            outputs=[Artifact(log, TABLE, {"header": header, "rows": removed}, f"the de-duplication log ({log})",
                              roles={"group": header[1], "name": header[0]})],
            summary=f"de-duplicate {folder}/ and log removals in {log}",
            fingerprint=digest(sorted(files.items())),
        )

    # ------------------------------------------------------------------------------------------ data
    def _folder(self, ctx: OpContext) -> _Folder:
        """The folder: its documents with their exact copies, numbered drafts (an old one sometimes kept as the
        persona's exception), unique files and a look-alike name with other content; the log's header and
        reason words; what is removed (and why, and what stays instead) and what is kept."""
        rng = ctx.rng
        persona = ctx.persona
        voc = flavor.vocab(persona.domain, persona.occupation)
        people = flavor.people(rng, 3)
        folder = ctx.path(V.folder_name(persona, rng, ["shared_docs", "documents", "team_drive", "notes",
                                                       "old_laptop_copy", "dropbox_export", "usb_stick",
                                                       "my_documents", "drive_dump", "synced"]))
        exts = rng.choice([["md"], ["txt"], ["md", "txt"], ["md", "csv"], ["txt", "csv", "md"]])
        pool = V.topics(persona)
        topics = rng.sample(pool, k=min(7, len(pool)))
        header = list(rng.choice(LOG_HEADERS))
        dup_word, sup_word = rng.choice(REASONS)
        marks = rng.sample(COPY_MARKS, k=rng.randint(2, 4))
        vmark, vdesc = rng.choice(VERSION_MARKS)
        files: dict[str, str] = {}
        removed: list[list[str]] = []  # [path, reason, kept path]
        kept: dict[str, str] = {}
        n_dup = rng.randint(1, 2)
        n_ver = rng.randint(1, 2)
        n_uniq = rng.randint(1, 2)
        trap = rng.random() < 0.6
        exception = None  # an old draft the persona wants to keep: (path, why)
        t = iter(topics)
        for _ in range(n_dup):
            base = flavor.slug(next(t))
            ext = rng.choice(exts)
            text = _doc_text(rng, base.replace("_", " ").capitalize(), voc, people, ext, pool)
            canon = f"{folder}/{base}.{ext}"
            files[canon] = text
            kept[canon] = text
            for pat, _ in rng.sample(marks, k=rng.randint(1, min(2, len(marks)))):
                c = f"{folder}/{pat.format(b=base)}.{ext}"
                files[c] = text
                removed.append([c, dup_word, canon])
        for _ in range(n_ver):
            base = flavor.slug(next(t))
            ext = rng.choice(exts)
            title = base.replace("_", " ").capitalize()
            n = rng.randint(2, 4)
            texts = []
            body = _doc_text(rng, title, voc, people, ext, pool)
            for v in range(1, n + 1):
                rev = rng.choice(REVISIONS).format(who=rng.choice(people).split()[0])
                body = body + (f"v{v},{rev},\n" if ext == "csv" else f"- v{v}: {rev}\n")
                texts.append(body)
            latest = f"{folder}/{vmark.format(b=base, n=n)}.{ext}"
            for v in range(1, n + 1):
                p = f"{folder}/{vmark.format(b=base, n=v)}.{ext}"
                files[p] = texts[v - 1]
                if v == 1 and n >= 3 and exception is None and rng.random() < 0.45:
                    exception = (p, V.one_phrase(rng, [
                        "[{who} needs|{who} still quotes|the [auditor|inspector|accountant] asked for] the first "
                        "draft [for|as] [the record|the audit trail|a comparison]",
                        "it's the version [I sent to|signed off by|approved by] {who}",
                        "[I want|I'd like] to keep the original [for reference|as a baseline|to compare against]",
                    ], who=rng.choice(people)))
                    kept[p] = texts[0]
                    continue
                if v < n:
                    removed.append([p, sup_word, latest])
            kept[latest] = texts[-1]
            if rng.random() < 0.5:  # an exact copy of the latest draft as well
                pat = marks[0][0]
                c = f"{folder}/{pat.format(b=vmark.format(b=base, n=n))}.{ext}"
                files[c] = texts[-1]
                removed.append([c, dup_word, latest])
        for _ in range(n_uniq):
            base = flavor.slug(next(t))
            ext = rng.choice(exts)
            p = f"{folder}/{base}.{ext}"
            files[p] = _doc_text(rng, base.replace("_", " ").capitalize(), voc, people, ext, pool)
            kept[p] = files[p]
        if trap:  # looks like a copy by name, but the content differs: not a duplicate
            canon = next(iter(kept))
            name, ext = canon.rsplit("/", 1)[1].rsplit(".", 1)
            for pat, _ in [(m[0].replace("(1)", "(2)"), m[1]) for m in marks] + [("{b} (2)", "")]:
                p = f"{folder}/{pat.format(b=name)}.{ext}"
                if p not in files:
                    break
            files[p] = files[canon] + rng.choice(["- NOTE: local changes, not merged yet\n",
                                                  "- (edited on the train, not synced)\n",
                                                  f"- {rng.choice(people).split()[0]}'s comments, keep\n"])
            kept[p] = files[p]
        order = sorted(files)
        rng.shuffle(order)
        return _Folder(folder, exts, pool, topics, header, dup_word, sup_word, marks, vdesc, files, order,
                       removed, kept, n_dup + n_ver + n_uniq, exception)

    # ------------------------------------------------------------------------------------------ phrasing
    def _request(self, ctx: OpContext, fo: _Folder) -> _Request:
        """Where the log goes, the rules (copies, drafts, look-alikes, the exception), and the request (or its
        terse register)."""
        rng = ctx.rng
        persona = ctx.persona
        folder, exts, pool, topics, header, marks, vdesc = fo.folder, fo.exts, fo.pool, fo.topics, fo.header, \
            fo.marks, fo.vdesc
        dup_word, sup_word, files, exception = fo.dup_word, fo.sup_word, fo.files, fo.exception
        log = ctx.path(rng.choice(["removed_files.csv", "dedup_log.csv", "cleanup_log.csv", "deleted.csv",
                                   f"{folder.rsplit('/', 1)[-1]}_cleanup.csv", "duplicates_removed.csv"]))
        mark_text = ", ".join(m[1] for m in marks)
        ex_stem = flavor.slug(rng.choice([x for x in pool if x not in topics] or ["report"]))
        items = [
            V.one_phrase(rng, [
                "files with [exactly the same|identical|byte-for-byte the same] content as another file are "
                "duplicates: keep the [copy|one] with the plain name (no {marks}) and delete the others, reason "
                "`{dw}`",
                "if two or more files are [identical|exactly the same inside] ({marks} in a name [usually|often] "
                "gives them away), keep the plain-named one and delete the rest[ -|, with] reason `{dw}`",
                "identical copies ({marks}) go; the original name stays[; log them as|, reason] `{dw}`",
                "[same content|same bytes], different name = duplicate: [the file without|whichever has none of] "
                "{marks} [stays|is kept], [the others are deleted|delete the rest] (reason `{dw}`)",
            ], marks=mark_text, dw=dup_word),
            V.one_phrase(rng, [
                "[so|e.g.] `{c1}`, `{c2}` and `{plain}` with the same text [are one document|count as one]: "
                "[keep|only keep] `{plain}`",
                "[the|a] plain name wins over a marked copy (like `{plain}` over `{c1}`) when the [text|content] is "
                "identical",
                "",
            ], plain=f"{ex_stem}.{exts[0]}", c1=f"{marks[0][0].format(b=ex_stem)}.{exts[0]}",
                c2=f"{marks[-1][0].format(b=ex_stem)}.{exts[0]}"),
            V.one_phrase(rng, [
                "drafts named {vd} are versions of one document: keep only the highest version and delete the "
                "older ones, reason `{sw}`",
                "for documents with numbered drafts ({vd}) only the [newest|latest] draft survives; [the older "
                "ones are deleted|delete the earlier ones] with reason `{sw}`",
                "old drafts ({vd}): keep the highest number [only|and nothing else], the rest go (reason `{sw}`)",
                "[where|when] a document has [several|a few] numbered [versions|drafts] ({vd}), [the top|the "
                "highest] number [is the one to keep|wins]; [earlier|lower] numbers [are deleted|get deleted] and "
                "logged as `{sw}`",
                "[superseded|outdated] drafts - [anything|every file] named {vd} [below|under] the [latest|highest] "
                "version of its document - [go too|are deleted too], [logged with|reason] `{sw}`",
            ], vd=vdesc, sw=sup_word),
            V.one_phrase(rng, ["files that [merely|only] look like copies by name but differ in content [stay|must "
                               "stay|are not duplicates - leave them]",
                               "anything that [merely|only] looks like a copy by name but has different content "
                               "[stays|is not a duplicate]",
                               "[same-looking|copy-like] names with different content [don't count|are not "
                               "duplicates]: [keep|leave] those",
                               "[compare|check] the contents, not [just |]the names - [a|any] look-alike with "
                               "[other|different] text stays"]),
        ]
        if exception:
            items.append(V.one_phrase(rng, [
                "[exception|one exception|one thing]: [keep|don't delete] `{p}` [even though|although] it's an old "
                "draft - {why} (it stays out of the log)",
                "`{p}` is [the|an] exception: {why}, so it [stays|is kept] [despite being|although it is] an older "
                "draft [and isn't logged|- no log row for it]",
                "[but|except that] `{p}` [must survive|stays put] ({why}); [it's not|don't log it as] a deletion"],
                p=exception[0], why=exception[1]))
        rules = V.requirements_text(rng, items, "[The rules:|Rules:|How to decide:|Here's the logic:|]")
        cols = ",".join(header)
        head = one_of(rng, [
            "`{folder}/` is full of copies and old drafts. [Clean it up.|Please clean it up.|Can you tidy it?]",
            "Please de-duplicate `{folder}/`.",
            "Could you [de-duplicate|clean the duplicates out of] `{folder}/`?",
            "[I copied|I merged|I dumped] [two|three|a couple of] [laptops|backups|USB sticks] into `{folder}/` and "
            "now [everything is there twice|there are duplicates everywhere]. [Help me|Please] [clean it up|"
            "get rid of the doubles].",
            "[My|Our] `{folder}/` folder has [{n} files|way too many files], [lots of|many of] them "
            "[copies|duplicates or old drafts]. [Time to prune it.|I want it cleaned.]",
            "Can you get rid of the duplicates and stale drafts in `{folder}/`?",
            "[Duplicate hunt|Spring cleaning|Clean-up job]: `{folder}/` [has|holds] {n} files and [a lot of|many of] "
            "them [are copies|are old drafts|shouldn't be there].",
            "[I'd like|I want] `{folder}/` [down to|reduced to] one [copy|file] per document - no [doubles|copies], "
            "no [outdated|old] drafts.",
            "[Every|Each] time I [sync|back up] `{folder}/` I get [more|another round of] copies. [Please|Could "
            "you] [thin it out|weed them out][?|.]",
        ], folder=folder, n=len(files))
        log_sent = one_of(rng, [
            "Log every deleted file in `{log}` with the columns {cols} ({rel}; {k} = the file you kept instead).",
            "Write what you deleted to `{log}` ([header|columns] {cols}; {r} is `{dw}` or `{sw}`; {k} is the "
            "surviving file; {rel}).",
            "[Keep a record|I want a record|Leave a record] in `{log}`: one row per deleted file, columns {cols} ({k} being the "
            "file that stays; {rel}).",
            "[So I can undo it|In case I need something back|For my own peace of mind], [list|record] [the "
            "deletions|every removed file] in `{log}` - {cols} as [header|columns], {r} saying `{dw}` or `{sw}`, "
            "{k} naming the [copy|file] [you kept|that survived]; {rel}.",
            "`{log}` [should list|gets] [each|every] file you [removed|deleted], [one per row|a row each] "
            "({cols}: {k} = [what replaces it|the survivor], {r} = `{dw}`/`{sw}`; {rel}).",
        ], log=log, cols=cols, rel=V.paths_rel(rng), k=header[2], r=header[1], dw=dup_word, sw=sup_word)
        hint = V.contents_hint(rng, f"`{folder}/`", [x for x in topics[:fo.n_docs]], len(files))
        instruction = V.glue(head, V.story(persona, rng, "dedup"), hint,
                             V.mention(persona, rng, rng.choice(sorted(files))), rules, log_sent,
                             V.aside(persona, rng, f"`{folder}/`"), V.timing(rng))
        if rng.random() < 0.25:  # the terse register
            exc = V.phrase(" Keep `{p}` though ({why}); not logged.", rng, p=exception[0], why=exception[1]) \
                if exception else ""
            instruction = V.glue(expand(
                "[Dedupe|De-dup|Clean up] `{folder}/`: identical copies ({marks}) -> delete, keep the plain name, "
                "reason `{dw}`; drafts {vd} -> keep the highest, delete the older ones, reason `{sw}`; [look-alike "
                "names with different content|same-looking name but different content] -> keep.{exc} Log "
                "[to|in] `{log}` ({cols}; {rel}).", rng, folder=folder, marks=mark_text, dw=dup_word, vd=vdesc,
                sw=sup_word, exc=exc, log=log, cols=",".join(header), rel=V.paths_rel(rng)), V.timing(rng))
        return _Request(log, instruction)

    # ------------------------------------------------------------------------------------------ checks
    @staticmethod
    def _checks(fo: _Folder, ask: _Request) -> list[Check]:
        """The exact copies and the old drafts removed (the rest kept), every removal logged with its reason and
        the file kept instead."""
        folder, removed, kept, header, dup_word, sup_word, log = (fo.folder, fo.removed, fo.kept, fo.header,
                                                                  fo.dup_word, fo.sup_word, ask.log)
        dup_removed = [r[0] for r in removed if r[1] == dup_word]
        sup_removed = [r[0] for r in removed if r[1] == sup_word]
        checks = [
            Check("exact_copies_removed", "data_removed_kept", {"removed": dup_removed, "kept": kept}),
            Check("old_drafts_removed", "data_removed_kept", {"removed": sup_removed, "kept": kept}),
            Check("removal_logged", "data_path_rows",
                  {"path": log, "header": header[:2], "rows": [r[:2] for r in removed],
                   "path_columns": header[:1], "base": folder}),
            Check("log_names_kept_file", "data_path_rows",
                  {"path": log, "header": [header[0], header[2]], "rows": [[r[0], r[2]] for r in removed],
                   "path_columns": [header[0], header[2]], "base": folder}),
        ]
        return checks


GENERATORS = [DeduplicateFiles()]
