"""Finding a secret in text however an agent spelled it, and putting ``[redacted]`` in its place.

An agent that was handed a key can print it, and whatever it prints becomes a finding: the review
published on the PR, the events, the artifacts, the next agent's prompt, a fix commit's message. Matching
the exact string alone lets through the cheapest disguises, so ``Redactor`` matches every spelling below
of every secret it holds, in one compiled regular expression:

- the value itself, each character also as its URL escape (``%2D``, ``+`` for a space) or its JSON
  escape (``\\u002d``): URL-encoded and JSON-encoded text alike;
- the value reversed, with the same escapes;
- its UTF-8 bytes in hex, either case;
- its base64 and base64url, at each of the three byte alignments it can have inside a longer encoded
  string: only the characters that depend on the secret's bytes alone (the "stable core") are matched,
  so the one or two boundary characters shared with the neighbouring bytes may stay;

and each of these split anywhere by whitespace or line breaks (and their JSON escapes ``\\n``, ``\\r``,
``\\t``), as a wrapped line or a value cut in two by a space is.

A secret shorter than ``MIN_ENCODED_CHARS`` is matched only as itself and its JSON escape: the encoded
spellings of a short value are shorter still and would redact ordinary text. So is one longer than
``MAX_ENCODED_CHARS`` (a whole PEM key, whose lines are secrets of their own).

Pure: no I/O. The process-wide registry of secrets is ``orchestrator.logs`` (``add_secret``/``redact``).
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

REDACTED = "[redacted]"
MIN_ENCODED_CHARS = 8  # a secret this long or longer is matched in every encoding
# ... and no longer than this: a longer one (a whole PEM key) is matched as itself, its lines each being
# secrets of their own (``key_file_fields``); its every spelling would cost seconds to compile.
MAX_ENCODED_CHARS = 256
# What may split a secret: whitespace and line breaks, raw or as the JSON escapes a JSON line holds.
SEPARATOR = r"(?:\s|\\[nrt])*"


_UNRESERVED_RE = re.compile(r"[A-Za-z0-9._~-]")  # what URL encoding leaves as it is (RFC 3986)


def _url_escapes(char: str) -> str:
    """The percent-encoding of ``char``'s UTF-8 bytes, hex digits of either case (a split may fall
    inside an escape too)."""
    digits = [f"{byte:02x}" for byte in char.encode("utf-8")]
    return SEPARATOR.join(f"%{SEPARATOR}(?i:{d[0]}){SEPARATOR}(?i:{d[1]})" for d in digits)


def _char(char: str) -> str:
    """A pattern for one character of a secret: itself, URL-escaped (when URL encoding escapes it: not
    a letter, digit or ``-._~``), or JSON-escaped."""
    options = [re.escape(char)]
    if not _UNRESERVED_RE.fullmatch(char):
        options.append(_url_escapes(char))
    if char == " ":
        options.append(r"\+")
    escaped = json.dumps(char)[1:-1]
    if escaped != char:
        options.append(SEPARATOR.join(re.escape(c) for c in escaped))
    units = char.encode("utf-16-be").hex()
    options.append("".join(rf"\\u(?i:{units[i : i + 4]})" for i in range(0, len(units), 4)))
    return "(?:" + "|".join(options) + ")"


def _split(units: Iterable[str]) -> str:
    """The pattern of ``units`` in order, any of them split from the next by ``SEPARATOR``."""
    return SEPARATOR.join(units)


def base64_cores(value: bytes, alphabet: str = "standard") -> list[str]:
    """The base64 characters that hold ``value``'s bytes alone, at byte offsets 0, 1 and 2 of a longer
    encoded string (``alphabet``: ``standard`` or ``urlsafe``).

    Character ``i`` of an encoding covers bits ``[6i, 6i + 6)``; with ``k`` bytes before the value, the
    value fills bits ``[8k, 8k + 8n)``, so only the characters from ``ceil(8k / 6)`` to
    ``floor(8(k + n) / 6)`` depend on it alone: those are matched wherever they occur."""
    cores: list[str] = []
    for offset in range(3):
        encoded = base64.b64encode(bytes(offset) + value).decode("ascii")
        start = -(-8 * offset // 6)
        end = 8 * (offset + len(value)) // 6
        core = encoded[start:end]
        if alphabet == "urlsafe":
            core = core.translate(str.maketrans("+/", "-_"))
        cores.append(core)
    return cores


def spellings(secret: str) -> list[str]:
    """The patterns that find ``secret``, one per spelling (see the module's docstring)."""
    if not MIN_ENCODED_CHARS <= len(secret) <= MAX_ENCODED_CHARS:
        return [re.escape(secret), re.escape(json.dumps(secret)[1:-1])]
    plain = _split(_char(c) for c in secret)
    data = secret.encode("utf-8")
    found = [plain, _split(_char(c) for c in reversed(secret))]
    found.append(_split(f"(?i:{c})" for c in data.hex()))
    for alphabet in ("standard", "urlsafe"):
        for core in base64_cores(data, alphabet):
            found.append(_split(re.escape(c) for c in core))
    return found


def first_chars(secret: str) -> set[str]:
    """Every character a spelling of ``secret`` can start with: the expression looks ahead for one of
    them before it tries its alternatives, which makes it several times faster on text without any."""
    chars = {secret[0], "%", "\\", "+"}
    data = secret.encode("utf-8")
    if MIN_ENCODED_CHARS <= len(secret) <= MAX_ENCODED_CHARS:
        chars |= {secret[-1], data.hex()[0], data.hex()[0].upper()}
        chars |= {core[0] for alphabet in ("standard", "urlsafe") for core in base64_cores(data, alphabet)}
    return chars


@dataclass(frozen=True)
class Redactor:
    """A set of secrets and the one expression that finds any spelling of any of them."""

    secrets: frozenset[str] = frozenset()
    _pattern: re.Pattern[str] | None = field(default=None, compare=False, repr=False)

    @classmethod
    def of(cls, secrets: Iterable[str]) -> Redactor:
        kept = frozenset(s for s in secrets if s)
        if not kept:
            return cls()
        # Longest first: a secret that contains another is replaced whole, not around the shorter one.
        ordered = sorted(kept, key=lambda s: (-len(s), s))
        alternatives = "|".join(f"(?:{p})" for s in ordered for p in spellings(s))
        starts = "".join(re.escape(c) for c in sorted(set().union(*(first_chars(s) for s in kept))))
        return cls(kept, re.compile(f"(?=[{starts}])(?:{alternatives})"))

    def with_secrets(self, secrets: Iterable[str]) -> Redactor:
        """This redactor with ``secrets`` added (itself when none is new)."""
        new = {s for s in secrets if s} - self.secrets
        return self if not new else Redactor.of(self.secrets | new)

    def redact(self, text: str) -> str:
        """``text`` with every spelling of every secret replaced by ``[redacted]``."""
        if self._pattern is None or not text:
            return text
        return self._pattern.sub(REDACTED, text)

    def holds(self, text: str) -> bool:
        """Whether ``text`` holds any spelling of a secret."""
        return self._pattern is not None and self._pattern.search(text) is not None

    def redact_json(self, value: Any) -> Any:
        """``value`` (JSON-like: dicts, lists, strings) with every string redacted, keys too."""
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, dict):
            return {self.redact_json(k): self.redact_json(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.redact_json(v) for v in value]
        return value


_PEM_ARMOR = re.compile(r"-----(?:BEGIN|END) [A-Z0-9 ]+-----")  # the same in every PEM: not a secret


# A key file's field whose name says it holds a secret (``private_key``, ``client_secret``, ``password``).
SECRET_FIELD_RE = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|PRIVATE|AUTH", re.IGNORECASE)
_ASSIGNMENT_RE = re.compile(r"^(?:export\s+)?([A-Za-z_][A-Za-z0-9_.-]*)\s*[=:]\s*(.*)$")


def key_file_fields(text: str) -> list[str]:
    """The values in a key file's ``text`` that are secrets, each at least ``MIN_ENCODED_CHARS`` long.

    Named fields (a JSON document's, or ``name = value`` / ``name: value`` lines): those whose name looks
    secret (``SECRET_FIELD_RE``: a service account's ``private_key``, an OAuth client's
    ``client_secret``), or every one when no name does — so a service account's ``type`` or ``token_uri``
    is not redacted wherever it appears, but an unknown layout loses nothing. Anything else (a PEM key):
    every line, so its body's base64 lines are found one by one. The file's path is never among them: a
    path is not a secret."""
    try:
        document = json.loads(text)
    except ValueError:
        document = None
    named: list[tuple[str, str]] = []
    if isinstance(document, dict | list):
        named = list(_named_strings(document, ""))
    else:
        for line in text.splitlines():
            match = _ASSIGNMENT_RE.match(line.strip())
            if match:
                named.append((match.group(1), match.group(2).strip().strip("'\"")))
    if named:
        chosen = [v for name, v in named if SECRET_FIELD_RE.search(name)] or [v for _, v in named]
    else:
        chosen = [line.strip() for line in text.splitlines()]
    values: list[str] = []
    for value in chosen:
        values.append(value)
        # a PEM inside a field, with real or escaped line breaks: its body's lines stand alone in output
        values.extend(part.strip() for part in re.split(r"\n|\\n", value) if part != value)
    return sorted({v for v in values if len(v) >= MIN_ENCODED_CHARS and not _PEM_ARMOR.fullmatch(v)})


def _named_strings(value: Any, name: str) -> Iterator[tuple[str, str]]:
    """Every string of a JSON value with the name of the field that holds it (a list's items inherit it)."""
    if isinstance(value, str):
        yield name, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _named_strings(item, str(key))
    elif isinstance(value, list):
        for item in value:
            yield from _named_strings(item, name)


def redact_document(text: str, redactor: Redactor) -> str:
    """``text`` redacted, keeping it parseable: a JSON document (or a ``head\\n{json}`` record, as the
    Redis snapshot is) has each of its strings redacted and is written again, so a match can never cut
    a JSON escape in two; any other text is redacted as it is."""
    if not redactor.holds(text):
        return text
    try:
        return _dump(redactor.redact_json(json.loads(text)))
    except ValueError:
        pass
    head, sep, rest = text.partition("\n")
    if sep and rest.lstrip().startswith(("{", "[")):
        try:
            return head + sep + _dump(redactor.redact_json(json.loads(rest)))
        except ValueError:
            pass
    return redactor.redact(text)


def redact_lines(text: str, redactor: Redactor) -> str:
    """``text`` of one JSON document a line (``events.ndjson``), each line redacted as a document."""
    out = []
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        out.append(redact_document(body, redactor) + line[len(body) :])
    return "".join(out)


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
