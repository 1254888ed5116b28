"""A key handed to a CLI agent, echoed in its finding in every disguise, reaches no part of the record.

The leaky reviewer (tests/fakes/leak_agent.py) is given ``LEAKY_API_KEY`` through its entry's
``env_pass`` and prints it in its finding and on stderr: as it is, split by a space and by a line break,
reversed, hex, URL-encoded, base64 at byte offsets 0, 1 and 2 of a longer string, base64url. A real run
of a PR URL on a real worker and the shared Redis, published to the fake GitHub: the finding is judged and
fixed (its claim goes into the fix commit's message and the judge's prompt), and no spelling of the key is
found in the events, ``run.json``, the artifacts, the prompts, ``jury show``, the published review, its
comments and check, the fix commits' messages or the worker's log.

Then ``jury scrub`` on a record written the old way (the key in the clear in the files record and the
Redis stream, published): it takes the key out of both and lists the published review that still holds it.
"""

from __future__ import annotations

import base64
import json
import secrets
import subprocess
import sys
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from orchestrator.domain import AgentReport, FindingRaised, RunPublished, TargetEvent
from orchestrator.fold import fold
from orchestrator.run_json import run_json
from orchestrator.spec import Target
from orchestrator.store.files import FileStore
from orchestrator.store.redis import from_url
from tests.conftest import FAKE_STATE_ROOT, fake_agent, outside_env
from tests.e2e.worker_process import jury_worker
from tests.fakes.forge_server import FakePR, ForgeServer

LEAK = Path(__file__).resolve().parents[1] / "fakes" / "leak_agent.py"
KEY = "sk-leak/" + secrets.token_hex(12) + "+Z="  # '/', '+' and '=' make its URL encoding differ
GH_TOKEN = "ghp_LEAKSsecretTOKEN0123456789"
PART = 12  # any run of this many characters of the key (or of it reversed) counts as a leak
DIFF = {"stats.py": set(range(4, 14))}


