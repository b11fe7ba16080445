//! The data dir of a managed Postgres: finding the server binaries and a dir made by copying the cached initdb template (or by initdb, which then fills the cache).

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::DB_USER;
use crate::servers::pg_user::{RunAs, SERVER_USER};
use crate::servers::{ServerError, find_on_path, log_tail};

const INSTALL_HINT: &str = "Debian: apt-get install postgresql";

/// Where the server binaries are and which major version they are.
#[derive(Debug, Clone)]
pub(super) struct PgBinaries {
    pub(super) bin_dir: PathBuf,
    /// As written in a data dir's `PG_VERSION`: "15", or "9.6" for old releases.
    pub(super) major: String,
}

/// The server binaries: `postgres` (with `initdb` beside it) on PATH first, then the
/// highest version under /usr/lib/postgresql/*/bin (Debian does not put them on PATH).
pub(super) fn find_binaries() -> Result<PgBinaries, ServerError> {
    let has_both = |dir: &Path| dir.join("postgres").is_file() && dir.join("initdb").is_file();
    // Resolve symlinks: /usr/local/bin/postgres may point into the versioned bin dir, and
    // that is where initdb and the extension files are found relative to.
    let on_path = ["postgres", "initdb"]
        .iter()
        .filter_map(|p| find_on_path(p))
        .filter_map(|p| fs::canonicalize(p).ok())
        .filter_map(|p| p.parent().map(Path::to_owned))
        .find(|dir| has_both(dir));
    let bin_dir = on_path
        .or_else(|| {
            let mut versions: Vec<(u32, PathBuf)> = fs::read_dir("/usr/lib/postgresql")
                .ok()?
                .filter_map(Result::ok)
                .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, e.path().join("bin"))))
                .filter(|(_, bin)| has_both(bin))
                .collect();
            versions.sort();
            versions.pop().map(|(_, bin)| bin)
        })
        .ok_or(ServerError::NotFound {
            program: "PostgreSQL server (postgres, initdb)",
            searched: "on PATH or in /usr/lib/postgresql/*/bin".to_owned(),
            install: INSTALL_HINT,
        })?;
    let postgres = bin_dir.join("postgres");
    let out = Command::new(&postgres)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| ServerError::setup(format!("running {} --version", postgres.display()), e))?;
    let version = String::from_utf8_lossy(&out.stdout);
    let major = parse_major(&version).ok_or_else(|| {
        ServerError::setup(
            format!("reading the version of {}", postgres.display()),
            std::io::Error::other(format!("unexpected output {:?}", version.trim())),
        )
    })?;
    Ok(PgBinaries { bin_dir, major })
}

/// The major version as `PG_VERSION` spells it, from `postgres (PostgreSQL) 15.18 (Debian ...)`:
/// "15"; "9.6" for releases before 10, whose major version had two parts.
fn parse_major(version_output: &str) -> Option<String> {
    let number = version_output
        .split("(PostgreSQL)")
        .nth(1)?
        .split_whitespace()
        .next()?;
    let mut parts = number.split('.');
    let digits = |s: &str| -> String { s.chars().take_while(char::is_ascii_digit).collect() };
    let first = digits(parts.next()?);
    let first_n: u32 = first.parse().ok()?;
    if first_n >= 10 {
        Some(first)
    } else {
        Some(format!("{first}.{}", digits(parts.next()?)))
    }
}

