//! What a write does to the cache after its transaction commits (`--invalidate`), and the Lua
//! that keeps a late, stale SET out of it: the versioned SET (refused when the cache or the
//! writers' version marker already holds a newer version) and the lease SET (refused unless
//! the caller's lease token is still the key's). Lua runs atomically in Redis, so a check and
//! its SET cannot be split by another client's write.

use clap::ValueEnum;
use serde::{Deserialize, Serialize};

/// How a write keeps the cache in step with the row it committed.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Invalidate {
    /// Delete the key after the commit (and its outstanding lease): the next read loads it.
    Delete,
    /// Write the committed value into the cache after the commit.
    Set,
    /// Write the committed value through the versioned SET, after raising the key's version
    /// marker; every reader's SET goes through it too, and is refused when the cache or the
    /// marker holds a newer version.
    Versioned,
    /// Leave the cache alone: a changed row shows once the entry's TTL runs out.
    None,
    /// Delete the key *before* the UPDATE (the wrong order, for comparison): a reader that
    /// misses between the DEL and the commit loads the old row and caches it.
    DeleteFirst,
    /// Raise the key's version marker to the committed version, then delete the key (the
    /// lab's guard); every reader's SET is checked against the marker, so a write-back of a
    /// row read before the commit is refused.
    DeleteGuarded,
}

impl Invalidate {
    pub fn name(self) -> &'static str {
        match self {
            Invalidate::Delete => "delete",
            Invalidate::Set => "set",
            Invalidate::Versioned => "versioned",
            Invalidate::None => "none",
            Invalidate::DeleteFirst => "delete-first",
            Invalidate::DeleteGuarded => "delete-guarded",
        }
    }

    /// Every invalidation, in `--help` order.
    pub const ALL: [Invalidate; 6] = [
        Invalidate::Delete,
        Invalidate::Set,
        Invalidate::Versioned,
        Invalidate::None,
        Invalidate::DeleteFirst,
        Invalidate::DeleteGuarded,
    ];

    pub fn parse(s: &str) -> Option<Invalidate> {
        Invalidate::ALL.into_iter().find(|i| i.name() == s.trim())
    }
}

impl std::fmt::Display for Invalidate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The reader's conditional SET. KEYS: the entry, its lease, its version marker. ARGV: the
/// value, its PX, the lease token ('' for none: no lease check), the value's version, '1' to
/// check versions. Returns 1 when written, 0 when refused. A written lease SET consumes the
/// token (one SET per lease).
///
/// The entry's version is read from its header (bytes 33..40 in Lua's 1-based count, little
/// endian; see `envelope.rs`); bytes that are not an entry of this tool hold no version.
pub const CHECKED_SET_LUA: &str = r#"
if ARGV[3] ~= '' and redis.call('GET', KEYS[2]) ~= ARGV[3] then
    return 0
end
if ARGV[5] == '1' then
    local v = tonumber(ARGV[4])
    local marker = tonumber(redis.call('GET', KEYS[3]) or '0')
    if marker > v then
        return 0
    end
    local cur = redis.call('GET', KEYS[1])
    if cur and string.len(cur) >= 40 and string.byte(cur, 1) == 83 then
        local have = 0
        for i = 40, 33, -1 do
            have = have * 256 + string.byte(cur, i)
        end
        if have > v then
            return 0
        end
    end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
if ARGV[3] ~= '' then
    redis.call('DEL', KEYS[2])
end
return 1
"#;

/// The writer's SET after its commit. KEYS: the entry, its lease, its version marker. ARGV:
/// the value, its PX, its version, the marker's PX, '1' for versioned. The outstanding lease
/// is deleted whatever happens (its holder loaded a row older than this commit). Versioned:
/// the marker is raised to the version, and the SET is refused (0) when the marker or the
/// entry already holds a newer one (another writer committed after this one and wrote first).
pub const WRITER_SET_LUA: &str = r#"
redis.call('DEL', KEYS[2])
if ARGV[5] == '1' then
    local v = tonumber(ARGV[3])
    local marker = tonumber(redis.call('GET', KEYS[3]) or '0')
    if marker > v then
        return 0
    end
    redis.call('SET', KEYS[3], ARGV[3], 'PX', ARGV[4])
    local cur = redis.call('GET', KEYS[1])
    if cur and string.len(cur) >= 40 and string.byte(cur, 1) == 83 then
        local have = 0
        for i = 40, 33, -1 do
            have = have * 256 + string.byte(cur, i)
        end
        if have > v then
            return 0
        end
    end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
"#;

/// The guarded delete after a commit. KEYS: the entry, its lease, its version marker. ARGV:
/// the committed version, the marker's PX. The marker is raised to the version (never
/// lowered), then the lease and the entry are deleted: a reader's later SET of an older
/// version is refused by [`CHECKED_SET_LUA`].
pub const GUARDED_DELETE_LUA: &str = r#"
local v = tonumber(ARGV[1])
local marker = tonumber(redis.call('GET', KEYS[3]) or '0')
if v > marker then
    redis.call('SET', KEYS[3], ARGV[1], 'PX', ARGV[2])
end
redis.call('DEL', KEYS[2])
redis.call('DEL', KEYS[1])
return 1
"#;

/// A comma-separated list of invalidations, each once. Err reads after the flag's name.
pub fn parse_list(list: &str) -> Result<Vec<String>, String> {
    let mut names: Vec<String> = Vec::new();
    for n in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let i = invalidation(n).map_err(|e| format!(": {e}"))?;
        if names.iter().any(|x| x == i.name()) {
            return Err(format!(" names {i} twice: each invalidation runs once"));
        }
        names.push(i.name().to_string());
    }
    if names.is_empty() {
        return Err(" is empty: give a comma-separated list such as delete,versioned".into());
    }
    Ok(names)
}

/// One invalidation by name.
pub fn invalidation(name: &str) -> Result<Invalidate, String> {
    if name.contains(',') {
        return Err(format!(
            "'{name}' names several invalidations: a run has one (compare --invalidate takes a list and runs each)"
        ));
    }
    Invalidate::parse(name).ok_or_else(|| {
        format!("unknown invalidation '{name}' (valid: delete, set, versioned, none, delete-first, delete-guarded)")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for i in Invalidate::ALL {
            assert_eq!(Invalidate::parse(i.name()), Some(i));
            assert_eq!(
                serde_json::to_value(i).unwrap(),
                serde_json::Value::String(i.name().into())
            );
        }
        assert_eq!(Invalidate::parse("purge"), None);
    }
}
