"""Realistic, domain-flavoured content pools for generators: people, organisations, items, amounts, dates,
and the mess real data has (blanks, duplicates, mixed formats). All choices go through the caller's RNG."""

from __future__ import annotations

import datetime as dt
import random
import re

FIRST = [
    "Amara", "Bjorn", "Carmen", "Dmitri", "Elena", "Farid", "Grace", "Hiroshi", "Ines", "Jamal", "Kavya", "Lars",
    "Mei", "Nadia", "Oscar", "Priya", "Quentin", "Rosa", "Samir", "Tomasz", "Uma", "Victor", "Wen", "Ximena",
    "Yusuf", "Zoe", "Aisha", "Bruno", "Chloe", "Diego", "Emeka", "Fatima", "Gustavo", "Hana", "Ivan", "Julia",
    "Kenji", "Leila", "Marco", "Nora", "Olu", "Paula", "Rahul", "Sofia", "Tariq", "Valentina", "Wojciech", "Yara",
]
LAST = [
    "Okafor", "Lindqvist", "Ruiz", "Petrov", "Rossi", "Haddad", "Kim", "Tanaka", "Silva", "Brown", "Iyer", "Nilsen",
    "Chen", "Karimi", "Moreau", "Patel", "Dubois", "Garcia", "Aziz", "Nowak", "Menon", "Costa", "Zhang", "Lopez",
    "Demir", "Walsh", "Bello", "Santos", "Martin", "Fernandez", "Eze", "Rahman", "Almeida", "Sato", "Volkov", "Weber",
]
ORG_WORDS = ["North", "Blue", "Cedar", "Harbor", "Summit", "Maple", "Iron", "Willow", "Bright", "Granite", "River",
             "Oak", "Silver", "Lantern", "Pioneer", "Meadow", "Atlas", "Beacon", "Copper", "Falcon"]
ORG_KINDS = ["Supplies", "Consulting", "Logistics", "Studio", "Labs", "Foods", "Health", "Partners", "Works",
             "Systems", "Print", "Energy", "Books", "Farms", "Digital", "Clinic", "Builders", "Travel"]
CITIES = ["Lisbon", "Toronto", "Nairobi", "Osaka", "Berlin", "Austin", "Lyon", "Melbourne", "Bogota", "Krakow",
          "Pune", "Accra", "Seattle", "Porto", "Leeds", "Dublin", "Monterrey", "Tallinn"]

# Vocabulary by domain keyword: (item nouns, spending categories, project words)
DOMAINS: dict[str, dict[str, list[str]]] = {
    "health": {"items": ["gloves", "syringes", "bandages", "thermometers", "masks", "gauze"],
               "categories": ["Supplies", "Training", "Equipment", "Travel", "Software"],
               "projects": ["ward rota", "vaccination drive", "patient intake", "audit prep"]},
    "education": {"items": ["notebooks", "markers", "lab kits", "textbooks", "calculators", "paper"],
                  "categories": ["Classroom", "Field trips", "Books", "Software", "Events"],
                  "projects": ["term plan", "science fair", "parent evening", "reading club"]},
    "food": {"items": ["flour", "olive oil", "tomatoes", "coffee beans", "butter", "cheese"],
             "categories": ["Ingredients", "Equipment", "Staff", "Utilities", "Marketing"],
             "projects": ["menu refresh", "catering order", "supplier switch", "summer festival"]},
    "software": {"items": ["laptops", "monitors", "licenses", "cloud credits", "keyboards", "docks"],
                 "categories": ["Cloud", "Software", "Hardware", "Travel", "Contractors"],
                 "projects": ["API migration", "release 2.4", "on-call handbook", "cost review"]},
    "finance": {"items": ["audit fees", "filing fees", "subscriptions", "insurance", "bank charges", "consulting"],
                "categories": ["Fees", "Insurance", "Software", "Travel", "Office"],
                "projects": ["quarter close", "tax filing", "budget review", "vendor audit"]},
    "farm": {"items": ["seed", "fertilizer", "diesel", "fencing", "feed", "irrigation parts"],
             "categories": ["Seed", "Fuel", "Feed", "Repairs", "Labour"],
             "projects": ["spring planting", "harvest plan", "barn repair", "market stall"]},
    "creative": {"items": ["canvas", "paint", "prints", "frames", "camera lenses", "studio time"],
                 "categories": ["Materials", "Studio", "Marketing", "Travel", "Equipment"],
                 "projects": ["gallery show", "portfolio update", "client shoot", "album release"]},
    "legal": {"items": ["court fees", "filings", "courier", "research database", "binders", "translations"],
              "categories": ["Filings", "Research", "Courier", "Office", "Travel"],
              "projects": ["case prep", "contract review", "client intake", "discovery"]},
    "general": {"items": ["paper", "toner", "chairs", "coffee", "postage", "cables"],
                "categories": ["Office", "Travel", "Software", "Meals", "Equipment"],
                "projects": ["office move", "quarterly review", "team offsite", "website refresh"]},
}
# Word starts that put a persona's occupation (or, failing that, its domain) in a vocabulary. Matched at the start
# of a word, occupation first: "Banking / software engineer" is software, "Audit / junior auditor" finance, and an
# engineer who is not a software one (civil, petroleum, mechanical) falls to their domain or to general.
_DOMAIN_KEYS = {  # regular expressions, each matched at the start of a word
    "health": [r"health", r"nurs", r"clinic", r"hospital(?!ity)", r"medic", r"pharm", r"care\b", r"caregiv", r"dental",
               r"dentist", r"therap", r"veterin", r"physio", r"midwi", r"paramedic", r"doctor", r"gp\b"],
    "education": [r"educat", r"teach", r"school", r"universit", r"student", r"academ", r"tutor", r"librar",
                  r"lecturer", r"professor", r"phd\b", r"edtech"],
    "food": [r"food", r"restaurant", r"chef", r"baker", r"cater", r"hospitality", r"cafe", r"kitchen", r"brew"],
    "finance": [r"financ", r"fintech", r"account", r"bank", r"tax(?!i)", r"insur", r"invest", r"bookkeep", r"audit",
                r"treasur", r"payroll"],
    "legal": [r"law\b", r"lawyer", r"legal", r"court", r"paralegal", r"notar", r"compliance", r"solicitor",
              r"attorney"],
    "software": [r"software", r"devops", r"developer", r"programmer", r"sre\b", r"site reliability", r"cloud",
                 r"cyber", r"security engineer", r"it (?:support|consult|services|manager|admin)", r"managed it",
                 r"data (?:engineer|scien|analyst|journal)", r"machine learning", r"ml engineer", r"frontend",
                 r"backend", r"full-?stack", r"web (?:develop|agency)", r"qa engineer", r"network engineer",
                 r"platform engineer", r"cto\b", r"tech lead", r"sysadmin", r"home-?lab"],
    "farm": [r"farm", r"agri", r"garden", r"ranch", r"vineyard", r"forest", r"fisher", r"beekeep"],
    "creative": [r"art\b", r"artist", r"music", r"photo", r"design", r"film", r"writer", r"writing", r"novel",
                 r"media\b", r"craft", r"fashion", r"theat", r"illustrat", r"animat", r"podcast", r"journalis"],
}
_DOMAIN_RES = {key: re.compile(r"\b(?:" + "|".join(needles) + ")") for key, needles in _DOMAIN_KEYS.items()}


