"""The Redis store's control plane (``orchestrator.store.redis.RedisStore`` takes it in as ``RedisMarks``):
the active set, cancel flags, pending kicks and each action's sent, taken and resent marks; how a key
written for a run is kept with it (``KEEP_WITH_RUN_LUA``, called by its sha in a MULTI:
``execute_multi``); and ``store_errors``, which turns Redis's errors into Jury's.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, cast

import redis
from redis.commands.core import Script
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from orchestrator.errors import StoreError, StoreUnreachable
from orchestrator.store import keys
from orchestrator.store.base import CANCEL_TTL, SENT_TTL, SentMark, check_slug
from orchestrator.store.redis_codec import sent_marks, text


class RedisMarks:
    """The control plane's marks of a ``RedisStore`` (its ``client``, key ``prefix`` and scripts)."""

    client: redis.Redis
    prefix: str
    _keep_with_run_script: Script

    def _with_run(
        self, pipe: redis.client.Pipeline, slug: str, *names: str, listed: bool = True, by_sha: bool = True
    ) -> None:
        """Queue in the MULTI ``pipe``, after the writes of ``names``: their naming in the run's key set, if
        it keeps one (``listed=False`` for its fixed keys), so its end finds them without a SCAN; for a key
        without a TTL of its own, its expiry with an ended run (``KEEP_WITH_RUN_LUA``). By its sha alone
        (run the MULTI with ``execute_multi``), or with ``by_sha=False`` as redis-py's Script object, which
        loads the script first when Redis lost it: for a MULTI that must not be made twice."""
        script = self._keep_with_run_script
        names_ = [keys.run_index(self.prefix, slug), keys.events(self.prefix, slug), *names]
        args = ["1" if listed else "0"]
        if by_sha:
            call_by_sha(pipe, script, names_, args)
        else:
            script(keys=names_, args=args, client=pipe)

    def _multi(self, build: Callable[[redis.client.Pipeline], None]) -> list[Any]:
        return execute_multi(self.client, self._keep_with_run_script, build)

    def deactivate(self, slug: str) -> None:
        """SREM from the active set."""
        with store_errors("deactivate", check_slug(slug)):
            self.client.srem(keys.active_runs(self.prefix), slug)

    def active_runs(self) -> list[str]:
        """The active set's members, sorted."""
        with store_errors("list the active runs", "*"):
            members = cast(set[bytes], self.client.smembers(keys.active_runs(self.prefix)))
        return sorted(text(m) for m in members)

    def set_cancel_flag(self, slug: str, ttl: int = CANCEL_TTL) -> None:
        """SET the run's cancel flag, expiring after ``ttl`` seconds."""
        with store_errors("flag for cancelling", check_slug(slug)):
            self.client.set(keys.cancel(self.prefix, slug), "1", ex=ttl)

    def clear_cancel_flag(self, slug: str) -> None:
        """DEL the run's cancel flag: a resumed run's agents are not the ones its cancel stopped."""
        with store_errors("clear the cancel flag of", check_slug(slug)):
            self.client.delete(keys.cancel(self.prefix, slug))

    def cancel_flagged(self, slug: str) -> bool:
        """Whether the run's cancel flag exists."""
        with store_errors("read the cancel flag of", check_slug(slug)):
            return bool(self.client.exists(keys.cancel(self.prefix, slug)))

    def claim_kick(self, slug: str, ttl: float) -> bool:
        """SET the pending-kick mark NX with a TTL: True when it was not there."""
        with store_errors("mark a kick of", check_slug(slug)):
            ms = max(1, int(ttl * 1000))
            return bool(self.client.set(keys.kick(self.prefix, slug), b"1", nx=True, px=ms))

    def claim_kicks(self, slugs: Sequence[str], ttl: float) -> list[bool]:
        """``claim_kick`` of each run: the SETs in one pipeline."""
        for slug in slugs:
            check_slug(slug)
        if not slugs:
            return []
        ms = max(1, int(ttl * 1000))
        with store_errors("mark kicks of", "*"):
            pipe = self.client.pipeline(transaction=False)
            for slug in slugs:
                pipe.set(keys.kick(self.prefix, slug), b"1", nx=True, px=ms)
            return [bool(answer) for answer in pipe.execute()]

    def clear_kick(self, slug: str) -> None:
        """DEL the pending-kick mark."""
        with store_errors("clear the kick of", check_slug(slug)):
            self.client.delete(keys.kick(self.prefix, slug))

    def mark_sent(self, slug: str, key: str, ttl: int = SENT_TTL, *, delay: float = 0.0) -> None:
        """MULTI: SET the action's sent mark to when it is due (this host's wall-clock time plus ``delay``;
        the reaper compares it with its own), DEL its taken and resent marks. A release that reads the sent
        mark as a plain time of sending takes a countdown's mark for one sent just now until it is due."""
        check_slug(slug)
        name = f"{slug}:{key}"

        def write(pipe: redis.client.Pipeline) -> None:
            pipe.set(keys.sent(self.prefix, name), f"{time.time() + max(0.0, delay):.3f}", ex=ttl)
            pipe.delete(keys.taken(self.prefix, name), keys.resent(self.prefix, name))
            self._with_run(pipe, slug, keys.sent(self.prefix, name))

        with store_errors("mark an action sent in", slug):
            self._multi(write)

    def mark_resent(self, slug: str, key: str, ttl: int = SENT_TTL) -> int:
        """MULTI: SET the sent mark to now, INCR the resent count (EXPIRE: ``ttl``); the taken mark stays."""
        check_slug(slug)
        name = f"{slug}:{key}"
        with store_errors("mark an action sent again in", slug):
            pipe = self.client.pipeline(transaction=True)
            pipe.set(keys.sent(self.prefix, name), f"{time.time():.3f}", ex=ttl)
            pipe.incr(keys.resent(self.prefix, name))
            pipe.expire(keys.resent(self.prefix, name), ttl)
            # Not ``execute_multi``: the INCR must not be made twice. The reaper's, rarely: its round trip
            # more (redis-py's SCRIPT EXISTS) does not matter.
            self._with_run(
                pipe, slug, keys.sent(self.prefix, name), keys.resent(self.prefix, name), by_sha=False
            )
            replies = pipe.execute()
        return int(replies[1])

    def mark_taken(self, slug: str, key: str, ttl: int = SENT_TTL) -> None:
        """MULTI: SET the taken mark (this host's wall-clock time, for humans), named in the run's key
        set (``keys.run_index``) if it keeps one, as every mark here is."""
        check_slug(slug)
        name = keys.taken(self.prefix, f"{slug}:{key}")

        def write(pipe: redis.client.Pipeline) -> None:
            pipe.set(name, f"{time.time():.3f}", ex=ttl)
            self._with_run(pipe, slug, name)

        with store_errors("mark an action taken in", slug):
            self._multi(write)

    def sent_mark(self, slug: str, key: str) -> SentMark | None:
        """One MGET of the sent, taken and resent marks; None without a sent mark (or with one that does
        not parse: logged)."""
        return self.sent_marks(slug, [key])[0]

    def sent_marks(self, slug: str, action_keys: Sequence[str]) -> list[SentMark | None]:
        """One MGET of the sent, taken and resent marks of every action (``sent_mark`` of each)."""
        check_slug(slug)
        if not action_keys:
            return []
        marks = [
            mark_key(self.prefix, f"{slug}:{key}")
            for key in action_keys
            for mark_key in (keys.sent, keys.taken, keys.resent)
        ]
        with store_errors("read the sent marks of actions in", slug):
            values = cast(list[bytes | None], self.client.mget(marks))
        return sent_marks(slug, action_keys, values, time.time())

    def sent_marks_of(self, wanted: Sequence[tuple[str, Sequence[str]]]) -> list[list[SentMark | None]]:
        """One MGET of the sent, taken and resent marks of every action of every run given."""
        names: list[str] = []
        for slug, action_keys in wanted:
            check_slug(slug)
            names += [
                mark_key(self.prefix, f"{slug}:{key}")
                for key in action_keys
                for mark_key in (keys.sent, keys.taken, keys.resent)
            ]
        if not names:
            return [[] for _ in wanted]
        with store_errors("read the sent marks of actions in", "*"):
            values = cast(list[bytes | None], self.client.mget(names))
        now, out, at = time.time(), [], 0
        for slug, action_keys in wanted:
            out.append(sent_marks(slug, action_keys, values[at : at + 3 * len(action_keys)], now))
            at += 3 * len(action_keys)
        return out

    def sent_age(self, slug: str, key: str) -> float | None:
        """Seconds since the sent mark's time, None without a mark (or with one that does not parse); never
        below 0 (a countdown runs, the mark is rounded to the millisecond, another host's clock may run
        ahead)."""
        mark = self.sent_mark(slug, key)
        return None if mark is None else max(0.0, mark.age)


