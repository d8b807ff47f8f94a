//! The Cargo side of a Rust repository: which library crates it has (by
//! the name other crates `use`) and which packages each package reaches
//! (its own, its dependencies), read from its `Cargo.toml`s when a pass
//! starts.

use std::collections::{HashMap, HashSet};

use super::module_path;

/// The Cargo side of a Rust repository.
#[derive(Debug, Default)]
pub struct Cargo {
    /// The library crates by the name other crates `use` them (`[lib]
    /// name`, else `[package] name`, `-` as `_`) → their `src/` folder
    /// (those with a `src/lib.rs`).
    pub crates: HashMap<String, String>,
    /// Every package ([`packages`]).
    pub packages: Vec<Package>,
}

impl Cargo {
    /// The Cargo side of the repository at `repo`, from its file paths
    /// (repository-relative). Each manifest is read once: the indexed
    /// `Cargo.toml`s and the one beside each `src/lib.rs`.
    pub fn read<'a>(repo: &std::path::Path, paths: impl IntoIterator<Item = &'a str>) -> Cargo {
        let mut roots = Vec::new();
        let mut manifests = std::collections::BTreeSet::new();
        for p in paths {
            if p == "Cargo.toml" || p.ends_with("/Cargo.toml") {
                manifests.insert(p.to_string());
            } else if p.ends_with("src/lib.rs") {
                let (root, _) = module_path(p);
                manifests.insert(format!(
                    "{}Cargo.toml",
                    root.strip_suffix("src/").unwrap_or(&root)
                ));
                roots.push(root);
            }
        }
        let packages = packages(repo, manifests.iter().map(String::as_str));
        let crates = roots
            .into_iter()
            .filter_map(|src| {
                let dir = src.strip_suffix("src/").unwrap_or(&src);
                let p = packages.iter().find(|p| p.dir == dir)?;
                Some((p.lib_name.clone().unwrap_or_else(|| p.name.clone()), src))
            })
            .collect();
        Cargo { crates, packages }
    }
}

/// A Cargo package of the repository, as far as it limits which other
/// packages its code can call into: a package reaches its own code and the
/// packages it depends on, and never the functions of a proc-macro crate
/// (which exports only macros).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Package {
    /// Its folder, repository-relative, with a trailing `/` (`""` at the root).
    pub dir: String,
    /// `[package] name`, `-` as `_`.
    pub name: String,
    /// `[lib] name` when it differs, `-` as `_`: what other crates `use`.
    pub lib_name: Option<String>,
    /// `[lib] proc-macro = true`.
    pub proc_macro: bool,
    /// Packages its library and binaries use (`[dependencies]`, also per
    /// `[target.…]`; the `package = "…"` of a renamed one), `-` as `_`.
    pub deps: HashSet<String>,
    /// What its tests, examples and benches add (`[dev-dependencies]`).
    pub dev_deps: HashSet<String>,
}

impl Package {
    /// Whether code in `caller_path` (a file of this package) can call into
    /// package `target`.
    pub fn reaches(&self, caller_path: &str, target: &Package) -> bool {
        if target.dir == self.dir {
            return true;
        }
        if target.proc_macro {
            return false;
        }
        let rel = caller_path.strip_prefix(&self.dir).unwrap_or(caller_path);
        let dev = ["tests/", "examples/", "benches/"]
            .iter()
            .any(|d| rel.starts_with(d));
        self.deps.contains(&target.name) || (dev && self.dev_deps.contains(&target.name))
    }
}

/// The packages of the repository: one per `Cargo.toml` among `manifests`
/// (repository-relative paths) with a `[package]` name; a workspace-only
/// manifest or an unreadable one is none.
pub fn packages<'a>(
    repo: &std::path::Path,
    manifests: impl IntoIterator<Item = &'a str>,
) -> Vec<Package> {
    manifests
        .into_iter()
        .filter_map(|m| {
            let dir = m.strip_suffix("Cargo.toml")?;
            if !(dir.is_empty() || dir.ends_with('/')) {
                return None;
            }
            let text = std::fs::read_to_string(repo.join(m)).ok()?;
            parse_manifest(dir, &text)
        })
        .collect()
}

