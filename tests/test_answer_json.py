"""The one parser for JSON in model answers (clawgym.core.answer_json), used by the judge, the LLM task route
(answers and reviews) and skill annotation."""

import pytest

from clawgym.core.answer_json import AnswerJSONError, answer_json, fenced_blocks, iter_json, strip_reasoning


def test_plain_object():
    assert answer_json('{"score": 1, "reason": "ok"}') == {"score": 1, "reason": "ok"}


@pytest.mark.parametrize("text", [
    '<think>draft: {"score": 0}</think>{"score": 1}',
    '<think>\nmulti\nline {"score": 0}\n</think>\n\n{"score": 1}',
    '<THINKING>x</THINKING> {"score": 1}',
    '<think>a</think><think>b {"score": 0}</think>{"score": 1}',
    # the chat template opened the block in the prompt: only its end is in the answer
    'the draft says {"score": 0}\n</think>\n{"score": 1}',
])
def test_closed_think_blocks_are_not_the_answer(text):
    assert answer_json(text) == {"score": 1}


def test_unclosed_leading_think_is_all_reasoning():
    # cut off by max_tokens while thinking: a draft inside it is not an answer
    assert strip_reasoning('<think>maybe {"score": 0.5}, let me check') == ""
    with pytest.raises(AnswerJSONError, match=r"only a <think> block"):
        answer_json('  <think>maybe {"score": 0.5}, let me check')


def test_strip_reasoning_keeps_the_answer():
    assert strip_reasoning("<think>x</think>answer") == "answer"
    assert strip_reasoning("answer") == "answer"
    assert strip_reasoning(None) == ""


@pytest.mark.parametrize("text", [
    '```json\n{"a": 1}\n```',
    '```JSON\n{"a": 1}\n```',
    '```\n{"a": 1}\n```',
    '```js {"a": 1}```',
    '```python\n{"a": 1}\n```',
    'Here you go:\n```json\n{"a": 1}\n```\nHope it helps!',
    '<think>plan</think>\n```json\n{"a": 1}\n```',
])
def test_code_fences(text):
    assert answer_json(text) == {"a": 1}


def test_fenced_blocks_drop_the_language_tag():
    assert fenced_blocks('x ```json\n[1]\n``` y ```\n{}\n```') == ["[1]", "{}"]


@pytest.mark.parametrize("text", [
    'Sure! Here is the object: {"a": 1, "b": [1, 2]} -- done.',
    'Result:\n{"a": 1, "b": [1, 2]}',
    'first a broken one {"a": oops} then {"a": 1, "b": [1, 2]}',
])
def test_prose_around_json(text):
    assert answer_json(text)["a"] == 1


def test_braces_and_quotes_inside_strings():
    text = 'ok: {"msg": "a } brace and a { and \\"quoted }\\" text", "n": {"deep": {"x": "}"}}} trailing }'
    assert answer_json(text) == {"msg": 'a } brace and a { and "quoted }" text', "n": {"deep": {"x": "}"}}}


def test_the_first_object_wins_and_nested_ones_are_not_yielded_again():
    text = 'one {"a": {"b": 1}} two {"c": 2}'
    assert answer_json(text) == {"a": {"b": 1}}
    assert list(iter_json(text)) == [{"a": {"b": 1}}, {"c": 2}]


def test_arrays_when_asked_for():
    assert answer_json("the list: [1, {\"a\": 2}] end", list) == [1, {"a": 2}]
    assert answer_json('```json\n["x"]\n```', (dict, list)) == ["x"]
    # an object is asked for: the object inside an array is found, not the array
    assert answer_json('[{"a": 1}]') == {"a": 1}


def test_lenient_reads_python_dicts_and_trailing_commas():
    assert list(iter_json("{'score': 0.5}")) == []
    assert list(iter_json("{'score': 0.5} and {\"a\": 1,}", lenient=True)) == [{"score": 0.5}, {"a": 1}]


@pytest.mark.parametrize("text, match", [
    ("", r"\(it is empty\)$"),
    ("   \n", r"\(it is empty\)$"),
    ("no json here", r"holds no JSON object; it starts: 'no json here'"),
    ('{"a": 1,, }', r"holds no JSON object; it starts"),
    ("[1, 2]", r"it is JSON, but an array"),
    ('"just a string"', r"it is JSON, but a string"),
    ("42", r"it is JSON, but a number"),
])
def test_invalid_or_missing_json_is_a_clear_error(text, match):
    with pytest.raises(AnswerJSONError, match=match) as info:
        answer_json(text)
    assert isinstance(info.value, ValueError)


def test_the_excerpt_is_short_and_on_one_line():
    with pytest.raises(AnswerJSONError) as info:
        answer_json("word\n" * 200)
    assert len(info.value.excerpt) < 130 and "\n" not in info.value.excerpt


def test_the_judge_reads_answers_through_the_same_parser():
    from clawgym.verify import parse_judgment

    p = parse_judgment('<think>score: 0 maybe')  # cut off while thinking: no score, a re-ask follows
    assert p.score is None and "only a <think> block" in (p.error or "")
    assert parse_judgment("").error == "empty answer"
    assert parse_judgment('draft score: 0\n</think>\n{"score": 1}').score == 1.0
    assert parse_judgment('```python\n{"score": 0.75, "reason": "ok"}\n```').method == "fence"
