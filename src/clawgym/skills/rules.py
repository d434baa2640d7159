"""Offline annotation of a skill by rules: keyword evidence in its name, description and body.

The rules are deliberately simple and explainable; `tests/test_skills.py` measures how often they agree with
the hand-written annotations of the shipped catalog. An LLM annotates better (see
:mod:`clawgym.skills.annotate`); the rules are the fallback when there is no model or its answer is unusable.
"""

from __future__ import annotations

import functools
import re
from collections import Counter

from clawgym.core.taxonomy import Taxonomy
from clawgym.skills.skill import Skill, SkillAnnotations

MAX_OPERATIONS = 4


def operation_patterns(taxonomy: Taxonomy) -> dict[str, list[re.Pattern]]:
    """Operation id -> its compiled ``skill_patterns`` (matched case-insensitively from a word boundary), as the
    taxonomy's operation lines declare them."""
    return _compiled(tuple((op.id, tuple(op.skill_patterns)) for op in taxonomy.operations))


@functools.cache
def _compiled(declared: tuple[tuple[str, tuple[str, ...]], ...]) -> dict[str, list[re.Pattern]]:
    return {op: [re.compile(rf"\b{p}", re.IGNORECASE) for p in pats] for op, pats in declared if pats}


STOPWORDS = {
    "en": "the and to of a in is you for that with this it on are be or as your from if not",
    "de": "der die das und ist nicht mit sie ein eine zu den auf für von sich dem auch wird werden oder",
    "fr": "le la les et est des une pour que dans pas sur vous avec ce qui du au par sont",
    "es": "el la los las y es de que en un una para con por no se del al su como",
    "it": "il lo la gli le e di che un una per con non sono del della nel come si",
    "pt": "o a os as e de que em um uma para com não do da no na por se",
    "nl": "de het een en van is dat op te met voor niet zijn je aan als ook",
}
_STOP = {lang: set(words.split()) for lang, words in STOPWORDS.items()}

COMMON_ENV = frozenset({"VAR", "NAME", "VALUE", "FOO", "BAR", "KEY", "HOME", "PATH", "PWD", "OLDPWD", "USER", "SHELL", "TMPDIR", "TMP", "TEMP", "LANG", "LC_ALL",
                        "TZ", "EDITOR", "TERM", "HOSTNAME", "IFS", "PS1", "CI", "DISPLAY", "PYTHONPATH", "VIRTUAL_ENV"})
SECRET_ENV = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASS|CREDENTIALS?|AUTH|CLIENT_ID)$")
_ENV_USES = (
    re.compile(r"\$\{?([A-Z][A-Z0-9_]{2,})\}?"),
    re.compile(r"(?:os\.environ(?:\.get)?[\[(]|getenv\()\s*['\"]([A-Z][A-Z0-9_]{2,})['\"]"),
    re.compile(r"\bexport ([A-Z][A-Z0-9_]{2,})="),
)

AUTH_PATTERNS = [re.compile(p, re.IGNORECASE) for p in (
    r"\b(requires?|needs?|with|set|using) (an? |your |the )?(api[ _-]?key|access token|personal access token|"
    r"oauth( token)?|bearer token|app password)",
    r"\blog(ged)? ?in (to|with)\b", r"\bsign(ed)? in (to|with)\b", r"\bauthenticat(e|ed|ion) (with|to|against)\b",
    r"\b(gh|gcloud|az|aws) auth\b",
)]
RISK_PATTERNS = [re.compile(p, re.IGNORECASE) for p in (
    r"rm -rf", r"--force\b", r"\bforce[- ]push", r"\bdrop (table|database)", r"\bsudo\b",
    r"\bsend(s|ing)? (the |an |each |every )?(e-?mails?|messages?|reply|replies)\b", r"\bsmtp\b",
    r"\bpublish(es|ing)? (it |them |the \w+ )?(to|on) ", r"\bpost(s|ing)? (it |them )?to (a |the )?(channel|slack|api|server)",
    r"\b(make|makes|making|send|sends|execute|executes) (a |the )?payments?", r"\bpurchas",
    r"\btransfer(s|ring)? (money|funds)", r"\bgit push\b", r"\bplaces? an order", r"\bsubmit(s|ting)? (the |a )?forms?\b",
    r"\birreversibl", r"\bpermanently delet", r"cannot be (undone|taken back)",
)]
NON_TEXT_PATTERNS = [re.compile(p, re.IGNORECASE) for p in (
    r"\bbrowser\b", r"\bscreenshots?\b", r"\bclick(s|ing)?\b", r"\bgui\b", r"\bocr\b", r"\baudio\b",
    r"\bspeech\b", r"\bmicrophone\b", r"\bcamera\b", r"\bwebcam\b", r"\bimage recognition\b", r"\bvision model\b",
    r"\bplaywright\b", r"\bselenium\b", r"\bpuppeteer\b",
)]
GUI_BINS = frozenset({"osascript", "open", "xdotool", "chromium", "chrome", "google-chrome", "firefox", "playwright",
                      "peekaboo", "screencapture", "tesseract", "ffmpeg", "say", "whisper"})


def _sentences(text: str) -> str:
    return " ".join(text.split())


