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

from clawgym.synth import flavor, world
from clawgym.synth.calendar_words import MONTHS as _MONTHS
from clawgym.synth.calendar_words import WEEKDAYS as _WEEKDAYS
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
def _quirks(tone: str, quirks: str) -> Quirks:  # noqa: C901 (one flat branch per kind of quirk a persona's text states)
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



def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def when(rng: random.Random) -> str:
    """A concrete day or date as people write it ("Thursday", "14 March", "Friday the 3rd", "end of the month"),
    never as YYYY-MM-DD (the format checks look for). The kind of date is a choice (``rng.choice``), so a
    :class:`~clawgym.synth.grammar.HalfChoices` RNG splits it too."""
    d = dt.date(2026, rng.randint(1, 12), rng.randint(1, 28))
    wd, mon = _WEEKDAYS[d.weekday()], _MONTHS[d.month - 1]
    kind = rng.choice(["day", "next", "d_mon", "mon_d", "wd_ord", "wd_d_mon", "ord", "part", "rel"])
    if kind == "day":
        return rng.choice(_WEEKDAYS[:5])
    if kind == "next":
        return f"next {rng.choice(_WEEKDAYS[:5])}"
    if kind == "d_mon":
        return f"{d.day} {mon}"
    if kind == "mon_d":
        return f"{mon} {d.day}"
    if kind == "wd_ord":
        return f"{wd} the {_ordinal(d.day)}"
    if kind == "wd_d_mon":
        return f"{wd} {d.day} {mon[:3]}"
    if kind == "ord":
        return f"the {_ordinal(d.day)}"
    if kind == "part":
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
# Templates of :func:`clawgym.synth.grammar.expand`; the persona's own facts go in slots (see Voice._slots:
# their occupation, city, goals, tools, interests, the things their files hold, a colleague, a workplace and a
# moment of their working day from their domain). Each sentence kind has many frames that differ in structure,
# not one frame with synonyms swapped, so the same kind of sentence reads differently from task to task.

GREETINGS = {
    "warm": ["[Hi|Hey|Hello|Hiya|Hi there|Hey there|Hello there][!|,|]",
             "[Hi|Hey|Hello], [hope you're well|hope your day's going ok|hope all's good][!|.]",
             "[Morning|Good morning|Afternoon|Evening][!|,]",
             "[Hi|Hey]! [Quick favour|A favour to ask|Got a job for you][.|:]",
             "Hello hello[!|,]", "Hi from {city}[!|,]", "[Hi|Hello|Hey] from {place}[!|,]",
             "Happy {weekday}[!|,]", "[Hey|Hi], {first} here[!|.]",
             "[Hi|Hello]! {first} [here|again], the {occ} from {city}[.|!]",
             "[Hiya|Hi], [one for you|I could use a hand|a small rescue mission][!|.]"],
    "formal": ["[Good morning|Good afternoon|Good evening|Hello|Greetings|Good day][.|,]",
               "Dear assistant,[ I hope you are well.| I have a request.| a matter for you.| one request today.|]",
               "[Hello|Good morning|Good afternoon], I [would like to ask for|need|would appreciate] your [help|"
               "assistance] with [the following|a task|a few files|some file work].",
               "I [hope this finds you well|trust you are well|hope you are well][.|, and thank you in advance.]",
               "[Hello|Good day|Greetings]. [I have a request|I have a task for you|A request, if I may|Something to attend to|Here is a job|A brief task][.|:]",
               "[Good morning|Good afternoon], this is {name}[, {a_occ} in {city}|].",
               "[Hello|Good day] from {city}.", "Dear [assistant|helper], [a request from {place}|good {daypart}]."],
    "terse": ["", "", "", "quick one:", "need this done:", "[hey|hi|hello]", "task:", "ok so", "one for you:",
              "quick job:", "[hi|hey] -", "{first_low} here.", "[hey|hi], from {place}:", "{daypart_low} -"],
    "anxious": ["[Hi|Hello], [sorry|apologies], I'm [a bit swamped|really behind on this|a bit lost with this]"
                "[.| -]",
                "[Hi|Hello] - I'm behind on this and it's [stressing me out|keeping me up at night|worrying me]"
                "[.|!]",
                "[Hi|Hello], could you help? I keep putting this off[.|...]",
                "[Hi|Hello], I hope this is ok to ask[.|...]", "[Hi|Hello]! [Sorry to bother you|Sorry for the "
                "long message in advance][.|!]",
                "[Hi|Hello], {first} here[ again|] - [sorry|apologies], this one's [urgent-ish|a bit much][.|...]",
                "[Hi|Hello]. [Writing|Typing this] {moment}, [so sorry if it's scrappy|please forgive the rush][.|...]"],
}

