//! The topology of a Redis Cluster, as text read from its nodes: CLUSTER NODES and CLUSTER
//! INFO parsed, a node's counters (INFO), a key's slot, a node's URL, and whether a set of
//! views shows a formed cluster. Pure, and unit-tested on text real servers printed; the
//! async shells that fetch the text and change the cluster are in [`super::ops`].

/// The number of hash slots of every Redis Cluster.
pub const SLOTS: u16 = 16384;

/// A node's role as it states it (flags `master` / `slave`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Primary,
    Replica,
    /// Neither flag (a node in handshake, `noflags`).
    Unknown,
}

/// One line of CLUSTER NODES: a node as the node asked sees it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ClusterNode {
    /// The 40-hex-digit node id.
    pub id: String,
    /// `host:port` clients use (the bus port and hostname are cut off); empty for `noaddr`.
    pub addr: String,
    pub role: Role,
    /// A replica's primary; `None` for a primary (or a replica whose primary is unknown).
    pub primary_id: Option<String>,
    /// The slot ranges it serves, inclusive, as listed.
    pub slots: Vec<(u16, u16)>,
    /// Slots this node is moving out: (slot, target node id). Only the node itself lists them.
    pub migrating: Vec<(u16, String)>,
    /// Slots this node is taking in: (slot, source node id). Only the node itself lists them.
    pub importing: Vec<(u16, String)>,
    /// The line of the node that answered.
    pub myself: bool,
    /// Agreed failed by a majority of primaries (`fail`).
    pub fail: bool,
    /// Not answering, in the eyes of the node asked (`fail?`).
    pub pfail: bool,
    /// Every flag as printed (`myself`, `master`, `handshake`, `noaddr`, `nofailover`, …).
    pub flags: Vec<String>,
    /// The node's configuration epoch: a promotion gives the new primary a higher one.
    pub config_epoch: u64,
    /// Whether the node asked has a live bus link to it.
    pub connected: bool,
}

impl ClusterNode {
    /// How many slots it serves.
    pub fn slot_count(&self) -> u32 {
        self.slots
            .iter()
            .map(|&(lo, hi)| u32::from(hi) - u32::from(lo) + 1)
            .sum()
    }

    /// Whether it serves `slot`.
    pub fn serves(&self, slot: u16) -> bool {
        self.slots.iter().any(|&(lo, hi)| (lo..=hi).contains(&slot))
    }

    /// Neither failed nor suspected nor half-known: a node the cluster counts on.
    pub fn healthy(&self) -> bool {
        !self.fail
            && !self.pfail
            && !self
                .flags
                .iter()
                .any(|f| f == "handshake" || f == "noaddr" || f == "noflags")
    }

    /// The port of `addr`, if it has one.
    pub fn port(&self) -> Option<u16> {
        self.addr.rsplit_once(':')?.1.parse().ok()
    }
}

/// Parse the text of CLUSTER NODES (one node per line:
/// `id ip:port@bus[,hostname] flags primary ping pong epoch link slot…`).
pub fn parse_cluster_nodes(text: &str) -> Result<Vec<ClusterNode>, String> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            parse_node_line(line).ok_or_else(|| format!("unreadable CLUSTER NODES line {line:?}"))
        })
        .collect()
}

fn parse_node_line(line: &str) -> Option<ClusterNode> {
    let f: Vec<&str> = line.split_whitespace().collect();
    if f.len() < 8 {
        return None;
    }
    let addr = f[1].split(['@', ',']).next().unwrap_or_default();
    // `:0` is how a node without a known address is printed.
    let addr = if addr.starts_with(':') { "" } else { addr };
    let flags: Vec<String> = f[2].split(',').map(str::to_owned).collect();
    let has = |name: &str| flags.iter().any(|x| x == name);
    let role = if has("master") {
        Role::Primary
    } else if has("slave") {
        Role::Replica
    } else {
        Role::Unknown
    };
    let mut node = ClusterNode {
        id: f[0].to_owned(),
        addr: addr.to_owned(),
        role,
        primary_id: (f[3] != "-").then(|| f[3].to_owned()),
        slots: Vec::new(),
        migrating: Vec::new(),
        importing: Vec::new(),
        myself: has("myself"),
        fail: has("fail"),
        pfail: has("fail?"),
        flags: Vec::new(),
        config_epoch: f[6].parse().ok()?,
        connected: f[7] == "connected",
    };
    node.flags = flags;
    for s in &f[8..] {
        if let Some(inner) = s.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
            if let Some((slot, to)) = inner.split_once("->-") {
                node.migrating.push((slot.parse().ok()?, to.to_owned()));
            } else if let Some((slot, from)) = inner.split_once("-<-") {
                node.importing.push((slot.parse().ok()?, from.to_owned()));
            } else {
                return None;
            }
        } else if let Some((lo, hi)) = s.split_once('-') {
            node.slots.push((lo.parse().ok()?, hi.parse().ok()?));
        } else {
            let slot = s.parse().ok()?;
            node.slots.push((slot, slot));
        }
    }
    Some(node)
}

