//! The command line's one spelling of a fault, `KIND@AT[+FOR][,KEY=VALUE…]`
//! (`drop-cache@4s,fraction=100%,order=hottest`). The text becomes the key/value table a
//! `[[fault]]` of a scenario file is (`kind`, `at`, `down_for` and the kind's own keys) and is
//! read by the same deserializer, so a flag and a table cannot mean different things; only
//! the shape (the `@`, the `+`, which keys a kind takes) is checked here, the values by their
//! types and the checks that follow resolution for both alike.

use toml::{Table, Value};

use super::{FaultKind, FaultSpec, KeyUnit};
use crate::error::UsageError;

/// The grammar, for error messages.
const SHAPE: &str =
    "KIND@AT[+FOR][,KEY=VALUE…], e.g. kill-redis@3s+2s or drop-cache@4s,fraction=50%";

/// Read `--fault TEXT` into the fault a `[[fault]]` table with the same keys would be.
pub fn parse(text: &str) -> Result<FaultSpec, String> {
    let mut parts = text.split(',');
    let head = parts.next().unwrap_or_default().trim();
    let (kind, when) = head
        .split_once('@')
        .ok_or_else(|| format!("`{head}` has no @AT: write {SHAPE}"))?;
    let kind = kind_named(kind.trim())?;
    let (at, down_for) = match when.split_once('+') {
        Some((at, d)) => (at.trim(), Some(d.trim())),
        None => (when.trim(), None),
    };
    if at.is_empty() {
        return Err(format!(
            "`{head}`: no time after @: when, after the measured window starts, {} (e.g. {kind}@3s)",
            kind.what()
        ));
    }
    let mut table = Table::new();
    table.insert("kind".into(), Value::String(kind.name().into()));
    table.insert("at".into(), Value::String(at.into()));
    match (down_for, kind.is_instant()) {
        (Some(_), true) => {
            return Err(format!(
                "`{head}`: {kind} takes no +FOR: it lasts {}",
                kind.lasts()
            ));
        }
        (None, false) if !kind.for_optional() => {
            return Err(format!(
                "`{head}`: {kind} needs +FOR, {} (e.g. {kind}@3s+2s)",
                kind.lasts()
            ));
        }
        (Some(d), false) => {
            table.insert("down_for".into(), Value::String(d.into()));
        }
        (None, _) => {}
    }
    for pair in parts {
        let (key, value) = pair
            .split_once('=')
            .ok_or_else(|| format!("`{pair}` is not KEY=VALUE: write {SHAPE}"))?;
        let key = key.trim();
        check_key(kind, key)?;
        let repeats = kind
            .keys()
            .iter()
            .any(|k| k.name == key && k.unit == KeyUnit::Instances);
        match table.get_mut(key) {
            // A repeatable key gathers its values into the list a table would hold.
            Some(Value::Array(list)) if repeats => list.push(typed(value.trim())),
            Some(_) => return Err(format!("`{key}` is given twice: it takes one value")),
            None if repeats => {
                table.insert(key.into(), Value::Array(vec![typed(value.trim())]));
            }
            None => {
                table.insert(key.into(), typed(value.trim()));
            }
        }
    }
    read(table)
}

/// The fault `f` with `key` set to `value`, read as `KEY=VALUE` after `KIND@AT[+FOR],` is
/// (`at` and `for` too): how a sweep axis such as `drop-cache.fraction` sets one fault's key.
pub fn with_key(f: &FaultSpec, key: &str, value: &str) -> Result<FaultSpec, String> {
    let mut table = table_of(f)?;
    let value = value.trim();
    match key {
        "at" => table.insert("at".into(), Value::String(value.into())),
        "for" | "down_for" => table.insert("down_for".into(), Value::String(value.into())),
        _ => {
            check_key(f.kind, key)?;
            table.insert(key.into(), typed(value))
        }
    };
    read(table)
}

