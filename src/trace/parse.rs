//! The line parsers of the formats with columns (twitter, meta, csv) and of `redis-cli
//! MONITOR` output, and the detection of a format from a trace's first line. Everything works
//! on the bytes of one line; a key is borrowed from the line unless it had to be unescaped.

use super::{Format, Layout, Op, Record, TraceError};

/// Where a line is, for its errors.
pub(super) struct Ctx<'a> {
    pub file: &'a str,
    pub line: u64,
}

impl Ctx<'_> {
    pub fn err(&self, field: &str, message: impl Into<String>) -> TraceError {
        TraceError::new(self.file, self.line, Some(field), message)
    }

    fn not_a_number(&self, field: &str, raw: &[u8]) -> TraceError {
        self.err(
            field,
            format!("{:?} is not a number", String::from_utf8_lossy(raw)),
        )
    }
}

/// Twitter's columns: `timestamp,key,key_size,value_size,client_id,op,ttl`.
pub(super) const TWITTER: Layout = Layout {
    time: Some(0),
    key: 1,
    size: Some(3),
    op: Some(5),
    ttl: Some(6),
    count: None,
    min_fields: 7,
};

/// The fields of a comma-separated line as ranges of `line`, quotes included (a quoted field
/// may hold commas; `""` inside it is a quote).
fn split(line: &[u8], out: &mut Vec<(usize, usize)>) {
    out.clear();
    let mut start = 0;
    let mut i = 0;
    let mut quoted = false;
    while i < line.len() {
        match line[i] {
            b'"' if i == start => quoted = true,
            b'"' if quoted => {
                if line.get(i + 1) == Some(&b'"') {
                    i += 1;
                } else {
                    quoted = false;
                }
            }
            b',' if !quoted => {
                out.push((start, i));
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    out.push((start, line.len()));
}

/// A field without its quotes and surrounding spaces; a quoted field with `""` in it is
/// unescaped into `scratch`.
fn field<'a>(raw: &'a [u8], scratch: &'a mut Vec<u8>) -> &'a [u8] {
    let t = raw.trim_ascii();
    if t.len() >= 2 && t[0] == b'"' && t[t.len() - 1] == b'"' {
        let inner = &t[1..t.len() - 1];
        if !inner.windows(2).any(|w| w == b"\"\"") {
            return inner;
        }
        scratch.clear();
        let mut i = 0;
        while i < inner.len() {
            scratch.push(inner[i]);
            i += if inner[i] == b'"' && inner.get(i + 1) == Some(&b'"') {
                2
            } else {
                1
            };
        }
        return scratch;
    }
    t
}

/// A number field with its quotes and spaces off.
fn bare(raw: &[u8]) -> &[u8] {
    let t = raw.trim_ascii();
    if t.len() >= 2 && t[0] == b'"' && t[t.len() - 1] == b'"' {
        &t[1..t.len() - 1]
    } else {
        t
    }
}

/// A decimal integer of ASCII digits, without going through a string.
pub(super) fn parse_u64(b: &[u8]) -> Option<u64> {
    if b.is_empty() || b.len() > 20 {
        return None;
    }
    let mut v: u64 = 0;
    for &c in b {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(d))?;
    }
    Some(v)
}

/// Seconds, whole or fractional: whole numbers take the integer path.
pub(super) fn parse_f64(b: &[u8]) -> Option<f64> {
    if let Some(v) = parse_u64(b) {
        return Some(v as f64);
    }
    let v: f64 = std::str::from_utf8(b).ok()?.parse().ok()?;
    v.is_finite().then_some(v)
}

fn u32_field(ctx: &Ctx, name: &str, raw: &[u8]) -> Result<u32, TraceError> {
    let b = bare(raw);
    match parse_u64(b) {
        Some(v) => u32::try_from(v).map_err(|_| ctx.err(name, format!("{v} is too large"))),
        // A float such as 3600.0 or 1e3 is a count still.
        None => match parse_f64(b) {
            Some(v) if v >= 0.0 && v <= f64::from(u32::MAX) => Ok(v.round() as u32),
            _ => Err(ctx.not_a_number(name, b)),
        },
    }
}

/// An ASCII word lowercased into a small array (ops are short), for comparing without
/// allocating. Longer words are never an op.
fn lower(b: &[u8]) -> Option<([u8; 16], usize)> {
    if b.len() > 16 {
        return None;
    }
    let mut a = [0u8; 16];
    for (i, c) in b.iter().enumerate() {
        a[i] = c.to_ascii_lowercase();
    }
    Some((a, b.len()))
}

/// The op of a twitter or csv line: memcached's commands and the usual words.
pub(super) fn generic_op(b: &[u8]) -> Op {
    let Some((a, n)) = lower(b.trim_ascii()) else {
        return Op::Other;
    };
    match &a[..n] {
        b"get" | b"gets" | b"read" => Op::Get,
        b"set" | b"add" | b"replace" | b"cas" | b"append" | b"prepend" | b"incr" | b"decr"
        | b"write" | b"put" | b"update" => Op::Set,
        b"delete" | b"del" | b"remove" | b"unlink" => Op::Delete,
        _ => Op::Other,
    }
}

/// The op of a Meta line (CacheLib's upper-case names).
fn meta_op(b: &[u8]) -> Op {
    let Some((a, n)) = lower(b.trim_ascii()) else {
        return Op::Other;
    };
    match &a[..n] {
        b"get" | b"get_lease" => Op::Get,
        b"set" | b"set_lease" => Op::Set,
        b"delete" => Op::Delete,
        _ => Op::Other,
    }
}

/// One line of a format with columns.
pub(super) fn columns_line<'a>(
    ctx: &Ctx,
    format: Format,
    layout: &Layout,
    line: &'a [u8],
    fields: &mut Vec<(usize, usize)>,
    key_buf: &'a mut Vec<u8>,
) -> Result<Record<'a>, TraceError> {
    split(line, fields);
    if fields.len() < layout.min_fields {
        return Err(ctx.err(
            "-",
            format!(
                "{} fields, the {} format needs {}",
                fields.len(),
                format.name(),
                layout.min_fields
            ),
        ));
    }
    // Twitter's keys are not quoted and may hold commas: the key is whatever lies between
    // the first field and the last five.
    let extra = if format == Format::Twitter {
        fields.len() - layout.min_fields
    } else {
        0
    };
    let at = |i: usize| {
        let i = if i > layout.key { i + extra } else { i };
        let (a, b) = fields[i];
        &line[a..b]
    };
    let time_s = match layout.time {
        Some(i) => {
            let b = bare(at(i));
            Some(parse_f64(b).ok_or_else(|| ctx.not_a_number("timestamp", b))?)
        }
        None => None,
    };
    let value_size = match layout.size {
        Some(i) if !bare(at(i)).is_empty() => Some(u32_field(ctx, "value_size", at(i))?),
        _ => None,
    };
    let ttl_s = match layout.ttl {
        Some(i) if !bare(at(i)).is_empty() => {
            Some(u32_field(ctx, "ttl", at(i))?).filter(|t| *t > 0)
        }
        _ => None,
    };
    let count = match layout.count {
        Some(i) => u32_field(ctx, "op_count", at(i))?,
        None => 1,
    };
    let op = match layout.op {
        Some(i) if format == Format::Meta => meta_op(bare(at(i))),
        Some(i) => generic_op(bare(at(i))),
        None => Op::Get,
    };
    let key = if extra > 0 {
        &line[fields[layout.key].0..fields[layout.key + extra].1]
    } else {
        let (a, b) = fields[layout.key];
        field(&line[a..b], key_buf)
    };
    Ok(Record {
        time_s,
        key,
        value_size,
        op,
        ttl_s,
        count,
    })
}

