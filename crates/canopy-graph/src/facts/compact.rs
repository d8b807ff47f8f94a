//! A file's facts but its sites as a resolution pass holds them: every
//! string once, in one buffer, and the imports, bindings and definition
//! facts as small records that name their strings by id ([`StrId`]).
//!
//! A cold pass keeps the facts of every file for the whole pass (any file's
//! imports and bindings may be read while another is resolved). Decoded
//! into [`FileFacts`](super::FileFacts), Django's were about 230,000
//! separately allocated `String`s and 100-byte records; here a file is
//! five allocations however many facts it has. The records are those of
//! [`super::model`] with `StrId`s for `String`s, decoded from the same
//! stream ([`WorldFacts::decode`] is its one reader).

use super::model::{
    Binding, DefFact, DefFactKind, FORMAT, FileFacts, Import, Reader, Site, SiteKind, get_strings,
};

/// One string of a file's facts: its place in the file's string table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StrId(u32);

/// [`Import`] with its strings by id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImportRec {
    /// Byte offset of the statement.
    pub byte: u32,
    /// 1-based line of the statement.
    pub line: u32,
    /// The local name (`*` for a glob import).
    pub local: StrId,
    /// The module as written.
    pub module: StrId,
    /// The imported name inside the module; `None` when the module itself is bound.
    pub name: Option<StrId>,
    /// Whether importers of this file see the name too.
    pub exported: bool,
}

/// [`Binding`] with its strings by id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BindingRec {
    /// Byte offset of the binding.
    pub byte: u32,
    /// The bound name.
    pub name: StrId,
    /// The type or value expression.
    pub expr: StrId,
    /// Whether `expr` is a type rather than a value.
    pub is_type: bool,
    /// Whether this is a field of the enclosing type.
    pub field: bool,
}

/// [`DefFact`] with its strings by id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DefRec {
    /// Byte offset of the definition's name.
    pub byte: u32,
    /// The definition's name.
    pub name: StrId,
    /// Base, return or trait type expression.
    pub expr: StrId,
    /// Which fact.
    pub what: DefFactKind,
}

/// Imports, bindings, definition facts, package and compiled-out ranges of
/// one file (what [`FileFacts`] holds but its sites), strings by id.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorldFacts {
    /// Every string of the table, one after the other.
    text: Box<str>,
    /// Where each string of the table ends in `text`.
    ends: Box<[u32]>,
    /// Import bindings.
    pub imports: Vec<ImportRec>,
    /// Local, parameter and field bindings.
    pub bindings: Vec<BindingRec>,
    /// Bases, return types, implemented traits.
    pub defs: Vec<DefRec>,
    /// The file's package, if the language declares one.
    pub package: Option<StrId>,
    /// Byte ranges of code compiled out.
    pub disabled: Vec<(u32, u32)>,
}

impl WorldFacts {
    /// The string `id` names.
    pub fn s(&self, id: StrId) -> &str {
        let i = id.0 as usize;
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.text[start..self.ends[i] as usize]
    }

    /// The strings of the table.
    fn len(&self) -> usize {
        self.ends.len()
    }

    /// Reads the `world` stream of [`FileFacts::encode`]; `None` when it
    /// is damaged or of another format.
    pub fn decode(world: &[u8]) -> Option<WorldFacts> {
        let mut r = Reader { buf: world, pos: 0 };
        if r.get()? != FORMAT {
            return None;
        }
        let list = get_strings(&mut r)?;
        let mut text = String::with_capacity(list.iter().map(|s| s.len()).sum());
        let mut ends = Vec::with_capacity(list.len());
        for s in &list {
            text.push_str(s);
            ends.push(u32::try_from(text.len()).ok()?);
        }
        let mut facts = WorldFacts {
            text: text.into_boxed_str(),
            ends: ends.into_boxed_slice(),
            ..WorldFacts::default()
        };
        facts.decode_lists(&mut r)?;
        Some(facts)
    }

    /// An id of this table, `None` past its end (a damaged blob).
    fn id(&self, id: u64) -> Option<StrId> {
        (id < self.len() as u64).then_some(StrId(id as u32))
    }

    /// An optional id (0 = none, else id + 1); `None` past the table's end.
    fn opt(&self, id: u64) -> Option<Option<StrId>> {
        match id {
            0 => Some(None),
            id => self.id(id - 1).map(Some),
        }
    }

