"""The persona's voice around the step fragments: greeting, context, the steps joined, closing and sign-off.

A template task's request is its operation steps' instruction fragments (exact paths, columns and values the
checks depend on) in the words of the persona who asks. Before, that voice was one greeting, one context line
from four templates and one closing per register, so requests of the same steps read alike. Here every part is
drawn independently from :mod:`clawgym.synth.grammar` phrasings:

- a greeting and a closing of the persona's register (warm, formal, terse, anxious), and often a sign-off with
  their first name;
- a few context sentences, each kind drawn on its own: the goal (one of the persona's goals, in the first
  person); who the result is for and when (a person from :mod:`clawgym.synth.flavor` and a concrete day or
  date); the tool they keep things in (one of ``persona.tools``); a detail of their life (one of their
  interests, a distractor); why it matters now (a project of their domain, a deadline);
- the steps joined in one of several ways: connectives of the register, "once `x.csv` is ready" (the
  previous step's output), a numbered or bulleted list with or without a lead line;
- the persona's writing quirks realised in their own sentences (``writing_quirks`` and ``tone``: "pls",
  "thx", a fixed sign-off or greeting, lowercase, no punctuation, typos, hedges and apologies, over-explaining),
  never in the step fragments, whose text is kept byte for byte.

Everything is drawn from the task's RNG, so the same seed gives the same request.
"""

from __future__ import annotations

import datetime as dt
import functools
import random
import re
from dataclasses import dataclass, field

from clawgym.synth import flavor
from clawgym.synth.grammar import expand
from clawgym.synth.personas import Persona

REGISTERS = ("warm", "formal", "terse", "anxious")

# --------------------------------------------------------------------------------------------- registers


def register(persona: Persona) -> str:
    """warm, formal, terse or anxious: how the persona's requests read, from their tone and quirks."""
    t = f"{persona.tone} {persona.writing_quirks or ''}".casefold()
    if any(w in t for w in ("terse", "blunt", "short", "lowercase", "clipped", "brief", "minimal")):
        return "terse"
    if any(w in t for w in ("anxious", "worried", "nervous", "over-explain", "stressed", "apolog", "hesitant")):
        return "anxious"
    if any(w in t for w in ("formal", "precise", "polite", "professional", "courteous", "measured", "dry",
                            "courtly", "grammar", "methodical", "exact", "careful")):
        return "formal"
    return "warm"


# --------------------------------------------------------------------------------------------- quirks


@dataclass(frozen=True)
class Quirks:
    """What a persona's ``writing_quirks`` and ``tone`` say about their text, as things to do with it."""

    greetings: tuple[str, ...] = ()  # 'opens with "Salam"'
    signoffs: tuple[str, ...] = ()  # 'signs off "ta"', 'ends with "pura vida"'
    please: str = ""  # the persona's "please": pls, kindly, porfa...
    thanks: tuple[str, ...] = ()  # thx, tysm, merci...
    words: tuple[str, ...] = ()  # interjections they use: lol, basically, wee...
    urgent: tuple[str, ...] = ()  # asap, FYI, EOD
    questions: tuple[str, ...] = ()  # "OK?", "does that make sense?"
    asides: tuple[str, ...] = ()  # "(sorry if this is confusing!)"
    emoji: tuple[str, ...] = ()
    lowercase: bool = False
    no_punct: bool = False
    typos: bool = False
    ellipses: bool = False
    emdash: bool = False
    exclaim: bool = False
    apologetic: bool = False
    over_explain: bool = False
    fragments: bool = False
    no_greeting: bool = False
    tldr: bool = False
    deadline_style: str = ""  # "bold" or "caps"
    we_need: bool = False
    steps_style: str = ""  # "numbered", "bullets", "checkbox", "check"


_PLEASE = {"pls": "pls", "plz": "plz", "porfa": "porfa", "porfis": "porfis", "svp": "svp", "kindly": "kindly",
           "please kindly": "please kindly", "please oo": "please oo", "abeg": "abeg", "pls check": "pls",
           "please would you": "please", "please help": "please", "pls share by eod": "pls"}
_THANKS = {"thx", "ty", "tysm", "kthx", "ta", "merci", "tak", "diolch", "thanks kindly", "cheers", "many thanks",
           "vlw", "mālō", "cheers boss", "pura vida", "god bless", "yours sincerely", "kind regards", "danke"}
_URGENT = {"asap", "fyi", "eod", "eta?", "pls share by eod"}
_QUESTIONS = {"ok?", "is it correct?", "does that make sense?", "source?", "eta?"}
_EMOJI_WORDS = {"heart emoji": "❤️", "emoji": "🙂", "emoticons": "^^", "checkmarks": "✅"}
_QUOTED = re.compile(r"[\"“]([^\"”]+)[\"”]")


