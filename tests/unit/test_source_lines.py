"""What a changed line of Python is: inside a function or run at import, deletable on its own, and the
source with its comments stripped and re-formatted (workers/verification/source_lines.py)."""

from __future__ import annotations

import ast

import pytest

from workers.verification.source_lines import deletes_statements, function_body_lines, mutant, stripped

SOURCE = '''\
import re  # a comment
MARKER = "fixed"


@staticmethod
def f(x):
    """doc"""
    if x > 1:  # FIXED: the bound
        return 1
    elif x < 0:
        return 2
    try:
        y = int("é")
    except ValueError:
        y = 0
    return y


class K:
    Y = 2

    def g(self, n=len("default runs on import")):
        return [
            n,
        ]


check = lambda: MARKER  # noqa: E731
'''


def test_function_body_lines_are_what_runs_only_when_called() -> None:
    inside = function_body_lines(SOURCE)
    assert {7, 8, 9, 10, 11, 12, 13, 14, 15, 16} <= inside  # f's body
    assert {23, 24, 25} <= inside  # the method's body
    # the import, the constant, the decorator, the def lines (defaults included), the class body and a
    # module-level lambda all run on import
    assert inside.isdisjoint({1, 2, 5, 6, 19, 20, 22, 28})
    assert function_body_lines("def broken(:\n") == set()


@pytest.mark.parametrize(
    ("line", "before", "after"),
    [
        pytest.param(1, "import re  # a comment", "pass  # a comment", id="module-level-import"),
        pytest.param(2, 'MARKER = "fixed"', "pass", id="module-level-constant"),
        pytest.param(9, "        return 1", "        pass", id="a-statement"),
        pytest.param(10, "    elif x < 0:", "    elif False:", id="an-elif-branch"),
        pytest.param(14, "    except ValueError:", "    except ():", id="an-except-clause"),
        pytest.param(5, "@staticmethod", "", id="a-decorator"),
    ],
)
def test_mutant_deletes_one_line_and_still_compiles(line: int, before: str, after: str) -> None:
    out = mutant(SOURCE, line)
    assert out is not None
    compile(out, "<mutant>", "exec")
    assert SOURCE.splitlines()[line - 1] == before and out.splitlines()[line - 1] == after


def test_mutant_of_a_decorated_def_line_takes_its_decorators() -> None:
    out = mutant(SOURCE, 6)
    assert out is not None and "staticmethod" not in out and "def f" not in out
    assert out.splitlines()[4] == "pass"


def test_mutant_of_a_compound_statement_deletes_all_of_it() -> None:
    out = mutant(SOURCE, 8)  # the if/elif
    assert out is not None and "return 1" not in out and "return 2" not in out
    assert "    pass" in out.splitlines()
    multi = mutant(SOURCE, 23)  # a statement over three lines
    assert multi is not None and "n,\n" not in multi


def test_mutant_counts_columns_in_bytes() -> None:
    # "é" is two bytes: a character-indexed splice would cut the line in the wrong place
    out = mutant('def f():\n    s = "é"; t = "é"\n    return s\n', 2)
    assert out == 'def f():\n    pass; t = "é"\n    return s\n'


def test_mutant_of_a_case_never_matches() -> None:
    match = (
        "def f(x):\n    match x:\n        case 1:\n            return 1\n"
        "        case 2 if x:\n            return 2\n"
    )
    plain, guarded = mutant(match, 3), mutant(match, 5)
    assert plain is not None and "        case 1 if False:" in plain.splitlines()
    assert guarded is not None and "        case 2 if False:" in guarded.splitlines()


def test_no_mutant_where_nothing_deletable_starts() -> None:
    assert mutant(SOURCE, 3) is None  # a blank line
    assert mutant(SOURCE, 999) is None
    assert mutant("def broken(:\n", 1) is None


def test_stripped_has_no_comment_and_is_reformatted() -> None:
    out = stripped(SOURCE)
    assert "#" not in out and "FIXED" not in out and "a comment" not in out
    assert ast.dump(ast.parse(out)) == ast.dump(ast.parse(SOURCE))  # what runs is the same
    assert "'é'" in out and '"é"' not in out  # re-formatted: the spelling a test could match is gone
    assert "return [n]" in out
    assert stripped("def broken(:\n") == "def broken(:\n"  # what does not parse is left as it is


def test_a_comment_only_deletion_deletes_no_statement() -> None:
    old = "def f():\n    # TODO the bug is here\n    x = 1\n    return x\n"
    assert not deletes_statements(old, {2})
    assert deletes_statements(old, {3})
    assert not deletes_statements("def broken(:\n", {1})
