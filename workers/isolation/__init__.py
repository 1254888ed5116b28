"""Isolation: everything that confines what runs the reviewed code or an agent: the bubblewrap jail, its uid
and rlimits, supervised processes with their output caps, the egress proxy, worktrees and a host's mirrors,
and the ``[limits]`` semaphores. The lowest layer of ``workers``: it imports no other subpackage."""
