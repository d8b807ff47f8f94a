//! Serialization that tags handles with where they came from: [`Tagged`]
//! serializes a value as usual, and every struct of one of the answer's
//! handle types (by serde name: `Handle`, `PackHandle`, …) gets `source`
//! — and for the service's own, `commit_sha` and `generation` — after its
//! own fields, wherever it sits in the answer. Types, not JSON key paths,
//! decide, so a handle that a new field of an answer holds is tagged too.
//!
//! The adapter forwards every other call unchanged to the serializer it
//! wraps, re-wrapping nested values so the rule reaches every depth.

use std::collections::BTreeSet;

use serde::ser::{
    Serialize, SerializeMap, SerializeSeq, SerializeStruct, SerializeStructVariant, SerializeTuple,
    SerializeTupleStruct, SerializeTupleVariant, Serializer,
};

/// The field of a handle type that says which file it is in.
const FILE_PATH: &str = "file_path";

/// Which structs are handles and how each is tagged.
pub(crate) struct Tagging<'a> {
    /// Serde names of the handle types.
    pub handles: &'static [&'static str],
    /// Of those, the types an overlay merges in: one in a file of
    /// `local_files` is the overlay's.
    pub overlaid: &'static [&'static str],
    /// The service's provenance for its own handles (`None`: they carry none).
    pub service: Option<(&'a Option<String>, u64)>,
    /// Files with uncommitted changes (client side; empty on the server).
    pub local_files: &'a BTreeSet<String>,
}

/// What a handle says about where it came from.
enum Origin<'a> {
    /// `source: "service"`, `commit_sha`, `generation`.
    Service(&'a Option<String>, u64),
    /// `source: "local"`.
    Local,
}

impl Tagging<'_> {
    fn origin(&self, name: &str, file_path: Option<&str>) -> Option<Origin<'_>> {
        let local = self.overlaid.contains(&name)
            && file_path.is_some_and(|p| self.local_files.contains(p));
        if local {
            return Some(Origin::Local);
        }
        self.service
            .map(|(commit_sha, generation)| Origin::Service(commit_sha, generation))
    }
}

/// `value`, serialized with its handles tagged by `tagging`.
pub(crate) struct Tagged<'a, T: ?Sized> {
    pub value: &'a T,
    pub tagging: &'a Tagging<'a>,
}

impl<T: ?Sized + Serialize> Serialize for Tagged<'_, T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.value.serialize(Tagger {
            inner: serializer,
            tagging: self.tagging,
        })
    }
}

struct Tagger<'a, S> {
    inner: S,
    tagging: &'a Tagging<'a>,
}

macro_rules! forward {
    ($($method:ident($($arg:ident: $ty:ty),*);)*) => {
        $(fn $method(self, $($arg: $ty),*) -> Result<S::Ok, S::Error> {
            self.inner.$method($($arg),*)
        })*
    };
}

/// Sequences, tuples, maps and variants: their elements are tagged in turn.
macro_rules! compounds {
    ($($method:ident($($arg:ident: $ty:ty),*) -> $assoc:ident;)*) => {
        $(fn $method(self, $($arg: $ty),*) -> Result<Self::$assoc, S::Error> {
            let tagging = self.tagging;
            Ok(Compound {
                inner: self.inner.$method($($arg),*)?,
                tagging,
            })
        })*
    };
}

impl<'a, S: Serializer> Serializer for Tagger<'a, S> {
    type Ok = S::Ok;
    type Error = S::Error;
    type SerializeSeq = Compound<'a, S::SerializeSeq>;
    type SerializeTuple = Compound<'a, S::SerializeTuple>;
    type SerializeTupleStruct = Compound<'a, S::SerializeTupleStruct>;
    type SerializeTupleVariant = Compound<'a, S::SerializeTupleVariant>;
    type SerializeMap = Compound<'a, S::SerializeMap>;
    type SerializeStruct = TagStruct<'a, S::SerializeStruct>;
    type SerializeStructVariant = Compound<'a, S::SerializeStructVariant>;

