"""Shared vocabularies of the `data` generators (clean_data, aggregate_and_report, reconcile_records,
convert_format, extract_structured_data, manage_contacts, schedule_events): per-domain table schemas (column
names, the kinds of things a row records, value ranges), file and folder names mixed with the persona's own
(:mod:`clawgym.synth.world`), and small phrasing helpers.

Why: every clean_data table used to be date, payee, category, amount in ``expenses_export.csv``; a nurse's
overtime claims and a farmer's market sales now look like what they are. Every choice is drawn from the task's
RNG, in a fixed order (no set or dict-order randomness), so a seed still gives the same bytes.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from clawgym.synth import flavor, world
from clawgym.synth.calendar_words import MONTHS, WORKDAYS
from clawgym.synth.grammar import STYLES, expand, requirements
from clawgym.synth.personas import Persona

# Date column names; none contains an identifier word (id, no, ref...) the numeric-column finder skips.
DATE_COLS = ["date", "txn_date", "posted_on", "day", "booked_on", "paid_on", "entry_date", "value_date", "when",
             "transaction_date", "logged_on"]

# One table kind: (what people call it, name columns, group columns, value columns, where names come from
# ("orgs", "people" or a list), where groups come from ("categories", "items", "projects" or a list),
# file stems, value range).
_K = tuple


def _k(what, names, groups, values, name_src, group_src, stems, lo=4.0, hi=650.0) -> _K:
    return (what, names, groups, values, name_src, group_src, stems, lo, hi)


SCHEMAS: dict[str, list[_K]] = {
    "health": [
        _k(["supply order log", "ward ordering sheet", "stock order export"], ["supplier", "vendor", "wholesaler"],
           ["item", "product", "supply_line"], ["cost", "order_cost", "amount"], "orgs", "items",
           ["supply_orders", "ward_orders", "stock_orders", "consumables"]),
        _k(["staff expense claims", "claims spreadsheet", "reimbursement log"], ["claimant", "staff_member", "nurse"],
           ["claim_type", "expense_type"], ["claimed", "amount_claimed", "claim_value"], "people",
           ["Mileage", "Parking", "Training fees", "Uniform", "Meals", "Conference"],
           ["staff_claims", "expense_claims", "reimbursements"], 3, 320),
        _k(["clinic expense export", "practice spending sheet"], ["payee", "paid_to"], ["category", "budget_line"],
           ["amount", "spend"], "orgs", "categories", ["clinic_spend", "practice_expenses", "cost_centre"]),
    ],
    "education": [
        _k(["classroom spending sheet", "department budget log"], ["shop", "supplier", "vendor"],
           ["subject", "budget_line", "department"], ["spent", "cost", "amount"], "orgs",
           ["Science", "Maths", "Art", "English", "History", "Music", "PE"],
           ["class_spend", "dept_budget", "resources_log"]),
        _k(["trip payments list", "activity payments export"], ["student", "pupil", "family"],
           ["trip", "activity"], ["paid", "amount_paid", "payment"], "people",
           ["Museum visit", "Field trip", "Theatre", "Residential camp", "Swimming", "Science centre"],
           ["trip_payments", "activity_fees", "parent_payments"], 2, 180),
        _k(["book order sheet", "library purchase log"], ["bookseller", "supplier"], ["item", "format"],
           ["price", "cost"], "orgs", "items", ["book_orders", "library_purchases"]),
    ],
    "food": [
        _k(["supplier invoice log", "ingredient purchases sheet", "kitchen order export"], ["supplier", "vendor"],
           ["ingredient", "item", "product"], ["cost", "invoice_total", "amount"], "orgs", "items",
           ["supplier_invoices", "ingredient_orders", "kitchen_purchases"]),
        _k(["till takings export", "daily takings sheet"], ["server", "till_operator", "staff"],
           ["shift", "section"], ["takings", "sales", "net_sales"], "people",
           ["Breakfast", "Lunch", "Dinner", "Bar", "Takeaway", "Terrace"],
           ["takings", "till_export", "shift_sales"], 40, 1400),
        _k(["catering bookings list", "events income sheet"], ["client", "customer"], ["event_type", "package"],
           ["deposit", "fee", "amount"], "people", ["Wedding", "Birthday", "Corporate lunch", "Wake", "Christening"],
           ["catering_bookings", "event_income"], 80, 1500),
    ],
    "software": [
        _k(["cloud bill export", "infrastructure cost sheet", "usage invoice export"], ["service", "provider"],
           ["team", "environment", "cost_center"], ["cost_usd", "charge", "cost"], "orgs",
           ["prod", "staging", "dev", "data", "ml", "internal-tools"],
           ["cloud_costs", "infra_bill", "usage_charges"], 2, 900),
        _k(["contractor invoice log", "freelancer billing sheet"], ["contractor", "freelancer"],
           ["project", "workstream"], ["billed", "invoice_amount", "amount"], "people", "projects",
           ["contractor_invoices", "freelance_billing"], 120, 2400),
        _k(["hardware purchase log", "equipment spend export"], ["vendor", "reseller", "shop"],
           ["item", "hardware"], ["price", "cost"], "orgs", "items", ["hardware_orders", "kit_purchases"]),
    ],
    "finance": [
        _k(["client fee ledger", "billing export", "fees received sheet"], ["client", "account_name"],
           ["service", "engagement"], ["fee", "amount_billed", "amount"], "people",
           ["Tax return", "Bookkeeping", "Payroll", "Audit support", "Advisory", "VAT filing"],
           ["client_fees", "billing_export", "fees_received"], 60, 2200),
        _k(["expense export", "spending sheet", "card statement export"], ["payee", "merchant"],
           ["category", "expense_type"], ["amount", "debit", "spend"], "orgs", "categories",
           ["expenses", "spending", "card_export", "outgoings"]),
    ],
    "farm": [
        _k(["input purchases log", "farm supplies sheet", "co-op invoice export"], ["supplier", "merchant", "co_op"],
           ["input", "item", "product"], ["cost", "amount", "invoice_total"], "orgs", "items",
           ["feed_purchases", "input_costs", "coop_invoices", "farm_supplies"], 10, 1800),
        _k(["market sales sheet", "produce sales log"], ["buyer", "customer", "stall"], ["produce", "crop", "line"],
           ["sale_value", "takings", "revenue"], "people",
           ["Eggs", "Lamb", "Potatoes", "Apples", "Honey", "Cheese", "Milk", "Hay"],
           ["market_sales", "produce_sales", "stall_takings"], 5, 600),
    ],
    "creative": [
        _k(["commission log", "client payments sheet", "bookings export"], ["client", "commissioner"],
           ["medium", "job_type", "format"], ["fee", "paid", "amount"], "people",
           ["Portrait", "Wedding shoot", "Mural", "Logo", "Editorial", "Album art", "Prints"],
           ["commissions", "client_payments", "bookings"], 50, 2000),
        _k(["gear and materials spend", "studio purchases export"], ["shop", "supplier", "vendor"],
           ["kit_type", "category", "item"], ["price", "cost", "spent"], "orgs", "items",
           ["gear_spend", "materials", "studio_purchases"]),
    ],
    "legal": [
        _k(["disbursements log", "matter expenses sheet"], ["payee", "paid_to"], ["matter", "matter_type", "file"],
           ["disbursement", "amount", "cost"], "orgs",
           ["Conveyancing", "Probate", "Employment", "Family", "Lease", "Litigation"],
           ["disbursements", "matter_costs", "file_expenses"], 5, 900),
        _k(["billing export", "time-billing sheet", "fee notes log"], ["client", "instructing_party"],
           ["work_type", "practice_area"], ["billed", "fee", "amount"], "people",
           ["Advice", "Drafting", "Hearing", "Negotiation", "Review", "Filing"],
           ["billing", "fee_notes", "time_billing"], 90, 2500),
    ],
    "general": [
        _k(["expense export", "spending sheet", "ledger export", "card statement export"], ["payee", "merchant", "vendor"],
           ["category", "expense_type"], ["amount", "spend", "cost"], "orgs", "categories",
           ["expenses", "spending", "ledger", "outgoings", "card_export"]),
        _k(["office purchase log", "supplies order sheet"], ["vendor", "supplier", "shop"], ["item", "product"],
           ["cost", "price", "amount"], "orgs", "items", ["office_purchases", "supplies", "orders"]),
        _k(["travel claims sheet", "mileage and travel log"], ["traveller", "employee", "claimant"],
           ["trip", "purpose"], ["claimed", "amount", "cost"], "people",
           ["Client visit", "Conference", "Site survey", "Training", "Trade fair", "Board meeting"],
           ["travel_claims", "trips", "mileage_log"], 8, 700),
    ],
}

EXPORT_SUFFIX = ["export", "raw", "dump", "download", "messy", "original", "from_bank", "2026", "old", "unclean"]
CLEAN_SUFFIX = ["clean", "cleaned", "tidy", "fixed", "final", "normalised", "ready", "v2"]
DATA_FOLDERS = ["data", "exports", "sheets", "finance", "records", "admin", "books", "shared", "downloads",
                "working", "reports", "inbox_files", ""]


@dataclass
class Schema:
    """A concrete table schema drawn for one task."""

    what: str  # how the persona calls the table ("supply order log")
    date: str
    name: str
    group: str
    value: str
    names: list[str]  # the name column's values
    groups: list[str]  # the group column's values
    stem: str  # a file stem for it
    lo: float
    hi: float

    @property
    def header(self) -> list[str]:
        return [self.date, self.name, self.group, self.value]

    @property
    def roles(self) -> dict[str, str]:
        return {"date": self.date, "name": self.name, "group": self.group, "value": self.value}


domain = flavor.persona_domain


def schema(rng: random.Random, persona: Persona, n_names: int = 5, n_groups: int | None = None) -> Schema:
    """A table schema of the persona's domain, with `n_names` distinct names and some groups."""
    dom = domain(persona)
    voc = flavor.DOMAINS[dom]
    kinds = SCHEMAS.get(dom) or SCHEMAS["general"]
    what, names, groups, values, name_src, group_src, stems, lo, hi = rng.choice(kinds)
    date = rng.choice(DATE_COLS)
    name, group, value = rng.choice(names), rng.choice(groups), rng.choice(values)
    if name_src == "orgs":
        nv = flavor.orgs(rng, n_names)
    elif name_src == "people":
        nv = flavor.people(rng, n_names)
    else:
        nv = rng.sample(list(name_src), k=min(n_names, len(name_src)))
    pool = voc[group_src] if isinstance(group_src, str) else list(group_src)
    k = n_groups if n_groups is not None else rng.randint(3, len(pool))
    gv = rng.sample(pool, k=min(k, len(pool)))
    st = world.stem(persona, rng, stems, p_world=0.35)
    return Schema(rng.choice(what), date, name, group, value, nv, gv, st, lo, hi)


