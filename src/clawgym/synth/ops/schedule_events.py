"""schedule_events: find the earliest slot that fits everybody (my .ics calendar, the attendees' busy times in
a CSV, working hours, a lunch break, 30-minute steps) and write the new event(s) to an .ics file. Chained: the
previous step's timed events become my calendar, its phases get kick-off events, or a dated table gets
reminders."""

from __future__ import annotations

import datetime as dt
import re

from clawgym.core.records import GeneratedContent, WorkspaceFile
from clawgym.synth import flavor
from clawgym.synth.grammar import expand, one_of
from clawgym.synth.ops import _data_vocab as V
from clawgym.synth.ops import operation
from clawgym.synth.ops._docs_common import (
    date_col,
    dated,
    digest,
    email_addr,
    ics_stamp,
    ics_text,
    persona_email,
    role_col,
    table_of,
    text_col,
)
from clawgym.synth.ops.base import (
    EVENTS,
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

Span = tuple[dt.datetime, dt.datetime]


def earliest(day: dt.date, minutes: int, busy: list[Span], h0: int = 9, h1: int = 17, lunch: tuple | None = (12, 13),
             step: int = 30, days: int = 60) -> dt.datetime:
    """The first start (every `step` minutes, weekdays, within [h0, h1], not over lunch) where the meeting
    overlaps no busy span."""
    dur = dt.timedelta(minutes=minutes)
    for k in range(days):
        d = day + dt.timedelta(days=k)
        if d.weekday() >= 5:
            continue
        t = dt.datetime.combine(d, dt.time(h0))
        while t + dur <= dt.datetime.combine(d, dt.time(h1)):
            end = t + dur
            ok = not any(t < b and a < end for a, b in busy)
            if ok and lunch:
                la, lb = dt.datetime.combine(d, dt.time(lunch[0])), dt.datetime.combine(d, dt.time(lunch[1]))
                ok = not (t < lb and la < end)
            if ok:
                return t
            t += dt.timedelta(minutes=step)
    raise ValueError("no free slot")


def _iso(t: dt.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S")


def _events_out(evs: list[dict]) -> list[dict]:
    return [{"summary": e["summary"], "start": _iso(e["start"]) if isinstance(e["start"], dt.datetime)
             else e["start"].isoformat(), "end": _iso(e["end"]) if isinstance(e["end"], dt.datetime)
             else e["end"].isoformat(), "location": e.get("location", "")} for e in evs]


def _busy_args(spans: list[Span]) -> list[list[str]]:
    return [[_iso(a), _iso(b)] for a, b in spans]


def fmt_note(rng) -> str:
    """The .ics format rule (local times, the four properties), phrased one of many ways."""
    ex = f"DTSTART:2026{rng.randint(1, 12):02d}{rng.randint(1, 28):02d}T{rng.choice([9, 10, 11, 14, 15, 16]):02d}" \
         f"{rng.choice(['00', '30'])}00"
    props = ["SUMMARY", "DTSTART", "DTEND", "LOCATION"]
    rng.shuffle(props)
    four = ", ".join(props[:3]) + " and " + props[3]
    return one_of(rng, [
        "[Write|Give] the times as local times without a time zone ([for example|e.g.|like] {ex}) and give "
        "[every|each] event {four}.",
        "[Every|Each] event [needs|gets|should have] {four}[ lines|], with "
        "[floating|local] times and no time zone ([e.g.|like|as in] {ex}).",
        "[Use|Keep] local times[, no TZID or Z suffix|, no time zone] ({ex} [style|is the format]), and [include|put] "
        "{four} [on|in] [every|each] event.",
        "Format: [one|a] VEVENT per meeting with {four}; times local, [no time "
        "zone|without a zone] ({ex}).",
        "[In the .ics,|For the calendar file,] [each|every] VEVENT [carries|has] {four}[, nothing fancy|]; [write "
        "the times as floating local time|no TZID, no trailing Z] - {ex} is the shape.",
        "[My calendar app chokes on time zones|Time zones confuse my calendar app], so [local times only|plain "
        "local times] ({ex}), and {four} on every event.",
        "{four} [are required|must be there] on each event; times [are local|stay local] with no zone [suffix|"
        "marker] ({ex}).",
    ], ex=ex, four=four)


# Meeting kinds per domain: "{p}" is the project word.
TITLES = {
    "health": ["{P} huddle", "{P} review", "Clinical governance: {p}", "{P} handover", "{P} audit meeting"],
    "education": ["{P} planning", "{P} moderation", "Department meeting: {p}", "{P} prep session"],
    "food": ["{P} tasting", "{P} menu meeting", "Supplier meeting: {p}", "{P} briefing"],
    "software": ["{P} design review", "{P} sync", "{P} retro", "Architecture chat: {p}", "{P} planning"],
    "finance": ["{P} review", "{P} sign-off", "{P} working session", "Controls walkthrough: {p}"],
    "farm": ["{P} planning", "{P} walk-round", "Co-op meeting: {p}", "{P} check-in"],
    "creative": ["{P} crit", "{P} brief", "{P} planning", "Mood board session: {p}"],
    "legal": ["{P} conference", "{P} strategy meeting", "{P} case review", "Client call: {p}"],
    "general": ["{P} planning", "{P} check-in", "Review: {p}", "{P} workshop", "{P} kick-off"],
}
MY_TITLES = ["Team stand-up", "1:1 with manager", "Supplier call", "Budget review", "Training", "Client visit",
             "Focus time", "Interviews", "Dentist", "School run", "Admin block", "Lunch with a friend", "Webinar",
             "Site visit", "Payroll", "Inspection", "Gym", "Commute"]
ROOMS = ["Room 2", "Meeting room B", "Online (video call)", "{org} office", "Room 4.12", "The boardroom",
         "Staff room", "Cafe downstairs", "Zoom", "Teams call", "Phone", "Studio", "Site office", "Library room 3",
         "Conference room A"]
CAL_NAMES = ["calendar", "my_calendar", "work", "diary", "schedule", "appointments", "busy", "outlook_export"]
AVAIL_NAMES = ["availability", "busy_times", "team_busy", "others_busy", "freebusy", "attendee_busy",
               "blocked_times", "their_calendars"]
OUT_NAMES = ["new_meeting", "invite", "to_book", "booking", "meeting_request", "new_events", "proposed", "slot"]
CAL_FOLDERS = ["cal", "calendar", "meetings", "diary", "scheduling", ""]


@operation
class ScheduleEvents(OperationGenerator):
    id = "schedule_events"
    consumes: tuple[str, ...] = (EVENTS, TABLE)
    produces = (EVENTS,)
    standalone = True

    # ------------------------------------------------------------------ standalone
    def _standalone(self, ctx: OpContext, source: Artifact | None = None) -> StepPlan:  # noqa: C901, PLR0915 (one linear recipe: its rng draws, in order, fix the tasks a seed gives)
        rng = ctx.rng
        voc = flavor.vocab(ctx.persona.domain, ctx.persona.occupation)
        me, my_addr = ctx.persona.name, persona_email(ctx.persona)
        org = flavor.org(rng)
        people = [p for p in flavor.people(rng, 4) if p != me][:3]
        addrs = {p: email_addr(p, org) for p in people}
        from_source = _contacts(source, me) if source is not None else []
        if from_source:  # the attendees come from the previous step's table (e.g. the address book)
            people = [n for n, _ in from_source] + [p for p in people if p not in dict(from_source)]
            people = people[:3]
            addrs.update(dict(from_source))
        monday = dt.date(2026, rng.randint(1, 11), 1)
        while monday.weekday() != 0:
            monday += dt.timedelta(days=1)
        monday += dt.timedelta(weeks=rng.randint(0, 2))
        first = monday + dt.timedelta(days=rng.randint(0, 2))
        lunch = rng.choice([(12, 13), None])
        h0, h1 = rng.choice([(9, 17), (8, 16), (9, 18), (8, 17)])
        # my calendar: busy mornings and afternoons in the first days
        mine: list[dict] = []
        titles = rng.sample(MY_TITLES, 7) + [f"{rng.choice(voc['projects']).capitalize()} sync"]
        for k in range(4):
            d = first + dt.timedelta(days=k)
            if d.weekday() >= 5:
                continue
            t = dt.datetime.combine(d, dt.time(h0))
            while t.hour < h1:
                if rng.random() < (0.75 if k < 2 else 0.35):
                    dur = rng.choice([30, 60, 60, 90, 120])
                    end = min(t + dt.timedelta(minutes=dur), dt.datetime.combine(d, dt.time(h1)))
                    mine.append({"summary": rng.choice(titles), "start": t, "end": end,
                                 "location": rng.choice(["Room 1", "Online", "Office", "Room 3", "Out", "Home"])})
                    t = end
                t += dt.timedelta(minutes=rng.choice([30, 60]))
        my_busy = [(e["start"], e["end"]) for e in mine]
        # the attendees' busy times
        avail_rows = []
        others: dict[str, list[Span]] = {p: [] for p in people}
        for p in people:
            for _ in range(rng.randint(2, 5)):
                d = first + dt.timedelta(days=rng.randint(0, 3))
                if d.weekday() >= 5:
                    continue
                if rng.random() < 0.15:
                    a, b = dt.time(h0), dt.time(h1)
                else:
                    h = rng.randint(h0, h1 - 2)
                    a = dt.time(h, rng.choice([0, 30]))
                    b = (dt.datetime.combine(d, a) + dt.timedelta(minutes=rng.choice([60, 90, 120, 180]))).time()
                    if b > dt.time(h1) or b < a:
                        b = dt.time(h1)
                others[p].append((dt.datetime.combine(d, a), dt.datetime.combine(d, b)))
                avail_rows.append([p, d.isoformat(), a.strftime("%H:%M"), b.strftime("%H:%M")])
        avail_rows.sort(key=lambda r: (r[1], r[2], r[0]))
        project = rng.choice(voc["projects"])
        n_att = rng.randint(1, min(2, len(people)))
        att = people[:n_att]
        dur = rng.choice([30, 45, 60, 90])
        summary = rng.choice(TITLES.get(V.domain(ctx.persona), TITLES["general"])).format(
            p=project, P=project[:1].upper() + project[1:])
        location = rng.choice(ROOMS).format(org=org)
        busy1 = my_busy + [s for p in att for s in others[p]]
        # a constraint only the request states (one attendee's hours), which the checks enforce as busy time
        limit_txt = ""
        if rng.random() < 0.4:
            who_l = rng.choice(att)
            days = [first + dt.timedelta(days=k) for k in range(21)]
            if rng.random() < 0.5:
                hh = rng.choice([10, 11, 13])
                extra = [(dt.datetime.combine(d, dt.time(h0)), dt.datetime.combine(d, dt.time(hh))) for d in days]
                limit_txt = expand("{w} [can't do anything|isn't available|is never free] before {hh}:00[ ({why})|]",
                                   rng, w=who_l, hh=hh, why=rng.choice(["school run", "they work part-time",
                                                                       "clinic in the mornings", "long commute",
                                                                       "ward rounds", "they start late"]))
            else:
                hh = rng.choice([14, 15])
                extra = [(dt.datetime.combine(d, dt.time(hh)), dt.datetime.combine(d, dt.time(h1))) for d in days]
                limit_txt = expand("{w} [leaves|has to leave|is gone] at {hh}:00 [every day|that week], so it "
                                   "[must|has to] end by then", rng, w=who_l, hh=hh)
            t_try = earliest(first, dur, busy1 + extra, h0, h1, lunch)
            if t_try.date() <= days[-1]:
                busy1 = busy1 + extra
            else:
                limit_txt = ""
        t1 = earliest(first, dur, busy1, h0, h1, lunch)
        ev1 = {"summary": summary, "start": t1, "end": t1 + dt.timedelta(minutes=dur), "location": location,
               "attendees": [addrs[p] for p in att]}
        events = [ev1]
        busy_checks = [(summary, busy1)]
        second = None
        t2 = None
        if len(people) > n_att and rng.random() < 0.5:
            p2 = people[n_att]
            d2 = first + dt.timedelta(days=rng.randint(1, 3))
            d2 = d2 if d2.weekday() < 5 else d2 + dt.timedelta(days=7 - d2.weekday())
            dur2 = rng.choice([30, 60])
            summary2 = rng.choice([f"1:1 with {p2}", f"Catch-up with {p2}", f"{p2} - handover", f"Coffee with {p2}",
                                   f"{p2}: onboarding", f"Check-in ({p2})", f"Feedback chat with {p2}"])
            busy2 = my_busy + others[p2] + [(ev1["start"], ev1["end"])]
            t2 = earliest(d2, dur2, busy2, h0, h1, lunch)
        if t2 is not None and t2.date() == d2:
            second = {"summary": summary2, "start": t2, "end": t2 + dt.timedelta(minutes=dur2),
                      "location": location, "attendees": [addrs[p2]], "day": d2, "dur": dur2, "who": p2}
            events.append(second)
            busy_checks.append((summary2, my_busy + others[p2]))
        fold = V.folder(ctx.persona, rng, CAL_FOLDERS)
        cal_path = ctx.path(V.join(fold, rng.choice(CAL_NAMES) + ".ics"))
        avail_path = ctx.path(V.join(fold, rng.choice(AVAIL_NAMES) + ".csv"))
        out = ctx.path(V.join(fold if rng.random() < 0.5 else rng.choice(CAL_FOLDERS),
                              rng.choice(OUT_NAMES) + rng.choice(["", "", "_" + flavor.slug(project)[:20]]) + ".ics"))
        who = " and ".join(f"{p} ({addrs[p]})" for p in att)
        if from_source:
            who += f" (from {source.description})"
        rules = [
            expand("[working hours are|only book within|the day runs] {h0}:00-{h1}:00[ on weekdays|, Monday to Friday|, "
                   "weekdays only]", rng, h0=f"{h0:02d}", h1=f"{h1:02d}")
            if rng.random() < 0.5 else
            expand("[nothing|no meeting] before {h0}:00 or [running past|after] {h1}:00, and [never|not] at the "
                   "weekend", rng, h0=f"{h0:02d}", h1=f"{h1:02d}"),
            expand("[start [times|only] on the hour or half hour|starts at {hh} only|start times in half-hour "
                   "steps ({hh})|[begin|start] at a full or half hour|[no odd start times like|not] 10:15 - {hh} "
                   "only]", rng, hh=":00 or :30"),
            expand("[nobody may be double-booked|no one can be in two places at once|don't clash with anybody's "
                   "busy time|[every|each] attendee has to be free [for the whole slot|the whole time], me "
                   "included|it can't overlap [anything|any busy block] in either file]", rng),
        ]
        if lunch:
            rules.append(expand("[[never over|keep clear of|not during] lunch ({a}:00-{b}:00)|{a}:00-{b}:00 is "
                                "lunch[ - leave it free| and stays empty]|[don't book|nothing goes] [into|in] the "
                                "{a}:00-{b}:00 lunch break]", rng, a=lunch[0], b=lunch[1]))
        rules.append(expand("[attendees as ATTENDEE:mailto: lines|one ATTENDEE:mailto: line per attendee|list the "
                            "attendees as ATTENDEE:mailto: lines|[invite|add] [them|everyone] by email "
                            "(ATTENDEE:mailto:<address>)|[each|every] guest [goes in|gets] an ATTENDEE:mailto: "
                            "[entry|line]]", rng))
        if limit_txt:
            rules.append(limit_txt)
        ask = one_of(rng, [
            "a {dur}-minute \"{summary}\" with {who}, at the earliest time on or after {day} when I am free (see "
            "`{cal}`) and so are they (their busy times are in `{avail}`), location \"{loc}\"",
            "\"{summary}\" ({dur} minutes, location \"{loc}\") with {who}: the [first|earliest] slot from {day} "
            "[on |onwards |]that is free [in my calendar `{cal}` and in their busy list `{avail}`|for me (`{cal}`) "
            "and for them (`{avail}` has their busy times)|both in `{cal}` (mine) and `{avail}` (theirs)]",
            "{dur} minutes of \"{summary}\" with {who} [in|at] \"{loc}\" - [as early as possible|the earliest "
            "possible slot] on or after {day}, going by my calendar `{cal}` and their busy times in `{avail}`",
        ], dur=dur, summary=summary, who=who, day=dated(rng, first), cal=cal_path, avail=avail_path, loc=location)
        ask = ask[:1].lower() + ask[1:]
        if second:
            ask += one_of(rng, [
                "; then a {d}-minute \"{s}\" with {w} ({a}) at the earliest free time on {day} (same location, and "
                "not clashing with the first one)",
                "; [after that|and then|also], {d} minutes of \"{s}\" with {w} ({a}) on {day}, [as early as|as soon "
                "as] [we're|we are] both free [that day|then], in the same place and [never|not] overlapping the "
                "first [meeting|booking]",
                "; plus \"{s}\" ({d} min) with {w} <{a}> on {day}: [the first|the earliest] open slot [that day|there], "
                "[same location|at the same location], [without|with no] overlap with the first one",
                ". The second one: \"{s}\", {d} minutes, with {w} ({a}), [the earliest|first] time on {day} that "
                "[suits|fits] both calendars - [keep|use] the same location and [don't|do not] let it clash with "
                "the first",
            ], d=second['dur'], s=second['summary'], w=second['who'], a=addrs[second['who']],
                day=dated(rng, second['day']))
        it = "them" if second else "it"
        instruction = one_of(rng, [
            "[Please|Could you] book {ask}. Put [the new event{s}|{it}] in `{out}` (an {ics} calendar file).",
            "I [@need] to schedule {ask}. [Save|Write|Store] {it} as `{out}`.",
            "[Can you|Would you] find a time for {ask}? [Write|Save] {it} to the calendar file `{out}`.",
            "[Book|Schedule] {ask}, [into|in] `{out}`.",
        ], ask=ask, s="s" if second else "", it=it, out=out, ics=".ics")
        jl = V.job_line(rng, ctx.persona, 0.45)
        instruction = V.glue(rng, f"{jl} {instruction}" if jl else instruction, V.reqs(rng, rules), fmt_note(rng))
        exp = [{"summary": e["summary"], "dtstart": ics_stamp(e["start"]), "dtend": ics_stamp(e["end"])}
               for e in events]
        checks = [
            Check("earliest_slot_chosen", "ics_events", {"path": out, "events": exp}),
            Check("no_double_booking", "min_of", parts=[
                Check("", "docs_ics_free", {"path": out, "summary": s, "busy": _busy_args(b),
                                            "day_start": f"{h0:02d}:00", "day_end": f"{h1:02d}:00"})
                for s, b in busy_checks]),
            Check("attendees_and_location", "min_of", parts=[
                Check("", "docs_ics_has", {"path": out, "needles": [a for e in events for a in e["attendees"]]}),
                Check("", "ics_events", {"path": out, "events": [{"summary": e["summary"], "location": location}
                                                                 for e in events]})]),
        ]
        text = ics_text([{k: v for k, v in e.items() if k in ("summary", "start", "end", "location", "attendees")}
                         for e in events])
        # partial: the first free slot in MY calendar only (ignores the attendees' busy times), no attendees
        t_bad = earliest(first, dur, my_busy, h0, h1, lunch)
        bad = [{"summary": summary, "start": t_bad, "end": t_bad + dt.timedelta(minutes=dur), "location": location,
                "attendees": ev1["attendees"]}]
        if t_bad == t1:  # the attendees were free anyway: book an hour late instead
            late = earliest(first, dur, busy1 + [(t1, t1 + dt.timedelta(minutes=60))], h0, h1, lunch)
            bad[0].update(start=late, end=late + dt.timedelta(minutes=dur))
        files = [
            WorkspaceFile(path=cal_path, generate=GeneratedContent(kind="ics", params={
                "calendar_name": f"{me} - work", "events": [
                    {"summary": e["summary"], "start": _iso(e["start"]), "end": _iso(e["end"]),
                     "location": e["location"]} for e in mine]})),
            WorkspaceFile(path=avail_path, content=to_csv(["person", "date", "busy_from", "busy_to"], avail_rows)),
        ]
        instruction = V.with_aside(ctx.rng, ctx.persona, instruction)
        return StepPlan(
            operation=self.id, instruction=instruction, checks=checks, files=files,
            steps=[read(cal_path), read(avail_path), write(out, text)],
            partial=[write(out, ics_text(bad))],
            outputs=[Artifact(out, EVENTS, _events_out(events), f"the new meeting{'s' if second else ''} ({out})")],
            summary=f"book {summary} at {t1:%Y-%m-%d %H:%M}",
            fingerprint=digest(_events_out(events), my_addr),
        )

    # ------------------------------------------------------------------ chained
    def _after_busy(self, ctx: OpContext, source: Artifact, timed: list[Span]) -> StepPlan:
        """The previous step's timed events are my calendar: book the earliest slot after them."""
        rng = ctx.rng
        first = min(a for a, _ in timed).date()
        dur = rng.choice([30, 60])
        summary = rng.choice(["Debrief", "Follow-up meeting", "Wrap-up call", "Lessons learned", "Next steps chat",
                              "Retrospective", "Catch-up", "Sign-off meeting", "Review of outcomes"])
        location = rng.choice(ROOMS).format(org=flavor.org(rng))
        t = earliest(first, dur, timed, 9, 17, (12, 13))
        ev = {"summary": summary, "start": t, "end": t + dt.timedelta(minutes=dur), "location": location}
        out = ctx.path(V.join(rng.choice(CAL_FOLDERS), rng.choice(["followup", "debrief", "after", "next_meeting",
                                                                    "wrap_up", "review_slot"]) + ".ics"))
        rules = [
            expand("[[weekdays|Monday to Friday] 09:00-17:00|office hours only (09:00-17:00, Mon-Fri)|between "
                   "09:00 and 17:00 on a weekday]", rng),
            expand("[[not over|never during|keep clear of] lunch 12:00-13:00|the lunch hour (12:00-13:00) stays "
                   "free|nothing overlaps 12:00-13:00, that's lunch|[lunch|midday], 12:00 to 13:00, is "
                   "[off limits|blocked]]", rng),
            expand("[start[ing|] on the hour or half hour|starts at {hh}|a start time on a full or half hour|the "
                   "minutes of the start [must be|are] 00 or 30|start times end in :00 or :30]", rng,
                   hh=":00 or :30"),
        ]
        ask = one_of(rng, [
            "book a {dur}-minute \"{s}\" (location \"{loc}\") at the earliest time on or after {day} that clashes "
            "with none of the events in {src}.",
            "once {src} [is|are] in the calendar, [find|book] the first free {dur} minutes on or after {day} for a "
            "\"{s}\" [in|at] \"{loc}\" - it must not overlap any of those events.",
            "[add|schedule] a \"{s}\" ({dur} min, \"{loc}\") [as early as possible|at the earliest slot] from {day} "
            "on, without clashing with anything in {src}.",
        ], dur=dur, s=summary, loc=location, day=first.isoformat(), src=source.description)
        ask = ask[:1].lower() + ask[1:]
        instruction = V.glue(rng, ask, V.reqs(rng, rules),
                             expand("[Write|Save|Put] it [to|in] `{out}`.", rng, out=out) + " " + fmt_note(rng))
        checks = [
            Check("earliest_slot_chosen", "ics_events", {"path": out, "events": [
                {"summary": summary, "dtstart": ics_stamp(ev["start"]), "dtend": ics_stamp(ev["end"])}]}),
            Check("no_clash", "docs_ics_free", {"path": out, "summary": summary, "busy": _busy_args(timed)}),
            Check("location_set", "ics_events", {"path": out, "events": [{"summary": summary, "location": location}]}),
        ]
        late = earliest(first, dur, timed + [(t, t + dt.timedelta(minutes=90))], 9, 17, (12, 13))
        bad = {"summary": summary, "start": late, "end": late + dt.timedelta(minutes=dur), "location": "TBD"}
        instruction = V.with_aside(ctx.rng, ctx.persona, instruction)
        return StepPlan(
            operation=self.id, instruction=instruction, checks=checks,
            steps=[read(source.path), write(out, ics_text([ev]))],
            partial=[write(out, ics_text([bad]))],
            outputs=[Artifact(out, EVENTS, _events_out([ev]), f"the {summary.lower()} booking ({out})")],
            summary=f"book a {summary.lower()} after {source.path}",
            fingerprint=digest(_events_out([ev])),
        )

    def _kickoffs(self, ctx: OpContext, source: Artifact, items: list[tuple[str, dt.date]], what: str,
                  named: str = "<name>", prefixes: tuple[str, ...] = ("Kick-off", "Start")) -> StepPlan:
        rng = ctx.rng
        hh, mm = rng.choice([(9, 0), (9, 30), (10, 0), (8, 30), (8, 0), (11, 0), (14, 0), (7, 30)])
        dur = rng.choice([15, 30, 20, 45])
        prefix = rng.choice(prefixes)
        location = rng.choice(["Online", "Team room", "Office", "Desk", "Phone", "Kitchen table", "Room 2", "Zoom",
                               "Front office", "Workshop"])
        items = sorted(set(items), key=lambda it: (it[1], it[0]))
        only = ""
        if len(items) > 8:  # a cut-off by date, so the subset does not depend on the earlier step's row order
            cutoff = items[7][1]
            items = [it for it in items if it[1] <= cutoff]
            only = f" (only the entries dated up to {cutoff.isoformat()})"
        evs = []
        for name, d in items:
            name = name.replace(",", " ").replace(";", " ").replace("  ", " ").strip()
            t = dt.datetime.combine(d, dt.time(hh, mm))
            evs.append({"summary": f"{prefix}: {name}", "start": t, "end": t + dt.timedelta(minutes=dur),
                        "location": location})
        out = ctx.path(V.join(rng.choice(CAL_FOLDERS), rng.choice(["kickoffs", "reminders", "plan_calendar", "due_dates",
                                                                    "deadlines", "nudges", "alerts"]) + ".ics"))
        at = f"{hh:02d}:{mm:02d}"
        title = f"\"{prefix}: {named}\""
        instruction = one_of(rng, [
            "put a {dur}-minute event at {at} on the {what} of every entry{only} of {src} into `{out}`, titled "
            "{title} (location \"{loc}\").",
            "for each entry in `{path}`{only}, add a {dur}-minute {title} event at {at} on its {what} (location "
            "\"{loc}\") to the calendar file `{out}`.",
            "[I [@need]|please make] a calendar `{out}` with one {title} event per entry of {src}{only}: {dur} "
            "minutes at {at} on [its|the entry's] {what}, location \"{loc}\".",
            "[turn|convert] {src}{only} into calendar [reminders|events] in `{out}` - [one per entry|each entry "
            "gets one], called {title}, {at} on the {what}, {dur} minutes long, location \"{loc}\".",
            "[so I don't miss any|to get a nudge for each] of {src}{only}: [a|one] {title} [slot|event] on [every|"
            "each] {what} at {at}, [lasting|for] {dur} minutes, [in|at] \"{loc}\", [all in|saved to] `{out}`.",
            "`{out}` [should hold|gets] [an event|a reminder] for [every|each] entry of {src}{only} - title {title}, "
            "[the entry's|its] {what} at {at}, {dur} min, \"{loc}\" as the location.",
        ], dur=dur, at=at, what=what, only=only, src=source.description, path=source.path, out=out, title=title,
            loc=location)
        if not re.match(r"I\b", instruction):  # mid-sentence after the steps' connective, but "I" stays "I"
            instruction = instruction[:1].lower() + instruction[1:]
        instruction += " " + fmt_note(rng)
        exp = [{"summary": e["summary"], "dtstart": ics_stamp(e["start"]), "dtend": ics_stamp(e["end"])} for e in evs]
        checks = [
            Check("one_event_per_entry", "ics_events", {"path": out, "events": [{"summary": e["summary"]} for e in evs]}),
            Check("times_right", "ics_events", {"path": out, "events": exp}),
            Check("location_set", "ics_events", {"path": out, "events": [{"summary": e["summary"], "location": location}
                                                                         for e in evs]}),
        ]
        bad = [dict(e, start=e["start"] + dt.timedelta(hours=1), end=e["end"] + dt.timedelta(hours=1))
               for e in evs[: max(1, len(evs) - 1)]]
        instruction = V.with_aside(ctx.rng, ctx.persona, instruction)
        return StepPlan(
            operation=self.id, instruction=instruction, checks=checks,
            steps=[read(source.path), write(out, ics_text(evs))],
            partial=[write(out, ics_text(bad))],
            outputs=[Artifact(out, EVENTS, _events_out(evs), f"the {prefix.lower()} events ({out})")],
            summary=f"add {len(evs)} {prefix.lower()} events for {source.path}",
            fingerprint=digest(_events_out(evs)),
        )

    def plan(self, ctx: OpContext, source: Artifact | None) -> StepPlan:
        if source is not None and source.kind == EVENTS and isinstance(source.data, list):
            timed, days = [], []
            for e in source.data:
                if not isinstance(e, dict):
                    continue
                s, en = str(e.get("start", "")), str(e.get("end", "") or e.get("start", ""))
                try:
                    if "T" in s:
                        a, b = dt.datetime.fromisoformat(s[:19]), dt.datetime.fromisoformat(en[:19])
                        timed.append((a, max(a, b)))
                    else:
                        days.append((str(e.get("summary", "event"))[:60], dt.date.fromisoformat(s[:10])))
                except ValueError:
                    continue
            if timed:
                return self._after_busy(ctx, source, timed)
            if days:
                return self._kickoffs(ctx, source, days, "start date", "<its name>")
        if source is not None and source.kind == TABLE:
            header, rows = table_of(source)
            di = date_col(header, rows, role_col(source, "date", header))
            ni = text_col(header, rows, role_col(source, "name", header), avoid=(di,))
            if di is not None and ni is not None:
                items, seen = [], set()
                for r in rows:
                    try:
                        key = (r[ni].strip(), dt.date.fromisoformat(r[di].strip()))
                    except (ValueError, IndexError):
                        continue
                    if key not in seen and key[0]:
                        seen.add(key)
                        items.append(key)
                if items:
                    return self._kickoffs(ctx, source, items, f"`{header[di]}`", f"<{header[ni]}>",
                                          ("Reminder", "Due", "Check"))
        return self._standalone(ctx, source)


def _contacts(source: Artifact, me: str) -> list[tuple[str, str]]:
    """Up to two (name, email) pairs from a table artifact that has names and email addresses."""
    if source.kind != TABLE:
        return []
    header, rows = table_of(source)
    ei = next((i for i in range(len(header)) if rows and all("@" in r[i] for r in rows if i < len(r))), None)
    ni = text_col(header, rows, role_col(source, "name", header), avoid=(ei,))
    if ei is None or ni is None or ni == ei:
        return []
    out: list[tuple[str, str]] = []
    for r in rows:
        name, mail = r[ni].strip(), r[ei].strip()
        if name and mail and name != me and name not in dict(out) and re.fullmatch(r"[\w.+-]+@[\w.-]+", mail):
            out.append((name, mail))
    return out[:2]


GENERATORS = [ScheduleEvents()]