/// Where the reusable initdb template for `major` lives: under $XDG_CACHE_HOME or
/// $HOME/.cache, never in /tmp (which is cleaned and shared). `None` if neither is set;
/// then every run pays for initdb.
fn template_path(major: &str) -> Option<PathBuf> {
    let absolute = |var: &str| {
        std::env::var_os(var)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    let cache =
        absolute("XDG_CACHE_HOME").or_else(|| absolute("HOME").map(|h| h.join(".cache")))?;
    Some(cache.join("stampede").join(format!("pg-template-{major}")))
}

/// Fill `dir/data` with a fresh cluster, from the template if there is a usable one, else
/// with initdb (and then save it as the template). Returns whether the template was used.
pub(super) fn prepare_cluster(
    bins: &PgBinaries,
    dir: &Path,
    run_as: RunAs,
) -> Result<bool, ServerError> {
    let data = dir.join("data");
    let template = template_path(&bins.major);
    let reused = match &template {
        Some(t) if template_is_usable(t, &bins.major) => {
            copy_tree(t, &data).map_err(|e| {
                ServerError::setup(
                    format!(
                        "copying the Postgres template {} to {}",
                        t.display(),
                        data.display()
                    ),
                    e,
                )
            })?;
            true
        }
        _ => false,
    };
    if let Some((uid, gid)) = run_as {
        // The server user needs to own its data dir (Postgres checks) and to write its
        // socket into the temp dir.
        chown_tree(dir, uid, gid).map_err(|e| {
            ServerError::setup(
                format!("handing {} to user {SERVER_USER}", dir.display()),
                e,
            )
        })?;
    }
    if reused {
        // Postgres refuses a data dir others can read.
        fs::set_permissions(&data, fs::Permissions::from_mode(0o700)).map_err(|e| {
            ServerError::setup(format!("setting mode 0700 on {}", data.display()), e)
        })?;
        return Ok(true);
    }
    run_initdb(bins, dir, &data, run_as)?;
    if let Some(t) = &template {
        // The template only saves time: a cache that cannot be written (read-only home,
        // full disk) must not fail the run, which already has its data dir.
        let _ = save_template(&data, t);
    }
    Ok(false)
}

/// A template is usable once it was renamed into place complete; `PG_VERSION` guards
/// against a template of another major version or a foreign directory of the same name.
fn template_is_usable(template: &Path, major: &str) -> bool {
    fs::read_to_string(template.join("PG_VERSION")).is_ok_and(|v| v.trim() == major)
}

fn run_initdb(
    bins: &PgBinaries,
    dir: &Path,
    data: &Path,
    run_as: RunAs,
) -> Result<(), ServerError> {
    let initdb = bins.bin_dir.join("initdb");
    let mut cmd = Command::new(&initdb);
    cmd.arg("-D")
        .arg(data)
        .args([
            "-A",
            "trust",
            "-U",
            DB_USER,
            "--no-sync",
            "-E",
            "UTF8",
            "--locale=C",
        ])
        .current_dir(dir)
        .stdin(Stdio::null())
        .process_group(0);
    if let Some((uid, gid)) = run_as {
        cmd.uid(uid).gid(gid);
    }
    let out = cmd
        .output()
        .map_err(|e| ServerError::setup(format!("running {}", initdb.display()), e))?;
    if out.status.success() {
        return Ok(());
    }
    // Keep the output in the temp dir for the tail, the same way server logs are quoted.
    let log = dir.join("initdb.log");
    let _ = fs::write(&log, [out.stdout, out.stderr].concat());
    Err(ServerError::Exited {
        what: format!("{} -D {}", initdb.display(), data.display()),
        status: out.status,
        tail: log_tail(&[&log]),
    })
}

/// Copy a fresh data dir into the cache as the template. Built in a staging dir next to
/// the final place and renamed into it, so a reader never sees a half-copied template and
/// concurrent first runs cannot corrupt it: the first rename wins, later ones fail
/// (the target exists) and their staging copies are removed.
fn save_template(data: &Path, template: &Path) -> std::io::Result<()> {
    let parent = template
        .parent()
        .ok_or_else(|| std::io::Error::other("template path has no parent"))?;
    fs::create_dir_all(parent)?;
    let staging = tempfile::Builder::new()
        .prefix(".pg-template-staging-")
        .tempdir_in(parent)?;
    copy_tree(data, staging.path())?;
    fs::rename(staging.path(), template)?;
    // Renamed away: nothing left for the guard to delete.
    let _ = staging.keep();
    Ok(())
}

/// Recursively copy `src` into `dst` (created if missing), keeping permission bits.
/// A data dir after initdb holds only directories and regular files; symlinks (a
/// relocated pg_wal) are recreated as they are.
fn copy_tree(src: &Path, dst: &Path) -> std::io::Result<()> {
    let mode = fs::metadata(src)?.permissions();
    if !dst.exists() {
        fs::create_dir(dst)?;
    }
    fs::set_permissions(dst, mode)?;
    for entry in fs::read_dir(src)? {
        let entry = entry?;
        let (from, to) = (entry.path(), dst.join(entry.file_name()));
        let kind = entry.file_type()?;
        if kind.is_dir() {
            copy_tree(&from, &to)?;
        } else if kind.is_symlink() {
            std::os::unix::fs::symlink(fs::read_link(&from)?, &to)?;
        } else if kind.is_file() {
            fs::copy(&from, &to)?;
        }
    }
    Ok(())
}

/// Give `path` and everything under it to `uid:gid`, without following symlinks.
fn chown_tree(path: &Path, uid: u32, gid: u32) -> std::io::Result<()> {
    std::os::unix::fs::lchown(path, Some(uid), Some(gid))?;
    if fs::symlink_metadata(path)?.is_dir() {
        for entry in fs::read_dir(path)? {
            chown_tree(&entry?.path(), uid, gid)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_major_versions() {
        assert_eq!(
            parse_major("postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)\n").as_deref(),
            Some("15")
        );
        assert_eq!(
            parse_major("postgres (PostgreSQL) 17devel").as_deref(),
            Some("17")
        );
        assert_eq!(
            parse_major("postgres (PostgreSQL) 9.6.24").as_deref(),
            Some("9.6")
        );
        assert_eq!(parse_major("something else"), None);
    }
}