CLOSINGS = {
    "warm": ["Thanks so much[!|.]", "You're a star, thank you[!|.]", "Cheers[!|.]", "Thank you[!|!!|.]",
             "Thanks a [lot|million|bunch][!|.]", "[Really|Much] appreciated[!|.]",
             "Let me know [how it goes|if anything's unclear|when it's done][!|.]", "Over to you[!|.]",
             "[Good luck|Have fun] with it[!|.]",
             "[That's it|That's everything|That's all], thanks[!|.]", "Shout if [something's odd|you get stuck][.|!]",
             "Have a good [day|one|evening][!|.]", "Thanks! Back to {place} for me[.|!]",
             "Cheers from {city}[!|.]", "[Thanks|Thank you] - [now|then] I can [get back to|think about] "
             "{interest}[!|.]", "Ping me when it's [done|in place][!|.]",
             "[Fingers crossed|Hopefully] it's [straightforward|not too fiddly][ - thanks!|. Thanks!]",
             "[Owe you a coffee|I owe you one|Drinks on me][!|.]",
             "[Ta|Thanks] very much[, genuinely|][!|.]"],
    "formal": ["Thank you.", "Kind regards.", "Much appreciated.", "Please confirm when [done|complete|finished].",
               "Thank you in advance.", "[Your help is appreciated|Thank you for your help].",
               "Please let me know [if anything is unclear|should anything be unclear|once this is complete|when it is finished|of any problem].", "I await your confirmation.", "Do report any irregularity you notice.",
               "[Many thanks|With thanks] for your [help|assistance|time].",
               "Thank you for your [time|attention|care] [on|with] this.",
               "I would [appreciate|welcome] [a short confirmation|a brief note] once [it is done|you have finished].",
               "Should anything be [unclear|ambiguous], [please|] [ask|say so] before [proceeding|you begin].",
               "[Thank you|Many thanks]; I look forward to the result.", "[With|My] thanks from {city}."],
    "terse": ["thx", "", "", "ta", "that's all.", "thanks", "done when done.", "ty", "cheers", "that's it.",
              "back to {place}.", "k thx", "thanks!", "that's everything.", "ping me after."],
    "anxious": ["Thank you, this is a [huge|massive|real] help[.|!]",
                "Please double-check everything, I can't afford mistakes.",
                "Thanks - and tell me if anything looks off[.|!]",
                "[Sorry|Apologies] if this is a lot. Thank you[!|.]",
                "Thank you so much, [honestly|really][.|!]",
                "[Please|] let me know if I've missed something[.|!]",
                "[I really appreciate it|I owe you one][, thank you|][.|!]",
                "You're saving my [week|sanity|skin] here[.|!]",
                "[Tell me|Let me know] if anything seems wrong - I'd rather hear it now[.|!]",
                "[Sorry again|Thank you again], and [please|] ignore the state of my files[.|!]"],
}

_VALEDICTION = re.compile(r"(\[?)(Kind regards|Cheers|Best|Regards|With thanks|Many thanks|Thanks|Thank you|thx|ta\b|"
                         r"thanks|ty\b|cheers)")

SIGNOFFS = {
    "warm": ["- {first}", "{first}", "Thanks,\n{first}", "Cheers,\n{first}", "Best,\n{first}", "Thanks!\n{first}",
             "Speak soon,\n{first}", "xx {first}", "Talk soon,\n{first}", "All the best,\n{first}",
             "Ta,\n{first}", "{first} :)", "{first} ({city})"],
    "formal": ["Best regards,\n{name}", "Kind regards,\n{name}", "Regards,\n{first}", "Sincerely,\n{name}",
               "Best,\n{first} {initial}.", "With thanks,\n{name}", "{name}", "{name}\n{occ_cap}, {city}",
               "Kind regards,\n{name} ({occ})", "Yours,\n{first} {initial}."],
    "terse": ["{first}", "- {initial}", "{first_low}", "-{first}", "{initial}."],
    "anxious": ["Thanks again,\n{first}", "{first} (sorry again!)", "- {first}", "Many thanks,\n{first}",
                "Best,\n{first}", "Thank you!!\n{first}", "{first} (who is very grateful)"],
}

# what the persona wants: {try} is drawn from these, {goal} is one of their goals in the first person
_TRY = ("[I'm trying to|I want to|I'd love to|I'm hoping to|I badly need to|I've promised myself I'll|"
        "my plan is to|the idea is to|I'm determined to|I keep failing to]")

