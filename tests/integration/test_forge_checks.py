"""The ``jury`` check on GitHub (check runs, else statuses) and GitLab (statuses), and how a name or URL
picks a forge, against the local ``ForgeServer``."""

from __future__ import annotations

import httpx
import pytest

from orchestrator.errors import ConfigError, UsageError
from orchestrator.forge import (
    ForgeError,
    ForgeSettings,
    GitHub,
    GitLab,
    forge_for,
    load_forge_settings,
    parse_ref,
)
from tests.fakes.forge_kit import (  # noqa: F401 (fixtures)
    GH_REPO,
    GH_TOKEN,
    GL_REPO,
    HEAD,
    Kit,
    clean_env_fixture,
    http_fixture,
    kit_fixture,
    make_kit,
    seed_five,
    server_fixture,
    writes,
)
from tests.fakes.forge_server import FakePR, ForgeServer

# --- the check -----------------------------------------------------------------------------------------


def test_github_check_run_conclusions_update_one_run(server: ForgeServer, http: httpx.Client) -> None:
    kit = make_kit("github", server, http, app=True)
    check = kit.forge.set_check
    made = check(GH_REPO, HEAD, conclusion="success", title="converged", summary="all settled")
    assert (made.kind, made.state, made.action) == ("check-run", "success", "created")
    failed = check(
        GH_REPO, HEAD, conclusion="failure", title="2 open findings", summary="...", details_url="https://x/1"
    )
    assert (failed.id, failed.state, failed.action) == (made.id, "failure", "updated")
    neutral = check(
        GH_REPO, HEAD, conclusion="neutral", title="agent missing", summary="codex is not installed"
    )
    assert (neutral.id, neutral.state) == (made.id, "neutral")
    (run,) = kit.state.check_runs
    assert run["conclusion"] == "neutral" and run["output"]["title"] == "not reviewed: agent missing"
    assert run["output"]["summary"] == "codex is not installed"
    count = writes(kit)
    same = check(GH_REPO, HEAD, conclusion="neutral", title="agent missing", summary="codex is not installed")
    assert same.action == "unchanged" and writes(kit) == count


def test_github_personal_token_falls_back_to_statuses(server: ForgeServer, http: httpx.Client) -> None:
    kit = make_kit("github", server, http)
    neutral = kit.forge.set_check(GH_REPO, HEAD, conclusion="neutral", title="budget exhausted", summary="s")
    assert (neutral.kind, neutral.state, neutral.action) == ("status", "error", "created")
    assert kit.state.statuses[-1]["description"] == "not reviewed: budget exhausted"
    assert kit.state.statuses[-1]["context"] == "jury"
    check_posts = len(server.calls("POST", "/check-runs"))
    assert check_posts == 1
    failed = kit.forge.set_check(GH_REPO, HEAD, conclusion="failure", title="1 open", summary="s")
    assert (failed.state, failed.action) == ("failure", "updated")
    ok = kit.forge.set_check(GH_REPO, HEAD, conclusion="success", title="converged", summary="s")
    assert ok.state == "success"
    assert len(server.calls("POST", "/check-runs")) == check_posts  # not tried again
    count = writes(kit)
    assert (
        kit.forge.set_check(GH_REPO, HEAD, conclusion="success", title="converged", summary="s").action
        == "unchanged"
    )
    assert writes(kit) == count
    assert [s["state"] for s in kit.state.statuses] == ["error", "failure", "success"]


def test_github_checks_mode_refuses_to_fall_back(server: ForgeServer, http: httpx.Client) -> None:
    kit = make_kit("github", server, http, checks="checks")
    with pytest.raises(ForgeError, match="403"):
        kit.forge.set_check(GH_REPO, HEAD, conclusion="success", title="t", summary="s")
    assert kit.state.statuses == []


