"""``jury scrub``: take secrets out of run records written before they were redacted at the door.

Since every agent's output is redacted where it enters the record (``workers.agents.seat.run_seat``), a
new record holds no secret an agent was given. One written before (or before an agent's entry listed the
variable in ``secrets = [...]``) may: this command rewrites it. The secrets are those the agents of the
operator's configuration are given from this process's environment (``agent_secrets``: their
secret-looking pass-through variables, their ``secrets``, their keys, the forge tokens, the fields of key
files) and the variables named with ``--secret-env``; every spelling of them is redacted
(``orchestrator.redaction``) in:

- the files record under ``--dir``: every file of each run (``events.ndjson``, ``run.json``, artifacts,
  prompts, patches); JSON is redacted string by string and written again, so it stays valid;
- the shared Redis (``JURY_REDIS_URL``): each run's event stream (rebuilt with the same entry ids, in one
  transaction that a concurrent append aborts and the command retries), its fold, snapshot, artifacts and
  liveness hash.

What was published cannot be taken back from here: for every run that was published while its record
held a secret, the command lists the review, inline comments and check that held one, to be edited or
deleted on the forge — and the leaked key is to be rotated (docs/security.md, "Rotating a leaked key").
"""

from __future__ import annotations

import fcntl
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from jury_cli.context import DirOpt, out, settings_for
from orchestrator.config import load_config, operator_config_file
from orchestrator.errors import UsageError
from orchestrator.fold import RunState
from orchestrator.publishing import plan
from orchestrator.redaction import Redactor, redact_document, redact_lines
from orchestrator.run_reader import fold_run
from orchestrator.store.base import check_slug
from orchestrator.store.files import FileStore
from workers.agents.secrets import agent_secrets, key_file_secrets, rewrite

if TYPE_CHECKING:
    from orchestrator.store.redis import RedisStore
    from orchestrator.store.redis_archive import ArchivingStore

MAX_TRIES = 20  # rebuilds of one stream raced by an append before the command gives up
SKIPPED_FILES = (".lock", ".created")


@dataclass
class Scrubbed:
    """What one ``jury scrub`` changed, and what it could not."""

    files: list[Path] = field(default_factory=list)
    redis_keys: list[str] = field(default_factory=list)
    published: list[str] = field(default_factory=list)  # "<slug>: <what> <url>" still holding a secret


def scrub(
    slugs: Annotated[
        list[str] | None, typer.Argument(help="Runs to scrub (default: every run).", metavar="[SLUG]...")
    ] = None,
    secret_env: Annotated[
        list[str] | None,
        typer.Option(
            "--secret-env",
            metavar="NAME",
            help="A variable holding a leaked value to scrub too (repeatable).",
        ),
    ] = None,
    config: Annotated[Path | None, typer.Option("--config", help="The operator's config file.")] = None,
    dir: DirOpt = None,
) -> None:
    """Redact secrets from run records written before; list published comments that still hold one."""
    settings = settings_for(dir)
    for slug in slugs or []:
        check_slug(slug)
    cfg = load_config(None, operator_config_file(settings, config))
    found: list[str] = []
    for spec in cfg.agents.values():
        found += agent_secrets(spec, os.environ)
    for name in secret_env or []:
        value = os.environ.get(name)
        if not value:
            raise UsageError(f"--secret-env {name}: the variable is not set; export the leaked value in it")
        found += key_file_secrets(value, os.environ) or [value]
    redactor = Redactor.of(found)
    if not redactor.secrets:
        raise UsageError(
            "no secret to scrub: set the leaked value in the variable an agent passes through, "
            "or name its variable with --secret-env NAME"
        )
    done = Scrubbed()
    store = None
    if settings.redis_url:
        from orchestrator.store.redis_archive import open_store

        store = open_store(settings.redis_url)
    runs_root = settings.dir / "runs"
    names = list(slugs or [])
    if not names:
        names = sorted(p.name for p in runs_root.iterdir() if p.is_dir()) if runs_root.is_dir() else []
        names += [s for s in (store.runs() if store else []) if s not in names]
    for slug in names:
        if not (runs_root / slug).is_dir() and not (store is not None and store.exists(slug)):
            raise UsageError(f"no run {slug} under {settings.dir} nor in the shared Redis (see: jury runs)")
        states = [fold_files(settings.dir, slug)]
        if store is not None and store.exists(slug):
            states.append(fold_run(store, slug))
        done.published += sorted({line for s in states if s for line in published_holders(s, redactor)})
        done.files += scrub_run_dir(runs_root / slug, redactor)
        if store is not None:
            done.redis_keys += scrub_archived(store, slug, redactor)
    report(done, len(names))


def report(done: Scrubbed, runs: int) -> None:
    out.print(
        f"scrubbed {len(done.files)} file(s) and {len(done.redis_keys)} Redis key(s) in {runs} run(s)",
        markup=False,
    )
    for path in done.files:
        out.print(f"  {path}", markup=False)
    for key in done.redis_keys:
        out.print(f"  redis {key}", markup=False)
    if done.published:
        out.print(
            "published comments that still hold a secret (edit or delete them on the forge, "
            "and rotate the key):",
            markup=False,
        )
        for line in done.published:
            out.print(f"  {line}", markup=False)
    else:
        out.print("no published comment holds a secret", markup=False)


def fold_files(root: Path, slug: str) -> RunState | None:
    """The fold of the run's files record under ``root`` as it is now (before scrubbing), or None."""
    if not (root / "runs" / slug / "events.ndjson").is_file():
        return None
    return fold_run(FileStore(root), slug)