    /// The lists of the `world` stream after its string table.
    fn decode_lists(&mut self, r: &mut Reader) -> Option<()> {
        let len = r.buf.len();
        let n = r.get()? as usize;
        let mut imports = Vec::with_capacity(n.min(len));
        for _ in 0..n.min(len) {
            let byte = r.get()? as u32;
            let line = r.get()? as u32;
            let local = r.get()?;
            imports.push(ImportRec {
                byte,
                line,
                local: self.id(local >> 1)?,
                exported: local & 1 == 1,
                module: self.id(r.get()?)?,
                name: self.opt(r.get()?)?,
            });
        }
        let n = r.get()? as usize;
        let mut bindings = Vec::with_capacity(n.min(len));
        for _ in 0..n.min(len) {
            let byte = r.get()? as u32;
            let name = self.id(r.get()?)?;
            let e = r.get()?;
            bindings.push(BindingRec {
                byte,
                name,
                expr: self.id(e >> 2)?,
                is_type: e & 1 == 1,
                field: e & 2 == 2,
            });
        }
        let n = r.get()? as usize;
        let mut defs = Vec::with_capacity(n.min(len));
        for _ in 0..n.min(len) {
            let byte = r.get()? as u32;
            let name = self.id(r.get()?)?;
            let e = r.get()?;
            defs.push(DefRec {
                byte,
                name,
                expr: self.id(e >> 3)?,
                what: match e & 7 {
                    0 => DefFactKind::Base,
                    1 => DefFactKind::Returns,
                    2 => DefFactKind::ImplTrait,
                    3 => DefFactKind::ImplType,
                    4 => DefFactKind::Arity,
                    5 => DefFactKind::Getter,
                    6 => DefFactKind::ModulePath,
                    _ => DefFactKind::Cfg,
                },
            });
        }
        let package = self.opt(r.get()?)?;
        let n = r.get()? as usize;
        let mut disabled = Vec::with_capacity(n.min(len));
        for _ in 0..n.min(len) {
            let start = r.get()? as u32;
            let len = r.get()? as u32;
            disabled.push((start, start.saturating_add(len)));
        }
        (self.imports, self.bindings, self.defs) = (imports, bindings, defs);
        (self.package, self.disabled) = (package, disabled);
        Some(())
    }

    /// The sites of the file's `sites` stream (its strings continue this
    /// table's ids); `None` when it is damaged or of another format.
    pub fn decode_sites(&self, sites: &[u8]) -> Option<Vec<Site>> {
        let mut r = Reader { buf: sites, pos: 0 };
        if r.get()? != FORMAT {
            return None;
        }
        let own = get_strings(&mut r)?;
        let world = self.len() as u64;
        let s = |id: u64| -> Option<String> {
            if id < world {
                Some(self.s(StrId(id as u32)).to_string())
            } else {
                own.get((id - world) as usize).map(|s| s.to_string())
            }
        };
        let len = r.buf.len();
        let n = r.get()? as usize;
        let mut out = Vec::with_capacity(n.min(len));
        let (mut byte, mut line) = (0u64, 0u64);
        for _ in 0..n.min(len) {
            byte = (byte + r.get()?) & 0xffff_ffff;
            line = (line + r.get()?) & 0xffff_ffff;
            let col = r.get()? as u32;
            let nk = r.get()?;
            let recv = match r.get()? {
                0 => None,
                id => Some(s(id - 1)?),
            };
            let args = r.get()?.min(u64::from(u8::MAX)) as u8;
            out.push(Site {
                byte: byte as u32,
                line: line as u32,
                col,
                name: s(nk >> 2)?,
                recv,
                kind: SiteKind::from_code(nk),
                args,
            });
        }
        Some(out)
    }

    /// The same facts with their strings copied ([`FileFacts`], no sites).
    pub fn to_file_facts(&self) -> FileFacts {
        let s = |id: StrId| self.s(id).to_string();
        FileFacts {
            sites: Vec::new(),
            imports: self
                .imports
                .iter()
                .map(|i| Import {
                    byte: i.byte,
                    line: i.line,
                    local: s(i.local),
                    module: s(i.module),
                    name: i.name.map(s),
                    exported: i.exported,
                })
                .collect(),
            bindings: self
                .bindings
                .iter()
                .map(|b| Binding {
                    byte: b.byte,
                    name: s(b.name),
                    expr: s(b.expr),
                    is_type: b.is_type,
                    field: b.field,
                })
                .collect(),
            defs: self
                .defs
                .iter()
                .map(|d| DefFact {
                    byte: d.byte,
                    name: s(d.name),
                    expr: s(d.expr),
                    what: d.what,
                })
                .collect(),
            package: self.package.map(s),
            disabled: self.disabled.clone(),
        }
    }
}
