"""edit_document: apply a reviewer's concrete edits to a markdown document (outdated figure, a renamed person
or organisation, listed typos, a new section with given content, a paragraph to drop, a renamed heading),
in place or into a new file; the checks verify each change and that the untouched text survives."""

from __future__ import annotations

import datetime as dt
import re

from clawgym.core.records import WorkspaceFile
from clawgym.synth import flavor
from clawgym.synth.grammar import expand, one_of
from clawgym.synth.ops import operation
from clawgym.synth.ops._docs_common import (
    add_workdays,
    aside,
    digest,
    human_date,
    join,
    long_date,
    pick_name,
    reqs,
    short_slug,
    wpath,
)
from clawgym.synth.ops._docs_common import (
    phrase as say,
)
from clawgym.synth.ops.base import (
    DOCUMENT,
    Artifact,
    Check,
    OpContext,
    OperationGenerator,
    StepPlan,
    read,
    write,
)

TYPOS = {
    "receive": "recieve", "separate": "seperate", "necessary": "neccessary", "schedule": "shedule",
    "definitely": "definately", "committee": "commitee", "responsible": "responsable", "available": "availible",
    "occurred": "occured", "until": "untill", "recommend": "reccomend", "address": "adress",
    "calendar": "calender", "equipment": "equipement", "colleague": "collegue", "maintenance": "maintainance",
    "immediately": "immediatly", "successful": "succesful", "guarantee": "garantee", "acknowledge": "acknowlege",
    "beginning": "begining", "business": "buisness", "tomorrow": "tommorow", "accommodate": "accomodate",
}

# section title -> sentence templates; every section gets 1-2 paragraphs of 2-3 sentences.
POOL: dict[str, list[str]] = {
    "Overview": [
        "This document describes the {project} for {org} and who is responsible for each part of it.",
        "The {project} starts on {start} and is expected to finish by {end}.",
        "Every colleague should know where our stock of {item} is kept and how to request more.",
        "It replaces the notes we circulated at the beginning of the year.",
    ],
    "Background": [
        "Last year the committee reviewed how we handle {item} and found that stock ran out three times.",
        "Most of the shortages occurred because orders were placed by each team on its own.",
        "A separate review of our {cat} costs is planned for the autumn.",
        "Our previous supplier could not accommodate the larger orders we now need.",
    ],
    "Budget": [
        "The approved budget for the {project} is {cur}{budget}, of which {cur}{part} is set aside for the {cat} line.",
        "Invoices should be sent to the finance address before the end of each month.",
        "Any single purchase above {cur}{limit} needs written approval from {lead}.",
        "Receipts for {item} must be kept until the audit is closed.",
    ],
    "Timeline": [
        "Work begins on {start}; the first milestone is due on {mid}.",
        "Please check the shared calendar for the review meetings.",
        "If a deadline cannot be met, tell {lead} immediately so the schedule can be adjusted.",
        "The final report is due one week after the last delivery.",
    ],
    "Team": [
        "{lead} leads the work and is the main contact for {org}.",
        "{p2} is responsible for the {item} and the equipment list.",
        "{p3} will acknowledge every request within two working days.",
        "New colleagues should receive a short briefing from {p2} in their first week.",
    ],
    "Risks": [
        "The main risk is that {org2} cannot guarantee delivery of {item} before {mid}.",
        "Maintenance of the storage area may take longer than planned.",
        "We recommend keeping a reserve of {reserve} units of {item}.",
        "Business as usual must continue while the changes are rolled out.",
    ],
    "Next steps": [
        "The committee meets again on {mid} to confirm the plan.",
        "Until then, please send questions to {lead}.",
        "A successful first phase is definitely within reach if everyone keeps to the schedule.",
        "Updated figures will be available tomorrow on the shared drive.",
    ],
}
TITLES = ["{Project} brief", "{Project}: plan and responsibilities", "{Project} - working document",
          "{Org} {project} handbook"]