@functools.lru_cache(maxsize=512)
def _quirks(tone: str, quirks: str) -> Quirks:
    t = f"{tone} | {quirks}".casefold()
    q = quirks.casefold()
    kw: dict = {"greetings": [], "signoffs": [], "thanks": [], "words": [], "urgent": [], "questions": [],
                "asides": [], "emoji": []}
    please = ""
    for m in _QUOTED.finditer(quirks):
        term = m.group(1).strip()
        low = term.casefold()
        before = q[max(0, m.start() - 40):m.start()]
        if low in _PLEASE:
            please = please or _PLEASE[low]
            if low == "pls share by eod":
                kw["urgent"].append("pls share by EOD")
            continue
        if re.search(r"\b(opens|starts|begins)\b", before):
            kw["greetings"].append(term)
        elif re.search(r"\b(signs off|ends|adds)\b", before) or "at the end" in q[m.end():m.end() + 15]:
            (kw["questions"] if low in _QUESTIONS else kw["signoffs"]).append(term)
        elif low in _QUESTIONS or (term.endswith("?") and len(term) < 30):
            kw["questions"].append(term)
        elif low in _URGENT:
            kw["urgent"].append(term)
        elif low in _THANKS:
            kw["thanks"].append(term)
        elif term.startswith("(") or low.startswith("sorry"):
            kw["asides"].append(term if term.startswith("(") else f"({term})")
        elif low.startswith("not being"):
            kw["asides"].append(f"(sorry, I'm not {low[len('not being '):]})")
        elif re.fullmatch(r"!+", term):
            continue  # lots of exclamation marks: see `exclaim`
        elif not re.search(r"[\w]", term):
            kw["emoji"].append(term)
        elif re.search(r"\b(says|writes|uses|adds)\b", before[-20:]) and " like " not in before \
                and len(term.split()) <= 3 and term[:1].islower() or low in ("asap", "fyi"):
            kw["words"].append(term)
    for word, emo in _EMOJI_WORDS.items():
        if word in q and emo not in kw["emoji"]:
            kw["emoji"].append(emo)
    if "❤️" in kw["emoji"] and "🙂" in kw["emoji"]:
        kw["emoji"].remove("🙂")
    steps = ""
    if "checkbox" in t:
        steps = "checkbox"
    elif "✅" in quirks:
        steps = "check"
    elif re.search(r"number(ed|s every|s her|s his)|numbered", t):
        steps = "numbered"
    elif re.search(r"bullet|checklist|loves lists|lists", t):
        steps = "bullets"
    return Quirks(
        greetings=tuple(kw["greetings"]), signoffs=tuple(kw["signoffs"]), please=please,
        thanks=tuple(kw["thanks"]), words=tuple(kw["words"]), urgent=tuple(kw["urgent"]),
        questions=tuple(kw["questions"]), asides=tuple(kw["asides"]), emoji=tuple(kw["emoji"]),
        lowercase="lowercase" in t,
        no_punct=any(w in t for w in ("no punctuation", "fussy about punctuation", "sentences run on")),
        typos="typo" in t, ellipses="ellipses" in t, emdash="em-dash" in t,
        exclaim="exclamation" in t or "!!" in quirks,
        apologetic=any(w in t for w in ("apolog", "sorry", "shy", "nervous", "self-deprecating")),
        over_explain=any(w in t for w in ("over-explain", "long paragraphs", "whole context", "long-winded",
                                          "rambling", "talkative", "long sentences", "chatty", "storytelling",
                                          "long flowing")),
        fragments=any(w in t for w in ("fragments", "several short messages", "telegram", "short lines")),
        no_greeting=any(w in t for w in ("no greeting", "never uses greetings", "never bothers with a greeting",
                                         "no small talk", "no pleasantries")),
        tldr="tl;dr" in t, deadline_style="bold" if "deadlines in bold" in t else (
            "caps" if "deadlines in capitals" in t else ""),
        we_need='"we need"' in t, steps_style=steps,
    )


def quirks_of(persona: Persona) -> Quirks:
    return _quirks(persona.tone, persona.writing_quirks or "")


# --------------------------------------------------------------------------------------------- small words


def lowerfirst(s: str) -> str:
    """The text with its first letter in lower case, for use mid-sentence; an acronym ("HR ..."), the pronoun I
    ("I redo this...", "I'm") and a person's name ("Jamal Kim emailed me...") keep theirs."""
    if re.match(r"I\b", s):
        return s
    m = re.match(r"([A-Z][a-z]+)\b( [A-Z][a-z]+)?", s)
    if m and (m.group(1) in flavor.FIRST or (m.group(2) and flavor.is_person(m.group(1) + m.group(2)))):
        return s
    return s[:1].lower() + s[1:] if s[:1].isupper() and not s[1:2].isupper() else s


_AN_SILENT_H = ("hour", "honest", "honour", "honor", "heir")
_A_YOU_SOUND = ("uni", "use", "usu", "uti", "ura", "ure", "uro", "euro", "eu", "ewe", "one", "once", "ubiq")
_VOWEL_SOUND_LETTERS = set("AEFHILMNORSX")


def article(phrase: str) -> str:
    """"a" or "an" before `phrase`, by the sound of its first word, not its first letter."""
    word = re.split(r"[\s/-]", phrase.strip(), maxsplit=1)[0]
    if not word:
        return "a"
    if len(word) > 1 and word.isupper() and word.isalpha():  # an acronym, read letter by letter
        return "an" if word[0] in _VOWEL_SOUND_LETTERS else "a"
    w = word.casefold()
    if w.startswith(_AN_SILENT_H):
        return "an"
    if w.startswith(_A_YOU_SOUND):
        return "a"
    return "an" if w[0] in "aeiou" else "a"