def spellings(value: str) -> dict[str, str]:
    """What must not be left anywhere: each spelling the agent printed, and for base64 the characters
    that encode the key's bytes alone at each offset (computed here on its own, not by Jury's code)."""
    data = value.encode()
    found = {
        "hex": data.hex(),
        "url": urllib.parse.quote(value, safe=""),
        "json-url": json.dumps(urllib.parse.quote(value, safe=""))[1:-1],
    }
    for i in range(len(value) - PART + 1):
        found[f"part{i}"] = value[i : i + PART]
        found[f"rev{i}"] = value[::-1][i : i + PART]
    for offset in range(3):
        start, end = -(-8 * offset // 6), 8 * (offset + len(data)) // 6
        core = base64.b64encode(bytes(offset) + data).decode()[start:end]
        found[f"b64@{offset}"] = core
        found[f"b64url@{offset}"] = core.translate(str.maketrans("+/", "-_"))
    return found


def leaks(text: str) -> list[str]:
    return [name for name, spelled in spellings(KEY).items() if spelled in text]


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def state_files_text(state_dir: Path) -> str:
    """Every file under the state directory (events, run.json, artifacts, prompts, logs) as one text."""
    files = [p for p in sorted(state_dir.rglob("*")) if p.is_file() and not p.is_socket()]
    return "\n".join(p.read_text(errors="replace") for p in files)


def redis_dump(url: str) -> str:
    """Every value of every key of the test's database, as text."""
    client = redis.Redis.from_url(url)
    values: list[Any] = []
    for key in client.scan_iter(count=1000):
        kind = client.type(key).decode()
        if kind == "string":
            values.append(client.get(key))
        elif kind == "stream":
            values += [v for _, fields in client.xrange(key) for v in fields.values()]
        elif kind == "hash":
            values += list(client.hgetall(key).values())
        elif kind == "list":
            values += client.lrange(key, 0, -1)
        elif kind == "set":
            values += list(client.smembers(key))
        elif kind == "zset":
            values += client.zrange(key, 0, -1)
    client.close()
    return "\n".join(v.decode("utf-8", errors="replace") if isinstance(v, bytes) else str(v) for v in values)


def leaky_agent() -> str:
    argv = json.dumps([sys.executable, str(LEAK), "{prompt_file}"])
    return (
        f"[agents.leaky]\nargv = {argv}\nexpect_seconds = 5\n"
        f'env_pass = ["FAKE_STATE", "LEAKY_API_KEY"]\nstate_dirs = [{json.dumps(str(FAKE_STATE_ROOT))}]\n'
    )


@pytest.fixture
def forge(tmp_path: Path, sample_repo: Path) -> Iterator[tuple[ForgeServer, dict[str, str]]]:
    """The fake GitHub with PR 7 of acme/sample, whose git remote is a local bare repository."""
    remote = tmp_path / "remotes" / "acme" / "sample.git"
    remote.parent.mkdir(parents=True)
    head = git(sample_repo, "rev-parse", "feature").strip()
    subprocess.run(["git", "clone", "--bare", "--quiet", str(sample_repo), str(remote)], check=True)
    git(remote, "update-ref", "refs/pull/7/head", head)
    git(remote, "symbolic-ref", "HEAD", "refs/heads/main")
    gitconfig = tmp_path / "gitconfig"
    gitconfig.write_text(f'[url "file://{tmp_path}/remotes/"]\n\tinsteadOf = https://github.com/\n')
    main_sha = git(sample_repo, "rev-parse", "main").strip()
    with ForgeServer() as server:
        server.user(GH_TOKEN, "jury-bot", app=True)
        server.github_repo("acme/sample").add(
            FakePR(number=7, title="pr 7", head_sha=head, base_sha=main_sha, diff=dict(DIFF))
        )
        yield (
            server,
            {
                "GITHUB_TOKEN": GH_TOKEN,
                "JURY_GITHUB_API": server.github_api,
                "JURY_GITHUB_LOGIN": "jury-bot",
                "GIT_CONFIG_GLOBAL": str(gitconfig),
            },
        )


@pytest.fixture
def worker(shared_redis: str, state_dir: Path, fake_state: Path, tmp_path: Path, forge) -> Iterator[dict]:
    """A real ``jury worker`` whose environment holds the key the leaky agent's entry passes through."""
    env = outside_env()
    env.update(forge[1])
    env.update(
        {
            "JURY_REDIS_URL": shared_redis,
            "JURY_DIR": str(state_dir),
            "FAKE_STATE": str(fake_state),
            "LEAKY_API_KEY": KEY,
        }
    )
    with jury_worker(env, tmp_path / "worker.log", concurrency=2):
        yield {**forge[1], "JURY_REDIS_URL": shared_redis}


def test_a_key_echoed_by_a_cli_agent_reaches_no_record(
    jury, worker, forge, write_config, tmp_path: Path, state_dir: Path
) -> None:
    server, _ = forge
    assert leaks(LEAK.read_text()) == []  # the agent's source does not hold it: it reads it from env_pass
    config = write_config(leaky_agent(), fake_agent("judge", "clean", "fix"))
    r = jury(
        "review",
        "https://github.com/acme/sample/pull/7",
        "--reviewer",
        "leaky",
        "--judge",
        "judge",
        "--config",
        str(config),
        "--rounds",
        "3",
        "--publish",
        "--no-refute",
        env=worker,
        timeout=240,
    )
    assert r.code == 0, r.out + r.err
    assert "published to github acme/sample#7" in r.out, r.out
    slug = next(line.split()[1] for line in r.out.splitlines() if line.startswith("run "))
    state = fold(from_url(worker["JURY_REDIS_URL"]).read(slug), slug)
    (finding,) = state.findings.values()
    # the finding went through, redacted: judged, fixed, its claim in the commit and the judge's prompt
    assert finding.status == "accepted", (finding.status, state.state, state.target.state_note)
    assert "[redacted]" in finding.claim and "upper middle value" in finding.claim
    fix = next(c for c in state.commits if c.finding)
    mirror = Path(state.target.path or "")
    messages = git(mirror, "log", "--format=%B", fix.sha)
    assert "upper middle value" in messages
    prompts = [p.read_text() for p in state_dir.rglob("*.prompt.md")]
    assert any("[redacted]" in p and p.startswith("# Jury triage") for p in prompts), "no triage prompt"

    record = {
        "files": state_files_text(state_dir),
        "redis": redis_dump(worker["JURY_REDIS_URL"]),
        "show": jury("show", slug, env=worker).out,
        "forge": json.dumps([r.body for r in server.requests], default=str),
        "commits": git(mirror, "log", "--all", "--format=%B"),
        "worker.log": (tmp_path / "worker.log").read_text(errors="replace"),
    }
    # Published text is escaped Markdown (orchestrator/markdown_safe.py), so the marker's brackets are
    # escaped; the request bodies are JSON text here, which escapes those backslashes again.
    published_marker = json.dumps("\\[redacted\\]")[1:-1]
    assert published_marker in record["forge"] and "upper middle value" in record["forge"]
    assert {where: leaks(text) for where, text in record.items()} == {where: [] for where in record}
    assert GH_TOKEN not in "".join(record.values())


def test_scrub_takes_the_key_out_of_an_old_record_and_lists_what_was_published(
    jury, shared_redis: str, state_dir: Path
) -> None:
    slug = "r-old-leak"
    said = f"key {KEY} rev {KEY[::-1]} b64 {base64.b64encode(b'x' + KEY.encode()).decode()}"
    events = [
        TargetEvent(
            eid="target",
            target=Target(repo="acme/sample", id="7", url="https://github.com/acme/sample/pull/7"),
        ),
        FindingRaised(eid="f1", id="f1", round=1, agent="leaky", claim=said, loc="stats.py:13", body=said),
        AgentReport(eid="r1", agent="leaky", round=1, verdict="found", seconds=1.0, report=said),
        RunPublished(
            eid="p1",
            key="hand:1",
            state="review",
            ok=True,
            forge="github",
            repo="acme/sample",
            number=7,
            review_url="https://github.example/acme/sample/pull/7#review-1",
        ),
    ]
    files = FileStore(state_dir)
    live = from_url(shared_redis)
    for store in (files, live):
        store.create_run(slug)
        store.append(slug, events)
        store.put_artifact(slug, "round-1.leaky.stdout.txt", said.encode())
        store.write_state(slug, run_json(fold(store.read(slug), slug)))
    ids_before = [i for i, _ in redis.Redis.from_url(shared_redis).xrange(f"{live.prefix}:run:{slug}:events")]
    assert leaks(redis_dump(shared_redis)) and leaks(
        (state_dir / "runs" / slug / "events.ndjson").read_text()
    )

    env = {"JURY_REDIS_URL": shared_redis, "OLD_KEY": KEY}
    r = jury("scrub", slug, "--secret-env", "OLD_KEY", env=env)
    assert r.code == 0, r.out + r.err
    assert "published comments that still hold a secret" in r.out
    review = "https://github.example/acme/sample/pull/7#review-1"
    assert f"{slug}: github acme/sample#7 review {review}" in r.out  # the summary lists the finding
    assert f"{slug}: github acme/sample#7 inline comment on stats.py:13 of review {review}" in r.out
    files_text = "\n".join(p.read_text() for p in (state_dir / "runs" / slug).iterdir() if p.is_file())
    assert leaks(files_text) == [] and leaks(redis_dump(shared_redis)) == []
    # the record still reads: the same events, under the same stream ids, redacted
    for store in (files, live):
        (f,) = fold(store.read(slug), slug).findings.values()
        assert f.claim.startswith("key [redacted] rev [redacted] b64 ")
    ids_after = [i for i, _ in redis.Redis.from_url(shared_redis).xrange(f"{live.prefix}:run:{slug}:events")]
    assert ids_after == ids_before
    assert KEY not in r.out + r.err

    again = jury("scrub", "--secret-env", "OLD_KEY", env=env)  # every run; nothing left to change
    assert again.code == 0 and "scrubbed 0 file(s) and 0 Redis key(s)" in again.out, again.out + again.err

    unknown = jury("scrub", "r-no-such-run", "--secret-env", "OLD_KEY", env=env)
    assert unknown.code != 0 and "no run r-no-such-run" in unknown.err, unknown.err
    missing = jury("scrub", "--secret-env", "NOT_SET_ANYWHERE", env=env)
    assert missing.code != 0 and "--secret-env NOT_SET_ANYWHERE: the variable is not set" in missing.err
