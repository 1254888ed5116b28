"""Version ranges: comparators joined by commas (and), alternatives joined by ``||`` (or)."""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from verlib.errors import InvalidRange, InvalidVersion
from verlib.version import Version

_OPS: dict[str, Callable[[Version, Version], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    ">": operator.gt,
    "<": operator.lt,
    "==": operator.eq,
    "!=": operator.ne,
}
_COMPARATOR_RE = re.compile(r"^(?P<op>>=|<=|>|<|==|!=|\^|~|=)?\s*(?P<version>\S+)$")


@dataclass(frozen=True)
class Comparator:
    op: str
    version: Version

    def matches(self, v: Version) -> bool:
        return _OPS[self.op](v, self.version)

    def __str__(self) -> str:
        return f"{self.op}{self.version}"


def _caret(v: Version) -> list[Comparator]:
    """^1.2.3 allows changes that keep the left-most non-zero part: >=1.2.3, <2.0.0."""
    if v.major > 0:
        upper = Version(v.major + 1, 0, 0)
    elif v.minor > 0:
        upper = Version(0, v.minor + 1, 0)
    else:
        upper = Version(0, 0, v.patch + 1)
    return [Comparator(">=", v), Comparator("<", upper)]


def _tilde(v: Version) -> list[Comparator]:
    """~1.2.3 allows patch changes: >=1.2.3, <1.3.0."""
    return [Comparator(">=", v), Comparator("<", Version(v.major, v.minor + 1, 0))]


def _comparators(text: str) -> list[Comparator]:
    m = _COMPARATOR_RE.match(text.strip())
    if not m:
        raise InvalidRange(f"not a comparator: {text!r}")
    op, raw = m["op"] or "==", m["version"]
    try:
        version = Version.parse(raw) if raw.count(".") >= 2 else Version.coerce(raw)
    except InvalidVersion as exc:
        raise InvalidRange(f"bad version in {text!r}: {exc}") from exc
    if op == "^":
        return _caret(version)
    if op == "~":
        return _tilde(version)
    return [Comparator("==" if op == "=" else op, version)]


@dataclass(frozen=True)
class Range:
    """Alternatives, each a list of comparators that must all match."""

    alternatives: tuple[tuple[Comparator, ...], ...]

    def matches(self, v: Version | str, *, prereleases: bool = False) -> bool:
        """Whether ``v`` is in the range. A pre-release matches only when ``prereleases`` is set or a
        comparator of the same alternative names a pre-release of the same major.minor.patch."""
        version = Version.parse(v) if isinstance(v, str) else v
        for group in self.alternatives:
            if not all(c.matches(version) for c in group):
                continue
            if version.is_prerelease and not prereleases:
                same = any(c.version.is_prerelease and c.version._key() == version._key() for c in group)
                if not same:
                    continue
            return True
        return False

    def filter(self, versions: Iterable[Version | str], *, prereleases: bool = False) -> list[Version]:
        out = []
        for v in versions:
            version = Version.parse(v) if isinstance(v, str) else v
            if self.matches(version, prereleases=prereleases):
                out.append(version)
        return out

    def best(self, versions: Iterable[Version | str], *, prereleases: bool = False) -> Version | None:
        """The highest version in the range, or None."""
        found = self.filter(versions, prereleases=prereleases)
        return max(found) if found else None

    def __str__(self) -> str:
        return " || ".join(", ".join(str(c) for c in group) for group in self.alternatives)


def parse_range(text: str) -> Range:
    """``">=1.2, <2 || ^3.1"``; an empty text or ``*`` matches every release."""
    text = text.strip()
    if text in ("", "*"):
        return Range(((Comparator(">=", Version(0, 0, 0)),),))
    groups = []
    for alternative in text.split("||"):
        parts = [p for p in alternative.split(",") if p.strip()]
        if not parts:
            raise InvalidRange(f"empty alternative in {text!r}")
        group: list[Comparator] = []
        for part in parts:
            group.extend(_comparators(part))
        groups.append(tuple(group))
    return Range(tuple(groups))