_FIRST_PERSON_VERBS = {"is": "am", "has": "have", "does": "do", "was": "was"}


def _first_person_verb(verb: str) -> str:
    if verb in _FIRST_PERSON_VERBS:
        return _FIRST_PERSON_VERBS[verb]
    if re.search(r"(ss|sh|ch|x|o)es$", verb):
        return verb[:-2]
    if verb.endswith("ies") and len(verb) > 4:
        return verb[:-3] + "y"
    return verb[:-1] if verb.endswith("s") and not verb.endswith("ss") else verb


def first_person(text: str, lower: bool = True) -> str:
    """A phrase written about the persona ("...in her inbox", "the code she owns") in the first person ("...in my
    inbox", "the code I own"), to start mid-sentence (its first letter lowered unless `lower` is False)."""
    text = re.sub(r"\b(his|her|their)\b", "my", (lowerfirst(text) if lower else text).rstrip("."))
    text = re.sub(r"\b(he|she) (\w+)\b", lambda m: "I " + _first_person_verb(m.group(2)), text)
    text = re.sub(r"\bthey (are|were)\b", lambda m: "I " + {"are": "am", "were": "was"}[m.group(1)], text)
    return re.sub(r"\b(he|she|they)\b", "I", text)


# --------------------------------------------------------------------------------------------- days and people

_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def when(rng: random.Random) -> str:
    """A concrete day or date as people write it ("Thursday", "14 March", "Friday the 3rd", "end of the month"),
    never as YYYY-MM-DD (the format checks look for)."""
    d = dt.date(2026, rng.randint(1, 12), rng.randint(1, 28))
    wd, mon = _WEEKDAYS[d.weekday()], _MONTHS[d.month - 1]
    kind = rng.randrange(9)
    if kind == 0:
        return rng.choice(_WEEKDAYS[:5])
    if kind == 1:
        return f"next {rng.choice(_WEEKDAYS[:5])}"
    if kind == 2:
        return f"{d.day} {mon}"
    if kind == 3:
        return f"{mon} {d.day}"
    if kind == 4:
        return f"{wd} the {_ordinal(d.day)}"
    if kind == 5:
        return f"{wd} {d.day} {mon[:3]}"
    if kind == 6:
        return f"the {_ordinal(d.day)}"
    if kind == 7:
        return f"{rng.choice(_WEEKDAYS[:5])} {rng.choice(['morning', 'afternoon', 'at noon', 'first thing'])}"
    return rng.choice(["the end of the week", "the end of the month", "tomorrow", "tomorrow morning",
                       "the weekend", "Monday morning", "the end of the day", "the next meeting"])


_ROLES = {
    "health": ["the ward manager", "the practice manager", "the charge nurse", "our lead consultant",
               "the clinic director", "the pharmacist"],
    "education": ["the head of department", "the principal", "my co-teacher", "the exams officer",
                  "the parents' committee", "my supervisor"],
    "food": ["the head chef", "the owner", "our supplier", "the front-of-house manager", "my sous chef"],
    "software": ["my tech lead", "the product manager", "the on-call team", "our CTO", "the client's PM"],
    "finance": ["the auditor", "our accountant", "the CFO", "the client", "my manager", "the tax adviser"],
    "farm": ["the co-op", "the vet", "the agronomist", "my brother", "the bank", "the buyer"],
    "creative": ["the client", "the gallery", "the producer", "my editor", "the art director", "my agent"],
    "legal": ["the senior partner", "the client", "my supervising solicitor", "the court clerk", "the paralegal"],
    "general": ["my manager", "my boss", "the team", "a colleague", "my business partner", "the board"],
}


_domain = flavor.persona_domain


# --------------------------------------------------------------------------------------------- phrasings
# Templates of :func:`clawgym.synth.grammar.expand`; the persona's own facts go in slots.

GREETINGS = {
    "warm": ["[Hi|Hey|Hello|Hiya|Hi there|Hey there|Hello there][!|,|]",
             "[Hi|Hey|Hello], [hope you're well|hope your day's going ok|hope all's good][!|.]",
             "[Morning|Good morning|Afternoon|Evening][!|,]", "[Hi|Hello], thanks in advance for this[!|.]",
             "[Hi|Hey]! [Quick favour|A favour to ask|Got a job for you][.|:]",
             "Hello hello[!|,]"],
    "formal": ["[Good morning|Good afternoon|Good evening|Hello|Greetings|Good day][.|,]",
               "Dear assistant,[ I hope you are well.| I have a request.|]",
               "[Hello|Good morning|Good afternoon], I [would like to ask for|need|would appreciate] your [help|"
               "assistance] with [the following|a task|a few files|some file work].",
               "I [hope this finds you well|trust you are well|hope you are well][.|, and thank you in advance.]",
               "[Hello|Good day|Greetings]. [I have a request|I have a task for you|A request, if I may][.|:]",
               "[Good morning|Good afternoon], [assistant|there][.|,]"],
    "terse": ["", "", "", "quick one:", "need this done:", "[hey|hi|hello]", "task:", "ok so", "one for you:",
              "quick job:", "[hi|hey] -"],
    "anxious": ["[Hi|Hello], [sorry|apologies], I'm [a bit swamped|really behind on this|a bit lost with this]"
                "[.| -]",
                "[Hi|Hello] - I'm behind on this and it's [stressing me out|keeping me up at night|worrying me]"
                "[.|!]",
                "[Hi|Hello], could you help? I keep putting this off[.|...]",
                "[Hi|Hello], I hope this is ok to ask[.|...]", "[Hi|Hello]! [Sorry to bother you|Sorry for the "
                "long message in advance][.|!]"],
}

