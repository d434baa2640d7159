"""organize_files: a flat folder of mixed files (invoices, photo stubs, notes, mail, spreadsheets) sorted into
sub-folders by a stated rule (by type, or by the month in the file name), with a moves log CSV."""

from __future__ import annotations

import shlex

from clawgym.core.records import WorkspaceFile
from clawgym.synth import flavor
from clawgym.synth.ops.aggregate_and_report import digest, money
from clawgym.synth.ops.base import TABLE, Artifact, Check, OpContext, StepPlan, exec_, ls, to_csv, write

LOG_HEADER = ["old_path", "new_path"]


def make_pile(ctx: OpContext, n_min: int = 9, n_max: int = 15) -> list[dict]:
    """A realistic pile of small text files: each {name, kind, date (or None), content}. Names are unique."""
    rng = ctx.rng
    voc = flavor.vocab(ctx.persona.domain, ctx.persona.occupation)
    clients = flavor.orgs(rng, 3)
    people = flavor.people(rng, 4)
    year = rng.choice([2025, 2026])
    months = sorted(rng.sample(range(1, 13), k=rng.randint(2, 3)))
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
            name = rng.choice([f"invoice_{d.isoformat()}_{flavor.slug(c)}.txt", f"invoice_{no}_{d:%Y%m%d}.pdf.txt"])
            amt = flavor.amount(rng, 40, 2400)
            add(name, kind, d, f"INVOICE {no}\nFrom: {c}\nDate: {d.isoformat()}\nFor: {rng.choice(voc['items'])}\n"
                               f"Amount due: {money(amt)}\n")
        elif kind == "photo":
            hms = f"{rng.randint(6, 22):02d}{rng.randint(0, 59):02d}{rng.randint(0, 59):02d}"
            name = rng.choice([f"IMG_{d:%Y%m%d}_{hms}.jpg",
                               f"PXL_{d:%Y%m%d}_{rng.randint(1000, 9999)}.jpg"])
            add(name, kind, d, f"[photo placeholder] {rng.choice(voc['projects'])}, {d.isoformat()}, "
                               f"{rng.choice(['1.8', '2.4', '3.1'])} MB\n")
        elif kind == "note":
            topic = rng.choice(voc["projects"])
            name = rng.choice([f"{d.isoformat()} {topic}.md", f"notes_{d:%Y%m%d}_{flavor.slug(topic)}.md",
                               f"{d.isoformat()}_{flavor.slug(topic)}.txt"])
            add(name, kind, d, f"# {topic.capitalize()} - {d.isoformat()}\n\n- talked to {rng.choice(people)}\n"
                               f"- next: order {rng.choice(voc['items'])}\n")
        elif kind == "mail":
            p = rng.choice(people)
            topic = rng.choice(voc["projects"])
            name = f"{d.isoformat()}_{flavor.slug(p.split()[0])}_re_{flavor.slug(topic)}.eml"
            add(name, kind, d, f"From: {p} <{flavor.email_of(p)}>\nTo: me@example.org\nSubject: Re: {topic}\n"
                               f"Date: {d:%a, %d %b %Y} 09:{rng.randint(10, 59)}:00 +0000\n\n"
                               f"{rng.choice(['See you then.', 'Sounds good, thanks.', 'Attached the figures.'])}\n")
        elif kind == "sheet":
            name = rng.choice([f"{flavor.slug(rng.choice(voc['categories']))}_{d.isoformat()}.csv",
                               f"export_{d:%Y%m%d}.csv"])
            add(name, kind, d, "item,qty\n" + "".join(f"{it},{rng.randint(1, 9)}\n"
                                                      for it in rng.sample(voc["items"], 3)))
        else:
            name = rng.choice(["todo.txt", "ideas.md", "passwords_old.txt", "contacts.csv", "scan.jpg",
                               "readme_first.txt", "wishlist.md"])
            ext = name.rsplit(".", 1)[1]
            ukind = {"txt": "note", "md": "note", "csv": "sheet", "jpg": "photo"}[ext]
            add(name, ukind, None, f"{name} - kept for reference ({rng.choice(people)})\n")
    return out


TYPE_FOLDERS = {"invoice": "invoices", "photo": "photos", "note": "notes", "mail": "mail", "sheet": "spreadsheets"}


class OrganizeFiles:
    id = "organize_files"
    consumes: tuple[str, ...] = ()
    produces = (TABLE,)
    standalone = True

    def plan(self, ctx: OpContext, source: Artifact | None) -> StepPlan:
        rng = ctx.rng
        folder = ctx.path(rng.choice(["downloads", "inbox_files", "desktop_dump", "unsorted"]))
        pile = make_pile(ctx)
        rule = rng.choice(["type", "month"])
        moves: dict[str, str] = {}
        for f in pile:
            if rule == "type":
                sub = TYPE_FOLDERS[f["kind"]]
            else:
                sub = f"{f['date']:%Y-%m}" if f["date"] else "undated"
            moves[f"{folder}/{f['name']}"] = f"{folder}/{sub}/{f['name']}"
        log = ctx.path(rng.choice(["moves_log.csv", "moved_files.csv", "file_moves.csv"]))
        if rule == "type":
            rule_text = (f"by type into sub-folders of `{folder}/`: anything whose name starts with invoice goes to "
                         "invoices/, other .jpg files to photos/, .md and .txt files to notes/, .eml files to mail/ "
                         "and .csv files to spreadsheets/")
        else:
            rule_text = (f"by month into sub-folders of `{folder}/` named YYYY-MM, using the date in each file name "
                         "(written as YYYY-MM-DD or YYYYMMDD); files with no date in the name go to "
                         f"`{folder}/undated/`")
        instruction = rng.choice([
            f"My `{folder}/` folder is a flat mess. Sort every file in it {rule_text}. Don't rename or change any "
            f"file. Then log each move in `{log}` with the columns old_path,new_path (paths relative to the "
            "workspace root, one row per file).",
            f"Please tidy `{folder}/`: move each file {rule_text}, keeping the file names as they are. Record what "
            f"you moved in `{log}` (header old_path,new_path; workspace-relative paths).",
            f"Organise the files sitting loose in `{folder}/` - {rule_text}. Nothing should stay loose in the top "
            f"of the folder. Write a CSV `{log}` listing old_path,new_path for every file you moved.",
        ])
        contents = {f"{folder}/{f['name']}": f["content"] for f in pile}
        expected = {old: [new, contents[old]] for old, new in moves.items()}
        log_rows = [[old, new] for old, new in moves.items()]
        checks = [
            Check("files_in_right_folders", "files_moved", {"moves": expected}),
            Check("moves_logged", "data_path_rows", {"path": log, "header": LOG_HEADER, "rows": log_rows,
                                                     "path_columns": LOG_HEADER, "base": folder}),
            Check("nothing_left_loose", "data_removed_kept", {"removed": sorted(moves), "kept": {}}),
        ]
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
            checks=checks,
            steps=[ls(folder), exec_(cmd), write(log, to_csv(LOG_HEADER, log_rows))],
            partial=[exec_(pcmd), write(log, to_csv(LOG_HEADER, [[o, n] for o, n in some]))],
            outputs=[Artifact(log, TABLE, {"header": LOG_HEADER, "rows": log_rows}, f"the moves log ({log})",
                              roles={"name": "new_path"})],
            summary=f"sort {folder}/ by {rule} and log the moves in {log}",
            fingerprint=digest([rule, sorted(contents.items())]),
        )


GENERATORS = [OrganizeFiles()]
