//! Twins under `cfg(feature = …)`: an item defined once for a feature and
//! once without it (`#[cfg(feature = "tty")] fn width` beside
//! `#[cfg(not(feature = "tty"))] fn width`, or a `mod` file per feature,
//! `#[cfg(feature = "x")] mod styled;` beside `#[cfg(not(feature = "x"))]
//! mod plain;` with a `pub use` of each). Both stay definitions (a
//! dependent may turn the feature on), but where a name may mean either,
//! the one the package's default build compiles is meant, as
//! rust-analyzer shows a crate with its default features.

use super::{Package, Rust};
use crate::facts::compact::WorldFacts;
use crate::facts::model::DefFactKind;
use crate::facts::rust::{CfgEnv, holds_in};
use crate::lang::NodeType;
use crate::resolve::ids::{FileIdx, SymId};
use crate::resolve::world::World;

/// How many `mod` declarations up a file's module is followed.
const MAX_MODULE_DEPTH: u32 = 16;

impl Rust {
    /// Whether unit `s` is compiled out of its package's default build
    /// (default features on, every other feature off) by a `cfg` on
    /// itself, on a unit around it (an inline `mod`), or on the `mod`
    /// declaration of its file or of a module above it.
    pub(super) fn off_in_default_build(&self, w: &World, s: SymId) -> bool {
        let fi = w.syms[s].file;
        let Some(pkg) = self.package(w, fi) else {
            return false;
        };
        let env = default_build(pkg);
        let facts = w.files[fi].facts.get();
        if facts.defs.iter().any(|d| d.what == DefFactKind::Cfg) {
            let mut unit = Some(s);
            while let Some(u) = unit {
                let row = &w.syms[u];
                if off_at(facts, &env, &row.name, row.start, row.end) {
                    return true;
                }
                unit = w.parent_of(u);
            }
        }
        self.module_off(w, fi, &env, 0)
    }

    /// Whether file `fi`'s module is declared only under a `cfg` the
    /// default build turns off (`#[cfg(feature = "x")] mod name;` in the
    /// module above; a module declared twice, `#[cfg(feature = "x")] pub
    /// mod name;` and `#[cfg(not(feature = "x"))] mod name;`, is on when
    /// either is), here or further up.
    fn module_off(&self, w: &World, fi: FileIdx, env: &CfgEnv, depth: u32) -> bool {
        if depth > MAX_MODULE_DEPTH {
            return false;
        }
        let (root, path) = &self.file_modules[fi];
        let Some((above, name)) = path.rsplit_once('.') else {
            return false;
        };
        let Some(&parent) = self.modules.get(&(root.clone(), above.to_string())) else {
            return false;
        };
        if parent == fi {
            return false;
        }
        let Some(top) = w.file_unit[parent] else {
            return false;
        };
        let facts = w.files[parent].facts.get();
        let declarations: Vec<SymId> = w
            .named_children(top, name)
            .iter()
            .copied()
            .filter(|&m| w.syms[m].node_type == NodeType::Module)
            .collect();
        let declared_off = !declarations.is_empty()
            && declarations.iter().all(|&m| {
                let row = &w.syms[m];
                off_at(facts, env, &row.name, row.start, row.end)
            });
        declared_off || self.module_off(w, parent, env, depth + 1)
    }
}

/// What a package's default build sees: its build script's cfgs and its
/// default features, every other feature off.
fn default_build(pkg: &Package) -> CfgEnv<'_> {
    CfgEnv {
        set: &pkg.build_cfgs,
        on: &pkg.build_flags,
        features: Some(&pkg.default_features),
        only_default_features: true,
        build_script: false,
    }
}

/// Whether the unit named `name` spanning `start..=end` has a `cfg` the
/// default build `env` finds false (the fact sits at the unit's name).
fn off_at(facts: &WorldFacts, env: &CfgEnv, name: &str, start: u32, end: u32) -> bool {
    facts.defs.iter().any(|d| {
        d.what == DefFactKind::Cfg
            && start <= d.byte
            && d.byte <= end
            && facts.s(d.name) == name
            && holds_in(facts.s(d.expr), env) == Some(Some(false))
    })
}
