"""deduplicate_files: a folder with identical copies ("budget (1).md", "Copy of budget.md") and superseded
drafts ("report_v1.md" .. "report_v3.md"); keep one canonical copy of each, delete the rest and log what was
removed and why. A look-alike name with different content is not a duplicate and must stay."""

from __future__ import annotations

import shlex

from clawgym.core.records import WorkspaceFile
from clawgym.synth import flavor
from clawgym.synth.ops.aggregate_and_report import digest
from clawgym.synth.ops.base import TABLE, Artifact, Check, OpContext, StepPlan, exec_, ls, to_csv, write

LOG_HEADER = ["removed", "reason", "kept"]


def _doc_text(rng, title: str, voc: dict, people: list[str], extra: int = 0) -> str:
    lines = [f"# {title}", "", f"Owner: {rng.choice(people)}", ""]
    for _ in range(rng.randint(2, 4) + extra):
        lines.append(f"- {rng.choice(['Order', 'Check', 'Budget for', 'Follow up on', 'Review'])} "
                     f"{rng.choice(voc['items'])} ({rng.choice(voc['projects'])})")
    return "\n".join(lines) + "\n"


class DeduplicateFiles:
    id = "deduplicate_files"
    consumes: tuple[str, ...] = ()
    produces = (TABLE,)
    standalone = True

    def plan(self, ctx: OpContext, source: Artifact | None) -> StepPlan:
        rng = ctx.rng
        voc = flavor.vocab(ctx.persona.domain, ctx.persona.occupation)
        people = flavor.people(rng, 3)
        folder = ctx.path(rng.choice(["shared_docs", "documents", "team_drive", "notes"]))
        ext = rng.choice(["md", "txt"])
        topics = rng.sample(voc["projects"] + voc["categories"], k=min(6, len(voc["projects"]) + len(voc["categories"])))
        files: dict[str, str] = {}
        removed: list[list[str]] = []  # [path, reason, kept path]
        kept: dict[str, str] = {}
        n_dup = rng.randint(1, 2)
        n_ver = rng.randint(1, 2)
        n_uniq = rng.randint(1, 2)
        trap = rng.random() < 0.6
        t = iter(topics)
        for _ in range(n_dup):
            base = flavor.slug(next(t))
            text = _doc_text(rng, base.replace("_", " ").capitalize(), voc, people)
            canon = f"{folder}/{base}.{ext}"
            files[canon] = text
            kept[canon] = text
            copies = rng.sample([f"{base} (1).{ext}", f"Copy of {base}.{ext}", f"{base} - copy.{ext}",
                                 f"{base}_backup.{ext}"], k=rng.randint(1, 2))
            for c in copies:
                files[f"{folder}/{c}"] = text
                removed.append([f"{folder}/{c}", "duplicate", canon])
        for _ in range(n_ver):
            base = flavor.slug(next(t))
            title = base.replace("_", " ").capitalize()
            n = rng.randint(2, 4)
            texts = []
            body = _doc_text(rng, title, voc, people)
            for v in range(1, n + 1):
                body = body + f"- v{v}: {rng.choice(['revised figures', 'added comments', 'final wording', 'fixed typos'])}\n"
                texts.append(body)
            latest = f"{folder}/{base}_v{n}.{ext}"
            for v in range(1, n + 1):
                p = f"{folder}/{base}_v{v}.{ext}"
                files[p] = texts[v - 1]
                if v < n:
                    removed.append([p, "superseded", latest])
            kept[latest] = texts[-1]
            if rng.random() < 0.5:  # an exact copy of the latest draft as well
                c = f"{folder}/{base}_v{n} (1).{ext}"
                files[c] = texts[-1]
                removed.append([c, "duplicate", latest])
        for _ in range(n_uniq):
            base = flavor.slug(next(t))
            p = f"{folder}/{base}.{ext}"
            files[p] = _doc_text(rng, base.replace("_", " ").capitalize(), voc, people)
            kept[p] = files[p]
        if trap:  # looks like a copy by name, but the content differs: not a duplicate
            canon = next(iter(kept))
            name = canon.rsplit("/", 1)[1].rsplit(".", 1)[0]
            p = f"{folder}/{name} (2).{ext}"
            files[p] = files[canon] + "- NOTE: local changes, not merged yet\n"
            kept[p] = files[p]
        order = sorted(files)
        rng.shuffle(order)
        log = ctx.path(rng.choice(["removed_files.csv", "dedup_log.csv", "cleanup_log.csv"]))
        rules = ("(1) files with exactly the same content as another file are duplicates: keep the copy with the "
                 "plain name (no \"(1)\", \"Copy of\", \"- copy\" or \"_backup\") and delete the others, reason "
                 "duplicate; (2) drafts named name_v1, name_v2, ... are versions of one document: keep only the "
                 "highest version and delete the older ones, reason superseded. Files that merely look like copies "
                 "by name but differ in content stay.")
        instruction = rng.choice([
            f"`{folder}/` is full of copies and old drafts. Clean it up: {rules} Log every deleted file in "
            f"`{log}` with the columns removed,reason,kept (workspace-relative paths; kept = the file you kept "
            f"instead).",
            f"Please de-duplicate `{folder}/`. The rules: {rules} Write what you deleted to `{log}` (header "
            f"removed,reason,kept; reason is duplicate or superseded; kept is the surviving file; paths relative "
            f"to the workspace).",
        ])
        dup_removed = [r[0] for r in removed if r[1] == "duplicate"]
        sup_removed = [r[0] for r in removed if r[1] == "superseded"]
        checks = [
            Check("exact_copies_removed", "data_removed_kept", {"removed": dup_removed, "kept": kept}),
            Check("old_drafts_removed", "data_removed_kept", {"removed": sup_removed, "kept": kept}),
            Check("removal_logged", "data_path_rows",
                  {"path": log, "header": ["removed", "reason"], "rows": [r[:2] for r in removed],
                   "path_columns": ["removed"], "base": folder}),
            Check("log_names_kept_file", "data_path_rows",
                  {"path": log, "header": ["removed", "kept"], "rows": [[r[0], r[2]] for r in removed],
                   "path_columns": ["removed", "kept"], "base": folder}),
        ]
        cmd = "rm -- " + " ".join(shlex.quote(r[0]) for r in removed)
        pcmd = "rm -- " + " ".join(shlex.quote(p) for p in dup_removed)
        ctx.used_paths.update(files)
        return StepPlan(
            operation=self.id,
            instruction=instruction,
            files=[WorkspaceFile(path=p, content=files[p]) for p in order],
            checks=checks,
            steps=[ls(folder), exec_(cmd),
                   write(log, to_csv(LOG_HEADER, removed))],
            partial=[exec_(pcmd), write(log, to_csv(LOG_HEADER, [r for r in removed if r[1] == "duplicate"]))],
            outputs=[Artifact(log, TABLE, {"header": LOG_HEADER, "rows": removed}, f"the de-duplication log ({log})",
                              roles={"group": "reason", "name": "removed"})],
            summary=f"de-duplicate {folder}/ and log removals in {log}",
            fingerprint=digest(sorted(files.items())),
        )


GENERATORS = [DeduplicateFiles()]
