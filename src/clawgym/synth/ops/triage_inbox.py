"""triage_inbox: a folder of .eml messages (requests, FYIs, newsletters with List-Unsubscribe, spam flagged by
the filter, some urgent, some from VIPs) is triaged into triage.json or triage.csv (file, sender, subject,
priority, category, needs_reply) by rules the request states; sometimes the junk is moved into folders."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass

from clawgym.core.records import GeneratedContent, WorkspaceFile
from clawgym.synth import flavor
from clawgym.synth.grammar import expand, one_of
from clawgym.synth.ops import operation
from clawgym.synth.ops._docs_common import (
    aside,
    digest,
    email_addr,
    human_date,
    join,
    persona_email,
    phrase,
    reqs,
    wpath,
)
from clawgym.synth.ops.base import (
    RECORDS,
    TABLE,
    Artifact,
    Check,
    OpContext,
    OperationGenerator,
    StepPlan,
    exec_,
    ls,
    read,
    to_csv,
    write,
)
from clawgym.synth.voice import article

REQUESTS = [
    ("Question about the {project}", "Could you send me the latest figures for {item} before {day}? I need them "
                                     "for the planning call."),
    ("Can we move our call?", "Something came up on my side. Would {day} at 14:00 work for you instead?"),
    ("{item} order - which option?", "{org} sent two quotes for {item}. Which one do you want me to accept?"),
    ("Budget sign-off for {cat}", "Could you approve the {cat} budget line? I attached nothing yet - just tell me "
                                  "if the amount from last month still stands."),
    ("Help with the {project}", "Do you have time this week to review my draft for the {project}? Let me know "
                                "which day suits you."),
]
URGENT = [
    ("URGENT: {item} delivery today", "The driver from {org} is waiting - can you confirm today whether we accept "
                                      "the delivery of {item}? Please reply ASAP."),
    ("Urgent - sign-off needed by end of day", "I need your sign-off on the {project} numbers by end of day, "
                                               "otherwise we miss the deadline. Can you confirm?"),
    ("ASAP: access problem", "I am locked out of the shared drive and the {project} files are due today. Can you "
                             "reset my access or tell me who can?"),
]
FYIS = [
    ("FYI: {project} minutes uploaded", "Just letting you know the minutes are on the shared drive. No action "
                                        "needed."),
    ("Out of office {day}", "I will be out on {day}; {colleague} covers for me. No need to reply."),
    ("Delivery confirmed", "{org} confirmed the {item} delivery for {day}. Nothing to do on your side - just "
                           "keeping you in the loop."),
    ("Room booking done", "I booked the big meeting room for the {project} review on {day}. No reply needed."),
]
NEWSLETTERS = [
    ("{Org} monthly: what's new in {month}", "Our {month} newsletter: new {item} range, tips for your {project}, "
                                             "and upcoming webinars."),
    ("This week in {cat}", "Top stories this week about {cat}, plus a reader survey."),
    ("Your {month} digest from {Org}", "Five articles picked for you, and this month's offers on {item}."),
]
SPAM = [
    ("You have won a {cur}500 gift card!!", "Congratulations! Click the link below within 24 hours to claim your "
                                            "prize."),
    ("URGENT: verify your account now", "Your mailbox will be closed today. Verify your password at the link to "
                                        "keep your account."),
    ("Invoice overdue - pay immediately", "Dear customer, your invoice is overdue. Open the attached file and pay "
                                          "by wire transfer today."),
    ("Cheap {item} - 90% off", "Best prices guaranteed. Limited stock, order now!"),
]
# output field names (file, from, priority, category, needs_reply; "subject" stays) and value words
FIELD_NAMES = [("file", "from", "priority", "category", "needs_reply"), ("message", "sender", "urgency", "type", "reply"),
               ("filename", "from", "priority", "kind", "needs_answer"), ("file", "sender", "prio", "label", "to_answer")]
PRIO_WORDS = [("high", "normal", "low"), ("urgent", "normal", "later"), ("p1", "p2", "p3"), ("high", "medium", "low")]
CAT_WORDS = [("spam", "newsletter", "request", "fyi"), ("junk", "bulk", "action", "info"),
             ("spam", "mailing", "todo", "fyi")]
SPAM_DOMAINS = ["prize-center.biz", "secure-verify.top", "mail-notice.info", "bestdeals.click", "acct-alert.xyz"]


@dataclass
class _Inbox:
    """The data stage: the mails of the inbox."""

    voc: dict
    base: dt.datetime  # the morning the mails start
    vips: list[tuple[str, str]]  # (name, address)
    inbox: str
    msgs: list[dict]  # {path, file, from, subject, priority, category, needs_reply, params (of the .eml)}


@dataclass
class _Triage:
    """What the triage holds: its path and format, field names and words, the moves, the expected records."""

    vip_path: str
    vip_text: str
    out: str
    as_json: bool
    move: bool  # the junk is moved into folders
    moves: dict[str, str]
    fields: list[str]
    names: tuple[str, ...]  # the file, from, priority, category and needs_reply fields
    pw: dict[str, str]  # priority -> the request's word
    cw: dict[str, str]  # category -> the request's word
    records: list[dict]
    slots: dict


@operation
class TriageInbox(OperationGenerator):
    id = "triage_inbox"
    consumes: tuple[str, ...] = ()
    produces = (RECORDS, TABLE)
    standalone = True
    folder_scoped = True

    def plan(self, ctx: OpContext, source: Artifact | None) -> StepPlan:
        box = self._inbox(ctx)
        tri = self._triage(ctx, box)
        instruction = self._request(ctx, box, tri)
        checks = self._checks(tri)
        steps, partial_text, outputs = self._solutions(box, tri)
        msgs, inbox, out = box.msgs, box.inbox, tri.out
        return StepPlan(
            operation=self.id, instruction=instruction, checks=checks,
            files=[WorkspaceFile(path=tri.vip_path, content=tri.vip_text)] + [
                WorkspaceFile(path=m["path"], generate=GeneratedContent(kind="eml", params=m["params"]))
                for m in msgs],
            steps=steps,
            partial=[write(out, partial_text)],
            outputs=outputs,
            summary=f"triage {len(msgs)} mails in {inbox}/ into {out}",
            fingerprint=digest(tri.records),
        )

    # ------------------------------------------------------------------------------------------ data
    def _inbox(self, ctx: OpContext) -> _Inbox:
        """The mails: requests, urgent ones, FYIs (at least one from a VIP that is not urgent), newsletters and
        spam, in time order, each with its true priority and category."""
        rng = ctx.rng
        voc = flavor.vocab(ctx.persona.domain, ctx.persona.occupation)
        me = ctx.persona.name
        my_addr = persona_email(ctx.persona)
        base = dt.datetime(2026, rng.randint(1, 12), rng.randint(1, 20), 7, 0)
        people = flavor.people(rng, 8)
        orgs = flavor.orgs(rng, 4)
        contacts = [(p, email_addr(p, orgs[i % 3])) for i, p in enumerate(people) if p != me]
        vips = contacts[:2]
        others = contacts[2:]
        kinds = (["request"] * rng.randint(2, 3) + ["urgent"] * rng.randint(1, 2) + ["fyi"] * rng.randint(2, 3)
                 + ["newsletter"] * rng.randint(1, 2) + ["spam"] * rng.randint(1, 3))
        rng.shuffle(kinds)
        # at least one mail from a VIP that is not itself urgent
        inbox = rng.choice(["inbox", "mail/inbox", "mailbox"])
        naming = rng.choice(["num", "date"])
        msgs = []
        used_subjects: set[str] = set()
        vip_used = False
        when = base
        for i, kind in enumerate(kinds):
            when = when + dt.timedelta(hours=rng.randint(1, 7), minutes=rng.randint(0, 59))
            day = human_date(rng, (when + dt.timedelta(days=rng.randint(1, 4))).date(), with_year=False)
            fill = dict(project=rng.choice(voc["projects"]), item=rng.choice(voc["items"]),
                        cat=rng.choice(voc["categories"]).lower(), org=rng.choice(orgs), Org=rng.choice(orgs),
                        day=day, colleague=rng.choice(people), month=when.strftime("%B"),
                        cur=rng.choice(["€", "$", "£"]))
            headers: dict[str, str] = {}
            if kind in ("request", "urgent", "fyi"):
                if not vip_used and kind != "urgent":
                    sender = rng.choice(vips)
                    vip_used = True
                else:
                    sender = rng.choice(vips if rng.random() < 0.25 else others)
                pool = {"request": REQUESTS, "urgent": URGENT, "fyi": FYIS}[kind]
                subj_t, body_t = rng.choice(pool)
                category = "fyi" if kind == "fyi" else "request"
                vip = sender in vips
                priority = "high" if (kind == "urgent" or vip) else "normal"
                frm = f"{sender[0]} <{sender[1]}>"
                body = (f"Hi {me.split()[0]},\n\n{body_t.format(**fill)}\n\n"
                        f"{rng.choice(['Thanks', 'Best', 'Cheers', 'Regards'])},\n{sender[0].split()[0]}\n")
            elif kind == "newsletter":
                subj_t, body_t = rng.choice(NEWSLETTERS)
                o = fill["Org"]
                dom = flavor.slug(o).replace("_", "") + ".example.com"
                frm = f"{o} <news@{dom}>"
                headers = {"List-Unsubscribe": f"<mailto:unsubscribe@{dom}>", "Precedence": "bulk"}
                body = f"{body_t.format(**fill)}\n\nYou receive this because you subscribed at {dom}.\n"
                category, priority = "newsletter", "low"
            else:
                subj_t, body_t = rng.choice(SPAM)
                dom = rng.choice(SPAM_DOMAINS)
                frm = f"{rng.choice(['Account Team', 'Rewards', 'Billing Dept', 'Support'])} <no-reply@{dom}>"
                headers = {"X-Spam-Flag": "YES", "X-Spam-Score": f"{rng.uniform(6, 15):.1f}"}
                body = body_t.format(**fill) + f"\n\nhttp://{dom}/claim?id={rng.randint(10000, 99999)}\n"
                category, priority = "spam", "low"
            subject = subj_t.format(**fill)
            if subject in used_subjects:
                subject = f"{subject} ({i + 1})"
            used_subjects.add(subject)
            name = f"{i + 1:02d}.eml" if naming == "num" else f"{when.strftime('%Y-%m-%d_%H%M')}.eml"
            path = ctx.path(f"{inbox}/{name}")
            params = {"from": frm, "to": my_addr, "subject": subject, "date": when.isoformat(), "body": body}
            if headers:
                params["headers"] = headers
            addr = frm.split("<")[1].rstrip(">")
            msgs.append({"path": path, "file": name, "from": addr, "subject": subject, "priority": priority,
                         "category": category, "needs_reply": category == "request", "params": params})
        return _Inbox(voc, base, vips, inbox, msgs)

    def _triage(self, ctx: OpContext, box: _Inbox) -> _Triage:
        """The words of the triage (field names, priority and category words), where it goes, what is moved, and
        the records it must hold."""
        rng = ctx.rng
        msgs, vips, base, inbox = box.msgs, box.vips, box.base, box.inbox
        names = rng.choice(FIELD_NAMES)
        pw = dict(zip(("high", "normal", "low"), rng.choice(PRIO_WORDS), strict=True))
        cw = dict(zip(("spam", "newsletter", "request", "fyi"), rng.choice(CAT_WORDS), strict=True))
        for m in msgs:
            m["priority"], m["category"] = pw[m["priority"]], cw[m["category"]]
        vip_path = wpath(ctx, ["vip", "vip_senders", "important_people", "always_first", "key_contacts"], "txt",
                         ["contacts", "notes", "mail"], p_folder=0.6)
        vip_text = "# people whose mail always comes first\n" + "".join(f"{n} <{a}>\n" for n, a in vips)
        as_json = rng.random() < 0.6
        out = wpath(ctx, ["triage", "inbox_triage", "mail_triage", "sorted_inbox", f"triage_{base.strftime('%b').lower()}",
                          "inbox_review"], "json" if as_json else "csv", ["mail", "admin", "reports"], p_folder=0.4,
                    p_world_folder=0.2)
        move = rng.random() < 0.5
        moves: dict[str, str] = {}
        if move:
            for m in msgs:
                if m["category"] in (cw["spam"], cw["newsletter"]):
                    folder = "spam" if m["category"] == cw["spam"] else "newsletters"
                    moves[m["path"]] = ctx.path(f"{inbox}/{folder}/{m['file']}")
        canon = ["file", "from", "subject", "priority", "category", "needs_reply"]
        ren = dict(zip(["file", "from", "priority", "category", "needs_reply"], names, strict=True), subject="subject")
        fields = [ren[f] for f in canon]
        fk, ff, fp, fc, fn = names
        records = [{ren[k]: m[k] for k in canon} for m in msgs]
        slots = dict(inbox=inbox, out=out, n=len(msgs), vip=vip_path, fk=fk, ff=ff, fp=fp, fc=fc, fn=fn,
                     cols=",".join(fields), keys=", ".join(f'"{f}"' for f in fields), hi=pw["high"], no=pw["normal"],
                     lo=pw["low"], spam=cw["spam"], news=cw["newsletter"], req=cw["request"], fyi=cw["fyi"])
        return _Triage(vip_path, vip_text, out, as_json, move, moves, fields, names, pw, cw, records, slots)

    # ------------------------------------------------------------------------------------------ phrasing
    def _request(self, ctx: OpContext, box: _Inbox, tri: _Triage) -> str:
        """The request: the output's format, the triage rules, what to move, a reason for asking."""
        rng = ctx.rng
        voc, base, vips, inbox, msgs = box.voc, box.base, box.vips, box.inbox, box.msgs
        as_json, slots, move = tri.as_json, tri.slots, tri.move
        if as_json:
            fmt = phrase(rng, ["a JSON list with one object per message: {keys} ({fk} = the file name, {ff} = the "
                               "sender's address, {fn} a JSON boolean)",
                               "a JSON array[ of objects|], [one entry|an object] for [each|every] [mail|message], "
                               "[keyed|with keys] {keys} - {fk} [being|holding] the file name, {ff} the [From "
                               "address|sender's email] and {fn} [true or false (JSON booleans)|a real boolean]",
                               "JSON ([a list|an array] of objects with {keys}; {ff} [is|means] the sender's "
                               "address, {fk} just the file name, {fn} [a boolean|true/false, not a string])"],
                         **slots)
        else:
            fmt = phrase(rng, ["a CSV with the columns {cols} ({fk} = the file name, {ff} = the sender's address, {fn} "
                               "true/false)",
                               "[a CSV|CSV], [header|columns] {cols}, [one row|a line] per [mail|message] - {fk} "
                               "[holds|is] [the file name|the name of the .eml], {ff} [the address it came from|the "
                               "sender's email], {fn} [true or false|`true`/`false`]",
                               "CSV [laid out as|with the header] {cols} ([where |]{ff} is [just the email "
                               "address|the sender's address], {fk} the [bare |]file name and {fn} true/false)"],
                         **slots)
        rules = [
            phrase(rng, ["`{fp}` is {lo} for {news} and {spam} (always), {hi} for any other message that is urgent "
                         "(it says urgent or ASAP) or comes from the people in `{vip}`, {no} otherwise",
                         "`{fp}`: {lo} for every {news} or {spam}; otherwise {hi} if it's urgent (urgent/ASAP in it) "
                         "or from someone in `{vip}`, else {no}",
                         "[for|as for] `{fp}`: [anything from|mail from] [a person listed in|the people in] `{vip}` "
                         "or [marked|saying] urgent/ASAP [is|gets] {hi} - [except|but never] {spam} and {news}, "
                         "which are [always |]{lo} - and [the rest|everything else] {no}",
                         "{spam} and {news} [always get|are always] {lo} `{fp}`; [of the rest|for the others], "
                         "{hi} [when|if] [it's urgent (the words urgent or ASAP)|it mentions urgent or ASAP] or "
                         "[the sender is|it comes from someone] in `{vip}`, [and |]{no} [otherwise|if neither]"],
                   **slots),
            phrase(rng, ["`{fc}` is {spam} (the spam filter marked it with an X-Spam-Flag: YES header), {news} (bulk "
                         "mail with a List-Unsubscribe header), {req} (a person asking me something) or {fyi} "
                         "(information only)",
                         "`{fc}` is one of {spam} (X-Spam-Flag: YES header), {news} (has a List-Unsubscribe "
                         "header), {req} (someone asks me for something) and {fyi} (just information)",
                         "[tell the kinds apart|categorise] [by the headers and the text|like this] in `{fc}`: an "
                         "X-Spam-Flag: YES header [means|makes it] {spam}, a List-Unsubscribe header {news}; "
                         "[of the personal mails|the rest], [ones that ask me to do something|real requests to "
                         "me] are {req} and [the others|pure updates] {fyi}",
                         "`{fc}` [takes|gets] four values: {req} ([someone wants something from me|a person "
                         "asks me for something]), {fyi} ([only informs me|just news for me]), {news} ([bulk "
                         "mail, List-Unsubscribe header|it carries a List-Unsubscribe header]) and {spam} "
                         "([flagged X-Spam-Flag: YES|the X-Spam-Flag: YES ones])"], **slots),
            phrase(rng, ["`{fn}` is true only for {req} messages", "only a {req} needs a reply (`{fn}` true)",
                         "`{fn}` [true for|set on] the {req} [mails|ones] and false [everywhere else|for all "
                         "others]",
                         "[I only answer|the only mails I answer are] {req} [ones|messages], so `{fn}` is true "
                         "[there|for those] [and nowhere else|alone]"], **slots),
        ]
        if move:
            rules.append(phrase(rng, [
                "also move the {spam} into `{inbox}/spam/` and the {news} mails into `{inbox}/newsletters/` (keep "
                "the file names; `{fk}` still gives the file name)",
                "[afterwards|then] [file|move] {spam} to `{inbox}/spam/` and {news} to `{inbox}/newsletters/`, "
                "same file names (`{fk}` is still just the file name)",
                "[get|clear] the {spam} and {news} out of the way: [move them|they go] into `{inbox}/spam/` and "
                "`{inbox}/newsletters/` [respectively|(in that order)], [names unchanged|keeping their names] - "
                "`{fk}` [stays|is still] the bare file name",
                "`{inbox}/spam/` [for|gets] the {spam}, `{inbox}/newsletters/` the {news}; [move|shift] them "
                "[there|over] [without renaming|as they are] ([list|record] them in `{fk}` by file name "
                "[all the same|as before])"], **slots))
        head = one_of(rng, [
            "My inbox is out of control. Go through every message in `{inbox}/` and write `{out}` as {fmt}.",
            "Please triage the {n} emails in `{inbox}/` into `{out}` - {fmt}.",
            "Sort out `{inbox}/` for me. I want `{out}` as {fmt}.",
            "[I've got|There are] {n} [unread|unsorted] mails in `{inbox}/`. [Triage them|Go through them] into "
            "`{out}`: {fmt}.",
            "[Could you|Can you] [triage|sort] `{inbox}/`? [Output|Result]: `{out}`, {fmt}.",
            "[Label|Classify] every [mail|message] in `{inbox}/` ({n} of them) and [record|put] the result in "
            "`{out}` as {fmt}.",
            "[Help me|I need to] [get to inbox zero|dig out of my inbox]: `{inbox}/` has {n} messages; [write|make] "
            "`{out}`, {fmt}.",
        ], fmt=fmt, **slots)
        story = ""
        if rng.random() < 0.8:
            story = one_of(rng, [
                "[I was away|I've been offline|I was at a conference] [since|from] {day} and {n} mails [piled up|came "
                "in].",
                "[Some|A few] of these are from {vip}[, who always comes first|; those matter most], [the rest|others] "
                "[can wait|are noise].",
                "[The spam filter|Our mail filter] [catches|flags] [some|most] junk, but I still [lose|miss] [the "
                "real requests|what matters] in `{inbox}/`.",
                "[I export|I saved] [the mailbox|my mail] from {tool} [into|as files in] `{inbox}/` [because|since] "
                "[its own filters|the built-in rules] [never|don't] [get this right|work for me].",
                "[Last month|Once] I [missed|overlooked] a [request|question] from {vip} [under|between] "
                "[newsletters|promotions], and [that was|it was] [embarrassing|awkward].",
                "[Mornings|Mondays] [go|are lost] to [reading|sorting] mail; [as {role}|in my job] I'd rather [spend "
                "them|use them] on [real work|the {topic}].",
            ], day=human_date(rng, base.date(), with_year=False), n=len(msgs), vip=vips[0][0], inbox=inbox,
                tool=rng.choice(list(ctx.persona.tools)), role=f"{article(ctx.persona.occupation)} {ctx.persona.occupation}",
                topic=rng.choice(voc["projects"]))
        instruction = join(story, head, reqs(rng, rules, lead=expand("[Rules:|How to judge:|Criteria:|]", rng)),
                           aside(rng, ctx.persona))
        return instruction

    # ------------------------------------------------------------------------------------------ checks
    @staticmethod
    def _checks(tri: _Triage) -> list[Check]:
        """Every message listed, then categories, priorities, reply flag and sender right; the junk moved."""
        out, records, moves = tri.out, tri.records, tri.moves
        fk, ff, fp, fc, fn = tri.names
        checks = [
            Check("every_message_listed", "docs_records", {"path": out, "key": fk, "records": records,
                                                           "fields": []}),
            Check("categories_correct", "docs_records", {"path": out, "key": fk, "records": records,
                                                         "fields": [fc]}),
            Check("priorities_correct", "docs_records", {"path": out, "key": fk, "records": records,
                                                         "fields": [fp]}),
            Check("needs_reply_and_sender", "docs_records", {"path": out, "key": fk, "records": records,
                                                          "fields": [fn, ff]}),
        ]
        if moves:
            checks.append(Check("junk_moved", "docs_moved", {"moves": moves}))
        return checks

    # ------------------------------------------------------------------------------------------ solutions
    @staticmethod
    def _solutions(box: _Inbox, tri: _Triage) -> tuple[list, str, list[Artifact]]:
        """The reference (read every mail, move the junk, write the triage), a partial triage (the VIP rule
        ignored, FYIs taken for requests, one message left out) and the outputs."""
        inbox, msgs = box.inbox, box.msgs
        vip_path, out, moves, records, fields, as_json, pw, cw = (tri.vip_path, tri.out, tri.moves, tri.records,
                                                                  tri.fields, tri.as_json, tri.pw, tri.cw)
        _, _, fp, fc, fn = tri.names
        if as_json:
            out_text = json.dumps(records, indent=2, ensure_ascii=False) + "\n"
        else:
            out_text = to_csv(fields, [[str(r[f]).lower() if f == fn else r[f] for f in fields] for r in records])
        steps = [ls(inbox), read(vip_path), *(read(m["path"]) for m in msgs)]
        if moves:
            dirs = sorted({v.rsplit("/", 1)[0] for v in moves.values()})
            cmd = "mkdir -p " + " ".join(dirs) + " && " + " && ".join(f"mv {k} {v}" for k, v in moves.items())
            steps.append(exec_(cmd))
        steps.append(write(out, out_text))
        # partial: VIP rule ignored (VIP mails get normal), FYIs called requests, nothing moved
        wrong = []
        for r in records:
            w = dict(r)
            if w[fc] == cw["fyi"]:
                w[fc], w[fn] = cw["request"], True
            if w[fp] == pw["high"] and "urgent" not in w["subject"].lower() and "asap" not in w["subject"].lower():
                w[fp] = pw["normal"]
            wrong.append(w)
        wrong = wrong[:-1]
        if as_json:
            partial_text = json.dumps(wrong, indent=2) + "\n"
        else:
            partial_text = to_csv(fields, [[str(r[f]).lower() if f == fn else r[f] for f in fields] for r in wrong])
        table = {"header": fields, "rows": [[str(r[f]).lower() if f == fn else str(r[f]) for f in fields]
                                            for r in records]}
        outputs = [Artifact(out, RECORDS, records, f"the inbox triage ({out})"),
                   Artifact(out, TABLE, table, f"the inbox triage ({out})", roles={"name": "subject", "group": fc})]
        if not as_json:
            outputs.reverse()
        return steps, partial_text, outputs


GENERATORS = [TriageInbox()]
