"""Bounded JSON reading under property-based tests (orchestrator/jsonsafe.py).

``loads`` answers a value or ``BadJSON`` (a ValueError), never another error, whatever the text or bytes;
what ``json.dumps`` wrote within the bounds reads back equal; ``values`` finds the JSON embedded in prose,
skips what is nested too deep, and raises nothing.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from orchestrator import jsonsafe
from tests.unit.hostile import deep_json, hostile_text, json_values

OBJECTS = re.compile(r'\{(?=\s*["}])')
VALUES = re.compile(r'\{(?=\s*["}])|\[(?=\s*[\[{"\]\d\-tfn])')
ANY_TEXT = hostile_text(['{"a": ', "[", "]", "}", '"', "\\u", "NaN", "1e999", "-"], extra=[deep_json()])
PROSE = st.text(alphabet=st.characters(exclude_characters='{}[]"\\'), max_size=40)


def nested(depth: int) -> Any:
    """A list ``depth`` levels deep, built without recursion."""
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


@given(text=ANY_TEXT | st.binary(max_size=300))
@example(text="[" * 100_000)
@example(text=b"\xff\xfe{")
@example(text="1" * 5_000)  # int() of over 4,300 digits is a ValueError
@example(text=b'{"a": "\xed\xa0\x80"}')  # a surrogate, encoded
def test_loads_answers_a_value_or_bad_json(text: str | bytes) -> None:
    try:
        value = jsonsafe.loads(text)
    except jsonsafe.BadJSON:
        return
    assert jsonsafe.depth(value) <= jsonsafe.MAX_DEPTH


@given(value=json_values(30))
def test_what_json_dumps_wrote_reads_back(value: Any) -> None:
    for text in (json.dumps(value), json.dumps(value, indent=2, ensure_ascii=False)):
        assert jsonsafe.loads(text) == value
        assert jsonsafe.loads(text.encode("utf-8", "surrogatepass")) == value


@given(depth=st.integers(min_value=1, max_value=3 * jsonsafe.MAX_DEPTH) | st.sampled_from([10_000, 200_000]))
def test_the_depth_bound_is_exact(depth: int) -> None:
    text = "[" * depth + "]" * depth
    if depth <= jsonsafe.MAX_DEPTH:
        assert jsonsafe.depth(jsonsafe.loads(text)) == depth
    else:
        with pytest.raises(jsonsafe.BadJSON, match="deeper than"):
            jsonsafe.loads(text)
    assert jsonsafe.depth(nested(depth), limit=10**6) == depth  # iterative: no RecursionError


@given(text=ANY_TEXT, arrays=st.booleans())
@example(text='{"a":' * 100_000 + "\n" + '{"verdict": "accepted"}', arrays=False)
def test_values_in_any_text_are_bounded(text: str, arrays: bool) -> None:
    for value in jsonsafe.values(text, VALUES if arrays else OBJECTS):
        assert isinstance(value, dict | list) or arrays
        assert jsonsafe.depth(value) <= jsonsafe.MAX_DEPTH


@given(
    docs=st.lists(st.dictionaries(st.text(max_size=8), json_values(8), max_size=4), min_size=1, max_size=4),
    prose=st.lists(PROSE, min_size=5, max_size=5),
    deep=st.booleans(),
)
def test_objects_in_prose_are_found_in_order(
    docs: list[dict[str, Any]], prose: list[str], deep: bool
) -> None:
    """Prose between them, and a line nested past the decoder's reach before them, hide none."""
    head = ("[" * 100_000 + "\n") if deep else ""
    text = head + prose[0] + "".join(json.dumps(d) + prose[i % 4 + 1] for i, d in enumerate(docs))
    assert list(jsonsafe.values(text, OBJECTS)) == docs