GOAL = {
    "casual": [
        "I'm {a_occ} in {city}[,| and] " + _TRY + " {goal}.",
        "[Context|Background|Some context|For context|Quick background]: I [work as|am] {a_occ}[ in {city}|] "
        "and [right now|at the moment|this month|lately] " + _TRY + " {goal}.",
        "As {a_occ}, [half my week|a lot of my time|far too much of my time] goes on admin[ like this|], and the "
        "[big one|priority|thing] [right now|at the moment] is to {goal}.",
        "[The bigger goal|What I'm really after|The point of all this|The end game][ here|] is to {goal}"
        "[; this is one piece of it|, and this gets me closer|].",
        "[Lately|This month|This season|These days] I've been [trying|working hard|doing my best] to {goal}[, "
        "and this is a piece of it|].",
        "[Been|I've been] meaning to {goal} for [ages|a while|weeks|months][ now|], [and today's the day|so "
        "let's start here|and this is the first step|and this is step one|hence today's request].",
        "{occ_cap} [life|problems]: I [need|want] to {goal}.",
        "[So|OK so|Right], I'm {a_occ}[ in {city}|] and [part of the job|what I'm stuck with] is to {goal}.",
        "[Since|Ever since] {colleague} [left|went on leave|moved to another team], it's [on me|fallen to me] "
        "to {goal}.",
        "My [manager|boss|team lead|partner] [keeps asking me|has asked me|wants me] to {goal}[, so here we "
        "are|, hence this|].",
        "[Long story short|In a nutshell|Bottom line]: I [need|have] to {goal}[ before {when}|, and soon|].",
        "One of my [goals|resolutions|priorities] this [year|quarter|season] is to {goal}[ - this helps|, so "
        "this matters|].",
        "I've [finally|] [decided|made up my mind] to {goal}[, properly this time| once and for all|].",
        "[Working as|Being] {a_occ}[ in {city}|], I'm [always|forever|constantly] [trying|struggling] to {goal}.",
        "[This is|It's] [part of|all part of] [my [push|plan|attempt]|a [push|plan|bigger effort]] to {goal}.",
        "[What I'm working towards|My aim for the next few weeks|The plan for this [month|term|season]]: to "
        "{goal}.",
        "I [look after|handle|do] the {things} [at|for] {place}[ here in {city}|], and " + _TRY + " {goal}.",
        "[Quick bit of background|A word on why]: {goal} - that's [the mission|my project|what I'm chasing] "
        "[this [month|season]|for now|at the moment].",
        "[Ask anyone at {place}|Everyone at {place} knows it]: I['ve been going on about|'m fixated on] the need "
        "to {goal}.",
    ],
    "formal": [
        "I am {a_occ} [in|based in] {city}, and I [am trying|intend|aim|need] to {goal}.",
        "[Some context|For context|By way of background]: I [work as|am] {a_occ}[ ({domain})|] and I [aim|intend|"
        "need] to {goal}.",
        "As {a_occ}, I [am trying|intend|need] to {goal}[; this request is part of that|].",
        "My name is {name}[, {a_occ}|] [in|from] {city}; I [am trying|intend|need] to {goal}.",
        "[The aim of this request|The objective here|The purpose of this] is to [help me|let me] {goal}.",
        "This [request|task] [forms part of|belongs to|supports] [my|an ongoing] [effort|plan] to {goal}.",
        "[In my work|In my role] as {a_occ}[ in {city}|], [one of my responsibilities|a standing task|a "
        "recurring duty] is to {goal}.",
        "[I have been asked|It falls to me|I have undertaken] to {goal}[ this [quarter|term|year]|], and this is "
        "[a first step|where it begins|the groundwork|one element of that].",
        "[At present|Currently|At the moment] my [priority|main concern] is to {goal}.",
        "I [write|am writing] [from {city}|as {a_occ}] [about|in connection with] my [wish|need|plan] to {goal}.",
    ],
    "terse": ["{occ_low}. trying to {goal}.", "context: {goal}.", "goal: {goal}.", "for: {goal}.",
              "trying to {goal}.", "{occ_low}, {city}. {goal}.", "[bg|background]: {occ_low}[, {city}|]. need to "
              "{goal}.", "all this is to {goal}.", "aim: {goal}[ by {when}|]."],
}

FOR_WHOM = [
    "[It's|This is] for {person}[ ({role})|][, who [needs|wants] it|] by {when}.",
    "{person} [needs|wants|asked for|is waiting for] [it|this|the result|the output] [by|before] {when}.",
    "I'm [meeting|seeing|sitting down with|going over this with] {role} ({person}) [by|before] {when}[, so it "
    "[needs to be|must be] [solid|correct|spot on]|, and I'd rather not look unprepared|].",
    "{role_cap}, {person}, [wants|expects|will look at] [it|this|the files] [by|before] {when}.",
    "[Deadline|Due|Needed]: {when}[ ({person} is waiting)| - {person} will check it|].",
    "[I told|I promised] {person} [I'd have it|this would be done|they'd have it] by {when}[, which was "
    "optimistic| - no pressure|].",
    "{person} from [work|the office|the team|next door|the {project}] [reminded me|pinged me|asked again] "
    "[about this|] [yesterday|this morning|twice|last week][, it's due {when}|].",
    "[Has to|Needs to|Must] be [done|ready|sorted] [by|before] {when}[ for {person}| - {role} is waiting|].",
    "{colleague} [is going to|will] [present|use|go through] [this|the result] at {place} [by|before] {when}.",
    "[Whoever reads this|The audience] will be {role} and {person}, [some time before|by] {when}.",
    "{role_cap} [asked|emailed me|messaged me] [twice|again|this morning] [about this|], [and I said|so I "
    "promised] {when}.",
    "[If|Once] {person} [has|gets] [it|this] [by|before] {when}, [everyone's happy|we're fine|I can breathe].",
    "[Heads up|Note]: {person} [will|is going to] [check|go through|review] this [line by line|carefully|"
    "closely] [by|before] {when}.",
    "[I'm handing|I'll pass] [the result|all of it] to {person} ({role}) [by|before] {when}.",
    "[Timing|Timeline]: [{person} gets it|it goes to {person}] [by|before] {when}[, no later|, ideally sooner|].",
    "[The people waiting on this|Who's waiting]: {person} and {role}[ - {when} at the latest|].",
]

