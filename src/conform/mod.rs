//! `stampede conform`: a library preset run beside the real library it models. The preset
//! goes through the built-in app with its loads through the load ledger, the library through
//! its reference app (`examples/libraries/<dir>`, an app under test started with `--app-cmd`,
//! one process per instance); both on the same servers, seed and window, from a cold start,
//! trial after trial. [`figures`] turns their results into both values per figure, a ratio,
//! an interval and a verdict; [`render`] writes them for people.

pub mod figures;
pub mod render;

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::cli::{ConformCmd, TargetFlags};
use crate::error::UsageError;
use crate::origin::DbQuery;
use crate::scenario::{self, Scenario};
use crate::strategy::reference::{AtOnce, RefApp, Reference};
use crate::strategy::{LIBRARIES, LibraryDecl};
use crate::values::Dur;
use crate::workload::{LoadShape, Start};

/// The URL every reference app serves its items on.
const APP_URL: &str = "http://127.0.0.1:{port}/items/{key}";
/// Where the reference apps are, under the current directory, by default.
const APPS_DIR: &str = "examples/libraries";

/// The two sides of a conformance run, each a scenario `run_on` takes.
pub struct Sides {
    pub decl: &'static LibraryDecl,
    pub app: &'static RefApp,
    /// The preset through the built-in app, loading through the ledger.
    pub preset: Scenario,
    /// The library's reference app.
    pub library: Scenario,
    /// Where the app cannot take a setting as the preset has it.
    pub caveats: Vec<String>,
}

impl Sides {
    /// The side of index `i` (0: the preset, 1: the library).
    pub fn side(&self, i: usize) -> &Scenario {
        if i == 0 { &self.preset } else { &self.library }
    }
}

