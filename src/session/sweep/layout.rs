//! A sweep's points laid out before any server starts: every grid point's scenarios (one per
//! strategy), or, for `--boundary rps`, the other axis's points, each resolved at both ends of
//! the rate. A point that does not resolve stops the sweep here, as a usage error. Also the
//! scenario the servers are sized for and the one whose workload the summary names.

use crate::error::UsageError;
use crate::scenario::Scenario;
use crate::scenario::sweep::Plan;
use crate::scenario::sweep::axes::{self, Axis};
use crate::values::points::Point;

/// One point of the grid: its values and one scenario per strategy.
pub struct GridPoint {
    pub params: Vec<(String, f64)>,
    pub scenarios: Vec<Scenario>,
}

/// A point of the axis beside the boundary: its flag and value (empty without one).
pub type OtherPoint = Vec<(String, Point)>;

/// What `--boundary rps` bisects: each other point, and the rate's two ends.
pub type Bisection = (Vec<OtherPoint>, f64, f64);

/// Every point of the sweep, resolved.
pub struct Layout {
    /// The strategies' labels, in the order each point runs them.
    pub strategies: Vec<String>,
    /// The grid (without --boundary).
    pub grid: Vec<GridPoint>,
    /// --boundary rps: the other axis's points (one empty point without one), and the range.
    pub boundary: Option<Bisection>,
    /// The scenario the servers are sized for (the most DB connections).
    pub biggest: Scenario,
    /// The first strategy's scenario at the first point, whose workload the summary names.
    pub first: Scenario,
}

/// Keeps the scenario that opens the most database connections: the servers are sized for it.
#[derive(Default)]
struct Biggest(Option<Scenario>);

impl Biggest {
    fn keep(&mut self, scs: &[Scenario]) {
        let conns = |s: &Scenario| s.instances * s.db_pool;
        for sc in scs {
            if self.0.as_ref().is_none_or(|b| conns(sc) > conns(b)) {
                self.0 = Some(sc.clone());
            }
        }
    }
}

/// Lay out and resolve every point of `plan`.
pub fn layout(plan: &Plan) -> Result<Layout, UsageError> {
    let mut biggest = Biggest::default();
    let (first, grid, boundary) = match plan.boundary {
        Some((lo, hi)) => {
            let others: Vec<OtherPoint> = match plan.axes.first() {
                Some(a) => a
                    .points
                    .iter()
                    .map(|p| vec![(a.flag.clone(), p.clone())])
                    .collect(),
                None => vec![Vec::new()],
            };
            let mut first = None;
            for o in &others {
                for rate in [lo, hi] {
                    let r = axes::trim(rate);
                    let mut set: Vec<(&str, &str)> = vec![("rps", r.as_str())];
                    set.extend(o.iter().map(|(f, p)| (f.as_str(), p.text.as_str())));
                    let scs = plan.points.at(&set)?;
                    biggest.keep(&scs);
                    first.get_or_insert(scs);
                }
            }
            (
                first.unwrap_or_default(),
                Vec::new(),
                Some((others, lo, hi)),
            )
        }
        None => {
            let grid = grid(plan, &mut biggest)?;
            let first = grid
                .first()
                .map(|g| g.scenarios.clone())
                .unwrap_or_default();
            (first, grid, None)
        }
    };
    let strategies = first.iter().map(Scenario::label).collect();
    let biggest = biggest
        .0
        .ok_or_else(|| UsageError::new("the sweep has no point to run"))?;
    let first = first.first().cloned().unwrap_or_else(|| biggest.clone());
    Ok(Layout {
        strategies,
        grid,
        boundary,
        biggest,
        first,
    })
}

/// Every point of the grid, the axes' values crossed.
fn grid(plan: &Plan, biggest: &mut Biggest) -> Result<Vec<GridPoint>, UsageError> {
    let mut points: Vec<Vec<(&Axis, &Point)>> = vec![Vec::new()];
    for a in &plan.axes {
        points = points
            .into_iter()
            .flat_map(|prefix| {
                a.points.iter().map(move |p| {
                    let mut v = prefix.clone();
                    v.push((a, p));
                    v
                })
            })
            .collect();
    }
    let mut grid = Vec::new();
    for pt in points {
        let set: Vec<(&str, &str)> = pt
            .iter()
            .map(|(a, p)| (a.flag.as_str(), p.text.as_str()))
            .collect();
        let scenarios = plan.points.at(&set)?;
        biggest.keep(&scenarios);
        grid.push(GridPoint {
            params: pt.iter().map(|(a, p)| (a.name.clone(), p.number)).collect(),
            scenarios,
        });
    }
    Ok(grid)
}