TOOL = [
    "I [usually|normally|mostly] [keep|track|manage] [this|all this|these things] in {tool}[, but this time "
    "it's all [plain files|files in the workspace]|; the files are exported here|].",
    "[Everything|All of it] [normally lives|usually sits] in {tool}; I've [exported|copied|dumped] what "
    "matters [into the workspace|here].",
    "The originals [live|are] in {tool}; [what you need|the relevant part] is [exported|copied] [here|into the "
    "workspace].",
    "({tool} [can't|won't|doesn't] do this [properly|nicely|the way I want], [hence|so] the files.)",
    "[Normally|Usually] I'd [do|fiddle with] this [in|by hand in] {tool}[ but it takes forever| but I'm out of "
    "time| but it's tedious|].",
    "[Fair warning|FYI|Note]: I [live in|work mostly in] {tool}[ and {tool2}|][, not in folders|, so bear with "
    "me|].",
    "[This came out of|These are exports from|Some of this came from] {tool}[, so the formatting may be odd| - "
    "hope that's fine|].",
    "I [tried|attempted] this in {tool}[ and {tool2}|] [first|already|last week][ - no luck|, and it was "
    "painful|, which went nowhere].",
    "[Between|Juggling] {tool} and {tool2}, [my files are|things are|everything is] [scattered|a patchwork|in "
    "three places][, so the copies here are what counts|].",
    "{colleague} set up our {tool} [years ago|ages ago|back in the day] and nobody [really understands|"
    "remembers] it[ any more|], so [plain files it is|we're back to files|files are all I trust].",
    "I'm [more of|much more] a {tool} person than a [files|folders|command-line] person[, so thank you| - "
    "hence asking you|].",
    "[Once you're done|Afterwards] I'll [pull|import|load] the results [back into|into] {tool}.",
    "[Half|Most] of my [week|day] [happens|is spent] in {tool}[ and {tool2}|], [so|and] [files like these|plain "
    "files] [feel foreign|are not my comfort zone].",
    "{tool} [crashed|froze|logged me out] [twice|again] [yesterday|this week] [while I tried this|mid-way], "
    "[hence you|so over to you].",
]

LIFE = [
    "I'd [like|love] to [get this off my plate|have this sorted|be done with it] before {interest} [this "
    "weekend|on Saturday|tonight|after work].",
    "Between {interest} and work, [this has piled up|I've fallen behind|things slipped|the files got messy].",
    "[Unrelated, but|Random aside:|Side note:] {interest} has eaten my [whole|entire] [weekend|week|evening]"
    "[, hence the mess|, so I'm behind|].",
    "[I'd rather be|I'm desperate to get back to|All I want is to get back to] {interest}[, honestly|, to be "
    "honest|].",
    "([If you're wondering about|In case you're wondering about|The reason for] the [mess|delay]: {interest}.)",
    "[Once this is done|After this] I can [finally|] [get back to|make time for|think about] {interest}.",
    "[My evenings|My weekends|My free time] [have gone|went] to {interest} [lately|this month|recently], "
    "[so|which is why] the admin [waited|piled up|slid].",
    "{interest_cap} [takes|has taken] over my [week|evenings|weekend], [and|so] I want this [cleared|out of the "
    "way] [first|before the weekend|soon].",
    "[Honestly|Truthfully], I'd much rather be [thinking about|busy with] {interest} than [this|spreadsheets|"
    "file admin].",
    "[The plan for tonight|Tonight's plan|This weekend's plan] is {interest}, [not files|not this|with no laptop "
    "in sight].",
    "A friend from {interest} [laughed at|asked about|was horrified by] my filing system[, fair enough|, which "
    "stung a bit|].",
    "[I promised myself|The deal I made with myself]: [finish this|get this done], [then|and only then] "
    "{interest}.",
    "[Weekends|Evenings] are for {interest}[ - this is not weekend material|, not for this].",
]

