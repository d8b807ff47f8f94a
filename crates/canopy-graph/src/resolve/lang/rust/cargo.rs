//! The Cargo side of a Rust repository: which library crates it has (by
//! the name other crates `use`) and which packages each package reaches
//! (its own, its dependencies), read from its `Cargo.toml`s when a pass
//! starts.

use std::collections::{HashMap, HashSet};

use super::module_path;

/// The Cargo side of a Rust repository.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
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
    /// The `key="value"` cfgs its build script prints
    /// (`cargo:rustc-cfg=fast_arithmetic="64"`), the first value of each
    /// key ([`build_cfgs`]).
    pub build_cfgs: Vec<(String, String)>,
    /// The bare cfgs its build script turns on in a default build
    /// (`cargo:rustc-cfg=wrap_proc_macro` on every path;
    /// [`super::build_script::build_flags`]), sorted.
    pub build_flags: Vec<String>,
    /// The features a default build turns on: `[features] default` and
    /// the features those name, followed (not `dep:x` nor `x/y`).
    pub default_features: Vec<String>,
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
            let (mut pkg, script) = parse_manifest(dir, &text)?;
            if let Some(script) = script
                && let Ok(text) = std::fs::read_to_string(repo.join(dir).join(script))
            {
                pkg.build_cfgs = build_cfgs(&text);
                pkg.build_flags = super::build_script::build_flags(&text, &pkg.default_features);
            }
            Some(pkg)
        })
        .collect()
}

/// The `key="value"` cfgs a build script prints (`cargo:rustc-cfg=…`,
/// `cargo::rustc-cfg=…`, quotes escaped as in a Rust string). A key printed
/// with several values (an `if`/`else` on the target) is read as its
/// first: the script runs one branch, and the first is taken for this
/// 64-bit host (serde_json prints `fast_arithmetic="64"` for 64-bit
/// targets first, `"32"` in the `else`). Bare names are left out (the
/// walker reads every unknown bare name as off).
pub fn build_cfgs(script: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for (at, _) in script.match_indices("rustc-cfg=") {
        let rest = &script[at + "rustc-cfg=".len()..];
        let end = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        let (key, rest) = rest.split_at(end);
        let Some(value) = rest.strip_prefix("=\\\"") else {
            continue;
        };
        let Some(close) = value.find("\\\"") else {
            continue;
        };
        if !key.is_empty() && !out.iter().any(|(k, _)| k == key) {
            out.push((key.to_string(), value[..close].to_string()));
        }
    }
    out
}

/// What [`packages`] reads from one manifest: `[package] name`, `[lib]
/// name` and `proc-macro`, and the names of `[dependencies]` and
/// `[dev-dependencies]`, also per `[target.…]` (a renamed dependency by its
/// `package`). `None` for a manifest without a package name, or one that
/// is no valid TOML.
fn parse_manifest(dir: &str, manifest: &str) -> Option<(Package, Option<String>)> {
    let m: Manifest = toml::from_str(manifest).ok()?;
    let package = m.package?;
    // `build = "path"`, `build = false`, else `build.rs` when there is one.
    let script = match package.build {
        Some(toml::Value::String(s)) => Some(s),
        Some(toml::Value::Boolean(false)) => None,
        _ => Some("build.rs".to_string()),
    };
    let name = package.name?;
    let mut pkg = Package {
        dir: dir.to_string(),
        name: crate_name(&name),
        lib_name: m
            .lib
            .as_ref()
            .and_then(|l| l.name.as_deref())
            .map(crate_name),
        proc_macro: m.lib.is_some_and(|l| l.proc_macro),
        default_features: default_features(&m.features),
        ..Package::default()
    };
    let targets = m.target.into_values();
    let tables = std::iter::once((m.dependencies, m.dev_dependencies))
        .chain(targets.map(|t| (t.dependencies, t.dev_dependencies)));
    for (deps, dev_deps) in tables {
        pkg.deps.extend(deps.iter().map(Dependency::crate_name));
        pkg.dev_deps
            .extend(dev_deps.iter().map(Dependency::crate_name));
    }
    Some((pkg, script))
}

/// The features `[features] default` turns on, followed through the
/// features each names, sorted; `dep:x` and `x/y` (a dependency's) are
/// left out.
fn default_features(table: &std::collections::BTreeMap<String, Vec<String>>) -> Vec<String> {
    let mut on = std::collections::BTreeSet::new();
    let mut next = vec!["default"];
    while let Some(f) = next.pop() {
        for named in table.get(f).into_iter().flatten() {
            if named.starts_with("dep:") || named.contains('/') {
                continue;
            }
            if on.insert(named.clone()) {
                next.push(named);
            }
        }
    }
    on.into_iter().collect()
}