/// A fault as `--fault` takes it: `slow-db@5s+3s,factor=4`.
pub fn spell(f: &FaultSpec) -> String {
    let mut out = format!("{}@{}", f.kind, f.at);
    if !f.down_for.0.is_zero() {
        out.push_str(&format!("+{}", f.down_for));
    }
    // The kind's own keys, as the table would write them: a new key needs nothing here.
    if let Ok(table) = table_of(f) {
        for (key, value) in &table {
            if matches!(key.as_str(), "kind" | "at" | "down_for") {
                continue;
            }
            // A list is its key repeated: `instance=0,instance=2`.
            let values = match value {
                Value::Array(list) => list.iter().collect(),
                v => vec![v],
            };
            for v in values {
                match v {
                    Value::String(s) => out.push_str(&format!(",{key}={s}")),
                    v => out.push_str(&format!(",{key}={v}")),
                }
            }
        }
    }
    out
}

/// The keys `kind` takes, each with what it sets, for an error.
pub fn keys_of(kind: FaultKind) -> String {
    let keys = kind.keys();
    if keys.is_empty() {
        return format!(
            "{kind} takes no keys besides at{}",
            if kind.is_instant() { "" } else { " and for" }
        );
    }
    let list: Vec<String> = keys
        .iter()
        .map(|k| format!("{} ({})", k.name, k.what))
        .collect();
    format!("the keys of {kind}: {}", list.join(", "))
}

/// A key `f` sets that its kind does not take (a `[[fault]]` table may write any key of a
/// fault): the same rule as the command line's, from [`FaultKind::keys`].
pub fn stray_key(f: &FaultSpec) -> Option<String> {
    table_of(f).ok()?.keys().find_map(|key| {
        let own = matches!(key.as_str(), "kind" | "at" | "down_for")
            || f.kind.keys().iter().any(|k| k.name == key);
        (!own).then(|| key.clone())
    })
}

fn plus_for(kind: FaultKind) -> &'static str {
    match (kind.is_instant(), kind.for_optional()) {
        (true, _) => "",
        (false, true) => "[+FOR]",
        (false, false) => "+FOR",
    }
}

fn kind_named(name: &str) -> Result<FaultKind, String> {
    FaultKind::ALL
        .into_iter()
        .find(|k| k.name() == name)
        .ok_or_else(|| {
            let all: Vec<&str> = FaultKind::ALL.iter().map(|k| k.name()).collect();
            format!(
                "`{name}` is not a fault kind; the kinds: {}",
                all.join(", ")
            )
        })
}

/// The fault and the unit of a sweep axis on one fault's key, `KIND.KEY`
/// (`drop-cache.fraction`): `at`, and `for` on a kind that lasts, are durations.
pub fn axis_key(name: &str) -> Result<(FaultKind, KeyUnit), String> {
    let (kind, key) = name.split_once('.').unwrap_or((name, ""));
    let kind = kind_named(kind)?;
    match key {
        "at" => Ok((kind, KeyUnit::Duration)),
        "for" if !kind.is_instant() => Ok((kind, KeyUnit::Duration)),
        _ => kind
            .keys()
            .iter()
            .find(|k| k.name == key)
            .map(|k| (kind, k.unit))
            .ok_or_else(|| {
                let lasts = if kind.is_instant() { "" } else { ", for" };
                let own: String = kind
                    .keys()
                    .iter()
                    .map(|k| format!(", {}", k.name))
                    .collect();
                format!("`{key}` is not a key of {kind}: at{lasts}{own}")
            }),
    }
}

fn check_key(kind: FaultKind, key: &str) -> Result<(), String> {
    if matches!(key, "kind" | "at" | "for" | "down_for") {
        return Err(format!(
            "`{key}=` is written in the head: {kind}@AT{}",
            plus_for(kind)
        ));
    }
    if kind.keys().iter().any(|k| k.name == key) {
        return Ok(());
    }
    Err(format!("`{key}` is not a key of {kind}; {}", keys_of(kind)))
}