/// The header's column names, trimmed, unquoted and lowercased.
fn header_names(line: &[u8]) -> Vec<String> {
    let mut fields = Vec::new();
    split(line, &mut fields);
    fields
        .iter()
        .map(|&(a, b)| String::from_utf8_lossy(bare(&line[a..b])).to_ascii_lowercase())
        .collect()
}

/// Meta's columns, found by name in its header (v1 and v2 order them differently).
pub(super) fn meta_layout(header: &[u8], file: &str, line: u64) -> Result<Layout, TraceError> {
    let names = header_names(header);
    let find = |n: &str| names.iter().position(|x| x == n);
    let need = |n: &str| {
        find(n).ok_or_else(|| {
            TraceError::new(
                file,
                line,
                Some(n),
                format!(
                    "the Meta header has no column {n} (it has {})",
                    names.join(",")
                ),
            )
        })
    };
    let key = need("key")?;
    let op = need("op")?;
    let l = Layout {
        time: find("op_time"),
        key,
        size: find("size"),
        op: Some(op),
        ttl: find("ttl"),
        count: find("op_count"),
        min_fields: 0,
    };
    Ok(Layout {
        min_fields: max_index(&l) + 1,
        ..l
    })
}

fn max_index(l: &Layout) -> usize {
    [l.time, Some(l.key), l.size, l.op, l.ttl, l.count]
        .into_iter()
        .flatten()
        .max()
        .unwrap_or(0)
}

