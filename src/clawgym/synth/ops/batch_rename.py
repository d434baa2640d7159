"""batch_rename: messily named invoice/quote/statement files renamed to a convention built from what is inside
each file (date, client, number), with the folder's index updated to the new names and a rename map CSV."""

from __future__ import annotations

import re
import shlex

from clawgym.core.records import WorkspaceFile
from clawgym.synth import flavor
from clawgym.synth.ops.aggregate_and_report import digest, money
from clawgym.synth.ops.base import TABLE, Artifact, Check, OpContext, StepPlan, exec_, ls, read, to_csv, write

MAP_HEADER = ["old_name", "new_name"]
DATE_FORMATS = ["%d %B %Y", "%B %d, %Y", "%Y-%m-%d", "%d %b %Y", "%a %d %b %Y"]


def client_slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.casefold()).strip("-")


class BatchRename:
    id = "batch_rename"
    consumes: tuple[str, ...] = ()
    produces = (TABLE,)
    standalone = True

    def plan(self, ctx: OpContext, source: Artifact | None) -> StepPlan:
        rng = ctx.rng
        voc = flavor.vocab(ctx.persona.domain, ctx.persona.occupation)
        doc = rng.choice(["invoice", "invoice", "quote", "statement"])
        folder = ctx.path(rng.choice([f"{doc}s", f"{doc}s_2026", f"client_{doc}s"]))
        clients = flavor.orgs(rng, rng.randint(2, 4))
        n = rng.randint(4, 7)
        numbers = sorted(rng.sample(range(5, 400), n))
        year = 2026
        convention = rng.choice(["date_first", "number_first"])
        entries = []
        used_old: set[str] = set()
        for i, no in enumerate(numbers):
            c = clients[i % len(clients)] if i < len(clients) else rng.choice(clients)
            d = flavor.date_in(rng, year)
            amt = flavor.amount(rng, 60, 4800)
            cs = client_slug(c)
            if convention == "date_first":
                new = f"{d.isoformat()}_{cs}_{doc}-{no:03d}.pdf.txt"
            else:
                new = f"{doc}-{no:03d}_{cs}_{d.isoformat()}.pdf.txt"
            word = doc.capitalize()
            candidates = [
                f"{word} {no} - {c}.pdf.txt",
                f"{doc[:3]}_{no:04d}_{cs.replace('-', '')}.pdf.txt",
                f"{c.casefold()} {doc} #{no} ({d:%B}).pdf.txt",
                f"{doc.upper()}-{no} FINAL.pdf.txt",
                f"scan{rng.randint(1000, 9999)}.pdf.txt",
                f"{word}_{no}_{d:%d%m%y}.pdf.txt",
                f"Copy of {doc} {no}.pdf.txt",
            ]
            old = next(o for o in rng.sample(candidates, len(candidates)) if o not in used_old)
            used_old.add(old)
            content = (f"{doc.upper()}\n\n{doc.capitalize()} no.: {no}\nDate: {d.strftime(rng.choice(DATE_FORMATS))}\n"
                       f"Client: {c}\n\nDescription: {rng.choice(voc['items'])} / {rng.choice(voc['projects'])}\n"
                       f"Amount: {money(amt)}\n\n[text layer of a scanned PDF]\n")
            entries.append({"old": old, "new": new, "content": content, "client": c, "amount": amt, "no": no,
                            "date": d})
        index = ctx.path(f"{folder}/{rng.choice(['index.md', 'contents.md', 'overview.md'])}")
        index_name = index.rsplit("/", 1)[1]
        title = rng.choice([f"{doc.capitalize()}s {year}", f"{doc.capitalize()} register", "What's in this folder"])

        def render(name_key: str) -> str:
            lines = [f"# {title}", "", f"Kept by {ctx.persona.name}. One line per {doc}.", "",
                     "| File | Client | Amount | Status |", "|---|---|---:|---|"]
            for e in sorted(entries, key=lambda e: e["no"]):
                status = rng_status[e["no"]]
                lines.append(f"| `{e[name_key]}` | {e['client']} | {money(e['amount'])} | {status} |")
            lines += ["", f"Newest: `{max(entries, key=lambda e: e['date'])[name_key]}`", ""]
            return "\n".join(lines)

        rng_status = {e["no"]: rng.choice(["paid", "open", "overdue", "sent"]) for e in entries}
        old_index = render("old")
        new_index = render("new")
        mapping = ctx.path(rng.choice(["rename_map.csv", "renamed_files.csv", "rename_log.csv"]))
        pattern = ("YYYY-MM-DD_client_" + doc + "-NNN.pdf.txt") if convention == "date_first" else \
            (doc + "-NNN_client_YYYY-MM-DD.pdf.txt")
        ex = (f"2026-01-05_acme-trading_{doc}-004.pdf.txt" if convention == "date_first"
              else f"{doc}-004_acme-trading_2026-01-05.pdf.txt")
        rules = (f"where the date, client and number come from inside each file (not from its current name), "
                 f"the client is lowercase with hyphens instead of spaces and NNN is the {doc} number padded to "
                 f"three digits (e.g. `{ex}`)")
        instruction = rng.choice([
            f"The {doc}s in `{folder}/` have inconsistent names. Rename each one to `{pattern}` {rules}. Update "
            f"`{index}` so it refers to the new names (leave everything else in it as is), and write `{mapping}` "
            f"with the columns old_name,new_name (file names only, one row per renamed file).",
            f"Please bring the file names in `{folder}/` into line: every {doc} should be called `{pattern}`, "
            f"{rules}. `{index_name}` in that folder lists the files, so fix the names there too. Save the "
            f"old -> new mapping as `{mapping}` (header old_name,new_name).",
        ])
        moves = {f"{folder}/{e['old']}": [f"{folder}/{e['new']}", e["content"]] for e in entries}
        new_names = [e["new"] for e in entries]
        old_names = [e["old"] for e in entries if not any(e["old"] in t for t in new_names)]
        map_rows = [[e["old"], e["new"]] for e in entries]
        index_check = [Check("", "text_has", {"path": index, "needles": new_names})]
        if old_names:
            index_check.append(Check("", "text_has_none", {"path": index, "needles": old_names}))
        checks = [
            Check("files_renamed", "files_moved", {"moves": moves}),
            Check("index_updated", "min_of", parts=index_check),
            Check("rename_map", "data_path_rows", {"path": mapping, "header": MAP_HEADER, "rows": map_rows,
                                                   "path_columns": MAP_HEADER, "base": folder}),
        ]
        cmd = " && ".join(f"mv {shlex.quote(o)} {shlex.quote(n)}" for o, (n, _) in moves.items())
        some = list(moves.items())[: max(1, len(moves) // 2)]
        pcmd = " && ".join(f"mv {shlex.quote(o)} {shlex.quote(n)}" for o, (n, _) in some)
        files = [WorkspaceFile(path=f"{folder}/{e['old']}", content=e["content"]) for e in entries]
        files.append(WorkspaceFile(path=index, content=old_index))
        ctx.used_paths.update(f.path for f in files)
        return StepPlan(
            operation=self.id,
            instruction=instruction,
            files=files,
            checks=checks,
            steps=[ls(folder), read(index), exec_(cmd), write(index, new_index),
                   write(mapping, to_csv(MAP_HEADER, map_rows))],
            partial=[exec_(pcmd), write(mapping, to_csv(MAP_HEADER, map_rows[: len(some)]))],
            outputs=[Artifact(mapping, TABLE, {"header": MAP_HEADER, "rows": map_rows}, f"the rename map ({mapping})",
                              roles={"name": "new_name"})],
            summary=f"rename the {doc}s in {folder}/ to {pattern} and update {index}",
            fingerprint=digest([convention, [(e["old"], e["new"], e["content"]) for e in entries]]),
        )


GENERATORS = [BatchRename()]
