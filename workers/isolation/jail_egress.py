"""What a jail whose only way out is Jury's egress proxy (``workers.isolation.egress``) adds to its bwrap
command.

Apart from ``workers.isolation.sandbox`` so that the proxy's side (``workers.isolation.egress``) and the
jail's side share these few names without either importing the other whole.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

EGRESS_DIR = Path("/run/jury-egress")  # where the egress proxy's socket directory shows inside


@dataclass(frozen=True)
class EgressMounts:
    """A jail whose only way out is Jury's egress proxy (``workers.isolation.egress``): its own network
    namespace, the proxy's socket directory at ``EGRESS_DIR`` and a hosts file over ``/etc/hosts``."""

    socket_dir: Path
    hosts_file: Path
    # A forwarder listens below port 1024 inside: CAP_NET_BIND_SERVICE is kept, in the sandbox's own user
    # namespace, where it only reaches the sandbox's own network namespace.
    low_ports: bool = False


def egress_args(egress: EgressMounts | None) -> list[str]:
    """The bwrap arguments of a jail's ``egress`` (after every other mount; the network namespace is
    ``Jail.has_network``'s): the proxy's socket directory, the hosts file, the one capability it may need."""
    if egress is None:
        return []
    out = [
        "--ro-bind",
        str(egress.socket_dir),
        str(EGRESS_DIR),
        "--ro-bind",
        str(egress.hosts_file),
        "/etc/hosts",
    ]
    if egress.low_ports:
        out += ["--cap-add", "CAP_NET_BIND_SERVICE"]
    return out
