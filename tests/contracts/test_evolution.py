import pytest

from harness.contracts.evolution import (
    ReplyFormatError,
    parse_diagnosis,
    parse_edit_ops,
    parse_guidance,
)


def test_parse_diagnosis():
    assert parse_diagnosis("x <diagnosis>\n It missed\n the clock. </diagnosis> y") == "It missed the clock."
    with pytest.raises(ReplyFormatError, match="no|none"):
        parse_diagnosis("It missed the clock.")
    with pytest.raises(ReplyFormatError, match="empty"):
        parse_diagnosis("<diagnosis>  </diagnosis>")


def test_parse_edit_ops_all_ops():
    reply = (
        '<edit op="add"><new>Count twice.</new><why>miscounts</why></edit>\n'
        "<edit op='replace'><old>Be fast.</old><new>Be careful.</new></edit>\n"
        '<edit op="delete"><old>Guess.</old></edit>\n'
        '<edit op="add">Bare text rule.</edit>'
    )
    ops = parse_edit_ops(reply)
    assert ops.no_change is None
    assert [(e.op, e.text, e.old) for e in ops.edits] == [
        ("add", "Count twice.", ""),
        ("replace", "Be careful.", "Be fast."),
        ("delete", "", "Guess."),
        ("add", "Bare text rule.", ""),
    ]
    assert ops.edits[0].rationale == "miscounts"


def test_parse_no_change_and_unknown_op_passes_through():
    assert parse_edit_ops("<no-change>fine as is</no-change>").no_change == "fine as is"
    assert parse_edit_ops('<edit op="rename"><new>x</new></edit>').edits[0].op == "rename"


@pytest.mark.parametrize(
    "reply, message",
    [
        ("I would add a rule about counting.", "found neither"),
        ('<edit op="add"><new>x</new>', "unclosed"),
        ("<edit><new>x</new></edit>", "no op="),
        ('<edit op="replace"><new>x</new></edit>', "no <old>"),
        ('<edit op="replace"><old>x</old></edit>', "no <new>"),
        ('<edit op="delete"><new>x</new></edit>', "no <old>"),
        ('<edit op="add"><why>x</why></edit>', "no <new>"),
        ('<edit op="add"><new>x</new></edit><no-change>n</no-change>', "both"),
    ],
)
def test_parse_edit_ops_format_errors(reply, message):
    with pytest.raises(ReplyFormatError, match=message):
        parse_edit_ops(reply)


def test_parse_guidance():
    assert parse_guidance("<guidance>\n- a  b\n* c\n1. d\n\n</guidance>") == "- a b\n- c\n- d"
    with pytest.raises(ReplyFormatError, match="found none"):
        parse_guidance("- a")
    with pytest.raises(ReplyFormatError, match="no bullet"):
        parse_guidance("<guidance>\n\n</guidance>")
