//! The JSON Schemas of the two files stampede exchanges with people and programs: the scenario
//! file it reads (`run --scenario`, TOML, checked as the JSON it converts to) and the results
//! file it writes (`run --out`). Both are generated from the types that read and write them, so
//! they cannot drift; the value types bring their own schemas ([`crate::values::schema`]).
//!
//! Draft-07, not 2020-12: it is the draft that every editor's validator reads, whatever its
//! version (Taplo's, and so VS Code's Even Better TOML, long read no later draft).

use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, Schema};
use serde_json::Value;

use super::{RunResult, SCHEMA};
use crate::strategy::StrategySpec;
use crate::strategy::schema::invalidation_name;

/// The schema of a scenario file read as `File` (the run settings): its keys are the run flags
/// with `_` for `-` (every one optional), `[[fault]]` tables and a `[thresholds]` table, and no
/// other.
pub fn scenario<File: JsonSchema>() -> Value {
    let mut generator = SchemaSettings::draft07().for_deserialize().into_generator();
    // Two keys are strings the run parses after the file is read: their grammar is the
    // parser's, not `String`'s.
    let strategy = StrategySpec::json_schema(&mut generator);
    let mut schema = generator.into_root_schema_for::<File>();
    set_property(&mut schema, "strategy", strategy);
    set_property(&mut schema, "invalidate", invalidation_name());
    let mut schema = schema.to_value();
    // TOML has no null: an optional key is one left out, and null is no value it may take.
    without_null(&mut schema);
    schema["title"] = "stampede scenario file".into();
    schema["description"] = "A scenario file for `stampede run --scenario FILE` (TOML): its keys are the run flags with `_` for `-`, every one optional; flags given on the command line win over it. Faults are [[fault]] tables, limits a [thresholds] table.".into();
    schema
}

/// `schema` without null as a type, an alternative or a default.
fn without_null(schema: &mut Value) {
    match schema {
        Value::Object(o) => {
            if let Some(Value::Array(types)) = o.get_mut("type") {
                types.retain(|t| t != "null");
                if let [one] = &types[..] {
                    let one = one.clone();
                    o.insert("type".into(), one);
                }
            }
            if let Some(Value::Array(alts)) = o.get_mut("anyOf") {
                alts.retain(|a| a.get("type").is_none_or(|t| t != "null"));
                if alts.len() == 1 {
                    // One alternative left: a reference with this field's description
                    // beside it, which draft-07 allows only under allOf.
                    if let Some(alts) = o.remove("anyOf") {
                        o.insert("allOf".into(), alts);
                    }
                }
            }
            if o.get("default").is_some_and(Value::is_null) {
                o.remove("default");
            }
            o.values_mut().for_each(without_null);
        }
        Value::Array(a) => a.iter_mut().for_each(without_null),
        _ => {}
    }
}

/// The schema of a results file as `run --out` writes it (one result; `compare --out` writes
/// one such file per strategy beside its summary). Every value has the form it is written in;
/// a field is required when every results file of this layout has it: written now, and read
/// without a default. A field read with a default was added to the layout later, so files
/// of the same layout written before it (the CI baseline among them) lack it.
pub fn results() -> Value {
    let written = SchemaSettings::draft07()
        .for_serialize()
        .into_generator()
        .into_root_schema_for::<RunResult>();
    let read = SchemaSettings::draft07()
        .for_deserialize()
        .into_generator()
        .into_root_schema_for::<RunResult>();
    let mut schema = written.to_value();
    required_in_both(&mut schema, read.as_value());
    schema["title"] = "stampede results file".into();
    schema["description"] = format!("One run's results as `stampede run --out FILE` writes them (and `compare --out`, `merge --out`), layout version {SCHEMA}: every figure with its unit, the scenario that produced them, the latency histograms and the timeline.").into();
    // The layouts this schema describes: 5, and 2, 3 and 4, whose files have the same shape
    // (3 lets a figure be null with a reason beside it, 4 moves the reasons into `unknown`, 5
    // adds optional fields), so the CI baseline and older results validate too.
    schema["properties"]["schema"]["enum"] = serde_json::json!([2, 3, 4, SCHEMA]);
    // Written by `known::lift`, not by a field: the reasons of the figures that are null.
    schema["properties"]["unknown"] = serde_json::json!({
        "description": "Why each unknown figure is null: field path (`db.calls`, `thresholds[0].measured`) → reason. Absent when every figure is known.",
        "type": "object",
        "additionalProperties": {"type": "string"}
    });
    schema
}

