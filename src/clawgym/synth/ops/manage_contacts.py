"""manage_contacts: contacts scattered over a messy CSV export (duplicates in other case, "Last, First" names,
phone numbers in every national format, blanks), a couple of email signatures and a vCard file are merged into
one de-duplicated address book with E.164 phone numbers, lower-case emails and "First Last" names."""

from __future__ import annotations

import random
from dataclasses import dataclass

from clawgym.core.records import GeneratedContent, WorkspaceFile
from clawgym.synth import flavor
from clawgym.synth.grammar import expand, one_of
from clawgym.synth.ops import _data_vocab as V
from clawgym.synth.ops import operation
from clawgym.synth.ops._docs_common import digest, persona_email
from clawgym.synth.ops.base import (
    TABLE,
    Artifact,
    Check,
    OpContext,
    OperationGenerator,
    StepPlan,
    read,
    to_csv,
    write,
)

# (country, calling code, national significant number length, trunk prefix, example area codes)
COUNTRIES = [
    ("US", "1", 10, "", ["415", "212", "617", "512", "206"]),
    ("UK", "44", 10, "0", ["20", "161", "113", "131", "117"]),
    ("German", "49", 10, "0", ["30", "89", "40", "221", "69"]),
    ("Portuguese", "351", 9, "", ["21", "22", "91", "93", "96"]),
    ("Australian", "61", 9, "0", ["2", "3", "7", "8", "4"]),
    ("Irish", "353", 9, "0", ["1", "21", "61", "91", "87"]),
]
TITLES = ["Office Manager", "Account Manager", "Head of Operations", "Sales Lead", "Project Coordinator",
          "Finance Officer", "Procurement Specialist", "Director"]


def _national(rng: random.Random, area: str, length: int) -> str:
    rest = length - len(area)
    return area + "".join(str(rng.randint(0, 9)) for _ in range(rest))


def _messy_phone(rng: random.Random, country: tuple, nsn: str) -> str:
    _, cc, _, trunk, _ = country
    if cc == "1":
        a, b, c = nsn[:3], nsn[3:6], nsn[6:]
        return rng.choice([f"({a}) {b}-{c}", f"{a}.{b}.{c}", f"{a}-{b}-{c}", f"+1 {a} {b} {c}", f"1-{a}-{b}-{c}",
                           f"+1{nsn}"])
    head, tail = nsn[:3], nsn[3:]
    mid = len(tail) // 2
    opts = [f"+{cc} {head} {tail[:mid]} {tail[mid:]}", f"00{cc} {head} {tail}", f"+{cc}{nsn}",
            f"+{cc} ({head}) {tail}"]
    if trunk:
        opts += [f"{trunk}{head} {tail[:mid]} {tail[mid:]}", f"{trunk}{head}-{tail}", f"({trunk}{head}) {tail}"]
    else:
        opts += [f"{head} {tail[:mid]} {tail[mid:]}", f"{nsn}"]
    return rng.choice(opts)


@dataclass
class _Book:
    """The data stage: the people (the truth) and the messy CSV export of most of them."""

    country: tuple  # a row of COUNTRIES: every number is of that country
    truth: dict[str, dict[str, str]]  # email -> the clean contact {name, email, phone, company, nsn}
    header: list[str]  # the export's columns
    rows: list[list[str]]  # the export's rows
    missing_phone: list[str]  # emails whose phone the export lacks
    blank_company: list[str]  # emails whose company the export leaves blank
    sig_sources: list[str]  # emails of the contacts in the signatures
    vcf_sources: list[str]  # ... in the vCards


@dataclass
class _Files:
    """The workspace files: the export, emails whose signatures hold some contacts, a vCard file with the others."""

    base: str  # the contacts folder
    csv_path: str
    mail_dir: str
    mail_paths: list[str]
    vcf_path: str
    files: list[WorkspaceFile]


@dataclass
class _Request:
    """The phrasing stage: the address book's path, columns and rows, and the request."""

    out: str
    header: list[str]
    nc: str  # name column
    ec: str  # email
    pc: str  # phone
    cc_: str  # company
    expected: list[list[str]]
    instruction: str