WHY = [
    "The {project} [is due|deadline is|review is] {when}[, so this matters|, so I'm short on time|].",
    "[I've|We've] been [doing|fixing|redoing] this [manually|the slow way] for [weeks|months|ages|{weeks} "
    "weeks][ and it has to stop|, and I'm done|, and mistakes keep creeping in|].",
    "Last [time|month|quarter] [we|I] [got it wrong|missed a row|lost an afternoon to it|sent out the wrong "
    "numbers][, so|;] [let's not repeat that|this time it should be clean|I'm asking for help].",
    "[It feeds into|This is for|It's needed for] the {project}[, which starts {when}|, due {when}|].",
    "[We're|I'm] [behind on|catching up on|wrapping up] the {project}[ and this is the last bit|, this is "
    "one piece of it|].",
    "[If this isn't|Unless this is] [done|ready] by {when}, the {project} [slips|is late|gets delayed].",
    "This [eats|takes|costs me] [about|roughly|nearly] {hours} hours [a week|every week|each month][ at "
    "{place}|] and I [want them back|need it to stop].",
    "[Nobody else at|No one at] {place} [knows how to|has time to|wants to] [do|touch] this, [so it lands on "
    "me|so here I am|so it's mine to do|and that means me].",
    "[The|Our] {project} [kicks off|starts|goes live] {when}, and [this has to be in place|I need this settled|"
    "this is a blocker].",
    "[A mistake here|Getting this wrong] [means|would mean] [awkward questions from|a telling-off from|extra "
    "work for] {role}.",
    "[Twice now|More than once] a [small slip|typo|missed line] [in this|here] has [cost us|caused] [a day|a "
    "week of back-and-forth|an awkward call].",
    "{role_cap} [relies on|builds on|quotes from] this [every week|each month|in every report], so [errors "
    "travel|a slip spreads|mistakes multiply].",
    "[The auditors|An inspector|Our {project} sponsor] [may|will probably] [look at|ask for] this[ in {month}|], "
    "[which is why it matters|so no shortcuts].",
    "[I'm|We're] [tired of|done with] [redoing|patching] this by hand [every time|each {month}][, truly|].",
]

WORK = [  # the persona's working day: where they write from, what it is like
    "[I'm writing this|Typing this|This is being written] {moment}[ at {place}|], so [forgive the brevity|"
    "excuse any typos|bear with me].",
    "[Quick one|Sending this] {moment} - [it's been a day|{place} is chaos today|long day].",
    "[Right now|Today] I'm [stuck|buried] in the {project}, [so this is a "
    "hand-off|hence the delegation].",
    "My [only|one] [quiet moment|free slot] today is {moment}, [so|and] I'm [using it|writing "
    "this] now.",
    "[Things at|Life at] {place} [are|is] [hectic|busy|mad] [this week|right now|at the moment][, what with "
    "the {project}|].",
    "[At|In] {place} we [still|] [do|handle] the {things} [by hand|on paper|in one shared sheet][, which I'm "
    "trying to change|].",
    "{colleague} [normally|would usually] [take|do] [this|this part] [at {place}|for me], but [is away|is off "
    "sick|has a week off|is on leave] [until {when}|this week].",
    "[Most of|Much of] my [day|week] at {place} [goes to|is spent on] [people|the {project}|firefighting], "
    "[so|which means] [the admin waits|paperwork slides].",
    "[We're a small team|It's a small operation|We're tiny] [here in {city}|at {place}], so [the file work|the "
    "admin|this] [falls to me|is mine].",
    "[I only get to|I can only do|I only find time for] [tidying|admin|paperwork] like this {moment}[, which is not ideal|, so speed "
    "matters|].",
    "{weekday}s at {place} are [the worst|always busy|my long day], [and|so] [this keeps slipping|I'm handing "
    "this over|I need it off my desk].",
]

STORY = [  # something that happened in the persona's world, with their people, tools and things
    "{colleague} [moved|renamed|reorganised|re-exported] the {things} [last week|on Monday|yesterday] and "
    "[nothing lines up any more|I've been catching up since|I'm still untangling it].",
    "We [switched|moved] from {tool2} to {tool} [in {month}|last spring|this year], and [the files never quite "
    "recovered|half the old habits stuck|I'm still cleaning up after it].",
    "The {project} [meeting|call|review] [got moved|was pushed|was brought forward] to {when}[, which is why "
    "this is suddenly urgent|, so the timing changed|].",
    "[Back in|Since] {month} [I've|we've] [kept|tracked|logged] [everything|the {things}] [in two places|twice|"
    "in {tool} and on paper], [and it shows|which was a mistake|never again].",
    "{colleague} [asked|wondered|wanted to know] [whether|if] we could [automate|speed up|tidy up] [this|all "
    "this] [- so here I am|, and I said I'd try|; this is me trying|, and I volunteered|, which is how you got this].",
    "[Our|The] {city} [office|branch|team] [does|handles] the {things} [differently|their own way|in {tool2}], "
    "[which doesn't help|so nothing matches|so bear that in mind|and that never quite lines up|which makes merging fun].",
    "I [inherited|took over] [this|all this|the {things}] from {colleague} in {month}[, with no notes|, mid-"
    "way through the {project}|].",
    "{interest_cap} [aside|apart], [this week|my week] [is|has been] [all|mostly] {project}.",
    "[Yesterday|On {weekday}|This morning] {role} [asked about|queried] [one of the numbers|a figure|a date] and I "
    "[couldn't|could not] [find where it came from|answer straight away][ - embarrassing|].",
    "[Every|Each] {month} [the same thing happens|it's the same story|history repeats|we go through this]: [the files pile up|nobody owns this|"
    "the {things} drift out of date].",
]

