//! The Lua scripts: each runs atomically on the server, on the two keys of one lock, which share a
//! hash slot (`{slotguard:<prefix>:<key>}:lock` and `…:fence`).

use redis::Script;

/// Takes a free key for `ARGV[1]` (the owner) for `ARGV[2]` milliseconds, for the request
/// `ARGV[3]`, and answers the lease's fencing token as a decimal string; nil when the key is held.
///
/// The token is `max(last + 1, server time in µs)`: it rises by one per grant while the fence
/// counter survives, and when the counter is gone (a restart of a Redis that keeps nothing on disk,
/// an eviction, a replica promoted before it heard of the last grants) it starts again from the
/// server's clock, which is above every token handed out before unless more than one grant per
/// microsecond was made on the key since its counter began. Formatted with `%.0f` because Lua
/// numbers are doubles and `tostring` would write `1.7e+15`; exact below 2^53 (year 2255).
///
/// The value of the lock key is `<token> <request> <owner>`: renewal compares all of it, so it can
/// tell this lease from a later one of the same owner; [`CANCEL`] compares the request, so a grant
/// whose answer never reached its caller can be taken back.
pub(crate) const ACQUIRE: &str = r"
if redis.call('EXISTS', KEYS[1]) == 1 then
  return false
end
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local last = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
local token = string.format('%.0f', math.max(last + 1, now))
redis.call('SET', KEYS[2], token)
redis.call('SET', KEYS[1], token .. ' ' .. ARGV[3] .. ' ' .. ARGV[1], 'PX', ARGV[2])
return token
";

/// Deletes the lock key if its owner (the part after the token and the request) is `ARGV[1]`;
/// answers 1 if it did.
pub(crate) const RELEASE: &str = r"
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local a = string.find(v, ' ', 1, true)
local b = a and string.find(v, ' ', a + 1, true)
if b and string.sub(v, b + 1) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
";

/// Deletes the lock key if it was granted to the request `ARGV[1]` (the part after the token);
/// answers 1 if it did. For a `try_lock` that gave up waiting for its answer.
pub(crate) const CANCEL: &str = r"
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local a = string.find(v, ' ', 1, true)
local b = a and string.find(v, ' ', a + 1, true)
if b and string.sub(v, a + 1, b - 1) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
";

/// Sets the expiry of the lock key to `ARGV[2]` ms if its value is still exactly `ARGV[1]` (this
/// lease, not a later one); answers 1 if it did, 0 if the lease is gone or another's.
pub(crate) const RENEW: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
";

/// Records `ARGV[2]` (a job) as the owner of lock key `ARGV[1]` in the hash `KEYS[1]` unless
/// another job has it; answers the job the key belongs to.
pub(crate) const REGISTER: &str = r"
redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2])
return redis.call('HGET', KEYS[1], ARGV[1])
";

/// The scripts, hashed once.
pub(crate) struct Scripts {
    pub(crate) acquire: Script,
    pub(crate) release: Script,
    pub(crate) renew: Script,
    pub(crate) register: Script,
    pub(crate) cancel: Script,
}

impl Scripts {
    pub(crate) fn new() -> Self {
        Scripts {
            acquire: Script::new(ACQUIRE),
            release: Script::new(RELEASE),
            renew: Script::new(RENEW),
            register: Script::new(REGISTER),
            cancel: Script::new(CANCEL),
        }
    }

    /// All of them, for loading after a `NOSCRIPT` (the server restarted and lost its cache).
    pub(crate) fn all(&self) -> [(&Script, &'static str); 5] {
        [
            (&self.acquire, ACQUIRE),
            (&self.release, RELEASE),
            (&self.renew, RENEW),
            (&self.register, REGISTER),
            (&self.cancel, CANCEL),
        ]
    }
}
