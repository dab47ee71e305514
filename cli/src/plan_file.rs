//! A tuning plan file (`tcc tune --plan FILE`, `tcc lock --plan FILE`): JSON lines, one program
//! instance per line, `{"file": "examples/mlp.tc", "fn": "mlp", "dims": {"M": 64}, "target": "cpu"}`
//! (`fn` optional when the file has one, `dims` optional when the fn has no shape variables,
//! `target` optional: `--target`'s, else `cpu`). A relative `file` is read from the plan file's
//! folder. Blank lines are skipped; any other line that is not such an object is an error naming
//! the line (exit 1).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use tcc_ir::target::TargetSpec;

use super::error::CliError;

/// Most entries a plan may have.
const MAX_ENTRIES: usize = 100_000;

/// One line of a plan, as written.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    file: String,
    #[serde(rename = "fn")]
    function: Option<String>,
    #[serde(default)]
    dims: BTreeMap<String, u64>,
    target: Option<String>,
}

/// One program instance of a plan.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanEntry {
    /// Where it is: `PLAN:LINE`, for messages.
    pub at: String,
    /// Its line number (from 1).
    pub line: usize,
    /// The program file (a relative one joined to the plan's folder).
    pub file: PathBuf,
    /// The fn, when named.
    pub function: Option<String>,
    /// The shape bindings, in name order.
    pub dims: Vec<(String, u64)>,
    /// The target, when named.
    pub target: Option<TargetSpec>,
}

/// Reads the plan at `path`. A plan that cannot be read is exit 2 (exit 1 when missing); a line
/// that is not an entry, or a plan without entries, is exit 1 naming the line.
pub fn read_plan(path: &Path) -> Result<Vec<PlanEntry>, CliError> {
    let text = std::fs::read(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => {
            CliError::invalid(format!("cannot read the plan `{}`: no such file", path.display()))
        }
        _ => CliError::Environment(format!("cannot read the plan `{}`: {e}", path.display())),
    })?;
    let text = String::from_utf8(text)
        .map_err(|_| CliError::invalid(format!("the plan `{}` is not UTF-8 text", path.display())))?;
    let folder = path.parent().unwrap_or(Path::new(""));
    parse_plan(&path.display().to_string(), folder, &text)
}

/// Parses plan text named `name` whose relative paths are under `folder`.
pub fn parse_plan(name: &str, folder: &Path, text: &str) -> Result<Vec<PlanEntry>, CliError> {
    let mut entries = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let at = format!("{name}:{}", i + 1);
        if raw.trim().is_empty() {
            continue;
        }
        if entries.len() == MAX_ENTRIES {
            return Err(CliError::invalid(format!("{at}: a plan has at most {MAX_ENTRIES} entries")));
        }
        let line: Line = serde_json::from_str(raw).map_err(|e| {
            CliError::invalid(format!(
                "{at}: not a plan entry ({e}); each line is {{\"file\": \"x.tc\", \"fn\": \"f\", \"dims\": {{\"M\": 64}}, \"target\": \"cpu\"}}"
            ))
        })?;
        if line.file.trim().is_empty() {
            return Err(CliError::invalid(format!("{at}: `file` is empty")));
        }
        let target = match &line.target {
            Some(t) => Some(t.parse::<TargetSpec>().map_err(|e| CliError::invalid(format!("{at}: {e}")))?),
            None => None,
        };
        let file = Path::new(&line.file);
        let file = if file.is_absolute() { file.to_path_buf() } else { folder.join(file) };
        entries.push(PlanEntry {
            at,
            line: i + 1,
            file,
            function: line.function,
            dims: line.dims.into_iter().collect(),
            target,
        });
    }
    if entries.is_empty() {
        return Err(CliError::invalid(format!("the plan `{name}` has no entries")));
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(e: CliError) -> String {
        match e {
            CliError::Invalid { message, .. } => message,
            CliError::Environment(m) => panic!("expected invalid input, got the environment: {m}"),
        }
    }

    #[test]
    fn entries_resolve_against_the_plan_folder() {
        let text = "{\"file\": \"mlp.tc\", \"dims\": {\"M\": 64, \"A\": 1}}\n\n  \n\
                    {\"file\": \"/abs/x.tc\", \"fn\": \"f\", \"target\": \"cpu:cranelift\"}\n";
        let entries = parse_plan("p.jsonl", Path::new("plans"), text).unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].file, Path::new("plans/mlp.tc"));
        assert_eq!(entries[0].dims, vec![("A".to_string(), 1), ("M".to_string(), 64)]);
        assert_eq!((entries[0].function.as_deref(), entries[0].target), (None, None));
        assert_eq!(entries[1].at, "p.jsonl:4");
        assert_eq!(entries[1].file, Path::new("/abs/x.tc"));
        assert_eq!(entries[1].function.as_deref(), Some("f"));
        assert_eq!(
            entries[1].target,
            Some(TargetSpec::Exact(tcc_ir::target::Target::Cpu(tcc_ir::target::CpuTier::Cranelift)))
        );
    }

    #[test]
    fn a_bad_line_is_named() {
        let cases = [
            ("{\"file\": \"a.tc\"}\nnot json\n", "p:2: not a plan entry"),
            ("{\"file\": \"a.tc\", \"dim\": {\"M\": 1}}", "p:1: not a plan entry (unknown field `dim`"),
            ("{\"file\": \"a.tc\", \"dims\": {\"M\": -1}}", "p:1: not a plan entry"),
            ("{\"fn\": \"f\"}", "p:1: not a plan entry (missing field `file`"),
            ("{\"file\": \" \"}", "p:1: `file` is empty"),
            ("{\"file\": \"a.tc\", \"target\": \"tpu\"}", "p:1: "),
            ("\n\n", "the plan `p` has no entries"),
        ];
        for (text, expected) in cases {
            let got = message(parse_plan("p", Path::new(""), text).unwrap_err());
            assert!(got.starts_with(expected), "{text:?}: {got}");
        }
    }
}
