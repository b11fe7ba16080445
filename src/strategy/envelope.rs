//! The cache entry as stored in Redis: a fixed 40-byte header carrying what the freshness
//! policies need (computed-at, load duration, soft and hard expiry, version, a negative flag)
//! followed by the payload. A fixed binary header rather than serde keeps the hot read path
//! to a few bounds-checked loads and no allocation beyond the bytes Redis returned.

pub const HEADER_LEN: usize = 40;
const MAGIC: u8 = b'S';
const FORMAT: u8 = 1;
const FLAG_NEGATIVE: u8 = 1;

/// The header of an entry; the payload is not needed to decide how to serve it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meta {
    /// Unix time in ms when the load that produced this value finished.
    pub computed_at_ms: u64,
    /// How long that load took, in µs (XFetch's delta).
    pub delta_us: u32,
    /// Unix ms after which the value is stale (SWR) or expired (the others).
    pub soft_expiry_ms: u64,
    /// Unix ms at which Redis drops the key (PX).
    pub hard_expiry_ms: u64,
    /// Version of the row the value was loaded from.
    pub version: u64,
    /// A not-found sentinel (negative caching), not a value.
    pub negative: bool,
}

impl Meta {
    pub fn encode(&self, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_LEN + payload.len());
        out.extend_from_slice(&[
            MAGIC,
            FORMAT,
            if self.negative { FLAG_NEGATIVE } else { 0 },
            0,
        ]);
        out.extend_from_slice(&self.computed_at_ms.to_le_bytes());
        out.extend_from_slice(&self.delta_us.to_le_bytes());
        out.extend_from_slice(&self.soft_expiry_ms.to_le_bytes());
        out.extend_from_slice(&self.hard_expiry_ms.to_le_bytes());
        out.extend_from_slice(&self.version.to_le_bytes());
        out.extend_from_slice(payload);
        out
    }

    /// The header of a stored entry, or None for bytes this tool did not write.
    pub fn decode(bytes: &[u8]) -> Option<Meta> {
        if bytes.len() < HEADER_LEN || bytes[0] != MAGIC || bytes[1] != FORMAT {
            return None;
        }
        let u64_at = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&bytes[i..i + 8]);
            u64::from_le_bytes(b)
        };
        let mut d = [0u8; 4];
        d.copy_from_slice(&bytes[12..16]);
        Some(Meta {
            negative: bytes[2] & FLAG_NEGATIVE != 0,
            computed_at_ms: u64_at(4),
            delta_us: u32::from_le_bytes(d),
            soft_expiry_ms: u64_at(16),
            hard_expiry_ms: u64_at(24),
            version: u64_at(32),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let m = Meta {
            computed_at_ms: 1_700_000_000_123,
            delta_us: 20_500,
            soft_expiry_ms: 1_700_000_030_123,
            hard_expiry_ms: 1_700_000_040_123,
            version: 7,
            negative: false,
        };
        let bytes = m.encode(b"hello");
        assert_eq!(bytes.len(), HEADER_LEN + 5);
        assert_eq!(Meta::decode(&bytes), Some(m));
        let neg = Meta {
            negative: true,
            ..m
        };
        assert_eq!(Meta::decode(&neg.encode(&[])), Some(neg));
        assert_eq!(Meta::decode(b"not ours"), None);
    }
}