def folder(persona: Persona, rng: random.Random, extra: list[str] | tuple[str, ...] = ()) -> str:
    """A folder for a task's files: the persona's own (half the time) or a common one; "" for none."""
    return world.folder(persona, rng, list(extra) + DATA_FOLDERS, p_world=0.5)


def join(folder_name: str, name: str) -> str:
    return f"{folder_name}/{name}" if folder_name else name


def month_name(m: int) -> str:
    return MONTHS[m - 1]


def mess(rng: random.Random) -> str:
    """How messy the file is, mid-sentence ("a mess", "all over the place")."""
    return rng.choice(["a mess", "chaotic", "all over the place", "in bad shape", "untidy", "a bit of a disaster",
                       "full of junk", "inconsistent", "hard to use as it is"])


def reqs(rng: random.Random, items: list[str], list_leads: tuple[str, ...] = (), fixed_order: bool = False,
         verbs: bool = False) -> str:
    """Requirement clauses (see grammar.requirements) with a lead that fits the drawn style: a sentence gets
    "Please ..."-style openers when the items are verb phrases (`verbs`) or neutral ones ("In short:") when they
    are not, a list a heading or none, a block no lead (it has its own heading). Returns the
    text starting on a new line for list styles ("\\n..."), or with a leading space for a sentence."""
    style = rng.choice(STYLES)
    items = [i[:1].upper() + i[1:] for i in items]
    if style == "sentence":
        items = [i[:1].lower() + i[1:] if not i[1:2].isupper() else i for i in items]
        lead = expand("[Please|Make sure to|When you do it,|Just|And please|Remember to|]", rng) if verbs else \
            expand("[In short:|Details:|Rules:|Format:|Note:|Specifically:|To be clear:|]", rng)
        return " " + requirements(rng, items, lead=lead, fixed_order=fixed_order, style=style)
    if style == "block":
        return "\n" + requirements(rng, items, fixed_order=fixed_order, style=style)
    leads = list(list_leads) + ["", "", "Rules:", "Specifically:", "A few things:", "Please make sure to:",
                                "What I need:", "Details:", "Notes:", "Checklist:", "Requirements:",
                                "The fine print:", "How I want it:", "Points to respect:", "Spec:",
                                "Do mind these:"]
    return "\n" + requirements(rng, items, lead=rng.choice(leads), fixed_order=fixed_order, style=style)