def published_holders(state: RunState, redactor: Redactor) -> list[str]:
    """What each successful publish of ``state`` sent that held a secret: what the forge shows now
    (publishing again updates the same review and comments, from a record scrubbed by then)."""
    found: list[str] = []
    for event in state.published:
        if not event.get("ok"):
            continue
        sent = plan(state, None)
        where = f"{event.get('forge')} {event.get('repo')}#{event.get('number')}"
        review = event.get("reviewUrl") or event.get("reviewId")
        if redactor.holds(sent.body):
            found.append(f"{state.slug}: {where} review {review}")
        for note in [*sent.comments, *sent.off_diff]:
            if redactor.holds(note.body):
                found.append(
                    f"{state.slug}: {where} inline comment on {note.path}:{note.line} of review {review}"
                )
        if redactor.holds(sent.check_summary) or redactor.holds(sent.title):
            found.append(f"{state.slug}: {where} check {event.get('checkUrl') or event.get('checkId')}")
    return found


def scrub_run_dir(run_dir: Path, redactor: Redactor) -> list[Path]:
    """Redact every file of one run's directory; the files that changed."""
    changed: list[Path] = []
    if not run_dir.is_dir():
        return changed
    for path in sorted(run_dir.rglob("*")):
        if path.is_symlink() or not path.is_file() or path.name in SKIPPED_FILES:
            continue
        if path.name == "events.ndjson":
            if scrub_log(path, redactor):
                changed.append(path)
            continue
        text = path.read_bytes().decode("utf-8", errors="surrogateescape")
        clean = redact_document(text, redactor) if path.suffix == ".json" else redactor.redact(text)
        if clean != text:
            rewrite(path, clean.encode("utf-8", errors="surrogateescape"))
            changed.append(path)
    return changed


def scrub_log(path: Path, redactor: Redactor) -> bool:
    """Redact ``events.ndjson`` in place, under the lock its appenders take (the file itself, so an
    append waits and then lands after the rewritten lines, not in a replaced file)."""
    with path.open("r+b") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        text = fh.read().decode("utf-8", errors="surrogateescape")
        clean = redact_lines(text, redactor)
        if clean == text:
            return False
        fh.seek(0)
        fh.write(clean.encode("utf-8", errors="surrogateescape"))
        fh.truncate()
        fh.flush()
        os.fsync(fh.fileno())
    return True


def scrub_archived(store: ArchivingStore, slug: str, redactor: Redactor) -> list[str]:
    """``scrub_redis_run``; a run archived out of Redis is loaded back, scrubbed there and archived again
    over its copy (in the archive its stub names when this host sets none), so no copy keeps a secret."""
    from orchestrator.errors import JuryError
    from orchestrator.store.archive import archive_from

    stub = store.stub(slug)
    if stub is None:
        return scrub_redis_run(store, slug, redactor)
    where = stub.get("where")
    if store.archive is None and isinstance(where, str):
        store.archive = archive_from(where)
    store.restore(slug)
    changed = scrub_redis_run(store, slug, redactor)
    if not store.archive_run(slug):
        raise JuryError(
            f"run {slug} was scrubbed in Redis but not archived again: its copy in {where} is not scrubbed"
        )
    return changed


def scrub_redis_run(store: RedisStore, slug: str, redactor: Redactor) -> list[str]:
    """Redact every key of one run in Redis; the keys that changed."""
    client: Any = store.client
    changed: list[str] = []
    for raw in sorted(client.scan_iter(match=f"{store.prefix}:run:{slug}:*", count=500)):
        key = raw.decode() if isinstance(raw, bytes) else str(raw)
        kind = client.type(key)
        kind = kind.decode() if isinstance(kind, bytes) else kind
        if kind == "stream":
            did = scrub_stream(client, key, redactor)
        elif kind == "string":
            value = client.get(key)
            text = _text(value)
            clean = redact_document(text, redactor)
            did = clean != text and bool(client.set(key, _bytes(clean), keepttl=True, xx=True))
        elif kind == "hash":
            fields = {f: _text(v) for f, v in client.hgetall(key).items()}
            cleaned = {f: redact_document(v, redactor) for f, v in fields.items()}
            dirty = {f: _bytes(v) for f, v in cleaned.items() if v != fields[f]}
            did = bool(dirty) and client.hset(key, mapping=dirty) is not None
        else:
            continue
        if did:
            changed.append(key)
    return changed


def scrub_stream(client: Any, key: str, redactor: Redactor) -> bool:
    """Rebuild the stream ``key`` with its entries redacted, under their own ids, in one transaction
    (WATCH: an entry appended meanwhile aborts it, and it is tried again with that entry read)."""
    import redis

    for _ in range(MAX_TRIES):
        with client.pipeline() as pipe:
            try:
                pipe.watch(key)
                entries = pipe.xrange(key)
                ttl = pipe.pttl(key)
                rebuilt = []
                dirty = False
                for entry_id, fields in entries:
                    clean = {f: _bytes(redact_document(_text(v), redactor)) for f, v in fields.items()}
                    dirty = dirty or any(clean[f] != _bytes(_text(v)) for f, v in fields.items())
                    rebuilt.append((entry_id, clean))
                if not dirty:
                    pipe.unwatch()
                    return False
                pipe.multi()
                pipe.delete(key)
                for entry_id, clean in rebuilt:
                    pipe.xadd(key, clean, id=entry_id)
                if ttl and ttl > 0:
                    pipe.pexpire(key, ttl)
                pipe.execute()
                return True
            except redis.WatchError:
                continue
    raise UsageError(
        f"{key}: the stream kept changing while it was scrubbed; stop the run's workers and retry"
    )


def _text(value: Any) -> str:
    return value.decode("utf-8", errors="surrogateescape") if isinstance(value, bytes) else str(value)


def _bytes(text: str) -> bytes:
    return text.encode("utf-8", errors="surrogateescape")
