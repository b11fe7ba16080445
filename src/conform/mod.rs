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

use crate::error::UsageError;
use crate::origin::DbQuery;
use crate::scenario::{self, Scenario};
use crate::strategy::reference::{AtOnce, RefApp, Reference};
use crate::strategy::{LIBRARIES, LibraryDecl};
use crate::values::Dur;
use crate::workload::{LoadShape, Start};

/// The URL every reference app serves its items on.
pub const APP_URL: &str = "http://127.0.0.1:{port}/items/{key}";
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
pub fn library(name: &str) -> Result<(&'static LibraryDecl, &'static RefApp), UsageError> {
    let name = name.trim();
    let runnable = || {
        LIBRARIES
            .iter()
            .filter(|d| matches!(d.reference, Reference::App(_)))
            .map(|d| d.for_name)
            .collect::<Vec<_>>()
            .join(", ")
    };
    // A library's name picks the row of the version installed here (Symfony 5.4 for
    // `symfony`), else its first, which says why it cannot run.
    let named = |d: &&LibraryDecl| d.for_name == name || d.preset == name;
    let decl = LIBRARIES
        .iter()
        .filter(named)
        .find(|d| matches!(d.reference, Reference::App(_)))
        .or_else(|| LIBRARIES.iter().find(named))
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

/// The reference app's `run.sh` under `apps` (else examples/libraries), checked.
pub fn run_sh(apps: Option<&Path>, app: &RefApp) -> Result<PathBuf, UsageError> {
    let dir = apps.map_or_else(|| PathBuf::from(APPS_DIR), Path::to_path_buf);
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

/// The `--app-cmd` that starts the reference app at `run_sh`.
pub fn app_cmd(run_sh: &Path) -> String {
    format!("exec {}", shell_quoted(run_sh))
}

/// The preset's side from its resolved scenario (the library's preset, the command's flags):
/// loads through the ledger, a cold start, and the admission of the library's server
/// ([`admit_as_the_app`]; `max_inflight_given` when the command set `--max-inflight`). The
/// admission said, if any, is returned beside it.
pub fn preset_side(
    app: &RefApp,
    mut preset: Scenario,
    max_inflight_given: bool,
) -> Result<(Scenario, Option<String>), UsageError> {
    scenario::invocation::refuse_boundary(&preset)?;
    if preset.db_query != DbQuery::Sleep || preset.own_load.is_some() {
        return Err(UsageError::new(
            "the reference apps load through the run's stampede_load(id), which spends --db-cost: drop --db-query heavy and --db-sql with conform",
        ));
    }
    let admission = admit_as_the_app(app, &mut preset, max_inflight_given);
    preset.start = Start::Cold;
    preset.warm = 0;
    preset.warmup = Dur(Duration::ZERO);
    // The preset's herds from the ledger too, as the library's are.
    preset.load_via_ledger = true;
    Ok((preset, admission))
}

/// The library's side before its app is attached: the preset's workload, with the library's
/// own settings (the preset's go into the app's environment) and its loads counted by the
/// server, not the built-in app's ledger.
pub fn library_base(preset: &Scenario) -> Scenario {
    let mut library = preset.clone();
    library.load_via_ledger = false;
    library.eager_refresh = None;
    library.fail_safe = None;
    library
}

/// Both sides, the library's with its app attached (`scenario::target::with_target` on
/// [`library_base`], started by [`app_cmd`] at [`APP_URL`]).
pub fn sides(
    decl: &'static LibraryDecl,
    app: &'static RefApp,
    preset: Scenario,
    mut library: Scenario,
    admission: Option<String>,
) -> Sides {
    if let Some(t) = library.target.as_mut() {
        t.variant = Some(format!("{}-library", decl.for_name));
        t.app_env = (app.env)(&ref_settings(&preset));
    }
    let mut caveats = (app.caveats)(&ref_settings(&preset));
    caveats.extend(admission);
    Sides {
        decl,
        app,
        preset,
        library,
        caveats,
    }
}

/// The backlog both sides get when conform gives them the app's admission: more than a
/// second's requests of any rate these apps serve, so none is shed.
pub const ADMIT_BACKLOG: u32 = 4096;
/// `--max-inflight`'s default: the generator's cap, not a server's.
pub const MAX_INFLIGHT_DEFAULT: u32 = 2048;

/// Where the app's server serves DB_POOL requests at once per instance (puma's threads,
/// php-fpm's workers) and queues the rest, an open loop gives the built-in side (and the
/// generator in front of the app) the same admission: `--max-inflight` DB_POOL with a
/// backlog, unless the command sets its own. Without it the built-in side would let every
/// reader of a cold miss load at once where the library's server lets DB_POOL through. A
/// closed loop with more clients per instance than DB_POOL is said, not changed.
fn admit_as_the_app(app: &RefApp, sc: &mut Scenario, max_inflight_given: bool) -> Option<String> {
    let AtOnce::DbPool(server) = app.at_once else {
        return None;
    };
    let pool = sc.db_pool;
    match sc.load {
        LoadShape::Open { .. } => {
            if max_inflight_given || sc.max_inflight != MAX_INFLIGHT_DEFAULT {
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
