"""Reading a model's answer to one OpenAI-compatible chat call, which is hostile input: what it cost (as
reported, else tokens x price) and what a call may cost at most, its token counts, its text, its tool
calls' arguments — with the agent's key redacted from every string in it, in every form it arrives in.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from orchestrator.logs import redact

MAX_OUTPUT_TOKENS = 4096  # the output side of a call's cost projection


def call_cost(data: Mapping[str, Any], price: Mapping[str, float] | None) -> float | None:
    """A call's cost in USD: the cost the response reports, else tokens x price, else None (unknown)."""
    usage = json_object(data.get("usage"))
    for reported in (usage.get("cost"), data.get("cost")):
        if isinstance(reported, int | float) and not isinstance(reported, bool):
            return float(reported)
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if price and isinstance(prompt, int) and isinstance(completion, int):
        return prompt * price.get("input", 0.0) / 1e6 + completion * price.get("output", 0.0) / 1e6
    return None


def project_cost(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]], price: Mapping[str, float] | None
) -> float:
    """The most a call may cost: the prompt estimated at 4 characters a token plus a full output.

    0.0 when the price is unknown (the call's real cost is then recorded as unknown, not as zero).
    """
    if not price:
        return 0.0
    prompt_tokens = len(json.dumps(messages)) / 4 + len(json.dumps(tools)) / 4
    return prompt_tokens * price.get("input", 0.0) / 1e6 + MAX_OUTPUT_TOKENS * price.get("output", 0.0) / 1e6


def json_object(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def token_count(value: Any) -> int:
    """A token count from a response (0 when absent or not a whole number)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def scrubbed(data: Any) -> Any:
    """``data`` (parsed JSON) with ``redact`` applied to every string in it, keys included.

    Iterative, so a deeply nested answer is walked without recursion."""

    def fix(value: Any) -> Any:
        return redact(value) if isinstance(value, str) else value

    root: list[Any] = [data]
    stack: list[tuple[Any, Any]] = [(root, 0)]
    while stack:
        parent, key = stack.pop()
        value = parent[key]
        if isinstance(value, dict):
            parent[key] = value = {fix(k): v for k, v in value.items()}
            stack.extend((value, k) for k in value)
        elif isinstance(value, list):
            stack.extend((value, i) for i in range(len(value)))
        else:
            parent[key] = fix(value)
    return root[0]


def tool_arguments(raw: Any) -> str | dict[str, Any] | None:
    """A tool call's arguments as the tool will read them, with the key redacted in that form.

    The arguments are a JSON string inside the JSON body: a key spelled there with ``\\u`` escapes is not
    the key's bytes when the body is redacted, nor after the body is parsed, only once the arguments
    are. So they are parsed here and redacted parsed; what does not parse goes on as text (already
    redacted), for ``call_tool`` to refuse.
    """
    if raw is None or isinstance(raw, dict):
        return raw
    if not isinstance(raw, str):
        return json.dumps(raw)
    from orchestrator import jsonsafe  # hostile input: bounded size and depth

    try:
        value = jsonsafe.loads(raw)
    except (ValueError, RecursionError):
        return raw
    return scrubbed(value) if isinstance(value, dict) else raw


def message_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            p.get("text", "") if isinstance(p, dict) and isinstance(p.get("text"), str) else ""
            for p in content
        )
    return ""
