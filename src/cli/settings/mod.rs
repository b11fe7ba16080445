//! Every run setting, declared once: its flag, its scenario-file key, its type, its help and
//! heading, how the command line and a scenario file combine, its plain default and its checks.
//! The groups below follow `run --help`'s headings; [`RunFlags`] holds them all, flattened into
//! one command line and one scenario-file table.
//!
//! Resolution (`scenario::resolve`) is the only reader: it merges the two sources
//! ([`RunFlags::merge`]), runs the declared checks ([`RunFlags::check`]) and then the checks
//! between settings, and builds the `Scenario`.

use serde::Deserialize;

/// Declares one group of run settings: each field once, with its flag, key, type and help
/// (clap's and serde's attributes), then after `=>` how a flag and a scenario file's value of it
/// combine, its default when it has one plain default (`default EXPR`), the values `advise`
/// tries besides the default when it searches the setting (`search "A,B" when USES`, in `sweep
/// --axis`'s syntax, for the strategies `USES` says use it; `, under fault`: only when the
/// scenario has a fault; `, with KEY`: set with another searched setting at its first value),
/// and its checks (`check EXPR`, each a function of the given value that returns what is wrong
/// with it).
///
/// From that one declaration come the flags, the file's keys ([`Group::KEYS`], which is how a
/// file's unknown key is refused although the groups are flattened into one table), the merge
/// of the two sources, the checks, the defaults (`group.resolved().field()`), `advise`'s search
/// space ([`Group::knobs`]), the typed setter ([`Group::set`]) and the settings table of the
/// docs ([`Group::rows`]).
macro_rules! settings {
    (
        $(#[$smeta:meta])*
        pub struct $name:ident / $resolved:ident {
            $(
                $(#[$fmeta:meta])*
                pub $f:ident : $t:ty => $merge:ident
                    $(, default $default:expr)?
                    $(, search $search:literal when $uses:expr $(, under $fault:ident)? $(, with $with:ident)?)?
                    $(, check $check:expr)* ;
            )*
        }
    ) => {
        #[derive(Debug, clap::Args, Clone, Default, serde::Deserialize, schemars::JsonSchema)]
        $(#[$smeta])*
        #[command(mut_args = $crate::cli::settings::setting_arg)]
        pub struct $name {
            $( $(#[$fmeta])* pub $f: $t, )*
        }

        impl $crate::cli::settings::Group for $name {
            fn merge(self, file: Self) -> Self {
                Self { $( $f: $crate::cli::settings::merge::$merge(self.$f, file.$f), )* }
            }

            #[allow(unused_variables)]
            fn check(&self, problem: &mut dyn FnMut(&'static str, String)) {
                $( $(
                    if let Some(v) = $crate::cli::settings::Given::given(&self.$f)
                        && let Err(e) = ($check)(v)
                    {
                        problem(stringify!($f), e);
                    }
                )* )*
            }

            fn given(&self, out: &mut Vec<&'static str>) {
                $(
                    if $crate::cli::settings::Given::given(&self.$f).is_some() {
                        out.push(stringify!($f));
                    }
                )*
            }

            #[allow(unused_variables)]
            fn knobs(&self, out: &mut Vec<$crate::strategy::Knob>) {
                $( $( out.push($crate::strategy::Knob { key: stringify!($f), values: $search, uses: $uses,
                    needs_fault: false $( || stringify!($fault) == "fault" )?, with: None $( .or(Some(stringify!($with))) )? }); )? )*
            }

            fn item(&self, key: &str) -> Option<std::any::TypeId> {
                use $crate::cli::settings::Given;
                match key { $( stringify!($f) => Some(std::any::TypeId::of::<<$t as Given>::Item>()), )* _ => None }
            }

            fn set(&mut self, key: &str, value: &str) -> Option<Result<(), String>> {
                use $crate::{cli::settings::Given, values::text::*};
                match key {
                    $( stringify!($f) => Some((&&&Via::<<$t as Given>::Item>(std::marker::PhantomData)).parse(value).map(|v| self.$f.put(v))), )*
                    _ => None,
                }
            }

            #[cfg(test)]
            fn rows() -> Vec<$crate::cli::settings::Row> {
                vec![$(
                    $crate::cli::settings::Row {
                        key: stringify!($f),
                        default: None $( .or(Some(($default).to_string())) )?,
                        search: None $( .or(Some($search)) )?,
                    },
                )*]
            }
        }

        /// The group's settings with their plain defaults applied, one method per setting that
        /// has one.
        #[allow(dead_code)]
        pub struct $resolved<'a>(&'a $name);

        #[allow(dead_code)]
        impl $resolved<'_> {
            $( $(
                pub fn $f(&self) -> <$t as $crate::cli::settings::Given>::Value {
                    $crate::cli::settings::Given::given(&self.0.$f)
                        .cloned()
                        .unwrap_or_else(|| $default)
                }
            )? )*
        }

        impl $name {
            /// Each setting given, else its plain default.
            pub fn resolved(&self) -> $resolved<'_> {
                $resolved(self)
            }
        }
    };
}

mod data;
mod faults;
mod outcome;
mod servers;
mod strategy;
/// The docs' settings table, made and checked by a test.
#[cfg(test)]
#[path = "table_tests.rs"]
mod table;
mod traffic;

pub use data::{DbFlags, KeyFlags, MAX_DB_CONNECTIONS, MAX_KEYS, MemoryFlags, WriteFlags};
pub use faults::FaultFlags;
pub use outcome::{ClientFlags, RecoveryFlags, ReportFlags};
pub use servers::{ClusterFlags, RedisTlsFlags, ServerFlags};
pub use strategy::{ProtectionFlags, StrategyFlags};
pub use traffic::{LoadFlags, TraceFlags};

/// What every setting's flag has, so that its declaration says only what is its own: its
/// possible values are not listed (its help names them, with what each does), and one whose
/// value is named BOOL is a switch: `--x` alone is `--x=true`, `--x=false` turns off what a
/// scenario file turned on.
pub fn setting_arg(a: clap::Arg) -> clap::Arg {
    let switch = matches!(a.get_value_names(), Some([n]) if n.as_str() == "BOOL");
    match (a.get_action().takes_values(), switch) {
        // A plain switch (`--no-shocks`) has no values to hide: clap's debug build refuses it.
        (false, _) => a,
        (true, false) => a.hide_possible_values(true),
        (true, true) => a
            .hide_possible_values(true)
            .num_args(0..=1)
            .require_equals(true)
            .default_missing_value("true"),
    }
}

/// What one group of settings can do, generated by [`settings!`].
pub trait Group {
    /// The command line's value over the file's, by each setting's rule.
    fn merge(self, file: Self) -> Self;
    /// Each given setting's own checks; `problem` gets the setting's key and what is wrong.
    fn check(&self, problem: &mut dyn FnMut(&'static str, String));
    /// Adds the keys of the settings given (a value, a non-empty list, a switch turned on).
    fn given(&self, out: &mut Vec<&'static str>);
    /// Adds each setting `advise` searches, as declared with it.
    fn knobs(&self, out: &mut Vec<crate::strategy::Knob>);
    /// The type of one value of the setting `key` (a list's item); None: not this group's.
    fn item(&self, key: &str) -> Option<std::any::TypeId>;
    /// Sets the setting `key` to `value` parsed as its flag parses it ([`crate::values::text`]);
    /// None: not this group's.
    fn set(&mut self, key: &str, value: &str) -> Option<Result<(), String>>;
    /// The settings table's rows: each key with its plain default.
    #[cfg(test)]
    fn rows() -> Vec<Row>;
}

/// One row of the settings table (docs/settings.md).
#[cfg(test)]
pub struct Row {
    pub key: &'static str,
    pub default: Option<String>,
    /// The values `advise` tries besides the default.
    pub search: Option<&'static str>,
}

/// A setting that may be given, whatever its type: what a check and a default apply to, and
/// whether it counts as given (a value, a non-empty list, a switch turned on).
pub trait Given {
    type Value: Clone;
    fn given(&self) -> Option<&Self::Value>;
    /// What one value of it is (a list's item), and setting it to one.
    type Item;
    fn put(&mut self, v: Self::Item);
}

impl<T: Clone> Given for Option<T> {
    type Value = T;
    fn given(&self) -> Option<&T> {
        self.as_ref()
    }
    type Item = T;
    fn put(&mut self, v: T) {
        *self = Some(v);
    }
}

impl<T: Clone> Given for Vec<T> {
    type Value = Vec<T>;
    fn given(&self) -> Option<&Vec<T>> {
        (!self.is_empty()).then_some(self)
    }
    type Item = T;
    fn put(&mut self, v: T) {
        *self = vec![v];
    }
}

impl Given for bool {
    type Value = bool;
    fn given(&self) -> Option<&bool> {
        self.then_some(self)
    }
    type Item = bool;
    fn put(&mut self, v: bool) {
        *self = v;
    }
}

/// How a flag and a scenario file's value of one setting combine.
pub mod merge {
    /// The flag's value when given, else the file's.
    pub fn or<T>(flags: Option<T>, file: Option<T>) -> Option<T> {
        flags.or(file)
    }

    /// On when either turns it on (a consent such as `allow_kill_external`).
    pub fn any(flags: bool, file: bool) -> bool {
        flags || file
    }

    /// Command line only (the key is not a scenario file's, or the flag replaces the file's
    /// list as a whole, as `--fault` does).
    pub fn flags<T>(flags: T, _file: T) -> T {
        flags
    }

    /// A shorthand already folded into another setting before the merge (`--kill-redis-at`
    /// into `fault`): nothing of it is left to merge.
    pub fn folded<T: Default>(_flags: T, _file: T) -> T {
        T::default()
    }
}

/// Declares [`RunFlags`] from its groups, each named once, and `each_group!`, which calls
/// `$m!(group, …)` over the same list for the methods below.
macro_rules! run_flags {
    ($($(#[$meta:meta])* $g:ident: $t:ty,)*) => {
        /// Every setting of a run. All optional here: unset means "take the scenario file's
        /// value, else the default". Field names within the groups are the scenario file's
        /// keys, in one flat table: a file's unknown key is refused by [`RunFlags::file_keys`]
        /// before the groups read it (serde cannot deny unknown fields across flattened
        /// structs).
        #[derive(Debug, clap::Args, Clone, Default, Deserialize, schemars::JsonSchema)]
        #[schemars(deny_unknown_fields)]
        pub struct RunFlags {
            $( $(#[$meta])* #[command(flatten)] #[serde(flatten)] pub $g: $t, )*
        }

        macro_rules! each_group {
            ($m:ident) => { $m!($($g),*) };
        }
    };
}

run_flags! {
    cache: StrategyFlags,
    load: LoadFlags,
    traces: TraceFlags,
    data: KeyFlags,
    memory: MemoryFlags,
    db: DbFlags,
    servers: ServerFlags,
    redis_tls: RedisTlsFlags,
    protect: ProtectionFlags,
    faults: FaultFlags,
    client: ClientFlags,
    recovery: RecoveryFlags,
    writes: WriteFlags,
    cluster: ClusterFlags,
    report: ReportFlags,
}

impl RunFlags {
    /// The command line's settings (`self`) over a scenario file's, each by its declared rule;
    /// then the rules between settings: faults given on the command line replace the file's as
    /// a whole, and a payload size or a load shape given on the command line replaces the
    /// file's whichever form it takes.
    pub fn merge(self, file: RunFlags) -> RunFlags {
        let flag_faults = !self.faults.fault.is_empty() || self.faults.no_shocks;
        let (rps, clients) = (self.load.rps.is_some(), self.load.clients.is_some());
        let (size, dist) = (
            self.data.value_size.is_some(),
            self.data.value_size_dist.is_some(),
        );
        let file_faults = file.faults.fault.clone();
        macro_rules! merged {
            ($($g:ident),*) => { RunFlags { $($g: self.$g.merge(file.$g),)* } };
        }
        let mut m = each_group!(merged);
        if !flag_faults {
            m.faults.fault = file_faults;
        }
        if size {
            m.data.value_size_dist = None;
        } else if dist {
            m.data.value_size = None;
        }
        if rps {
            m.load.clients = None;
        } else if clients {
            m.load.rps = None;
        }
        m
    }

    /// A scenario file's settings, read group by group from its text: each group is a plain
    /// struct there, so an error keeps its line and its key (a flattened read would lose both).
    /// Keys of other groups are ignored by each; [`RunFlags::file_keys`] refuses the unknown.
    pub fn from_toml(text: &str) -> Result<RunFlags, toml::de::Error> {
        macro_rules! read {
            ($($g:ident),*) => { Ok(RunFlags { $($g: toml::from_str(text)?,)* }) };
        }
        each_group!(read)
    }

    /// Every given setting's declared checks: `problem` gets each setting's key and what is
    /// wrong with its value.
    pub fn check(&self, problem: &mut dyn FnMut(&'static str, String)) {
        macro_rules! checked {
            ($($g:ident),*) => { $(self.$g.check(problem);)* };
        }
        each_group!(checked);
    }

    /// The keys of the settings given, flags and file merged.
    pub fn given(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        macro_rules! given {
            ($($g:ident),*) => { $(self.$g.given(&mut out);)* };
        }
        each_group!(given);
        out
    }

    /// Sets the setting `key` (`lock_wait`) to `value`, parsed as its flag `--lock-wait` parses
    /// it; Err says what is wrong with the value.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        macro_rules! set {
            ($($g:ident),*) => { None $(.or_else(|| self.$g.set(key, value)))* };
        }
        each_group!(set).unwrap_or_else(|| Err("not a setting of `stampede run`".into()))
    }

    /// The type of one value of the setting `key` (`lock_wait`: a duration), if it is one.
    pub fn item(key: &str) -> Option<std::any::TypeId> {
        let all = RunFlags::default();
        macro_rules! item {
            ($($g:ident),*) => { None $(.or_else(|| all.$g.item(key)))* };
        }
        each_group!(item)
    }

    /// The settings `advise` searches (`lock_wait`), each with the values it tries besides its
    /// default (`"250ms,1s"`), the strategies that use it and when it matters, as declared.
    pub fn knobs() -> Vec<crate::strategy::Knob> {
        let all = RunFlags::default();
        let mut out = Vec::new();
        macro_rules! knobs {
            ($($g:ident),*) => { $(all.$g.knobs(&mut out);)* };
        }
        each_group!(knobs);
        out
    }

    /// The settings table's rows, in `--help`'s order.
    #[cfg(test)]
    pub fn rows() -> Vec<Row> {
        fn rows_of<G: Group>(_: &G) -> Vec<Row> {
            G::rows()
        }
        let all = RunFlags::default();
        macro_rules! rows {
            ($($g:ident),*) => {{
                let mut rows = Vec::new();
                $(rows.extend(rows_of(&all.$g));)*
                rows
            }};
        }
        each_group!(rows)
    }

    /// A scenario file's keys: the settings' names, except those of the command line only. Read
    /// off the file's schema, which is derived from the same declarations.
    pub fn file_keys() -> Vec<String> {
        let schema = schemars::generate::SchemaSettings::draft07()
            .for_deserialize()
            .into_generator()
            .into_root_schema_for::<RunFlags>();
        schema
            .get("properties")
            .and_then(|p| p.as_object())
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default()
    }
}