CLOSINGS = {
    "warm": ["Thanks so much[!|.]", "You're a star, thank you[!|.]", "Cheers[!|.]", "Thank you[!|!!|.]",
             "Thanks a [lot|million|bunch][!|.]", "[Really|Much] appreciated[!|.]",
             "Let me know [how it goes|if anything's unclear|when it's done][!|.]",
             "[That's it|That's everything|That's all], thanks[!|.]", "Shout if [something's odd|you get stuck][.|!]",
             "Have a good [day|one|evening][!|.]"],
    "formal": ["Thank you.", "Kind regards.", "Much appreciated.", "Please confirm when [done|complete|finished].",
               "Thank you in advance.", "[I am|I'm] grateful for your help.",
               "Please let me know [if anything is unclear|should anything be unclear|once this is complete].",
               "[Many thanks|With thanks|Thanks in advance] for your [help|assistance|time]."],
    "terse": ["thx", "", "", "ta", "that's all.", "thanks", "done when done.", "ty", "cheers", "that's it."],
    "anxious": ["Thank you, this is a [huge|massive|real] help[.|!]",
                "Please double-check everything, I can't afford mistakes.",
                "Thanks - and tell me if anything looks off[.|!]",
                "[Sorry|Apologies] if this is a lot. Thank you[!|.]",
                "Thank you so much, [honestly|really][.|!]",
                "[Please|] let me know if I've missed something[.|!]",
                "[I really appreciate it|I owe you one][, thank you|][.|!]"],
}

_VALEDICTION = re.compile(r"(\[?)(Kind regards|Cheers|Best|Regards|With thanks|Many thanks|Thanks|Thank you|thx|ta\b|"
                         r"thanks|ty\b|cheers)")

SIGNOFFS = {
    "warm": ["- {first}", "{first}", "Thanks,\n{first}", "Cheers,\n{first}", "Best,\n{first}", "Thanks!\n{first}",
             "Speak soon,\n{first}", "xx {first}"],
    "formal": ["Best regards,\n{name}", "Kind regards,\n{name}", "Regards,\n{first}", "Sincerely,\n{name}",
               "Best,\n{first} {initial}.", "With thanks,\n{name}", "{name}"],
    "terse": ["{first}", "- {initial}", "{first_low}", "-{first}"],
    "anxious": ["Thanks again,\n{first}", "{first} (sorry again!)", "- {first}", "Many thanks,\n{first}",
                "Best,\n{first}"],
}

GOAL = {
    "casual": [
        "I'm {a_occ} in {city} and I'm trying to {goal}.",
        "[Context|Background|Some context|For context|Quick background]: I [work as|am] {a_occ}[ ({domain})|"
        "| in {city}] and I['m trying| want| need] to {goal}.",
        "As {a_occ}, I'm [trying|working|hoping] to {goal}[, so I need [@help] with my files|]."
        , "I'm {name}, {a_occ} [based in|in|working out of] {city}[;|, and] I'm trying to {goal}.",
        "[This is|It's] [part of|all part of] [my [push|plan|effort]|a [push|plan|big push]] to {goal}.",
        "[The bigger goal|What I'm after|The point of all this|My goal][ here|] is to {goal}.",
        "[Lately|This month|This season|These days] I'm [trying|working hard|doing my best] to {goal}[ and this is"
        " a piece of it|]."
        , "[Been|I've been] meaning to {goal} for [ages|a while|weeks|months][ now|]."
        , "{occ_cap} [life|problems]: I [need|want] to {goal}.",
        "[So|OK so|Right], I'm {a_occ}[ in {city}|] and [part of the job|my job] is to {goal}.",
    ],
    "formal": [
        "I am {a_occ} [in|based in] {city}, and I [am trying|intend|aim|need] to {goal}.",
        "[Some context|For context|By way of background]: I [work as|am] {a_occ}[ ({domain})|] and I [aim|intend|"
        "need] to {goal}.",
        "As {a_occ}, I [am trying|intend|need] to {goal}[; this request is part of that|].",
        "My name is {name}[, {a_occ}|] [in|from] {city}; I [am trying|intend|need] to {goal}.",
        "[The aim of this request|The objective here|The purpose of this] is to help me {goal}.",
        "My [objective|aim] [here|] is to {goal}.",
        "[This request|The following] [relates to|is part of] [my|an ongoing] [effort|plan|project] to {goal}.",
    ],
    "terse": ["{occ_low}. trying to {goal}.", "context: {goal}.", "goal: {goal}.", "for: {goal}.",
              "trying to {goal}.", "{occ_low}, {city}. {goal}."],
}

