"""Signals: which commands are a test, typecheck, lint or build run, the commands a task text names, and
the gate (orchestrator.refute.commands, orchestrator.refute.signals)."""

from __future__ import annotations

import pytest

from orchestrator.refute.commands import classify_command, commands_in_task
from orchestrator.refute.signals import Signal, gate

# --- classify_command -------------------------------------------------------------------------------

TEST_COMMANDS = [
    "pytest",
    "pytest -q tests/test_x.py::test_y",
    "python -m pytest",
    "python3 -m pytest -x",
    "py.test",
    "tox",
    "tox -e py311",
    "nox -s tests",
    "python -m unittest",
    "python3 -m unittest tests.test_x",
    "python -m unittest discover -s tests",
    "go test ./...",
    "go test -run TestX ./pkg",
    "cargo test",
    "cargo test -p core --lib",
    "cargo nextest run",
    "make test",
    "make check",
    "make -C backend test",
    "npm test",
    "npm run test",
    "npm run test:unit",
    "npm t",
    "pnpm test",
    "pnpm run test",
    "yarn test",
    "yarn run test",
    "bun test",
    "npx jest",
    "npx jest --coverage",
    "jest",
    "vitest",
    "vitest run",
    "npx vitest run",
    "mocha",
    "ctest",
    "ctest --output-on-failure",
    "mvn test",
    "./mvnw -B test",
    "mvn verify",
    "gradle test",
    "./gradlew test",
    "./gradlew :app:test",
    "dotnet test",
    "rspec",
    "bundle exec rspec",
    "bundle exec rake test",
    "phpunit",
    "vendor/bin/phpunit",
    "node --test",
    "deno test",
    "bazel test //...",
    "swift test",
    "mix test",
    "coverage run -m pytest",
    "hatch run test",
    "hatch test",
    "python setup.py test",
]
TYPECHECK_COMMANDS = [
    "mypy",
    "mypy src",
    "python -m mypy .",
    "pyright",
    "basedpyright",
    "tsc",
    "tsc --noEmit",
    "npx tsc --noEmit",
    "pnpm exec tsc --noEmit -p .",
    "cargo check",
    "npm run typecheck",
    "yarn type-check",
    "vue-tsc --noEmit",
    "deno check main.ts",
]
LINT_COMMANDS = [
    "ruff check .",
    "ruff check --fix src",
    "ruff .",
    "ruff format --check",
    "python -m ruff check",
    "flake8",
    "flake8 src",
    "pylint pkg",
    "eslint .",
    "npx eslint src --ext .ts",
    "golangci-lint run",
    "cargo clippy -- -D warnings",
    "cargo fmt --check",
    "go vet ./...",
    "shellcheck scripts/*.sh",
    "semgrep --config auto",
    "npm run lint",
    "black --check .",
    "isort --check-only .",
    "prettier --check .",
    "rubocop",
    "staticcheck ./...",
    "biome check .",
    "pre-commit run --all-files",
    "make lint",
]
BUILD_COMMANDS = [
    "make",
    "make -j4",
    "make build",
    "make all",
    "cargo build",
    "cargo build --release",
    "go build ./...",
    "npm run build",
    "pnpm build",
    "yarn build",
    "python -m build",
    "gcc -o app main.c",
    "cc main.c",
    "clang -c x.c",
    "g++ -std=c++20 main.cpp",
    "javac Main.java",
    "mvn package",
    "mvn compile",
    "gradle build",
    "./gradlew assemble",
    "dotnet build",
    "cmake --build build",
    "ninja -C build",
    "bun build ./index.ts",
    "python -m compileall src",
]
LOOK_THROUGH = [
    ("FOO=1 pytest", "test"),
    ("FOO=1 BAR=2 python -m pytest", "test"),
    ("env CI=1 pytest", "test"),
    ("uv run pytest", "test"),
    ("uv run --with pytest-cov -- pytest", "test"),
    ("uv run python -m mypy .", "typecheck"),
    ("poetry run pytest", "test"),
    ("poetry run mypy .", "typecheck"),
    ("pipenv run pytest", "test"),
    ("pdm run pytest", "test"),
    ("uvx ruff check", "lint"),
    ("npx --yes tsc --noEmit", "typecheck"),
    ("npx -p typescript tsc", "typecheck"),
    ("pnpm exec eslint .", "lint"),
    ("bunx vitest", "test"),
    ("pnpm dlx vitest run", "test"),
    (".venv/bin/pytest -q", "test"),
    ("./node_modules/.bin/jest", "test"),
    ("/usr/bin/python3 -m pytest", "test"),
    ("/opt/py/bin/python3.12 -m mypy src", "typecheck"),
    ("python3.11 -m pytest", "test"),
    ("python3.13t -m pytest", "test"),
    ("pypy3 -m pytest", "test"),
    ("python -X dev -W error -m pytest", "test"),
    ("python -mpytest", "test"),
    ("time pytest", "test"),
    ("timeout 300 go test ./...", "test"),
    ("timeout -s KILL 60 cargo test", "test"),
    ("nice -n 10 make test", "test"),
    ("xvfb-run -a npm test", "test"),
    ("bash -c 'pytest -q'", "test"),
    ("sh -ec 'make check'", "test"),
    ("cd api && go test ./...", "test"),
    ("pytest -q 2>&1 | tail -n 20", "test"),
    ("cargo +nightly clippy", "lint"),
    ("npm --prefix web test", "test"),
    ("pnpm --filter web typecheck", "typecheck"),
    ("yarn workspace web lint", "lint"),
    ("yarn jest", "test"),
]
NOT_SIGNALS = [
    "python script.py",
    "python3 -c 'import pytest'",
    "python",
    "node x.js",
    "node",
    "./run.sh",
    "bash run.sh",
    "sh -c 'echo hi'",
    "echo pytest",
    "echo 'make test'",
    "cat pytest.ini",
    "ls tests",
    "grep -r assert tests",
    "git diff",
    "git log -1",
    "pip install pytest",
    "uv pip install mypy",
    "uv sync",
    "npm install",
    "npm ci",
    "npm start",
    "npm run dev",
    "yarn install",
    "cargo run",
    "cargo fmt",
    "go run .",
    "go mod tidy",
    "make clean",
    "make install",
    "ruff format",
    "ruff format src",
    "black .",
    "prettier --write .",
    "gofmt -l .",
    "docker build .",
    "curl https://example.com",
    "",
    "   ",
    "pytest 'unclosed",
    "FOO=1",
    "tests/test_x.py",
]


