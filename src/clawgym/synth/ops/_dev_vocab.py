"""Shared vocabulary of the software-development generators (fix_failing_tests, implement_feature,
review_repository): package, module and function names per domain, repository folders, commit messages and the
small phrasings their requests share. Names are drawn with the task's RNG (lists, never sets), so a seed gives
the same repository; every name is a valid Python identifier that shadows no standard-library module.

Renaming is textual (whole words only) over a function's code, tests and hidden cases: the behaviour, and so
every check, stays the same whatever the function or module is called.
"""

from __future__ import annotations

import keyword
import re

from clawgym.synth import flavor, world
from clawgym.synth.grammar import STYLES, requirements

# package names per domain (flavor.domain_key); the persona's own file stems add more (see package_name)
PACKAGES: dict[str, list[str]] = {
    "health": ["clinic_tools", "ward_utils", "care_helpers", "rota_kit", "patient_admin", "nursing_scripts",
               "surgery_ops", "pharmacy_utils"],
    "education": ["classroom_utils", "school_admin", "gradebook", "term_tools", "lesson_kit", "staffroom",
                  "pupil_records", "teaching_helpers"],
    "food": ["kitchen_utils", "menu_tools", "bakery_ops", "catering_kit", "pantry", "cafe_admin", "prep_helpers",
             "larder"],
    "software": ["ops_helpers", "devtools", "platform_utils", "infra_kit", "toolbelt", "sre_scripts",
                 "service_common", "buildtools"],
    "finance": ["ledger_kit", "books_utils", "accounts_tools", "tax_helpers", "audit_kit", "payroll_utils",
                "fincore", "reconcile"],
    "farm": ["farm_tools", "herd_utils", "harvest_kit", "field_ops", "dairy_tools", "crop_records", "barn",
             "orchard_utils"],
    "creative": ["studio_utils", "gallery_tools", "print_shop", "portfolio_kit", "media_helpers", "atelier",
                 "shoot_planner", "bandkit"],
    "legal": ["case_tools", "chambers_utils", "docket", "matter_kit", "filing_helpers", "brief_tools",
              "conveyancing", "practice_admin"],
    "general": ["office_utils", "admin_tools", "household", "helpers", "paperwork", "daily_kit", "homebase",
                "errands"],
}
PKG_SUFFIXES = ["_tools", "_utils", "_kit", "_lib", "_helpers", "_scripts"]

# library modules (fix_failing_tests.MODULE_IMPORTS keys) and the file names they may have
MODULE_ALIASES: dict[str, list[str]] = {
    "money": ["money", "billing", "amounts", "costs", "pricing", "cash"],
    "dates": ["dates", "dateutils", "scheduling", "days", "timekeeping", "periods"],
    "text": ["text", "strings", "textutils", "naming", "cleanup", "wording"],
    "stats": ["stats", "metrics", "figures", "tallies", "aggregates", "summary_stats"],
}
# implement_feature's feature modules and their possible file names (none equal to a library alias)
FEATURE_MODULE_ALIASES: dict[str, list[str]] = {
    "durations": ["durations", "timespans", "shift_lengths", "elapsed"],
    "money_format": ["money_format", "currency", "formatting", "display"],
    "batching": ["batching", "batches", "chunks", "paging"],
    "phones": ["phones", "phone_numbers", "contact_clean", "dialing"],
    "calendar": ["calendar", "deadlines", "workdays", "due_dates"],
    "summaries": ["summaries", "rollups", "totals", "breakdowns"],
}
# function names: the library's name first, then names a colleague might have chosen
FUNC_ALIASES: dict[str, list[str]] = {
    "split_bill": ["split_bill", "split_evenly", "share_total", "divide_cost", "split_amount"],
    "parse_amount": ["parse_amount", "to_number", "parse_money", "read_amount", "amount_from_text"],
    "percent_change": ["percent_change", "pct_change", "change_percent", "growth_pct", "relative_change"],
    "working_days": ["working_days", "business_days", "count_workdays", "weekdays_between", "workday_count"],
    "age_on": ["age_on", "age_at", "years_old_on", "age_in_years"],
    "slugify": ["slugify", "make_slug", "to_slug", "url_slug", "slug_for"],
    "mask_email": ["mask_email", "hide_email", "redact_email", "obfuscate_email", "anonymise_email"],
    "moving_average": ["moving_average", "rolling_mean", "rolling_average", "running_mean", "window_means"],
    "top_n": ["top_n", "top_counts", "most_common_n", "leaders", "highest_counts"],
    "parse_duration": ["parse_duration", "duration_seconds", "to_seconds", "parse_timespan"],
    "format_money": ["format_money", "money_label", "format_amount", "display_price"],
    "chunk": ["chunk", "batched", "split_batches", "in_groups"],
    "normalize_phone": ["normalize_phone", "clean_phone", "canonical_phone", "format_msisdn"],
    "next_business_day": ["next_business_day", "next_workday", "following_weekday", "next_open_day"],
    "summarize_by": ["summarize_by", "totals_by", "sum_per_key", "group_totals"],
}

