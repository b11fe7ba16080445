//! users: personalised answers must not be shared between users. On a fresh cache B asks,
//! then on a fresh cache A asks and B asks again right after; as a control A asks twice, each
//! on a fresh cache. Stable content (the control's two answers equal): B's second answer
//! equal to A's while B's first differed is A's answer served to B. Volatile content
//! (timestamps, request ids): decided by the identity the answer carries instead.

use anyhow::Result;
use serde_json::{Value, json};

use super::lab::{Answer, Lab};
use super::{CheckResult, Settings, Verdict};

/// Bytes of each body kept in the evidence.
const SHOWN: usize = 120;

/// The answers the check compares (bodies).
pub struct Seen<'a> {
    pub b_first: &'a str,
    pub a: &'a str,
    pub b_after_a: &'a str,
    pub control: (&'a str, &'a str),
}

/// How a user shows in an answer: `--user-marker` with `{user}`, else the identity itself.
pub fn marker(template: Option<&str>, user: &str) -> Option<regex::Regex> {
    let esc = regex::escape(user);
    let src = template.map_or(esc.clone(), |t| t.replace("{user}", &esc));
    regex::Regex::new(&src).ok()
}

pub fn decide(seen: &Seen, a_id: &str, b_id: &str, marker_t: Option<&str>) -> Verdict {
    let volatile = seen.control.0 != seen.control.1;
    if !volatile {
        if seen.b_first == seen.a {
            return Verdict::pass(
                "not personalised: both users get the same answer (nothing per user to leak)",
            );
        }
        if seen.b_after_a == seen.a {
            return Verdict::fail(format!(
                "{b_id} was served {a_id}'s answer: after {a_id} filled the cache, {b_id}'s answer equals {a_id}'s (on a fresh cache it differs): the cache key misses the user"
            ));
        }
        return Verdict::pass(format!(
            "per user: {b_id}'s answer stays {b_id}'s after {a_id} filled the cache"
        ));
    }
    let (Some(ma), Some(mb)) = (marker(marker_t, a_id), marker(marker_t, b_id)) else {
        return Verdict::skip("--user-marker does not make a regular expression");
    };
    let (a_in, b_in) = (ma.is_match(seen.b_after_a), mb.is_match(seen.b_after_a));
    if a_in && !b_in {
        return Verdict::fail(format!(
            "{b_id} was served {a_id}'s answer: the answers are volatile, and {b_id}'s answer after {a_id} filled the cache carries {a_id}'s identity, not {b_id}'s"
        ));
    }
    if !ma.is_match(seen.a) && !mb.is_match(seen.b_first) {
        return Verdict::pass(
            "not personalised as far as can be told: the answers are volatile and carry no identity (--user-marker says how a user shows)",
        );
    }
    Verdict::pass(format!(
        "per user (volatile answers, decided by identity): {b_id}'s answer after {a_id} carries {b_id}'s identity"
    ))
}

fn shown(a: &Answer) -> Value {
    let mut end = a.body.len().min(SHOWN);
    while !a.body.is_char_boundary(end) {
        end -= 1;
    }
    json!({"status": a.status, "body_start": &a.body[..end]})
}

pub async fn check(lab: &mut Lab, s: &Settings) -> Result<CheckResult> {
    if s.user_via.is_none() {
        return Ok(CheckResult::new(
            "users",
            Verdict::skip("no --user-header or --user-cookie: the audit cannot tell users apart"),
            json!({}),
            Value::Null,
        ));
    }
    let url = lab.url(s.users_target.as_deref(), s.key_base("users"));
    let (a, b) = (s.user_a.as_str(), s.user_b.as_str());
    lab.fresh_cache().await?;
    let b_first = lab.get(&url, Some(b)).await;
    lab.fresh_cache().await?;
    let a1 = lab.get(&url, Some(a)).await;
    let b_after = lab.get(&url, Some(b)).await;
    lab.fresh_cache().await?;
    let c1 = lab.get(&url, Some(a)).await;
    lab.fresh_cache().await?;
    let c2 = lab.get(&url, Some(a)).await;
    let evidence = json!({
        "source": "HTTP answers, each on a fresh cache (the app's keys removed) but B's second",
        "url": crate::redact::url(&url),
        "b_first": shown(&b_first),
        "a": shown(&a1),
        "b_after_a": shown(&b_after),
        "control_a_twice": [shown(&c1), shown(&c2)],
        "volatile": c1.body != c2.body,
    });
    let all = [&b_first, &a1, &b_after, &c1, &c2];
    let v = match all.iter().find(|x| !x.ok()) {
        Some(bad) => Verdict::skip(format!(
            "the route did not answer 2xx ({}): nothing to compare",
            bad.status
                .map_or_else(|| "no answer".to_string(), |c| c.to_string())
        )),
        None => decide(
            &Seen {
                b_first: &b_first.body,
                a: &a1.body,
                b_after_a: &b_after.body,
                control: (&c1.body, &c2.body),
            },
            a,
            b,
            s.user_marker.as_deref(),
        ),
    };
    Ok(CheckResult::new("users", v, evidence, Value::Null))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::Status;

    fn seen<'a>(b1: &'a str, a: &'a str, b2: &'a str, c: (&'a str, &'a str)) -> Seen<'a> {
        Seen {
            b_first: b1,
            a,
            b_after_a: b2,
            control: c,
        }
    }

    #[test]
    fn stable_answers_shared_fail_and_kept_apart_pass() {
        let leak = seen(
            "for bob",
            "for alice",
            "for alice",
            ("for alice", "for alice"),
        );
        assert_eq!(decide(&leak, "alice", "bob", None).status, Status::Fail);
        let ok = seen(
            "for bob",
            "for alice",
            "for bob",
            ("for alice", "for alice"),
        );
        assert_eq!(decide(&ok, "alice", "bob", None).status, Status::Pass);
        let same = seen("x", "x", "x", ("x", "x"));
        let v = decide(&same, "alice", "bob", None);
        assert_eq!(v.status, Status::Pass);
        assert!(v.reason.starts_with("not personalised"), "{}", v.reason);
    }

    #[test]
    fn volatile_answers_are_decided_by_identity() {
        let ok = seen(
            "bob at 1",
            "alice at 2",
            "bob at 3",
            ("alice at 4", "alice at 5"),
        );
        let v = decide(&ok, "alice", "bob", None);
        assert_eq!(v.status, Status::Pass);
        assert!(v.reason.contains("volatile"), "{}", v.reason);
        let leak = seen(
            "bob at 1",
            "alice at 2",
            "alice at 3",
            ("alice 4", "alice 5"),
        );
        assert_eq!(decide(&leak, "alice", "bob", None).status, Status::Fail);
        // With a marker, the identity counts only where the marker says.
        let m = Some("user=\"{user}\"");
        let ok = seen(
            "user=\"bob\" 1",
            "user=\"alice\" 2",
            "user=\"bob\" alice 3",
            ("a", "b"),
        );
        assert_eq!(decide(&ok, "alice", "bob", m).status, Status::Pass);
        let none = seen("t1", "t2", "t3", ("t4", "t5"));
        assert!(
            decide(&none, "alice", "bob", None)
                .reason
                .contains("carry no identity")
        );
    }
}