@operation
class ManageContacts(OperationGenerator):
    id = "manage_contacts"
    consumes: tuple[str, ...] = ()
    produces = (TABLE,)
    standalone = True
    folder_scoped = True

    def plan(self, ctx: OpContext, source: Artifact | None) -> StepPlan:
        book = self._book(ctx)
        where = self._files(ctx, book)
        ask = self._request(ctx, book, where)
        out, out_header, expected, truth = ask.out, ask.header, ask.expected, book.truth
        # partial: only the CSV, de-duplicated, phones left as they were
        seen = {}
        for r in book.rows:
            e = r[1].strip().lower()
            if e not in seen:
                seen[e] = [truth[e]["name"], e, r[2], r[3]]
        partial_rows = sorted(seen.values(), key=lambda r: r[0])
        return StepPlan(
            operation=self.id, instruction=ask.instruction, checks=self._checks(book, ask), files=where.files,
            steps=[read(where.csv_path), *(read(p) for p in where.mail_paths), read(where.vcf_path),
                   write(out, to_csv(out_header, expected))],
            partial=[write(out, to_csv(out_header, partial_rows))],
            outputs=[Artifact(out, TABLE, {"header": out_header, "rows": expected}, f"the merged address book ({out})",
                              roles={"name": ask.nc, "group": ask.cc_})],
            summary=f"merge contacts into {out}",
            fingerprint=digest(expected),
        )

    # ----------------------------------------------------------------------------------------- data
    @staticmethod
    def _book(ctx: OpContext) -> _Book:
        """The country, the people (not the persona) with their clean contacts, and the export's rows: names in
        other forms, messy phones, two phones missing, a few duplicates, companies blank only where another source
        has them; which contacts the signatures and the vCards add."""
        rng = ctx.rng
        country = rng.choice(COUNTRIES)
        cname, cc, length, trunk, areas = country
        n = rng.randint(6, 10)
        people = [p for p in flavor.people(rng, n + 3) if p != ctx.persona.name][: n + 2]
        orgs = flavor.orgs(rng, 4)
        truth: dict[str, dict[str, str]] = {}  # email -> clean contact
        for p in people:
            org = rng.choice(orgs)
            email = flavor.email_of(p, flavor.slug(org).replace("_", "") + ".example.com")
            nsn = _national(rng, rng.choice(areas), length)
            truth[email] = {"name": p, "email": email, "phone": f"+{cc}{nsn}", "company": org, "nsn": nsn}
        emails = list(truth)
        csv_people = emails[:n]
        extra_people = emails[n:]  # only in the signatures / vCards
        # the CSV export: some phones and companies missing, duplicates in other forms
        header = rng.choice([["Name", "E-mail", "Phone", "Company"], ["Full name", "Email ", "Phone #", "Company"],
                             ["name", "email", "tel", "organisation"]])
        missing_phone = rng.sample(csv_people, 2)
        dups = rng.sample(csv_people, rng.randint(2, 3))
        # a blank company only where another source (a duplicate row, a signature, a vCard) has it
        blank_company = [e for e in csv_people if (e in dups or e in missing_phone) and rng.random() < 0.4]
        rows = []
        for e in csv_people:
            t = truth[e]
            first, last = t["name"].split(" ", 1)
            name = rng.choice([t["name"], t["name"], t["name"].upper(), t["name"].lower(), f"{last}, {first}"])
            mail = rng.choice([e, e, e.upper() if rng.random() < 0.3 else e, f" {e}"])
            phone = "" if e in missing_phone else _messy_phone(rng, country, t["nsn"])
            rows.append([name, mail, phone, "" if e in blank_company else t["company"]])
        for e in dups:  # duplicates, written differently
            t = truth[e]
            first, last = t["name"].split(" ", 1)
            rows.append([rng.choice([f"{last}, {first}", t["name"].lower(), t["name"]]), e.upper(),
                         _messy_phone(rng, country, t["nsn"]) if e not in missing_phone else "", t["company"]])
        rng.shuffle(rows)
        # signatures: one fills a missing phone of a CSV contact, the others are new people
        sig_sources = [missing_phone[0]] + extra_people[:1]
        vcf_sources = [missing_phone[1]] + extra_people[1:]
        return _Book(country, truth, header, rows, missing_phone, blank_company, sig_sources, vcf_sources)

    @staticmethod
    def _files(ctx: OpContext, book: _Book) -> _Files:
        """The export as a CSV, an email per signature contact, the vCards, and where they are."""
        rng = ctx.rng
        truth, country = book.truth, book.country
        me = ctx.persona.name
        files: list[WorkspaceFile] = []
        base = V.folder(ctx.persona, rng, ["contacts", "crm", "clients", "people", "admin"])
        csv_path = ctx.path(V.join(base, rng.choice(["contacts_export.csv", "crm_export.csv", "address_book_old.csv",
                                                     "outlook_contacts.csv", "phone_export.csv", "people.csv",
                                                     "gmail_contacts.csv", "client_list.csv"])))
        files.append(WorkspaceFile(path=csv_path, content=to_csv(book.header, book.rows)))
        mail_dir = V.join(base if rng.random() < 0.3 else "", rng.choice(["mail", "inbox", "signatures", "emails",
                                                                          "saved_mail", "intros"]))
        mail_paths = []
        for i, e in enumerate(book.sig_sources):
            t = truth[e]
            title = rng.choice(TITLES)
            body = (f"Hi {me.split()[0]},\n\n{rng.choice(['Thanks for the quick reply.', 'Please find the details below.', 'Looking forward to working together.'])}\n\n"
                    f"Best regards,\n\n--\n{t['name']}\n{title} | {t['company']}\n"
                    f"Tel: {_messy_phone(rng, country, t['nsn'])}\n{t['email']}\n")
            p = ctx.path(f"{mail_dir}/{['intro', 'followup', 'details'][i % 3]}_{flavor.slug(t['name'].split()[1])}.eml")
            files.append(WorkspaceFile(path=p, generate=GeneratedContent(kind="eml", params={
                "from": f"{t['name']} <{t['email']}>", "to": persona_email(ctx.persona),
                "subject": rng.choice(["Re: next steps", "Contact details", "Introduction", "Re: quote"]),
                "date": f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T{rng.randint(8, 17):02d}:15:00",
                "body": body})))
            mail_paths.append(p)
        vcf_path = ctx.path(V.join(rng.choice(["", base, "contacts", "phone"]), rng.choice(
            ["cards.vcf", "exported.vcf", "phone_contacts.vcf", "business_cards.vcf", "shared.vcf", "vcards.vcf"])))
        cards = []
        for e in book.vcf_sources:
            t = truth[e]
            first, last = t["name"].split(" ", 1)
            cards.append("\n".join(["BEGIN:VCARD", "VERSION:3.0", f"N:{last};{first};;;", f"FN:{t['name']}",
                                    f"ORG:{t['company']}", f"TEL;TYPE=WORK:{_messy_phone(rng, country, t['nsn'])}",
                                    f"EMAIL;TYPE=INTERNET:{t['email'].upper() if rng.random() < 0.3 else t['email']}",
                                    "END:VCARD"]))
        files.append(WorkspaceFile(path=vcf_path, content="\n".join(cards) + "\n"))
        return _Files(base, csv_path, mail_dir, mail_paths, vcf_path, files)

    # ----------------------------------------------------------------------------------------- phrasing
    @staticmethod
    def _request(ctx: OpContext, book: _Book, where: _Files) -> _Request:
        """The address book's columns, rows (one per person, sorted by name) and path, and the request: the
        sources, then the rules (columns, de-duplication, name, email and phone forms with an example, gaps
        filled, order)."""
        rng = ctx.rng
        truth = book.truth
        cname, cc, length, trunk, _areas = book.country
        nc, ec, pc, cc_ = (rng.choice(c) for c in (["name", "full_name", "contact"], ["email", "e_mail", "email_address"],
                                                    ["phone", "tel", "mobile", "phone_e164"],
                                                    ["company", "organisation", "org", "employer"]))
        out_header = [nc, ec, pc, cc_]
        expected = sorted(([truth[e]["name"], e, truth[e]["phone"], truth[e]["company"]] for e in truth),
                          key=lambda r: r[0])
        out = ctx.path(V.join(rng.choice(["", "", where.base]), rng.choice(
            ["contacts.csv", "address_book.csv", "contacts_merged.csv", "all_contacts.csv", "contacts_clean.csv",
             "people_master.csv", "one_address_book.csv"])))
        ex = f"+{cc}" + "".join(str((i * 7 + 3) % 10) for i in range(length))
        trunk_txt = f" (drop the leading {trunk} of national numbers)" if trunk else ""
        sources = expand("`{c}`, the signatures of the emails in `{m}/` and the vCards in `{v}`", rng, c=where.csv_path,
                         m=where.mail_dir, v=where.vcf_path)
        pick = lambda ts, **kw: expand(rng.choice(ts), rng, **kw)  # noqa: E731 - one drawn phrasing
        items = [
            pick(["[exactly the columns|columns|header:] {cols}", "[the header row|the columns] [must be|should be] "
                  "{cols}[, nothing else|, in that order|]", "{cols} as [the|its] [header|columns]"],
                 cols=V.cols(rng, out_header)),
            pick(["one row per person (same email = same person, whatever the case)",
                  "de-duplicate by email (case-insensitive)",
                  "[the email address|an email] [identifies|decides who is] a person - [ignore|regardless of] "
                  "upper/lower case [there|in it] - so [one row each|no one appears twice]",
                  "[people|anyone] [showing up|listed] [twice|more than once] (same address, [maybe|possibly] in "
                  "other case) [become|are merged into] one row"]),
            pick(["names written \"First Last\" in normal capitalisation",
                  "[turn|rewrite] \"Last, First\" and ALL-CAPS names into [plain |]\"First Last\" [with normal "
                  "capitals|in title case]",
                  "[every|each] name as \"First Last\" - [first name first|given name then surname], [normal|"
                  "ordinary] capitalisation"]),
            pick(["emails in lower case", "[addresses|email addresses] [all |]lower-case",
                  "[lower-case|lowercase] [every|each] email [address|]"]),
            pick(["phone numbers in E.164 form (all are {cn} numbers: +{cc} then the digits, no spaces{t}, e.g. {ex})",
                  "[phones|telephone numbers] [normalised to|as] E.164: [they're all|every one is] {cn}, so +{cc} "
                  "and the digits[ with no spaces or dashes|, nothing in between]{t} - [like|e.g.] {ex}",
                  "E.164 [for|on] [every|each] phone number ({cn} numbers: +{cc}{t}, [then the digits|digits "
                  "only], e.g. {ex})"], cn=cname, cc=cc, t=trunk_txt, ex=ex),
            pick(["[fill gaps from whichever source has the value|if a field is missing in one source, take it "
                  "from another]", "[where|if] [the export|one source] [has a blank|leaves a field empty], [use|"
                  "take] [the signature or vCard value|what another source says]",
                  "[no empty cells where|blanks filled wherever] [any|another] source [knows the value|has it]"]),
            pick(["[sorted|rows sorted|ordered] by name", "[rows |][in|sorted in] alphabetical order of name",
                  "[ordered|sorted] A-Z by [the name column|name]"]),
        ]
        lead = one_of(rng, [
            "My contacts are spread over {src}. Merge them into `{out}`.",
            "Please build one clean address book, `{out}`, from {src}.",
            "Could you [build|make] [one clean|a single] address book, `{out}`, from {src}?",
            "I [keep losing|can never find] people's details - they're in {src}. [Combine|Merge] [them|it all] into "
            "`{out}`.",
            "[Time to|Help me] [consolidate|merge] my contacts: {src} [should become|into] one list, `{out}`.",
            "[My contacts are|My address book is] [split|scattered] [across|over] {src}; [I want|please make] "
            "[a single|one] [deduplicated|clean] [list|CSV] out of it at `{out}`.",
            "`{out}` should [end up as|become] my [one|single] [source of truth|master list] for contacts, "
            "[built|merged] from {src}.",
            "[Before I|I'm about to] [switch phones|move to a new CRM|send the {n_src} holiday cards], [I need|"
            "please make] one address book (`{out}`) [from|combining] {src}.",
        ], src=sources, out=out, n_src=rng.choice(["season's", "year-end", "thank-you"]))
        instruction = V.cat(lead, V.reqs(rng, items, list_leads=("The rules:", "For the merged file:")))
        instruction = V.with_aside(ctx.rng, ctx.persona, instruction)
        return _Request(out, out_header, nc, ec, pc, cc_, expected, instruction)

    # ----------------------------------------------------------------------------------------- checks
    @staticmethod
    def _checks(book: _Book, ask: _Request) -> list[Check]:
        """The merged rows; one row per email, E.164 phones and "First Last" names, each counting as far as the
        rows are the right people; the gaps filled from the signatures and vCards."""
        truth, out, expected, nc, ec, pc, cc_ = book.truth, ask.out, ask.expected, ask.nc, ask.ec, ask.pc, ask.cc_
        _cname, cc, length, _trunk, _areas = book.country
        sig_records = [{ec: e, nc: truth[e]["name"], pc: truth[e]["phone"],
                        cc_: truth[e]["company"]} for e in dict.fromkeys(book.sig_sources + book.vcf_sources
                                                                         + book.blank_company)]
        # the forms (one row per email, E.164 phones, "First Last" names) count as far as the rows are the right
        # people: the messy export copied as it is has some of each already
        people = Check("", "csv_rows", {"path": out, "header": [nc, ec], "rows": [r[:2] for r in expected]})
        return [
            Check("contacts_merged", "csv_rows", {"path": out, "header": ask.header, "rows": expected}),
            Check("no_duplicates", "gated", parts=[Check("", "docs_csv_unique", {
                "path": out, "column": ec, "expected_count": len(expected)}), people]),
            Check("phones_e164", "gated", parts=[Check("", "column_matches", {
                "path": out, "column": pc, "pattern": rf"\+{cc}\d{{{length}}}"}), people]),
            Check("names_first_last", "gated", parts=[Check("", "column_matches", {
                "path": out, "column": nc, "pattern": r"[A-Z][a-z'-]+( [A-Z][a-z'-]+)+"}), people]),
            Check("gaps_filled_from_mail_and_vcards", "docs_records", {
                "path": out, "key": ec, "records": sig_records, "fields": [nc, pc, cc_]}),
        ]


GENERATORS = [ManageContacts()]