/// Keep in `written`'s `required` lists only the fields that `read`'s (the same schema under
/// the deserialize contract, so of the same shape) requires too.
fn required_in_both(written: &mut Value, read: &Value) {
    match (written, read) {
        (Value::Object(w), Value::Object(r)) => {
            if let (Some(Value::Array(req)), Some(Value::Array(also))) =
                (w.get_mut("required"), r.get("required"))
            {
                req.retain(|f| also.contains(f));
            } else if r.get("required").is_none() {
                w.remove("required");
            }
            for (k, v) in w.iter_mut() {
                if let Some(rv) = r.get(k) {
                    required_in_both(v, rv);
                }
            }
        }
        (Value::Array(w), Value::Array(r)) if w.len() == r.len() => {
            for (wv, rv) in w.iter_mut().zip(r) {
                required_in_both(wv, rv);
            }
        }
        _ => {}
    }
}

/// Replace a property's schema, keeping the description the field's doc comment gave it.
fn set_property(schema: &mut Schema, name: &str, mut with: Schema) {
    let Some(property) = schema.get_mut("properties").and_then(|p| p.get_mut(name)) else {
        // A renamed flag must rename this too: the tests read both properties.
        debug_assert!(false, "the scenario schema has no property {name}");
        return;
    };
    if let Some(d) = property.get("description") {
        with.insert("description".into(), d.clone());
    }
    *property = with.to_value();
}

#[cfg(test)]
mod tests {
    use regex::Regex;

    use super::*;
    use crate::strategy::invalidate::invalidation;

    /// The scenario file's schema, of the settings `read` resolves (the run's).
    fn scenario_of<F: JsonSchema>(
        _read: fn(
            Option<&std::path::PathBuf>,
            F,
        ) -> Result<crate::scenario::Scenario, crate::error::UsageError>,
    ) -> Value {
        scenario::<F>()
    }

    #[test]
    fn a_scenario_key_that_the_run_parses_has_the_parser_s_grammar() {
        let s = scenario_of(crate::scenario::resolve);
        let strategy = &s["properties"]["strategy"];
        assert!(strategy["allOf"].is_array(), "{strategy}");
        assert!(strategy["description"].as_str().is_some());
        let pattern = s["properties"]["invalidate"]["pattern"].as_str().unwrap();
        let re = Regex::new(pattern).unwrap();
        for v in [
            "delete",
            " set ",
            "versioned",
            "none",
            "delete,set",
            "Delete",
            "",
            "lease",
        ] {
            assert_eq!(re.is_match(v), invalidation(v).is_ok(), "invalidate {v:?}");
        }
        assert_eq!(s["additionalProperties"], false);
        assert!(!s.to_string().contains("null"), "TOML has no null");
        assert_eq!(
            s["properties"]["fault"]["items"]["$ref"],
            "#/definitions/FaultSpec"
        );
    }

    #[test]
    fn the_results_schema_describes_what_is_written() {
        let r = results();
        assert_eq!(
            r["properties"]["schema"]["enum"],
            serde_json::json!([2, 3, 4, SCHEMA])
        );
        // A duration is written as humantime writes it, not in every form it reads.
        let d = &r["definitions"]["Duration"];
        assert!(d["pattern"].as_str().is_some(), "{d}");
        let required = r["required"].as_array().unwrap();
        assert!(required.contains(&"requests".into()));
        // Written by every run now, but missing from results of layout 2 written before it.
        assert!(!required.contains(&"consistency".into()));
        assert!(
            !required.contains(&"http".into()),
            "http is written only for --target"
        );
    }
}