/// What CLUSTER INFO says about the cluster as one node sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct ClusterState {
    /// `cluster_state:ok`: the node serves queries (every slot covered by a live node).
    pub ok: bool,
    pub slots_assigned: u32,
    pub slots_ok: u32,
    pub slots_pfail: u32,
    pub slots_fail: u32,
    pub known_nodes: u32,
    /// Primaries serving at least one slot.
    pub size: u32,
    pub current_epoch: u64,
}

/// Parse the text of CLUSTER INFO.
pub fn parse_cluster_info(text: &str) -> Result<ClusterState, String> {
    let fields = info_fields(text);
    let get = |name: &str| -> Result<u64, String> {
        fields
            .iter()
            .find(|(k, _)| *k == name)
            .ok_or_else(|| format!("CLUSTER INFO has no {name}"))?
            .1
            .parse()
            .map_err(|e| format!("CLUSTER INFO {name}: {e}"))
    };
    let small = |name: &str| get(name).map(|v| u32::try_from(v).unwrap_or(u32::MAX));
    let state = fields
        .iter()
        .find(|(k, _)| *k == "cluster_state")
        .ok_or("CLUSTER INFO has no cluster_state (is this a cluster node?)")?
        .1;
    Ok(ClusterState {
        ok: state == "ok",
        slots_assigned: small("cluster_slots_assigned")?,
        slots_ok: small("cluster_slots_ok")?,
        slots_pfail: small("cluster_slots_pfail")?,
        slots_fail: small("cluster_slots_fail")?,
        known_nodes: small("cluster_known_nodes")?,
        size: small("cluster_size")?,
        current_epoch: get("cluster_current_epoch")?,
    })
}

/// `name:value` lines of INFO-style text, comments and blank lines skipped.
pub(crate) fn info_fields(text: &str) -> Vec<(&str, &str)> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.trim_end().split_once(':'))
        .collect()
}

/// A node's counters, from one `INFO stats memory errorstats`. Every figure is cumulative
/// since the node started (or since CONFIG RESETSTAT): take the difference of two readings
/// for a window, and mind that a restarted node starts again from zero.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct NodeStats {
    /// Commands the node executed (`total_commands_processed`), INFO calls included.
    pub total_commands_processed: u64,
    /// Key lookups that found the key (`keyspace_hits`).
    pub keyspace_hits: u64,
    /// Key lookups that did not (`keyspace_misses`).
    pub keyspace_misses: u64,
    /// Bytes the node's allocator holds (`used_memory`): a reading, not a counter.
    pub used_memory: u64,
    /// MOVED redirects the node answered (`errorstat_MOVED`; 0 when it never answered one,
    /// as Redis lists only error kinds it has seen).
    pub moved: u64,
    /// ASK redirects the node answered (`errorstat_ASK`; 0 likewise).
    pub ask: u64,
}

/// Parse `INFO stats memory errorstats`.
pub fn parse_node_stats(text: &str) -> Result<NodeStats, String> {
    let fields = info_fields(text);
    let find = |name: &str| fields.iter().find(|(k, _)| *k == name).map(|(_, v)| *v);
    let get = |name: &str| -> Result<u64, String> {
        find(name)
            .ok_or_else(|| format!("INFO has no {name}"))?
            .parse()
            .map_err(|e| format!("INFO {name}: {e}"))
    };
    // `errorstat_ASK:count=3` (7.0 prints only `count`; later versions may add fields).
    let errors = |kind: &str| -> Result<u64, String> {
        let Some(v) = find(&format!("errorstat_{kind}")) else {
            return Ok(0);
        };
        v.split(',')
            .find_map(|kv| kv.strip_prefix("count="))
            .ok_or_else(|| format!("INFO errorstat_{kind} without count: {v:?}"))?
            .parse()
            .map_err(|e| format!("INFO errorstat_{kind}: {e}"))
    };
    Ok(NodeStats {
        total_commands_processed: get("total_commands_processed")?,
        keyspace_hits: get("keyspace_hits")?,
        keyspace_misses: get("keyspace_misses")?,
        used_memory: get("used_memory")?,
        moved: errors("MOVED")?,
        ask: errors("ASK")?,
    })
}