def cols(rng: random.Random, header: list[str]) -> str:
    """A header as a request writes it: "a, b, c", "a,b,c" or "`a`, `b`, `c`" (names exact in every form)."""
    return rng.choice([", ".join(header), ",".join(header), ", ".join(f"`{h}`" for h in header)])


def glue(rng: random.Random, lead: str, body: str, tail: str = "") -> str:
    """lead + requirements (from :func:`reqs`) + tail: the tail on its own line after a list, else after a space
    or a new line."""
    if not tail:
        return cat(lead, body)
    return cat(lead, body, ("\n" if body.startswith("\n") or rng.random() < 0.4 else " ") + tail)


def cat(*parts: str) -> str:
    """Request parts joined: a part that starts with a space stays on the line, unless the text so far ends in a
    list item (it then starts a new line)."""
    text = ""
    for p in parts:
        if not p:
            continue
        last = text.rsplit("\n", 1)[-1].lstrip()
        if p.startswith(" ") and (last[:2] in ("- ", "* ") or (last[:1].isdigit() and ". " in last[:4])):
            p = "\n" + p.lstrip()
        text += p
    return text


WEEKDAYS = WORKDAYS
_ASIDES = [
    "{who} asked for this before the {day} meeting.",
    "It's for the {mon} review with {who}.",
    "[No rush, but I'd like it before {day}.|Any time before {day} is fine.|{day} at the latest, if you can.]",
    "[I'll forward the result to {who} at {org} afterwards.|{who} at {org} gets a copy once it's done.|The "
    "result goes to {org} ({who}) after.]",
    "[Last time I did this by hand it took me {n} hours.|By hand this eats {n} hours of my {day}.|I used to "
    "spend {n} hours on this every [month|quarter].]",
    "[This feeds into the {project}.|The {project} depends on this.|It's an input to the {project}.|The {project} needs this first.]",
    "[{who} will double-check it on {day}, so it has to be right.|{who} checks these figures on {day}[, "
    "carefully|, line by line].|Mistakes here [end up|land] on {who}'s desk, so [please be careful|accuracy "
    "matters].]",
    "[[Background|Context]: {org} changed their export format in {mon}|{org} [switched|reshuffled] their "
    "[exports|export layout] [in|back in] {mon}|Since {mon}, {org}'s [exports|downloads] look different][, hence "
    "the state of things|, which is why it looks like this|; it's been a pain since|].",
    "Don't touch any other files in there[ - {who} is still using them|].",
    "I have about {n} more of these to do this [week|month], so this is a test run.",
    "[FYI|For what it's worth], the {project} deadline is {day}.",
    "[My accountant, {who}, wants it in this shape.|{who} (my accountant) [asked for|insists on] exactly this "
    "layout.]",
    "The old spreadsheet macro for this broke after the {mon} update.",
    "[{org} audits us in {mon}[, so the paper trail matters|]|The {mon} audit by {org} is coming up].",
    "[I'm doing this between {dom_task} and {dom_task2}, so|It's squeezed in between {dom_task} and "
    "{dom_task2};] [thanks for taking it off my plate|a hand is welcome].",
    "[Once this works|If this goes well], I'll [ask you to do|hand you] the {mon2} one too.",
    "[The {project} budget|Our {project} numbers] [depend|hinge] on getting this right.",
    "[{who} keeps asking|I keep getting asked by {who}] about [these numbers|this file].",
]
# what a persona of each domain is busy with (only in asides)
_BUSY = {
    "health": ["ward rounds", "the night shift", "clinic", "handover", "the rota", "patient calls"],
    "education": ["marking", "parents' evening", "lesson prep", "the school trip", "report writing", "cover lessons"],
    "food": ["the lunch service", "the delivery run", "prep", "the dinner rush", "the stock take", "menu tasting"],
    "software": ["a release", "on-call", "code review", "sprint planning", "an incident review", "the demo"],
    "finance": ["client calls", "the VAT deadline", "month-end", "payroll", "the audit", "tax returns"],
    "farm": ["milking", "lambing", "the market", "harvest", "feeding round", "fixing the fence"],
    "creative": ["a shoot", "editing", "a client brief", "the gallery install", "printing", "the deadline crunch"],
    "legal": ["court", "client meetings", "drafting", "a hearing", "the filing deadline", "conference with counsel"],
    "general": ["meetings", "errands", "the school run", "work", "a long week", "a trip"],
}


