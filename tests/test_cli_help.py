"""``jaxgrid --help`` lists every subcommand with a line saying what it does, and no help
text shows the reStructuredText of the docstrings it comes from (``jaxgrid --help`` used to
print the module docstring's double backticks and ``:class:`` roles verbatim)."""

import argparse
import re

import pytest

from jaxgrid.cli import build_parser, main

MARKUP = re.compile(r"``|:[a-z]+(?::[a-z]+)?:`")  # ``code``, :class:`...`, :py:func:`...`


def subcommands() -> list[str]:
    """The subcommands registered in the parser."""
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return list(sub.choices)


def help_text(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exit_:
        main([*argv, "--help"])
    assert exit_.value.code == 0
    return capsys.readouterr().out


def test_top_level_help_lists_every_subcommand_with_a_description(capsys):
    text = help_text([], capsys)
    names = subcommands()
    assert {"list", "demo", "train", "eval", "render"} <= set(names)
    for name in names:  # "  name   what it does", one line each
        assert re.search(rf"^ +{name} +\S", text, re.MULTILINE), f"{name} missing:\n{text}"
    # the docstring's markup is converted, not its words dropped
    words = " ".join(text.split())  # the description is wrapped to the terminal's width
    assert "UserError" in words and "jaxgrid: error: ..." in words


@pytest.mark.parametrize("argv", [[]] + [[name] for name in subcommands()])
def test_help_texts_have_no_restructuredtext(argv, capsys):
    text = help_text(argv, capsys)
    assert not MARKUP.search(text), f"jaxgrid {' '.join(argv)} --help:\n{text}"


def test_terminal_text_keeps_what_the_markup_names():
    from jaxgrid.cli import _terminal

    assert _terminal(":class:`~jaxgrid.errors.UserError`") == "UserError"
    assert _terminal(":func:`jaxgrid.make`") == "jaxgrid.make"
    assert _terminal(":py:meth:`~jaxgrid.env.Environment.step`") == "step"
    assert _terminal(":doc:`the guide <training>`") == "the guide"
    assert _terminal("``list`` or ``jaxgrid: error: ...``") == "list or 'jaxgrid: error: ...'"