REPO_FOLDERS = ["code", "src", "projects", "repos", "dev", "git", "work", "scripts", "tools", "software"]
TODAY_MONTHS = list(range(3, 10))

_STDLIB = {"calendar", "string", "numbers", "statistics", "types", "typing", "json", "csv", "time", "datetime",
           "email", "test", "tests", "io", "os", "re", "random", "math", "decimal", "array", "code", "site"}
_IDENT = re.compile(r"^[a-z][a-z0-9_]{2,30}$")


def _ok_name(name: str) -> bool:
    return bool(_IDENT.match(name)) and not keyword.iskeyword(name) and name not in _STDLIB


def package_name(persona, rng=None) -> str:
    """The package: without `rng` the domain's first name (as before); with it, one of the domain's names or, a
    third of the time, one made from the persona's own file stems ("vaccine_stock" -> "vaccine_stock_tools")."""
    pool = PACKAGES[flavor.persona_domain(persona)]
    if rng is None:
        return pool[0]
    own = [s for s in (flavor.slug(x) for x in world.stems(persona)) if s[:1].isalpha()]
    u, o, pick, suffix = rng.random(), rng.random(), rng.choice(pool), rng.choice(PKG_SUFFIXES)
    if u < 0.35 and own:
        cand = own[min(int(o * len(own)), len(own) - 1)] + suffix
        if _ok_name(cand):
            return cand
    return pick


def repo_path(ctx, project: str, extra: list[str] | None = None) -> str:
    """Where the repository lives: the project folder itself, or inside one of the persona's folders or a
    developer's usual ones."""
    rng = ctx.rng
    parent = world.folder(ctx.persona, rng, REPO_FOLDERS + (extra or []), p_world=0.3)
    return ctx.path(project if rng.random() < 0.3 else f"{parent}/{project}")


def rename_words(text: str, names: dict[str, str]) -> str:
    """`text` with every whole-word occurrence of each key replaced by its value."""
    for old, new in names.items():
        if old != new:
            text = re.sub(rf"\b{re.escape(old)}\b", new, text)
    return text


def commit_date(rng, year: int, months: tuple[int, int]) -> str:
    return (f"{year}-{rng.randint(*months):02d}-{rng.randint(1, 28):02d}T"
            f"{rng.randint(8, 18):02d}:{rng.choice(['05', '12', '20', '34', '41', '55'])}:00")


PYTEST_COMMANDS = ["python3 -m pytest -q", "python3 -m pytest", "python3 -m pytest -q tests"]


def plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _lc(s: str) -> str:
    return s[:1].lower() + s[1:] if s[:1].isupper() and not s[1:2].isupper() else s


def ask(rng, items: list[str], notes: list[str] = (), last: str = "") -> str:
    """Imperative requirement clauses (grammar.requirements) as one sentence ("Please ...") or a list under a
    heading, and factual `notes` as sentences of their own before or after them. `last` (e.g. "commit") ends
    a numbered list; elsewhere it goes anywhere."""
    style = rng.choice(STYLES)
    items = list(items)
    rng.shuffle(items)
    if last:
        items.append(last) if style == "numbered" else items.insert(rng.randint(0, len(items)), last)
    if style == "sentence":
        text = requirements(rng, [_lc(i) for i in items], lead=rng.choice(["Please", "Please", ""]),
                            style="sentence", fixed_order=True)
    else:
        lead = "" if style == "block" else rng.choice(["What I need:", "To do:", "Please:", "Steps:", ""])
        text = requirements(rng, [i[:1].upper() + i[1:] for i in items], lead=lead, style=style, fixed_order=True)
    notes = [n[:1].upper() + n[1:].rstrip(".") + "." for n in notes]
    rng.shuffle(notes)
    if not notes:
        return text
    if rng.random() < 0.5:
        return " ".join(notes) + ("\n" if style != "sentence" else " ") + text
    return text + ("\n" if style != "sentence" else " ") + " ".join(notes)
