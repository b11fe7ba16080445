//! The settings table of docs/settings.md, made from the settings' declarations: every run
//! setting with its flag, its scenario-file key, its heading, its plain default, the values
//! `advise` tries and its one-line help. A test holds the docs to it, so the table cannot drift from the code.

use clap::{Args, Command};

use super::RunFlags;

/// Where the table starts and ends in docs/settings.md.
pub const BEGIN: &str = "<!-- settings table: made from src/cli/settings by `STAMPEDE_BLESS=1 cargo test --lib settings::table` -->\n";
pub const END: &str = "<!-- end of the settings table -->";

/// The table, in `run --help`'s order.
pub fn markdown() -> String {
    // `run`'s own arguments too: the strategy is a run flag there (`--strategy`).
    let cmd = crate::cli::RunCmd::augment_args(Command::new("run"));
    let rows = RunFlags::rows();
    let keys = RunFlags::file_keys();
    let mut out = String::from(
        "| setting | flag | scenario file | heading | default | advise tries | what it sets |\n|---|---|---|---|---|---|---|\n",
    );
    for row in &rows {
        let arg = cmd.get_arguments().find(|a| a.get_id() == row.key);
        let flag = arg
            .and_then(|a| a.get_long())
            .map_or("—".to_string(), |l| format!("`--{l}`"));
        let heading = arg.and_then(|a| a.get_help_heading()).unwrap_or("—");
        let help = arg
            .and_then(|a| a.get_help())
            .map(|h| h.to_string())
            .unwrap_or_default();
        let key = if keys.iter().any(|k| k == row.key) {
            format!("`{}`", row.key)
        } else {
            "—".to_string()
        };
        // The help's own `[default: …]` says more where the default depends on other
        // settings; the declared default is the plain one.
        let (help, said) = match help.split_once(" [default: ") {
            Some((h, d)) => (h.to_string(), Some(d.trim_end_matches(']').to_string())),
            None => (help, None),
        };
        let default = match (row.default.as_deref(), said) {
            (Some(d), _) => format!("`{d}`"),
            (None, Some(said)) => said,
            (None, None) => String::new(),
        };
        let search = row.search.map_or(String::new(), |s| format!("`{s}`"));
        out.push_str(&format!(
            "| {} | {flag} | {key} | {heading} | {default} | {search} | {} |\n",
            row.key,
            help.replace('|', "\\|")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use clap::{Args, Command};

    use super::super::RunFlags;

    /// The table in docs/settings.md is the one the declarations make; `STAMPEDE_BLESS=1`
    /// rewrites it.
    #[test]
    fn the_docs_settings_table_is_made_from_the_declarations() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/settings.md");
        let doc = std::fs::read_to_string(&path).unwrap();
        let (head, rest) = doc
            .split_once(super::BEGIN)
            .expect("docs/settings.md has the table's start marker");
        let (_, tail) = rest
            .split_once(super::END)
            .expect("docs/settings.md has the table's end marker");
        let want = format!(
            "{head}{}\n{}{}{tail}",
            super::BEGIN,
            super::markdown(),
            super::END
        );
        if std::env::var_os("STAMPEDE_BLESS").is_some() {
            std::fs::write(&path, &want).unwrap();
            return;
        }
        assert!(
            doc == want,
            "docs/settings.md's table differs from the declarations: run STAMPEDE_BLESS=1 cargo test --lib settings::table"
        );
    }

    /// A default said in a flag's help (`[default: X]`) is the declared one, where there is a
    /// plain one to compare.
    #[test]
    fn a_default_in_the_help_is_the_declared_default() {
        let cmd = RunFlags::augment_args(Command::new("run"));
        let mut wrong = Vec::new();
        for row in RunFlags::rows() {
            let (Some(default), Some(arg)) = (
                row.default,
                cmd.get_arguments().find(|a| a.get_id() == row.key),
            ) else {
                continue;
            };
            let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
            if let Some((_, said)) = help.split_once("[default: ") {
                let said = said.trim_end_matches(']');
                if !said.starts_with(&default) {
                    wrong.push(format!(
                        "{}: help says {said:?}, declared {default:?}",
                        row.key
                    ));
                }
            }
        }
        assert!(wrong.is_empty(), "{wrong:#?}");
    }
}
