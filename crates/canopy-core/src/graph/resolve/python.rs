//! Python: how its modules are named.

/// The dotted module names a file can be imported as (`src/click/core.py` →
/// `click.core`, `core`, `src.click.core`; `pkg/__init__.py` → `pkg`).
pub(crate) fn module_names(path: &str) -> Vec<String> {
    let stem = path
        .strip_suffix(".py")
        .or_else(|| path.strip_suffix(".pyi"))
        .unwrap_or(path);
    let stem = stem.strip_suffix("/__init__").unwrap_or(stem);
    let parts: Vec<&str> = stem.split('/').collect();
    (0..parts.len()).map(|i| parts[i..].join(".")).collect()
}

/// The package a file's relative imports start from (`a/b/c.py` → `a/b`).
pub(crate) fn resolve_relative(path: &str, module: &str) -> Option<String> {
    let dots = module.chars().take_while(|&c| c == '.').count();
    if dots == 0 {
        return None;
    }
    let mut dir: Vec<&str> = path.split('/').collect();
    dir.pop();
    for _ in 1..dots {
        dir.pop()?;
    }
    let rest = &module[dots..];
    let mut out = dir.join(".");
    if !rest.is_empty() {
        if !out.is_empty() {
            out.push('.');
        }
        out.push_str(rest);
    }
    Some(out)
}
