"""convert_format: convert content between formats, preserving every record and field: CSV -> JSON records
with typed numbers, JSON -> CSV, YAML <-> JSON config, one sheet of a workbook -> CSV; or the previous step's
table / records / config into the other format."""

from __future__ import annotations

import json
import re

import yaml

from clawgym.core.records import GeneratedContent, WorkspaceFile
from clawgym.synth import flavor
from clawgym.synth.grammar import expand, one_of
from clawgym.synth.ops import _data_vocab as V
from clawgym.synth.ops import operation
from clawgym.synth.ops._tables import digest, money, refer, table_of
from clawgym.synth.ops.base import (
    CONFIG,
    RECORDS,
    TABLE,
    Artifact,
    Check,
    OpContext,
    OperationGenerator,
    StepPlan,
    python,
    read,
    to_csv,
    write,
)
from clawgym.synth.ops.programs import render

_NUM = re.compile(r"^-?(0|[1-9]\d*)(\.\d+)?$")

def _out_path(ctx: OpContext, src_path: str, stem: str, ext: str) -> str:
    """The converted file: next to the source or in an output folder, as the source's stem or a variant."""
    rng = ctx.rng
    folder = src_path.rsplit("/", 1)[0] if "/" in src_path else ""
    if ctx.dir and folder.startswith(ctx.dir):
        folder = folder[len(ctx.dir):].lstrip("/")
    if rng.random() < 0.4:
        folder = rng.choice(["converted", "out", "export", "for_import", ext, ""])
    name = rng.choice([stem, stem, f"{stem}_{rng.choice(['converted', 'export', 'v2', 'import', 'out'])}"])
    return V.join(folder, f"{name}.{ext}")


def _json(data) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def _yaml(data) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def numeric_columns(header: list[str], rows: list[list[str]]) -> list[str]:
    """Columns whose non-blank cells are all plain numbers (no leading zeros), with at least one value."""
    out = []
    for i, h in enumerate(header):
        vals = [r[i].strip() for r in rows if r[i].strip()]
        if vals and all(_NUM.match(v) for v in vals):
            out.append(h)
    return out


def typed_records(header: list[str], rows: list[list[str]], numeric: list[str]) -> list[dict]:
    recs = []
    for r in rows:
        rec = {}
        for h, v in zip(header, r, strict=True):
            if h in numeric:
                if not v.strip():
                    rec[h] = None
                else:
                    f = float(v)
                    rec[h] = int(f) if "." not in v and f.is_integer() else f
            else:
                rec[h] = v
        recs.append(rec)
    return recs


def _ini_value(v):
    """An INI value as JSON would type it under the stated rule."""
    if not isinstance(v, str):
        return v
    t = v.strip()
    if _NUM.match(t):
        f = float(t)
        return int(t) if "." not in t else f
    if t.casefold() in ("true", "false"):
        return t.casefold() == "true"
    return v


def _cell(v) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v) if not v.is_integer() else str(int(v)) if abs(v) < 1e15 else repr(v)
    return str(v)