/// A generic CSV's columns, by the names `columns` gives them.
pub(super) fn csv_layout(
    header: &[u8],
    columns: &super::Columns,
    file: &str,
    line: u64,
) -> Result<Layout, TraceError> {
    let names = header_names(header);
    let find = |n: &str| names.iter().position(|x| x.eq_ignore_ascii_case(n));
    let need = |field: &str, n: &str| {
        find(n).ok_or_else(|| {
            TraceError::new(
                file,
                line,
                Some(field),
                format!(
                    "the header has no column {n:?} (it has {}): name it with --trace-columns {field}=COLUMN",
                    names.join(",")
                ),
            )
        })
    };
    let l = Layout {
        time: Some(need("timestamp", &columns.timestamp)?),
        key: need("key", &columns.key)?,
        size: find(&columns.value_size),
        op: find(&columns.op),
        ttl: find(&columns.ttl),
        count: None,
        min_fields: 0,
    };
    Ok(Layout {
        min_fields: max_index(&l) + 1,
        ..l
    })
}

/// `1339518083.107412 [0 127.0.0.1:60866]`: digits, a dot, digits, a space and a bracket.
fn looks_like_monitor(line: &[u8]) -> bool {
    let Some(sp) = line.iter().position(|&c| c == b' ') else {
        return false;
    };
    let ts = &line[..sp];
    line.get(sp + 1) == Some(&b'[')
        && ts.contains(&b'.')
        && ts.iter().all(|c| c.is_ascii_digit() || *c == b'.')
}

/// The format of a trace whose first line (not blank) is `first`; None when it is none of
/// them. `columns` says the user named csv columns, so a header is a csv one.
pub(super) fn detect(first: &[u8], columns: bool) -> Option<Format> {
    let t = first.trim_ascii();
    if t == b"OK" || looks_like_monitor(t) {
        return Some(Format::Monitor);
    }
    if t.starts_with(b"{") {
        return Some(Format::Jsonl);
    }
    let mut fields = Vec::new();
    split(t, &mut fields);
    let (a, b) = fields[0];
    if parse_f64(bare(&t[a..b])).is_some() {
        // Data on the first line: only Twitter's format has no header.
        let n = fields.len();
        if n >= TWITTER.min_fields {
            let (oa, ob) = fields[n - 2];
            if generic_op(&t[oa..ob]) != Op::Other {
                return Some(Format::Twitter);
            }
        }
        return None;
    }
    let names = header_names(t);
    let has = |n: &str| names.iter().any(|x| x == n);
    if !columns && has("key") && has("op") && (has("op_count") || has("op_time")) {
        return Some(Format::Meta);
    }
    if columns || has("key") {
        return Some(Format::Csv);
    }
    None
}

/// MONITOR's quoted arguments: the ranges inside the quotes, escapes left in.
fn monitor_args(
    ctx: &Ctx,
    s: &[u8],
    base: usize,
    out: &mut Vec<(usize, usize)>,
) -> Result<(), TraceError> {
    out.clear();
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b' ' => i += 1,
            b'"' => {
                let start = i + 1;
                let mut j = start;
                loop {
                    match s.get(j) {
                        None => return Err(ctx.err("arguments", "a quoted argument does not end")),
                        Some(b'\\') => j += 2,
                        Some(b'"') => break,
                        Some(_) => j += 1,
                    }
                }
                out.push((base + start, base + j));
                i = j + 1;
            }
            _ => return Err(ctx.err("arguments", "an argument is not quoted")),
        }
    }
    Ok(())
}