HEADING_RENAMES = {
    "Overview": ["Summary", "Purpose"], "Background": ["Context", "Why we are doing this"],
    "Budget": ["Costs", "Budget and approvals"], "Timeline": ["Schedule", "Key dates"],
    "Team": ["People and roles", "Who does what"], "Risks": ["Risks and mitigations", "Known risks"],
    "Next steps": ["Action plan", "What happens next"],
}
NEW_SECTIONS = ["Contacts", "Change log", "Approvals", "Useful links", "Open questions"]


def _fmt_thousands(v: int) -> str:
    return f"{v:,}"


def _unique_in(text: str, s: str) -> bool:
    return text.count(s) == 1


@operation
class EditDocument(OperationGenerator):
    id = "edit_document"
    consumes: tuple[str, ...] = (DOCUMENT,)
    produces = (DOCUMENT,)
    standalone = True

    # ------------------------------------------------------------------ standalone document
    def _make_doc(self, ctx: OpContext):
        rng = ctx.rng
        voc = flavor.vocab(ctx.persona.domain, ctx.persona.occupation)
        project = rng.choice(voc["projects"])
        org, org2 = flavor.orgs(rng, 2)
        lead, p2, p3 = flavor.people(rng, 3)
        start = flavor.date_in(rng, 2026)
        mid = add_workdays(start, rng.randint(10, 25))
        end = add_workdays(mid, rng.randint(15, 40))
        cur = rng.choice(["€", "$", "£", ""])
        budget = rng.randrange(80, 900) * 100 + rng.choice([0, 50])
        part = rng.randrange(10, budget // 200) * 100 + 25
        limit = rng.choice([250, 400, 500, 750, 1200, 1500])
        reserve = rng.choice([12, 15, 20, 24, 30, 40, 60])
        vals = dict(project=project, org=org, org2=org2, lead=lead, p2=p2, p3=p3, item=rng.choice(voc["items"]),
                    cat=rng.choice(voc["categories"]).lower(), cur=cur, budget=_fmt_thousands(budget),
                    part=_fmt_thousands(part), limit=_fmt_thousands(limit), reserve=reserve,
                    start=human_date(rng, start), mid=human_date(rng, mid), end=human_date(rng, end))
        names = list(POOL)
        keep = ["Overview", "Budget", "Team"]
        others = [n for n in names if n not in keep]
        chosen = set(keep + rng.sample(others, rng.randint(2, len(others))))
        sections: list[tuple[str, list[str]]] = []
        for name in names:
            if name not in chosen:
                continue
            pool = POOL[name]
            idx = list(range(len(pool)))
            if name == "Budget":
                first = [0]
                rest = [i for i in idx if i != 0]
            elif name == "Team":
                first = [0]
                rest = [i for i in idx if i != 0]
            else:
                first = []
                rest = idx
            rng.shuffle(rest)
            picked = first + rest[: rng.randint(2, 3) - len(first) + (1 if first else 0)]
            sents = [pool[i].format(**vals) for i in picked]
            sents = [s[0].upper() + s[1:] for s in sents]
            if len(sents) >= 3 and rng.random() < 0.6:
                paras = [" ".join(sents[:2]), " ".join(sents[2:])]
            else:
                paras = [" ".join(sents)]
            sections.append((name, paras))
        title = rng.choice(TITLES).format(Project=project[0].upper() + project[1:], project=project, Org=org)
        meta = dict(vals, budget_n=budget, cur=cur, title=title, start_d=start)
        return title, sections, meta

    @staticmethod
    def _render(title: str, sections: list[tuple[str, list[str]]], byline: str) -> str:
        out = [f"# {title}", "", byline, ""]
        for name, paras in sections:
            out += [f"## {name}", ""]
            for p in paras:
                out += [p, ""]
        return "\n".join(out).rstrip() + "\n"

    def _standalone(self, ctx: OpContext) -> StepPlan:  # noqa: PLR0915 (one linear recipe: its rng draws, in order, fix the tasks a seed gives)
        rng = ctx.rng
        title, sections, meta = self._make_doc(ctx)
        byline = rng.choice([f"_Last updated {long_date(meta['start_d'] - dt.timedelta(days=rng.randint(5, 30)))} by "
                             f"{ctx.persona.name}_", f"Owner: {ctx.persona.name}", f"Draft v{rng.randint(2, 5)}"])
        original = self._render(title, sections, byline)
        asks: list[str] = []

        # 1. outdated budget figure (always)
        old_fig = meta["budget"]
        new_n = meta["budget_n"] + rng.choice([-1, 1]) * rng.randrange(5, 40) * 100
        new_fig = _fmt_thousands(new_n)
        while new_fig in original or old_fig in new_fig:
            new_n += 100
            new_fig = _fmt_thousands(new_n)
        # 2. a renamed person (the lead) or partner organisation
        if rng.random() < 0.5:
            old_name = meta["lead"]
            new_name = pick_name(rng, (meta["lead"], meta["p2"], meta["p3"]))
            while new_name in original:
                new_name = pick_name(rng, (meta["lead"], meta["p2"], meta["p3"]))
            asks.append(say(rng, [
                "{old} has [left|moved on|changed roles]; {new} takes over, so replace every mention of {old} with "
                "{new}",
                "swap {old} for {new} everywhere (the [project|work] was handed over)",
                "{new} [replaces|is replacing|now stands in for] {old} - [update|change] [every|each] mention "
                "[of {old}|of the name]",
                "[every|each] \"{old}\" [must|should] become \"{new}\" ([new lead|handover on {day}|{old} "
                "[retired|is on leave]])",
            ], old=old_name, new=new_name, day=rng.choice(["Monday", "Friday", "the 1st"])))
        else:
            old_name = meta["org"]
            kinds = [k for k in ["Group", "Collective", "Alliance", "Holdings", "Network", "Co-op"]
                     if meta["org"].split()[0] + " " + k not in original]
            new_name = meta["org"].split()[0] + " " + rng.choice(kinds)
            asks.append(say(rng, [
                "{old} has been renamed {new}: update every mention",
                "replace the old name {old} with {new} throughout",
                "[the partner|the supplier|our partner] is now called {new}, not {old} - [fix|change] [every "
                "mention|all mentions|each occurrence]",
                "{old} -> {new} ([they rebranded|new company name|after the merger]), everywhere in the text",
            ], old=old_name, new=new_name))
        asks.insert(0, say(rng, [
            "the budget figure {o} is outdated - it is now {n}",
            "change the approved budget from {o} to {n}",
            "[the budget|the total budget|our budget] [was revised|changed|went] [from {o} to {n}|to {n} (it says "
            "{o})]",
            "{o} is the old budget; [the new one is|use] {n}",
        ], o=f"{meta['cur']}{old_fig}", n=f"{meta['cur']}{new_fig}"))

        # 3. two of: drop a paragraph, rename a heading, add a section
        removable = [(n, i) for n, ps in sections for i, p in enumerate(ps)
                     if len(ps) > 1 and old_fig not in p and old_name not in p]
        extras = rng.sample(["remove", "heading", "section"] if removable else ["heading", "section"], 2)
        final_sections = [(n, list(ps)) for n, ps in sections]
        removed = None  # (section, first words)
        if "remove" in extras:
            n, i = rng.choice(removable)
            para = dict(sections)[n][i]
            phrase = " ".join(para.split()[:7])
            removed = (n, phrase, para)
            final_sections = [(m, [p for j, p in enumerate(ps) if not (m == n and j == i)]) for m, ps in sections]
            asks.append(say(rng, [
                "delete the paragraph under '{n}' that starts \"{p}\"",
                "drop the paragraph beginning \"{p}...\" (in the {n} section) - it no longer applies",
                "[cut|remove] the paragraph in '{n}' [starting|that opens with] \"{p}\"[; it's out of date|, "
                "nobody needs it|]",
                "the paragraph \"{p}...\" under {n} [goes|has to go|should be deleted] [completely|entirely|]",
            ], n=n, p=phrase))
        renamed = None
        if "heading" in extras:
            old_h = rng.choice([n for n, _ in final_sections if n != "Overview"])
            renamed = (old_h, rng.choice(HEADING_RENAMES[old_h]))
            asks.append(say(rng, [
                "rename the heading '{o}' to '{n}'",
                "the '{o}' section should be called '{n}'",
                "[retitle|rename] '{o}' [as|to] '{n}' (just the heading)",
                "[change|turn] the '{o}' heading [into|to] '{n}'",
            ], o=old_h, n=renamed[1]))
        new_section = None
        if "section" in extras:
            new_section = self._new_section(ctx, meta, new_fig, (new_name,))
            content = "\n".join(new_section[1])
            asks.append(say(rng, [
                "add a '## {s}' section at the end with exactly these lines:\n{c}\n",
                "append a new section titled '{s}' (level-2 heading) containing:\n{c}\n",
                "[finish|end] the document with a [new |]'## {s}' section [holding|with] these lines:\n{c}\n",
                "[at the bottom|at the end], add '{s}' as a `##` section, [content|lines] as follows:\n{c}\n",
            ], s=new_section[0], c=content))
        final = self._render(title, final_sections, byline).replace(old_fig, new_fig).replace(old_name, new_name)
        if renamed:
            final = final.replace(f"## {renamed[0]}\n", f"## {renamed[1]}\n")
        if new_section:
            final = final.rstrip() + f"\n\n## {new_section[0]}\n\n" + "\n".join(new_section[1]) + "\n"

        # 4. typos: injected into words that occur once, outside the paragraph to drop
        kept_text = original if removed is None else original.replace(removed[2], "")
        typo_words = [w for w in TYPOS if len(re.findall(rf"\b{w}\b", original)) == 1
                      and re.search(rf"\b{w}\b", kept_text) and len(re.findall(rf"\b{w}\b", final)) == 1
                      and TYPOS[w] not in final]
        rng.shuffle(typo_words)
        typo_words = typo_words[: rng.randint(3, 4)]
        src_text = original
        contexts = []
        for w in typo_words:
            src_text = re.sub(rf"\b{w}\b", TYPOS[w], src_text)
            m = re.search(rf"([^\s#]+ +)?\b{w}\b( +[^\s#]+)?", final)
            contexts.append(m.group(0))
        typos = [TYPOS[w] for w in typo_words]
        if typos and rng.random() < 0.5:
            asks.insert(2, expand("[fix|correct] the [misspellings|spelling mistakes|typos]", rng).lower()
                        + " " + ", ".join(f"'{t}'" for t in typos))
        elif typos:
            asks.insert(2, expand("[correct these typos|typos to fix|spelling]", rng).lower() + ": "
                        + "; ".join(f"{TYPOS[w]} -> {w}" for w in typo_words))

        voc_doc = rng.choice(["project brief", "working document", "plan", "handbook page", "briefing note",
                              "policy draft", "project charter", "process document", "team guide", "proposal"])
        pslug = short_slug(meta["project"])
        src = wpath(ctx, ["project_brief", "brief", "plan_draft", "project", f"{pslug}_brief", f"{pslug}_plan",
                          flavor.slug(voc_doc), f"{pslug}_{flavor.slug(voc_doc).split('_')[0]}"], "md",
                    ["docs", "handbook", "drafts", "shared"], p_folder=0.6)
        in_place = rng.random() < 0.5
        out = src if in_place else ctx.path(re.sub(r"\.md$", "", src) + rng.choice(
            ["_v2.md", "_revised.md", "_final.md", "_clean.md", "_reviewed.md", "_v3.md", f"_{meta['start_d'].isoformat()}.md"]))
        # untouched sentences that must survive
        touched = [old_fig, old_name, new_fig, new_name, *typo_words]
        keep_sents = [s for _, ps in final_sections for p in ps for s in re.split(r"(?<=\.)\s+", p)
                      if len(s) > 30 and not any(t in s for t in touched)]
        keep_sents = rng.sample(keep_sents, min(3, len(keep_sents)))
        final_title = title.replace(old_name, new_name)

        checks = [
            Check("figure_and_name_updated", "min_of", parts=[
                Check("", "text_has_none", {"path": out, "needles": [old_fig, old_name]}),
                Check("", "docs_text_has", {"path": out, "needles": [new_fig, new_name]})]),
        ]
        if typos:
            checks.append(Check("typos_fixed", "min_of", parts=[
                Check("", "text_has_none", {"path": out, "needles": typos}),
                Check("", "docs_text_has", {"path": out, "needles": contexts})]))
        if new_section:
            checks.append(Check("section_added", "docs_section_has",
                                {"path": out, "heading": new_section[0], "needles": new_section[2]}))
        if removed:
            heading_now = renamed[1] if renamed and renamed[0] == removed[0] else removed[0]
            checks.append(Check("paragraph_removed", "min_of", parts=[
                Check("", "text_has_none", {"path": out, "needles": [removed[1]]}),
                Check("", "docs_headings", {"path": out, "present": [heading_now]})]))
        if renamed:  # the new heading there AND the old one gone (a file without headings has no old one either)
            checks.append(Check("heading_renamed", "min_of", parts=[
                Check("", "docs_headings", {"path": out, "present": [renamed[1]]}),
                Check("", "docs_headings", {"path": out, "absent": [renamed[0]]})]))
        keep = Check("", "docs_text_has", {"path": out, "needles": keep_sents + [final_title]})
        if in_place:
            keep = Check("", "min_of", parts=[
                keep, Check("", "text_has_none", {"path": out, "needles": [old_fig, old_name]})])
        # the rest kept counts only as far as the edits are made: the document left as it was (or copied) keeps
        # everything and edits nothing
        checks.append(Check("rest_unchanged", "gated", parts=[keep, Check("", "mean_of", parts=[
            Check("", c.fn, c.args, c.parts) for c in checks])]))

        slots = dict(src=src, out=out, doc=voc_doc, who=pick_name(rng, (ctx.persona.name,)),
                     title=meta["title"])
        where = (one_of(rng, ["Edit `{src}` in place", "[Change|Fix] `{src}` [itself|directly|in place]",
                              "[Work on|Update] `{src}` [directly|as it is] (no copy)"], **slots) if in_place else
                 one_of(rng, ["Take `{src}` and save the edited version as `{out}` (leave the original as it is)",
                              "[Write|Save] the [revised|corrected|edited] version to `{out}` and [leave|keep] "
                              "`{src}` [untouched|as it is]",
                              "[Don't touch|Keep] the original `{src}`[ unchanged|]; the [edited|new] version goes in "
                              "`{out}`"], **slots))
        head = one_of(rng, [
            "My {doc} `{src}` came back from review with a list of changes.",
            "[My colleague|Our reviewer|My manager] {who} [reviewed|went through|marked up] my {doc} (`{src}`, "
            "\"{title}\") and sent [these|some] [changes|edits|comments].",
            "[Please|Could you] apply the review comments to the {doc} (`{src}`)[?|.]",
            "The {doc} \"{title}\" (`{src}`) [needs|still needs] a few [fixes|edits|corrections] before it "
            "[goes out|is shared|is final].",
            "",
        ], **slots)
        lead = where + expand("[:|; the changes:|, with these [reviewer |]edits:|. What to change:]", rng)
        tail = one_of(rng, ["Do not change anything else.", "Keep the rest of the text exactly as it is.",
                            "Everything else stays word for word.", "[Nothing|No other line] [else |]should change.",
                            "[Leave|Keep] [all |]the other text [alone|as it is|untouched]."])
        body = reqs(rng, asks, lead=lead) if not any("\n" in a.strip() for a in asks) else (
            lead + "\n" + "\n".join(f"- {a}" for a in asks))
        instruction = join(head, body, tail, aside(rng, ctx.persona))
        # partial: figure and name done, typos and the structural edits left undone
        partial_text = src_text.replace(old_fig, new_fig).replace(old_name, new_name)
        return StepPlan(
            operation=self.id, instruction=instruction, checks=checks,
            files=[WorkspaceFile(path=src, content=src_text)],
            steps=[read(src), write(out, final)],
            partial=[write(out, partial_text)],
            outputs=[Artifact(out, DOCUMENT, final, f"the revised {voc_doc} ({out})")],
            summary=f"apply review edits to {src}" + ("" if in_place else f" into {out}"),
            fingerprint=digest(final),
        )

    def _new_section(self, ctx: OpContext, meta: dict, new_fig: str, exclude: tuple = ()) -> tuple[str, list[str], list[str]]:
        rng = ctx.rng
        sec = rng.choice(NEW_SECTIONS)
        taken = (meta["lead"], meta["p2"], meta["p3"], *exclude)
        people = [pick_name(rng, taken)]
        people.append(pick_name(rng, (*taken, people[0])))
        if sec == "Contacts":
            lines = [f"- {p}: {flavor.email_of(p, flavor.slug(meta['org2']).replace('_', '') + '.org')}"
                     for p in people]
            needles = people + [ln.split(": ")[1] for ln in lines]
        elif sec == "Change log":
            lines = [f"- {long_date(meta['start_d'])}: budget revised to {meta['cur']}{new_fig}",
                     f"- {long_date(meta['start_d'])}: reviewed by {people[0]}"]
            needles = [new_fig, people[0]]
        elif sec == "Approvals":
            lines = [f"- Approved by {people[0]} (finance)", f"- Approved by {people[1]} (operations)"]
            needles = people
        elif sec == "Useful links":
            base = flavor.slug(meta["org2"]).replace("_", "-")
            lines = [f"- Shared drive: https://drive.{base}.example.com/{flavor.slug(meta['project'])}",
                     f"- Ticket queue: https://help.{base}.example.com/queue/{rng.randint(10, 99)}"]
            needles = [ln.split(": ", 1)[1] for ln in lines]
        else:
            lines = [f"- Who signs off purchases above {meta['cur']}{meta['limit']} while {people[0]} is away?",
                     f"- Can {people[1]} join the next review?"]
            needles = people
        return sec, lines, needles

    # ------------------------------------------------------------------ chained: edit the previous output
    def _chained(self, ctx: OpContext, source: Artifact) -> StepPlan:
        """Edit a copy of the previous step's document. The previous output may be worded differently from its
        reference, so the edits target facts (figures, names) and the checks compare the copy with the file the
        agent actually wrote (docs_replaced / docs_kept_lines)."""
        rng = ctx.rng
        text = str(source.data)
        if not text.endswith("\n"):
            text += "\n"
        asks: list[str] = []
        checks: list[Check] = []
        lines_removed = -1
        stem = re.sub(r"\.[a-z]+$", "", source.path.split("/")[-1])
        folder = source.path.rsplit("/", 1)[0] + "/" if "/" in source.path else ""
        out = ctx.path(f"{folder}{stem}{rng.choice(['_for_review', '_edited', '_shared', '_v2', '_clean', '_public', '_to_send', '_checked'])}.md")
        final = text
        replace: dict[str, str] = {}
        drop: list[str] = []
        # a figure that is wrong (figures are what the earlier step had to keep exactly)
        nums = []
        for m in re.finditer(r"(?<![\w.,/:-])(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+\.\d{2}|\d{3,})(?![\w/:-]|[.,]\d)", text):
            tok = m.group(1)
            if tok not in nums and not re.fullmatch(r"(19|20)\d\d", tok):
                nums.append(tok)
        if nums:
            old = rng.choice(nums)
            val = float(old.replace(",", ""))
            dec = len(old.split(".")[1]) if "." in old else 0
            new = old
            for f in (1.05, 1.1, 1.15, 0.9, 0.95, 1.2):
                v = val * f + (1 if val < 20 else 0)
                cand = f"{v:,.{dec}f}" if "," in old else f"{v:.{dec}f}"
                if cand != old and cand not in text and old not in cand:
                    new = cand
                    break
            if new != old:
                replace[old] = new
                final = final.replace(old, new)
                asks.append(say(rng, [
                    "the figure {o} is wrong: replace every {o} with {n}",
                    "correct {o} to {n} wherever it appears",
                    "[{o} should read {n}|it's {n}, not {o}] - [fix every occurrence|everywhere it appears|in every "
                    "place]",
                    "[replace|swap] [each|every] {o} [with|for] {n} ([typo in the figures|the number was "
                    "wrong|corrected figure])",
                    "[the correct figure|the right number] is {n}[; {o} was a mistake|, not {o}] - [change|update] "
                    "[all|every] [instance|occurrence] [of it|]",
                    "{o} [appears|shows up] [somewhere|in places] but [it has to be|the real value is] {n}: "
                    "[fix|change] [each one|them all]",
                ], o=old, n=new))
                checks.append(Check("figure_corrected", "docs_replaced",
                                    {"src": source.path, "out": out, "old": old, "new": new}))
        # lines about a name that must not be shared: only people the generators made (two capitalised words
        # may be a salutation, "Dear Wen", or a heading), found at every word start so that "Dear Wen Menon"
        # still yields "Wen Menon"; not the persona, who is the one asking
        names = []
        for m in re.finditer(r"\b(?=([A-Z][a-z]+ [A-Z][a-z]+)\b)", text):
            nm = m.group(1)
            if not flavor.is_person(nm) or nm == ctx.persona.name:
                continue
            lines_with = [ln for ln in final.split("\n") if nm in ln]
            if (nm not in names and lines_with and not any(ln.lstrip().startswith("#") for ln in lines_with)
                    and len(lines_with) < len([ln for ln in final.split("\n") if ln.strip()]) / 2
                    and not any(o in nm or nm in o for o in replace)
                    and not any(n in ln for ln in lines_with for n in replace.values())):  # the fixed figure stays visible
                names.append(nm)
        if names and rng.random() < 0.8:
            nm = rng.choice(names)
            drop.append(nm)
            final = "\n".join(ln for ln in final.split("\n") if nm not in ln)
            asks.append(say(rng, [
                "remove every line that mentions {nm} (they asked not to be named)",
                "take out all lines mentioning {nm}",
                "[delete|drop] [any|each] line [naming|with] {nm} [in it|]([privacy|they left|confidential])",
                "{nm} must not appear: [remove|cut] the lines [that mention them|with their name]",
                "[no line|nothing] [may mention|should name] {nm} [any more|in the copy] - [delete|drop] "
                "[those lines|every such line] [entirely|whole]",
                "[for privacy|because they asked to stay anonymous], [strip|remove] [each|every] line "
                "[containing|where you see] {nm}",
            ], nm=nm))
            lines_removed = len(checks)  # made below, once the other edits are known
            checks.append(Check("lines_removed", "docs_no_line_with", {"path": out, "needles": [nm]}))
        for c in checks:
            if c.fn == "docs_replaced":
                c.args["drop_with"] = list(drop)
        # a title line on top
        title = rng.choice(["For circulation", "Shared copy", "Reviewed version", "Final draft", "Clean copy",
                            "Version to send", "Checked copy", "Circulated"])
        d = flavor.date_in(rng, 2026)
        title = f"{title} - {d.isoformat()}"
        final = f"# {title}\n\n" + final.lstrip("\n")
        asks.append(say(rng, ["put the heading line `# {t}` at the very top, above everything else",
                                 "[start|begin] the [file|copy] with the line `# {t}` ([first line|on top|before "
                                 "anything else])",
                                 "[the first line|the very top] [must be|should be] the heading `# {t}`",
                                 "[a new|an extra] title [line|heading] `# {t}` [goes|comes] [first|on line one], "
                                 "[before the existing text|above the rest]",
                                 "[top it with|prepend] `# {t}` [as the first line|as a heading]"], t=title))
        checks.append(Check("title_added", "docs_regex", {"path": out, "pattern": rf"\A\s*#\s+{re.escape(title)}\s*$"}))
        # a section with the reviewer's note
        people = [pick_name(rng, tuple(drop))]
        people.append(pick_name(rng, (*drop, people[0])))
        sec = rng.choice(["Review notes", "Sign-off", "Distribution", "Reviewers", "Circulation list"])
        if sec in ("Distribution", "Circulation list"):
            body = [f"- {p} <{flavor.email_of(p, 'example.org')}>" for p in people]
            needles = people
        elif sec == "Sign-off":
            body = [f"- Checked by {people[0]} on {d.isoformat()}", f"- Approved by {people[1]}"]
            needles = people + [d.isoformat()]
        else:
            body = [f"- Reviewed by {people[0]} on {d.isoformat()}", f"- Questions to {people[1]}"]
            needles = people + [d.isoformat()]
        content = "\n".join(body)
        final = final.rstrip("\n") + f"\n\n## {sec}\n\n{content}\n"
        asks.append(say(rng, ["add a final section '## {s}' with these lines:\n{c}\n",
                                 "[end with|finish with|append] a '## {s}' section [containing|with exactly]:\n{c}\n",
                                 "[at the bottom|after everything else], [a new|one more] section '## {s}' "
                                 "[holding|made of] [these lines|exactly this]:\n{c}\n",
                                 "[close|wrap up] [the copy|the document] with '## {s}' and [under it|below it]:\n"
                                 "{c}\n"],
                           s=sec, c=content))
        checks.append(Check("section_added", "docs_section_has", {"path": out, "heading": sec, "needles": needles}))
        if drop:
            # no line naming them counts in a copy that holds the rest of the source with the other edits made
            # (an empty file names no one; nor does the copy of another file)
            others = [Check("", c.fn, c.args, c.parts) for i, c in enumerate(checks) if i != lines_removed]
            checks[lines_removed] = Check("lines_removed", "gated", parts=[
                Check("", "docs_no_line_with", {"path": out, "needles": drop}),
                Check("", "docs_kept_lines", {"src": source.path, "out": out, "replace": replace, "drop_with": drop}),
                Check("", "mean_of", parts=others)])
        # the rest kept counts only as far as the edits are made (an unchanged copy keeps everything)
        edits = [Check("", c.fn, c.args, c.parts) for c in checks]
        checks.append(Check("rest_unchanged", "gated", parts=[
            Check("", "docs_kept_lines", {"src": source.path, "out": out, "replace": replace, "drop_with": drop}),
            Check("", "mean_of", parts=edits)]))
        bullets = "\n".join(f"- {a}" for a in asks)
        instruction = one_of(rng, [
            "make a copy of {desc} as `{out}` with these edits:\n{b}\nLeave `{src}` itself unchanged and keep "
            "everything else in the copy as it is.",
            "save an edited version of `{src}` as `{out}`, with:\n{b}\nNo other changes.",
            "[copy|duplicate] `{src}` to `{out}` and [change|edit] the copy [as follows|like this]:\n{b}\n"
            "[The original stays as it is|Don't touch `{src}`]; [nothing else changes|the rest stays word for "
            "word].",
            "[before it goes out|before I share it], {desc} needs [a few edits|some changes] - in a copy, `{out}` "
            "(not in `{src}`):\n{b}\n[Everything else as it is|Leave the rest alone].",
            "[I want to|I'll] [circulate|pass on|forward] {desc}, but [not as it is|only after a few fixes]. "
            "[Write|Save] [the fixed version|a corrected copy] [to|as] `{out}`, [leaving|and leave] `{src}` [as "
            "is|untouched]:\n{b}\n[All other lines|Every other line] [stay|stays] [exactly the same|identical].",
            "`{out}` [should be|is to be] `{src}` [with|plus] [these|the following] [corrections|changes] "
            "[and nothing more|only]:\n{b}\n[`{src}` itself stays as it is|Keep the original file unchanged].",
        ], desc=source.description, out=out, src=source.path, b=bullets)
        # partial: title and the first line of the section only; figures and names left alone
        partial_text = f"# {title}\n\n" + text.lstrip("\n").rstrip("\n") + f"\n\n## {sec}\n\n{body[0]}\n"
        return StepPlan(
            operation=self.id, instruction=instruction, checks=checks,
            steps=[read(source.path), write(out, final)],
            partial=[write(out, partial_text)],
            outputs=[Artifact(out, DOCUMENT, final, f"the edited copy ({out})")],
            summary=f"edit a copy of {source.path} into {out}",
            fingerprint=digest(final),
        )

    def plan(self, ctx: OpContext, source: Artifact | None) -> StepPlan:
        if source is not None and isinstance(source.data, str) and source.data.strip():
            return self._chained(ctx, source)
        return self._standalone(ctx)


GENERATORS = [EditDocument()]