def aside(rng: random.Random, persona: Persona, p: float = 0.5) -> str:
    """An optional distractor sentence with names and numbers from the persona's world (nothing a check reads);
    "" with probability 1 - `p`. Always draws the same number of values."""
    use = rng.random() < p
    tmpl = rng.choice(_ASIDES)
    who = flavor.person(rng)
    org = flavor.org(rng)
    project = rng.choice(flavor.DOMAINS[domain(persona)]["projects"])
    day, mon, n = rng.choice(WEEKDAYS), month_name(rng.randint(1, 12)), rng.randint(2, 9)
    busy = _BUSY.get(domain(persona), _BUSY["general"])
    b1 = rng.choice(busy)
    b2 = rng.choice([b for b in busy if b != b1])
    text = expand(tmpl, rng, who=who, org=org, project=project, day=day, mon=mon, n=n, dom_task=b1, dom_task2=b2,
                  mon2=month_name(rng.randint(1, 12)))
    return text if use else ""


def with_aside(rng: random.Random, persona: Persona, text: str) -> str:
    """`text` with an optional aside before or after it."""
    a = aside(rng, persona)
    if not a:
        return text
    return f"{a} {text}" if rng.random() < 0.4 else f"{text}\n{a}" if "\n" in text else f"{text} {a}"


