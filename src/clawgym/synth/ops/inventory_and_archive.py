"""inventory_and_archive: move stale files of a folder (by the date in their name, or by the last-modified column
of a provided listing; never by real mtimes) under <folder>/archive/<year>/, and write a manifest CSV
(path, size_bytes, type) of everything in the folder afterwards."""

from __future__ import annotations

import datetime as dt
import shlex

from clawgym.core.records import WorkspaceFile
from clawgym.synth import flavor
from clawgym.synth.ops.aggregate_and_report import digest, money
from clawgym.synth.ops.base import TABLE, Artifact, Check, OpContext, StepPlan, exec_, ls, read, to_csv, write

MANIFEST_HEADER = ["path", "size_bytes", "type"]


def _content(rng, kind: str, title: str, voc: dict, people: list[str]) -> str:
    if kind == "csv":
        rows = "".join(f"{it},{rng.randint(1, 40)},{money(flavor.amount(rng, 1, 300))}\n"
                       for it in rng.sample(voc["items"], rng.randint(2, 5)))
        return "item,qty,cost\n" + rows
    if kind == "json":
        return ('{\n  "title": "' + title + '",\n  "owner": "' + rng.choice(people) + '",\n  "items": '
                + str(rng.randint(1, 60)) + "\n}\n")
    if kind == "log":
        return "".join(f"[{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}] {rng.choice(['sync ok', 'backup ok', 'warn: retry', 'job done'])}\n"
                       for _ in range(rng.randint(2, 6)))
    lines = [f"# {title}", "", f"- {rng.choice(people)}: {rng.choice(voc['projects'])}",
             f"- budget line: {rng.choice(voc['categories'])}"]
    lines += [f"- {it}" for it in rng.sample(voc["items"], rng.randint(0, 4))]
    return "\n".join(lines) + "\n"


