"""Whether a URL would carry what it is sent (a key, a token) across the network in clear.

A plain ``http://`` request to this machine (``localhost``, a loopback address: a local proxy, a test's
stand-in) never leaves it; to any other host, its headers can be read by anyone on the way. Callers that
would send a secret refuse such a URL unless the operator says every network between is theirs.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit


def cleartext_host(url: str) -> str | None:
    """The host of a plain ``http://`` URL that is not this machine; None for https://, for a loopback
    address or ``localhost``, and for a URL without a host."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if parts.scheme != "http" or not host:
        return None
    if host == "localhost" or host.endswith(".localhost"):
        return None
    try:
        return None if ipaddress.ip_address(host).is_loopback else host
    except ValueError:
        return host


def key_in_clear(base_url: str, api_key_env: str | None, insecure_http: bool) -> str | None:
    """What is wrong when an http agent's key would cross the network in clear (plain ``http://`` to a
    host that is not this machine, without the operator's ``insecure_http``); None when it would not."""
    host = cleartext_host(base_url)
    if not host or not api_key_env or insecure_http:
        return None
    return (
        f"base_url is plain http:// to {host}, so the key in ${api_key_env} would cross the network in"
        " clear: use https://, a loopback address (a local proxy), or set insecure_http = true if every"
        " network between is yours"
    )