/// A value as a TOML file would hold it: a number if it reads as one (`factor=4`), else a
/// string (`fraction=50%`, `order=hottest`); each key's type reads both as a file does.
fn typed(value: &str) -> Value {
    if let Ok(i) = value.parse::<i64>() {
        return Value::Integer(i);
    }
    match value.parse::<f64>() {
        Ok(f) if f.is_finite() => Value::Float(f),
        _ => Value::String(value.into()),
    }
}

fn table_of(f: &FaultSpec) -> Result<Table, String> {
    match Value::try_from(f) {
        Ok(Value::Table(t)) => Ok(t),
        Ok(_) => Err("a fault is not a table".into()),
        Err(e) => Err(format!("cannot write the fault as a table: {e}")),
    }
}

/// The `[[fault]]` table's deserializer, which a scenario file's faults go through too.
fn read(table: Table) -> Result<FaultSpec, String> {
    Value::Table(table)
        .try_into::<FaultSpec>()
        .map_err(|e| e.to_string().trim_end().to_string())
}

impl FaultSpec {
    /// Its own settings checked, wherever it was written (`name` says where, for errors).
    pub fn check(&self, name: &str) -> Result<(), UsageError> {
        let f = self;
        // Which keys a kind takes is the kind's own list, as on the command line.
        if let Some(key) = stray_key(f) {
            return Err(UsageError::new(format!(
                "{name}: `{key}` is not a setting of {}; {}",
                f.kind,
                keys_of(f.kind)
            )));
        }
        if f.down_for.0.is_zero() && !f.kind.is_instant() && !f.kind.for_optional() {
            return Err(UsageError::new(format!(
                "{name}: down_for must be longer than 0"
            )));
        }
        if f.kind == FaultKind::DropCache && !f.down_for.0.is_zero() {
            return Err(UsageError::new(format!(
                "{name}: a drop-cache is instant and has no down_for: the cache refills through the traffic"
            )));
        }
        if f.kind.needs_cluster() && !f.down_for.0.is_zero() {
            return Err(UsageError::new(format!(
                "{name}: a {} is instant and has no down_for: it is over once {}",
                f.kind,
                if f.kind == FaultKind::Failover {
                    "the replica took over"
                } else {
                    "the slot moved"
                }
            )));
        }
        if let Some(p) = f.fraction
            && p.0 <= 0.0
        {
            return Err(UsageError::new(format!(
                "{name}: fraction must be more than 0% (100% drops every entry)"
            )));
        }
        if let Some(k) = f.factor {
            let (lo, hi, what) = match f.kind {
                FaultKind::SlowDb => (1.0, 1000.0, "how many times its cost a load costs"),
                FaultKind::Latency => (1.0, 1000.0, "how many times the configured round trip"),
                _ => (0.01, 100.0, "how many times the rate is offered"),
            };
            if !(lo..=hi).contains(&k) {
                return Err(UsageError::new(format!(
                    "{name}: factor {k} is out of range: {what}, between {lo} and {hi}"
                )));
            }
        }
        if f.kind == FaultKind::Latency && f.add.is_some() == f.factor.is_some() {
            return Err(UsageError::new(format!(
                "{name}: a latency fault takes add=D (the round trip added, e.g. add=5ms) or factor=K (the configured --net-rtt multiplied), one of them"
            )));
        }
        if f.kind == FaultKind::SlowClose && f.delay.is_none_or(|d| d.0.is_zero()) {
            return Err(UsageError::new(format!(
                "{name}: a slow-close fault needs delay=, how long a close is held, more than 0 (e.g. delay=2s)"
            )));
        }
        if f.kind == FaultKind::Bandwidth && f.rate.is_none_or(|r| r.0 == 0) {
            return Err(UsageError::new(format!(
                "{name}: a bandwidth fault needs rate=, the bytes a second each way, more than 0 (e.g. rate=1mb)"
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "grammar_tests.rs"]
mod tests;
