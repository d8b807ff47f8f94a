//! TypeScript and JavaScript: how a module specifier names a file.

/// The file a relative module specifier names, among `exists` (`./x` from
/// `src/a/b.ts` → `src/a/x.ts`, `src/a/x/index.ts`, …).
pub(crate) fn resolve_module(
    from: &str,
    spec: &str,
    exists: &dyn Fn(&str) -> bool,
) -> Option<String> {
    if !spec.starts_with('.') {
        return None;
    }
    let mut parts: Vec<&str> = from.split('/').collect();
    parts.pop();
    for seg in spec.split('/') {
        match seg {
            "." | "" => {}
            ".." => {
                parts.pop()?;
            }
            s => parts.push(s),
        }
    }
    let base = parts.join("/");
    let base = base
        .strip_suffix(".js")
        .or_else(|| base.strip_suffix(".mjs"))
        .unwrap_or(&base)
        .to_string();
    for ext in [
        "",
        ".ts",
        ".tsx",
        ".d.ts",
        ".js",
        ".jsx",
        ".mjs",
        "/index.ts",
        "/index.tsx",
        "/index.js",
    ] {
        let candidate = format!("{base}{ext}");
        if exists(&candidate) {
            return Some(candidate);
        }
    }
    None
}