    forward! {
        serialize_bool(v: bool);
        serialize_i8(v: i8);
        serialize_i16(v: i16);
        serialize_i32(v: i32);
        serialize_i64(v: i64);
        serialize_i128(v: i128);
        serialize_u8(v: u8);
        serialize_u16(v: u16);
        serialize_u32(v: u32);
        serialize_u64(v: u64);
        serialize_u128(v: u128);
        serialize_f32(v: f32);
        serialize_f64(v: f64);
        serialize_char(v: char);
        serialize_str(v: &str);
        serialize_bytes(v: &[u8]);
        serialize_none();
        serialize_unit();
        serialize_unit_struct(name: &'static str);
        serialize_unit_variant(name: &'static str, index: u32, variant: &'static str);
    }

    fn serialize_some<T: ?Sized + Serialize>(self, value: &T) -> Result<S::Ok, S::Error> {
        let tagging = self.tagging;
        self.inner.serialize_some(&Tagged { value, tagging })
    }

    fn serialize_newtype_struct<T: ?Sized + Serialize>(
        self,
        name: &'static str,
        value: &T,
    ) -> Result<S::Ok, S::Error> {
        let tagging = self.tagging;
        self.inner
            .serialize_newtype_struct(name, &Tagged { value, tagging })
    }

    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<S::Ok, S::Error> {
        let tagging = self.tagging;
        self.inner
            .serialize_newtype_variant(name, index, variant, &Tagged { value, tagging })
    }

    compounds! {
        serialize_seq(len: Option<usize>) -> SerializeSeq;
        serialize_tuple(len: usize) -> SerializeTuple;
        serialize_tuple_struct(name: &'static str, len: usize) -> SerializeTupleStruct;
        serialize_tuple_variant(
            name: &'static str,
            index: u32,
            variant: &'static str,
            len: usize
        ) -> SerializeTupleVariant;
        serialize_map(len: Option<usize>) -> SerializeMap;
        serialize_struct_variant(
            name: &'static str,
            index: u32,
            variant: &'static str,
            len: usize
        ) -> SerializeStructVariant;
    }

    fn serialize_struct(
        self,
        name: &'static str,
        len: usize,
    ) -> Result<Self::SerializeStruct, S::Error> {
        let handle = self.tagging.handles.contains(&name);
        // Room for `source`, `commit_sha` and `generation`.
        let len = if handle { len + 3 } else { len };
        let tagging = self.tagging;
        Ok(TagStruct {
            inner: self.inner.serialize_struct(name, len)?,
            tagging,
            name,
            handle,
            file_path: None,
        })
    }

    fn is_human_readable(&self) -> bool {
        self.inner.is_human_readable()
    }
}

/// A sequence, tuple, map or variant whose elements are tagged in turn.
struct Compound<'a, C> {
    inner: C,
    tagging: &'a Tagging<'a>,
}

impl<'a, C> Compound<'a, C> {
    fn wrap<'v, T: ?Sized>(&self, value: &'v T) -> Tagged<'v, T>
    where
        'a: 'v,
    {
        Tagged {
            value,
            tagging: self.tagging,
        }
    }
}

/// The compound serializers whose elements come one value at a time.
macro_rules! elements {
    ($($trait:ident::$method:ident;)*) => {
        $(impl<C: $trait> $trait for Compound<'_, C> {
            type Ok = C::Ok;
            type Error = C::Error;
            fn $method<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), C::Error> {
                let value = self.wrap(value);
                self.inner.$method(&value)
            }
            fn end(self) -> Result<C::Ok, C::Error> {
                self.inner.end()
            }
        })*
    };
}

elements! {
    SerializeSeq::serialize_element;
    SerializeTuple::serialize_element;
    SerializeTupleStruct::serialize_field;
    SerializeTupleVariant::serialize_field;
}

impl<C: SerializeMap> SerializeMap for Compound<'_, C> {
    type Ok = C::Ok;
    type Error = C::Error;
    fn serialize_key<T: ?Sized + Serialize>(&mut self, key: &T) -> Result<(), C::Error> {
        let key = self.wrap(key);
        self.inner.serialize_key(&key)
    }
    fn serialize_value<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), C::Error> {
        let value = self.wrap(value);
        self.inner.serialize_value(&value)
    }
    fn end(self) -> Result<C::Ok, C::Error> {
        self.inner.end()
    }
}

impl<C: SerializeStructVariant> SerializeStructVariant for Compound<'_, C> {
    type Ok = C::Ok;
    type Error = C::Error;
    fn serialize_field<T: ?Sized + Serialize>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), C::Error> {
        let value = self.wrap(value);
        self.inner.serialize_field(key, &value)
    }
    fn skip_field(&mut self, key: &'static str) -> Result<(), C::Error> {
        self.inner.skip_field(key)
    }
    fn end(self) -> Result<C::Ok, C::Error> {
        self.inner.end()
    }
}

/// A struct; a handle gets its origin after its own fields.
struct TagStruct<'a, C> {
    inner: C,
    tagging: &'a Tagging<'a>,
    name: &'static str,
    handle: bool,
    /// The handle's `file_path`, once serialized.
    file_path: Option<String>,
}

impl<C: SerializeStruct> SerializeStruct for TagStruct<'_, C> {
    type Ok = C::Ok;
    type Error = C::Error;

    fn serialize_field<T: ?Sized + Serialize>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), C::Error> {
        if self.handle && key == FILE_PATH {
            self.file_path = serde_json::to_value(value)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string));
        }
        let tagging = self.tagging;
        self.inner.serialize_field(key, &Tagged { value, tagging })
    }

    fn skip_field(&mut self, key: &'static str) -> Result<(), C::Error> {
        self.inner.skip_field(key)
    }

    fn end(mut self) -> Result<C::Ok, C::Error> {
        if self.handle {
            match self.tagging.origin(self.name, self.file_path.as_deref()) {
                Some(Origin::Service(commit_sha, generation)) => {
                    self.inner.serialize_field("source", "service")?;
                    self.inner.serialize_field("commit_sha", commit_sha)?;
                    self.inner.serialize_field("generation", &generation)?;
                }
                Some(Origin::Local) => self.inner.serialize_field("source", "local")?,
                None => {}
            }
        }
        self.inner.end()
    }
}
