"""``jury dev``: what it takes to try Jury with nothing outside this machine.

``jury dev forge serve`` runs ``DevForge`` (a local GitHub-compatible forge over bare git repositories),
``seed`` puts a repository and its PRs on it, ``env`` prints the settings that point Jury (and git) at it,
``published`` lists what Jury wrote to it. ``jury dev agents`` prints the config entries of the scripted
agents ``jury demo`` seats, so a sweep can seat them too. docs/sweeps-offline.md walks through them.
"""

from __future__ import annotations

import json
import shlex
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from jury_cli.devforge.server import Recorded

DEFAULT_URL = "http://127.0.0.1:8765"
ForgeOpt = Annotated[
    str, typer.Option("--forge", envvar="JURY_DEV_FORGE", help="The dev forge's URL (as `serve` printed it).")
]
WaitOpt = Annotated[float, typer.Option("--wait", min=0, help="Seconds to wait for the forge to answer.")]

dev = typer.Typer(
    help="Try Jury offline: a local fake forge to sweep, and the bundled scripted agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
forge = typer.Typer(
    help="A local GitHub-compatible forge over bare git repositories, to try sweeps on.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
dev.add_typer(forge, name="forge")


def call(url: str, method: str, path: str, wait: float, body: dict[str, Any] | None = None) -> Any:
    """``method path`` on the dev forge at ``url``, retried while nothing listens there yet (a forge just
    started in the background) until ``wait`` seconds have passed; its JSON answer."""
    import httpx

    from orchestrator.errors import UsageError

    deadline = time.monotonic() + wait
    while True:
        try:
            answer = httpx.request(method, url.rstrip("/") + path, json=body, timeout=30.0)
            break
        except httpx.ConnectError:
            if time.monotonic() >= deadline:
                raise UsageError(
                    f"no dev forge answers at {url}: start one with `jury dev forge serve`"
                ) from None
            time.sleep(0.1)
    if answer.status_code >= 400:
        raise UsageError(
            f"the dev forge refused {method} {path}: {answer.json().get('message', answer.text)}"
        )
    return answer.json()


@forge.command()
def serve(
    root: Annotated[
        Path, typer.Option(help="Where the bare repositories are (OWNER/NAME.git); made if missing.")
    ] = Path("forge"),
    port: Annotated[
        int,
        typer.Option(
            min=0, max=65535, envvar="JURY_DEV_FORGE_PORT", help="The port on 127.0.0.1 (0: any free one)."
        ),
    ] = 8765,
) -> None:
    """Serve the dev forge on 127.0.0.1 until stopped (SIGTERM, Ctrl-C); print each write Jury makes."""
    from jury_cli.devforge.dev import DevForge

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())

    def say(request: Recorded) -> None:
        print(f"{request.method} {request.path} -> {request.status}", flush=True)

    with DevForge(root, port=port) as dev_forge:
        dev_forge.tell(say)
        known = ", ".join(dev_forge.found) or "none yet"
        print(f"dev forge at {dev_forge.server.url} (GitHub API {dev_forge.server.github_api})", flush=True)
        print(f"  repositories under {dev_forge.repos.root}: {known}", flush=True)
        while not stop.wait(3600):
            pass
    print("dev forge stopped", flush=True)


def demo_source(where: Path) -> tuple[Path, list[str]]:
    """The demo's sample repository (``main`` and ``feature``, the buggy median) with two harmless
    branches more: the repository and its PR branches."""
    from orchestrator.demo import IDENTITY, make_sample_repo
    from orchestrator.git import git

    repo = make_sample_repo(where)
    git(["branch", "--quiet", "-m", "feature", "median"], repo)
    for branch, path, text, subject in (
        ("readme", "README.md", "# sample\n\nSmall statistics helpers.\n", "docs: a README"),
        ("notes", "NOTES.md", "mean() needs a non-empty sequence.\n", "docs: a note on mean()"),
    ):
        git(["checkout", "--quiet", "-b", branch, "main"], repo)
        (repo / path).write_text(text)
        git([*IDENTITY, "add", path], repo)
        git([*IDENTITY, "commit", "--quiet", "-m", subject], repo)
    git(["checkout", "--quiet", "main"], repo)
    return repo, ["median", "readme", "notes"]


@forge.command()
def seed(
    repo: Annotated[str, typer.Argument(help="The repository to make or fill: OWNER/NAME.")],
    source: Annotated[
        Path | None, typer.Option("--from", help="A local git repository whose branches are pushed.")
    ] = None,
    pr: Annotated[list[str] | None, typer.Option("--pr", help="A branch to open a PR from (repeat).")] = None,
    trunk: Annotated[str, typer.Option(help="The branch the PRs go into.")] = "main",
    demo: Annotated[
        bool,
        typer.Option("--demo", help="The demo's sample repository, with three PRs (one has a real bug)."),
    ] = False,
    url: ForgeOpt = DEFAULT_URL,
    wait: WaitOpt = 30.0,
) -> None:
    """Push a repository's trunk and branches to the dev forge and open a PR from each branch (a branch
    with an open PR moves that PR to its new commit)."""
    from orchestrator.errors import UsageError
    from orchestrator.git import git

    if demo == (source is not None):
        raise UsageError("seed from --from PATH (with --pr BRANCH ...) or --demo, one of them")
    with tempfile.TemporaryDirectory(prefix="jury-dev-seed-") as scratch:
        branches = list(pr or [])
        if demo:
            source, branches = demo_source(Path(scratch))
        assert source is not None
        made = call(url, "POST", "/_dev/repos", wait, {"name": repo, "trunk": trunk})
        refs = [f"refs/heads/{b}:refs/heads/{b}" for b in dict.fromkeys([trunk, *branches])]
        git(["push", "--quiet", "--force", made["git_dir"], *refs], source)
    for branch in branches:
        opened = call(url, "POST", "/_dev/pulls", wait, {"repo": repo, "head": branch, "base": trunk})
        print(f"#{opened['number']}  {branch} -> {trunk}  {opened['head_sha'][:12]}  {opened['url']}")


@forge.command()
def env(url: ForgeOpt = DEFAULT_URL, wait: WaitOpt = 30.0) -> None:
    """Print the shell exports that point Jury at the dev forge: its API, a token, and git's rewrite of
    https://github.com/ to its repositories (use: eval "$(jury dev forge env)")."""
    from jury_cli.devforge.dev import DEV_TOKEN
    from jury_cli.devforge.repos import git_env

    info = call(url, "GET", "/_dev", wait)
    exports = {
        "JURY_GITHUB_API": info["github_api"],
        "GITHUB_TOKEN": DEV_TOKEN,
        "JURY_GITHUB_CHECKS": "statuses",  # the dev forge's user is not a GitHub App: no check runs
        **git_env(Path(info["root"])),
    }
    for name, value in exports.items():
        print(f"export {name}={shlex.quote(value)}")


def first_line(text: str | None) -> str:
    """The first line of a body that says something (Jury's hidden ``<!-- jury:... -->`` markers skipped)."""
    said = [
        line.strip() for line in (text or "").splitlines() if line.strip() and not line.startswith("<!--")
    ]
    return said[0] if said else ""


def describe(name: str, seen: dict[str, Any]) -> list[str]:
    """What the forge received for one repository, a line each, by PR."""
    lines = []
    for pull in seen["pulls"]:
        n, head = pull["number"], pull["head_sha"]
        lines.append(f"{name}#{pull['number']}  {pull['title']}  (head {head[:12]})")
        for review in (r for r in seen["reviews"] if r["pr"] == n and r["body"]):
            lines.append(f"  review by {review['user']['login']}: {first_line(review['body'])}")
        for comment in (c for c in seen["comments"] if c["pr"] == n):
            lines.append(f"    comment on {comment['path']}:{comment['line']}: {first_line(comment['body'])}")
        for status in (s for s in seen["statuses"] if s["sha"] == head):
            lines.append(f"  status {status['context']}: {status['state']}  {status['description'] or ''}")
        for run in (r for r in seen["check_runs"] if r.get("head_sha") == head):
            lines.append(f"  check {run.get('name')}: {run.get('conclusion')}")
    return lines


@forge.command()
def published(
    url: ForgeOpt = DEFAULT_URL,
    wait: WaitOpt = 30.0,
    as_json: Annotated[bool, typer.Option("--json", help="Everything received, as JSON.")] = False,
) -> None:
    """List what the dev forge received: per PR, Jury's reviews, inline comments, statuses, check runs."""
    seen = call(url, "GET", "/_dev/published", wait)
    if as_json:
        sys.stdout.write(json.dumps(seen, indent=2) + "\n")
        return
    for name, received in seen.items():
        print("\n".join(describe(name, received)))


@dev.command()
def agents() -> None:
    """Print the config entries of the scripted agents `jury demo` seats (demo-finder, demo-quiet,
    demo-judge, demo-refuter), to seat them in a sweep or a review with --config."""
    from orchestrator.demo import demo_agents

    print("# The scripted agents of `jury demo`: no model is called (orchestrator/demo/agents).")
    for name, spec in demo_agents().items():
        print(f"\n[agents.{name}]")
        print(f"argv = {json.dumps(spec.argv)}")
        if spec.judge_argv:
            print(f"judge_argv = {json.dumps(spec.judge_argv)}")
        print(f"model = {json.dumps(spec.model)}")
        print("model_args = []")
        print(f"expect_seconds = {spec.expect_seconds:g}")
