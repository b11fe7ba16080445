//! A trace's shape as `trace-stats --json` writes it, read back as the settings of a synthetic
//! workload like it (`run --workload-from`): keys, popularity, rate, the share of writes,
//! value sizes and TTL. Each field read is checked, and a missing or odd one is named.

use std::time::Duration;

use crate::sizes::SizeDist;
use crate::values::Size;

/// A payload size: one size, or a distribution.
#[derive(Debug, Clone, PartialEq)]
pub enum Payload {
    Fixed(usize),
    Dist(SizeDist),
}

/// The synthetic workload a trace's statistics describe.
#[derive(Debug, Clone, PartialEq)]
pub struct Shape {
    pub keys: u64,
    /// Rounded as a user would write it (3 digits).
    pub zipf: f64,
    /// Reads a second, whole.
    pub read_rps: f64,
    /// Writes a second, whole (0: none).
    pub write_rps: f64,
    pub payload: Option<Payload>,
    pub ttl: Option<Duration>,
}

/// The shape in `text` (the JSON of `trace-stats --json`); Err says what is missing, and the
/// caller names the file.
pub fn read(text: &str) -> Result<Shape, String> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| {
        format!("not JSON ({e}); write it with `stampede trace-stats TRACE --json > FILE`")
    })?;
    let num = |ptr: &str| v.pointer(ptr).and_then(serde_json::Value::as_f64);
    let need = |ptr: &str| {
        num(ptr).ok_or_else(|| {
            format!("no number at {ptr}; is it `stampede trace-stats --json` output?")
        })
    };
    let keys = need("/distinct_keys")?;
    let zipf = need("/zipf_exponent")?;
    let rate = num("/rate_per_s/mean").or_else(|| {
        let (n, d) = (num("/requests")?, num("/duration_s")?);
        (d > 0.0).then(|| n / d)
    });
    let Some(rate) = rate.filter(|r| *r > 0.0) else {
        return Err("the trace has no rate (no timestamps): give --rps".into());
    };
    if keys < 1.0 || !(zipf.is_finite() && zipf > 0.0) {
        return Err(format!(
            "distinct_keys {keys} and zipf_exponent {zipf} do not make a workload (at least one key, an exponent above 0)"
        ));
    }
    let reads = num("/ops/read_share").unwrap_or(1.0).clamp(0.0, 1.0);
    let payload = match (num("/value_size/mean"), num("/value_size/p50")) {
        // A lognormal's median is e^mu and its mean e^(mu + sigma²/2): the two give sigma.
        (Some(mean), Some(p50)) if mean > p50 && p50 >= 1.0 => {
            let s2 = 2.0 * (mean / p50).ln();
            let sd = mean * (s2.exp() - 1.0).sqrt();
            Some(Payload::Dist(SizeDist::LogNormal {
                mean: Size(mean.round() as u64),
                sd: Size(sd.round().max(1.0) as u64),
            }))
        }
        (Some(mean), _) if mean >= 1.0 => Some(Payload::Fixed(mean.round() as usize)),
        _ => None,
    };
    Ok(Shape {
        keys: keys as u64,
        zipf: (zipf * 1000.0).round() / 1000.0,
        read_rps: (rate * reads).round().max(1.0),
        write_rps: (rate * (1.0 - reads)).round(),
        payload,
        ttl: num("/ttl_s/p50")
            .filter(|t| *t > 0.0)
            .map(Duration::from_secs_f64),
    })
}
