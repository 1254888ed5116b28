"""The fleet: what many workers on one Redis do together and what an operator sees of them: presence, the
spend ledger, schedules, the reaper, metrics, the fleet's read model (``fleetview``) and sweeps of many
PRs."""