FILES = [  # the other things the persona's files hold (their `files` globs, in words)
    "[It's|This is] [the same kind of|much the same] [mess|muddle|chore] as my {things}[ files|] - [different data, same "
    "headache|same problem, different day].",
    "[Next|After this] I'll [have to|need to] [tackle|deal with|sort out] the {things}, but [one thing at a time|"
    "that can wait|not today].",
    "[Next on my list|After this|Later on]: the {things}[, sadly|, by the way|].",
    "[Same story with|Don't get me started on] my {things}[ - that's for another day|; later].",
    "[If this works|If it goes well], I'll [bring you|ask about|do the same for] the {things} [next|after].",
    "[The|My] {things} [side of things is|files are] [a separate story|another job for another day|in "
    "better shape, thankfully][, so leave that for now|].",
    "[Compared with|Next to] my {things}, this [is the easy part|should be quick|is the bigger mess]"
    "[, I think|, honestly|].",
    "[As for|Meanwhile,] my {things}: [in decent shape|fine][, for once|, luckily|] - [unlike this|this is the "
    "worry].",
    "[Once this is tidy|With this done], [the {things} will be the last mess standing|I can face the {things}].",
    "[My|The] {things} can wait for another day; [today|this time] it's [just|only] this.",
]

EXPLAIN = [
    "I've tried to [be precise|spell everything out|be exact] about the [names|file names|details][ because last "
    "time things got mixed up| so nothing gets lost|].",
    "[I'll|Let me] [explain|describe|spell out] [exactly|] what I need below, [step by step|in order|as clearly as "
    "I can].",
    "I know it's [a lot of detail|long|a long message], but [I'd rather over-explain|better too much than too "
    "little|I want to be clear].",
    "[Please|Do] [take your time|read it all first], [the details matter|it's all important|nothing is optional].",
    "[Every detail below|Each bit below] is there for a reason[ - {role} is picky|, I promise|].",
    "[Sorry for the wall of text|Long message, I know] - [each line matters|I've been burnt before].",
    "[Read to the end|Skim it all once] before [starting|you start]; [the order matters|every line "
    "counts].",
    "I [numbered|split up] the parts so [nothing slips|it's easy to tick off][.|, hopefully.]",
]

APOLOGY = ["[Sorry|Apologies] if this is [confusing|a silly request|obvious|a lot].",
           "I'm not great with [computers|files|spreadsheets], sorry[.|!]",
           "[Sorry|Apologies] for the [long message|mess|rush][.|!]",
           "I hope I've explained this [right|properly|ok][.|...]",
           "[Forgive|Excuse] the [state of the files|chaos]; {place} has been [a lot|non-stop][.|!]",
           "[Bear with|Be patient with] me, I'm [no expert|new to this|rusty with files][.|!]",
           "[I know|I realise] this [is fiddly|might be tedious][, sorry|][.|!]",
           "[Not my strong suit, any of this|Files aren't my thing][.|, I'm afraid.]"]

HEDGES = ["[If possible|If you can|Ideally|If it's not too much trouble], [please|] [double-check|check] the "
          "[numbers|result|output] [before you finish|at the end|once you're done].",
          "I think [that's everything|that covers it|I got it all][, but tell me if not|].",
          "[Hopefully|I hope] [that makes sense|that's clear|this is clear enough].",
          "[Does that make sense|Is that clear enough|Clear enough]?",
          "[Ask|Shout] if [a name|something] [looks odd|doesn't match][ rather than guessing|].",
          "[Flag|Mention] anything [strange|unexpected] you [run into|notice][, please|].",
          "If [a rule|something] seems [contradictory|off], [tell me|say so] [rather than improvise|first].",
          "[Better|I'd rather have it] [right|correct] than fast[, honestly|]."]