/// The hash slot of `key`: CRC16 (XMODEM) of the key, or of its hash tag, the part between
/// the first `{` and the next `}` when that part is not empty, modulo 16384. (The redis
/// crate computes the same, with the crc16 crate, but does not let the number out.)
pub fn key_slot(key: &[u8]) -> u16 {
    let hashed = key
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            let close = rest.iter().position(|&b| b == b'}')?;
            (close > 0).then(|| &rest[..close])
        })
        .unwrap_or(key);
    crc16_xmodem(hashed) % SLOTS
}

fn crc16_xmodem(data: &[u8]) -> u16 {
    crc16::State::<crc16::XMODEM>::calculate(data)
}

/// A URL for the node at `addr` (`host:port`) with the scheme, credentials, query and
/// fragment of `template` (another node's URL): an external cluster's nodes share them.
pub fn node_url(template: &str, addr: &str) -> String {
    let (scheme, rest) = template.split_once("://").unwrap_or(("redis", template));
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let userinfo = authority.rsplit_once('@').map(|(u, _)| u);
    let host_port = match addr.rsplit_once(':') {
        // An IPv6 address goes in brackets in a URL.
        Some((host, port)) if host.contains(':') && !host.starts_with('[') => {
            format!("[{host}]:{port}")
        }
        _ => addr.to_owned(),
    };
    let tail = if tail.is_empty() { "/" } else { tail };
    match userinfo {
        Some(u) => format!("{scheme}://{u}@{host_port}{tail}"),
        None => format!("{scheme}://{host_port}{tail}"),
    }
}

