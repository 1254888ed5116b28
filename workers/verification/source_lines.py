"""What a changed line of Python is (pure): inside a function or run at import, deletable on its own, and
the source with its comments stripped and its code re-formatted.

A fix is a change of behaviour a test can call. A comment, a module-level constant or an import runs (or
not) when the module is imported, whoever imports it; only a line inside a function body runs because
something called it. ``verify`` uses these to tell a fix from a marker left for a test to find
(``workers.verification.vacuity`` runs the mutants and the stripped copy in the sandbox).
"""

from __future__ import annotations

import ast
import io
import tokenize

__all__ = ["deletes_statements", "function_body_lines", "mutant", "statement_lines", "stripped"]


def _parse(source: str) -> ast.Module | None:
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def function_body_lines(source: str) -> set[int]:
    """Lines inside the body of a ``def`` (nested ones included): they run only when the function is
    called. A def's own line, its decorators and its defaults run at import, and so does everything at
    module or class level. A lambda's body is not counted: it sits on the line of the statement holding
    it, which runs at import."""
    tree = _parse(source)
    out: set[int] = set()
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            out.update(range(node.body[0].lineno, (node.end_lineno or node.body[-1].lineno) + 1))
    return out


def statement_lines(source: str) -> set[int]:
    """Lines where a statement, a decorator, an ``except`` or a ``case`` starts: what coverage would call
    executable, for a file no test imported (so coverage has no word on it)."""
    tree = _parse(source)
    out: set[int] = set()
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.stmt | ast.ExceptHandler):
            out.add(node.lineno)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out.update(d.lineno for d in node.decorator_list)
        if isinstance(node, ast.match_case):
            out.add(node.pattern.lineno)
    return out


def deletes_statements(old_source: str, deleted: set[int]) -> bool:
    """Whether any of the ``deleted`` lines of ``old_source`` started a statement: a deletion of code, not
    of comments or blank lines."""
    tree = _parse(old_source)
    starts = {n.lineno for n in ast.walk(tree) if isinstance(n, ast.stmt)} if tree is not None else set()
    return bool(starts & deleted)


Span = tuple[int, int, int, int, str]  # first line, first column, last line, end column, replacement


def _statement_at(tree: ast.Module, raw: list[bytes], line: int) -> Span | None:
    """The span that deletes the statement starting at ``line`` (its outermost, when one line holds
    several): the statement becomes ``pass``, an ``elif`` branch's condition becomes ``False``."""
    here = [n for n in ast.walk(tree) if isinstance(n, ast.stmt) and n.lineno == line]
    if not here:
        return None
    node = min(here, key=lambda n: n.col_offset)
    end_line, end_col = node.end_lineno or line, node.end_col_offset or 0
    if isinstance(node, ast.If) and raw[line - 1][node.col_offset :].startswith(b"elif"):
        t = node.test
        return (t.lineno, t.col_offset, t.end_lineno or t.lineno, t.end_col_offset or 0, "False")
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.decorator_list:
        d = node.decorator_list[0]  # the definition goes with its decorators, ``@`` included
        return (d.lineno, d.col_offset - 1, end_line, end_col, "pass")
    return (line, node.col_offset, end_line, end_col, "pass")


def _other_at(tree: ast.Module, line: int) -> Span | None:
    """A decorator, an ``except`` clause or a ``case`` starting at ``line``: the decorator removed (``@``
    included), the clause made to catch nothing, the case never to match (its guard ``False``)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            for d in node.decorator_list:
                if d.lineno == line and d.col_offset > 0:
                    return (line, d.col_offset - 1, d.end_lineno or line, d.end_col_offset or 0, "")
        if isinstance(node, ast.ExceptHandler) and node.lineno == line and node.type is not None:
            t = node.type
            return (t.lineno, t.col_offset, t.end_lineno or t.lineno, t.end_col_offset or 0, "()")
        if isinstance(node, ast.match_case) and node.pattern.lineno == line:
            if (g := node.guard) is not None:
                return (g.lineno, g.col_offset, g.end_lineno or g.lineno, g.end_col_offset or 0, "False")
            p = node.pattern
            at, col = p.end_lineno or p.lineno, p.end_col_offset or 0
            return (at, col, at, col, " if False")
    return None


def mutant(source: str, line: int) -> str | None:
    """``source`` with the executable line ``line`` deleted on its own (see ``_statement_at`` and
    ``_other_at``), or None when nothing of theirs starts there or what is left does not compile.
    AST columns count UTF-8 bytes, so the surgery is on bytes."""
    tree = _parse(source)
    if tree is None:
        return None
    raw = source.encode("utf-8").splitlines(keepends=True)
    if not 0 < line <= len(raw):
        return None
    span = _statement_at(tree, raw, line) or _other_at(tree, line)
    if span is None:
        return None
    first, col, last, end_col, replacement = span
    head = b"".join(raw[: first - 1]) + raw[first - 1][:col]
    tail = raw[last - 1][end_col:] + b"".join(raw[last:])
    out = (head + replacement.encode() + tail).decode("utf-8")
    try:
        compile(out, "<mutant>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return out if out != source else None


def stripped(source: str) -> str:
    """``source`` without its comments (``tokenize``), re-formatted (``ast.unparse``): what runs is the
    same, what a test could read as text is not. Source that does not tokenize or parse is returned as
    far as it got: it would not run either."""
    try:
        tokens = [
            t for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type != tokenize.COMMENT
        ]
        text = tokenize.untokenize(tokens)
    except (tokenize.TokenError, SyntaxError, ValueError):
        return source
    tree = _parse(text)
    return ast.unparse(tree) + "\n" if tree is not None else text
