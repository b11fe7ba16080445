//! Shared helpers for the integration tests: run the real binary (which starts its own Redis
//! and Postgres on free loopback ports), read its JSON, and check that nothing it started
//! outlives it. Everything these helpers capture (stdout, stderr, the files read back) is
//! scanned for a figure printed as NaN or infinity: an unknown figure is written `unknown`
//! with its reason, never as a number it is not.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

mod servers;
#[allow(unused_imports)]
pub use servers::*;

pub const BIN: &str = env!("CARGO_BIN_EXE_stampede");

/// A `stampede` command with output captured and no progress bar.
pub fn stampede() -> Command {
    let mut c = Command::new(BIN);
    c.env_remove("RUST_LOG");
    c
}

/// A finished run: its exit code, its output and its results file.
pub struct Run {
    pub output: Output,
    pub json: Value,
    pub dir: tempfile::TempDir,
    /// How long the command ran, from its start (its turn already taken) to its exit: what
    /// a test that bounds a run's time asserts on, never the wait for the turn.
    pub took: std::time::Duration,
}

impl Run {
    pub fn code(&self) -> i32 {
        self.output.status.code().unwrap_or(-1)
    }
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }
    /// A number at a JSON pointer such as "/db/calls"; panics with the document when absent.
    pub fn u(&self, ptr: &str) -> u64 {
        self.json
            .pointer(ptr)
            .and_then(Value::as_u64)
            .unwrap_or_else(|| panic!("{ptr} missing or not a count in {}", self.json))
    }
    /// The request and outcome counts add up: every scheduled request was completed or shed,
    /// and every completed one has exactly one outcome.
    pub fn assert_counts_add_up(&self) {
        assert_eq!(
            self.u("/requests/completed") + self.u("/requests/shed"),
            self.u("/requests/scheduled")
        );
        let outcomes: u64 = [
            "hit",
            "miss",
            "stale",
            "waited",
            "fallback",
            "error",
            "l1_hit",
            "retry_after",
        ]
        .iter()
        .map(|o| self.u(&format!("/outcomes/{o}")))
        .sum();
        assert_eq!(outcomes, self.u("/requests/completed"));
    }

    pub fn f(&self, ptr: &str) -> f64 {
        self.json
            .pointer(ptr)
            .and_then(Value::as_f64)
            .unwrap_or_else(|| panic!("{ptr} missing or not a number in {}", self.json))
    }
}

/// `stampede run ARGS --out <tmp>/r.json --quiet`; asserts exit 0 and returns the parsed JSON.
pub fn run_ok(args: &[&str]) -> Run {
    let r = run(args);
    assert_eq!(
        r.code(),
        0,
        "stampede run {args:?} failed:\nstdout:\n{}\nstderr:\n{}",
        r.stdout(),
        r.stderr()
    );
    r
}

/// `run_ok` against the binary's shared servers ([`on_shared`]) instead of servers of its
/// own: for the runs whose test is about the strategies' figures, not the managed servers.
/// A test with several runs holds a handle of the pool ([`shared_servers`]) across them.
pub fn run_ok_shared(args: &[&str]) -> Run {
    let (_servers, args) = on_shared(args);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run_ok(&args)
}

/// Held while a CPU-bound run is going: a closed loop on a hot key keeps both cores busy, and
/// two such runs side by side starve each other's database round trips (loads of 50 ms
/// measured at 1-2 s), which changes what the strategies do. Locks on files in the temp dir
/// (flock), so runs take turns across threads, test binaries and whole test suites run side
/// by side on the machine; the kernel releases them when the holder exits, however it ends.
pub struct CpuTurn {
    _file: std::fs::File,
    /// A turn that shares the machine: the share it holds ([`UNITS`] files).
    _units: Vec<std::fs::File>,
    /// A turn alone: the quiet lock, exclusive, once the tests beside it are between turns
    /// no more ([`wait_for_quiet`]).
    quiet: Option<std::fs::File>,
    /// When the turn began and how long it was waited for, for `STAMPEDE_TEST_TURNS`.
    began: std::time::Instant,
    waited: std::time::Duration,
    /// How the turn was taken ([`light_turns`], [`waiting_turns`]).
    weight: Weight,
    /// The machine's CPU time (busy, all) at the start, for `STAMPEDE_TEST_TURNS`.
    cpu: Option<(u64, u64)>,
}