@operation
class ConvertFormat(OperationGenerator):
    id = "convert_format"
    consumes: tuple[str, ...] = (TABLE, RECORDS, CONFIG)
    produces = (TABLE, RECORDS, CONFIG)
    standalone = True

    # ----------------------------------------------------------------------------------------- table -> records
    def _table_to_records(self, ctx: OpContext, header, rows, src_path, src_words, files, roles, reads):
        rng = ctx.rng
        numeric = numeric_columns(header, rows)
        recs = typed_records(header, rows, numeric)
        fmt = rng.choice(["json", "json", "yaml"])
        stem = src_path.rsplit("/", 1)[-1].rsplit(".", 1)[0]
        out = ctx.path(_out_path(ctx, src_path, stem, fmt))
        F = fmt.upper()
        what = rng.choice(["a JSON array", "a top-level JSON list"]) if fmt == "json" else \
            rng.choice(["a YAML list", "a YAML sequence"])
        keys = V.cols(rng, header)
        items = [
            expand("{what} [with one object per row|of row objects|holding an object for each row|where every "
                   "row becomes an object|with an entry per row]", rng, what=what),
            expand("[rows [kept in|in the same|in their original] order|no re-sorting of the rows|the row order "
                   "[is preserved|stays as it is]]", rng),
            expand("[keys exactly|keyed by the column names|object keys =|each object's keys are|the keys, "
                   "no more and no fewer:] {keys}", rng, keys=keys),
        ]
        if numeric:
            nums = ", ".join(f"`{h}`" for h in numeric)
            items.append(expand("{nums} as [numbers|JSON numbers|numeric values] [(not quoted strings)|, unquoted|, not "
                                "text]", rng, nums=nums))
            items.append(expand("[empty cells as null|blank cells become null|null for empty cells]", rng))
            items.append(expand("[everything else as [strings|text]|other fields stay [strings|text]|the rest "
                                "[are|as] quoted strings]", rng))
        else:
            items.append(expand("[all values as strings|every value a string|quote every value as text]", rng))
        lead = one_of(rng, [
            "Convert {src} to {F}[ for me|]: write `{out}`.",
            "Our [import tool|new app|dashboard|script] wants {F}, so please turn {src} into `{out}`.",
            "[Please |]save {src} as {F} in `{out}`.",
            "Could you [re-save|convert|export] {src} as {F} (`{out}`)?",
            "I [@need] {src} in {F} form at `{out}`.",
            "[{who}'s|The] {tool} [only reads|only takes|expects] {F}: [put|write] {src} there as `{out}`.",
            "[Same data|The same rows], [different format|new format]: {src} -> {F} in `{out}`.",
        ], src=src_words, F=F, out=out, who=flavor.person(rng).split()[0],
            tool=rng.choice(["import script", "dashboard", "reporting tool", "booking app", "website", "notebook"]))
        lead = lead[:1].upper() + lead[1:]
        instruction = lead + V.reqs(rng, items)
        checks = [
            Check("records_converted", "data_records", {"path": out, "records": recs}),
            Check("keys_exact", "data_records", {"path": out, "records": recs, "exact_keys": True}),
            Check("row_order_kept", "data_records", {"path": out, "records": recs, "ordered": True,
                                                     "exact_keys": True}),
        ]
        if numeric:
            checks.append(Check("numbers_typed", "data_records", {"path": out, "records": recs, "typed": True}))
        text = _json(recs) if fmt == "json" else _yaml(recs)
        # partial: every value as a string, rows reversed, the last row dropped (one row: an extra key)
        half = [{k: (str(v) if v is not None else "") for k, v in r.items()} for r in recs][::-1]
        half = half[:-1] if len(half) > 1 else [{**half[0], "note": "check"}]
        partial_text = _json(half) if fmt == "json" else _yaml(half)
        instruction = V.with_aside(ctx.rng, ctx.persona, instruction)
        return StepPlan(
            operation=self.id, instruction=instruction, files=files, checks=checks,
            steps=reads + [write(out, text)], partial=[write(out, partial_text)],
            program=reads + [python(render("convert_format_csv_records", src=src_path, out=out))],
            outputs=[Artifact(out, RECORDS, recs, f"the {fmt.upper()} version of {src_path} ({out})", roles=roles)],
            summary=f"convert {src_path} to {fmt.upper()} ({out})", fingerprint=digest([header, rows, fmt]),
        )

    # ----------------------------------------------------------------------------------------- records -> csv
    def _records_to_csv(self, ctx: OpContext, recs: list[dict], src_path, src_words, files, roles, reads,
                        sheet=None):
        rng = ctx.rng
        header: list[str] = []
        for r in recs:
            for k in r:
                if k not in header:
                    header.append(str(k))
        rows = [[_cell(r.get(h)) for h in header] for r in recs]
        stem = src_path.rsplit("/", 1)[-1].rsplit(".", 1)[0]
        out = ctx.path(_out_path(ctx, src_path, stem, "csv"))
        sheet_note = f" (only the sheet named \"{sheet}\")" if sheet is not None else ""
        program = python(render("convert_format_xlsx_csv", src=src_path, sheet=sheet, out=out) if sheet is not None
                         else render("convert_format_records_csv", src=src_path, out=out))
        items = [
            expand("header row {h} (in that order)", rng, h=",".join(header)) if rng.random() < 0.5 else
            expand("columns {h} in this order", rng, h=", ".join(header)),
            expand("one [row|line] per record[, in the original order|, same order as the source|, order kept]", rng),
            expand("[missing or null values as empty cells|blanks for missing values|null or absent fields left "
                   "empty]", rng),
            expand("[numbers written as plain numbers|numbers as they are (no quotes, no formatting)|plain digits "
                   "for numbers[, no thousands separators|]]", rng),
        ]
        lead = one_of(rng, [
            "Convert {src}{sheet} to CSV at `{out}`.",
            "I [@need] {src}{sheet} as a CSV for the spreadsheet people: `{out}`.",
            "[Please |]flatten {src}{sheet} into the CSV `{out}`.",
            "Could you export {src}{sheet} to `{out}` (CSV)?",
            "[Turn|Make] {src}{sheet} into a plain CSV, `{out}`.",
            "[{who} lives in spreadsheets|{who} only uses Excel], so {src}{sheet} [has to become|needs to be] a CSV: "
            "`{out}`.",
        ], who=flavor.person(rng).split()[0], src=src_words, sheet=sheet_note, out=out)
        lead = lead[:1].upper() + lead[1:]
        instruction = lead + V.reqs(rng, items)
        checks = [
            Check("csv_rows_converted", "csv_rows", {"path": out, "header": header, "rows": rows}),
            Check("record_order_kept", "csv_rows", {"path": out, "header": header, "rows": rows, "ordered": True}),
            Check("column_order", "data_header_is", {"path": out, "header": header}),
        ]
        half = rows[: max(1, len(rows) // 2)]
        partial = to_csv(list(reversed(header)), [list(reversed(r)) for r in half][::-1])
        instruction = V.with_aside(ctx.rng, ctx.persona, instruction)
        return StepPlan(
            operation=self.id, instruction=instruction, files=files, checks=checks,
            steps=reads + [write(out, to_csv(header, rows))], partial=[write(out, partial)],
            program=reads + [program],
            outputs=[Artifact(out, TABLE, {"header": header, "rows": rows}, f"the CSV version of {src_path} ({out})",
                              roles=roles)],
            summary=f"convert {src_path} to CSV ({out})", fingerprint=digest([header, rows]),
        )

    # ----------------------------------------------------------------------------------------- config
    def _config(self, ctx: OpContext, data: dict, src_path: str, src_words, files, reads):
        rng = ctx.rng
        ini = not src_path.endswith((".json", ".yaml", ".yml"))
        to_yaml = src_path.endswith(".json") or (ini and rng.random() < 0.4)
        stem = src_path.rsplit("/", 1)[-1].rsplit(".", 1)[0]
        out = ctx.path(_out_path(ctx, src_path, stem, "yaml" if to_yaml else "json"))
        fmt = "YAML" if to_yaml else "JSON"
        if ini:
            data = {k: ({kk: _ini_value(vv) for kk, vv in v.items()} if isinstance(v, dict) else _ini_value(v))
                    for k, v in data.items()}
        if ini and src_path.endswith(".env"):
            out_env = "a flat object of VARIABLE: value (names exactly as written)"
            instruction = rng.choice([
                f"Convert {src_words}, an environment file, to {fmt} as `{out}`: {out_env}, with whole numbers and "
                "decimals (no leading zeros) as numbers, true/false as booleans and every other value as a string "
                "(without surrounding quotes).",
                f"Our orchestration tool wants the variables of {src_words} as {fmt}: write `{out}` as {out_env}; "
                "plain numbers become numbers, true/false become booleans, the rest stay strings (unquoted).",
                f"Please turn the environment file {src_words} into {fmt} at `{out}` - {out_env}. Typing rule: plain "
                "numbers (no leading zeros) become numbers, true/false become booleans, anything else stays a "
                "string without its quotes.",
            ])
        elif ini:
            instruction = rng.choice([
                f"Convert {src_words} to {fmt} as `{out}`: one object per [section] holding its keys (keys as "
                "written), with whole numbers and decimals (no leading zeros) as numbers, true/false as booleans "
                "and every other value as a string.",
                f"The new deploy tool only reads {fmt}: please write `{out}` with the settings of {src_words} - a "
                "mapping of section name to its key/value pairs; values that are plain numbers become numbers, "
                "true/false become booleans, the rest stay strings exactly as written.",
                f"Could you rewrite the INI-style settings in {src_words} as {fmt} (`{out}`)? Each [section] becomes "
                "an object of its keys (as written); plain numbers without leading zeros become numbers, true/false "
                "become booleans, everything else stays a string.",
            ])
        else:
            instruction = rng.choice([
                f"Convert {src_words} to {fmt} as `{out}`, keeping every key, value, list and nesting level exactly "
                "(numbers stay numbers, booleans stay booleans).",
                f"The new deploy tool only reads {fmt}: please write `{out}` with the same content as {src_words} - "
                "same keys and nesting, same values and types.",
                f"I need {src_words} in {fmt}: save it to `{out}` with nothing lost - every key, list and nested "
                "block, and each value with its type (numbers, booleans, null) unchanged.",
            ])
        fn = "yaml_matches" if to_yaml else "json_matches"
        top = list(data.items())
        checks = [
            Check("all_settings_converted", fn, {"path": out, "expected": data}),
            Check("value_types_kept", "data_config_types", {"path": out, "expected": data}),
            Check("top_level_keys", "data_config_keys", {"path": out, "keys": [k for k, _ in top]}),
        ]
        if to_yaml:  # JSON is YAML too: the JSON input copied to the .yaml path must not pass for a conversion
            checks = [Check(c.name, "gated", parts=[Check("", c.fn, c.args), Check("", "data_not_json", {"path": out})])
                      for c in checks]
        text = _yaml(data) if to_yaml else _json(data)
        half = dict(top[: max(1, len(top) // 2)])
        half = json.loads(json.dumps(half), parse_float=str, parse_int=str)
        instruction = V.with_aside(ctx.rng, ctx.persona, instruction)
        return StepPlan(
            operation=self.id, instruction=instruction, files=files, checks=checks,
            steps=reads + [write(out, text)], partial=[write(out, _yaml(half) if to_yaml else _json(half))],
            program=reads + [python(render("convert_format_env_config" if src_path.endswith(".env") else
                                           "convert_format_ini_config" if ini else "convert_format_structured_config",
                                           src=src_path, out=out))],
            outputs=[Artifact(out, CONFIG, data, f"the {fmt} version of the config ({out})")],
            summary=f"convert {src_path} to {fmt} ({out})", fingerprint=digest(data),
        )

    # ----------------------------------------------------------------------------------------- standalone inputs
    def _own_table(self, ctx: OpContext):
        """(stem, header, rows, roles) of a small table of the persona's world, its column names drawn."""
        rng = ctx.rng
        voc = flavor.vocab(ctx.persona.domain, ctx.persona.occupation)
        kind = rng.choice(["stock", "contacts", "timesheet", "ledger", "ledger"])
        if kind == "stock":
            sku, item, qty, price, sup = (rng.choice(c) for c in (
                ["sku", "code", "item_code", "part_ref", "article"], ["item", "product", "description", "name"],
                ["qty", "quantity", "on_hand", "in_stock", "count"], ["unit_price", "price", "cost_each", "unit_cost"],
                ["supplier", "vendor", "source", "bought_from"]))
            header = [sku, item, qty, price, sup]
            sups = flavor.orgs(rng, 3)
            rows = [[f"{rng.choice('ABCDEFG')}{rng.randint(100, 999)}-{rng.randint(0, 99):02d}", it,
                     str(rng.randint(0, 120)), money(flavor.amount(rng, 0.5, 90)), rng.choice(sups)]
                    for it in rng.sample(voc["items"], k=len(voc["items"]))]
            if rng.random() < 0.5:
                rows[rng.randrange(len(rows))][2] = ""
            roles = {"name": item, "group": sup, "value": price}
            stem = rng.choice(["stock", "inventory", "stock_count", "stock_list", "shelf_count"])
        elif kind == "contacts":
            name, mail, phone, city, visits = (rng.choice(c) for c in (
                ["name", "full_name", "contact"], ["email", "e_mail", "mail"], ["phone", "mobile", "tel"],
                ["city", "town", "location"], ["visits", "orders", "sessions", "bookings", "appointments"]))
            header = [name, mail, phone, city, visits]
            rows = []
            for n in flavor.people(rng, rng.randint(5, 9)):
                rows.append([n, flavor.email_of(n), f"+{rng.randint(1, 99)} {rng.randint(100, 999)} "
                             f"{rng.randint(1000, 9999)}", rng.choice(flavor.CITIES), str(rng.randint(0, 30))])
            roles = {"name": name, "group": city, "value": visits}
            stem = rng.choice(["contacts", "clients", "customers", "members", "mailing_list", "regulars"])
        elif kind == "timesheet":
            date, person, project, hours = (rng.choice(c) for c in (
                V.DATE_COLS, ["person", "who", "staff", "worker", "name"], ["project", "task", "job", "activity"],
                ["hours", "hrs", "time_h", "duration_h"]))
            header = [date, person, project, hours]
            people = flavor.people(rng, 3)
            month = rng.randint(1, 12)
            rows = [[flavor.date_in(rng, 2026, month).isoformat(), rng.choice(people), rng.choice(voc["projects"]),
                     str(rng.choice([0.5, 1, 1.5, 2, 3, 4, 6, 7.5, 8]))] for _ in range(rng.randint(6, 12))]
            rows.sort(key=lambda r: r[0])
            roles = {"date": date, "name": person, "group": project, "value": hours}
            stem = rng.choice(["timesheet", "hours", "time_log", "timesheet_" + V.month_name(month)[:3].lower()])
        else:
            sc = V.schema(rng, ctx.persona, n_names=rng.randint(3, 5))
            header = sc.header
            month = rng.randint(1, 12)
            rows = [[flavor.date_in(rng, 2026, month).isoformat(), rng.choice(sc.names), rng.choice(sc.groups),
                     money(flavor.amount(rng, sc.lo, sc.hi))] for _ in range(rng.randint(5, 11))]
            rows.sort(key=lambda r: r[0])
            roles = sc.roles
            stem = sc.stem
        return stem, header, rows, roles

    def _standalone(self, ctx: OpContext) -> StepPlan:
        rng = ctx.rng
        # an application's config is converted where the subcategory works on configs (it lists edit_config);
        # elsewhere a config conversion would be a systems task filed under, say, Writing & Editing
        if "edit_config" in ctx.subcategory.operations:
            mode = "config"
        else:
            mode = rng.choice(["csv_json", "json_csv", "xlsx_csv"])
        if mode == "csv_json":
            kind, header, rows, roles = self._own_table(ctx)
            src = ctx.path(V.join(V.folder(ctx.persona, rng), f"{kind}.csv"))
            files = [WorkspaceFile(path=src, content=to_csv(header, rows))]
            words = rng.choice(["`{p}`", "the CSV `{p}`", "my sheet `{p}`", "the file `{p}`", "the export `{p}`",
                                "the table in `{p}`"]).format(p=src)
            return self._table_to_records(ctx, header, rows, src, words, files, roles, [read(src)])
        if mode == "json_csv":
            kind, header, rows, roles = self._own_table(ctx)
            recs = typed_records(header, rows, numeric_columns(header, rows))
            for r in recs:  # an export drops empty fields instead of writing null
                for k in [k for k, v in r.items() if v is None]:
                    del r[k]
            src = ctx.path(V.join(V.folder(ctx.persona, rng), f"{kind}_{rng.choice(['export', 'api', 'dump', 'backup'])}.json"))
            files = [WorkspaceFile(path=src, content=_json(recs))]
            words = rng.choice(["the JSON export `{p}`", "the API dump `{p}`", "`{p}` (JSON)", "the JSON backup `{p}`",
                                "the records in `{p}`"]).format(p=src)
            return self._records_to_csv(ctx, recs, src, words, files, roles, [read(src)])
        if mode == "xlsx_csv":
            kind, header, rows, roles = self._own_table(ctx)
            numeric = numeric_columns(header, rows)
            recs = typed_records(header, rows, numeric)
            sheet = rng.choice(["Data", kind.replace("_", " ").capitalize(), "2026", "Sheet1", "Current", "Export"])
            other = {"Notes": [["Exported from the shared drive"], ["Do not edit the Data tab by hand"]]}
            sheet_rows = [header] + [[r.get(h) for h in header] for r in recs]
            sheets = {"Summary": [["rows", len(rows)], ["owner", ctx.persona.name]], sheet: sheet_rows, **other} \
                if rng.random() < 0.5 else {sheet: sheet_rows, **other}
            src = ctx.path(V.join(V.folder(ctx.persona, rng), f"{kind}.xlsx"))
            files = [WorkspaceFile(path=src, generate=GeneratedContent(kind="xlsx", params={"sheets": sheets}))]
            words = rng.choice(["the workbook `{p}`", "the Excel file `{p}`", "the spreadsheet `{p}`",
                                "`{p}`"]).format(p=src)
            return self._records_to_csv(ctx, recs, src, words, files, roles, [],
                                        sheet=sheet)
        data = self._own_config(ctx)
        ext = rng.choice(["yaml", "json"])
        src = ctx.path(V.join(rng.choice(["", "", "config", "conf", "app"]), rng.choice(
            ["settings", "config", "app_config", "sync_settings", "service", "defaults", "local"]) + f".{ext}"))
        files = [WorkspaceFile(path=src, content=_yaml(data) if ext == "yaml" else _json(data))]
        words = rng.choice(["the config file `{p}`", "`{p}`", "the settings in `{p}`", "our config `{p}`"]).format(p=src)
        return self._config(ctx, data, src, words, files, [read(src)])

    def _own_config(self, ctx: OpContext) -> dict:
        rng = ctx.rng
        voc = flavor.vocab(ctx.persona.domain, ctx.persona.occupation)
        name = flavor.slug(rng.choice(voc["projects"]))
        return {
            "name": name,
            "version": f"{rng.randint(1, 4)}.{rng.randint(0, 12)}.{rng.randint(0, 9)}",
            "debug": rng.random() < 0.3,
            "server": {"host": rng.choice(["0.0.0.0", "127.0.0.1", f"{name.replace('_', '-')}.internal"]),
                       "port": rng.choice([8000, 8080, 5000, 3000, 9090]),
                       "timeout_s": rng.choice([10, 30, 60, 2.5])},
            "storage": {"path": f"/srv/{name}/data", "max_size_mb": rng.choice([256, 512, 1024]),
                        "backup": {"enabled": rng.random() < 0.7, "keep_days": rng.choice([7, 14, 30])}},
            "notify": [flavor.email_of(p) for p in flavor.people(rng, rng.randint(1, 3))],
            "tags": rng.sample(voc["categories"], k=2),
            "rate_limit": None if rng.random() < 0.3 else rng.choice([50, 100, 250]),
        }

    # ----------------------------------------------------------------------------------------- plan
    def plan(self, ctx: OpContext, source: Artifact | None) -> StepPlan:
        if source is not None:
            t = table_of(source)
            if t is not None:
                header, rows = t
                return self._table_to_records(ctx, header, rows, source.path, refer(source, ctx.rng), [], dict(source.roles),
                                              [read(source.path)])
            if source.kind == RECORDS and isinstance(source.data, list) and source.data and all(
                    isinstance(r, dict) and r and all(v is None or isinstance(v, (str, int, float, bool))
                                                      for v in r.values()) for r in source.data):
                return self._records_to_csv(ctx, source.data, source.path, refer(source, ctx.rng), [], dict(source.roles),
                                            [read(source.path)])
            if source.kind == CONFIG and isinstance(source.data, dict) and source.data and (
                    source.path.endswith((".json", ".yaml", ".yml")) or (
                        source.path.endswith((".ini", ".cfg", ".conf")) and all(
                            isinstance(v, dict) and all(isinstance(x, str) for x in v.values())
                            for v in source.data.values())) or (
                        source.path.endswith(".env") and all(isinstance(v, str) for v in source.data.values()))):
                return self._config(ctx, source.data, source.path, refer(source, ctx.rng), [], [read(source.path)])
        return self._standalone(ctx)


GENERATORS = [ConvertFormat()]