class InventoryAndArchive:
    id = "inventory_and_archive"
    consumes: tuple[str, ...] = ()
    produces = (TABLE,)
    standalone = True

    def plan(self, ctx: OpContext, source: Artifact | None) -> StepPlan:
        rng = ctx.rng
        voc = flavor.vocab(ctx.persona.domain, ctx.persona.occupation)
        people = flavor.people(rng, 3)
        folder = ctx.path(rng.choice(["projects", "shared", "work_files", "office"]))
        mode = rng.choice(["names", "listing"])
        cutoff = dt.date(rng.choice([2025, 2026]), rng.choice([1, 4, 7]), 1)
        n = rng.randint(7, 12)
        topics = voc["projects"] + voc["categories"] + voc["items"]
        entries = []  # {path, date, content, type}
        used: set[str] = set()
        sub = rng.choice(["", "", "reports", "data"])
        tries = 0
        while len(entries) < n and tries < 200:
            tries += 1
            stale = len(entries) < 2 or rng.random() < 0.45
            if len(entries) in (2, 3):
                stale = False
            days = rng.randint(1, 900) if stale else rng.randint(0, 200)
            d = cutoff - dt.timedelta(days=days) if stale else cutoff + dt.timedelta(days=days)
            kind = rng.choice(["md", "md", "txt", "csv", "json", "log"])
            topic = flavor.slug(rng.choice(topics))
            name = f"{d.isoformat()}_{topic}.{kind}" if mode == "names" else f"{topic}.{kind}"
            where = f"{folder}/{sub}" if sub and rng.random() < 0.3 else folder
            if name in used:
                continue
            used.add(name)
            entries.append({"path": f"{where}/{name}", "name": name, "date": d, "type": kind,
                            "content": _content(rng, kind, topic.replace("_", " ").capitalize(), voc, people)})
        rng.shuffle(entries)
        moves, manifest = {}, []
        for e in entries:
            if e["date"] < cutoff:
                new = f"{folder}/archive/{e['date'].year}/{e['name']}"
                moves[e["path"]] = new
            else:
                new = e["path"]
            e["new"] = new
            manifest.append([new, str(len(e["content"].encode("utf-8"))), e["type"]])
        manifest.sort(key=lambda r: r[0])
        files = [WorkspaceFile(path=e["path"], content=e["content"]) for e in entries]
        out = ctx.path(rng.choice(["manifest.csv", f"{folder}_manifest.csv", "inventory.csv"]))
        reads = [ls(folder)]
        if mode == "listing":
            listing = ctx.path(rng.choice(["file_listing.csv", "server_listing.csv", "drive_export.csv"]))
            lrows = sorted([[e["path"], f"{e['date'].isoformat()} {rng.randint(7, 19):02d}:{rng.randint(0, 59):02d}",
                             rng.choice(people)] for e in entries], key=lambda r: r[0])
            files.append(WorkspaceFile(path=listing, content=to_csv(["path", "last_modified", "modified_by"], lrows)))
            reads.append(read(listing))
            age = (f"A file is stale when its last_modified date in `{listing}` (an export from the file server; the "
                   f"timestamps on disk are meaningless) is before {cutoff.isoformat()}; archive it under "
                   f"`{folder}/archive/<year of last_modified>/` keeping its file name.")
        else:
            age = (f"Each file name starts with the date it was last worked on (YYYY-MM-DD); ignore the timestamps on "
                   f"disk. A file dated before {cutoff.isoformat()} is stale: move it to "
                   f"`{folder}/archive/<that year>/`, keeping its file name.")
        instruction = rng.choice([
            f"Time to archive old material in `{folder}/`. {age} Then write a manifest `{out}` of every file under "
            f"`{folder}/` as it is afterwards (archived ones at their new place), with the columns path "
            "(workspace-relative), size_bytes (exact size in bytes) and type (the file extension without the dot, "
            "e.g. md).",
            f"Please do an inventory-and-archive pass over `{folder}/`. {age} Afterwards save `{out}` listing every "
            f"file in `{folder}/` (including the archive) with the header path,size_bytes,type - path relative to "
            "the workspace root, size in bytes, type = extension like csv or md.",
        ])
        expected_moves = {old: [new, next(e["content"] for e in entries if e["path"] == old)]
                          for old, new in moves.items()}
        checks = [
            Check("stale_files_archived", "files_moved", {"moves": expected_moves}),
            # the paths count as far as the manifest describes the files (their sizes, their types): a listing of
            # paths copied from the server export is no manifest
            Check("manifest_paths", "gated", parts=[
                Check("", "data_path_rows", {"path": out, "header": ["path"], "rows": [[r[0]] for r in manifest],
                                             "path_columns": ["path"], "base": folder}),
                Check("", "mean_of", parts=[
                    Check("", "data_path_rows", {"path": out, "header": ["path", "size_bytes"],
                                                 "rows": [r[:2] for r in manifest], "path_columns": ["path"],
                                                 "base": folder, "tol": 0.0}),
                    Check("", "data_path_rows", {"path": out, "header": ["path", "type"],
                                                 "rows": [[r[0], r[2]] for r in manifest], "path_columns": ["path"],
                                                 "base": folder})])]),
            Check("manifest_sizes", "data_path_rows", {"path": out, "header": ["path", "size_bytes"],
                                                       "rows": [r[:2] for r in manifest], "path_columns": ["path"],
                                                       "base": folder, "tol": 0.0}),
            Check("manifest_types", "data_path_rows", {"path": out, "header": ["path", "type"],
                                                       "rows": [[r[0], r[2]] for r in manifest],
                                                       "path_columns": ["path"], "base": folder}),
        ]
        dirs = sorted({new.rsplit("/", 1)[0] for new in moves.values()})
        cmd = "mkdir -p " + " ".join(shlex.quote(d) for d in dirs) + " && " + " && ".join(
            f"mv {shlex.quote(o)} {shlex.quote(n)}" for o, n in moves.items())
        some = list(moves.items())[: max(1, len(moves) // 2)]
        pdirs = sorted({n.rsplit("/", 1)[0] for _, n in some})
        pcmd = "mkdir -p " + " ".join(shlex.quote(d) for d in pdirs) + " && " + " && ".join(
            f"mv {shlex.quote(o)} {shlex.quote(n)}" for o, n in some)
        # partial manifest: the paths before archiving, sizes guessed from line counts
        pman = [[e["path"], str(e["content"].count("\n") * 20), e["type"]] for e in entries]
        ctx.used_paths.update(f.path for f in files)
        return StepPlan(
            operation=self.id,
            instruction=instruction,
            files=files,
            checks=checks,
            steps=reads + [exec_(cmd), write(out, to_csv(MANIFEST_HEADER, manifest))],
            partial=[exec_(pcmd), write(out, to_csv(MANIFEST_HEADER, pman))],
            outputs=[Artifact(out, TABLE, {"header": MANIFEST_HEADER, "rows": manifest}, f"the file manifest ({out})",
                              roles={"name": "path", "group": "type", "value": "size_bytes"})],
            summary=f"archive stale files of {folder}/ and write the manifest {out}",
            fingerprint=digest([mode, cutoff.isoformat(), [(e["path"], e["date"].isoformat(), e["content"])
                                                          for e in entries]]),
        )


GENERATORS = [InventoryAndArchive()]