def plain2(rng: random.Random) -> str:
    """"a plain number with two decimals" in other words."""
    return rng.choice(["a plain number with two decimals", "a plain two-decimal number",
                       "a bare number with 2 decimal places", "digits only, two decimals",
                       "a number with exactly two decimals", "a plain decimal like 1234.50",
                       "a bare figure with two digits after the point", "a two-decimal figure: 42.00, not 42",
                       "a bare figure to the cent", "a number rounded to cents, nothing else in the cell"])


def day_first(rng: random.Random) -> str:
    return rng.choice(["numeric dates are day-first", "numeric dates put the day first",
                       "03/04 means 3 April in these", "dates in numbers are DD/MM", "day-first dates"])


# --------------------------------------------------------------------------------------------- shared constraint
# phrasings. The same few constraint sentences ("dates as YYYY-MM-DD", "a CSV with the columns ...", "with two
# decimals") ran through every data request word for word; each helper below says one of them in several
# structurally different ways (the constant a check reads, a column name or the format, always verbatim).

def example_date(rng: random.Random) -> tuple[str, str]:
    """A made-up example date (ISO, and the same day written day-first) for format hints; nothing a check reads."""
    m, d = rng.randint(1, 12), rng.randint(1, 28)
    return f"2026-{m:02d}-{d:02d}", f"{d:02d}/{m:02d}/2026"


