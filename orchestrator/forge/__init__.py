"""Forge clients: GitHub and GitLab pull requests, reviews and checks over httpx (see ``base``)."""

from orchestrator.forge.base import (
    CheckConclusion,
    CheckResult,
    Forge,
    ForgeError,
    ForgeKind,
    InlineComment,
    PublishedComment,
    PublishedReview,
    PullRequest,
    ReviewDraft,
)
from orchestrator.forge.github import GitHub
from orchestrator.forge.gitlab import GitLab
from orchestrator.forge.select import (
    ForgeRef,
    ForgeSettings,
    ForgeTarget,
    forge_for,
    load_forge_settings,
    make_forge,
    parse_ref,
)
from orchestrator.forge.transport import CachedAnswer, ETagCache, MemoryETagCache

__all__ = [
    "CachedAnswer",
    "CheckConclusion",
    "CheckResult",
    "ETagCache",
    "Forge",
    "ForgeError",
    "ForgeKind",
    "ForgeRef",
    "ForgeSettings",
    "ForgeTarget",
    "GitHub",
    "GitLab",
    "InlineComment",
    "MemoryETagCache",
    "PublishedComment",
    "PublishedReview",
    "PullRequest",
    "ReviewDraft",
    "forge_for",
    "load_forge_settings",
    "make_forge",
    "parse_ref",
]
