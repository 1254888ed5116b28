"""Errors raised by verlib."""


class VerlibError(ValueError):
    """Base of every verlib error."""


class InvalidVersion(VerlibError):
    """The text is not a semantic version."""


class InvalidRange(VerlibError):
    """The text is not a version range."""