def iso(rng: random.Random, col: str = "", plural: bool = False) -> str:
    """A clause saying that `col` (already quoted, or "" for "dates" in general) holds ISO dates."""
    ex, bad = example_date(rng)
    if not col:
        return expand(rng.choice([
            "[dates as|every date as|all dates in the form] YYYY-MM-DD",
            "[write|give] [every|each] date [year first|as year-month-day] ({ex}, not {bad})",
            "ISO dates [throughout|everywhere] (YYYY-MM-DD, e.g. {ex})",
            "no day-first dates anywhere: {ex}[ style|-style], YYYY-MM-DD",
            "[any|each] date [should look|looks] like {ex}",
            "[dates|all dates] [formatted|in] YYYY-MM-DD[ please|]",
            "[four-digit year|the year] first in [every|each] date ([so|that is,] {ex})",
            "[dates as ISO 8601 calendar dates|every date an ISO 8601 calendar date][ (e.g. {ex})|]",
            "{bad} [would be|is] wrong - [dates go|each date goes] {ex}-style",
            "[keep|write] dates [machine-readable|sortable]: year, month, day with dashes, e.g. {ex}",
        ]), rng, clause=True, ex=ex, bad=bad)
    return expand(rng.choice([
        "{c} as YYYY-MM-DD",
        "{c} [formatted|written|in the form] YYYY-MM-DD",
        "{c} in ISO form ([like|e.g.] {ex})",
        "[write|put] {c} year first, [like|as in] {ex}[, not {bad}|]",
        "{c} [must|should] look like {ex}",
        "ISO dates in {c} (YYYY-MM-DD)",
        "[no|never] slashes in {c}: [it's|use] YYYY-MM-DD",
        "[the dates in {c} go in|each value of {c} in] year-month-day [order|form] ({ex})",
        "{c} holds ISO 8601 dates[, {ex} for instance|]",
        "{c} written sortably: [year, month, day|YYYY, MM, DD] joined by dashes",
        "{c} [day|date] values [like|in the style of] {ex}, [never|not] {bad}",
    ]), rng, clause=True, c=col, ex=ex, bad=bad)


def two_dec(rng: random.Random, what: str) -> str:
    """A clause: the money columns `what` (quoted names, or words) are written with two decimals."""
    return expand(rng.choice([
        "{w} [with|to] two decimals",
        "{w} rounded to [2|two] decimal places",
        "{w} to the cent ([12.50, not 12.5|7.05 rather than 7.1|310.00, never 310])",
        "[always|] two digits after the point in {w}",
        "{w} [written|shown] with [cents|pennies], e.g. {ex}",
        "round {w} to [2|two] [decimals|dp]",
        "{w}: [plain|bare] numbers[,| with] two decimals",
        "[keep|give] {w} to two decimal places ({ex}[ style|, say])",
        "{w}: [always|] [exactly two|2] decimal digits",
        "{w} written out to two decimals, {ex} [for example|say]",
    ]), rng, clause=True, w=what, ex=f"{rng.randint(3, 900)}.{rng.choice(['00', '50', '05', '25', '90'])}")


def csv_with(rng: random.Random, cols: str) -> str:
    """A noun phrase: a CSV whose header is `cols` (as written, exact)."""
    return expand(rng.choice([
        "a CSV with the columns {c}",
        "a CSV whose header row is {c}",
        "a comma-separated file [headed|with the header] {c}",
        "a CSV ({c}, in that order)",
        "a [plain|simple] CSV [laid out as|of] {c}",
        "CSV, [header|columns] {c}",
        "a spreadsheet-friendly CSV: {c}",
        "a CSV file whose first line reads {c}",
        "comma-separated values under the header {c}",
        "a CSV; its columns, left to right: {c}",
    ]), rng, clause=True, c=cols)


def md_with(rng: random.Random, cols: str) -> str:
    """A noun phrase: a markdown table with the columns `cols` (as written)."""
    return expand(rng.choice([
        "a markdown table with the columns {c}",
        "a markdown table [headed|whose header is] {c}",
        "a [pipe|markdown] table ({c})",
        "markdown, [one|a single] table: {c}",
        "a table in markdown [laid out as|with] {c}",
        "a markdown grid whose header row is {c}",
        "one markdown table, columns left to right: {c}",
    ]), rng, clause=True, c=cols)


def workdays(rng: random.Random) -> str:
    """"working days (Mon-Fri)" in other words."""
    return rng.choice(["working days (Mon-Fri)", "weekdays", "business days", "working days, Monday to Friday",
                       "Monday-to-Friday days", "weekdays (no Saturdays or Sundays)", "office days (Mon-Fri)"])


