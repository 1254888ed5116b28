"""A semantic version and its precedence (semver 2.0.0, section 11)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import total_ordering

from verlib.errors import InvalidVersion

_NUM = r"0|[1-9]\d*"
_IDENT = r"[0-9A-Za-z-]+"
_VERSION_RE = re.compile(
    rf"^v?(?P<major>{_NUM})\.(?P<minor>{_NUM})\.(?P<patch>{_NUM})"
    rf"(?:-(?P<pre>{_IDENT}(?:\.{_IDENT})*))?"
    rf"(?:\+(?P<build>{_IDENT}(?:\.{_IDENT})*))?$"
)


def _split(text: str | None) -> tuple[str, ...]:
    return tuple(text.split(".")) if text else ()


def _check_pre(parts: tuple[str, ...]) -> None:
    for part in parts:
        if part.isdigit() and len(part) > 1 and part.startswith("0"):
            raise InvalidVersion(f"numeric pre-release identifier with a leading zero: {part!r}")


@total_ordering
@dataclass(frozen=True)
class Version:
    """``major.minor.patch[-pre][+build]``. Build metadata does not take part in precedence."""

    major: int
    minor: int
    patch: int
    pre: tuple[str, ...] = ()
    build: tuple[str, ...] = field(default=(), compare=False)

    @classmethod
    def parse(cls, text: str) -> Version:
        m = _VERSION_RE.match(text.strip())
        if not m:
            raise InvalidVersion(f"not a semantic version: {text!r}")
        pre = _split(m["pre"])
        _check_pre(pre)
        return cls(int(m["major"]), int(m["minor"]), int(m["patch"]), pre, _split(m["build"]))

    @classmethod
    def coerce(cls, text: str) -> Version:
        """A version from a loose text: ``"1"`` is 1.0.0, ``"1.2"`` is 1.2.0."""
        parts = text.strip().lstrip("v").split(".")
        if not 1 <= len(parts) <= 3 or not all(p.isdigit() for p in parts):
            raise InvalidVersion(f"cannot coerce {text!r}")
        nums = [int(p) for p in parts] + [0] * (3 - len(parts))
        return cls(nums[0], nums[1], nums[2])

    def __str__(self) -> str:
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.pre:
            text += "-" + ".".join(self.pre)
        if self.build:
            text += "+" + ".".join(self.build)
        return text

    @property
    def is_prerelease(self) -> bool:
        return bool(self.pre)

    def release(self) -> Version:
        """The version without pre-release and build."""
        return Version(self.major, self.minor, self.patch)

    def bump_major(self) -> Version:
        return Version(self.major + 1, 0, 0)

    def bump_minor(self) -> Version:
        return Version(self.major, self.minor + 1, 0)

    def bump_patch(self) -> Version:
        """The next patch; a pre-release bumps to its own release (1.2.3-rc.1 -> 1.2.3)."""
        if self.pre:
            return self.release()
        return Version(self.major, self.minor, self.patch + 1)

    def bump_pre(self, label: str = "rc") -> Version:
        """The next pre-release: 1.2.3 -> 1.2.4-rc.1, 1.2.4-rc.1 -> 1.2.4-rc.2."""
        if not self.pre:
            return Version(self.major, self.minor, self.patch + 1, (label, "1"))
        last = self.pre[-1]
        if last.isdigit():
            return Version(self.major, self.minor, self.patch, (*self.pre[:-1], str(int(last) + 1)))
        return Version(self.major, self.minor, self.patch, (*self.pre, "1"))

    def _key(self) -> tuple[int, int, int]:
        return (self.major, self.minor, self.patch)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return self._key() == other._key() and self.pre == other.pre

    def __hash__(self) -> int:
        return hash((self._key(), self.pre))

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        if self._key() != other._key():
            return self._key() < other._key()
        return _pre_lt(self.pre, other.pre)


def _pre_lt(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    """Pre-release precedence: a version without one is greater; identifiers compare left to right,
    numbers numerically and below letters; a shorter list of equal identifiers is lower."""
    if not a or not b:
        return bool(a) and not b
    for x, y in zip(a, b, strict=False):
        if x == y:
            continue
        if x.isdigit() and y.isdigit():
            return int(x) < int(y)
        if x.isdigit() != y.isdigit():
            return x.isdigit()
        return x < y
    return len(a) < len(b)
