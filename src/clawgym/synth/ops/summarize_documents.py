"""summarize_documents: a few source documents (meeting notes, a status report, a colleague's email, an
article) become one structured summary: a section per source keeping its figures, the decisions, the action
items with ISO due dates, a cross-source total, and a loose word limit. Chained: summarise the previous
step's document (outline + largest amounts) or messages (one bullet per mail)."""

from __future__ import annotations

import csv
import datetime as dt
import io
import re

from clawgym.core.records import GeneratedContent, WorkspaceFile
from clawgym.synth import flavor
from clawgym.synth.grammar import one_of
from clawgym.synth.ops import operation
from clawgym.synth.ops._docs_common import (
    add_workdays,
    aside,
    digest,
    email_addr,
    human_date,
    join,
    long_date,
    persona_email,
    phrase,
    reqs,
    short_slug,
    words,
    wpath,
)
from clawgym.synth.ops.base import (
    DOCUMENT,
    MESSAGES,
    Artifact,
    Check,
    OpContext,
    OperationGenerator,
    StepPlan,
    ls,
    read,
    write,
)

CUR = ["€", "$", "£"]


def _money(cur: str, v: float) -> str:
    return f"{cur}{v:,.0f}" if v == int(v) else f"{cur}{v:,.2f}"


@operation
class SummarizeDocuments(OperationGenerator):
    id = "summarize_documents"
    consumes: tuple[str, ...] = (DOCUMENT, MESSAGES)
    produces = (DOCUMENT,)
    standalone = True
    folder_scoped = True

    # ------------------------------------------------------------------ standalone sources
    def _sources(self, ctx: OpContext):
        """-> (files, per-source facts, decisions, actions, approved amounts, currency, names)."""
        rng = ctx.rng
        voc = flavor.vocab(ctx.persona.domain, ctx.persona.occupation)
        project = rng.choice(voc["projects"])
        team = flavor.people(rng, 5)
        vendor, vendor2, org = flavor.orgs(rng, 3)
        cur = rng.choice(CUR)
        month = rng.randint(2, 11)
        meet = add_workdays(flavor.date_in(rng, 2026, month), 0)
        item, item2 = rng.sample(voc["items"], 2)
        cat = rng.choice(voc["categories"])
        me = ctx.persona.name
        files: list[WorkspaceFile] = []
        facts: dict[str, list[str]] = {}
        decisions: list[list[str]] = []
        actions: list[tuple[str, str, dt.date]] = []  # owner, task words, due
        approved: list[float] = []

        # (a) meeting notes
        q1 = rng.randrange(18, 95) * 100 + rng.choice([0, 50])
        approved.append(float(q1))
        new_launch = add_workdays(meet, rng.randint(12, 30))
        d1 = add_workdays(meet, rng.randint(3, 8))
        d2 = add_workdays(meet, rng.randint(5, 12))
        attendees = team[:4]
        notes_path = wpath(ctx, [f"meeting_{meet.strftime('%m%d')}", "meeting_notes", f"minutes_{meet.isoformat()}",
                                 f"{short_slug(project)}_meeting", f"team_meeting_{meet.strftime('%b').lower()}",
                                 "sync_notes"], "md", ["notes", "meetings", "minutes"])
        pct = rng.randint(12, 48)
        dec1 = rng.choice([f"Approved the {_money(cur, q1)} quote from {vendor} for {item}.",
                           f"Agreed to go with {vendor} for {item}; budget of {_money(cur, q1)} approved."])
        dec2 = rng.choice([f"Launch of the {project} moves to {long_date(new_launch)}.",
                           f"The {project} go-live is pushed back to {long_date(new_launch)}."])
        a1 = (attendees[1], f"send the signed order to {vendor}", d1)
        a2 = (attendees[2], f"update the {item2} stock list", d2)
        notes = "\n".join([
            f"# {project[0].upper() + project[1:]} - team meeting, {long_date(meet)}", "",
            f"Attendees: {', '.join(attendees)}", "",
            "## Discussion", "",
            f"- {attendees[0]} reported that {item} usage is up {pct}% on last quarter.",
            f"- Two quotes were compared: {vendor} and {vendor2}; {vendor} was cheaper and can deliver sooner.",
            f"- {attendees[3]} raised concerns about storage space for the extra {item2}.",
            "",
            "## Decisions", "", f"- {dec1}", f"- {dec2}", "",
            "## Actions", "",
            f"- {a1[0]} to {a1[1]} by {human_date(rng, d1, with_year=False)}",
            f"- {a2[0]} will {a2[1]} (due {human_date(rng, d2, with_year=False)})", "",
        ])
        files.append(WorkspaceFile(path=notes_path, content=notes))
        facts[notes_path] = [f"{pct}%", _money(cur, q1).lstrip(cur), vendor]
        decisions += [[vendor, _money(cur, q1).lstrip(cur)], [f"date:{new_launch.isoformat()}"]]
        actions += [a1, a2]

        # (b) status report
        rep_month = dt.date(2026, month, 1)
        budget = rng.randrange(40, 200) * 500
        spent = round(budget * rng.uniform(0.35, 0.8), 2)
        extra = rng.randrange(5, 30) * 100
        approved.append(float(extra))
        n_done, n_total = rng.randint(4, 9), rng.randint(10, 16)
        rep_path = wpath(ctx, [f"status_{rep_month.strftime('%Y_%m')}", "status_report", f"{short_slug(project)}_report",
                               f"{flavor.slug(org).split('_')[0]}_update", f"progress_{rep_month.strftime('%b').lower()}"],
                         "txt", ["reports", "status", "updates"])
        report = "\n".join([
            f"{org} - {project} status report, {rep_month.strftime('%B %Y')}",
            "=" * 40, "",
            f"Budget: {_money(cur, spent)} spent of {_money(cur, budget)} so far.",
            f"Progress: {n_done} of {n_total} work packages complete.",
            f"The steering group approved an extra {_money(cur, extra)} for {cat.lower()} costs.",
            "",
            f"Issues: delivery of {item2} from {vendor2} slipped by {rng.randint(2, 9)} days; no impact on the "
            "critical path yet.",
            f"Prepared by {team[4]}.", "",
        ])
        files.append(WorkspaceFile(path=rep_path, content=report))
        facts[rep_path] = [_money(cur, spent).lstrip(cur), _money(cur, budget).lstrip(cur), str(n_done), str(n_total)]
        decisions.append([_money(cur, extra).lstrip(cur)])

        srcs = 2
        # (c) an email from a colleague / vendor
        if rng.random() < 0.75:
            srcs += 1
            sender = flavor.person(rng)
            while sender in team:
                sender = flavor.person(rng)
            qty = rng.randint(20, 400)
            unit = round(rng.uniform(1.5, 60), 2)
            by = add_workdays(meet, rng.randint(2, 6))
            mail_path = wpath(ctx, ["quote_update", "from_supplier", "supplier_mail", f"re_{short_slug(item, 1)}_order",
                                    f"{flavor.slug(sender.split()[0])}_mail"], "eml", ["inbox", "mail", "mail/inbox"],
                              p_folder=0.8)
            body = (f"Hi {me.split()[0]},\n\nFollowing the meeting, we can supply {qty} units of {item} at "
                    f"{cur}{unit:.2f} each, delivered within {rng.randint(3, 10)} working days of the order.\n\n"
                    f"Could you confirm the delivery address by {human_date(rng, by, with_year=False)}?\n\n"
                    f"Best,\n{sender}\n{vendor}\n")
            files.append(WorkspaceFile(path=mail_path, generate=GeneratedContent(kind="eml", params={
                "from": f"{sender} <{email_addr(sender, vendor)}>", "to": persona_email(ctx.persona),
                "subject": f"Re: {item} order", "date": f"{add_workdays(meet, 1).isoformat()}T10:{rng.randint(10, 59)}:00",
                "body": body})))
            facts[mail_path] = [str(qty), f"{unit:.2f}", sender]
            actions.append((me, "confirm the delivery address", by))
        # (d) a short article
        if rng.random() < 0.5:
            srcs += 1
            survey = rng.randrange(3, 40) * 100
            share = rng.randint(21, 79)
            art_path = wpath(ctx, ["article", "industry_news", "survey", f"{short_slug(item, 1)}_prices",
                                   "clipping", "press"], "md", ["reading", "clippings", "news"])
            art = "\n".join([
                f"# Survey: {item} costs keep rising", "",
                f"A survey of {survey:,} organisations published this month found that {share}% expect to pay more "
                f"for {item} next year.",
                f"Respondents named {cat.lower()} as the area most affected.", "",
                "Analysts recommend locking in prices with a single supplier where possible.", "",
            ])
            files.append(WorkspaceFile(path=art_path, content=art))
            facts[art_path] = [f"{survey:,}", f"{share}%"]
        return files, facts, decisions, actions, approved, cur, project

    def _standalone(self, ctx: OpContext) -> StepPlan:
        rng = ctx.rng
        files, facts, decisions, actions, approved, cur, project = self._sources(ctx)
        out = wpath(ctx, ["summary", "briefing", f"{short_slug(project)}_summary", "digest", "catch_up",
                          "brief_for_me", "one_page_summary"], "md", ["digest", "briefings", "summaries"],
                    p_folder=0.4)
        total = sum(approved)
        names = {p: p.split("/")[-1] for p in facts}
        limit = rng.choice([250, 280, 300, 320, 350, 400])
        dec_h = rng.choice(["Decisions", "Decisions made", "What was decided", "Key decisions", "Agreed",
                            "Outcomes", "Resolved", "Settled points"])
        act_h = rng.choice(["Action items", "Actions", "Next actions", "To do", "Follow-ups", "Who does what",
                            "Open tasks", "Next steps"])
        label = rng.choice(["Total approved spend", "Total approved", "Approved in total", "Sum of approvals",
                            "Total signed off", "Approved budget, all sources", "Signed-off spend"])
        # the reference summary
        # not every reader wants every part: one of the decisions, the actions or the total is sometimes left out
        # of the request (and of the reference and the checks)
        skip = rng.choice(["dec", "act", "total"]) if rng.random() < 0.4 else ""
        lines = [f"# Summary: {project}", ""]
        fact_lines = {}
        for p, fs in facts.items():
            fact_lines[p] = fs
            lines += [f"## {names[p]}", ""]
            lines += [f"- Key facts: {', '.join(fs)}"]
            lines.append("")
        if skip != "dec":
            lines += [f"## {dec_h}", ""]
            lines += [f"- {' / '.join(x.removeprefix('date:') for x in d)}" for d in decisions]
            lines += [""]
        if skip != "act":
            lines += [f"## {act_h}", ""]
            lines += [f"- {o}: {t} (due {d.isoformat()})" for o, t, d in actions]
            lines += [""]
        if skip != "total":
            lines += [f"{label}: {cur}{total:,.2f}", ""]
        summary = "\n".join(lines)
        src_list = ", ".join(f"`{p}`" for p in facts)
        slots = dict(first=names[next(iter(facts))], dec=dec_h, act=act_h, me=ctx.persona.name, label=label,
                     srcs=src_list, out=out, limit=limit, n=len(facts), project=project)
        ex_date = dt.date(2025, rng.randint(1, 12), rng.randint(1, 28)).isoformat()
        slots["ex_date"] = ex_date
        items = [
            phrase(rng, ["one `## <file name>` section per source (e.g. `## {first}`) with its main points, keeping "
                         "every figure ([amounts, counts, percentages|money, counts and percentages]) [exactly as "
                         "written|as it appears|unchanged]",
                         "a section per document, headed `## <its file name>` (like `## {first}`), [with|giving] its "
                         "main points and [all|every one of] its numbers [verbatim|copied exactly]",
                         "[for each|per] file a `##` heading [with|that is] its name (`## {first}` and so on) and "
                         "[the gist|the main points], [figures kept as they are|no figure rounded or changed]",
                         "[every|each] source [gets|has] [a heading of its own|its own `##` heading] - just the "
                         "file name, [so|e.g.] `## {first}` - [followed by|then] [what matters in it|its key "
                         "points]; [don't round|never round or reformat] [any number|the numbers]",
                         "[the|all] {n} [files|documents] summarised one by one, [under|each under] `## "
                         "<filename>` ([`## {first}` for the first|starting with `## {first}`]), [quoting|with] "
                         "[their|the] figures [the way the source writes them|character for character]",
                         "[organise|structure] it by source: `## {first}` and [likewise|the same] for the "
                         "[others|other files], [every|each] amount, count and percentage [carried over|copied] "
                         "[unchanged|as is]"], **slots),
            phrase(rng, ["a `## {dec}` section listing every decision [taken|made] ([with its amount or date|the "
                         "sum or date included])",
                         "[under|in] `## {dec}`: [each|every] [decision|thing agreed], [quoting|and] [the money or "
                         "the date it sets|how much or by when]",
                         "[the decisions go|what was decided goes] under `## {dec}`, [amounts and dates "
                         "included|each with the sum or date attached]",
                         "`## {dec}` [collects|gathers] [what got decided|the decisions] [across|in] [all the "
                         "sources|the files] - [mention|keep] the [money|figure] or [deadline|date] [that goes "
                         "with each|each one involves]",
                         "[a heading|a section] `## {dec}` [for|with] [every|each] [agreement|approval or "
                         "change of plan], [naming the sum or the new date|quoting how much or until when]"],
                   **slots),
            phrase(rng, ["a `## {act}` section [with one line per action item|listing the action items, one a "
                         "line]: owner ([my own items under my name, {me}|{me} for the ones that are mine]), task "
                         "and [due date|deadline]",
                         "`## {act}`: [every|each] [job|action] someone [took on|agreed to do] - who ({me} for "
                         "mine), what, [and when|and by when]",
                         "[every|each] action item [in|under] `## {act}` with [its owner|who owns it] ([{me} if "
                         "it's mine|mine under {me}]), the task and the due date",
                         "[the follow-ups|open tasks|to-dos] [from all sources|wherever they come from] [in|under] "
                         "`## {act}`, [each naming|naming] [the person responsible|who has to do it] ([me as "
                         "{me}|anything for me under {me}]) and [the deadline|when it is due]",
                         "[list|put] [what needs doing|the open actions] in `## {act}` - [one per line|a line each], "
                         "[person|owner] [first|included] ([that's {me} when it's me|{me} when it's my job]), "
                         "[then the deadline|with the deadline]"], **slots),
            phrase(rng, ["a [final|closing|last] line `{label}: <amount>` [adding up|with the sum of|totalling] "
                         "every amount approved in the sources",
                         "[end with|finish with] `{label}: <amount>`, the sum of [everything|all amounts] approved "
                         "[across|in] the documents",
                         "[add up|total] the approved amounts [in all the sources|across the files] [and put|on] "
                         "a last line `{label}: <amount>`",
                         "[at the bottom|last of all], `{label}: <amount>` - [how much|the money] [was approved|got "
                         "signed off] [altogether|in total] [over|across] [the {n} sources|these files]",
                         "[one|a] line [reading|of the form] `{label}: <amount>` [with|for] [the combined|the "
                         "grand] total of [every approval|the sums approved] [anywhere in the sources|in any "
                         "of the files]"], **slots),
            phrase(rng, ["[every date|all dates|dates] [written as|in the form|as] YYYY-MM-DD",
                         "[dates|due dates and deadlines] in [ISO|numeric ISO] form ([like|e.g.] {ex_date}), not "
                         "[spelled out|written in words]",
                         "[no \"3rd of May\"-style dates|no dates in words]: [year-month-day|YYYY-MM-DD] "
                         "[throughout|everywhere] ({ex_date} [style|format])",
                         "[use|stick to] the {ex_date} [date format|way of writing dates] [for every date|"
                         "throughout]"], **slots),
        ]
        head = one_of(rng, [
            "I haven't had time to read {srcs}. [Write me|Put together|Write] a summary at `{out}` (markdown, under "
            "{limit} words).",
            "[Please|Could you] [summarise|digest|condense] these {n} documents - {srcs} - into `{out}`[?|.] "
            "[Keep it|Stay] under [about |roughly |]{limit} words.",
            "Could you turn {srcs} into one [briefing|summary|catch-up note], `{out}`? Max {limit} words or so.",
            "[I'm behind on|I need the gist of|Catch me up on] the {project}: {srcs}. [A markdown summary in|Write up] "
            "`{out}`, [at most|no more than|under] {limit} words.",
            "`{out}` should [become|be] a [one-page|short|tight] summary (under {limit} words) of {srcs}.",
            "[What do|What's in] {srcs} [say|actually]? [Give me the essentials|Condense it] in `{out}`, {limit} words "
            "[tops|at most].",
            "[Read|Go through] {srcs} [for me|on my behalf] and [write up|produce] the [key points|essentials] as "
            "`{out}` ([max.|at most] {limit} words).",
            "[Prepare|Draft] a [briefing note|status brief] `{out}` [from|based on] {srcs} - [no longer than|under] "
            "{limit} words.",
        ], **slots)
        lead = one_of(rng, ["[Structure|Layout]:", "[It needs|I need]:", "[What goes in|Contents]:",
                            "[Put in|Include]:"])
        story = ""
        if rng.random() < 0.8:
            story = one_of(rng, [
                "[The|Our] {project} [produced|generated|left me with] {n} documents [this month|last week|since "
                "{month}] and I [was away|was off sick|missed the meeting].",
                "[Tomorrow|On {day}] I [have to|need to] [brief|update] {boss} on the {project}, and I [only have|have "
                "maybe] {mins} minutes to prepare.",
                "[I'm behind|I fell behind] on the {project}: {n} [files|documents] [piled up|are waiting] in my "
                "workspace.",
                "{boss} [asked for|wants] a [short|one-page] [briefing|digest] on the {project} [before|by] {day}.",
                "[I'll read it|I read these] [on my phone|between meetings|on the train] [in|around] {city}, so "
                "[short|compact] [matters|is the point].",
                "[Everything|All of it] [ends up|has to go] into {tool} [afterwards|later], [and|so] I [need|want] "
                "the [facts|numbers] [straight|right] [first|before that].",
            ], city=ctx.persona.location.split(",")[0].strip(), tool=rng.choice(list(ctx.persona.tools)),
                project=project, n=len(facts), month=rng.choice(["Monday", "the start of the month", "the offsite"]),
                day=rng.choice(["Monday", "Thursday", "Friday morning"]), mins=rng.choice([10, 15, 20, 30]),
                boss=rng.choice(["my manager", "the director", "our chair", "the client", "my co-founder"]))
        items = [it for k, it in zip(["src", "dec", "act", "total", "dates"], items, strict=True) if k != skip]
        instruction = join(story, head, reqs(rng, items, lead=lead), aside(rng, ctx.persona))
        # dates as the request asks for them (YYYY-MM-DD): the meeting notes copied as they are, with their own
        # "## Decisions" and "## Actions" and dates written out in words, are not the summary
        action_needles = [n for o, _, d in actions for n in (o, d.isoformat())]
        content = [
            Check("section_per_source", "docs_sections_have", {"path": out, "sections": {names[p]: [] for p in facts}}),
            Check("source_figures_kept", "docs_sections_have",
                  {"path": out, "sections": {names[p]: fs for p, fs in facts.items()}}),
            Check("decisions_listed", "docs_section_has",
                  {"path": out, "heading": dec_h, "needles": [n.removeprefix("date:") for d in decisions for n in d]}),
            Check("action_items_with_dates", "docs_section_has",
                  {"path": out, "heading": act_h, "needles": action_needles}),
            Check("total_approved_spend", "docs_line_number", {"path": out, "label": label, "value": round(total, 2)}),
        ]
        dropped = {"dec": "decisions_listed", "act": "action_items_with_dates", "total": "total_approved_spend"}
        content = [c for c in content if c.name != dropped.get(skip)]
        # short enough counts only as far as the content is there (a short file with nothing right in it is not a
        # summary within the limit)
        checks = [*content, Check("within_word_limit", "gated", parts=[
            Check("", "docs_word_count", {"path": out, "max_words": int(limit * 1.15),
                                             "min_words": min(40, words(summary) // 2)}),
            Check("", "mean_of", parts=[Check("", c.fn, c.args) for c in content])])]
        # partial: the first source only, decisions without amounts, no actions or total
        first = next(iter(facts))
        partial = "\n".join([f"# Summary: {project}", "", f"## {names[first]}", "", f"- {', '.join(facts[first])}",
                             "", f"## {dec_h}", "", f"- {decisions[1][0].removeprefix('date:')}", "",
                             f"Notes taken from {len(facts)} documents; the details are in the files.", "",
                             "Overall the project is on track, though one delivery slipped by a few days and the "
                             "team asked for more storage.", ""])
        return StepPlan(
            operation=self.id, instruction=instruction, checks=checks, files=files,
            steps=[*(read(p) for p in facts), write(out, summary)],
            partial=[write(out, partial)],
            outputs=[Artifact(out, DOCUMENT, summary, f"the summary ({out})")],
            summary=f"summarise {len(facts)} documents into {out}",
            fingerprint=digest(summary, sorted(facts)),
        )

    # ------------------------------------------------------------------ chained
    def _from_document(self, ctx: OpContext, source: Artifact) -> StepPlan:
        rng = ctx.rng
        text = str(source.data)
        heads = []
        for m in re.finditer(r"^#{2,3}\s+(.+?)\s*#*\s*$", text, re.M):
            h = m.group(1).strip()
            if h not in heads:
                heads.append(h)
        heads = heads[:10]
        amounts = []
        for m in re.finditer(r"(?<![\w./:-])(\d{1,3}(?:,\d{3})+\.\d{2}|\d+\.\d{2})(?![\w/:-]|[.,]\d)", text):
            v = float(m.group(1).replace(",", ""))
            if v not in amounts:
                amounts.append(v)
        top = sorted(amounts, reverse=True)[:3]
        table = None
        if source.path.endswith((".csv", ".tsv")) or (not re.search(r"^#", text, re.M)
                                                     and text.split("\n", 1)[0].count(",") >= 2):
            parsed = [r for r in csv.reader(io.StringIO(text)) if any(c.strip() for c in r)]
            if len(parsed) >= 2:
                table = (parsed[0], parsed[1:])
        out = wpath(ctx, ["tldr", "summary_short", "one_pager", "gist", "in_short", "recap", "quick_summary"], "md",
                    ["summaries", "digest", "notes"], p_folder=0.35)
        limit = max(80, min(250, words(text) // 2))
        out_h = rng.choice(["Outline", "Sections", "Structure", "Contents", "What it covers", "Table of contents",
                            "Headings", "Map of the document"])
        fig_h = rng.choice(["Key figures", "Largest amounts", "Top amounts", "Biggest numbers", "Main figures",
                            "Headline amounts", "Big sums", "Amounts that stand out"])
        col_h = rng.choice(["Columns", "Fields", "Column names", "Header", "What each row holds"])
        about_h = rng.choice(["About", "Source", "Where this comes from", "Origin", "Based on", "Input file"])
        rows_l = rng.choice(["Rows", "Row count", "Data rows", "Records", "Entries", "Lines of data"])
        lines = [f"# {rng.choice(['In short', 'Summary', 'TL;DR', 'Recap', 'Gist'])}", "", f"Source: {source.path}", ""]
        checks: list[Check] = []
        spec = []
        if heads:
            lines += [f"## {out_h}", ""] + [f"- {h}" for h in heads] + [""]
            spec.append(phrase(rng, [
                "a `## {h}` section with one bullet per [section heading|`##`/`###` heading] of the [source|original]",
                "[under|in] `## {h}`, [the source's|its] `##` and `###` headings as [bullets|a bullet list], "
                "[in order|one each]",
                "`## {h}`: [a bullet for every|every] [heading|sub-heading] [the document has|in the file] "
                "(`##` [or|and] `###`), [copied|as written]",
                "[an outline|the table of contents] [as|in] `## {h}` - [each|every] `##`/`###` title of `{src}` "
                "[on its own bullet|as one bullet]",
            ], h=out_h, src=source.path))
            checks.append(Check("outline_complete", "docs_lists_headings", {"out": out, "heading": out_h,
                                                                           "src": source.path}))
        if top:
            lines += [f"## {fig_h}", ""] + [f"- {v:.2f}" for v in top] + [""]
            n = len(top)
            many = n > 1
            spec.append(phrase(rng, [
                "a `## {h}` section [listing|with|giving] the {nn}[largest|biggest|highest] {amt} in it ([numbers "
                "written with|as numbers with|to] two decimals)",
                "[under|in] `## {h}`, [the|its] {nn}[top|largest] amount{pl} [as|written as] plain numbers "
                "with two decimals[ (no currency sign)|]",
                "`## {h}` [should give|with] the {nn}[biggest|highest] sum{pl} [that appear|mentioned] in "
                "[the document|`{src}`], two decimal places [each|]",
                "[pull out|find] the {nn}[largest|biggest] [figure|amount]{pl} [in money|of money] and [list|put] "
                "{them} [under|in] `## {h}` ([like|e.g.] 1234.50)",
            ], h=fig_h, src=source.path, nn=f"{n} " if many else "", pl="s" if many else "",
                amt=rng.choice(["money amounts", "amounts of money"] if many else ["money amount", "amount of money"]),
                them="them" if many else "it"))
            checks.append(Check("largest_amounts", "docs_lists_top_amounts", {"out": out, "heading": fig_h,
                                                                             "src": source.path, "k": n}))
        if table is not None:
            lines += [f"{rows_l}: {len(table[1])}", "", f"## {col_h}", ""] + [f"- {h}" for h in table[0]] + [""]
            spec.append(phrase(rng, ["a line `{r}: <number of data rows>`",
                                     "[how many|the number of] data rows [as|on] a line `{r}: <n>`",
                                     "`{r}: <count>` ([header not counted|not counting the header])"], r=rows_l))
            spec.append(phrase(rng, ["a `## {h}` section [listing|naming] every column [name|]",
                                     "[every|each] column [name|header] [as a bullet|on its own bullet] [under|in] "
                                     "`## {h}`",
                                     "`## {h}` with the [header row's|table's] [names|fields], [all of them|none "
                                     "left out]"], h=col_h))
            checks.append(Check("row_count", "docs_line_number", {"path": out, "label": rows_l,
                                                                  "value": len(table[1])}))
            checks.append(Check("columns_listed", "docs_section_has", {"path": out, "heading": col_h,
                                                                      "needles": [h for h in table[0] if h.strip()]}))
        first_line = next((ln.strip("# ").strip() for ln in text.splitlines() if ln.strip()), source.path)[:80]
        lines += [f"## {about_h}", "", f"This summarises {source.path} ({first_line}).", ""]
        spec.append(phrase(rng, ["a `## {h}` section [naming|that names|with] the source file `{src}`",
                                 "`## {h}` [saying|mentioning] [which file|where] [this|it] [comes from|was "
                                 "summarised from] (`{src}`)",
                                 "[a pointer back to|a reference to] `{src}` [in|under] `## {h}`"], h=about_h,
                           src=source.path))
        checks.append(Check("names_source", "docs_section_has", {"path": out, "heading": about_h,
                                                                "needles": [source.path.split('/')[-1]]}))
        # short enough counts only as far as the content is there
        checks.append(Check("within_word_limit", "gated", parts=[
            Check("", "docs_word_count", {"path": out, "max_words": int(limit * 1.2), "min_words": 5}),
            Check("", "mean_of", parts=[Check("", c.fn, c.args) for c in checks])]))
        summary = "\n".join(lines)
        slots = dict(desc=source.description, src=source.path, out=out, limit=limit)
        head = one_of(rng, [
            "write a short summary of {desc} to `{out}` (at most {limit} words)",
            "boil `{src}` down into `{out}`, no more than {limit} words",
            "[make|write] a [TL;DR|one-pager|quick recap] of `{src}` in `{out}` - [{limit} words max|under {limit} "
            "words|{limit} words at most]",
            "[summarise|condense] {desc} [as|into] `{out}` (keep it within {limit} words)",
            "[I won't have time to read|Nobody will read] all of `{src}`, so [put|write] [the short version|a "
            "digest] in `{out}` [- {limit} words or fewer|(no more than {limit} words)]",
            "`{out}` [should be|is to be] [a compact|a short] [overview|digest] of {desc}, [within|under] {limit} "
            "words",
            "[give|hand] [me|the team] [a cheat sheet|a crib sheet|the highlights] of `{src}` [in|as] `{out}` "
            "([{limit}-word limit|{limit} words, no more])",
        ], **slots)
        instruction = join(head + ",", reqs(rng, spec, lead=phrase(rng, [
            "[with|containing|that has]", "[and it needs|it must have|structured as]:", "[made up of|laid out "
            "with]"])))
        partial_lines = ["# In short", ""]
        if heads:
            partial_lines += [f"## {out_h}", ""] + [f"- {h}" for h in heads[: max(1, len(heads) // 2)]] + [""]
        if top:
            partial_lines += [f"## {fig_h}", "", f"- {top[-1]:.2f}", ""] if len(top) > 1 else []
        if table is not None:
            partial_lines += [f"## {col_h}", ""] + [f"- {h}" for h in table[0][:1]] + [""]
        partial_lines += [f"## {about_h}", "", f"Summary of {source.path}.", "", " ".join(["etc"] * (limit * 3))]
        return StepPlan(
            operation=self.id, instruction=instruction, checks=checks,
            steps=[read(source.path), write(out, summary)],
            partial=[write(out, "\n".join(partial_lines))],
            outputs=[Artifact(out, DOCUMENT, summary, f"the short summary ({out})")],
            summary=f"summarise {source.path} into {out}",
            fingerprint=digest(summary),
        )

    def _from_messages(self, ctx: OpContext, source: Artifact) -> StepPlan:
        rng = ctx.rng
        msgs = [m for m in source.data if isinstance(m, dict)]
        out = wpath(ctx, ["mail_digest", "messages_summary", "digest", "sent_overview", "outbox_digest",
                          "mail_log"], "md", ["digest", "summaries", "notes"], p_folder=0.35)
        tot_l = rng.choice(["Total", "Messages in total", "Count", "Number of messages", "Mails sent", "All told"])
        msg_h = rng.choice(["Messages", "Mails", "Each message", "Emails", "What went out", "Per message"])
        snd_h = rng.choice(["Senders", "From", "Who wrote", "Sent by", "Sender list", "Written by"])

        def who(m: dict) -> str:
            f = str(m.get("from", "")).strip()
            mm = re.match(r"\s*\"?([^\"<]+?)\"?\s*<([^>]+)>", f)
            return mm.group(1).strip() if mm else f

        def rcpt(m: dict) -> str:
            t = m.get("to", "")
            t = ", ".join(t) if isinstance(t, list) else str(t)
            mm = re.search(r"[\w.+-]+@[\w.-]+", t)
            return mm.group(0) if mm else t.strip()

        subjects = [str(m.get("subject", "")).strip() for m in msgs]
        recips = [rcpt(m) for m in msgs]
        senders = []
        for m in msgs:
            if who(m) and who(m) not in senders:
                senders.append(who(m))
        lines = ["# Message digest", "", f"{tot_l}: {len(msgs)} messages", "", f"## {msg_h}", ""]
        lines += [f"- To {r}: {s}" for r, s in zip(recips, subjects, strict=False)]
        lines += ["", f"## {snd_h}", ""] + [f"- {s}" for s in senders] + [""]
        digest_text = "\n".join(lines)
        items = [phrase(rng, ["a line `{t}: <number> messages`", "[the count|how many there are] as `{t}: <n> "
                              "messages`", "`{t}: <n> messages` [on a line of its own|as its own line]"], t=tot_l),
                 phrase(rng, ["a `## {h}` section with one bullet per message [giving|with] its recipient address "
                              "and subject",
                              "[under|in] `## {h}`, [a bullet|one line] for [every|each] mail: [who it went to|the "
                              "address it was sent to] and [its subject|the subject line]",
                              "`## {h}` [listing|covering] [the messages|every message] [one by one|individually] "
                              "([recipient's address|To address] plus subject)"], h=msg_h),
                 phrase(rng, ["a `## {h}` section [listing|naming] each distinct sender [once|only once|one time]",
                              "the [different|distinct] senders [under|in] `## {h}`, [no repeats|each just once]",
                              "`## {h}`: [who sent them|every sender], [without duplicates|de-duplicated]"],
                        h=snd_h)]
        head = one_of(rng, [
            "write a digest of {desc} to `{out}`",
            "summarise the messages in `{src}` into `{out}`",
            "[give me|make] an overview of [what's in|the mails in] `{src}` as `{out}`",
            "[list|go over] {desc} in a [short|small] digest, `{out}`",
            "[I want to know|Tell me] [what was sent|who got what] - [a digest|an overview] of `{src}` [saved as|"
            "in] `{out}`",
            "`{out}` [should sum up|needs to recap] the [mails|messages] in `{src}`",
            "[keep a record of|log] [these messages|what went out] ({desc}) in [a digest|a note], `{out}`",
        ], desc=source.description, src=source.path, out=out)
        instruction = join(head + ":", reqs(rng, items, fixed_order=rng.random() < 0.5))
        checks = [
            Check("message_count", "docs_line_number", {"path": out, "label": tot_l, "value": len(msgs)}),
            Check("one_bullet_per_message", "docs_section_has",
                  {"path": out, "heading": msg_h, "needles": [n for n in subjects + recips if n]}),
            Check("senders_listed", "docs_section_has", {"path": out, "heading": snd_h, "needles": senders}),
        ]
        half = max(1, len(msgs) // 2)
        partial = "\n".join(["# Message digest", "", f"## {msg_h}", ""] +
                            [f"- To {r}: {s}" for r, s in zip(recips[:half], subjects[:half], strict=False)] +
                            ["", f"## {snd_h}", ""] + [f"- {s}" for s in senders] + [""])
        if len(msgs) == 1:
            partial = "\n".join(["# Message digest", "", f"## {snd_h}", ""] + [f"- {s}" for s in senders] + [""])
        return StepPlan(
            operation=self.id, instruction=instruction, checks=checks,
            steps=[read(source.path) if "." in source.path.split("/")[-1] else ls(source.path), write(out, digest_text)],
            partial=[write(out, partial)],
            outputs=[Artifact(out, DOCUMENT, digest_text, f"the message digest ({out})")],
            summary=f"digest {len(msgs)} messages into {out}",
            fingerprint=digest(digest_text),
        )

    def plan(self, ctx: OpContext, source: Artifact | None) -> StepPlan:
        if source is not None and source.kind == MESSAGES and isinstance(source.data, list) and source.data:
            return self._from_messages(ctx, source)
        if source is not None and isinstance(source.data, str) and source.data.strip():
            return self._from_document(ctx, source)
        return self._standalone(ctx)


GENERATORS = [SummarizeDocuments()]
