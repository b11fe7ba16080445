//! The jsonl format: one JSON object per line, its fields named as in a csv trace. Read with a
//! visitor that looks only at the fields it wants and borrows the key from the line, so a line
//! costs no allocation (a key with escapes is unescaped into the reader's key buffer).

use std::fmt;
use std::io::Write;

use serde::Deserializer as _;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};

use super::parse::{Ctx, generic_op};
use super::{Columns, Op, Record, TraceError};

const FIELDS: [&str; 5] = ["timestamp", "key", "value_size", "op", "ttl"];

/// Which of [`FIELDS`] a name of the line is (by the names `Columns` gives), if any.
struct Name<'c>(&'c Columns);

impl<'de> DeserializeSeed<'de> for Name<'_> {
    type Value = Option<usize>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Option<usize>, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Name<'_> {
    type Value = Option<usize>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a field name")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Option<usize>, E> {
        let c = self.0;
        Ok([&c.timestamp, &c.key, &c.value_size, &c.op, &c.ttl]
            .iter()
            .position(|n| n.as_str() == v))
    }
}

/// Where the key ended up: in the line (no escapes) or in the key buffer.
enum Key<'de> {
    Line(&'de [u8]),
    Buf,
}

/// A key: a string, or a number written out in decimal.
struct KeySeed<'b>(&'b mut Vec<u8>);

impl<'de> DeserializeSeed<'de> for KeySeed<'_> {
    type Value = Key<'de>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Key<'de>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for KeySeed<'_> {
    type Value = Key<'de>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string or a number")
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
        Ok(Key::Line(v.as_bytes()))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Key<'de>, E> {
        self.0.clear();
        self.0.extend_from_slice(v.as_bytes());
        Ok(Key::Buf)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Key<'de>, E> {
        self.0.clear();
        let _ = write!(self.0, "{v}");
        Ok(Key::Buf)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Key<'de>, E> {
        self.0.clear();
        let _ = write!(self.0, "{v}");
        Ok(Key::Buf)
    }
}

/// An op given as a string.
struct OpSeed;

impl<'de> DeserializeSeed<'de> for OpSeed {
    type Value = Op;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Op, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for OpSeed {
    type Value = Op;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an op such as \"get\"")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Op, E> {
        Ok(generic_op(v.as_bytes()))
    }
}

struct Parsed<'de> {
    time: Option<f64>,
    key: Option<Key<'de>>,
    size: Option<f64>,
    op: Op,
    ttl: Option<f64>,
}

struct Line<'c, 'b> {
    columns: &'c Columns,
    key_buf: &'b mut Vec<u8>,
    /// The field being read, for the error.
    at: &'b mut usize,
}

impl<'de> Visitor<'de> for Line<'_, '_> {
    type Value = Parsed<'de>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Parsed<'de>, A::Error> {
        let mut p = Parsed {
            time: None,
            key: None,
            size: None,
            op: Op::Get,
            ttl: None,
        };
        while let Some(field) = map.next_key_seed(Name(self.columns))? {
            let Some(i) = field else {
                map.next_value::<IgnoredAny>()?;
                continue;
            };
            *self.at = i;
            match i {
                0 => p.time = map.next_value()?,
                1 => p.key = Some(map.next_value_seed(KeySeed(self.key_buf))?),
                2 => p.size = map.next_value()?,
                3 => p.op = map.next_value_seed(OpSeed)?,
                _ => p.ttl = map.next_value()?,
            }
        }
        Ok(p)
    }
}

/// A count field (value_size, ttl) given as a JSON number.
fn count(ctx: &Ctx, field: &str, v: Option<f64>) -> Result<Option<u32>, TraceError> {
    match v {
        None => Ok(None),
        Some(x) if (0.0..=f64::from(u32::MAX)).contains(&x) => Ok(Some(x.round() as u32)),
        Some(x) => Err(ctx.err(field, format!("{x} is not a size in 0..2^32"))),
    }
}

/// One line of a jsonl trace.
pub(super) fn line<'a>(
    ctx: &Ctx,
    columns: &Columns,
    line: &'a [u8],
    key_buf: &'a mut Vec<u8>,
) -> Result<Record<'a>, TraceError> {
    let mut at = usize::MAX;
    let mut de = serde_json::Deserializer::from_slice(line);
    let parsed = de
        .deserialize_map(Line {
            columns,
            key_buf: &mut *key_buf,
            at: &mut at,
        })
        .and_then(|p| de.end().map(|()| p));
    let p = parsed.map_err(|e| {
        let field = FIELDS.get(at).copied().unwrap_or("-");
        ctx.err(field, format!("not valid JSON here: {e}"))
    })?;
    let time = p
        .time
        .ok_or_else(|| ctx.err("timestamp", format!("missing ({:?})", columns.timestamp)))?;
    let key = match p.key {
        Some(Key::Line(k)) => k,
        Some(Key::Buf) => &key_buf[..],
        None => return Err(ctx.err("key", format!("missing ({:?})", columns.key))),
    };
    Ok(Record {
        time_s: Some(time),
        key,
        value_size: count(ctx, "value_size", p.size)?,
        op: p.op,
        ttl_s: count(ctx, "ttl", p.ttl)?.filter(|t| *t > 0),
        count: 1,
    })
}
