"""The Lua scripts the Redis store runs (``orchestrator.store.redis``): each is one atomic step over a run's
keys (``orchestrator.store.keys``), so concurrent writers on any number of hosts never see it half done.
Each script's comment names its KEYS and ARGV and what it returns. ``name_in_run`` is the step every
writer of a run's key takes, here and in the workers' own scripts (leases, the ledger), and
``expire_with_run`` the one after writing a key that keeps no TTL of its own.
"""

from orchestrator.store.base import LATE_WRITE_TTL


def _forget_if_expired(index: str, expiring: str) -> str:
    """Lua, after ``local now = redis.call('TIME')``: the run ``ARGV[1]``, if its keys' deadline has passed,
    leaves the index and the expiry set, so it comes back as a new run, not as an old one that lost its
    log. ``index`` and ``expiring`` are the scripts' KEYS for the two."""
    return (
        f"local deadline = redis.call('ZSCORE', {expiring}, ARGV[1])\n"
        "if deadline and tonumber(deadline) <= tonumber(now[1]) then\n"
        f"  redis.call('ZREM', {expiring}, ARGV[1])\n"
        f"  redis.call('ZREM', {index}, ARGV[1])\n"
        "end\n"
    )


def name_in_run(index: str, name: str) -> str:
    """Lua: add the key ``name`` to its run's key set ``index`` (``keys.run_index``), if the run keeps one.
    A set that is not there stays away: the run was started before key sets (its end SCANs for its keys),
    or its keys already expired and this is a late write (a copy of a task days after the run ended). A
    set made then would list a name without the set's own and, written with no TTL, would never expire."""
    return f"if redis.call('EXISTS', {index}) == 1 then redis.call('SADD', {index}, {name}) end\n"


def expire_with_run(index: str, log: str, name: str) -> str:
    """Lua, after writing the key ``name`` of a run, for a key that keeps no TTL of its own (an artifact,
    the run's ticks, its ledger hash): the key expires with its run. A live run's key set and log keep no
    TTL, so neither does the key; an ended run's carry its deadline (``EXPIRE_LUA``), which the key takes,
    since it may come after the end expired the run's keys (an agent that outlived a cancel) and nothing
    else would; a run with neither (its keys expired: a late write) leaves it ``LATE_WRITE_TTL``. A run
    from before key sets has only its log to say which. ``index`` and ``log`` are ``keys.run_index`` and
    ``keys.events``; a key with a TTL of its own (a lease, a mark) keeps it."""
    return (
        "do\n"
        f"  local run_ttl = redis.call('PTTL', {index})\n"
        f"  if run_ttl == -2 then run_ttl = redis.call('PTTL', {log}) end\n"
        f"  if run_ttl == -2 then run_ttl = {LATE_WRITE_TTL * 1000} end\n"
        f"  if run_ttl > 0 and redis.call('PTTL', {name}) == -1 then\n"
        f"    redis.call('PEXPIRE', {name}, run_ttl)\n"
        "  end\n"
        "end\n"
    )


# Keys of a run just written, in the MULTI that wrote them: each is named in the run's key set, if the run
# keeps one (``name_in_run``), and one without a TTL of its own expires with the run (``expire_with_run``).
#   KEYS[1]  the run's key set (keys.run_index)   KEYS[2]  the run's log (keys.events)
#   KEYS[3..] the keys written
#   ARGV[1]  '1' to name them in the key set; '0' for the run's fixed keys (keys.fixed_run_keys)
KEEP_WITH_RUN_LUA = (
    "for i = 3, #KEYS do\n"
    "  if ARGV[1] == '1' then\n"
    + name_in_run("KEYS[1]", "KEYS[i]")
    + "  end\n"
    + expire_with_run("KEYS[1]", "KEYS[2]", "KEYS[i]")
    + "end\n"
)


# A run's creation score: the server's clock to the microsecond (Lua, after ``now`` is read).
_NOW_SCORE = "now[1] .. '.' .. string.format('%06d', tonumber(now[2]))"

