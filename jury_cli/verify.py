"""``jury verify``: placeholder until the command lands."""


def verify() -> None:
    """Re-run accepted regression tests on trunk."""
