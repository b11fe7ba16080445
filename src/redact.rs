//! Secrets kept out of everything the tool prints or writes. Results, baselines and reports
//! get committed and pasted into tickets, so every place that shows a value a user gave —
//! server URLs, the target's URL, shell commands, an app variant's environment — shows it
//! through this module, which replaces what could be a credential with `***`:
//!
//! * URLs: the password of the userinfo (all of a Redis userinfo without a `:`, which Redis
//!   reads as the password) and every query parameter whose name says it holds a secret
//!   (`password`, `sslpassword`, `passfile`, `token`, `api_key`, …).
//! * Shell commands: the values of secret-named environment assignments (`PGPASSWORD=…`),
//!   the argument of secret-named options (`--requirepass X`, `--masterauth X`,
//!   `--password=X`), redis-cli's `-a PASS` and `AUTH …`, `CONFIG SET requirepass X`, and
//!   URLs anywhere in the command, also inside a quoted `sh -c '…'`.
//! * Environments given to an app: names only, as for request headers.
//!
//! It redacts by where a value sits, not by matching known secrets, so it needs no state;
//! [`command_secrets`] gives the values it hid, for scrubbing a command's own output.

/// What a secret is replaced with.
pub const MASK: &str = "***";

/// Whether a parameter or variable name says its value is a credential. Broad on purpose:
/// hiding a value that was not secret costs a little readability, showing one that was is
/// a leak.
pub fn is_secret_name(name: &str) -> bool {
    let n: String = name
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_lowercase())
        .collect();
    [
        "pass",
        "pwd",
        "secret",
        "token",
        "credential",
        "auth",
        "signature",
    ]
    .iter()
    .any(|w| n.contains(w))
        || n.ends_with("key")
        || n.ends_with("keyid")
}

/// A URL with its password and secret query parameters replaced by `***`; anything that is
/// not a URL comes back unchanged.
pub fn url(u: &str) -> String {
    url_parts(u).0
}

/// The redacted URL and the values it hid.
fn url_parts(u: &str) -> (String, Vec<String>) {
    let mut hidden = Vec::new();
    let Some(scheme_end) = u.find("://") else {
        return (u.to_string(), hidden);
    };
    let (head, rest) = u.split_at(scheme_end + 3);
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let mut out = head.to_string();
    match authority.rfind('@') {
        Some(at) => {
            let (userinfo, host) = authority.split_at(at);
            match userinfo.split_once(':') {
                Some((user, pass)) => {
                    hidden.push(pass.to_string());
                    out.push_str(user);
                    out.push(':');
                    out.push_str(MASK);
                }
                // redis://secret@host puts the password where the user would be, and
                // https://TOKEN@host is how tokens ride in HTTP URLs.
                None if (head.starts_with("redis") || head.starts_with("http"))
                    && !userinfo.is_empty() =>
                {
                    hidden.push(userinfo.to_string());
                    out.push_str(MASK);
                }
                None => out.push_str(userinfo),
            }
            out.push_str(host);
        }
        None => out.push_str(authority),
    }
    let (path_query, fragment) = match tail.find('#') {
        Some(i) => tail.split_at(i),
        None => (tail, ""),
    };
    match path_query.split_once('?') {
        Some((path, query)) => {
            out.push_str(path);
            out.push('?');
            let pairs: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((k, v)) if is_secret_name(&percent_decode(k)) && !v.is_empty() => {
                        hidden.push(v.to_string());
                        hidden.push(percent_decode(v));
                        format!("{k}={MASK}")
                    }
                    _ => pair.to_string(),
                })
                .collect();
            out.push_str(&pairs.join("&"));
        }
        None => out.push_str(path_query),
    }
    out.push_str(fragment);
    (out, hidden)
}

/// A URL component as written, percent-escapes and `+` decoded (for query values, which
/// libpq and the redis crate read decoded).
pub(crate) fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && let Some(v) = b
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(if b[i] == b'+' { b' ' } else { b[i] });
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// An environment the tool gives an app, for people: the names, each value hidden. A
/// variant's values (`--variant NAME=ENV=VALUE`) are often credentials and the variant's
/// name already tells variants apart.
pub fn env_pair(name: &str) -> String {
    format!("{name}={MASK}")
}