def sorted_by(rng: random.Random, first: str, then: str = "") -> str:
    """A clause: rows in order of `first` (then `then`), both quoted already."""
    if then:
        return expand(rng.choice([
            "[@sort] the rows by {a}[, then| and then by|, ties by] {b}",
            "rows in {a} order ({b} [breaks|settles] ties)",
            "earliest {a} first[, and by {b} where that's equal|; equal ones by {b}]",
            "[order|list] [everything|the rows] by {a}, [then|secondarily] {b}",
            "{a} [ascending|from earliest to latest], {b} [as the tie-break|for ties]",
        ]), rng, clause=True, a=first, b=then)
    return expand(rng.choice(["[@sort] the rows by {a}", "rows in {a} order", "{a} ascending", "[lowest|earliest] {a} first"]),
                  rng, clause=True, a=first)


_STORIES = [
    "[Most|Much] of it is {g1} and {g2}[, with {n1} turning up [a lot|again and again]|].",
    "[It covers|There are] {k} {unit} from {mon}[, mostly {n1} and {n2}| - {n1}, {n2} and a few others].",
    "[I'm|We're] [trying to see|checking] whether {g1} [really costs more than|is bigger than] {g2} [this year|"
    "lately]{occ}.",
    "{n1} and {n2} are the [big|main] names in [it|there]; {g1} is [where most of it goes|the biggest line].",
    "[As a|Being a] {job}, I [never|rarely] have time for [spreadsheets|this admin] - {g1} and {g2} "
    "[alone|between them] [fill|take up] [pages|most of it].",
    "[The|Our] {what} [lives|usually lives] in {tool}[, which is where this came from|; this is its export].",
    "{n1} [sent|raised] a query about the {g1} [figures|numbers][ last week| in {mon}], [hence|which is why] "
    "I'm [looking at|sorting] this now.",
    "[It's|This is] the {what} [for|of] {mon}: {g1}, {g2} and [so on|the usual].",
]


def story(rng: random.Random, persona: Persona, what: str, names: list[str], groups: list[str], k: int,
          mon: str, unit: str = "rows", p: float = 0.7) -> str:
    """An optional sentence about the table's own content (its names, groups, size, month) and the persona's job
    and tools: nothing a check reads, but what makes one person's request about their data read unlike
    another's. Always draws the same number of values; "" with probability 1 - `p`."""
    use = rng.random() < p
    tmpl = rng.choice(_STORIES)
    n1, n2 = (rng.sample(list(names), 2) if len(names) >= 2 else [names[0], names[0]]) if names else ["", ""]
    g1, g2 = (rng.sample(list(groups), 2) if len(groups) >= 2 else [groups[0], groups[0]]) if groups else ["", ""]
    tool = rng.choice(list(persona.tools))
    occ = expand("[ - {job} budgets are tight| (the {job} side of things)|]", rng, job=persona.occupation)
    if not (names and groups) or len(set(names)) < 2 or len(set(groups)) < 2:
        return ""
    text = expand(tmpl, rng, g1=g1, g2=g2, n1=n1, n2=n2, k=k, unit=unit, mon=mon, what=what, job=persona.occupation,
                  tool=tool, occ=occ)
    return text if use else ""


_JOB_LINES = [
    "[I track|I keep] [most of this|all of this] in {tool}[, but it can't do this part|, which doesn't help "
    "here].",
    "[As a|Being a] {job}, [I'd rather be doing the actual work|this kind of admin eats my evenings|I don't get "
    "much time for paperwork].",
    "{tool} is [where I|what I] [normally|usually] [keep|manage] this, [but it's no good for this|and this is "
    "the bit it can't do].",
    "[It's|This is] [part of|for] my work as a {job}[ in {city}|].",
    "[Work as a|Life as a] {job} [in {city}|] [doesn't leave|leaves little] time for this, [hence|so] the "
    "[request|ask].",
]


def job_line(rng: random.Random, persona: Persona, p: float = 0.5) -> str:
    """An optional sentence about the persona's job, town and tools (nothing a check reads); always draws the
    same number of values, "" with probability 1 - `p`."""
    use = rng.random() < p
    tmpl = rng.choice(_JOB_LINES)
    tool = rng.choice(list(persona.tools))
    text = expand(tmpl, rng, tool=tool, job=persona.occupation, city=persona.location.split(",")[0].strip())
    return text if use else ""
