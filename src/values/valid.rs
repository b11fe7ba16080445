//! The checks a run setting's declaration names (`check EXPR` in `cli::settings`): each
//! returns what is wrong with a given value, said after the setting's name.

use std::fmt::Display;

use super::{Dur, Percent, Rate};

/// Longer than zero.
pub fn positive(d: &Dur) -> Result<(), String> {
    if d.0.is_zero() {
        return Err("must be longer than 0".into());
    }
    Ok(())
}

/// A lease longer than zero (auto always is).
pub fn lease_positive(l: &super::LockTtl) -> Result<(), String> {
    positive(&l.initial())
}

/// At least a second: the recovery verdict reads whole 1 s windows.
pub fn whole_seconds(d: &Dur) -> Result<(), String> {
    if d.0 < std::time::Duration::from_secs(1) {
        return Err(format!(
            "{d}: the verdict reads whole 1 s windows, so at least 1s"
        ));
    }
    Ok(())
}

/// At least `min`.
pub fn at_least<T: PartialOrd + Display>(min: T) -> impl Fn(&T) -> Result<(), String> {
    move |x| {
        if *x < min {
            return Err(format!("must be at least {min} (got {x})"));
        }
        Ok(())
    }
}

/// At most `max`, for the reason `why` (said after the limit when not empty).
pub fn at_most<T: PartialOrd + Display>(
    max: T,
    why: &'static str,
) -> impl Fn(&T) -> Result<(), String> {
    move |x| {
        if *x > max {
            return Err(if why.is_empty() {
                format!("must be at most {max} (got {x})")
            } else {
                format!("must be at most {max} (got {x}): {why}")
            });
        }
        Ok(())
    }
}

/// A finite number above zero.
pub fn above_zero(x: &f64) -> Result<(), String> {
    if !(*x > 0.0 && x.is_finite()) {
        return Err(format!("must be a number above 0 (got {x})"));
    }
    Ok(())
}

/// Not blank: a shell command the tool runs.
pub fn command(what: &'static str) -> impl Fn(&String) -> Result<(), String> {
    move |c| {
        if c.trim().is_empty() {
            return Err(format!("is empty: give the shell command that {what}"));
        }
        Ok(())
    }
}

/// More than zero `what` per second (not finite is refused when a rate is parsed).
pub fn rate_above_zero(what: &'static str) -> impl Fn(&Rate) -> Result<(), String> {
    move |r| {
        if r.0 > 0.0 {
            return Ok(());
        }
        Err(format!(
            "must be more than 0 {what} per second (got {})",
            r.0
        ))
    }
}

/// Zero (no writes) or more writes per second.
pub fn write_rate(r: &Rate) -> Result<(), String> {
    if r.0 >= 0.0 && r.0.is_finite() {
        return Ok(());
    }
    Err(format!(
        "must be 0 (no writes) or more writes per second (got {})",
        r.0
    ))
}

/// A payload Redis and Postgres both hold comfortably.
pub fn at_most_16_mib(v: &usize) -> Result<(), String> {
    if *v > 16 * 1024 * 1024 {
        return Err(format!("must be at most 16 MiB (got {v})"));
    }
    Ok(())
}

/// A finite number, zero or more.
pub fn zero_or_more(b: &f64) -> Result<(), String> {
    if *b >= 0.0 && b.is_finite() {
        return Ok(());
    }
    Err(format!("must be 0 or more (got {b})"))
}

/// The breaker's error rate: at 0% any load would open it.
pub fn error_rate(p: &Percent) -> Result<(), String> {
    if p.0 > 0.0 {
        return Ok(());
    }
    Err("must be above 0% (at 0% any load would open the breaker)".into())
}

/// A share of the TTL strictly inside it.
pub fn share_of_ttl(p: &Percent) -> Result<(), String> {
    if p.0 > 0.0 && p.0 < 1.0 {
        return Ok(());
    }
    Err(format!(
        "must be between 0% and 100% of the TTL, both excluded (got {p}): at 0% every read refreshes, at 100% the entry has expired"
    ))
}

/// The schemes of a Redis URL.
pub const REDIS_SCHEMES: &[&str] = &[
    "redis://",
    "rediss://",
    "unix://",
    "redis+cluster://",
    "rediss+cluster://",
];

/// The schemes of a Postgres URL.
pub const PG_SCHEMES: &[&str] = &["postgres://", "postgresql://"];

/// A URL of one of these schemes.
pub fn url(schemes: &'static [&'static str]) -> impl Fn(&String) -> Result<(), String> {
    move |u| {
        if !schemes.iter().any(|s| u.starts_with(s)) {
            return Err(format!(
                "must start with {} (got {})",
                schemes.join(" or "),
                crate::redact::url(u)
            ));
        }
        Ok(())
    }
}
