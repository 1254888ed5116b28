"""Redis URLs: rediss:// always verifies the server, and the password is never shown."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from orchestrator.config import Settings, load_settings
from orchestrator.errors import ConfigError, StoreError
from orchestrator.store.redis import from_url
from orchestrator.store.urls import (
    InsecureURL,
    MalformedURL,
    broker_ssl,
    check_shape,
    redact_url,
    scrub,
    secure_url,
)
from workers.runtime.app import celery_config

SECRET = "s3cret-Pa55"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (f"redis://:{SECRET}@redis:6379/0", "redis://:***@redis:6379/0"),
        (
            f"rediss://jury:{SECRET}@h:6380/1?ssl_cert_reqs=required",
            "rediss://jury:***@h:6380/1?ssl_cert_reqs=required",
        ),
        (f"redis://{SECRET}@h/0", "redis://***@h/0"),
        (f"unix:///run/redis.sock?password={SECRET}&db=2", "unix:///run/redis.sock?password=***&db=2"),
        ("unix:///run/redis.sock", "unix:///run/redis.sock"),
        ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
        # A password holding '/', '?' or '#' as it is: its pieces lie all before its last '@'.
        ("redis://:ab/cd@h:6379/0", "redis://***@h:6379/0"),
        ("redis://jury:ab?cd@h:6379/0", "redis://***@h:6379/0"),
        ("rediss://:a#b@c@h/0", "rediss://***@h/0"),
        (None, ""),
    ],
)
def test_redact_url(url: str | None, shown: str) -> None:
    assert redact_url(url) == shown


def test_scrub_masks_the_password_in_any_message() -> None:
    url = f"redis://:{SECRET}@h/0"
    assert scrub(f"cannot parse {url}: bad {SECRET}", url) == "cannot parse redis://:***@h/0: bad ***"


# Passwords that hold '/', '?' or '#' unencoded: redis-py would read another host, port or database (the
# last two name host "u", port 12 without a word), and its error quoted a piece of the password.
SPILLED = [
    "redis://:Zq1/Zq2@127.0.0.1:6379/0",
    "redis://:Zq1#Zq2@127.0.0.1:6379/0",
    "redis://:Zq1?Zq2@127.0.0.1:6379/0",
    "redis://:Zq1?k=Zq2@127.0.0.1:6379/0",
    "rediss://u:987/Zq2@127.0.0.1/0",
    "redis://u:987#Zq2@127.0.0.1/0",
]
PIECES = ("Zq1", "Zq2", "987")  # the passwords' pieces, as no other part of these URLs spells them


@pytest.mark.parametrize("url", SPILLED)
def test_a_password_that_breaks_the_url_is_refused_without_a_piece_of_it(url: str) -> None:
    with pytest.raises(MalformedURL, match="percent-encode") as caught:
        check_shape(url)
    with pytest.raises(StoreError, match="percent-encode") as stored:
        from_url(url)
    shown = str(caught.value) + redact_url(url) + str(stored.value) + scrub(f"bad port in {url}", url)
    assert not [piece for piece in PIECES if piece in shown], shown


@pytest.mark.parametrize(
    "url",
    [
        "redis://:a%2Fb%3Fc%23d@h:6379/0",  # percent-encoded: fine
        "redis://:a@b@h:6379/0",  # an '@' in the password: the last one ends it
        "rediss://h:6380/0?ssl_ca_certs=/etc/jury/a@b.pem",  # an '@' in a CA file's name
        "redis://h:6379/0?password=a@b",  # an '@' in a password given in the query
        "redis://h:6379",
        "redis://h:6379/",
        "redis://h:6379/15?socket_timeout=5",
        "unix:///run/redis/a@b.sock?db=2",
    ],
)
def test_well_formed_urls_pass_the_shape_check(url: str) -> None:
    check_shape(url)


@pytest.mark.parametrize("path", ["/jury", "/3/4", "/0/", "/-1"])
def test_a_path_that_is_no_database_number_is_refused(path: str) -> None:
    """redis-py reads /jury as database 0 and /3/4 as database 34, without a word."""
    with pytest.raises(MalformedURL, match="database number"):
        check_shape(f"redis://:{SECRET}@h:6379{path}")


def test_tls_parameters_on_a_plain_url_are_refused() -> None:
    """Meant TLS and would get none; redis-py itself fails with a TypeError at the first command."""
    with pytest.raises(InsecureURL, match="ssl_ca_certs is a TLS setting but the URL is not rediss"):
        secure_url("redis://h/0?ssl_ca_certs=/ca.pem")


def test_secure_url_requires_verification(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    assert secure_url("rediss://:pw@h:6380/0") == "rediss://:pw@h:6380/0?ssl_cert_reqs=required"
    assert secure_url("rediss://:pw@h/0?ssl_cert_reqs=CERT_REQUIRED", ca) == (
        f"rediss://:pw@h/0?ssl_cert_reqs=required&ssl_ca_certs={ca}"
    )
    assert secure_url("redis://:pw@h/0") == "redis://:pw@h/0"  # plain: left alone
    for weaker in ("ssl_cert_reqs=none", "ssl_cert_reqs=optional", "ssl_check_hostname=false"):
        with pytest.raises(InsecureURL) as caught:
            secure_url(f"rediss://:{SECRET}@h/0?{weaker}")
        assert SECRET not in str(caught.value)
    with pytest.raises(InsecureURL, match="not rediss"):
        secure_url("redis://h/0", ca)
    with pytest.raises(InsecureURL, match="no such file"):
        secure_url("rediss://h/0", tmp_path / "missing.pem")
    with pytest.raises(InsecureURL, match="different files"):
        secure_url(f"rediss://h/0?ssl_ca_certs={tmp_path}/x.pem", ca)


def test_broker_ssl() -> None:
    assert broker_ssl("redis://h/0") is None and broker_ssl("unix:///s") is None
    assert broker_ssl("rediss://h/0?ssl_cert_reqs=required&ssl_ca_certs=/ca.pem") == {
        "ssl_cert_reqs": ssl.CERT_REQUIRED,
        "ssl_ca_certs": "/ca.pem",
    }


def test_settings_secure_the_url_and_never_show_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    s = Settings(redis_url=f"rediss://:{SECRET}@h:6380/0", redis_tls_ca=ca)
    assert s.redis_url == f"rediss://:{SECRET}@h:6380/0?ssl_ca_certs={ca}&ssl_cert_reqs=required"
    assert SECRET not in repr(s) and SECRET not in str(s)
    config = celery_config(s)
    assert config["broker_use_ssl"] == {"ssl_cert_reqs": ssl.CERT_REQUIRED, "ssl_ca_certs": str(ca)}
    assert celery_config(Settings(redis_url="redis://h/0"))["broker_use_ssl"] is False
    assert Settings().retention == 7 * 86400

    for url, ca_env, why in [
        (f"rediss://:{SECRET}@h/0?ssl_cert_reqs=none", None, "would accept any server"),
        (f"redis://:{SECRET}@h/0", str(ca), "not rediss"),
        (None, str(ca), "JURY_REDIS_URL is not"),
        (f"redis://:{SECRET}/x@h/0", None, "percent-encode it"),
        (f"redis://:{SECRET}@h/jury", None, "the database number"),
    ]:
        monkeypatch.delenv("JURY_REDIS_URL", raising=False)
        monkeypatch.delenv("JURY_REDIS_TLS_CA", raising=False)
        if url:
            monkeypatch.setenv("JURY_REDIS_URL", url)
        if ca_env:
            monkeypatch.setenv("JURY_REDIS_TLS_CA", ca_env)
        with pytest.raises(ConfigError, match="JURY_REDIS_URL") as caught:
            load_settings()
        assert why in str(caught.value) and SECRET not in str(caught.value)
    monkeypatch.setenv("JURY_REDIS_URL", "redis://h/0")
    monkeypatch.delenv("JURY_REDIS_TLS_CA", raising=False)
    monkeypatch.setenv("JURY_RETENTION", "0")
    with pytest.raises(ConfigError, match="JURY_RETENTION"):
        load_settings()


def test_store_errors_never_show_the_password() -> None:
    for url in (f"http://:{SECRET}@h/0", f"redis://:{SECRET}@h:notaport/0", f"redis://:{SECRET}@h/0?db=x"):
        with pytest.raises(StoreError) as caught:
            from_url(url)
        assert SECRET not in str(caught.value) and "***" in str(caught.value)
