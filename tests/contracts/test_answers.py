"""The answer extractor: each rule, its order, the two-choices case, strict vs lenient."""

from __future__ import annotations

import pytest

from harness.contracts.answers import (
    AMBIGUOUS,
    ANSWER_MODES,
    ANSWER_PHRASE,
    CHOICE_TEXT,
    FINAL_LETTER,
    LEADING_LETTER,
    NONE,
    STRICT,
    designated_letter,
    extract_answer,
)

CHOICES = ("Paris", "London", "Cairo", "Rome")


@pytest.mark.parametrize(
    "reply, letter, mode",
    [
        ("Reasoning: ...\nANSWER: B", "B", STRICT),
        ("answer: (C)", "C", STRICT),
        ("C", "C", LEADING_LETTER),
        ("(C)", "C", LEADING_LETTER),
        ("**B**", "B", LEADING_LETTER),
        ("B) London", "B", LEADING_LETTER),
        ("C. Cairo is the capital of Egypt.", "C", LEADING_LETTER),
        ("Option D", "D", LEADING_LETTER),
        ("The answer is C.", "C", ANSWER_PHRASE),
        ("I am fairly sure the correct answer is Cairo.", "C", ANSWER_PHRASE),
        ("It must be Rome, home of the Colosseum.", "D", CHOICE_TEXT),
        ("Let me think about it.\nSo my pick: D", "D", FINAL_LETTER),
    ],
)
def test_each_rule_reads_its_form(reply, letter, mode):
    got = extract_answer(reply, CHOICES)
    assert got.mode == mode
    assert designated_letter(got.answer, CHOICES) == letter


@pytest.mark.parametrize(
    "reply",
    [
        "A. Paris\nB. London",  # a list of two choices
        "B. London. No wait, the answer is C",  # the leading letter and the phrase disagree
        "D. Cairo",  # the letter says Rome, the text says Cairo
        "ANSWER: A\nANSWER: B",  # two ANSWER lines naming different choices
    ],
)
def test_a_reply_that_designates_two_choices_is_no_answer(reply):
    got = extract_answer(reply, CHOICES)
    assert got.answer is None and got.mode == AMBIGUOUS


def test_agreeing_rules_are_not_ambiguous():
    assert extract_answer("C. Cairo. The answer is C", CHOICES).answer == "C"
    assert extract_answer("ANSWER: B\nANSWER: (B)", CHOICES).mode == STRICT


@pytest.mark.parametrize("reply", ["Paris or London, hard to say", "I do not know", "", "I"])
def test_unreadable_replies_have_no_answer(reply):
    for parsing in ("strict", "lenient"):
        got = extract_answer(reply, CHOICES, parsing)
        assert (got.answer, got.mode) == (None, NONE)


def test_strict_reads_only_the_answer_line():
    for reply in ("C", "The answer is C.", "C. Cairo"):
        assert extract_answer(reply, CHOICES, "strict").mode == NONE
        assert extract_answer(reply, CHOICES, "strict").answer is None
    assert extract_answer("ANSWER: C", CHOICES, "strict").answer == "C"


def test_lower_case_words_are_not_letters():
    assert extract_answer("a good question; I cannot tell", ("x", "y", "z", "w")).answer is None
    assert extract_answer("A man walks into Paris", CHOICES).mode == CHOICE_TEXT  # "A" is the article here


def test_letters_beyond_the_choices_are_ignored():
    assert extract_answer("E", ("x", "y")).answer is None
    assert extract_answer("the answer is E", ("x", "y")).answer is None


def test_free_form_reads_the_answer_line_or_phrase():
    assert extract_answer("ANSWER: Juneau", ()).answer == "Juneau"
    assert extract_answer("I think the answer is Juneau. Done.", ()).answer == "Juneau"
    assert extract_answer("Juneau", (), "lenient").answer is None


def test_choice_text_prefers_the_longer_overlapping_choice():
    choices = ("12", "12 apples", "3 pears")
    assert extract_answer("You get 12 apples in total.", choices).answer == "B"


def test_bad_mode_is_refused_with_the_key():
    with pytest.raises(ValueError, match="benchmark.answer_parsing"):
        extract_answer("A", CHOICES, "fuzzy")


def test_modes_are_listed():
    assert set(ANSWER_MODES) == {STRICT, LEADING_LETTER, ANSWER_PHRASE, CHOICE_TEXT, FINAL_LETTER, AMBIGUOUS, NONE}


def test_parse_shares_name_every_mode_and_the_failure_rate():
    from harness.contracts.answers import parse_shares

    shares = parse_shares({STRICT: 2, LEADING_LETTER: 5, AMBIGUOUS: 2, NONE: 1})
    assert set(shares) == {f"parse_share_{m}" for m in ANSWER_MODES} | {"parse_failure_rate"}
    assert shares["parse_share_leading_letter"] == 0.5 and shares["parse_share_final_letter"] == 0.0
    assert shares["parse_failure_rate"] == 0.3  # ambiguous + none
    assert sum(v for k, v in shares.items() if k.startswith("parse_share_")) == pytest.approx(1.0)
    assert set(parse_shares({}).values()) == {None}  # nothing judged: absent, never 0
    with pytest.raises(ValueError, match="unknown answer parse mode"):
        parse_shares({"guessed": 1})


def test_unreadable_answers_stop_with_one_line_naming_model_share_and_example():
    from harness.contracts.answers import AnswerFormatError, check_answer_format

    replies = [(NONE, "Sure! Here is\nmy   reply about it"), (AMBIGUOUS, "A. London\nB. Dublin"), (LEADING_LETTER, "C. Cairo")]
    check_answer_format(replies, 0.7, model="m", where="step rollout r_e1_s1")  # 2/3 = 0.67 <= 0.7: no stop
    check_answer_format([], 0.0, model="m", where="x")  # nothing judged: nothing to say
    with pytest.raises(AnswerFormatError) as err:
        check_answer_format(replies, 0.5, model="smollm2", where="step rollout r_e1_s1")
    message = str(err.value)
    assert "\n" not in message
    assert "'smollm2'" in message and "2 of 3" in message and "67%" in message and "max_unparsed_share=0.5" in message
    assert "Sure! Here is my reply about it" in message  # the first unreadable reply, whitespace collapsed