/// The credentials in one environment variable: its whole value when its name says it is
/// one, else the passwords of a URL it holds.
pub fn value_secrets(name: &str, value: &str) -> Vec<String> {
    if is_secret_name(name) {
        vec![value.to_string()]
    } else {
        url_parts(value).1
    }
}

/// A shell command with its secrets replaced by `***`, its other words as written.
pub fn command(cmd: &str) -> String {
    command_parts(cmd, 0).0
}

/// The values [`command`] hides in `cmd`, for scrubbing what the command printed.
pub fn command_secrets(cmd: &str) -> Vec<String> {
    command_parts(cmd, 0).1
}

/// `text` with every one of `secrets` replaced by `***`. Very short values are left: they
/// would mask unrelated text and could not be told from it anyway.
pub fn scrub(text: &str, secrets: &[String]) -> String {
    let mut out = text.to_string();
    let mut by_length: Vec<&String> = secrets.iter().filter(|s| s.len() >= 3).collect();
    // Longest first, so a secret that contains another is hidden whole.
    by_length.sort_by_key(|s| std::cmp::Reverse(s.len()));
    for s in by_length {
        out = out.replace(s.as_str(), MASK);
    }
    out
}

/// One word of a shell command: where it is in the text and what the shell makes of it.
struct Word {
    start: usize,
    end: usize,
    value: String,
}

/// A command split into words and the operators between them (`;`, `|`, `&`, newline),
/// as `sh` splits it: quotes group, a backslash escapes.
enum Token {
    Word(Word),
    Op,
}

fn tokenize(cmd: &str) -> Vec<Token> {
    let mut tokens = Vec::new();
    let mut chars = cmd.char_indices().peekable();
    while let Some(&(i, c)) = chars.peek() {
        if c == ' ' || c == '\t' {
            chars.next();
            continue;
        }
        if matches!(c, ';' | '|' | '&' | '\n' | '(' | ')') {
            chars.next();
            tokens.push(Token::Op);
            continue;
        }
        let start = i;
        let mut end = cmd.len();
        let mut value = String::new();
        while let Some(&(j, c)) = chars.peek() {
            match c {
                ' ' | '\t' | ';' | '|' | '&' | '\n' | '(' | ')' => {
                    end = j;
                    break;
                }
                '\'' => {
                    chars.next();
                    for (_, q) in chars.by_ref() {
                        if q == '\'' {
                            break;
                        }
                        value.push(q);
                    }
                }
                '"' => {
                    chars.next();
                    while let Some((_, q)) = chars.next() {
                        match q {
                            '"' => break,
                            '\\' => {
                                if let Some(&(_, n)) = chars.peek()
                                    && matches!(n, '"' | '\\' | '$' | '`')
                                {
                                    value.push(n);
                                    chars.next();
                                } else {
                                    value.push('\\');
                                }
                            }
                            _ => value.push(q),
                        }
                    }
                }
                '\\' => {
                    chars.next();
                    if let Some((_, n)) = chars.next() {
                        value.push(n);
                    }
                }
                _ => {
                    value.push(c);
                    chars.next();
                }
            }
        }
        tokens.push(Token::Word(Word { start, end, value }));
    }
    tokens
}

/// `value` as one shell word: as it is when nothing in it is special, else single-quoted.
fn quote(value: &str) -> String {
    if !value.is_empty()
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=@%+,*".contains(c))
    {
        value.to_string()
    } else {
        format!("'{}'", value.replace('\'', r"'\''"))
    }
}

/// Options whose argument is a credential in the tools a fault or app command runs
/// (redis-server, redis-cli, psql wrappers, curl-like clients).
fn is_secret_option(opt: &str) -> bool {
    let name = opt.trim_start_matches('-').to_ascii_lowercase();
    ["pass", "pwd", "secret", "token", "credential"]
        .iter()
        .any(|w| name.contains(w))
        || matches!(
            name.as_str(),
            "masterauth" | "auth" | "apikey" | "api-key" | "api_key"
        )
}