def test_gitlab_status_mapping_and_update(server: ForgeServer, http: httpx.Client) -> None:
    kit = make_kit("gitlab", server, http)
    kit.state.add(FakePR(1, "plain", HEAD))  # its branch holds HEAD: GitLab needs no ref to find one
    assert (
        kit.forge.set_check(GL_REPO, HEAD, conclusion="success", title="converged", summary="s").state
        == "success"
    )
    assert (
        kit.forge.set_check(GL_REPO, HEAD, conclusion="failure", title="2 open", summary="s").state
        == "failed"
    )
    neutral = kit.forge.set_check(
        GL_REPO, HEAD, conclusion="neutral", title="sandbox unavailable", summary="s"
    )
    assert (neutral.state, neutral.action) == ("canceled", "updated")
    live = [s for s in kit.state.statuses if s["name"] == "jury" and not s["retried"]]
    assert len(live) == 1 and live[0]["description"] == "not reviewed: sandbox unavailable"
    count = writes(kit)
    same = kit.forge.set_check(GL_REPO, HEAD, conclusion="neutral", title="sandbox unavailable", summary="s")
    assert same.action == "unchanged" and writes(kit) == count


def test_a_run_that_could_not_review_is_never_success(kit: Kit) -> None:
    kit.state.add(FakePR(1, "plain", HEAD))
    result = kit.forge.set_check(kit.repo, HEAD, conclusion="neutral", title="no agent", summary="s")
    assert result.state not in ("success", "skipped")


def test_fixes_missing_from_the_commit_block_on_every_forge_and_mode(
    server: ForgeServer, http: httpx.Client
) -> None:
    """``action_required`` (the head lacks its accepted fixes): a check run says so itself; the
    statuses, which have no such state (nor neutral), fail, so no merge goes through on it."""
    app = make_kit("github", server, http, app=True)
    app.state.add(FakePR(1, "plain", HEAD))
    run = app.forge.set_check(
        GH_REPO, HEAD, conclusion="action_required", title="fixes elsewhere", summary="s"
    )
    assert (run.kind, run.state) == ("check-run", "action_required")
    statuses = GitHub(http, token=GH_TOKEN, api=server.github_api, checks="statuses")
    status = statuses.set_check(
        GH_REPO, HEAD, conclusion="action_required", title="fixes elsewhere", summary="s"
    )
    assert (status.kind, status.state) == ("status", "failure")
    gl = make_kit("gitlab", server, http)
    gl.state.add(FakePR(1, "plain", HEAD))
    lab = gl.forge.set_check(
        GL_REPO, HEAD, conclusion="action_required", title="fixes elsewhere", summary="s"
    )
    assert lab.state == "failed"


def test_gitlab_status_on_a_head_no_branch_holds_needs_its_ref(
    server: ForgeServer, http: httpx.Client
) -> None:
    """A fork MR's head is held by ``refs/merge-requests/N/head`` alone: without a ref GitLab answers 404."""
    kit = make_kit("gitlab", server, http)
    kit.state.add(FakePR(4, "from a fork", HEAD, fork=True))
    with pytest.raises(ForgeError) as caught:
        kit.forge.set_check(GL_REPO, HEAD, conclusion="failure", title="1 open", summary="s")
    assert caught.value.status == 404
    ref = "refs/merge-requests/4/head"
    done = kit.forge.set_check(GL_REPO, HEAD, conclusion="failure", title="1 open", summary="s", ref=ref)
    assert done.state == "failed" and kit.state.statuses[-1]["ref"] == ref


# --- naming and settings -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("octo/widgets", ("github", "octo/widgets", None)),
        ("github:octo/widgets", ("github", "octo/widgets", None)),
        ("gitlab:acme/widgets", ("gitlab", "acme/widgets", None)),
        ("acme/platform/widgets", ("gitlab", "acme/platform/widgets", None)),
        ("https://github.com/octo/widgets/pull/12", ("github", "octo/widgets", 12)),
        ("https://github.com/octo/widgets.git", ("github", "octo/widgets", None)),
        (
            "https://gitlab.com/acme/platform/widgets/-/merge_requests/3",
            ("gitlab", "acme/platform/widgets", 3),
        ),
        ("https://gitlab.com/acme/widgets", ("gitlab", "acme/widgets", None)),
    ],
)
def test_parse_ref(text: str, expected: tuple[str, str, int | None]) -> None:
    assert tuple(parse_ref(text)) == expected