FOR_WHOM = [
    "[It's|This is] for {person}[ ({role})|][, who [needs|wants] it|] by {when}.",
    "{person} [needs|wants|asked for|is waiting for] [it|this|the result|the output] [by|before] {when}.",
    "I'm [meeting|seeing|sending this to|going over this with] {role} ({person}) [on|by] {when}[, so it has to be"
    " right|].",
    "{role_cap}, {person}, [wants|expects|will look at] [it|this|the files] [on|by|before] {when}.",
    "[Deadline|Due|Needed]: {when}[ ({person} is waiting)| - {person} will check it|].",
    "[I told|I promised] {person} [I'd have it|this would be done|they'd have it] by {when}.",
    "{person} from [work|the office|the team|next door|the {project}] [reminded me|pinged me|asked again] "
    "[about this|] [yesterday|this morning|twice|last week][, it's due {when}|].",
    "[Has to|Needs to|Must] be [done|ready|sorted] [by|before] {when}[ for {person}| - {role} is waiting|].",
]

TOOL = [
    "I [usually|normally|mostly] [keep|track|manage|do] [this|all this|these things] in {tool}[, but this time "
    "it's all [plain files|files in the workspace]|; the files are exported here|].",
    "[Everything|All of it] [normally lives|lives|usually sits] in {tool}; I've [exported|copied|dumped] what "
    "matters [into the workspace|here].",
    "The originals [live|are] in {tool}; [what you need|the relevant part] is [exported|copied] [here|into the "
    "workspace].",
    "({tool} [can't|won't|doesn't] do this [properly|nicely|the way I want], [hence|so] the files.)",
    "[Normally|Usually] I'd [do|fiddle with] this [in|by hand in] {tool}[ but it takes forever| but I'm out of "
    "time| but it's tedious|].",
    "[Fair warning|FYI|Note]: I [live in|work mostly in] {tool}[, not in folders|, so bear with me|].",
    "[This came out of|These are exports from|Some of this came from] {tool}[, so the formatting may be odd| - "
    "hope that's fine|].",
]

LIFE = [
    "I'm off to {interest} [this weekend|on Saturday|tonight|later|after work][, so|and] I'd [love|like] to "
    "[get this off my plate|have this sorted|be done with it] [before then|first].",
    "Between {interest} and work, [this has piled up|I've fallen behind|things slipped|the files got messy].",
    "[Unrelated, but|Random aside:|Side note:] {interest} has eaten my [whole|entire] [weekend|week|evening]"
    "[, hence the mess|, so I'm behind|].",
    "[I'd rather be|I'm desperate to get back to|All I want is to get back to] {interest}[, honestly|, to be "
    "honest|], so [thank you|thanks] for taking this on.",
    "(If you're wondering about the [mess|delay|state of things]: {interest}.)",
    "[Once this is done|After this] I can [finally|] [get back to|make time for|think about] {interest}.",
]

WHY = [
    "The {project} [is due|deadline is|review is] {when}[, so this has to be right|, so I'm short on time|].",
    "[I've|We've] been doing this by hand for [weeks|months|ages|two weeks][ and it has to stop|, and I'm done|"
    " and keep making mistakes|].",
    "Last [time|month|quarter] [I did this by hand and|we] [got it wrong|missed a row|lost an afternoon to it]"
    "[, so|;] [I'd like it done properly|let's not repeat that|this time it should be clean].",
    "[It feeds into|This is for|It's needed for] the {project}[, which starts {when}|, due {when}|].",
    "[We're|I'm] [behind on|catching up on|wrapping up] the {project}[ and this is the last bit|, this is "
    "one piece of it|].",
    "[If this isn't|Unless this is] [done|ready] by {when}, the {project} [slips|is late|gets delayed].",
]

EXPLAIN = [
    "I've tried to [be precise|spell everything out|be exact] about the [names|file names|details][ because last "
    "time things got mixed up| so nothing gets lost|].",
    "[I'll|Let me] [explain|describe|spell out] [exactly|] what I need below, [step by step|in order|as clearly as "
    "I can].",
    "I know it's [a lot of detail|long|a long message], but [I'd rather over-explain|better too much than too "
    "little|I want to be clear].",
    "[Please|Do] [take your time|read it all first], [the details matter|it's all important|nothing is optional].",
]

APOLOGY = ["[Sorry|Apologies] if this is [confusing|a silly request|obvious|a lot].",
           "I'm not great with [computers|files|spreadsheets], sorry[.|!]",
           "[Sorry|Apologies] for the [long message|mess|rush][.|!]",
           "I hope I've explained this [right|properly|ok][.|...]"]

HEDGES = ["[If possible|If you can|Ideally|If it's not too much trouble], [please|] [double-check|check] the "
          "[numbers|result|output] [before you finish|at the end|once you're done].",
          "I think [that's everything|that covers it|I got it all][, but tell me if not|].",
          "[Hopefully|I hope] [that makes sense|that's clear|this is clear enough].",
          "[Does that make sense|Is that clear enough|Clear enough]?"]

