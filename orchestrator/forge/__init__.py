"""Forge clients: GitHub and GitLab pull requests, reviews and checks over httpx (see ``base``); each
forge kind described once in ``kinds.FORGES``, its request URLs read by ``urls.parse_pr_url``."""

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
from orchestrator.forge.kinds import FORGES, ForgeDescriptor
from orchestrator.forge.select import ForgeRef, ForgeTarget, forge_for, make_forge, parse_ref
from orchestrator.forge.settings import ForgeSettings, load_forge_settings
from orchestrator.forge.transport import CachedAnswer, ETagCache, MemoryETagCache

__all__ = [
    "CachedAnswer",
    "CheckConclusion",
    "CheckResult",
    "ETagCache",
    "FORGES",
    "Forge",
    "ForgeDescriptor",
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