/// Whether `views` (each node's CLUSTER NODES and CLUSTER INFO, one per node) show a formed
/// cluster of `primaries` primaries with `replicas` replicas each: every node ok and
/// healthy in every view, every slot served, every replica attached to a primary, and every
/// view agreeing on who serves what and who replicates whom. `Err` says what is missing.
pub fn check_formed(
    views: &[(Vec<ClusterNode>, ClusterState)],
    primaries: usize,
    replicas: usize,
) -> Result<(), String> {
    let total = primaries * (1 + replicas);
    // Per node: id, role, primary, slots; sorted, so views compare whatever their order.
    type Summary = Vec<(String, Role, Option<String>, Vec<(u16, u16)>)>;
    let mut agreed: Option<Summary> = None;
    for (view, state) in views {
        let me = view
            .iter()
            .find(|n| n.myself)
            .map_or("?", |n| n.addr.as_str());
        if !state.ok {
            return Err(format!("{me}: cluster_state is not ok"));
        }
        if view.len() != total || view.iter().any(|n| !n.healthy()) {
            return Err(format!(
                "{me} knows {} healthy nodes of {total}",
                view.iter().filter(|n| n.healthy()).count()
            ));
        }
        let serving: Vec<&ClusterNode> = view
            .iter()
            .filter(|n| n.role == Role::Primary && !n.slots.is_empty())
            .collect();
        let covered: u32 = serving.iter().map(|n| n.slot_count()).sum();
        if serving.len() != primaries || covered != u32::from(SLOTS) {
            return Err(format!(
                "{me} sees {} primaries serving {covered} slots",
                serving.len()
            ));
        }
        for p in &serving {
            let n = view
                .iter()
                .filter(|r| r.role == Role::Replica && r.primary_id.as_deref() == Some(&p.id))
                .count();
            if n != replicas {
                return Err(format!("{me} sees {n} replicas of {}", p.addr));
            }
        }
        let mut summary: Vec<_> = view
            .iter()
            .map(|n| (n.id.clone(), n.role, n.primary_id.clone(), n.slots.clone()))
            .collect();
        summary.sort();
        match &agreed {
            None => agreed = Some(summary),
            Some(a) if *a != summary => {
                return Err(format!("{me}'s slot map differs from another node's"));
            }
            Some(_) => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CLUSTER NODES as a Redis 7.0.15 node printed it: a 3:1 cluster mid-migration of slot
    /// 100 (seen from the source), one primary failed and its replica promoted.
    const NODES: &str = "\
3c3a0c74aae0b56170ccb03a76b60cfe7dc1912e 127.0.0.1:40001@40101 myself,master - 0 1700000000000 1 connected 0-5460 [100->-d2b8f4c1e0d1cbae2cb9f9fa0c42d3a4d4d6c1f0]
d2b8f4c1e0d1cbae2cb9f9fa0c42d3a4d4d6c1f0 127.0.0.1:40002@40102 master - 0 1700000000100 2 connected 5461-10922
9d6f0f2a8f8d9b8e7c6a5b4c3d2e1f0a9b8c7d6e 127.0.0.1:40003@40103 master,fail - 1700000000200 1700000000000 3 disconnected
aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa 127.0.0.1:40004@40104,host-4 slave 3c3a0c74aae0b56170ccb03a76b60cfe7dc1912e 0 1700000000300 1 connected
bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb 127.0.0.1:40005@40105 slave d2b8f4c1e0d1cbae2cb9f9fa0c42d3a4d4d6c1f0 0 1700000000400 2 connected
cccccccccccccccccccccccccccccccccccccccc 127.0.0.1:40006@40106 master - 0 1700000000500 7 connected 10923-16383 42
";

    #[test]
    fn cluster_nodes_are_parsed() {
        let nodes = parse_cluster_nodes(NODES).unwrap();
        assert_eq!(nodes.len(), 6);
        let me = &nodes[0];
        assert!(me.myself && me.role == Role::Primary && me.healthy());
        assert_eq!(me.addr, "127.0.0.1:40001");
        assert_eq!(me.port(), Some(40001));
        assert_eq!(me.slots, vec![(0, 5460)]);
        assert_eq!(me.slot_count(), 5461);
        assert_eq!(
            me.migrating,
            vec![(100, "d2b8f4c1e0d1cbae2cb9f9fa0c42d3a4d4d6c1f0".to_owned())]
        );
        assert!(me.serves(100) && !me.serves(5461));
        let dead = &nodes[2];
        assert!(dead.fail && !dead.pfail && !dead.healthy() && !dead.connected);
        assert!(dead.slots.is_empty());
        let replica = &nodes[3];
        assert_eq!(
            replica.addr, "127.0.0.1:40004",
            "bus port and hostname cut off"
        );
        assert_eq!(replica.role, Role::Replica);
        assert_eq!(replica.primary_id.as_deref(), Some(me.id.as_str()));
        let promoted = &nodes[5];
        assert_eq!(promoted.config_epoch, 7);
        assert_eq!(promoted.slots, vec![(10923, 16383), (42, 42)]);
        assert_eq!(promoted.slot_count(), 5462);
    }

    #[test]
    fn importing_pfail_and_bad_lines() {
        let text = "e1 127.0.0.1:1@2 myself,master - 0 0 4 connected [7-<-abc]\n\
                    e2 :0@0 fail?,handshake - 0 0 0 disconnected\n";
        let nodes = parse_cluster_nodes(text).unwrap();
        assert_eq!(nodes[0].importing, vec![(7, "abc".to_owned())]);
        assert!(nodes[0].slots.is_empty());
        assert!(nodes[1].pfail && !nodes[1].fail && nodes[1].addr.is_empty());
        assert_eq!(nodes[1].role, Role::Unknown);
        assert!(parse_cluster_nodes("short line").is_err());
        assert!(parse_cluster_nodes("a b c - 0 0 1 connected x-y").is_err());
    }

    #[test]
    fn cluster_info_is_parsed() {
        let text = "cluster_state:ok\r\ncluster_slots_assigned:16384\r\ncluster_slots_ok:16384\r\n\
                    cluster_slots_pfail:0\r\ncluster_slots_fail:0\r\ncluster_known_nodes:6\r\n\
                    cluster_size:3\r\ncluster_current_epoch:6\r\ncluster_my_epoch:1\r\n";
        let s = parse_cluster_info(text).unwrap();
        assert!(s.ok);
        assert_eq!(
            (s.slots_assigned, s.known_nodes, s.size, s.current_epoch),
            (16384, 6, 3, 6)
        );
        let down = parse_cluster_info(&text.replace("state:ok", "state:fail")).unwrap();
        assert!(!down.ok);
        assert!(parse_cluster_info("# Server\r\nredis_version:7.0.15\r\n").is_err());
    }

    #[test]
    fn node_stats_are_parsed() {
        let text = "# Stats\r\ntotal_connections_received:5\r\ntotal_commands_processed:1234\r\n\
                    keyspace_hits:700\r\nkeyspace_misses:30\r\n\r\n# Memory\r\nused_memory:1048576\r\n\
                    used_memory_human:1.00M\r\n\r\n# Errorstats\r\nerrorstat_ASK:count=17\r\n\
                    errorstat_MOVED:count=4\r\nerrorstat_ERR:count=1\r\n";
        let s = parse_node_stats(text).unwrap();
        assert_eq!(
            s,
            NodeStats {
                total_commands_processed: 1234,
                keyspace_hits: 700,
                keyspace_misses: 30,
                used_memory: 1_048_576,
                moved: 4,
                ask: 17,
            }
        );
        // A node that never redirected lists no errorstat for it: zero, measured.
        let quiet = parse_node_stats(text.split("# Errorstats").next().unwrap()).unwrap();
        assert_eq!((quiet.moved, quiet.ask), (0, 0));
        assert!(parse_node_stats("# Stats\r\nkeyspace_hits:1\r\n").is_err());
    }

    #[test]
    fn key_slots_follow_hash_tags() {
        // Values from the Redis Cluster specification and `CLUSTER KEYSLOT` on 7.0.15.
        assert_eq!(crc16_xmodem(b"123456789"), 0x31c3);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"bar"), 5061);
        assert_eq!(
            key_slot(b"{user1000}.following"),
            key_slot(b"{user1000}.followers")
        );
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        // An empty tag is no tag: the whole key is hashed.
        assert_eq!(key_slot(b"foo{}{bar}"), crc16_xmodem(b"foo{}{bar}") % SLOTS);
        // The tag ends at the first `}` after the first `{`.
        assert_eq!(key_slot(b"foo{{bar}}zap"), key_slot(b"{bar"));
        assert_eq!(key_slot(b"foo{bar}{zap}"), key_slot(b"bar"));
        assert_eq!(key_slot(b""), 0);
    }

    #[test]
    fn node_urls_keep_scheme_credentials_and_tail() {
        assert_eq!(
            node_url("redis://127.0.0.1:1/", "127.0.0.1:2"),
            "redis://127.0.0.1:2/"
        );
        assert_eq!(
            node_url("rediss://u:p@h:1/0#insecure", "10.0.0.2:6380"),
            "rediss://u:p@10.0.0.2:6380/0#insecure"
        );
        assert_eq!(
            node_url("redis://:p@h:1", "::1:7000"),
            "redis://:p@[::1]:7000/"
        );
    }

    fn view(text: &str, me: &str) -> Vec<ClusterNode> {
        let mut v = parse_cluster_nodes(text).unwrap();
        for n in &mut v {
            n.myself = n.addr == me;
        }
        v
    }

    #[test]
    fn formed_needs_agreement_coverage_and_replicas() {
        let ok = ClusterState {
            ok: true,
            slots_assigned: 16384,
            slots_ok: 16384,
            slots_pfail: 0,
            slots_fail: 0,
            known_nodes: 6,
            size: 3,
            current_epoch: 6,
        };
        let good = "p1 127.0.0.1:1@11 master - 0 0 1 connected 0-5460\n\
                    p2 127.0.0.1:2@12 master - 0 0 2 connected 5461-10922\n\
                    p3 127.0.0.1:3@13 master - 0 0 3 connected 10923-16383\n\
                    r1 127.0.0.1:4@14 slave p1 0 0 4 connected\n\
                    r2 127.0.0.1:5@15 slave p2 0 0 5 connected\n\
                    r3 127.0.0.1:6@16 slave p3 0 0 6 connected\n";
        let views: Vec<_> = (1..=6)
            .map(|i| (view(good, &format!("127.0.0.1:{i}")), ok))
            .collect();
        assert_eq!(check_formed(&views, 3, 1), Ok(()));
        assert!(check_formed(&views, 3, 2).is_err());

        // One node still thinks r3 replicates p2.
        let mut stale = views.clone();
        stale[5].0 = view(&good.replace("slave p3", "slave p2"), "127.0.0.1:6");
        let err = check_formed(&stale, 3, 1).unwrap_err();
        assert!(err.contains("replicas"), "{err}");

        // A gap in the slots.
        let mut gap = views.clone();
        gap[0].0 = view(&good.replace("0-5460", "1-5460"), "127.0.0.1:1");
        assert!(
            check_formed(&gap, 3, 1)
                .unwrap_err()
                .contains("16383 slots")
        );

        // Views that disagree on who serves a slot.
        let mut split = views.clone();
        split[1].0 = view(
            &good
                .replace("0-5460", "0-5459")
                .replace("5461-10922", "5460-10922"),
            "127.0.0.1:2",
        );
        assert!(check_formed(&split, 3, 1).unwrap_err().contains("differs"));

        let mut down = views;
        down[2].1.ok = false;
        assert!(check_formed(&down, 3, 1).unwrap_err().contains("not ok"));
    }
}