STEP_INTRO = {
    "casual": ["Here's what I need:", "[What I need|The plan|The job], [in order|step by step]:",
               "{n} [things|steps|bits], in this order:", "[So|OK], {n} [things|steps]:", "To do:",
               "[Steps|Plan]:", "The [tasks|jobs]:", "[Can you|Could you] [do these|work through this], in order:"],
    "formal": ["[The steps are as follows|What I need is the following|Please proceed as follows]:",
               "[There are|The request has] {n} [steps|parts]:", "[In order|In this order], please:",
               "[Steps|Tasks] [to complete|required]:"],
    "terse": ["todo:", "steps:", "{n} things:", "", "in order:", "do:"],
}

CONNECT = {
    "first": {
        "casual": ["First, ", "First of all, ", "To start, ", "Start with this: ", "Step one: ", "First up, ",
                   "Before anything else, "],
        "formal": ["To begin, ", "First, ", "As a first step, ", "Firstly, ", "Step 1: "],
        "terse": ["1st: ", "first ", "", "start: "],
    },
    "middle": {
        "casual": ["Then ", "Next, ", "After that, ", "Once that's done, ", "When that's finished, ",
                   "With that in place, ", "Then, once that's right, ", "Next up, "],
        "formal": ["Next, ", "Subsequently, ", "Then, ", "Following that, ", "Once this is complete, ",
                   "After this, "],
        "terse": ["then ", "next: ", "after: ", "then: "],
    },
    "last": {
        "casual": ["Finally, ", "Last, ", "And last, ", "Lastly, ", "To finish, ", "To wrap up, ",
                   "Last thing: ", "And finally, "],
        "formal": ["Lastly, ", "Finally, ", "As a final step, ", "To conclude, ", "Last, "],
        "terse": ["last: ", "finally ", "then ", "end: "],
    },
    "after": {  # the previous step's output, named: "Once `x.csv` is ready, "
        "casual": ["Once `{path}` is [done|ready|there|written], ", "When `{path}` is [ready|done], ",
                   "With `{path}` [ready|done|in hand], ", "After `{path}` [is written|exists|is there], "],
        "formal": ["Once `{path}` is [complete|in place|written], ", "When `{path}` [is ready|exists], ",
                   "With `{path}` in place, "],
        "terse": ["once `{path}` exists: ", "after `{path}`: ", "`{path}` done -> "],
    },
}


# --------------------------------------------------------------------------------------------- the voice