fn hex(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

/// Undo redis's quoting (`\"`, `\\`, `\n`, `\r`, `\t`, `\a`, `\b`, `\xNN`) into `out`.
fn unescape(ctx: &Ctx, s: &[u8], out: &mut Vec<u8>) -> Result<(), TraceError> {
    out.clear();
    let mut i = 0;
    while i < s.len() {
        if s[i] != b'\\' {
            out.push(s[i]);
            i += 1;
            continue;
        }
        let c = *s
            .get(i + 1)
            .ok_or_else(|| ctx.err("arguments", "a lone backslash"))?;
        let (byte, len) = match c {
            b'n' => (b'\n', 2),
            b'r' => (b'\r', 2),
            b't' => (b'\t', 2),
            b'a' => (7, 2),
            b'b' => (8, 2),
            b'x' => {
                let v = s
                    .get(i + 2..i + 4)
                    .and_then(|h| Some(hex(h[0])? << 4 | hex(h[1])?))
                    .ok_or_else(|| ctx.err("arguments", "a \\x escape without two hex digits"))?;
                (v, 4)
            }
            other => (other, 2),
        };
        out.push(byte);
        i += len;
    }
    Ok(())
}

/// The unescaped length of a quoted argument.
fn unescaped_len(s: &[u8]) -> usize {
    let mut n = 0;
    let mut i = 0;
    while i < s.len() {
        i += match (s[i], s.get(i + 1)) {
            (b'\\', Some(b'x')) => 4,
            (b'\\', _) => 2,
            _ => 1,
        };
        n += 1;
    }
    n
}

/// One line of `redis-cli MONITOR`: `1339518083.107412 [0 127.0.0.1:60866] "GET" "key"`.
pub(super) fn monitor_line<'a>(
    ctx: &Ctx,
    line: &'a [u8],
    args: &mut Vec<(usize, usize)>,
    key_buf: &'a mut Vec<u8>,
) -> Result<Record<'a>, TraceError> {
    let skipped = Record {
        time_s: None,
        key: &[],
        value_size: None,
        op: Op::Other,
        ttl_s: None,
        count: 1,
    };
    // The banner redis-cli prints when MONITOR starts.
    if line.trim_ascii() == b"OK" {
        return Ok(skipped);
    }
    let sp = line
        .iter()
        .position(|&c| c == b' ')
        .ok_or_else(|| ctx.err("timestamp", "no space after the timestamp"))?;
    let time = parse_f64(&line[..sp]).ok_or_else(|| ctx.not_a_number("timestamp", &line[..sp]))?;
    // The client is `[db addr]`, and an IPv6 addr has brackets of its own: the arguments
    // start after the first `] "`.
    let rest = &line[sp..];
    let end = rest
        .windows(3)
        .position(|w| w == b"] \"")
        .ok_or_else(|| ctx.err("client", "no [db client] before the command"))?;
    let base = sp + end + 2;
    monitor_args(ctx, &line[base..], base, args)?;
    let arg = |i: usize| args.get(i).map(|&(a, b)| &line[a..b]);
    let Some(cmd) = arg(0) else {
        return Err(ctx.err("command", "no command"));
    };
    let Some((c, n)) = lower(cmd) else {
        return Ok(Record {
            time_s: Some(time),
            ..skipped
        });
    };
    let cmd = &c[..n];
    let op = match cmd {
        b"get" | b"getex" => Op::Get,
        b"set" | b"setnx" | b"setex" | b"psetex" => Op::Set,
        b"del" | b"unlink" => Op::Delete,
        _ => Op::Other,
    };
    let Some(raw_key) = arg(1).filter(|_| op != Op::Other) else {
        return Ok(Record {
            time_s: Some(time),
            ..skipped
        });
    };
    let num = |i: usize, field: &str| -> Result<u64, TraceError> {
        let b = arg(i).ok_or_else(|| ctx.err(field, "missing"))?;
        parse_u64(b).ok_or_else(|| ctx.not_a_number(field, b))
    };
    let secs = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
    let (value_size, ttl_s) = match cmd {
        b"set" | b"setnx" => {
            let v = arg(2).ok_or_else(|| ctx.err("value", "SET without a value"))?;
            let mut ttl = None;
            let mut i = 3;
            while let Some(o) = arg(i) {
                match lower(o).as_ref().map(|(a, n)| &a[..*n]) {
                    Some(b"ex") => ttl = Some(secs(num(i + 1, "EX")?)),
                    Some(b"px") => ttl = Some(secs(num(i + 1, "PX")?.div_ceil(1000))),
                    _ => {}
                }
                i += 1;
            }
            (Some(unescaped_len(v)), ttl)
        }
        b"setex" => {
            let v = arg(3).ok_or_else(|| ctx.err("value", "SETEX without a value"))?;
            (Some(unescaped_len(v)), Some(secs(num(2, "seconds")?)))
        }
        b"psetex" => {
            let v = arg(3).ok_or_else(|| ctx.err("value", "PSETEX without a value"))?;
            let ms = num(2, "milliseconds")?;
            (Some(unescaped_len(v)), Some(secs(ms.div_ceil(1000))))
        }
        _ => (None, None),
    };
    let key = if raw_key.contains(&b'\\') {
        unescape(ctx, raw_key, key_buf)?;
        &key_buf[..]
    } else {
        raw_key
    };
    Ok(Record {
        time_s: Some(time),
        key,
        value_size: value_size.map(|v| u32::try_from(v).unwrap_or(u32::MAX)),
        op,
        ttl_s: ttl_s.filter(|t| *t > 0),
        count: 1,
    })
}
