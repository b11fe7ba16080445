//! A Redis Cluster run's figures per node: what each node did over the run's window (from its
//! INFO at both ends), the busiest primary's share of the commands, and the redirects the
//! nodes answered with. A hot key lives on one slot, so on one primary: the share tells whether
//! a herd (or plain popularity) loaded one node while the others idled.

use serde::{Deserialize, Serialize};

/// One node's figures, read from its INFO. Counters are since the node started (or its
/// statistics were reset); the run's figures are the difference over the run's window.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeReading {
    pub id: String,
    pub addr: String,
    /// A primary now (`role:master`), or a replica.
    pub primary: bool,
    /// The server process's `run_id` (INFO server): a restarted node has a new one, and its
    /// counters started again from 0.
    pub run_id: String,
    /// `total_commands_processed`.
    pub commands: u64,
    pub keyspace_hits: u64,
    pub keyspace_misses: u64,
    pub evicted_keys: u64,
    /// `used_memory` in bytes, now.
    pub used_memory: u64,
    /// Commands it answered with a MOVED redirect (`errorstat_MOVED`).
    pub moved: u64,
    /// Commands it answered with an ASK redirect (`errorstat_ASK`).
    pub ask: u64,
}

/// One node over the run's window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NodeFigures {
    /// The node's id in the cluster (CLUSTER NODES).
    pub id: String,
    /// `host:port`.
    pub addr: String,
    /// `primary` or `replica`, at the end of the run.
    pub role: String,
    /// Commands it processed in the window (INFO `total_commands_processed`, difference; on a
    /// replica the writes replicated to it count too). Null when the node restarted in the
    /// window (its counters with it) or did not answer at one end.
    pub commands: Option<u64>,
    /// INFO `keyspace_hits`, difference over the window (null as `commands`).
    pub keyspace_hits: Option<u64>,
    /// INFO `keyspace_misses`, difference over the window (null as `commands`).
    pub keyspace_misses: Option<u64>,
    /// Bytes allocated at the end (INFO `used_memory`); null when it did not answer.
    pub used_memory: Option<u64>,
    /// Its share of the commands all nodes processed in the window (0–1); null as `commands`.
    pub share: Option<f64>,
}

/// The per-node figures of a cluster run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClusterWindow {
    pub nodes: Vec<NodeFigures>,
    /// The busiest primary's share of the commands the primaries processed (0–1).
    pub hottest_node_share: Option<f64>,
    /// MOVED redirects the nodes answered in the window (INFO errorstats).
    pub moved: Option<u64>,
    /// ASK redirects the nodes answered in the window (INFO errorstats).
    pub ask: Option<u64>,
}

/// The window's figures from each node's INFO before and after: nodes are matched by id; a
/// node that restarted in the window (another `run_id`) started its counters again, and its
/// differences are unknown.
pub fn window(before: &[NodeReading], after: &[NodeReading]) -> ClusterWindow {
    let mut nodes = Vec::with_capacity(after.len().max(before.len()));
    let mut moved = Some(0u64);
    let mut ask = Some(0u64);
    for b in before {
        let a = after.iter().find(|a| a.id == b.id);
        let delta = a.filter(|a| a.run_id == b.run_id && a.commands >= b.commands);
        let sub = |f: fn(&NodeReading) -> u64| delta.map(|a| f(a).saturating_sub(f(b)));
        let (m, k) = (sub(|n| n.moved), sub(|n| n.ask));
        moved = moved.zip(m).map(|(x, y)| x + y);
        ask = ask.zip(k).map(|(x, y)| x + y);
        nodes.push(NodeFigures {
            id: b.id.clone(),
            addr: b.addr.clone(),
            role: if a.map_or(b.primary, |a| a.primary) {
                "primary"
            } else {
                "replica"
            }
            .to_string(),
            commands: sub(|n| n.commands),
            keyspace_hits: sub(|n| n.keyspace_hits),
            keyspace_misses: sub(|n| n.keyspace_misses),
            used_memory: a.map(|a| a.used_memory),
            share: None,
        });
    }
    // Primaries first, then replicas, each by address: the order a person scans.
    nodes.sort_by(|a, b| (&a.role, &a.addr).cmp(&(&b.role, &b.addr)));
    let total: u64 = nodes.iter().filter_map(|n| n.commands).sum();
    for n in &mut nodes {
        n.share = n
            .commands
            .filter(|_| total > 0)
            .map(|c| c as f64 / total as f64);
    }
    // A primary without a window (restarted, silent) would make another look hotter than it was.
    let primaries: Option<Vec<u64>> = nodes
        .iter()
        .filter(|n| n.role == "primary")
        .map(|n| n.commands)
        .collect();
    let primaries = primaries.unwrap_or_default();
    let primary_total: u64 = primaries.iter().sum();
    let hottest_node_share = primaries
        .iter()
        .max()
        .filter(|_| primary_total > 0)
        .map(|m| *m as f64 / primary_total as f64);
    ClusterWindow {
        nodes,
        hottest_node_share,
        moved,
        ask,
    }
}