@dataclass
class Voice:
    """One request's voice: the persona, their register and quirks, and the RNG every choice is drawn from."""

    persona: Persona
    rng: random.Random
    reg: str = ""
    quirks: Quirks = field(default_factory=Quirks)

    def __post_init__(self):
        self.reg = self.reg or register(self.persona)
        self.quirks = quirks_of(self.persona)

    @property
    def style(self) -> str:
        """The template family: terse, formal or casual (warm and anxious)."""
        return self.reg if self.reg in ("terse", "formal") else "casual"

    @property
    def first(self) -> str:
        return self.persona.name.split()[0]

    # ------------------------------------------------------------------ the persona's own text, with quirks

    def say(self, text: str) -> str:
        """The persona's own sentence(s) as they write: their "please", lowercase, punctuation habits, typos."""
        q, rng = self.quirks, self.rng
        if not text:
            return text
        if q.please:
            text = re.sub(r"\b[Pp]lease\b", lambda m: q.please[:1].upper() + q.please[1:]
                          if m.group()[0] == "P" else q.please, text)
        if q.we_need:
            text = re.sub(r"\bI need\b", "we need", text)
        if q.typos and rng.random() < 0.6:
            text = _typo(text, rng)
        if q.ellipses and rng.random() < 0.6:
            text = re.sub(r"\.(\s|$)", r"...\1", text, count=1)
        if q.emdash and rng.random() < 0.6:
            text = text.replace(", ", " — ", 1)
        if q.exclaim and rng.random() < 0.5:
            text = re.sub(r"\.$", "!" if rng.random() < 0.6 else "!!", text)
        if q.no_punct:
            text = re.sub(r"[.,;!](?=\s|$)", "", text)
        if q.lowercase:
            text = text.lower()
        return text

    def draw(self, templates: list[str], **slots) -> str:
        return expand(self.rng.choice(templates), self.rng, **slots)

    # ------------------------------------------------------------------ pieces

    def greeting(self) -> str:
        q, rng = self.quirks, self.rng
        if q.no_greeting:
            return ""
        if q.greetings and rng.random() < 0.8:
            g = rng.choice(q.greetings)
            return g if g.endswith((":", ",", ".", "!")) or rng.random() < 0.4 else g + rng.choice([",", "!", "."])
        g = self.draw(GREETINGS[self.reg]) if GREETINGS[self.reg] else ""
        if self.reg == "terse":
            g = lowerfirst(g)
        if q.emoji and g and rng.random() < 0.5:
            g += " " + rng.choice(q.emoji)
        return self.say(g) if g and self.reg != "formal" else g

    def _slots(self) -> dict:
        p, rng = self.persona, self.rng
        person = flavor.person(rng)
        role = rng.choice(_ROLES[_domain(p)])
        project = rng.choice(flavor.vocab(p.domain, p.occupation)["projects"])
        w = when(rng)
        if self.quirks.deadline_style == "bold":
            w = f"**{w}**"
        elif self.quirks.deadline_style == "caps":
            w = w.upper()
        occ = p.occupation
        return {
            "a_occ": f"{article(occ)} {occ}", "occ_cap": occ[:1].upper() + occ[1:], "occ_low": occ.casefold(),
            "city": p.location.split(",")[0], "domain": p.domain, "name": p.name,
            "goal": first_person(rng.choice(p.goals)), "person": person, "role": role,
            "role_cap": role[:1].upper() + role[1:], "when": w, "project": project,
            "tool": (tool := rng.choice(p.tools)), "interest": first_person(rng.choice(p.interests), lower=False),
            "a_tool": f"{article(tool)} {tool}",
        }

    def context(self) -> tuple[list[str], list[str]]:
        """The persona's context sentences: (before the steps, after them)."""
        rng, q, reg = self.rng, self.quirks, self.reg
        slots = self._slots()
        terse = reg == "terse"
        kinds: list[str] = []
        p_goal, p_for, p_tool, p_life, p_why = ((0.5, 0.45, 0.2, 0.15, 0.4) if terse else
                                                (0.85, 0.6, 0.45, 0.35, 0.55))
        if q.over_explain:
            p_for, p_tool, p_life, p_why = 0.6, 0.5, 0.5, 0.6
        for kind, p in (("for", p_for), ("tool", p_tool), ("life", p_life), ("why", p_why)):
            if rng.random() < p:
                kinds.append(kind)
        rng.shuffle(kinds)
        if rng.random() < p_goal:
            kinds.insert(0 if rng.random() < 0.75 else min(1, len(kinds)), "goal")
        pools = {"goal": GOAL[self.style], "for": FOR_WHOM, "tool": TOOL, "life": LIFE, "why": WHY}
        sentences = []
        for kind in kinds:
            s = self.draw(pools[kind], **slots)
            if terse and kind != "goal":
                s = lowerfirst(s)
            sentences.append((kind, s))
        ends = [k for k, (_, s) in enumerate(sentences) if s.endswith(".") and not s.startswith("(")]
        if q.urgent and ends and rng.random() < 0.7:
            k = ends[-1]
            sentences[k] = (sentences[k][0], sentences[k][1][:-1] + f", {rng.choice(q.urgent)}.")
        plain = [k for k, (_, s) in enumerate(sentences) if s.endswith(".") and not s.startswith("(")]
        if q.words and plain and rng.random() < 0.7:
            k = rng.choice(plain)
            kind, s = sentences[k]
            word = rng.choice(q.words)
            s = f"{word}, {lowerfirst(s)}" if rng.random() < 0.5 else s[:-1] + f", {word}."
            sentences[k] = (kind, s)
        if q.asides and sentences and rng.random() < 0.7:
            k = rng.randrange(len(sentences))
            sentences[k] = (sentences[k][0], sentences[k][1] + " " + rng.choice(q.asides))
        if (q.apologetic or reg == "anxious") and rng.random() < 0.5:
            sentences.append(("sorry", self.draw(APOLOGY)))
        if q.over_explain or (reg == "anxious" and rng.random() < 0.4):
            sentences.append(("explain", self.draw(EXPLAIN)))
        after: list[str] = []
        before: list[str] = []
        for kind, s in sentences:
            # a life detail or the deadline sometimes comes after the steps, as people add it at the end
            if kind in ("life", "for", "why") and rng.random() < 0.25:
                after.append(("P.S. " if kind == "life" and rng.random() < 0.5 else "") + s)
            else:
                before.append(s)
        return [self.say(s) for s in before], [self.say(s) for s in after]

    def closing(self) -> list[str]:
        """The closing line(s) and the sign-off."""
        rng, q, reg = self.rng, self.quirks, self.reg
        out: list[str] = []
        if q.questions and rng.random() < 0.6:
            out.append(rng.choice(q.questions))
        if reg != "terse" and rng.random() < 0.2:
            out.append(self.draw(HEDGES))
        names = {"first": self.first, "name": self.persona.name, "initial": self.first[0],
                 "first_low": self.first.casefold()}
        sign = ""
        if q.signoffs and rng.random() < 0.85:
            sign = rng.choice(q.signoffs)
            if rng.random() < 0.4 and self.first not in sign and "," not in sign \
                    and not re.search(r"\b[A-Z]\.", sign):
                sign += ("\n" if rng.random() < 0.5 else " ") + self.first
        elif rng.random() < (0.35 if reg == "terse" else 0.55):
            sign = self.draw(SIGNOFFS[reg], **names)
            sign = sign.lower() if q.lowercase else sign
        # a sign-off with its own valediction ("Kind regards,\nName") takes no second one as the closing line
        closings = [c for c in CLOSINGS[reg] if not (("," in sign or "\n" in sign) and _VALEDICTION.match(c))]
        if q.thanks and rng.random() < 0.6 and not ("," in sign or "\n" in sign):
            close = rng.choice(q.thanks)
        else:
            close = self.draw(closings) if rng.random() < 0.85 and closings else ""
            if reg == "terse":
                close = lowerfirst(close)
        if close:
            if q.emoji and rng.random() < 0.5:
                close += " " + rng.choice(q.emoji)
            out.append(close)
        out = [self.say(s) for s in out]
        if sign:
            out.append(sign)
        return out

    def join_steps(self, frags: list[str], outputs: list[str | None]) -> list[str]:
        """The step fragments in order, joined in one of several ways. `outputs[i]`: a path step i produces, or
        None. The fragments' own text is kept; only a lead-in is put in front (its first letter lowered when the
        lead-in is mid-sentence, unless it is a name or an acronym)."""
        rng, q, style = self.rng, self.quirks, self.style
        if len(frags) == 1:
            if rng.random() < 0.15:
                intro = self.draw(["[Here's|This is] [the job|what I need|the task]:", "[The|What I need]:",
                                   "[Task|Request]:"]) if style != "formal" else self.draw(
                    ["[The request|The task] is as follows:", "[What I need|The task]:"])
                return [self.say(intro) + "\n" + frags[0]]
            return [frags[0]]
        n = len(frags)
        mode = q.steps_style if q.steps_style and rng.random() < 0.7 else rng.choice(
            ["connect", "connect", "connect", "numbered", "bullets", "after"] if style != "terse" else
            ["numbered", "numbered", "connect", "bullets", "after"])
        if mode in ("numbered", "bullets", "checkbox", "check"):
            marks = {"numbered": rng.choice(["{i}. ", "{i}) ", "Step {i}: ", "({i}) "]), "bullets":
                     rng.choice(["- ", "* ", "• "]), "checkbox": "- [ ] ", "check": "✅ "}[mode]
            items = [marks.format(i=i) + f for i, f in enumerate(frags, start=1)]
            intro = self.draw(STEP_INTRO[style], n=["two", "three", "four"][min(n, 4) - 2] if n >= 2 else str(n)) \
                if rng.random() < 0.6 else ""
            body = "\n".join(items) if rng.random() < 0.6 or mode == "checkbox" else "\n\n".join(items)
            return [(self.say(intro) + "\n" + body) if intro else body]
        parts = []
        for i, f in enumerate(frags):
            if mode == "after" and i > 0 and outputs[i - 1]:
                lead = expand(rng.choice(CONNECT["after"][style]), rng, path=outputs[i - 1]).rstrip() + " "
                lead = lead if style != "terse" else lowerfirst(lead)
            else:
                key = "first" if i == 0 else ("last" if i == n - 1 else "middle")
                lead = rng.choice(CONNECT[key][style])
            lead = self.say(lead) if lead and not q.lowercase else lead
            parts.append(lead + lowerfirst(f) if lead else f)
        return parts

    def tldr(self, n: int) -> str:
        if not self.quirks.tldr or self.rng.random() < 0.2:
            return ""
        return self.draw(["TL;DR: {n} [steps|things|jobs], details below.", "TL;DR: [files to sort out|a few file "
                          "jobs], see below."], n=n)


