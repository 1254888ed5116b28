"""Every spelling of a secret, hidden in any text, leaves ``Redactor.redact`` as ``[redacted]``.

The property: for any secret of at least 8 characters and any text around it, no spelling an agent could
print — the value, split by whitespace or line breaks, reversed, hex, URL- or JSON-encoded, base64 or
base64url at any byte offset of a longer encoded string — is left in the redacted text. For base64 the
spelling is the secret's stable core at that offset (``base64_cores``): the one or two characters shared
with the neighbouring bytes are not the secret's and may stay.
"""

from __future__ import annotations

import base64
import json
import os
import urllib.parse
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from orchestrator.redaction import REDACTED, Redactor, base64_cores, key_file_fields
from orchestrator.spec import AgentSpec
from workers.agents.secrets import agent_secrets, redact_files

# Keys are letters, digits and a little punctuation; a space and a few non-ASCII characters for the
# escapes. No '[' or ']': the marker's brackets could then complete a secret written right after it.
SECRET_CHARS = st.characters(
    codec="utf-8",
    categories=("Lu", "Ll", "Nd", "Pd", "Po", "Sm", "Sc", "Zs"),
    exclude_characters="[]",
)
secrets_ = st.text(SECRET_CHARS, min_size=8, max_size=48).filter(lambda s: s.strip() == s)
around = st.text(st.characters(codec="utf-8", exclude_characters="[]"), max_size=40)


def b64(alphabet: str) -> Callable[[bytes], bytes]:
    return base64.b64encode if alphabet == "standard" else base64.urlsafe_b64encode


ENCODINGS: dict[str, Callable[[str], str]] = {
    "plain": lambda s: s,
    "reversed": lambda s: s[::-1],
    "hex": lambda s: s.encode().hex(),
    "HEX": lambda s: s.encode().hex().upper(),
    "url": lambda s: urllib.parse.quote(s, safe=""),
    "url-plus": urllib.parse.quote_plus,
    "json": lambda s: json.dumps(s)[1:-1],
    "json-ascii": lambda s: json.dumps(s, ensure_ascii=True)[1:-1],
}


def split_at(text: str, cuts: list[int], by: str) -> str:
    """``text`` with ``by`` inserted at each of the positions ``cuts`` (taken inside ``text``)."""
    out, last = [], 0
    for cut in sorted({c % (len(text) - 1) + 1 for c in cuts}):  # inside it, not at either end
        out += [text[last:cut], by]
        last = cut
    return "".join(out) + text[last:]


def assume_not_in_marker(forms: list[str]) -> None:
    assume(not any(f and f in REDACTED for f in forms))


@settings(max_examples=150, deadline=None)
@given(secret=secrets_, before=around, after=around, encoding=st.sampled_from(sorted(ENCODINGS)))
def test_no_encoding_of_a_secret_survives(secret: str, before: str, after: str, encoding: str) -> None:
    spelled = ENCODINGS[encoding](secret)
    assume_not_in_marker([spelled])
    out = Redactor.of([secret]).redact(before + spelled + after)
    assert spelled not in out, (encoding, out)
    assert secret not in out


@settings(max_examples=150, deadline=None)
@given(
    secret=secrets_,
    cuts=st.lists(st.integers(min_value=1, max_value=200), min_size=1, max_size=4),
    by=st.sampled_from([" ", "\n", "\r\n", "\t", "  \n ", "\\n"]),
    encoding=st.sampled_from(["plain", "reversed", "hex", "url"]),
)
def test_a_secret_split_by_whitespace_or_line_breaks_is_found(
    secret: str, cuts: list[int], by: str, encoding: str
) -> None:
    spelled = ENCODINGS[encoding](secret)
    split = split_at(spelled, cuts, by)
    assume_not_in_marker([spelled])
    # between control characters, which no secret holds: the text around cannot lend it a character
    out = Redactor.of([secret]).redact("\x01" + split + "\x02")
    assert out == "\x01[redacted]\x02", (split, out)


@settings(max_examples=150, deadline=None)
@given(
    secret=secrets_,
    prefix=st.binary(max_size=8),
    suffix=st.binary(max_size=8),
    alphabet=st.sampled_from(["standard", "urlsafe"]),
    wrap=st.sampled_from([0, 4, 76]),
)
def test_base64_of_a_secret_at_any_offset_loses_its_core(
    secret: str, prefix: bytes, suffix: bytes, alphabet: str, wrap: int
) -> None:
    encoded = b64(alphabet)(prefix + secret.encode() + suffix).decode()
    if wrap:  # as base64 -w wraps its lines
        encoded = "\n".join(encoded[i : i + wrap] for i in range(0, len(encoded), wrap))
    core = base64_cores(secret.encode(), alphabet)[len(prefix) % 3]
    assume_not_in_marker([core])
    out = Redactor.of([secret]).redact(f"blob={encoded};")
    assert core not in out.replace("\n", ""), (encoded, out)
    assert REDACTED in out