# Append events to a run, deduplicated by eid, and register the run in the index.
#   KEYS[1]  the run's event stream        (keys.events)
#   KEYS[2]  the run's set of seen eids    (keys.eids)
#   KEYS[3]  the index of runs             (keys.runs_index)
#   KEYS[4]  the ended runs' expiry times  (keys.expiring_runs)
#   KEYS[5]  the run's key set             (keys.run_index)
#   KEYS[6]  the run's archive stub        (keys.archived)
#   ARGV[1]  the run's slug
#   ARGV[2..] pairs: eid, event JSON       (none: only register the run)
# Returns {1 if the run was new to the index else 0, number of events appended, then the 0-based
# position of each event appended (an eid already there is not)}; {-1, 0} when the run is archived
# (its record is in the archive: the caller loads it back first, ``redis_archive``), nothing written.
# The creation score is the server's clock, so every host agrees on the runs' order. A run whose keys
# expired comes back as a new run (its expiry forgotten), not as an old one that lost its log. A new
# run's key set starts with its own name: the mark that every key of the run is listed there.
APPEND_LUA = (
    "\nif redis.call('EXISTS', KEYS[6]) == 1 then return {-1, 0} end\n"
    "local now = redis.call('TIME')\n"
    + _forget_if_expired("KEYS[3]", "KEYS[4]")
    + f"local score = {_NOW_SCORE}\n"
    + """local created = redis.call('ZADD', KEYS[3], 'NX', score, ARGV[1])
if created == 1 then redis.call('SADD', KEYS[5], KEYS[5]) end
local appended = 0
local positions = {}
for i = 2, #ARGV, 2 do
  if redis.call('SADD', KEYS[2], ARGV[i]) == 1 then
    redis.call('XADD', KEYS[1], '*', 'e', ARGV[i + 1])
    appended = appended + 1
    positions[appended] = (i - 2) / 2
  end
end
return {created, appended, unpack(positions)}
"""
)

# Forget the runs whose keys have expired: out of the index and of the expiry set, one bounded batch.
#   KEYS[1]  the index of runs (keys.runs_index)      KEYS[2]  the expiry set (keys.expiring_runs)
#   ARGV[1]  the most runs to forget in this call (a batch: one call never blocks the server long)
# Returns how many runs were forgotten; fewer than ARGV[1] means none is left (the caller loops until then).
PRUNE_LUA = """
local now = redis.call('TIME')[1]
local gone = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, tonumber(ARGV[1]))
for _, slug in ipairs(gone) do
  redis.call('ZREM', KEYS[1], slug)
  redis.call('ZREM', KEYS[2], slug)
end
return #gone
"""

# The runs of the index, newest first, and, at the same instant of the server's clock, those of them whose
# keys have expired and that no prune has forgotten yet: the lister leaves the second out, so an expired
# run is never listed, whether or not it was pruned (a prune cut short, another host's listing between).
#   KEYS[1]  the index of runs (keys.runs_index)      KEYS[2]  the expiry set (keys.expiring_runs)
# Returns {the index's slugs newest first, the expired slugs}.
LIST_RUNS_LUA = """
local now = redis.call('TIME')[1]
return {redis.call('ZREVRANGE', KEYS[1], 0, -1), redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)}
"""

# An ended run: every key of it expires at one deadline, ``retention`` seconds after the run first ended.
#   KEYS[1]  the expiry set (keys.expiring_runs)       KEYS[2..]  the run's keys
#   ARGV[1]  the slug                                   ARGV[2]    retention in seconds
# The deadline is set once (ZADD NX), so a later pass over the ended run does not push it back. A key
# that already expires sooner (a lease, a lock) keeps its own TTL: it is only ever shortened (the LT
# rule of Redis 7's EXPIREAT, spelled out for the Redis 6 of the embedded mode). Returns the deadline.
EXPIRE_LUA = """
local now = tonumber(redis.call('TIME')[1])
redis.call('ZADD', KEYS[1], 'NX', now + tonumber(ARGV[2]), ARGV[1])
local deadline = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]))
for i = 2, #KEYS do
  local ttl = redis.call('PTTL', KEYS[i])
  if ttl == -1 or (ttl > 0 and now * 1000 + ttl > deadline * 1000) then
    redis.call('EXPIREAT', KEYS[i], deadline)
  end
end
return deadline
"""

# A run that is live again (resumed): its record keys lose their expiry, and it leaves the expiry set.
#   KEYS[1]  the expiry set       KEYS[2..]  the run's record keys (keys.is_record_key)
#   ARGV[1]  the slug
# Returns 1 if the run was expiring, else 0 (then nothing is touched).
PERSIST_LUA = """
if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then return 0 end
for i = 2, #KEYS do redis.call('PERSIST', KEYS[i]) end
return 1
"""

