//! Typed indices into the world's tables: a unit is a [`SymId`], a file a
//! [`FileIdx`] (the store's file row order), a binding or an import of one
//! file's facts a [`BindingIdx`] or [`ImportIdx`], and a [`Table`] is
//! indexed only by its own kind of id, so a unit's index can never read a
//! file's row.

use std::marker::PhantomData;

pub use crate::store::graph_rows::FileIdx;

/// A unit's place in the world's unit table (`World::syms`), not its
/// `nodes.id`: units compiled out by `cfg` are not in the table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SymId(pub u32);

/// A binding's place in its file's facts (`FileFacts::bindings`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BindingIdx(pub u32);

/// An import's place in its file's facts (`FileFacts::imports`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ImportIdx(pub u32);

/// An index kind of a [`Table`].
pub trait Idx: Copy {
    /// The row.
    fn index(self) -> usize;
    /// The id of row `i`.
    fn at(i: usize) -> Self;
}

impl Idx for SymId {
    fn index(self) -> usize {
        self.0 as usize
    }
    fn at(i: usize) -> SymId {
        SymId(i as u32)
    }
}

impl Idx for BindingIdx {
    fn index(self) -> usize {
        self.0 as usize
    }
    fn at(i: usize) -> BindingIdx {
        BindingIdx(i as u32)
    }
}

impl Idx for ImportIdx {
    fn index(self) -> usize {
        self.0 as usize
    }
    fn at(i: usize) -> ImportIdx {
        ImportIdx(i as u32)
    }
}

impl Idx for FileIdx {
    fn index(self) -> usize {
        FileIdx::index(self)
    }
    fn at(i: usize) -> FileIdx {
        FileIdx(i as u32)
    }
}

/// Rows indexed by one kind of id.
#[derive(Debug)]
pub struct Table<I, T> {
    rows: Vec<T>,
    id: PhantomData<fn(I)>,
}

impl<I: Idx, T> Table<I, T> {
    /// The rows, the first one id 0.
    pub fn new(rows: Vec<T>) -> Table<I, T> {
        Table {
            rows,
            id: PhantomData,
        }
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether there is no row.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Row `i`, if there is one.
    pub fn get(&self, i: I) -> Option<&T> {
        self.rows.get(i.index())
    }

    /// Every (id, row), in order.
    pub fn iter(&self) -> impl Iterator<Item = (I, &T)> {
        self.rows.iter().enumerate().map(|(i, r)| (I::at(i), r))
    }

    /// Every row, in order.
    pub fn rows(&self) -> &[T] {
        &self.rows
    }

    /// The rows, giving the table up (to rebuild it without copying them).
    pub fn into_rows(self) -> Vec<T> {
        self.rows
    }
}

impl<I: Idx, T> Default for Table<I, T> {
    fn default() -> Table<I, T> {
        Table::new(Vec::new())
    }
}

impl<I: Idx, T> std::ops::Index<I> for Table<I, T> {
    type Output = T;
    fn index(&self, i: I) -> &T {
        &self.rows[i.index()]
    }
}

impl<I: Idx, T> std::ops::IndexMut<I> for Table<I, T> {
    fn index_mut(&mut self, i: I) -> &mut T {
        &mut self.rows[i.index()]
    }
}