@pytest.mark.parametrize(
    "text",
    [
        "octo",
        "github:a/b/c",
        "https://example.org/a/b/pull/1",
        "https://example.org/a/b/-/merge_requests/1",
        "../x",
    ],
)
def test_parse_ref_refuses(text: str) -> None:
    with pytest.raises(UsageError):
        parse_ref(text)


def test_forge_for_uses_the_settings_api(
    server: ForgeServer, http: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_kit("github", server, http)
    seed_five(server.github_repo(GH_REPO))
    monkeypatch.setenv("JURY_GITHUB_API", server.github_api)
    monkeypatch.setenv("GITHUB_TOKEN", GH_TOKEN)
    target = forge_for(f"https://github.com/{GH_REPO}/pull/3", client=http)
    assert isinstance(target.forge, GitHub) and (target.repo, target.number) == (GH_REPO, 3)
    assert target.forge.get(target.repo, 3).base == "release"
    gitlab = forge_for(
        "gitlab:acme/widgets",
        ForgeSettings.model_validate({"JURY_GITLAB_API": server.gitlab_api}),
        client=http,
    )
    assert isinstance(gitlab.forge, GitLab)
    host = forge_for(
        "https://gitlab.internal/acme/w/-/merge_requests/2",
        ForgeSettings.model_validate({"JURY_GITLAB_API": "https://gitlab.internal/api/v4"}),
        client=http,
    )
    assert (host.repo, host.number) == ("acme/w", 2)


def test_a_bad_setting_names_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JURY_FORGE_MAX_WAIT", "soon")
    monkeypatch.setenv("GITHUB_TOKEN", GH_TOKEN)
    with pytest.raises(ConfigError, match="JURY_FORGE_MAX_WAIT") as caught:
        load_forge_settings()
    assert GH_TOKEN not in str(caught.value)
    monkeypatch.setenv("JURY_FORGE_MAX_WAIT", "10")
    monkeypatch.setenv("JURY_GITLAB_API", "ftp://gitlab.internal")
    with pytest.raises(ConfigError, match="JURY_GITLAB_API"):
        load_forge_settings()


@pytest.mark.parametrize(
    ("api", "token"), [("JURY_GITHUB_API", "GITHUB_TOKEN"), ("JURY_GITLAB_API", "GITLAB_TOKEN")]
)
def test_a_token_is_not_sent_in_clear_to_another_host(
    monkeypatch: pytest.MonkeyPatch, api: str, token: str
) -> None:
    """Plain http:// to a forge that is not this machine would carry the token in clear: refused, naming
    the variables, unless the operator says every network between is theirs; without a token, and to a
    loopback address (a local stand-in), it is allowed."""
    monkeypatch.setenv(api, "http://git.internal/api")
    assert load_forge_settings()  # no token: nothing to leak
    monkeypatch.setenv(token, GH_TOKEN)
    with pytest.raises(ConfigError, match=rf"{token}: {api} is plain http:// to git.internal, so") as caught:
        load_forge_settings()
    assert GH_TOKEN not in str(caught.value)
    monkeypatch.setenv("JURY_FORGE_INSECURE_HTTP", "1")
    assert load_forge_settings().insecure_http is True
    monkeypatch.delenv("JURY_FORGE_INSECURE_HTTP")
    for fine in ("https://git.internal/api", "http://127.0.0.1:8080/api", "http://localhost/api"):
        monkeypatch.setenv(api, fine)
        assert load_forge_settings()
