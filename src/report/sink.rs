//! Where results go: the one interface every output of a run, a comparison or a sweep passes
//! through — the terminal, the results files (JSON), the Markdown summary and the HTML report
//! — and the only code that writes a result file. The live Prometheus metrics are fed while a
//! run goes (`session::Progress`), not from its result.
//!
//! A [`Sink`] hears each result as soon as its run ends (so a later failure or a Ctrl-C loses
//! nothing that ran), a comparison's summary after each trial, and the end once. [`Sinks`] is
//! the set a command builds from its flags.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::{markdown, tables, terminal};
use crate::results::summary::CompareSummary;
use crate::results::{self, RunResult};

/// One output of results.
pub trait Sink {
    /// A run has ended: `trial` (from 0) of `repeat` trials of its strategy.
    fn result(&mut self, r: &RunResult, trial: u32, repeat: u32) -> Result<()>;

    /// A comparison's summary so far, after each of its trials.
    fn summary(&mut self, _s: &CompareSummary) -> Result<()> {
        Ok(())
    }

    /// The end: `shown` are the results that stand for the strategies (one each), `summary`
    /// the comparison's when there is one.
    fn finish(&mut self, _shown: &[RunResult], _summary: Option<&CompareSummary>) -> Result<()> {
        Ok(())
    }
}

/// The sinks a command asked for, heard in order.
#[derive(Default)]
pub struct Sinks(Vec<Box<dyn Sink + Send>>);

impl Sinks {
    pub fn with(mut self, sink: impl Sink + Send + 'static) -> Sinks {
        self.0.push(Box::new(sink));
        self
    }

    pub fn result(&mut self, r: &RunResult, trial: u32, repeat: u32) -> Result<()> {
        self.0
            .iter_mut()
            .try_for_each(|s| s.result(r, trial, repeat))
    }

    pub fn summary(&mut self, s: &CompareSummary) -> Result<()> {
        self.0.iter_mut().try_for_each(|k| k.summary(s))
    }

    pub fn finish(&mut self, shown: &[RunResult], summary: Option<&CompareSummary>) -> Result<()> {
        self.0.iter_mut().try_for_each(|k| k.finish(shown, summary))
    }
}

/// The terminal: one run's summary and its thresholds as it ends (`each`), a comparison's
/// table at the end (its trials have a status line each); nothing with `--quiet`.
pub struct Terminal {
    pub quiet: bool,
    pub each: bool,
}

impl Sink for Terminal {
    fn result(&mut self, r: &RunResult, _trial: u32, _repeat: u32) -> Result<()> {
        if !self.each {
            return Ok(());
        }
        if let Some(why) = results::check::unreliable(r) {
            eprintln!("warning: {why}");
        }
        if !self.quiet {
            print!("{}", terminal::summary(r));
            print!("{}", tables::thresholds(&r.thresholds));
        }
        Ok(())
    }

    fn finish(&mut self, _shown: &[RunResult], summary: Option<&CompareSummary>) -> Result<()> {
        if let Some(s) = summary
            && !self.quiet
        {
            print!("{}", tables::compare(s));
        }
        Ok(())
    }
}

/// One run's results file (`run --out FILE`, `merge --out FILE`).
pub struct ResultFile {
    pub path: PathBuf,
    /// No status line with `--quiet`.
    pub quiet: bool,
}

impl Sink for ResultFile {
    fn result(&mut self, r: &RunResult, _trial: u32, _repeat: u32) -> Result<()> {
        write_result(&self.path, r)?;
        say(
            self.quiet,
            &format!("results written to {}", self.path.display()),
        );
        Ok(())
    }
}

/// A comparison's directory: `<strategy>.json` for one trial (what `check` and the CI baseline
/// read), `<strategy>/trial-N.json` for several, and `summary.json` + `summary.md` after each.
pub struct TrialDir {
    pub dir: PathBuf,
}

impl Sink for TrialDir {
    fn result(&mut self, r: &RunResult, trial: u32, repeat: u32) -> Result<()> {
        write_result(&trial_path(&self.dir, &r.strategy, trial, repeat), r)
    }

    fn summary(&mut self, s: &CompareSummary) -> Result<()> {
        let json = serde_json::to_string_pretty(s).context("encoding the summary")?;
        write_text(&self.dir.join("summary.json"), &(json + "\n"))?;
        write_text(&self.dir.join("summary.md"), &markdown::compare(s))
    }
}

/// The self-contained HTML report, written at the end from the results that stand for the
/// strategies.
pub struct HtmlReport {
    pub path: PathBuf,
    /// No status line with `--quiet`.
    pub quiet: bool,
}

impl Sink for HtmlReport {
    fn result(&mut self, _r: &RunResult, _trial: u32, _repeat: u32) -> Result<()> {
        Ok(())
    }

    fn finish(&mut self, shown: &[RunResult], summary: Option<&CompareSummary>) -> Result<()> {
        if shown.is_empty() {
            return Ok(());
        }
        write_text(&self.path, &super::html::render(shown, summary)?)?;
        say(
            self.quiet,
            &format!("HTML report written to {}", self.path.display()),
        );
        Ok(())
    }
}

/// A status line for a person watching (stderr, so stdout stays the results).
fn say(quiet: bool, line: &str) {
    if !quiet {
        eprintln!("{line}");
    }
}

/// Where trial `t` (from 0) of `strategy` is written in a comparison's directory.
pub fn trial_path(dir: &Path, strategy: &str, t: u32, repeat: u32) -> PathBuf {
    // A label `strategy/invalidation` names one file, not a directory.
    let strategy = strategy.replace('/', "@");
    if repeat <= 1 {
        dir.join(format!("{strategy}.json"))
    } else {
        dir.join(&strategy).join(format!("trial-{}.json", t + 1))
    }
}

/// One results file (schema'd JSON), its directory created.
pub fn write_result(path: &Path, r: &RunResult) -> Result<()> {
    let text = serde_json::to_string_pretty(r).context("encoding results")?;
    write_text(path, &(text + "\n"))
}

/// A file of results (JSON, Markdown, HTML), its directory created; written to a temporary
/// file first and renamed, so a reader never sees half a file and an interrupted write leaves
/// the previous one.
pub fn write_text(path: &Path, text: &str) -> Result<()> {
    if let Some(dir) = path.parent()
        && !dir.as_os_str().is_empty()
    {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.tmp"));
    std::fs::write(&tmp, text).with_context(|| format!("writing {}", path.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_trial_is_a_file_several_are_a_directory() {
        let d = Path::new("out");
        assert_eq!(trial_path(d, "xfetch", 0, 1), d.join("xfetch.json"));
        assert_eq!(
            trial_path(d, "mutex", 2, 5),
            d.join("mutex").join("trial-3.json")
        );
        assert_eq!(
            trial_path(d, "swr/invalidation", 0, 1),
            d.join("swr@invalidation.json")
        );
    }

    #[test]
    fn a_written_file_replaces_the_old_one_whole() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("sub").join("summary.md");
        write_text(&p, "first").expect("write");
        write_text(&p, "second").expect("write");
        assert_eq!(std::fs::read_to_string(&p).expect("read"), "second");
        let left: Vec<_> = std::fs::read_dir(p.parent().expect("dir"))
            .expect("list")
            .collect();
        assert_eq!(left.len(), 1, "no temporary file is left");
    }
}