/// How deep a command nests commands in quoted strings before the rest is hidden whole.
const MAX_NESTING: usize = 4;

fn command_parts(cmd: &str, depth: usize) -> (String, Vec<String>) {
    if depth > MAX_NESTING {
        return (MASK.to_string(), vec![cmd.to_string()]);
    }
    let tokens = tokenize(cmd);
    let mut hidden = Vec::new();
    // (start, end, replacement) of the words that change, in order.
    let mut edits: Vec<(usize, usize, String)> = Vec::new();
    let mut redis_cli = false;
    let mut hide_next = false;
    let mut hide_rest = false;
    for t in &tokens {
        let w = match t {
            Token::Op => {
                redis_cli = false;
                hide_next = false;
                hide_rest = false;
                continue;
            }
            Token::Word(w) => w,
        };
        let v = w.value.as_str();
        if hide_next || hide_rest {
            hide_next = false;
            hidden.push(v.to_string());
            edits.push((w.start, w.end, MASK.to_string()));
            continue;
        }
        let program = v.rsplit('/').next().unwrap_or(v);
        if program == "redis-cli" {
            redis_cli = true;
        }
        // NAME=VALUE (an assignment) or --option=VALUE, told by the word as written: a
        // quoted "A=b c" is a command (`sh -c "…"`), not an assignment.
        let raw = &cmd[w.start..w.end];
        if let Some((k, _)) = raw.split_once('=')
            && !k.is_empty()
            && (is_env_name(k) || k.starts_with("--"))
            && let Some((_, val)) = v.split_once('=')
        {
            let secret = if k.starts_with("--") {
                is_secret_option(k)
            } else {
                is_secret_name(k)
            };
            if secret {
                hidden.push(val.to_string());
                edits.push((w.start, w.end, format!("{k}={MASK}")));
                continue;
            }
            let (inner, h) = value_parts(val, depth);
            if !h.is_empty() {
                hidden.extend(h);
                edits.push((w.start, w.end, format!("{k}={}", quote(&inner))));
            }
            continue;
        }
        if (v.starts_with('-') && is_secret_option(v)) || (redis_cli && v == "-a") {
            hide_next = true;
            continue;
        }
        let lower = v.to_ascii_lowercase();
        if matches!(lower.as_str(), "requirepass" | "masterauth") {
            hide_next = true;
            continue;
        }
        if redis_cli && lower == "auth" {
            hide_rest = true;
            continue;
        }
        let (inner, h) = value_parts(v, depth);
        if !h.is_empty() {
            hidden.extend(h);
            edits.push((w.start, w.end, quote(&inner)));
        }
    }
    let mut out = String::with_capacity(cmd.len());
    let mut at = 0;
    for (start, end, replacement) in edits {
        out.push_str(&cmd[at..start]);
        out.push_str(&replacement);
        at = end;
    }
    out.push_str(&cmd[at..]);
    (out, hidden)
}

/// One word's value redacted: a URL's secrets, or those of the command it holds (`sh -c
/// '…'`).
fn value_parts(v: &str, depth: usize) -> (String, Vec<String>) {
    if v.contains(char::is_whitespace) || v.contains(';') {
        return command_parts(v, depth + 1);
    }
    if v.contains("://") {
        return url_parts(v);
    }
    (v.to_string(), Vec::new())
}

/// A URL field as a results file writes it (`#[serde(serialize_with)]`): redacted.
pub fn ser_url<S: serde::Serializer>(u: &Option<String>, s: S) -> Result<S::Ok, S::Error> {
    match u {
        Some(u) => s.serialize_some(&url(u)),
        None => s.serialize_none(),
    }
}

/// A shell command field as a results file writes it: redacted.
pub fn ser_command<S: serde::Serializer>(c: &Option<String>, s: S) -> Result<S::Ok, S::Error> {
    match c {
        Some(c) => s.serialize_some(&command(c)),
        None => s.serialize_none(),
    }
}

