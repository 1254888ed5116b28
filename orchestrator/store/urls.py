"""Redis URLs: TLS that verifies, and a password that is never printed.

Whoever can write to the fleet's Redis chooses what every worker runs, so its URL is a secret and a
``rediss://`` connection must check the server's certificate. Two rules, applied where the URL is read
(``Settings``) so that every client built from it agrees — the store's redis-py client and Celery's broker:

- ``rediss://`` always verifies: ``ssl_cert_reqs=required`` is added when absent and anything weaker
  (``none``, ``optional``, ``ssl_check_hostname=false``) is refused. A private CA is named by
  ``JURY_REDIS_TLS_CA`` (added to the URL as ``ssl_ca_certs``), else the system's trust store is used.
- A URL is shown only through ``redact_url``, which masks the password wherever it sits (userinfo or a
  ``password=`` query parameter).

And two rules of shape (``check_shape``), because redis-py reads a malformed URL silently as another one:

- A password (or user name) that holds ``/``, ``?`` or ``#`` as it is ends the URL's host part early, so
  its ``@`` lands in the path, query or fragment: the URL would name another host, port or database, and
  an error about it would quote part of the password. It is refused (asking for percent-encoding), and
  ``redact_url`` and ``scrub`` mask everything before such an ``@``.
- The path is the database number or nothing: redis-py would take ``/jury`` for database 0 and ``/3/4``
  for database 34.
"""

from __future__ import annotations

import re
import ssl
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from orchestrator.errors import StoreError

MASK = "***"

# How the query spells "verify the certificate" (kombu also accepts the constant's name).
_REQUIRED = frozenset({"required", "cert_required"})
_SECRET_PARAMS = frozenset({"password", "pass", "passwd"})
_DB_PATH = re.compile(r"(/[0-9]{0,5})?")  # redis://host:6379/0, /, or none (database 0)


class InsecureURL(ValueError):
    """A Redis URL that would connect without verifying the server, or a TLS setting it cannot use."""


class MalformedURL(ValueError):
    """A Redis URL whose user name or password breaks its shape (see the module docstring)."""


def _userinfo_spilled(url: str) -> bool:
    """Whether ``url``'s userinfo holds an unencoded ``/``, ``?`` or ``#``: no ``@`` in the host part, one
    after it where a URL of Jury's never has one (the path, the fragment, a query key, or a query value
    other than a file name of an ``ssl_*`` parameter or a ``password=``)."""
    parts = urlsplit(url)
    if parts.scheme.lower() not in {"redis", "rediss"} or "@" in parts.netloc:
        return False
    if "@" in parts.path or "@" in parts.fragment:
        return True
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    allowed = ("ssl_", *_SECRET_PARAMS)  # a CA file's name, a password given as ?password=
    return any("@" in key or ("@" in value and not key.lower().startswith(allowed)) for key, value in pairs)


def check_shape(url: str) -> None:
    """MalformedURL when ``url``'s password or user name holds ``/``, ``?`` or ``#`` unencoded, or its path
    is not a database number (see the module docstring).

    The messages never quote the URL: what they would show is the password's pieces.
    """
    if _userinfo_spilled(url):
        raise MalformedURL(
            "the password (or user name) holds '/', '?' or '#' as it is, which ends the host part early: "
            "percent-encode it (python3 -c 'import sys, urllib.parse as u; print(u.quote(sys.argv[1], "
            'safe=""))\' PASSWORD) or choose one of letters, digits and -._~'
        )
    parts = urlsplit(url)
    if parts.scheme.lower() in {"redis", "rediss"} and not _DB_PATH.fullmatch(parts.path):
        raise MalformedURL(
            "the path after the host must be the database number (redis://HOST:6379/0) or nothing"
        )


def redact_url(url: str | None) -> str:
    """``url`` with its password masked (``rediss://:***@host:6379/0``); safe to log or print."""
    if not url:
        return ""
    try:
        if _userinfo_spilled(url):  # the password's pieces lie everywhere before its last '@'
            scheme, _, rest = url.partition("://")
            return f"{scheme}://{MASK}@{rest.rpartition('@')[2]}"
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, _, hostport = netloc.rpartition("@")
            user, colon, _ = userinfo.partition(":")
            netloc = f"{user}:{MASK}@{hostport}" if colon else f"{MASK}@{hostport}"
        query = parts.query
        if query:
            pairs = parse_qsl(query, keep_blank_values=True)
            query = urlencode([(k, MASK if k.lower() in _SECRET_PARAMS else v) for k, v in pairs], safe="*/")
        return _join(parts.scheme, netloc, parts.path, query, parts.fragment)
    except ValueError:  # not even a URL: show its scheme at most
        scheme, sep, _ = url.partition("://")
        return f"{scheme}://{MASK}" if sep else MASK


