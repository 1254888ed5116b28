"""The compose set-up refuses the example file's secrets, checked without a Docker engine (none runs where
Jury is tested): ``docker/check-secrets.sh`` is run here with ``/bin/sh`` on the environment
``.env.example`` gives (refused, each secret named, none shown) and on real secrets (accepted), and
``docker-compose.yml`` is parsed to check that the fleet cannot start without that script succeeding."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "docker" / "check-secrets.sh"
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]
SECRETS = ("JURY_REDIS_PASSWORD", "JURY_WEB_TOKEN", "FLOWER_BASIC_AUTH")
GOOD = {
    "JURY_REDIS_PASSWORD": "q3Vt9-lKd0_Zx8mWp2rYb7sNc4uHe1aF",
    "JURY_WEB_TOKEN": "Hn5-Wq2xTz8_Lm4vRb9sKp1cYe6dFu3g",
    "FLOWER_BASIC_AUTH": "admin:Pz7_Rk2mWq9-Tx4nLv8bYc1sHd5eGf",
}


def example_env() -> dict[str, str]:
    """What ``docker compose`` reads from ``.env`` when it is a copy of ``.env.example``."""
    env = {}
    for line in (ROOT / ".env.example").read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            name, _, value = line.partition("=")
            env[name.strip()] = value.strip()
    return env


def check(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["/bin/sh", str(SCRIPT)], env={"PATH": "/usr/bin:/bin", **env}, capture_output=True, text=True
    )


def test_the_example_files_secrets_are_refused_each_named_none_shown() -> None:
    env = example_env()
    assert set(SECRETS) <= set(env) and all("change-me" in env[n] for n in SECRETS)
    done = check(env)
    assert done.returncode == 1 and done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 3 and all(line.startswith("jury: ") for line in lines), done.stderr
    hint = 'set a long random secret (python -c "import secrets; print(secrets.token_urlsafe(32))")'
    named = ("JURY_REDIS_PASSWORD", "JURY_WEB_TOKEN", "FLOWER_BASIC_AUTH's password")
    assert lines == [  # exactly these words: no value shown
        f"jury: {n} in .env is still the example's placeholder (change-me): {hint}" for n in named
    ]


def test_long_random_secrets_pass() -> None:
    done = check(GOOD)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


@pytest.mark.parametrize(
    ("name", "value", "why"),
    [
        ("JURY_REDIS_PASSWORD", "", "is empty"),
        ("JURY_REDIS_PASSWORD", "CHANGE-ME-please-0123456789", "placeholder"),
        ("JURY_WEB_TOKEN", "sh0rt-T0ken", "shorter than 16"),
        ("FLOWER_BASIC_AUTH", "admin:change-me-three-and-more", "placeholder"),
        ("FLOWER_BASIC_AUTH", "n0-Colon-S0-n0-Passw0rd-at-all", "user:password"),
        ("FLOWER_BASIC_AUTH", "admin:sh0rtPw", "shorter than 16"),
    ],
)
def test_each_weak_secret_is_refused_alone(name: str, value: str, why: str) -> None:
    done = check({**GOOD, name: value})
    assert done.returncode == 1 and len(done.stderr.splitlines()) == 1, done.stderr
    assert name in done.stderr and why in done.stderr
    assert not value or value.rpartition(":")[2] not in done.stderr


def test_no_service_starts_before_the_check_succeeds() -> None:
    check_svc = SERVICES["secrets"]
    assert check_svc["entrypoint"] == ["sh", "/jury-checks/check-secrets.sh"]
    assert "./docker/check-secrets.sh:/jury-checks/check-secrets.sh:ro" in check_svc["volumes"]
    assert check_svc["network_mode"] == "none" and "ports" not in check_svc
    assert set(check_svc["environment"]) == set(SECRETS)  # what it checks, and nothing else
    assert SERVICES["redis"]["depends_on"]["secrets"] == {"condition": "service_completed_successfully"}
    for name, svc in SERVICES.items():
        if name in ("secrets", "redis"):
            continue
        assert svc["depends_on"]["redis"] == {"condition": "service_healthy"}, name
    # every secret a service reads is one the check reads, interpolated the same way
    for name, svc in SERVICES.items():
        env = svc.get("environment", {})
        for secret in SECRETS:
            if secret in env and name != "secrets":
                assert env[secret] == check_svc["environment"][secret], (name, secret)
