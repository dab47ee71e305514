//! Global symbol names in LLVM IR text: making kernel names into symbols, renaming symbols in
//! emitted text, and picking a fresh name where two kernels of one module would clash.
//!
//! Used where several kernels' code goes into one module (`--emit llvm`/`--emit ptx` of a whole
//! program): every kernel is emitted on its own as before, and only the names it defines
//! (entries, shared-memory arrays) that an earlier kernel already took are renamed.

use std::collections::{BTreeMap, BTreeSet};

/// A symbol-safe version of a kernel name: ASCII letters, digits and `_`, starting with a letter
/// or `_` (`k_` is prepended otherwise).
pub(crate) fn symbol(name: &str) -> String {
    let s: String = name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect();
    if s.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_') { s } else { format!("k_{s}") }
}

/// A kernel name as it may appear in a one-line `;` comment (control characters replaced).
pub(crate) fn comment_text(name: &str) -> String {
    name.chars().map(|c| if c.is_control() { ' ' } else { c }).collect()
}

/// Whether `c` may appear in an unquoted LLVM identifier (`[-a-zA-Z$._0-9]`).
fn ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '$' | '.' | '_')
}

/// The name a `declare ... @name(...)` line declares.
pub(crate) fn declared_name(decl: &str) -> Option<&str> {
    let rest = &decl[decl.find('@')? + 1..];
    let end = rest.find(|c: char| !ident_char(c)).unwrap_or(rest.len());
    (end > 0).then(|| &rest[..end])
}

/// `text` with every global reference `@old` whose name is a key of `map` replaced by `@new`.
///
/// Only whole names are replaced (`@a` does not touch `@ab`), and nothing inside string literals
/// (`asm "..."` bodies, where `@p` is a PTX predicate guard; metadata strings) or `;` comments.
/// LLVM strings escape a quote as `\22`, so every `"` outside a comment opens or closes one.
pub(crate) fn rename(text: &str, map: &BTreeMap<String, String>) -> String {
    if map.is_empty() {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + 64);
    let mut chars = text.char_indices().peekable();
    let mut in_string = false;
    let mut in_comment = false;
    while let Some((i, c)) = chars.next() {
        out.push(c);
        if in_comment {
            in_comment = c != '\n';
        } else if in_string {
            in_string = c != '"';
        } else if c == '"' {
            in_string = true;
        } else if c == ';' {
            in_comment = true;
        } else if c == '@' {
            let start = i + 1;
            let mut end = start;
            while let Some(&(j, d)) = chars.peek() {
                if !ident_char(d) {
                    break;
                }
                end = j + d.len_utf8();
                chars.next();
            }
            let name = &text[start..end];
            out.push_str(map.get(name).map_or(name, String::as_str));
        }
    }
    out
}

/// A name for `sym` of the kernel at launch `launch` that is in neither `taken` nor `own` (the
/// names the kernel itself defines): `{sym}_k{launch}`, then `{sym}_k{launch}_2`, `_3`, ...
pub(crate) fn fresh(sym: &str, launch: usize, taken: &BTreeSet<String>, own: &BTreeSet<String>) -> String {
    let base = format!("{sym}_k{launch}");
    let free = |n: &String| !taken.contains(n) && !own.contains(n);
    if free(&base) {
        return base;
    }
    let mut n = 2u64;
    loop {
        let candidate = format!("{base}_{n}");
        if free(&candidate) {
            return candidate;
        }
        n += 1;
    }
}

/// Renames for the symbols `own` that one kernel defines, given the names earlier kernels of the
/// module took (`taken`, which also holds every declared name): each clashing symbol gets a
/// [`fresh`] name; every final name is added to `taken`.
pub(crate) fn renames(own: &BTreeSet<String>, launch: usize, taken: &mut BTreeSet<String>) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    for sym in own {
        if taken.contains(sym) {
            let new = fresh(sym, launch, taken, own);
            taken.insert(new.clone());
            map.insert(sym.clone(), new);
        } else {
            taken.insert(sym.clone());
        }
    }
    map
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rename_touches_whole_names_outside_strings_and_comments() {
        let map: BTreeMap<String, String> = [("a".to_string(), "a_k1".to_string())].into_iter().collect();
        let text = "define void @a() {\n  %x = getelementptr i8, ptr addrspace(3) @a, i32 0\n  \
                    call void asm \"@a bra L;\", \"\"() ; @a\n  %y = load i8, ptr @ab\n}\n";
        let renamed = rename(text, &map);
        assert_eq!(
            renamed,
            "define void @a_k1() {\n  %x = getelementptr i8, ptr addrspace(3) @a_k1, i32 0\n  \
             call void asm \"@a bra L;\", \"\"() ; @a\n  %y = load i8, ptr @ab\n}\n"
        );
    }

    #[test]
    fn fresh_names_avoid_taken_and_own_names() {
        let mut taken: BTreeSet<String> = ["x".to_string(), "y".to_string()].into_iter().collect();
        let own: BTreeSet<String> = ["x".to_string(), "x_k1".to_string(), "z".to_string()].into_iter().collect();
        let map = renames(&own, 1, &mut taken);
        assert_eq!(map.get("x").map(String::as_str), Some("x_k1_2"));
        assert_eq!(map.len(), 1);
        assert!(taken.contains("x_k1") && taken.contains("x_k1_2") && taken.contains("z"));
    }

    #[test]
    fn declared_names_and_symbols() {
        assert_eq!(
            declared_name("declare i32 @llvm.nvvm.read.ptx.sreg.tid.x() nounwind"),
            Some("llvm.nvvm.read.ptx.sreg.tid.x")
        );
        assert_eq!(declared_name("declare void @f"), Some("f"));
        assert_eq!(declared_name("declare void"), None);
        assert_eq!(symbol("0a.b"), "k_0a_b");
        assert_eq!(comment_text("a\nb"), "a b");
    }
}
