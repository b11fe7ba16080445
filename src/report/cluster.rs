//! A Redis Cluster run in the reports: one terminal line per node, and the HTML report's chart
//! of each node's share of the commands (plotters' SVG backend, as the timeline charts).

use std::fmt::Write as _;

use anyhow::Result;
use plotters::prelude::*;

use super::html::chart::{look, plot_err};
use crate::cluster::figures::NodeFigures;
use crate::results::RunResult;

fn opt(v: Option<u64>) -> String {
    v.map_or_else(|| "-".to_string(), |n| n.to_string())
}

/// The `cluster` lines of the terminal summary: the redirects, the busiest primary's share,
/// then one line per node. Nothing on a single server.
pub(crate) fn terminal(o: &mut String, r: &RunResult) {
    let rd = &r.redis;
    let Some(nodes) = &rd.nodes else {
        return;
    };
    let primaries = nodes.iter().filter(|n| n.role == "primary").count();
    let _ = writeln!(
        o,
        "  cluster   {} nodes ({primaries} primaries)  busiest primary {} of the primaries' commands (fair share {})  MOVED {}  ASK {} (INFO errorstats)",
        nodes.len(),
        rd.hottest_node_share
            .map_or_else(|| "-".to_string(), |s| format!("{:.1}%", s * 100.0)),
        if primaries > 0 {
            format!("{:.1}%", 100.0 / primaries as f64)
        } else {
            "-".to_string()
        },
        opt(rd.moved),
        opt(rd.ask),
    );
    for n in nodes {
        let _ = writeln!(
            o,
            "    {:<7} {:<21} commands {:>9} ({:>5})  keyspace hits {:>8} misses {:>8}  used memory {}",
            n.role,
            n.addr,
            opt(n.commands),
            n.share
                .map_or_else(|| "-".to_string(), |s| format!("{:.1}%", s * 100.0)),
            opt(n.keyspace_hits),
            opt(n.keyspace_misses),
            n.used_memory
                .map_or_else(|| "-".to_string(), super::memory::bytes),
        );
    }
}

/// What a fault did to the cluster, under its `fault` line.
pub(crate) fn fault(o: &mut String, f: &crate::results::FaultReport) {
    let Some(c) = &f.cluster else {
        return;
    };
    let by = c.now_served_by.as_deref().unwrap_or("?");
    let line = match f.kind {
        crate::fault::FaultKind::KillRedis => match c.promotion_ms {
            Some(p) => format!(
                "killed primary {}; its replica {by} was promoted {p} ms after the kill (cluster-node-timeout {}), {} Redis commands failed or timed out until then; {} db calls in the second after the promotion (less if the restart came first); the killed node started again at the restart and rejoined",
                c.node,
                c.node_timeout_ms
                    .map_or_else(|| "?".to_string(), |t| format!("{t} ms")),
                opt(c.errors_until_promotion),
                opt(c.promotion_stampede),
            ),
            None => format!(
                "killed primary {}; no replica took over before it started again (see the note)",
                c.node
            ),
        },
        crate::fault::FaultKind::Failover => format!(
            "planned failover: {}'s replica {by} took over in {} ms",
            c.node,
            opt(c.took_ms)
        ),
        crate::fault::FaultKind::MigrateSlot => format!(
            "slot {} moved from {} to {by}: {} keys in {} ms (requests for moved keys met ASK meanwhile)",
            c.slot.map_or_else(|| "?".to_string(), |s| s.to_string()),
            c.node,
            opt(c.keys_moved),
            opt(c.took_ms)
        ),
        _ => return,
    };
    let _ = writeln!(o, "            cluster: {line}");
}

/// The HTML report's per-node section: a bar per node and result, its share of the commands.
pub(crate) fn html(h: &mut String, results: &[RunResult], labels: &[String]) -> Result<()> {
    let runs: Vec<(&str, &[NodeFigures])> = results
        .iter()
        .zip(labels)
        .filter_map(|(r, l)| r.redis.nodes.as_deref().map(|n| (l.as_str(), n)))
        .collect();
    if runs.is_empty() {
        return Ok(());
    }
    h.push_str(
        "<figure class=\"chart\" data-metric=\"node-share\">\n<figcaption>Each cluster node's share of the commands in the window (a hot key's node stands out); each result's nodes in its own order, primaries first by address, labelled with the first result's</figcaption>\n",
    );
    h.push_str(&bars(&runs)?);
    h.push_str("</figure>\n");
    Ok(())
}

fn bars(runs: &[(&str, &[NodeFigures])]) -> Result<String> {
    let slots = runs.iter().map(|(_, n)| n.len()).max().unwrap_or(0).max(1);
    let width = runs.len().max(1) as f64;
    let top = runs
        .iter()
        .flat_map(|(_, n)| n.iter().filter_map(|n| n.share))
        .fold(0.0f64, f64::max);
    let y_max = (top * 110.0).clamp(10.0, 100.0);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 320)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let mut chart = ChartBuilder::on(&root)
            .margin_top(12)
            .margin_right(24)
            .x_label_area_size(42)
            .y_label_area_size(60)
            .build_cartesian_2d(0f64..slots as f64, 0f64..y_max)
            .map_err(plot_err)?;
        let names: Vec<String> = runs[0]
            .1
            .iter()
            .map(|n| format!("{} {}", n.role, n.addr.rsplit(':').next().unwrap_or("")))
            .collect();
        let x_fmt = |v: &f64| {
            let i = v.floor() as usize;
            names.get(i).cloned().unwrap_or_default()
        };
        chart
            .configure_mesh()
            .x_desc("node (role, port)")
            .y_desc("share of commands (%)")
            .x_labels(slots * 2 + 1)
            .x_label_formatter(&|v| {
                // Label each bar group at its middle only.
                if (v.fract() - 0.5).abs() < 1e-6 {
                    x_fmt(v)
                } else {
                    String::new()
                }
            })
            .disable_x_mesh()
            .axis_desc_style(("sans-serif", 15))
            .label_style(("sans-serif", 12))
            .draw()
            .map_err(plot_err)?;
        for (k, (label, nodes)) in runs.iter().enumerate() {
            let colour = look(k).color;
            let x0 = 0.1 + 0.8 * k as f64 / width;
            let x1 = 0.1 + 0.8 * (k + 1) as f64 / width;
            chart
                .draw_series(nodes.iter().enumerate().filter_map(|(i, n)| {
                    n.share.map(|s| {
                        Rectangle::new(
                            [(i as f64 + x0, 0.0), (i as f64 + x1, s * 100.0)],
                            colour.filled(),
                        )
                    })
                }))
                .map_err(plot_err)?
                .label(*label);
        }
    }
    Ok(svg)
}