# Start a swept run unless its PR head is held: claim the head, list the run under its PR, register the
# run, append its first events and activate it, all or nothing.
#   KEYS[1]  the head's claim (keys.sweep_head)     KEYS[2]  the PR's swept runs (keys.sweep_runs)
#   KEYS[3]  the run's event stream                 KEYS[4]  the run's set of seen eids
#   KEYS[5]  the index of runs                      KEYS[6]  the ended runs' expiry times
#   KEYS[7]  the active set                         KEYS[8]  the run's key set (keys.run_index)
#   ARGV[1]  the slug   ARGV[2]  the claim's TTL in seconds   ARGV[3]  the run it may replace ('' none)
#   ARGV[4..] pairs: eid, event JSON
# Returns {'started', slug}, {'claimed', holder} or {'taken', ''}.
START_SWEPT_LUA = (
    """
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[3] then return {'claimed', holder} end
local now = redis.call('TIME')
"""
    + _forget_if_expired("KEYS[5]", "KEYS[6]")
    + """if redis.call('ZSCORE', KEYS[5], ARGV[1]) or redis.call('EXISTS', KEYS[3]) == 1 then
  return {'taken', ''}
end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
redis.call('ZADD', KEYS[2], now[1], ARGV[1])
redis.call('EXPIRE', KEYS[2], ARGV[2])
"""
    + f"redis.call('ZADD', KEYS[5], {_NOW_SCORE}, ARGV[1])\n"
    + """for i = 4, #ARGV, 2 do
  if redis.call('SADD', KEYS[4], ARGV[i]) == 1 then
    redis.call('XADD', KEYS[3], '*', 'e', ARGV[i + 1])
  end
end
redis.call('SADD', KEYS[7], ARGV[1])
redis.call('SADD', KEYS[8], KEYS[8])
return {'started', ARGV[1]}
"""
)


# What a reader of a run's fold asks first, at once: the log's origin, the coordinator's snapshot (stored
# as its position, a newline, then its JSON: ``RedisStore.write_snapshot``) and the log after the
# position, if the position is still in it.
#   KEYS[1]  the run's event stream (keys.events)     KEYS[2]  the snapshot (keys.snapshot)
#   ARGV[1]  how many entries of the log after the position to return at most
# Returns {the first entry (a list of at most one), the snapshot or false, the entries after its position
# or false (no snapshot, a position not written by this store's format, or no longer in the log)}.
READ_FROM_SNAPSHOT_LUA = """
local first = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)
local snapshot = redis.call('GET', KEYS[2])
if not snapshot then return {first, false, false} end
local newline = string.find(snapshot, '\\n', 1, true)
local position = newline and string.sub(snapshot, 1, newline - 1) or ''
if not string.match(position, '^%d+%-%d+$') then return {first, snapshot, false} end
if #redis.call('XRANGE', KEYS[1], position, position, 'COUNT', 1) == 0 then
  return {first, snapshot, false}
end
return {first, snapshot, redis.call('XRANGE', KEYS[1], '(' .. position, '+', 'COUNT', ARGV[1])}
"""


# What the reaper reads of runs instead of their folds: the digest the coordinator wrote in each run's
# snapshot (stored as its position, a newline, the digest's JSON, a newline, the snapshot's JSON:
# ``redis_codec.snapshot_record``), only when it is the log's whole truth: the log's last entry is the
# snapshot's position (nothing was appended after the pass that wrote it). One call for a batch of runs;
# it reads the record's first REAP_HEAD_BYTES (GETRANGE), never the snapshot's body.
#   KEYS[2i-1]  run i's event stream (keys.events)     KEYS[2i]  run i's snapshot (keys.snapshot)
# Returns, for each run in order, {its log's first entry id, the digest line}, or false (no log, no
# snapshot or no digest in it, or events after its position: then the reader folds the run).
REAP_HEAD_BYTES = 8192  # the record's head the reaper reads: a longer digest line means the run is folded
REAP_DIGEST_LUA = f"""
local REAP_HEAD_BYTES = {REAP_HEAD_BYTES}
local found = {{}}
for i = 1, #KEYS, 2 do
  local answer = false
  local first = redis.call('XRANGE', KEYS[i], '-', '+', 'COUNT', 1)
  local snapshot = redis.call('GETRANGE', KEYS[i + 1], 0, REAP_HEAD_BYTES - 1)
  if first[1] and snapshot ~= '' then
    local last = redis.call('XREVRANGE', KEYS[i], '+', '-', 'COUNT', 1)
    local a = string.find(snapshot, '\\n', 1, true)
    local b = a and string.find(snapshot, '\\n', a + 1, true)
    if b and string.sub(snapshot, 1, a - 1) == last[1][1] then
      answer = {{first[1][1], string.sub(snapshot, a + 1, b - 1)}}
    end
  end
  found[#found + 1] = answer
end
return found
"""