def operation_scores(skill: Skill, taxonomy: Taxonomy) -> Counter:
    """Evidence per operation of the taxonomy: a match of its skill patterns in the name or description counts 3,
    each in the body 1 (at most 3)."""
    head = f"{skill.name.replace('-', ' ').replace('_', ' ')} {skill.description}"
    body = skill.body
    scores: Counter = Counter()
    for op, pats in operation_patterns(taxonomy).items():
        s = 0
        for p in pats:
            s += 3 * len(p.findall(head)) + min(3, len(p.findall(body)))
        if s:
            scores[op] = s
    return scores


def rule_operations(skill: Skill, taxonomy: Taxonomy) -> list[str]:
    """Up to four operations with the strongest evidence (at least one: the best, however weak)."""
    order = {op.id: i for i, op in enumerate(taxonomy.operations)}
    scores = operation_scores(skill, taxonomy)
    ranked = sorted((op for op in scores if op in order), key=lambda op: (-scores[op], order[op]))
    if not ranked:
        # no keyword at all: the operation whose description shares most words with the skill's description
        words = set(re.findall(r"[a-z]{4,}", skill.description.lower()))
        ranked = sorted(order, key=lambda op: (-len(words & set(re.findall(
            r"[a-z]{4,}", taxonomy.operation(op).description.lower()))), order[op]))
        return ranked[:1]
    best = scores[ranked[0]]
    return [op for op in ranked if scores[op] >= max(3, 0.4 * best)][:MAX_OPERATIONS] or ranked[:1]


def detect_language(text: str) -> str:
    """ISO 639-1 code from the script, then from stop-word counts among Latin-script languages."""
    letters = [c for c in text if c.isalpha()]
    if not letters:
        return "en"
    n = len(letters)

    def share(lo: int, hi: int) -> float:
        return sum(1 for c in letters if lo <= ord(c) <= hi) / n

    if share(0x3040, 0x30FF) > 0.05:
        return "ja"
    if share(0xAC00, 0xD7AF) > 0.1:
        return "ko"
    if share(0x4E00, 0x9FFF) > 0.1:
        return "zh"
    if share(0x0400, 0x04FF) > 0.3:
        return "ru"
    if share(0x0600, 0x06FF) > 0.3:
        return "ar"
    if share(0x0370, 0x03FF) > 0.3:
        return "el"
    words = re.findall(r"[a-zà-öø-ÿ]+", text.lower())
    counts = {lang: sum(1 for w in words if w in stop) for lang, stop in _STOP.items()}
    best = max(counts, key=lambda k: (counts[k], k == "en"))
    return best if counts[best] > 0 else "en"


def required_env(skill: Skill) -> list[str]:
    """Declared variables (OpenClaw metadata) first, then the ones the body uses, common shell ones left out."""
    names = list(skill.declared_env)
    for pat in _ENV_USES:
        for m in pat.finditer(skill.body):
            name = m.group(1)
            if name not in COMMON_ENV and name not in names:
                names.append(name)
    return names


def _hits(patterns: list[re.Pattern], text: str) -> int:
    return sum(1 for p in patterns if p.search(text))


NEGATION = re.compile(r"\b(never|don't|do not|not|without|unless|no)\b", re.IGNORECASE)


def _affirmed_hits(patterns: list[re.Pattern], text: str) -> int:
    """Patterns matched on a line that is not negated, under a heading that is not negated either ("## Never
    without permission" makes `git push --force` below it a warning, not something the skill does)."""
    heading = ""
    hit: set[int] = set()
    for line in text.splitlines():
        if line.startswith("#"):
            heading = line
        if NEGATION.search(line) or NEGATION.search(heading):
            continue
        hit.update(i for i, p in enumerate(patterns) if i not in hit and p.search(line))
    return len(hit)


def summary_of(skill: Skill) -> str:
    """The description's first sentence, at most 200 characters."""
    desc = _sentences(skill.description)
    m = re.match(r"(.+?[.!?])(\s|$)", desc)
    first = m.group(1) if m else desc
    if len(first) > 200:
        first = first[:197].rsplit(" ", 1)[0].rstrip(",;:") + "..."
    return first if first[-1:] in ".!?" else first + "."


def rule_annotations(skill: Skill, taxonomy: Taxonomy, note: str | None = None) -> SkillAnnotations:
    """All of ClawGym's annotations of a skill, by rules."""
    text = f"{skill.description}\n{skill.body}"
    env = required_env(skill)
    auth = any(SECRET_ENV.search(e) for e in env) or _hits(AUTH_PATTERNS, text) >= 1
    risk = _affirmed_hits(RISK_PATTERNS, text) >= 1
    oc = skill.openclaw
    os_only = oc.get("os") if isinstance(oc.get("os"), list) else None
    non_text = (any(b in GUI_BINS for b in skill.declared_bins) or _hits(NON_TEXT_PATTERNS, text) >= 2
                or (os_only is not None and os_only and "linux" not in os_only))
    return SkillAnnotations(
        operations=rule_operations(skill, taxonomy), language=detect_language(f"{skill.description}\n{skill.body}"),
        summary=summary_of(skill), auth_required=auth, has_risk=risk, required_env=env,
        text_only_compatible=not non_text, annotated_by="rules", note=note,
    )