/// How much of the machine a test's turns take.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Weight {
    /// The whole machine (`LOCK_EX`): every test that has not declared otherwise.
    Alone,
    /// Half of what the shared turns may use together ([`light_turns`]).
    Light,
    /// A quarter ([`waiting_turns`]).
    Waiting,
}

/// The shares that turns beside each other hold between them: two light ones, four waiting
/// ones, or one light and two waiting, about one busy core in all by the CI runs' turn log,
/// the most a heavy run alone uses beside the database.
const UNITS: usize = 4;

impl Weight {
    fn units(self) -> usize {
        match self {
            Weight::Alone => 0,
            Weight::Light => 2,
            Weight::Waiting => 1,
        }
    }
    fn name(self) -> &'static str {
        match self {
            Weight::Alone => "alone",
            Weight::Light => "shared",
            Weight::Waiting => "waiting",
        }
    }
}

/// The machine's busy and total CPU time so far (jiffies, all cores), from /proc/stat.
fn machine_cpu() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().next()?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|f| f.parse().ok())
        .collect();
    let total: u64 = v.iter().sum();
    // idle and iowait are the 4th and 5th fields.
    let idle = v.get(3)? + v.get(4).copied().unwrap_or(0);
    Some((total - idle, total))
}

/// With `STAMPEDE_TEST_TURNS=FILE`, each turn appends "test<TAB>waited s<TAB>held s<TAB>busy
/// cores<TAB>alone|shared|waiting<TAB>began (Unix s)" to FILE (busy cores: the whole
/// machine's CPU time during the turn over its length): where the suite's time goes, since
/// the heavy work of every test takes turns, how heavy each turn's work was, and (from the
/// start times) when no turn was held at all.
impl Drop for CpuTurn {
    fn drop(&mut self) {
        // Its own exclusive quiet lock goes first: the shared one below is another open file.
        self.quiet = None;
        IN_TURN.with(|t| t.set(false));
        between_turns();
        let Some(path) = std::env::var_os("STAMPEDE_TEST_TURNS") else {
            return;
        };
        let busy = match (self.cpu, machine_cpu()) {
            (Some((b0, t0)), Some((b1, t1))) if t1 > t0 => {
                let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
                format!("{:.2}", (b1 - b0) as f64 / (t1 - t0) as f64 * cores as f64)
            }
            _ => "?".to_string(),
        };
        let held = self.began.elapsed();
        let began = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .saturating_sub(held);
        let line = format!(
            "{}\t{:.2}\t{:.2}\t{busy}\t{}\t{:.2}\n",
            TEST.with(|t| t.borrow().clone())
                .as_deref()
                .or(std::thread::current().name())
                .unwrap_or("?"),
            self.waited.as_secs_f64(),
            held.as_secs_f64(),
            self.weight.name(),
            began.as_secs_f64(),
        );
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = std::io::Write::write_all(&mut f, line.as_bytes());
        }
    }
}

thread_local! {
    /// Set by [`light_turns`] or [`waiting_turns`] for the rest of the test (libtest runs
    /// each test on a thread of its own; a thread the test spawns declares it again).
    static WEIGHT: std::cell::Cell<Weight> = const { std::cell::Cell::new(Weight::Alone) };
}

/// Declares that this test's runs are light: its turns kept the whole machine under 0.7 busy
/// cores on average in a CI run (`STAMPEDE_TEST_TURNS`'s 4th column), and what it asserts
/// holds beside another run (counts and bounds, no timing that a neighbour moves). They take
/// half of the machine's shared turns ([`UNITS`]) and exclude every heavy one, so two light
/// runs side by side stay under the one core that a heavy run alone may use, and leave the
/// database its round trips. Nothing that measures the CPU (the generator's cost, a rate's
/// schedule) is light. Only the calling thread's turns are concerned.
pub fn light_turns() {
    WEIGHT.with(|l| l.set(Weight::Light));
}

/// Declares that this test's runs mostly wait (a fault's window, a partition, a recovery, a
/// sweep of slow cells): its turns kept the machine under 0.35 busy cores in a CI run, and
/// take a quarter of the shared turns, so up to four of them run side by side.
pub fn waiting_turns() {
    WEIGHT.with(|l| l.set(Weight::Waiting));
}