def secure_url(url: str, tls_ca: Path | None = None) -> str:
    """``url`` made to verify its TLS peer (see the module's rules); InsecureURL when it cannot.

    Messages never quote the URL: it may hold the password.
    """
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme != "rediss":
        if tls_ca is not None:
            raise InsecureURL("JURY_REDIS_TLS_CA is set but the URL is not rediss:// (TLS)")
        tls_params = sorted({k for k, _ in parse_qsl(parts.query) if k.lower().startswith("ssl_")})
        if tls_params:  # meant TLS, would get none (and redis-py would fail at the first command)
            raise InsecureURL(f"{', '.join(tls_params)} is a TLS setting but the URL is not rediss:// (TLS)")
        return url
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    params = {k: v for k, v in pairs}
    reqs = params.get("ssl_cert_reqs")
    if reqs is not None and reqs.strip().lower() not in _REQUIRED:
        raise InsecureURL(
            f"rediss:// with ssl_cert_reqs={reqs!r} would accept any server: use ssl_cert_reqs=required "
            "(and JURY_REDIS_TLS_CA for a private CA)"
        )
    if params.get("ssl_check_hostname", "true").strip().lower() in {"false", "0", "no", "off"}:
        raise InsecureURL(
            "rediss:// with ssl_check_hostname=false is refused: the certificate must name the host"
        )
    if tls_ca is not None:
        ca = Path(tls_ca).expanduser()
        if not ca.is_file():
            raise InsecureURL(f"JURY_REDIS_TLS_CA: no such file: {ca}")
        if params.get("ssl_ca_certs") not in (None, str(ca)):
            raise InsecureURL("the URL's ssl_ca_certs and JURY_REDIS_TLS_CA name different files")
        params["ssl_ca_certs"] = str(ca)
    params["ssl_cert_reqs"] = "required"
    query = urlencode(list(params.items()), safe="/")
    return _join(parts.scheme, parts.netloc, parts.path, query, parts.fragment)


def broker_ssl(url: str) -> dict[str, Any] | None:
    """Celery's ``broker_use_ssl`` for ``url``: None for plain Redis, else certificate checks required.

    kombu alone would connect to a ``rediss://`` broker with ``CERT_NONE`` (and only log a warning).
    """
    parts = urlsplit(url)
    if parts.scheme.lower() != "rediss":
        return None
    options: dict[str, Any] = {"ssl_cert_reqs": ssl.CERT_REQUIRED}
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key in {"ssl_ca_certs", "ssl_certfile", "ssl_keyfile"} and value:
            options[key] = value
    return options


def _join(scheme: str, netloc: str, path: str, query: str, fragment: str) -> str:
    """The URL again, keeping ``scheme://`` with no host (``unix:///path``, which urlunsplit shortens)."""
    return (
        f"{scheme}://{netloc}{path}" + (f"?{query}" if query else "") + (f"#{fragment}" if fragment else "")
    )


def scrub(text: str, url: str | None) -> str:
    """``text`` (an error message about ``url``) with the URL's password masked wherever it appears."""
    if not url:
        return text
    secrets: list[str] = []
    try:
        if _userinfo_spilled(url):  # the password's pieces could be anywhere in the message
            return MASK
        parts = urlsplit(url)
        secrets += [s for s in (parts.password, parts.username if parts.password is None else None) if s]
        secrets += [v for k, v in parse_qsl(parts.query) if k.lower() in _SECRET_PARAMS and v]
    except ValueError:
        return MASK
    for secret in sorted(set(secrets), key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text


def normalize_url(url: str) -> str:
    """A redis-py URL: ``redis+socket://`` (kombu's) becomes ``unix://``, its ``virtual_host`` the ``db``;
    StoreError for a scheme Jury does not speak or a URL of the wrong shape (``check_shape``)."""
    scheme, sep, rest = url.partition("://")
    scheme = scheme.lower()
    if not sep or scheme not in {"redis", "rediss", "unix", "redis+socket"}:
        raise StoreError(
            f"unsupported Redis URL {redact_url(url)!r}: use redis://, rediss://, unix:// or redis+socket://"
        )
    try:
        check_shape(url)
    except MalformedURL as exc:
        raise StoreError(f"bad Redis URL {redact_url(url)!r}: {exc}") from exc
    if scheme != "redis+socket":
        return url
    location, qsep, query = rest.partition("?")
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode([("db" if k == "virtual_host" else k, v) for k, v in pairs])
    return f"unix://{location}{qsep}{query}"
