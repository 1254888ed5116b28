"""What a command is: a test, typecheck, lint or build run (a *signal* of the second opinion), or a
plain program run (no signal).

``classify_command`` knows the usual tools of every ecosystem and looks through env assignments, runners
(``uv run``, ``npx`` ...), interpreter paths and version suffixes; ``commands_in_task`` finds the commands
a task text names. Nothing here raises on odd input and nothing here runs anything.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

from orchestrator.refute.signals import SignalKind

__all__ = ["classify_command", "commands_in_task", "split_command"]

# --- classifying commands ---------------------------------------------------------------------------

# The longest command Jury splits. The standard library's shell-like tokenizer grows a token one character
# at a time, so its cost is quadratic in a token's length (seconds of CPU for a 1 MB word); no test or
# check command comes near this, so a longer one (a judge's answer can say anything) is not split at all.
MAX_COMMAND = 8192

_SHELL_OPS = frozenset({"&&", "||", ";", "|", "&", ";;", "|&"})
_ASSIGN_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_PYTHON_RE = re.compile(r"^(?:python|pypy|py)(?:\d+(?:\.\d+)*)?[tmw]?$")
_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh"})

# Tools whose mere run is a signal of one kind, whatever the arguments.
_TOOLS: dict[str, SignalKind] = {
    # tests
    "pytest": "test",
    "py.test": "test",
    "tox": "test",
    "nox": "test",
    "unittest": "test",
    "nose2": "test",
    "trial": "test",
    "jest": "test",
    "vitest": "test",
    "mocha": "test",
    "ava": "test",
    "karma": "test",
    "jasmine": "test",
    "ctest": "test",
    "rspec": "test",
    "phpunit": "test",
    "pest": "test",
    "behave": "test",
    "bats": "test",
    # typecheckers
    "mypy": "typecheck",
    "dmypy": "typecheck",
    "pyright": "typecheck",
    "basedpyright": "typecheck",
    "pytype": "typecheck",
    "pyre": "typecheck",
    "tsc": "typecheck",
    "vue-tsc": "typecheck",
    # linters
    "flake8": "lint",
    "pylint": "lint",
    "pyflakes": "lint",
    "pycodestyle": "lint",
    "pydocstyle": "lint",
    "bandit": "lint",
    "eslint": "lint",
    "oxlint": "lint",
    "stylelint": "lint",
    "golangci-lint": "lint",
    "staticcheck": "lint",
    "revive": "lint",
    "shellcheck": "lint",
    "semgrep": "lint",
    "rubocop": "lint",
    "hadolint": "lint",
    "yamllint": "lint",
    "markdownlint": "lint",
    "cppcheck": "lint",
    "clang-tidy": "lint",
    "ktlint": "lint",
    "swiftlint": "lint",
    "tflint": "lint",
    "actionlint": "lint",
    # builds
    "gcc": "build",
    "g++": "build",
    "cc": "build",
    "c++": "build",
    "clang": "build",
    "clang++": "build",
    "javac": "build",
    "rustc": "build",
    "ninja": "build",
    "msbuild": "build",
    "webpack": "build",
    "esbuild": "build",
    "rollup": "build",
}

# Formatters: a signal only in their checking mode (otherwise they rewrite files and exit 0).
_FORMATTER_CHECK_FLAGS: dict[str, frozenset[str]] = {
    "black": frozenset({"--check", "--diff"}),
    "isort": frozenset({"--check", "--check-only", "-c", "--diff"}),
    "prettier": frozenset({"--check", "-c", "--list-different", "-l"}),
    "rustfmt": frozenset({"--check"}),
    "clang-format": frozenset({"--dry-run", "-n"}),
}

# Subcommand tools: program -> subcommand -> kind.
_SUBCOMMANDS: dict[str, dict[str, SignalKind]] = {
    "go": {"test": "test", "vet": "lint", "build": "build", "install": "build"},
    "cargo": {
        "test": "test",
        "t": "test",
        "check": "typecheck",
        "c": "typecheck",
        "clippy": "lint",
        "build": "build",
        "b": "build",
    },
    "dotnet": {"test": "test", "build": "build", "msbuild": "build", "publish": "build"},
    "deno": {"test": "test", "check": "typecheck", "lint": "lint", "compile": "build"},
    "bazel": {"test": "test", "build": "build"},
    "bazelisk": {"test": "test", "build": "build"},
    "swift": {"test": "test", "build": "build"},
    "mix": {"test": "test", "compile": "build", "dialyzer": "typecheck", "credo": "lint"},
    "stack": {"test": "test", "build": "build"},
    "cabal": {"test": "test", "build": "build"},
    "sbt": {"test": "test", "compile": "build", "package": "build"},
    "lein": {"test": "test", "compile": "build", "uberjar": "build"},
    "zig": {"test": "test", "build": "build"},
    "biome": {"check": "lint", "lint": "lint", "ci": "lint"},
    "pre-commit": {"run": "lint"},
    "hatch": {"test": "test", "build": "build"},
    "meson": {"test": "test", "compile": "build"},
    "vite": {"build": "build"},
    "next": {"build": "build", "lint": "lint"},
    "playwright": {"test": "test"},
    "cypress": {"run": "test"},
    "flow": {"check": "typecheck"},
}

# Options of runners that take a value (``uv run --with x pytest``): skipped with their value.
_RUNNER_VALUE_OPTS = frozenset(
    {
        "--with",
        "--with-requirements",
        "--with-editable",
        "--python",
        "-p",
        "--package",
        "--extra",
        "--group",
        "--directory",
        "--project",
        "--env-file",
        "--from",
        "-n",
        "--name",
        "--prefix",
        "-e",
        "--env",
        "-c",
        "--call",
        "--cwd",
    }
)
# program -> the subcommand that makes it run another command (``None``: the program itself does).
_RUNNERS: dict[str, frozenset[str] | None] = {
    "uv": frozenset({"run"}),
    "uvx": None,
    "poetry": frozenset({"run"}),
    "pipenv": frozenset({"run"}),
    "pdm": frozenset({"run"}),
    "rye": frozenset({"run"}),
    "pixi": frozenset({"run"}),
    "conda": frozenset({"run"}),
    "mamba": frozenset({"run"}),
    "micromamba": frozenset({"run"}),
    "pipx": frozenset({"run"}),
    "bundle": frozenset({"exec"}),
    "npx": None,
    "bunx": None,
    "pnpx": None,
    "dotenv": None,
}
# Prefixes that change how a command runs, not what it is (``time pytest``, ``timeout 60 pytest``).
_PREFIXES = frozenset({"time", "nice", "nohup", "command", "exec", "xvfb-run", "stdbuf", "env", "timeout"})

# Script names of npm/yarn/pnpm/bun, make targets, just recipes ... by the word they start with.
_WORD_END = r"(?:[\W_]|$)"
_SCRIPT_RE: tuple[tuple[re.Pattern[str], SignalKind], ...] = (
    (
        re.compile(r"^(?:tests?|t|tst|specs?|check|ci|unit|e2e|integration|coverage|cov)" + _WORD_END),
        "test",
    ),
    (
        re.compile(r"^(?:typecheck|type-check|type_check|types|tsc|mypy|pyright|check-types)" + _WORD_END),
        "typecheck",
    ),
    (
        re.compile(r"^(?:lint|linter|eslint|ruff|flake8|clippy|vet|format:check|fmt:check)" + _WORD_END),
        "lint",
    ),
    (re.compile(r"^(?:build|compile|all|dist|release|bundle|package)" + _WORD_END), "build"),
)
_KIND_ORDER: tuple[SignalKind, ...] = ("test", "typecheck", "lint", "build")
_SETUP_PY: dict[str, SignalKind] = {"test": "test", "build": "build", "build_ext": "build"}
_RUFF_NOT_LINT = frozenset(
    {"clean", "rule", "config", "linter", "version", "help", "server", "analyze", "generate-shell-completion"}
)


def _script_kind(name: str) -> SignalKind | None:
    """The kind of a package-script / make-target / recipe name (``test:unit`` -> test)."""
    low = name.lower()
    for rx, kind in _SCRIPT_RE:
        if rx.match(low):
            return kind
    return None


def _split(command: str) -> list[str] | None:
    """Shell-like tokens, operators (``&&``, ``|``, ``;``) as their own tokens; None when unsplittable."""
    try:
        lex = shlex.shlex(command, posix=True, punctuation_chars=";&|")
        lex.whitespace_split = True
        return list(lex)
    except ValueError:
        return None


def _segments(argv: Sequence[str]) -> list[list[str]]:
    out: list[list[str]] = [[]]
    for tok in argv:
        if tok in _SHELL_OPS:
            out.append([])
        else:
            out[-1].append(tok)
    return [seg for seg in out if seg]


def _prog(token: str) -> str:
    """``/usr/bin/Python3.exe`` -> ``python3``."""
    name = token.replace("\\", "/").rsplit("/", 1)[-1].lower()
    return name[:-4] if name.endswith(".exe") else name


def _skip_opts(args: list[str], value_opts: frozenset[str] = _RUNNER_VALUE_OPTS) -> list[str]:
    """``args`` from the first one that is not an option (or an option's value, or ``--``)."""
    i = 0
    while i < len(args):
        tok = args[i]
        if tok == "--":
            return args[i + 1 :]
        if not tok.startswith("-") or tok == "-":
            return args[i:]
        i += 2 if tok in value_opts else 1
    return []


def _strip_prefix(argv: list[str]) -> list[str]:
    """Drop env assignments and prefixes like ``time``/``env -i``/``timeout 60`` from the front."""
    while argv:
        head = argv[0]
        if _ASSIGN_RE.match(head):
            argv = argv[1:]
            continue
        prog = _prog(head)
        if prog not in _PREFIXES:
            return argv
        rest = argv[1:]
        if prog == "timeout":
            rest = _skip_opts(rest, frozenset({"-s", "--signal", "-k", "--kill-after"}))
            rest = rest[1:]  # the duration
        elif prog in {"nice", "stdbuf", "xvfb-run", "env"}:
            rest = _skip_opts(rest, frozenset({"-n", "--adjustment", "-u", "--unset", "-C", "--chdir", "-s"}))
        argv = rest
    return argv


def _python_kind(args: list[str]) -> SignalKind | None:
    """``python [opts] -m MODULE ...``: the module's kind; a script or ``-c`` is a plain run."""
    i = 0
    while i < len(args):
        tok = args[i]
        if tok == "-m" and i + 1 < len(args):
            return _module_kind(args[i + 1], args[i + 2 :])
        if tok.startswith("-m") and len(tok) > 2:
            return _module_kind(tok[2:], args[i + 1 :])
        if tok.startswith("-c") or not tok.startswith("-"):
            if _prog(tok) == "setup.py" and i + 1 < len(args):
                return _SETUP_PY.get(args[i + 1])
            return None
        i += 2 if tok in {"-W", "-X", "-Q"} else 1
    return None


def _module_kind(module: str, rest: list[str]) -> SignalKind | None:
    if module in {"build", "compileall", "py_compile"}:
        return "build"
    if module in {"coverage"}:
        return _coverage_kind(rest)
    return _tool_kind(module, rest)


def _coverage_kind(args: list[str]) -> SignalKind | None:
    """``coverage run [opts] -m pytest`` / ``coverage run script.py``."""
    if not args or args[0] != "run":
        return None
    return _python_kind(args[1:])


_PM_VALUE_OPTS = frozenset({"--prefix", "-w", "--workspace", "--filter", "-F", "-C", "--dir", "--cwd"})
_PM_NOT_SCRIPTS = frozenset({"install", "add", "remove", "i", "ci", "up", "upgrade", "init", "create"})


def _package_manager_kind(prog: str, args: list[str]) -> SignalKind | None:
    """npm / pnpm / yarn / bun: ``test``, ``run <script>``, ``exec <bin>``, or (yarn/pnpm) a bare script."""
    rest = _skip_opts(args, _PM_VALUE_OPTS)
    if not rest:
        return None
    sub, more = rest[0], rest[1:]
    if prog == "yarn" and sub == "workspace" and len(more) >= 2:
        sub, more = more[1], more[2:]
    if sub in {"test", "t", "tst"}:
        return "test"
    if sub in {"run", "run-script", "rum", "urn"}:
        script = _skip_opts(more)
        return _script_kind(script[0]) if script else None
    if sub in {"exec", "x", "dlx"}:
        return _argv_kind(_skip_opts(more, frozenset({"-p", "--package", "-c", "--call"})))
    if prog == "bun" and sub == "build":
        return "build"
    if prog in {"yarn", "pnpm"} and sub not in _PM_NOT_SCRIPTS:
        return _tool_kind(sub, more) or _script_kind(sub)
    return None


def _goals(args: list[str], value_opts: frozenset[str]) -> list[str]:
    """The targets/goals/tasks of a build tool's argv: not options, their values, or ``VAR=x``."""
    goals: list[str] = []
    i = 0
    while i < len(args):
        tok = args[i]
        if tok.startswith("-"):
            takes = tok in value_opts or (tok == "-j" and i + 1 < len(args) and args[i + 1].isdigit())
            i += 2 if takes else 1
            continue
        if not _ASSIGN_RE.match(tok):
            goals.append(tok.rsplit(":", 1)[-1].lower())  # maven plugin:goal, gradle :app:test
        i += 1
    return goals


_MAVEN: dict[str, SignalKind] = {
    "test": "test",
    "verify": "test",
    "install": "test",
    "integration-test": "test",
    "compile": "build",
    "test-compile": "build",
    "package": "build",
    "deploy": "build",
}
_GRADLE: dict[str, SignalKind] = {
    "test": "test",
    "check": "test",
    "connectedcheck": "test",
    "lint": "lint",
    "build": "build",
    "assemble": "build",
    "compilejava": "build",
    "compilekotlin": "build",
    "jar": "build",
    "shadowjar": "build",
    "installdist": "build",
}
_MAKE_VALUE_OPTS = frozenset({"-C", "-f", "--file", "--makefile", "-I", "-o", "-W", "--directory"})


def _build_tool_kind(prog: str, args: list[str]) -> SignalKind | None:
    """make/just/task/rake targets, maven goals, gradle tasks: the first kind of ``_KIND_ORDER`` among them.

    A bare ``make`` builds the default target; an unknown target (``make clean``) is a plain run.
    """
    if prog in {"mvn", "mvnw"}:
        found = {_MAVEN.get(g) for g in _goals(args, frozenset({"-f", "-pl", "-P", "-s", "-D"}))}
    elif prog in {"gradle", "gradlew"}:
        found = {_GRADLE.get(g) for g in _goals(args, frozenset({"-x", "-p", "-b", "-c", "-P", "-D"}))}
    else:
        goals = _goals(args, _MAKE_VALUE_OPTS)
        if not goals:
            return "build" if prog in {"make", "gmake"} else None
        found = {_script_kind(g) for g in goals}
    return next((k for k in _KIND_ORDER if k in found), None)


def _tool_kind(prog: str, args: list[str]) -> SignalKind | None:
    """The kind of running tool ``prog`` with ``args`` (after runners and prefixes are peeled off)."""
    if prog in _TOOLS:
        return _TOOLS[prog]
    if prog == "ruff":  # ``ruff check``, and the older bare ``ruff PATH``
        sub = _skip_opts(args)
        if sub and sub[0] == "format":
            return "lint" if {"--check", "--diff"} & set(args) else None
        return None if sub and sub[0] in _RUFF_NOT_LINT else "lint"
    if prog in _FORMATTER_CHECK_FLAGS:
        return "lint" if _FORMATTER_CHECK_FLAGS[prog] & set(args) else None
    if prog == "gofmt":
        return None  # exits 0 whatever it finds
    if prog == "cargo":
        rest = [a for a in args if not a.startswith("+")]
        sub = _skip_opts(rest, frozenset({"--manifest-path", "-C", "--config", "-Z"}))
        if not sub:
            return None
        if sub[0] == "nextest":
            return "test" if "run" in sub[1:] or "r" in sub[1:] else None
        if sub[0] == "fmt":
            return "lint" if "--check" in sub else None
        return _SUBCOMMANDS["cargo"].get(sub[0])
    if prog in {"npm", "pnpm", "yarn", "bun"}:
        if prog == "bun" and args[:1] == ["test"]:
            return "test"
        return _package_manager_kind(prog, args)
    if prog == "node":
        return "test" if "--test" in args else None
    if prog in {"make", "gmake", "just", "task", "rake", "mvn", "mvnw", "gradle", "gradlew"}:
        return _build_tool_kind(prog, args)
    if prog == "cmake":
        return "build" if "--build" in args else None
    if prog == "dotnet" and args[:1] == ["format"]:
        return "lint" if "--verify-no-changes" in args else None
    if prog in _SUBCOMMANDS:
        sub = _skip_opts(args)
        return _SUBCOMMANDS[prog].get(sub[0]) if sub else None
    if prog == "coverage":
        return _coverage_kind(args)
    if _PYTHON_RE.match(prog):
        return _python_kind(args)
    return None


def _argv_kind(argv: list[str], depth: int = 0) -> SignalKind | None:
    argv = _strip_prefix(list(argv))
    if not argv or depth > 4:
        return None
    prog, args = _prog(argv[0]), argv[1:]
    if prog in _RUNNERS:
        subs = _RUNNERS[prog]
        if subs is None:
            return _argv_kind(_skip_opts(args), depth + 1)
        rest = _skip_opts(args)
        if rest and rest[0] in subs:
            return _argv_kind(_skip_opts(rest[1:]), depth + 1)
        return None
    if prog == "hatch" and args[:1] == ["run"]:  # hatch run [env:]script-or-command
        rest = _skip_opts(args[1:])
        if not rest:
            return None
        name = rest[0].rsplit(":", 1)[-1]
        return _argv_kind([name, *rest[1:]], depth + 1) or _script_kind(name)
    if prog in _SHELLS:  # sh -c 'pytest -q'
        i = 0
        while i < len(args):
            tok = args[i]
            if tok in {"-o", "+o"}:
                i += 2
                continue
            if not tok.startswith(("-", "+")):
                return None
            if not tok.startswith("--") and "c" in tok[1:]:
                inner = _split(args[i + 1]) if i + 1 < len(args) else None
                return _chain_kind(inner, depth + 1) if inner else None
            i += 1
        return None
    return _tool_kind(prog, args)


def classify_command(command: str | Sequence[str]) -> SignalKind | None:
    """The signal kind of a shell-free command (a string, split like a shell would, or an argv).

    None means a plain program run, or a command that cannot be split (or is over ``MAX_COMMAND``).
    Leading ``FOO=1`` assignments, runners (``uv run``, ``poetry run``, ``npx`` ...), paths
    (``.venv/bin/pytest``) and interpreter versions (``python3.11 -m pytest``) are looked through. In a
    chain (``cd x && pytest``) the first segment with a kind decides.
    """
    if isinstance(command, str) and len(command) > MAX_COMMAND:
        return None  # never a real command, and shlex would take seconds over it
    argv = _split(command) if isinstance(command, str) else list(command)
    return _chain_kind(argv, 0) if argv else None


def _chain_kind(argv: list[str], depth: int) -> SignalKind | None:
    for segment in _segments(argv):
        kind = _argv_kind(segment, depth)
        if kind is not None:
            return kind
    return None


# --- commands named in a task text ------------------------------------------------------------------

_FENCE_RE = re.compile(r"^\s*(?:>\s*)*(?P<mark>`{3,}|~{3,})(?P<info>.*)$")
_PROMPT_RE = re.compile(r"^(?:\(\S+\)\s*)?(?:\$|%|>|❯|PS>|PS [^>]*>)\s+")
_INLINE_RE = re.compile(r"(?<!`)(`+)(?!`)(?P<code>.+?)(?<!`)\1(?!`)")


def _fence_lines(block: list[str]) -> list[str]:
    """The commands of one fenced block: prompt lines if it has any (the rest is output), else every line."""
    joined: list[str] = []
    carry = ""
    for raw in block:
        line = raw.rstrip()
        if line.endswith("\\"):
            carry += (line[:-1].strip() if carry else line[:-1].rstrip()) + " "
            continue
        joined.append(carry + line.strip() if carry else line)
        carry = ""
    if carry:
        joined.append(carry)
    prompted = [_PROMPT_RE.sub("", ln.strip(), count=1) for ln in joined if _PROMPT_RE.match(ln.strip())]
    lines = prompted if prompted else [ln.strip() for ln in joined]
    return [ln for ln in lines if ln and not ln.startswith("#")]


def commands_in_task(text: str) -> list[str]:
    """Commands a task text names: inline code spans and fenced-block lines (``$ `` prompts stripped).

    Only those ``classify_command`` gives a kind are kept, each once, in order. Prose words never count.
    """
    found: list[str] = []
    lines = (text or "").splitlines()
    block: list[str] | None = None
    opener = ""
    for line in lines:
        m = _FENCE_RE.match(line)
        if block is None:
            if m and not (m["mark"][0] == "`" and "`" in m["info"]):
                block, opener = [], m["mark"]
                continue
            found.extend(m2["code"].strip() for m2 in _INLINE_RE.finditer(line))
        elif m and m["mark"][0] == opener[0] and len(m["mark"]) >= len(opener) and not m["info"].strip():
            found.extend(_fence_lines(block))
            block = None
        else:
            block.append(line)
    if block is not None:  # an unclosed fence runs to the end (CommonMark)
        found.extend(_fence_lines(block))
    out: list[str] = []
    for cmd in found:
        if cmd and cmd not in out and classify_command(cmd) is not None:
            out.append(cmd)
    return out


# Words that need a shell: a command holding one is refused, never run through one.
SHELL_TOKENS = frozenset({"&&", "||", ";", "|", "&", ">", ">>", "<", "<<", "2>", "2>&1", "&>", "|&"})
_ASSIGN_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def split_command(command: str) -> tuple[list[str], dict[str, str]] | str:
    """``(argv, env assignments)`` of a shell-free command, or why it cannot be run without a shell."""
    if len(command) > MAX_COMMAND:
        return f"the command is {len(command):,} characters, over {MAX_COMMAND:,}: not split"
    try:
        tokens = shlex.split(command)
    except ValueError as exc:
        return f"cannot split {command!r}: {exc}"
    assigns: dict[str, str] = {}
    while tokens and _ASSIGN_RE.match(tokens[0]):
        name, _, value = tokens.pop(0).partition("=")
        assigns[name] = value
    if not tokens:
        return f"no program in {command!r}"
    ops = [t for t in tokens if t in SHELL_TOKENS]
    if ops:
        return f"{command!r} needs a shell ({ops[0]}); give one plain command"
    return tokens, assigns