/// What a test declared of its turns ([`light_turns`], [`waiting_turns`], the shared
/// servers) and its name, for a thread it spawns to run `stampede` while it drives servers
/// of its own ([`spawn_blocking`]): thread locals do not cross to another thread.
#[derive(Clone)]
struct Declared {
    weight: Weight,
    test: Option<String>,
}

impl Declared {
    fn here() -> Declared {
        Declared {
            weight: WEIGHT.with(std::cell::Cell::get),
            test: TEST
                .with(|t| t.borrow().clone())
                .or_else(|| std::thread::current().name().map(str::to_string)),
        }
    }
    fn set(self) {
        WEIGHT.with(|w| w.set(self.weight));
        TEST.with(|t| *t.borrow_mut() = self.test);
    }
}

thread_local! {
    /// On a thread a test spawned ([`spawn_blocking`]), the test's name, for the turn log.
    static TEST: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// `tokio::task::spawn_blocking(f)`, its turns weighed as the calling test declared its own
/// and logged under the test's name: the pool's threads are reused, so the declaration
/// lasts for `f` only.
pub fn spawn_blocking<F, R>(f: F) -> tokio::task::JoinHandle<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    /// Back to a pool thread's defaults when `f` ends, panics included.
    struct Undeclare;
    impl Drop for Undeclare {
        fn drop(&mut self) {
            Declared {
                weight: Weight::Alone,
                test: None,
            }
            .set();
        }
    }
    let declared = Declared::here();
    tokio::task::spawn_blocking(move || {
        let _undeclare = Undeclare;
        declared.set();
        f()
    })
}

/// The lock file `name` in the temp dir, opened (created when missing).
fn open_lock(name: &str) -> std::fs::File {
    let path = std::env::temp_dir().join(name);
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .unwrap_or_else(|e| panic!("opening {}: {e}", path.display()))
}

/// `flock(mode)` on `file`: Ok(true) when taken, Ok(false) when `LOCK_NB` found it held;
/// retried through EINTR.
fn flock(file: &std::fs::File, mode: libc::c_int) -> bool {
    use std::os::fd::AsRawFd;
    loop {
        // SAFETY: flock on a descriptor the caller owns and keeps.
        let rc = unsafe { libc::flock(file.as_raw_fd(), mode) };
        if rc == 0 {
            return true;
        }
        let e = std::io::Error::last_os_error();
        match e.kind() {
            std::io::ErrorKind::Interrupted => continue,
            std::io::ErrorKind::WouldBlock if mode & libc::LOCK_NB != 0 => return false,
            _ => panic!("flock: {e}"),
        }
    }
}

/// `flock(mode)` on the lock file `name` in the temp dir, waited for; the lock lasts as long
/// as the file.
fn lock_file(name: &str, mode: libc::c_int) -> std::fs::File {
    let file = open_lock(name);
    flock(&file, mode);
    file
}