/// A package or crate name as Rust code writes it (`-` as `_`).
fn crate_name(name: &str) -> String {
    name.replace('-', "_")
}

/// The parts of a `Cargo.toml` [`parse_manifest`] reads; the rest is ignored.
#[derive(serde::Deserialize)]
struct Manifest {
    package: Option<PackageTable>,
    lib: Option<LibTable>,
    #[serde(default)]
    dependencies: DependencyTable,
    #[serde(default, rename = "dev-dependencies")]
    dev_dependencies: DependencyTable,
    /// `[target.'cfg(…)'.dependencies]` and the like.
    #[serde(default)]
    target: std::collections::BTreeMap<String, TargetTable>,
    /// `[features]`: each feature and what it turns on.
    #[serde(default)]
    features: std::collections::BTreeMap<String, Vec<String>>,
}

/// `[package]`.
#[derive(serde::Deserialize)]
struct PackageTable {
    name: Option<String>,
    /// The build script: a path, or `false` for none.
    build: Option<toml::Value>,
}

/// `[lib]`.
#[derive(serde::Deserialize)]
struct LibTable {
    name: Option<String>,
    #[serde(default, rename = "proc-macro", alias = "proc_macro")]
    proc_macro: bool,
}

/// `[target.…]`.
#[derive(serde::Deserialize)]
struct TargetTable {
    #[serde(default)]
    dependencies: DependencyTable,
    #[serde(default, rename = "dev-dependencies")]
    dev_dependencies: DependencyTable,
}

/// Dependencies by their key.
type DependencyTable = std::collections::BTreeMap<String, Dependency>;

/// One dependency: a table (`path`, `workspace = true`, …), which may
/// rename the package (`package = "real"`), or a version requirement.
#[derive(serde::Deserialize)]
#[serde(untagged)]
enum Dependency {
    Table {
        #[serde(default)]
        package: Option<String>,
    },
    Version(serde::de::IgnoredAny),
}

impl Dependency {
    /// The crate name of the dependency under `key`.
    fn crate_name((key, dep): (&String, &Dependency)) -> String {
        match dep {
            Dependency::Table {
                package: Some(real),
            } => crate_name(real),
            _ => crate_name(key),
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
        .expect("a package")
        .0;
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
        .expect("a package")
        .0;
        let deps: HashSet<String> = ["my_macros", "my_util", "serde", "libc", "real_name"]
            .map(String::from)
            .into();
        assert_eq!(lib.deps, deps);
        assert_eq!(lib.dev_deps, HashSet::from(["nix".to_string()]));
        assert!(!lib.proc_macro);
        let util = parse_manifest("u/", "[package]\nname = \"my-util\"\n")
            .expect("a package")
            .0;
        // `[lib] name` is what other crates `use`.
        let renamed_lib = parse_manifest(
            "r/",
            "[package]\nname = \"r-pkg\"\n[lib]\nname = \"r_core\"\n",
        )
        .expect("a package")
        .0;
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

    #[test]
    fn a_build_script_sets_the_first_value_it_prints_of_a_key() {
        // serde_json's build.rs: one branch per target, the 64-bit one first.
        let script = "if wide {\n    println!(\"cargo:rustc-cfg=fast_arithmetic=\\\"64\\\"\");\n} else {\n    \
                      println!(\"cargo:rustc-cfg=fast_arithmetic=\\\"32\\\"\");\n}\n\
                      println!(\"cargo::rustc-cfg=limb=\\\"u64\\\"\");\nprintln!(\"cargo:rustc-cfg=no_std_alloc\");\n";
        assert_eq!(
            build_cfgs(script),
            [
                ("fast_arithmetic".to_string(), "64".to_string()),
                ("limb".to_string(), "u64".to_string())
            ]
        );
        // `build = "…"` names the script; `build = false` says there is none.
        let with = |extra: &str| {
            parse_manifest("", &format!("[package]\nname = \"p\"\n{extra}"))
                .expect("a package")
                .1
        };
        assert_eq!(with(""), Some("build.rs".to_string()));
        assert_eq!(with("build = \"gen/b.rs\"\n"), Some("gen/b.rs".to_string()));
        assert_eq!(with("build = false\n"), None);
    }
}
