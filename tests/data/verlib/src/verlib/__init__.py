"""Semantic versions: parse, compare, bump and match ranges."""

from verlib.errors import InvalidRange, InvalidVersion
from verlib.ranges import Range, parse_range
from verlib.version import Version

__all__ = ["InvalidRange", "InvalidVersion", "Range", "Version", "parse_range"]