/// `n` of the [`UNITS`] share files, locked. Taken whole or not at all (a turn never waits
/// while it holds a share, so no cycle), polled while the shares are held by others: the
/// kernel has no counting lock on files.
fn take_units(n: usize) -> Vec<std::fs::File> {
    let files: Vec<std::fs::File> = (0..UNITS)
        .map(|i| open_lock(&format!("stampede-tests-share-{i}.lock")))
        .collect();
    loop {
        let mut held = Vec::with_capacity(n);
        for (i, f) in files.iter().enumerate() {
            if held.len() == n {
                break;
            }
            if flock(f, libc::LOCK_EX | libc::LOCK_NB) {
                held.push(i);
            }
        }
        if held.len() == n {
            let mut files: Vec<Option<std::fs::File>> = files.into_iter().map(Some).collect();
            return held.iter().filter_map(|&i| files[i].take()).collect();
        }
        for &i in &held {
            flock(&files[i], libc::LOCK_UN);
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
}

/// The lock of the work tests do between their turns (reading results, asserting, starting
/// servers), shared by the tests doing it and taken exclusively by a turn alone before it
/// starts: with more test threads than cores, a heavy run otherwise shared the cores with
/// the set-ups of the tests beside it (a global rate limit's run stalled 100 ms and let 42
/// DB calls into a 100 ms bucket against 41).
const QUIET: &str = "stampede-tests-quiet.lock";

/// How long a turn alone waits for the tests beside it to finish their work between turns,
/// at most: a test that waits between its turns for a thread of its own to take one (runs
/// spawned side by side) holds the lock meanwhile, and the turn then goes ahead anyway.
const QUIET_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

thread_local! {
    /// The quiet lock, shared, that a test's own thread holds from the end of a turn until it
    /// asks for the next one or ends (libtest runs each test on a thread of its own, and a
    /// thread's locals are dropped when it ends).
    static BETWEEN: std::cell::RefCell<Option<std::fs::File>> =
        const { std::cell::RefCell::new(None) };
    /// This thread holds a turn: its set-up is part of it.
    static IN_TURN: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// A test's own thread (libtest names it after the test), not one it spawned: a runtime's
/// worker outlives the test's use of it and would hold the lock for nothing.
fn on_a_tests_thread() -> bool {
    std::thread::current()
        .name()
        .is_some_and(|n| n.contains("::"))
}

/// On a test's own thread, the quiet lock shared until its next turn. Never waited for: no
/// turn alone holds it while this thread has just ended a turn (the machine's lock was this
/// turn's until now).
fn between_turns() {
    if !on_a_tests_thread() {
        return;
    }
    let file = open_lock(QUIET);
    if flock(&file, libc::LOCK_SH | libc::LOCK_NB) {
        BETWEEN.with(|b| *b.borrow_mut() = Some(file));
    }
}

/// Set-up outside any turn (servers started for a test): held, the quiet lock shared, so it
/// waits for a turn alone to end and a turn alone waits for it. On a thread a test spawned,
/// or one already between turns, nothing to take.
pub(crate) fn quiet_work() -> Option<std::fs::File> {
    if !on_a_tests_thread()
        || IN_TURN.with(std::cell::Cell::get)
        || BETWEEN.with(|b| b.borrow().is_some())
    {
        return None;
    }
    let deadline = std::time::Instant::now() + QUIET_WAIT;
    let file = open_lock(QUIET);
    while !flock(&file, libc::LOCK_SH | libc::LOCK_NB) {
        if std::time::Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    Some(file)
}

/// For a turn alone, once it has the machine: the quiet lock exclusively, when the tests
/// beside it have left their work between turns within [`QUIET_WAIT`], else none.
fn wait_for_quiet() -> Option<std::fs::File> {
    let deadline = std::time::Instant::now() + QUIET_WAIT;
    let file = open_lock(QUIET);
    loop {
        if flock(&file, libc::LOCK_EX | libc::LOCK_NB) {
            return Some(file);
        }
        if std::time::Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Wait for this test's turn at the CPU-heavy work; the turn lasts as long as the guard.
/// A light or waiting test's turn ([`light_turns`], [`waiting_turns`]) takes its share of
/// the machine's shared turns, then the machine shared (`LOCK_SH`); any other turn is the
/// machine's alone (`LOCK_EX`). A shared turn on the shared servers has claimed a pair of
/// them before ([`on_shared`]), so it shares the machine with runs on other servers but
/// never its servers with another run (a heavy turn has them all, having everything).
/// Locks are taken in that order (servers, share, machine) by every turn.
pub fn cpu_turn() -> CpuTurn {
    // Waiting for a turn is not work beside one.
    BETWEEN.with(|b| b.borrow_mut().take());
    let weight = WEIGHT.with(std::cell::Cell::get);
    let shared = weight != Weight::Alone;
    let asked = std::time::Instant::now();
    let units = take_units(weight.units());
    let mode = if shared { libc::LOCK_SH } else { libc::LOCK_EX };
    let file = lock_file("stampede-tests-cpu-heavy.lock", mode);
    // A turn on a thread the test spawned does not wait: the test's own thread, between
    // turns, holds the quiet lock while it waits for this run.
    let quiet = (!shared && on_a_tests_thread())
        .then(wait_for_quiet)
        .flatten();
    IN_TURN.with(|t| t.set(true));
    CpuTurn {
        _file: file,
        _units: units,
        quiet,
        began: std::time::Instant::now(),
        waited: asked.elapsed(),
        weight,
        cpu: std::env::var_os("STAMPEDE_TEST_TURNS").and_then(|_| machine_cpu()),
    }
}

/// Fails the test when `text` holds a figure printed as NaN or infinity: the number-like
/// tokens `NaN`, `inf`, `-inf`, `inf%`, `infinity` (any case), never the words that contain
/// them (`info`, `max_inflight`, `infinite`, `isNaN`) nor a run of base64 (a histogram) or a
/// path that happens to hold the letters.
pub fn assert_no_nan_or_inf(what: &str, text: &str) {
    static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let re = RE.get_or_init(|| {
        regex::Regex::new(r"(?i)(?:^|[^a-z0-9_.+/])(-?(?:nan|inf(?:inity)?)%?)(?:[^a-z0-9_+/]|$)")
            .expect("the NaN/inf pattern")
    });
    if let Some(m) = re.captures(text).and_then(|c| c.get(1)) {
        let from = text[..m.start()]
            .char_indices()
            .rev()
            .nth(80)
            .map_or(0, |(i, _)| i);
        let to = text[m.end()..]
            .char_indices()
            .nth(80)
            .map_or(text.len(), |(i, _)| m.end() + i);
        panic!(
            "{what} prints the figure {:?} (an unknown figure must read `unknown` with its reason): …{}…",
            m.as_str(),
            &text[from..to]
        );
    }
}

/// [`assert_no_nan_or_inf`] on a finished command's stdout and stderr.
pub fn assert_output_has_no_nan_or_inf(what: &str, o: &Output) {
    assert_no_nan_or_inf(
        &format!("{what} (stdout)"),
        &String::from_utf8_lossy(&o.stdout),
    );
    assert_no_nan_or_inf(
        &format!("{what} (stderr)"),
        &String::from_utf8_lossy(&o.stderr),
    );
}

/// `stampede run ARGS --out <tmp>/r.json --quiet`, whatever the exit code.
pub fn run(args: &[&str]) -> Run {
    let _turn = cpu_turn();
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("r.json");
    let began = std::time::Instant::now();
    let output = stampede()
        .arg("run")
        .args(args)
        .arg("--out")
        .arg(&out)
        .arg("--quiet")
        .output()
        .expect("running stampede");
    let took = began.elapsed();
    assert_output_has_no_nan_or_inf(&format!("stampede run {args:?}"), &output);
    let json = read_json(&out).unwrap_or(Value::Null);
    Run {
        output,
        json,
        dir,
        took,
    }
}

/// A JSON file; a run's results are checked on the way: their DB calls by cause add up to
/// the DB calls (every test that reads results checks it).
pub fn read_json(p: &Path) -> Option<Value> {
    let text = std::fs::read_to_string(p).ok()?;
    assert_no_nan_or_inf(&p.display().to_string(), &text);
    let v: Value = serde_json::from_str(&text).ok()?;
    assert_causes_add_up(&v, p);
    Some(v)
}

/// `db.by_cause` (when known) adds up exactly to `db.calls`, and holds the causes only.
pub fn assert_causes_add_up(v: &Value, from: &Path) {
    let (Some(calls), Some(by)) = (
        v.pointer("/db/calls").and_then(Value::as_u64),
        v.pointer("/db/by_cause").and_then(Value::as_object),
    ) else {
        return;
    };
    let names = [
        "expiry",
        "first",
        "eviction",
        "invalidation",
        "herd",
        "refresh",
        "after_fault",
        "other",
    ];
    assert!(
        by.keys().all(|k| names.contains(&k.as_str())),
        "{}: db.by_cause holds only causes: {by:?}",
        from.display()
    );
    let sum: u64 = by.values().filter_map(Value::as_u64).sum();
    assert_eq!(
        sum,
        calls,
        "{}: db.by_cause {by:?} adds up to db.calls",
        from.display()
    );
}

/// True while a process with this PID exists (and is not a zombie we could still reap).
pub fn alive(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"));
    match stat {
        Ok(s) => s.split_whitespace().nth(2).is_none_or(|st| st != "Z"),
        Err(_) => false,
    }
}

/// Asserts that the servers a run started are gone.
pub fn assert_servers_gone(json: &Value) {
    for key in ["redis_pid", "postgres_pid"] {
        if let Some(pid) = json
            .pointer(&format!("/servers/{key}"))
            .and_then(Value::as_u64)
        {
            assert!(!alive(pid as u32), "{key} {pid} still alive after the run");
        }
    }
    // A fault's restart starts a new redis-server: every one of them must be gone too.
    for pid in json
        .pointer("/servers/redis_pids")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_u64)
    {
        assert!(
            !alive(pid as u32),
            "redis-server {pid} still alive after the run"
        );
    }
}

/// Temp dirs the managed servers use, as a set of paths, to compare before and after a run.
pub fn stampede_temp_dirs() -> Vec<PathBuf> {
    stampede_temp_dirs_in(&std::env::temp_dir())
}

/// The managed servers' temp dirs in `tmp` (a run given its own TMPDIR keeps them there).
pub fn stampede_temp_dirs_in(tmp: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(tmp)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("stampede-"))
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// The example app (examples/app), built once per test binary (cargo does not build examples
/// for `--test`): the `--app-cmd` that starts it.
pub fn example_app() -> &'static str {
    static APP: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    APP.get_or_init(|| build_example("app"))
}

/// The audit's test app (examples/audit_app, one switch per bug), built once per test binary.
pub fn audit_app() -> &'static str {
    static APP: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    APP.get_or_init(|| build_example("audit_app"))
}

/// `cargo build --profile P --example NAME`, P the profile the suite was built with (the
/// folder of `target/` the binary is in: `scripts/test` builds with `suite`, a plain
/// `cargo test --release` with `release`); the path of the binary.
fn build_example(name: &str) -> String {
    let dir = PathBuf::from(BIN)
        .parent()
        .expect("binary dir")
        .to_path_buf();
    let profile = match dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") => "dev".to_string(),
        Some(p) => p.to_string(),
        None => panic!("no profile folder in {BIN}"),
    };
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut build = Command::new(cargo);
    // Cargo gives a test the package's CARGO_PKG_*, CARGO_MANIFEST_* and the like; build
    // scripts (ring's) rerun when those change, so passing them on would rebuild half the
    // dependencies here, and again in the next `cargo test`.
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        if (k.starts_with("CARGO_") && k != "CARGO_HOME" && k != "CARGO_TARGET_DIR")
            || k == "OUT_DIR"
        {
            build.env_remove(k.as_ref());
        }
    }
    let status = build
        .args(["build", "--profile", &profile, "--example", name])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .unwrap_or_else(|e| panic!("running cargo build --example {name}: {e}"));
    assert!(status.success(), "building the example {name} failed");
    let bin = dir.join("examples").join(name);
    assert!(bin.exists(), "{} missing", bin.display());
    bin.display().to_string()
}

/// (ppid, start time) of a process, from /proc/PID/stat (fields counted from the last ')').
fn parent_and_start(pid: u32) -> Option<(u32, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some((f.get(1)?.parse().ok()?, f.get(19)?.parse().ok()?))
}

/// A server of the test's own stopped (SIGSTOP to it and to its children: a postmaster and
/// its backends, which run in sessions of their own, as a stalled host would leave them) until
/// the guard is dropped (SIGCONT to the same processes, each checked by its start time, so a
/// reused pid is never signalled), so a test that fails meanwhile leaves nothing stopped.
/// `pid` must be a server the test started.
pub struct Stopped(Vec<(u32, u64)>);

impl Stopped {
    pub fn tree(pid: u32) -> Stopped {
        let mut procs: Vec<(u32, u64)> = parent_and_start(pid)
            .map(|(_, start)| (pid, start))
            .into_iter()
            .collect();
        assert!(!procs.is_empty(), "server {pid} is not running");
        // The server first, so it starts no new child while its children are being stopped.
        signal(pid, libc::SIGSTOP);
        for e in std::fs::read_dir("/proc").expect("/proc").flatten() {
            let Some(child) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            if let Some((ppid, start)) = parent_and_start(child)
                && ppid == pid
            {
                signal(child, libc::SIGSTOP);
                procs.push((child, start));
            }
        }
        Stopped(procs)
    }
}

fn signal(pid: u32, sig: libc::c_int) {
    let pid = i32::try_from(pid).expect("a pid");
    // SAFETY: kill(2) on a process of a server this test started.
    unsafe { libc::kill(pid, sig) };
}

impl Drop for Stopped {
    fn drop(&mut self) {
        for &(pid, start) in &self.0 {
            if parent_and_start(pid).is_some_and(|(_, s)| s == start) {
                signal(pid, libc::SIGCONT);
            }
        }
    }
}

/// `stampede cleanup ARGS`: its exit code and stdout.
pub fn cleanup(args: &[&str]) -> (i32, String) {
    let o = stampede()
        .arg("cleanup")
        .args(args)
        .output()
        .expect("running stampede cleanup");
    assert_output_has_no_nan_or_inf("stampede cleanup", &o);
    (
        o.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
    )
}