def call_by_sha(
    pipe: redis.client.Pipeline, script: Script, keys_: Sequence[str], args: Sequence[str]
) -> None:
    """Queue ``script`` in ``pipe`` as a plain EVALSHA (``execute_multi`` runs such a pipeline)."""
    pipe.evalsha(script.sha, len(keys_), *keys_, *args)


def execute_multi(
    client: redis.Redis, script: Script, build: Callable[[redis.client.Pipeline], None]
) -> list[Any]:
    """One MULTI of what ``build`` queues, ``script`` called in it by its sha alone (``call_by_sha``).

    redis-py asks SCRIPT EXISTS before every pipeline that calls a Script object: a round trip of its own,
    every time, on a task's hottest path. When Redis has lost the script (a restart, SCRIPT FLUSH), the
    MULTI's other writes are made, its EVALSHA fails: the script is loaded and ``build``'s MULTI run once
    more, so ``build`` must only queue writes that can be made twice (SET, DEL, HSET; never an INCR)."""
    for again in (False, True):
        pipe = client.pipeline(transaction=True)
        build(pipe)
        try:
            return cast(list[Any], pipe.execute())
        except NoScriptError:
            if again:
                raise
            client.script_load(script.script)
    raise AssertionError("unreachable")


@contextmanager
def store_errors(what: str, slug: str) -> Iterator[None]:
    """A Redis failure as a StoreError saying what was being done to which run (``*``: to the runs at
    large); a server that does not answer as ``StoreUnreachable``, which names Redis and its setting."""
    try:
        yield
    except RedisError as exc:
        which = "" if slug == "*" else f" run {slug!r}"
        if isinstance(exc, RedisConnectionError | RedisTimeoutError):
            raise StoreUnreachable(
                f"cannot {what}{which}: Redis does not answer ({exc}); check the server JURY_REDIS_URL names"
            ) from exc
        raise StoreError(f"cannot {what}{which} in Redis: {exc}") from exc