/// When one primary served more than this many times its fair share (1 / primaries) of the
/// primaries' commands, the run gets the `hot-shard` diagnosis.
pub const HOT_SHARD_FACTOR: f64 = 2.0;

/// Below this many commands a second on the busiest primary, which node carries the load does
/// not matter yet (an in-process tier in front of one hot key leaves a trickle, all on one
/// node): no `hot-shard` diagnosis.
pub const HOT_SHARD_MIN_RATE: f64 = 1000.0;

/// The `hot-shard` message, when the busiest primary served more than
/// [`HOT_SHARD_FACTOR`] times its fair share of the primaries' commands, at
/// [`HOT_SHARD_MIN_RATE`] commands a second or more over the window of `secs`. With
/// `replica_reads` (`--read-from-replicas`) the reads land on replicas, so every node is
/// weighed against its fair share of all nodes' commands.
pub fn hot_shard(
    nodes: &[NodeFigures],
    hottest_share: Option<f64>,
    secs: f64,
    replica_reads: bool,
) -> Option<String> {
    let weighed: Vec<&NodeFigures> = nodes
        .iter()
        .filter(|n| replica_reads || n.role == "primary")
        .collect();
    if weighed.len() < 2 {
        return None;
    }
    let hottest = weighed.iter().max_by_key(|n| n.commands.unwrap_or(0))?;
    let share = if replica_reads {
        hottest.share?
    } else {
        hottest_share?
    };
    let fair = 1.0 / weighed.len() as f64;
    if share <= HOT_SHARD_FACTOR * fair {
        return None;
    }
    let rate = hottest.commands? as f64 / secs.max(1e-9);
    if rate < HOT_SHARD_MIN_RATE {
        return None;
    }
    let of = if replica_reads {
        "all nodes'"
    } else {
        "the primaries'"
    };
    Some(format!(
        "the {} {} served {:.0}% of {of} commands ({:.0}/s), {:.1}× its fair share of {:.0}%: the hot keys live on its slots, so it saturates first while the other {} idle; spread their reads (an in-process tier with --l1, --read-from-replicas, or copies of a hot key under several hash tags): coordinating loads bounds the database's herd, not this node's reads",
        hottest.role,
        hottest.addr,
        share * 100.0,
        rate,
        share / fair,
        fair * 100.0,
        weighed.len() - 1
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: &str, primary: bool, commands: u64, moved: u64) -> NodeReading {
        NodeReading {
            id: id.into(),
            addr: format!("h:{id}"),
            primary,
            run_id: format!("run-{id}"),
            commands,
            keyspace_hits: commands / 2,
            keyspace_misses: 1,
            evicted_keys: 0,
            used_memory: 100,
            moved,
            ask: 0,
        }
    }

    #[test]
    fn the_window_per_node_and_the_hottest_share() {
        let before = [
            node("a", true, 100, 0),
            node("b", true, 100, 1),
            node("c", true, 100, 0),
            node("r", false, 50, 0),
        ];
        let after = [
            node("a", true, 900, 2),
            node("b", true, 200, 4),
            node("c", true, 200, 0),
            node("r", false, 150, 0),
        ];
        let w = window(&before, &after);
        assert_eq!(w.nodes[0].commands, Some(800));
        assert_eq!(w.nodes[3].role, "replica");
        assert_eq!(w.moved, Some(5));
        // 800 of the primaries' 1000.
        assert_eq!(w.hottest_node_share, Some(0.8));
        // 800 of all 1100.
        assert!((w.nodes[0].share.unwrap() - 800.0 / 1100.0).abs() < 1e-9);
        assert!(hot_shard(&w.nodes, w.hottest_node_share, 0.5, false).is_some());
        // 800 commands in 10 s: one node carries it, but it is a trickle.
        assert!(hot_shard(&w.nodes, w.hottest_node_share, 10.0, false).is_none());
        let even = [
            node("a", true, 400, 0),
            node("b", true, 350, 1),
            node("c", true, 300, 0),
            node("r", false, 50, 0),
        ];
        let w = window(&before, &even);
        assert!(hot_shard(&w.nodes, w.hottest_node_share, 0.1, false).is_none());
    }

    #[test]
    fn a_restarted_node_has_no_window() {
        let before = [node("a", true, 100, 3), node("b", true, 100, 0)];
        let mut restarted = node("a", true, 900, 0);
        restarted.run_id = "another".into();
        let after = [restarted, node("b", true, 300, 0)];
        let w = window(&before, &after);
        assert_eq!(w.nodes[0].commands, None);
        assert_eq!(w.moved, None);
        assert_eq!(w.hottest_node_share, None);
    }
}