fn is_env_name(k: &str) -> bool {
    k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !k.starts_with(|c: char| c.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_userinfo_passwords() {
        assert_eq!(url("postgres://app:s3cret@db/x"), "postgres://app:***@db/x");
        assert_eq!(
            url("redis://:pw@127.0.0.1:6000/0"),
            "redis://:***@127.0.0.1:6000/0"
        );
        assert_eq!(url("redis://pw@h:1"), "redis://***@h:1");
        assert_eq!(url("postgres://app@db/x"), "postgres://app@db/x");
        assert_eq!(url("redis://127.0.0.1:1/"), "redis://127.0.0.1:1/");
        assert_eq!(url("not a url"), "not a url");
    }

    #[test]
    fn url_query_parameters_that_hold_secrets() {
        assert_eq!(
            url("postgres://u@h/db?password=pw1&sslmode=require"),
            "postgres://u@h/db?password=***&sslmode=require"
        );
        assert_eq!(
            url("postgresql://u@h/db?sslpassword=k&passfile=/home/u/.pgpass&application_name=x"),
            "postgresql://u@h/db?sslpassword=***&passfile=***&application_name=x"
        );
        assert_eq!(
            url("redis://h:1/0?password=pw2&protocol=resp3"),
            "redis://h:1/0?password=***&protocol=resp3"
        );
        // A percent-encoded name is still that name; a fragment stays.
        assert_eq!(
            url("rediss://u:p@h:1/?pass%77ord=x#insecure"),
            "rediss://u:***@h:1/?pass%77ord=***#insecure"
        );
        assert_eq!(
            url("http://user:tok@127.0.0.1:8080/items/{key}?api_key=k1&x=1"),
            "http://user:***@127.0.0.1:8080/items/{key}?api_key=***&x=1"
        );
        assert_eq!(url("http://h/?a=1&token="), "http://h/?a=1&token=");
    }

    #[test]
    fn commands_keep_their_words_and_hide_their_secrets() {
        assert_eq!(
            command("redis-server --port 7000 --requirepass hunter2 --save ''"),
            "redis-server --port 7000 --requirepass *** --save ''"
        );
        assert_eq!(
            command("PGPASSWORD=pw pg_ctl stop -D /tmp/d -m immediate"),
            "PGPASSWORD=*** pg_ctl stop -D /tmp/d -m immediate"
        );
        assert_eq!(
            command("redis-cli -h 127.0.0.1 -a 'pw with space' ping && echo -a ok"),
            "redis-cli -h 127.0.0.1 -a *** ping && echo -a ok"
        );
        assert_eq!(
            command("redis-cli -u redis://:pw@127.0.0.1:1 CONFIG SET requirepass new"),
            "redis-cli -u redis://:***@127.0.0.1:1 CONFIG SET requirepass ***"
        );
        assert_eq!(
            command("redis-cli AUTH app pw; redis-server --masterauth=m"),
            "redis-cli AUTH *** ***; redis-server --masterauth=***"
        );
        assert_eq!(
            command(r#"sh -c "PGPASSWORD='p q' exec pg_ctl start""#),
            "sh -c 'PGPASSWORD=*** exec pg_ctl start'"
        );
        assert_eq!(
            command("DATABASE_URL=postgres://u:pw@h/db exec ./app"),
            "DATABASE_URL=postgres://u:***@h/db exec ./app"
        );
        let plain = "pg_ctl stop -D '/tmp/my dir' -m immediate";
        assert_eq!(command(plain), plain);
        assert_eq!(command(""), "");
    }

    #[test]
    fn a_commands_secrets_are_scrubbed_from_its_output() {
        let cmd = "redis-server --requirepass 'hunter 2' --port 1";
        let secrets = command_secrets(cmd);
        assert_eq!(secrets, vec!["hunter 2".to_string()]);
        assert_eq!(
            scrub(">>> 'requirepass \"hunter 2\"'", &secrets),
            ">>> 'requirepass \"***\"'"
        );
    }

    #[test]
    fn secret_names() {
        for n in [
            "PGPASSWORD",
            "REDISCLI_AUTH",
            "API_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "STRIPE_KEY",
            "sslpassword",
            "passfile",
        ] {
            assert!(is_secret_name(n), "{n}");
        }
        for n in ["APP_STRATEGY", "PORT", "sslmode", "application_name"] {
            assert!(!is_secret_name(n), "{n}");
        }
    }
}