@given(secret=secrets_)
def test_the_cores_are_what_each_offset_shows(secret: str) -> None:
    data = secret.encode()
    for offset, core in enumerate(base64_cores(data)):
        assert core in base64.b64encode(b"\xff" * offset + data + b"\xff").decode()
        assert core in base64.b64encode(b"\x00" * offset + data).decode()
        assert len(core) >= len(data) * 4 // 3 - 2


def test_the_text_around_a_secret_stays() -> None:
    redactor = Redactor.of(["sk-live-0123456789abcdef"])
    text = "the key sk-live-0123456789abcdef leaks; the median is wrong at stats.py:13"
    assert redactor.redact(text) == "the key [redacted] leaks; the median is wrong at stats.py:13"
    assert redactor.redact("nothing secret here: 0123 abcdef") == "nothing secret here: 0123 abcdef"
    assert Redactor().redact(text) == text


def test_a_short_secret_is_matched_only_as_itself() -> None:
    # a 4-character value's hex or base64 would be 6-8 characters of ordinary text
    redactor = Redactor.of(["abcd"])
    assert redactor.redact("abcd dcba 61626364 YWJjZA") == "[redacted] dcba 61626364 YWJjZA"


def test_a_longer_secret_holding_a_shorter_one_goes_whole() -> None:
    redactor = Redactor.of(["token-12345678", "token-12345678-and-more"])
    assert redactor.redact("x token-12345678-and-more y") == "x [redacted] y"


def test_key_file_fields() -> None:
    body = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nBKcwggSjAgEAAoIBAQC7"
    pem = f"-----BEGIN PRIVATE KEY-----\n{body}\n-----END PRIVATE KEY-----\n"
    account = json.dumps(
        {"type": "service_account", "private_key": pem, "client_email": "a@b.iam", "id": "42"}
    )
    fields = key_file_fields(account)
    assert pem in fields and "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC" in fields
    # a field whose name looks secret is: the others stay readable where they appear
    assert "service_account" not in fields and "a@b.iam" not in fields
    env_file = "API_KEY=abcdefgh12345678\nexport REGION: 'eu-west-1-zone'\n"
    assert key_file_fields(env_file) == ["abcdefgh12345678"]
    # no name looks secret: every field long enough is taken
    assert key_file_fields('{"a": "zyxwvuts9876", "b": "42"}') == ["zyxwvuts9876"]
    assert "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC" in key_file_fields(pem)


def test_agent_secrets_are_the_passed_secret_looking_listed_and_configured_values(tmp_path: Path) -> None:
    key_file = tmp_path / "sa.json"
    key_file.write_text(json.dumps({"private_key": "pk-0123456789abcdef"}))
    spec = AgentSpec(
        name="a",
        argv=["a", "{prompt}"],
        env_pass=["OPENAI_API_KEY", "SHORT_TOKEN", "PLAIN", "HIDDEN", "GOOGLE_APPLICATION_CREDENTIALS"],
        secrets=["HIDDEN"],
    )
    env = {
        "OPENAI_API_KEY": "sk-openai-0123456789",
        "SHORT_TOKEN": "abc",  # under 8 characters: every 3-letter word would go
        "PLAIN": "not-a-secret-value",  # passed, but neither secret-looking nor listed
        "HIDDEN": "listed-value-0001",
        "GOOGLE_APPLICATION_CREDENTIALS": str(key_file),  # a path: the file's fields are the secrets
        "GITHUB_TOKEN": "ghp_forge_token_1234",
        "UNPASSED_SECRET": "never-given-to-the-agent",
    }
    found = agent_secrets(spec, env)
    assert sorted(found) == sorted(
        ["sk-openai-0123456789", "listed-value-0001", "pk-0123456789abcdef", "ghp_forge_token_1234"]
    )
    assert str(key_file) not in found


def test_redact_files_rewrites_only_the_runs_own_files(tmp_path: Path) -> None:
    secret = "sk-files-0123456789"
    (tmp_path / "r1.codex.stdout.txt").write_text(f"FINDING: {secret[::-1]}\n")
    os.chmod(tmp_path / "r1.codex.stdout.txt", 0o600)
    (tmp_path / "r1.codex.prompt.md").write_text("nothing\n")
    (tmp_path / "other.stdout.txt").write_text(secret)
    changed = redact_files(tmp_path, "r1.codex", Redactor.of([secret]))
    assert changed == [tmp_path / "r1.codex.stdout.txt"]
    assert (tmp_path / "r1.codex.stdout.txt").read_text() == "FINDING: [redacted]\n"
    assert (tmp_path / "r1.codex.stdout.txt").stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "other.stdout.txt").read_text() == secret  # another run's: not this run's to touch


def test_an_agent_entry_lists_its_secrets_by_variable_name() -> None:
    from orchestrator.agent_keys import check_agent
    from orchestrator.errors import ConfigError

    table = {"argv": ["a", "{prompt}"], "env_pass": ["SIGNING"], "secrets": ["SIGNING"]}
    assert check_agent("ops.toml", "a", table, None).secrets == ["SIGNING"]
    with pytest.raises(ConfigError, match=r"agents\.a\.secrets: 'not a name' is not an environment variable"):
        check_agent("ops.toml", "a", {**table, "secrets": ["not a name"]}, None)
