//! The network between the instances and the servers (`--redis-rtt`, `--pg-rtt`, the network
//! faults): where the servers are, and one proxy per instance and server, started as each
//! instance connects and stopped with the driver.

use std::net::SocketAddr;

use anyhow::{Context, Result};

use super::Db;
use crate::fault::chaos::NetLink;
use crate::scenario::Scenario;
use crate::values::{Dur, Rtt};

/// One instance's proxy to one server.
pub(super) struct Link {
    instance: usize,
    redis: bool,
    proxy: crate::net::Proxy,
}

impl Link {
    /// What a network fault switches on this proxy.
    pub(super) fn for_faults(&self) -> NetLink {
        NetLink {
            instance: self.instance,
            redis: self.redis,
            control: self.proxy.control.clone(),
        }
    }
}

pub(super) struct Net {
    redis: Option<(SocketAddr, Rtt, String)>,
    pg: Option<(SocketAddr, Rtt)>,
    pub(super) proxies: Vec<Link>,
}

/// Whether the run's network to Redis (`redis`) or Postgres goes through the proxy: a round
/// trip is set, or a network fault strikes it.
fn proxied(sc: &Scenario, redis: bool) -> Option<Rtt> {
    let rtt = if redis { sc.redis_rtt } else { sc.pg_rtt };
    let struck = sc.faults.iter().any(|f| {
        let on = f.server.unwrap_or_default();
        f.kind.is_network() && if redis { on.redis() } else { on.postgres() }
    });
    rtt.or(struck.then_some(Rtt {
        base: Dur::default(),
        jitter: Dur::default(),
    }))
}

impl Net {
    pub(super) async fn for_run(sc: &Scenario, redis_url: &str, db: &Db) -> Result<Net> {
        let redis = match proxied(sc, true) {
            Some(rtt) => {
                let (host, port) = crate::net::url_address(redis_url, 6379).with_context(|| {
                    format!(
                        "no host:port in the Redis URL {}",
                        crate::redact::url(redis_url)
                    )
                })?;
                let addr = crate::net::resolve(&host, port).await?;
                Some((addr, rtt, redis_url.to_string()))
            }
            None => None,
        };
        let pg = match proxied(sc, false) {
            Some(rtt) => {
                let (host, port) = db.address().context(
                    "the network proxy needs Postgres over TCP (host:port), not a Unix socket",
                )?;
                Some((crate::net::resolve(&host, port).await?, rtt))
            }
            None => None,
        };
        Ok(Net {
            redis,
            pg,
            proxies: Vec::new(),
        })
    }

    /// Instance `instance`'s way to the servers: its Redis URL through its own proxy, and its
    /// Postgres proxy's address (None each: directly).
    pub(super) async fn instance(
        &mut self,
        instance: usize,
    ) -> Result<(Option<String>, Option<SocketAddr>)> {
        let mut url = None;
        if let Some((up, rtt, given)) = &self.redis {
            let proxy = crate::net::Proxy::start(*up, *rtt).await?;
            url = crate::net::readdress_url(given, proxy.addr());
            self.proxies.push(Link {
                instance,
                redis: true,
                proxy,
            });
        }
        let mut via = None;
        if let Some((up, rtt)) = self.pg {
            let proxy = crate::net::Proxy::start(up, rtt).await?;
            via = Some(proxy.addr());
            self.proxies.push(Link {
                instance,
                redis: false,
                proxy,
            });
        }
        Ok((url, via))
    }
}