# a workplace and a moment of the working day, by domain (flavor.domain_key)
PLACES = {
    "health": ["the ward", "the clinic", "the practice", "the unit", "the surgery"],
    "education": ["school", "the department", "the staff room", "campus", "the lab"],
    "food": ["the kitchen", "the restaurant", "the shop", "the bakery", "the café"],
    "software": ["the office", "work", "the team", "the lab", "the client site"],
    "finance": ["the office", "the firm", "the practice", "work", "the back office"],
    "farm": ["the farm", "the yard", "the barn", "the market", "the packing shed"],
    "creative": ["the studio", "the workshop", "the gallery", "the set", "rehearsals"],
    "legal": ["chambers", "the firm", "court", "the office", "the registry"],
    "general": ["work", "the office", "home", "the shop", "the site"],
}
MOMENTS = {
    "health": ["between rounds", "on my break", "after handover", "on a night shift", "between patients",
               "before clinic opens"],
    "education": ["between lessons", "in my free period", "after the bell", "while marking", "before assembly",
                  "during lunch duty"],
    "food": ["before service", "after close", "between lunch and dinner", "after the lunch rush",
             "on my one day off", "while the dough proves"],
    "software": ["between meetings", "while the build runs", "after standup", "between pages",
                 "before the release freeze", "while CI is red"],
    "finance": ["between client calls", "during close week", "after the bank run", "on my lunch break",
                "before month-end"],
    "farm": ["after milking", "between chores", "before the rain comes", "after feeding", "from the tractor cab",
             "after a long day outside"],
    "creative": ["between sessions", "while a render runs", "between commissions", "after rehearsal",
                 "before the next shoot"],
    "legal": ["between hearings", "after court", "between client meetings", "before the filing cut-off",
              "on the train to court"],
    "general": ["between meetings", "on my lunch break", "after hours", "on the train home", "late at night",
                "over breakfast"],
}

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
                   "Before anything else, ", "The first bit: ", "Job one: ", "Let's start here: ",
                   "Kick things off like this: "],
        "formal": ["To begin, ", "First, ", "As a first step, ", "Firstly, ", "Step 1: ", "To start with, ",
                   "The first task: ", "Initially, "],
        "terse": ["1st: ", "first ", "", "start: "],
    },
    "middle": {
        "casual": ["Then ", "Next, ", "After that, ", "Once that's done, ", "When that's finished, ",
                   "With that in place, ", "Then, once that's right, ", "Next up, ", "Moving on: ",
                   "That sorted, ", "Second bit: ", "On top of that, "],
        "formal": ["Next, ", "Subsequently, ", "Then, ", "Following that, ", "Once this is complete, ",
                   "After this, ", "Thereafter, ", "Having done that, ", "In addition, "],
        "terse": ["then ", "next: ", "after: ", "then: "],
    },
    "last": {
        "casual": ["Finally, ", "Last, ", "And last, ", "Lastly, ", "To finish, ", "To wrap up, ",
                   "Last thing: ", "And finally, ", "One more and we're done: ", "Finishing touch: ",
                   "Then, to close it off, "],
        "formal": ["Lastly, ", "Finally, ", "As a final step, ", "To conclude, ", "Last, ", "To complete the "
                   "request, ", "As the last item, "],
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


def _stem(word: str) -> str:
    """A word without a plural -s, so "price" and "prices" match."""
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


@dataclass
class Voice:
    """One request's voice: the persona, their register and quirks, and the RNG every choice is drawn from."""

    persona: Persona
    rng: random.Random
    reg: str = ""
    quirks: Quirks = field(default_factory=Quirks)
    avoid: str = ""  # the steps' text: the context never names, as some other chore, a file or folder they use

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
        g = self.draw(GREETINGS[self.reg], **self.slots) if GREETINGS[self.reg] else ""
        if self.reg == "terse":
            g = lowerfirst(g)
        if q.emoji and g and rng.random() < 0.5:
            g += " " + rng.choice(q.emoji)
        return self.say(g) if g and self.reg != "formal" else g

    @functools.cached_property
    def slots(self) -> dict:
        """The persona's facts the phrasings name, drawn once per request: who they are and where, one of their
        goals, tools and interests, what their files hold, a person waiting for the result and a colleague, a
        day, a project, a workplace and a moment of their working day (by domain)."""
        p, rng = self.persona, self.rng
        dom = _domain(p)
        person = flavor.person(rng)
        colleague = flavor.person(rng)
        role = rng.choice(_ROLES[dom])
        project = rng.choice(flavor.vocab(p.domain, p.occupation)["projects"])
        w = when(rng)
        if self.quirks.deadline_style == "bold":
            w = f"**{w}**"
        elif self.quirks.deadline_style == "caps":
            w = w.upper()
        occ = p.occupation
        tool = rng.choice(p.tools)
        others = [t for t in p.tools if t != tool]
        interest = first_person(rng.choice(p.interests), lower=False)
        things = [re.sub(r"[_-]+", " ", n).strip() for n in world.stems(p) + world.folders(p)]
        # "my {things} can wait" must not be about what the steps work on: no word of it (plural or not) in the
        # steps' text, paths read as words
        used = {_stem(w) for w in re.split(r"[\W_]+", self.avoid.casefold()) if w}

        def free(t: str) -> bool:
            return not any(_stem(w) in used for w in re.split(r"[\W_]+", t.casefold()) if len(w) >= 2)

        things = [t for t in things if t and not t.startswith(".") and free(t)] or \
            [t for t in flavor.vocab(p.domain, p.occupation)["items"] if free(t)] or \
            flavor.vocab(p.domain, p.occupation)["items"]
        daypart = rng.choice(["morning", "afternoon", "evening"])
        return {
            "a_occ": f"{article(occ)} {occ}", "occ_cap": occ[:1].upper() + occ[1:], "occ_low": occ.casefold(),
            "occ": occ, "city": p.location.split(",")[0], "domain": p.domain, "name": p.name,
            "first": self.first, "first_low": self.first.casefold(),
            "goal": first_person(rng.choice(p.goals)), "person": person, "colleague": colleague, "role": role,
            "role_cap": role[:1].upper() + role[1:], "when": w, "project": project,
            "tool": tool, "tool2": rng.choice(others) if others else "email",
            "a_tool": f"{article(tool)} {tool}",
            "interest": interest, "interest_cap": interest[:1].upper() + interest[1:],
            "things": rng.choice(things), "item": rng.choice(flavor.vocab(p.domain, p.occupation)["items"]),
            "place": rng.choice(PLACES[dom]), "moment": rng.choice(MOMENTS[dom]),
            "weekday": rng.choice(_WEEKDAYS[:5]), "daypart": daypart, "daypart_low": daypart,
            "hours": rng.choice(["two", "three", "four", "five", "six"]),
            "weeks": rng.choice(["three", "six", "eight", "ten"]), "month": rng.choice(_MONTHS),
        }

    def context(self) -> tuple[list[str], list[str]]:
        """The persona's context sentences: (before the steps, after them)."""
        rng, q, reg = self.rng, self.quirks, self.reg
        slots = self.slots
        terse = reg == "terse"
        kinds: list[str] = []
        p_goal, p_for, p_tool, p_life, p_why, p_work, p_files, p_story = (
            (0.5, 0.4, 0.15, 0.1, 0.3, 0.3, 0.1, 0.2) if terse else (0.85, 0.55, 0.45, 0.35, 0.5, 0.5, 0.25, 0.6))
        if q.over_explain:
            p_for, p_tool, p_life, p_why, p_work, p_story = 0.6, 0.5, 0.5, 0.6, 0.5, 0.6
        for kind, p in (("for", p_for), ("tool", p_tool), ("life", p_life), ("why", p_why), ("work", p_work),
                        ("files", p_files), ("story", p_story)):
            if rng.random() < p:
                kinds.append(kind)
        rng.shuffle(kinds)
        if rng.random() < p_goal:
            kinds.insert(0 if rng.random() < 0.75 else min(1, len(kinds)), "goal")
        pools = {"goal": GOAL[self.style], "for": FOR_WHOM, "tool": TOOL, "life": LIFE, "why": WHY, "work": WORK,
                 "files": FILES, "story": STORY}
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
            sentences.append(("sorry", self.draw(APOLOGY, **slots)))
        if q.over_explain or (reg == "anxious" and rng.random() < 0.4):
            sentences.append(("explain", self.draw(EXPLAIN, **slots)))
        after: list[str] = []
        before: list[str] = []
        for kind, s in sentences:
            # a life detail or the deadline sometimes comes after the steps, as people add it at the end
            if kind in ("life", "for", "why", "files") and rng.random() < 0.25:
                after.append(("P.S. " if kind in ("life", "files") and rng.random() < 0.5 else "") + s)
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
            out.append(self.draw(HEDGES, **self.slots))
        names = {"first": self.first, "name": self.persona.name, "initial": self.first[0],
                 "first_low": self.first.casefold()}
        sign = ""
        if q.signoffs and rng.random() < 0.85:
            sign = rng.choice(q.signoffs)
            if rng.random() < 0.4 and self.first not in sign and "," not in sign \
                    and not re.search(r"\b[A-Z]\.", sign):
                sign += ("\n" if rng.random() < 0.5 else " ") + self.first
        elif rng.random() < (0.35 if reg == "terse" else 0.55):
            sign = self.draw(SIGNOFFS[reg], **(self.slots | names))
            sign = sign.lower() if q.lowercase else sign
        # a sign-off with its own valediction ("Kind regards,\nName") takes no second one as the closing line
        closings = [c for c in CLOSINGS[reg] if not (("," in sign or "\n" in sign) and _VALEDICTION.match(c))]
        if q.thanks and rng.random() < 0.6 and not ("," in sign or "\n" in sign):
            close = rng.choice(q.thanks)
        else:
            close = self.draw(closings, **self.slots) if rng.random() < 0.85 and closings else ""
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


def open_voice(persona: Persona, rng: random.Random, n_steps: int = 1, avoid: str = "") -> Opening:
    """The voice of a request of `n_steps` steps: greeting, TL;DR, the context before the steps and the part of it
    kept for after them. The steps' joining and the closing are drawn next, from the same RNG, by
    :func:`compose_request`."""
    v = Voice(persona, rng, avoid=avoid)
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
    op = open_voice(persona, rng, len(frags), avoid=" ".join(frags))
    v = op.voice
    steps = v.join_steps(frags, outputs)
    closing = v.closing()
    parts = op.head + list(middle or []) + steps + op.tail + closing
    parts = [p for p in parts if p]
    wide = v.reg in ("formal", "anxious") or len(frags) > 2 or any("\n" in s for s in steps)
    sep = "\n\n" if (wide and rng.random() < 0.8) or rng.random() < 0.25 else "\n"
    return sep.join(parts)