def domain_key(persona_domain: str, occupation: str = "") -> str:
    """The vocabulary a persona's files are drawn from: the first key whose word starts appear in the
    occupation, else in the domain, else "general"."""
    for text in (occupation.casefold(), persona_domain.casefold()):
        for key, pattern in _DOMAIN_RES.items():
            if pattern.search(text):
                return key
    return "general"


def persona_domain(persona) -> str:
    """The domain key of a persona (anything with `domain` and `occupation`), as :func:`domain_key` finds it."""
    return domain_key(persona.domain, persona.occupation)


def vocab(persona_domain: str, occupation: str = "") -> dict[str, list[str]]:
    return DOMAINS[domain_key(persona_domain, occupation)]


def person(rng: random.Random) -> str:
    return f"{rng.choice(FIRST)} {rng.choice(LAST)}"


def people(rng: random.Random, n: int) -> list[str]:
    seen: set[str] = set()
    out = []
    while len(out) < n:
        p = person(rng)
        if p not in seen:
            seen.add(p)
            out.append(p)
    return out


def is_person(name: str) -> bool:
    """`name` is one of the people these pools make ("First Last" from FIRST and LAST). Generators that look
    for people in a text use it, so that a salutation ("Dear Wen") or two capitalised words ("Next Steps") are
    not taken for a name."""
    first, _, last = name.partition(" ")
    return first in FIRST and last in LAST


def email_of(name: str, org: str = "example.org") -> str:
    user = re.sub(r"[^a-z.]", "", name.casefold().replace(" ", "."))
    return f"{user}@{org}"


def org(rng: random.Random) -> str:
    return f"{rng.choice(ORG_WORDS)} {rng.choice(ORG_KINDS)}"


def orgs(rng: random.Random, n: int) -> list[str]:
    seen: set[str] = set()
    out = []
    while len(out) < n:
        o = org(rng)
        if o not in seen:
            seen.add(o)
            out.append(o)
    return out


def amount(rng: random.Random, lo: float = 5, hi: float = 900) -> float:
    return round(rng.uniform(lo, hi), 2)


def date_in(rng: random.Random, year: int = 2026, month: int | None = None) -> dt.date:
    month = month or rng.randint(1, 12)
    return dt.date(year, month, rng.randint(1, 28))


def messy_date(rng: random.Random, d: dt.date) -> str:
    """The same date in one of the formats people actually type."""
    fmt = rng.choice(["%Y-%m-%d", "%d/%m/%Y", "%b %d, %Y", "%d.%m.%Y", "%Y/%m/%d"])
    return d.strftime(fmt)


def messy_amount(rng: random.Random, v: float) -> str:
    return rng.choice([f"{v:.2f}", f"${v:,.2f}", f"{v:,.2f}", f" {v:.2f} "])


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.casefold()).strip("_")