/// The library named by `--library`: its `advise --for` name or its preset's.
fn library(name: &str) -> Result<(&'static LibraryDecl, &'static RefApp), UsageError> {
    let name = name.trim();
    let runnable = || {
        LIBRARIES
            .iter()
            .filter(|d| matches!(d.reference, Reference::App(_)))
            .map(|d| d.for_name)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let decl = LIBRARIES
        .iter()
        .find(|d| d.for_name == name || d.preset == name)
        .ok_or_else(|| {
            UsageError::new(format!(
                "--library {name}: no library preset of that name; the libraries with a reference app here: {}",
                runnable()
            ))
        })?;
    match &decl.reference {
        Reference::App(a) => Ok((decl, a)),
        Reference::Missing(why) => Err(UsageError::new(format!(
            "--library {name}: {} cannot be run here, so its preset {} cannot be measured beside it: {why}. The libraries with a reference app here: {}",
            decl.title,
            decl.preset,
            runnable()
        ))),
    }
}

/// The start both sides share: cold, without a warm-up (a target's cache cannot be warmed
/// by the tool, and a warm-up would fill the two caches differently).
fn refuse_warm(cmd: &ConformCmd) -> Result<(), UsageError> {
    let f = &cmd.flags;
    if f.cache.strategy.is_some() {
        return Err(UsageError::new(
            "--strategy: conform runs the library's own preset on the built-in side; drop --strategy (use compare for other strategies)",
        ));
    }
    if f.data.start.is_some_and(|s| s != Start::Cold) || f.data.warm.is_some_and(|w| w > 0) {
        return Err(UsageError::new(
            "--start and --warm fill the built-in app's cache, and the library's cache cannot be filled by stampede: conform starts both sides cold",
        ));
    }
    if f.load.warmup.is_some_and(|w| !w.0.is_zero()) {
        return Err(UsageError::new(
            "--warmup: conform measures both sides from the same cold start; drop --warmup",
        ));
    }
    if cmd.trials() == 0 {
        return Err(UsageError::new("--trials must be 1 or more"));
    }
    Ok(())
}

/// The reference app's `run.sh`, checked.
fn run_sh(cmd: &ConformCmd, app: &RefApp) -> Result<PathBuf, UsageError> {
    let dir = cmd.apps.clone().unwrap_or_else(|| PathBuf::from(APPS_DIR));
    let sh = dir.join(app.dir).join("run.sh");
    if !sh.is_file() {
        return Err(UsageError::new(format!(
            "no reference app at {}: run conform from the repository's root (where {APPS_DIR} is), or give --apps DIR",
            sh.display()
        )));
    }
    // Absolute: the app's shell may change directory before it starts.
    Ok(std::fs::canonicalize(&sh).unwrap_or(sh))
}

/// `path` quoted for `sh -c`.
fn shell_quoted(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', r"'\''"))
}

/// Both sides of `cmd`, checked before any server starts.
pub fn sides(cmd: &ConformCmd) -> Result<Sides, UsageError> {
    let (decl, app) = library(&cmd.library)?;
    refuse_warm(cmd)?;
    let sh = run_sh(cmd, app)?;
    let mut flags = cmd.flags.clone();
    flags.cache.strategy = Some(decl.preset.to_string());
    let mut preset = scenario::resolve(cmd.scenario.as_ref(), flags.clone())?;
    scenario::invocation::refuse_boundary(&preset)?;
    if preset.db_query != DbQuery::Sleep || preset.own_load.is_some() {
        return Err(UsageError::new(
            "the reference apps load through the run's stampede_load(id), which spends --db-cost: drop --db-query heavy and --db-sql with conform",
        ));
    }
    let admission = admit_as_the_app(cmd, app, &mut preset);
    preset.start = Start::Cold;
    preset.warm = 0;
    preset.warmup = Dur(Duration::ZERO);
    // The preset's herds from the ledger too, as the library's are.
    preset.load_via_ledger = true;
    let mut library = preset.clone();
    library.load_via_ledger = false;
    // The library's own settings: the preset's defaults go into the app's environment.
    library.eager_refresh = None;
    library.fail_safe = None;
    let target = TargetFlags {
        target: Some(APP_URL.to_string()),
        app_cmd: Some(format!("exec {}", shell_quoted(&sh))),
        app_ready_timeout: Some(
            cmd.app_ready_timeout
                .unwrap_or(Dur(Duration::from_secs(60))),
        ),
        ..TargetFlags::default()
    };
    let mut library = scenario::target::with_target(library, &flags, &target)
        .map_err(|e| UsageError::new(format!("the library's side: {e}")))?;
    if let Some(t) = library.target.as_mut() {
        t.variant = Some(format!("{}-library", decl.for_name));
        t.app_env = (app.env)(&ref_settings(&preset));
    }
    let mut caveats = (app.caveats)(&ref_settings(&preset));
    caveats.extend(admission);
    Ok(Sides {
        decl,
        app,
        preset,
        library,
        caveats,
    })
}

/// The backlog both sides get when conform gives them the app's admission: more than a
/// second's requests of any rate these apps serve, so none is shed.
const ADMIT_BACKLOG: u32 = 4096;
/// `--max-inflight`'s default: the generator's cap, not a server's.
const MAX_INFLIGHT_DEFAULT: u32 = 2048;

/// Where the app's server serves DB_POOL requests at once per instance (puma's threads,
/// php-fpm's workers) and queues the rest, an open loop gives the built-in side (and the
/// generator in front of the app) the same admission: `--max-inflight` DB_POOL with a
/// backlog, unless the command sets its own. Without it the built-in side would let every
/// reader of a cold miss load at once where the library's server lets DB_POOL through. A
/// closed loop with more clients per instance than DB_POOL is said, not changed.
fn admit_as_the_app(cmd: &ConformCmd, app: &RefApp, sc: &mut Scenario) -> Option<String> {
    let AtOnce::DbPool(server) = app.at_once else {
        return None;
    };
    let pool = sc.db_pool;
    match sc.load {
        LoadShape::Open { .. } => {
            if cmd.flags.load.max_inflight.is_some() || sc.max_inflight != MAX_INFLIGHT_DEFAULT {
                return Some(format!(
                    "{server} serve DB_POOL ({pool}) requests at once per instance and queue the rest; this run's --max-inflight {} is the command's",
                    sc.max_inflight
                ));
            }
            sc.max_inflight = pool;
            sc.backlog = sc.backlog.max(ADMIT_BACKLOG);
            Some(format!(
                "{server} serve DB_POOL ({pool}) requests at once per instance and queue the rest: both sides admit {pool} per instance and queue up to {} (--max-inflight {pool} --backlog {})",
                sc.backlog, sc.backlog
            ))
        }
        LoadShape::Closed { clients } => {
            let per = clients.div_ceil(sc.instances.max(1));
            (per > pool).then(|| format!(
                "{server} serve DB_POOL ({pool}) requests at once per instance and queue the rest, while the built-in side serves each of its {per} clients per instance at once: its cold miss can load {per} times per instance where the library's loads at most {pool}; with --rps both sides admit {pool} per instance"
            ))
        }
    }
}

/// The preset's settings a reference app's environment is written from.
pub(crate) fn ref_settings(sc: &Scenario) -> crate::strategy::reference::Settings {
    crate::strategy::reference::Settings {
        ttl: sc.ttl,
        stale: sc.stale,
        beta: sc.beta,
        eager_refresh: sc.eager_refresh,
    }
}

/// The order of the trials: (trial, side), the sides alternating from one trial to the next.
pub fn trial_order(trials: usize) -> Vec<(usize, usize)> {
    crate::stats::interleaved_order(2, trials)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};

    /// Both sides of `stampede conform --library LIB ARGS` (run from the repository's root,
    /// where the reference apps are).
    fn sides_of(args: &[&str]) -> Sides {
        use clap::Parser;
        let all = ["stampede", "conform"].iter().chain(args);
        match Cli::try_parse_from(all).unwrap().command {
            Command::Conform(c) => sides(&c).unwrap(),
            _ => unreachable!("parsed as conform"),
        }
    }

    #[test]
    fn an_open_loop_admits_what_pumas_threads_admit_on_both_sides() {
        let s = sides_of(&["--library", "rails", "--rps", "1000", "--db-pool", "12"]);
        for sc in [&s.preset, &s.library] {
            assert_eq!((sc.max_inflight, sc.backlog), (12, ADMIT_BACKLOG));
        }
        assert!(
            s.caveats
                .iter()
                .any(|c| c.contains("puma's threads serve DB_POOL (12)")),
            "{:?}",
            s.caveats
        );
        // The command's own --max-inflight stands, and is said.
        let s = sides_of(&["--library", "rails", "--rps", "1000", "--max-inflight", "5"]);
        assert_eq!(s.preset.max_inflight, 5);
        assert_eq!(s.library.max_inflight, 5);
    }

    #[test]
    fn an_app_that_serves_every_request_keeps_the_generators_cap() {
        let s = sides_of(&["--library", "dogpile", "--rps", "1000"]);
        assert_eq!(s.preset.max_inflight, MAX_INFLIGHT_DEFAULT);
        assert!(!s.caveats.iter().any(|c| c.contains("at once per instance")));
    }

    #[test]
    fn a_closed_loop_with_more_clients_than_threads_is_said_not_changed() {
        let s = sides_of(&[
            "--library",
            "symfony",
            "--clients",
            "60",
            "--instances",
            "2",
        ]);
        assert_eq!(s.preset.max_inflight, MAX_INFLIGHT_DEFAULT);
        assert!(
            s.caveats
                .iter()
                .any(|c| c.contains("each of its 30 clients per instance at once")),
            "{:?}",
            s.caveats
        );
        let s = sides_of(&["--library", "symfony", "--clients", "8"]);
        assert!(!s.caveats.iter().any(|c| c.contains("clients per instance")));
    }
}