@pytest.mark.parametrize(
    ("command", "kind"),
    [(c, "test") for c in TEST_COMMANDS]
    + [(c, "typecheck") for c in TYPECHECK_COMMANDS]
    + [(c, "lint") for c in LINT_COMMANDS]
    + [(c, "build") for c in BUILD_COMMANDS]
    + LOOK_THROUGH
    + [(c, None) for c in NOT_SIGNALS],
)
def test_classify_command(command: str, kind: str | None) -> None:
    assert classify_command(command) == kind


@pytest.mark.parametrize(
    ("argv", "kind"),
    [
        (["pytest", "-q"], "test"),
        ([".venv/bin/python", "-m", "pytest", "tests/test a.py"], "test"),
        (["FOO=1", "cargo", "test"], "test"),
        (["npx", "tsc", "--noEmit"], "typecheck"),
        (["python", "script.py"], None),
        (["echo", "pytest"], None),
        ([], None),
    ],
)
def test_classify_argv(argv: list[str], kind: str | None) -> None:
    assert classify_command(argv) == kind


# --- commands_in_task -------------------------------------------------------------------------------

TASK_FENCED = """\
Fix the median of even-length lists.

To check it:

```console
$ python -m pytest tests/test_stats.py
====== 1 failed in 0.1s ======
$ ruff check .
All checks passed!
```
"""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Make sure `pytest -q` passes and `mypy src` is clean.", ["pytest -q", "mypy src"]),
        ("Run ``npm test`` then `npm run build`.", ["npm test", "npm run build"]),
        ("The fix is in `stats.py`; run `go test ./...`.", ["go test ./..."]),
        (TASK_FENCED, ["python -m pytest tests/test_stats.py", "ruff check ."]),
        (
            "```sh\ncargo test\ncargo clippy -- -D warnings\n```",
            ["cargo test", "cargo clippy -- -D warnings"],
        ),
        ("```bash\n# run the tests\nmake test\n```", ["make test"]),
        ("```\n$ uv run pytest \\\n    -q tests\n```", ["uv run pytest -q tests"]),
        ("~~~\n% tox -e py311\n~~~", ["tox -e py311"]),
        ("Run pytest and mypy before you push, and make sure the build passes.", []),
        ("Tests live in `tests/` and use `conftest.py`.", []),
        ("Use `python script.py` to reproduce and `echo pytest` nowhere.", []),
        ("Run `pytest` twice: `pytest`.", ["pytest"]),
        ("```python\nimport pytest\nassert median([1, 2]) == 1.5\n```", []),
        ("```\npytest -q\n", ["pytest -q"]),  # an unclosed fence runs to the end
        ("", []),
    ],
)
def test_commands_in_task(text: str, expected: list[str]) -> None:
    assert commands_in_task(text) == expected


# --- gate -------------------------------------------------------------------------------------------


def sig(kind: str = "test", exit_code: int | None = 1, command: str = "pytest -q") -> Signal:
    return Signal(kind=kind, command=command, exit_code=exit_code, source="verification")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("signals", "is_open", "n_used", "reason_has"),
    [
        ([], False, 0, "no test, typecheck, lint or build signal: nothing to check a critique against"),
        ([sig(exit_code=None)], False, 0, "none ran"),
        ([sig(exit_code=127), sig(exit_code=126)], False, 0, "none ran"),
        ([sig(exit_code=1)], True, 1, "test `pytest -q` exit 1"),
        ([sig(exit_code=0)], True, 1, "exit 0"),
        ([sig("lint", 3, "ruff check ."), sig(exit_code=None)], True, 1, "lint `ruff check .` exit 3"),
        ([sig("build", 0, "make"), sig("typecheck", 2, "mypy .")], True, 2, "2 signal(s)"),
    ],
)
def test_gate(signals: list[Signal], is_open: bool, n_used: int, reason_has: str) -> None:
    g = gate(signals)
    assert g.open is is_open
    assert len(g.signals) == n_used
    assert reason_has in g.reason


def test_signal_kind_is_validated() -> None:
    with pytest.raises(ValueError, match=r"kind\n  Input should be 'test', 'typecheck', 'lint' or 'build'"):
        Signal(kind="program", command="python x.py", exit_code=0, source="task")  # type: ignore[arg-type]