def _typo(text: str, rng: random.Random) -> str:
    """One adjacent-letter swap in a longer word (a tired typist's typo)."""
    words = [m for m in re.finditer(r"[a-z]{6,}", text)]
    if not words:
        return text
    m = rng.choice(words)
    i = m.start() + rng.randrange(1, len(m.group()) - 2)
    return text[:i] + text[i + 1] + text[i] + text[i + 2:]


# --------------------------------------------------------------------------------------------- the request


@dataclass
class Opening:
    """A request's voice, drawn: the register, what goes before the body, after it, and at the end."""

    reg: str
    head: list[str]
    tail: list[str]
    closing: list[str]
    voice: Voice


def open_voice(persona: Persona, rng: random.Random, n_steps: int = 1) -> Opening:
    """The voice of a request of `n_steps` steps: greeting, TL;DR, the context before the steps and the part of it
    kept for after them. The steps' joining and the closing are drawn next, from the same RNG, by
    :func:`compose_request`."""
    v = Voice(persona, rng)
    head: list[str] = []
    g = v.greeting()
    if g:
        head.append(g)
    t = v.tldr(n_steps)
    if t:
        head.append(t)
    before, after = v.context()
    if v.quirks.fragments or v.reg == "terse":
        head += before
    elif before:
        # one paragraph of context, or a line each
        head += [" ".join(before)] if len(before) > 1 and v.rng.random() < 0.6 else before
    return Opening(v.reg, head, after, [], v)


def compose_request(persona: Persona, rng: random.Random, frags: list[str], outputs: list[str | None],
                    middle: list[str] | None = None) -> str:
    """The whole request: the persona's opening, `middle` (e.g. the skills to follow), the step fragments
    joined, the context kept for the end, the closing and sign-off."""
    op = open_voice(persona, rng, len(frags))
    v = op.voice
    steps = v.join_steps(frags, outputs)
    closing = v.closing()
    parts = op.head + list(middle or []) + steps + op.tail + closing
    parts = [p for p in parts if p]
    wide = v.reg in ("formal", "anxious") or len(frags) > 2 or any("\n" in s for s in steps)
    sep = "\n\n" if (wide and rng.random() < 0.8) or rng.random() < 0.25 else "\n"
    return sep.join(parts)