/// What [`packages`] reads from one manifest. Line-based (the keys read
/// are plain `key = …` lines in practice): dependency tables as `[dependencies]` with one
/// `key = …` line each (`key.workspace = true` too), or one
/// `[dependencies.key]` table each (the form `cargo publish` writes).
fn parse_manifest(dir: &str, manifest: &str) -> Option<Package> {
    #[derive(Clone, Copy, PartialEq)]
    enum Table {
        Package,
        Lib,
        Deps { dev: bool },
        Dep { dev: bool },
        Other,
    }
    let norm = |s: &str| {
        s.trim()
            .trim_matches('"')
            .trim_matches('\'')
            .replace('-', "_")
    };
    // `package = "real"` inside an inline table or a `[dependencies.key]` one.
    let renamed = |v: &str| -> Option<String> {
        let at = v.find("package")?;
        let rest = v[at + "package".len()..].trim_start().strip_prefix('=')?;
        let rest = rest.trim_start();
        let quote = rest.chars().next().filter(|c| *c == '"' || *c == '\'')?;
        let end = rest[1..].find(quote)?;
        Some(norm(&rest[1..=end]))
    };
    let mut pkg = Package {
        dir: dir.to_string(),
        ..Package::default()
    };
    let mut table = Table::Other;
    // The last `[dependencies.key]`: its key, to replace on a rename.
    let mut last: Option<String> = None;
    for line in manifest.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(header) = line.strip_prefix('[') {
            let header = header.trim_end_matches(']').trim();
            // `target.'cfg(unix)'.dependencies…` is `dependencies…` of a target.
            let header = match header.strip_prefix("target.") {
                Some(t) => ["dev-dependencies", "dependencies", "build-dependencies"]
                    .iter()
                    .find_map(|k| t.find(&format!(".{k}")).map(|i| &t[i + 1..]))
                    .unwrap_or(header),
                None => header,
            };
            table = match header {
                "package" => Table::Package,
                "lib" => Table::Lib,
                "dependencies" => Table::Deps { dev: false },
                "dev-dependencies" => Table::Deps { dev: true },
                h => {
                    let dev = h.starts_with("dev-");
                    match h.strip_prefix(if dev {
                        "dev-dependencies."
                    } else {
                        "dependencies."
                    }) {
                        Some(key) => {
                            last = Some(key.to_string());
                            Table::Dep { dev }
                        }
                        None => Table::Other,
                    }
                }
            };
            if let Table::Dep { dev } = table
                && let Some(key) = &last
            {
                pkg.dep_set(dev).insert(norm(key));
            }
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let key = key.trim();
        match table {
            Table::Package if key == "name" => pkg.name = norm(value),
            Table::Lib if key == "name" => pkg.lib_name = Some(norm(value)),
            Table::Lib if key == "proc-macro" || key == "proc_macro" => {
                pkg.proc_macro = value.trim() == "true";
            }
            Table::Deps { dev } => {
                let key = key.split('.').next().unwrap_or(key);
                let name = renamed(value).unwrap_or_else(|| norm(key));
                pkg.dep_set(dev).insert(name);
            }
            Table::Dep { dev } if key == "package" => {
                if let Some(old) = last.take() {
                    pkg.dep_set(dev).remove(&norm(&old));
                }
                pkg.dep_set(dev).insert(norm(value));
            }
            _ => {}
        }
    }
    (!pkg.name.is_empty()).then_some(pkg)
}

impl Package {
    fn dep_set(&mut self, dev: bool) -> &mut HashSet<String> {
        if dev {
            &mut self.dev_deps
        } else {
            &mut self.deps
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifests_say_which_packages_a_package_reaches() {
        // The published form: one table per dependency, per target too.
        let macros = parse_manifest(
            "m/",
            "[package]\nname = \"my-macros\"\n\n[lib]\nproc-macro = true\n\n\
             [dependencies.syn]\nversion = \"2\"\n\n[dev-dependencies.my-lib]\npath = \"..\"\n",
        )
        .expect("a package");
        assert!(macros.proc_macro);
        assert_eq!(macros.name, "my_macros");
        assert_eq!(macros.deps, HashSet::from(["syn".to_string()]));
        assert_eq!(macros.dev_deps, HashSet::from(["my_lib".to_string()]));
        // The hand-written form: inline tables, renames, `workspace = true`,
        // target tables, comments.
        let lib = parse_manifest(
            "",
            "# a comment\n[package]\nname = 'my-lib'\n[dependencies]\n\
             my-macros = { path = \"m\" }\nutil2 = { package = \"my-util\", path = \"u\" }\n\
             serde.workspace = true\n\
             [target.'cfg(unix)'.dependencies]\nlibc = \"0.2\"\n\
             [target.\"cfg(unix)\".dev-dependencies.nix]\nversion = \"1\"\n\
             [dependencies.renamed]\npackage = \"real-name\"\n\
             [build-dependencies]\ncc = \"1\"\n",
        )
        .expect("a package");
        let deps: HashSet<String> = ["my_macros", "my_util", "serde", "libc", "real_name"]
            .map(String::from)
            .into();
        assert_eq!(lib.deps, deps);
        assert_eq!(lib.dev_deps, HashSet::from(["nix".to_string()]));
        assert!(!lib.proc_macro);
        let util = parse_manifest("u/", "[package]\nname = \"my-util\"\n").expect("a package");
        // `[lib] name` is what other crates `use`.
        let renamed_lib = parse_manifest(
            "r/",
            "[package]\nname = \"r-pkg\"\n[lib]\nname = \"r_core\"\n",
        )
        .expect("a package");
        assert_eq!(
            (renamed_lib.name.as_str(), renamed_lib.lib_name.as_deref()),
            ("r_pkg", Some("r_core"))
        );
        assert_eq!(lib.lib_name, None);
        // A workspace-only manifest is no package.
        assert_eq!(parse_manifest("", "[workspace]\nmembers = [\"a\"]\n"), None);

        // The library reaches its dependencies, never a proc-macro crate's
        // functions; the macro crate reaches the library from its tests only.
        assert!(lib.reaches("src/a.rs", &util));
        assert!(lib.reaches("src/a.rs", &lib));
        assert!(!lib.reaches("src/a.rs", &macros));
        assert!(!macros.reaches("m/src/lib.rs", &lib));
        assert!(macros.reaches("m/tests/t.rs", &lib));
        assert!(macros.reaches("m/src/lib.rs", &macros));
        assert!(!util.reaches("u/src/lib.rs", &lib));
    }
}
