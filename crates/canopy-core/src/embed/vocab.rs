//! A WordPiece vocabulary: token → id.
//!
//! Why not a `HashMap<String, u32>`: a one-off command loads the model once
//! per process, and building that map from a 30,000-token `tokenizer.json`
//! (an allocation and a SipHash per token, the table grown step by step)
//! was most of the model's load (issue 31 item 6). Here the tokens are
//! read borrowed from the file's bytes, copied into one string, and found
//! through an open-addressing table of xxh3 hashes.

use std::borrow::Cow;

use serde::de::{Deserialize, Deserializer, Error as _, MapAccess, Visitor};
use xxhash_rust::xxh3::xxh3_64;

/// Token → id. Answers as a `HashMap<String, u32>` filled with the same
/// entries in the same order would: a token given twice keeps its last id
/// and counts once.
#[derive(Debug, Default)]
pub(crate) struct Vocab {
    /// Every distinct token's bytes, one after another.
    text: String,
    /// Per distinct token, in first-seen order.
    entries: Vec<Entry>,
    /// Open addressing (linear probing) over `entries`: an entry's index
    /// plus one, 0 for an empty slot. A power of two long, at most half full.
    slots: Vec<u32>,
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    hash: u64,
    start: u32,
    len: u32,
    id: u32,
}

/// Slots of an empty vocabulary's table.
const FIRST_SLOTS: usize = 1 << 10;

impl Vocab {
    /// Adds `token` with `id`, or gives a token already there this id.
    /// Fails only past 4 GiB of tokens.
    pub(crate) fn insert(&mut self, token: &str, id: u32) -> Result<(), String> {
        if self.slots.is_empty() || (self.entries.len() + 1) * 2 > self.slots.len() {
            self.grow();
        }
        let hash = xxh3_64(token.as_bytes());
        let slot = self.find(hash, token);
        match self.slots[slot] {
            0 => {
                let too_large = || "the vocabulary's tokens pass 4 GiB".to_string();
                let start = u32::try_from(self.text.len()).map_err(|_| too_large())?;
                let len = u32::try_from(token.len()).map_err(|_| too_large())?;
                start.checked_add(len).ok_or_else(too_large)?;
                self.text.push_str(token);
                self.entries.push(Entry {
                    hash,
                    start,
                    len,
                    id,
                });
                self.slots[slot] = self.entries.len() as u32;
            }
            at => self.entries[at as usize - 1].id = id,
        }
        Ok(())
    }

    /// The id of `token`.
    pub(crate) fn get(&self, token: &str) -> Option<u32> {
        if self.slots.is_empty() {
            return None;
        }
        match self.slots[self.find(xxh3_64(token.as_bytes()), token)] {
            0 => None,
            at => Some(self.entries[at as usize - 1].id),
        }
    }

    /// Distinct tokens.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The largest id.
    pub(crate) fn max_id(&self) -> Option<u32> {
        self.entries.iter().map(|e| e.id).max()
    }

    /// Every token with its id.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&str, u32)> {
        self.entries.iter().map(|e| (self.token(e), e.id))
    }

    fn token(&self, e: &Entry) -> &str {
        &self.text[e.start as usize..(e.start + e.len) as usize]
    }

    /// The slot holding `token`, or the empty slot where it would go.
    fn find(&self, hash: u64, token: &str) -> usize {
        let mask = self.slots.len() - 1;
        let mut slot = hash as usize & mask;
        loop {
            match self.slots[slot] {
                0 => return slot,
                at => {
                    let e = &self.entries[at as usize - 1];
                    if e.hash == hash && self.token(e) == token {
                        return slot;
                    }
                }
            }
            slot = (slot + 1) & mask;
        }
    }

    /// Doubles the table (entries keep their hashes: nothing is hashed again).
    fn grow(&mut self) {
        let len = (self.slots.len() * 2).max(FIRST_SLOTS);
        let mask = len - 1;
        let mut slots = vec![0u32; len];
        for (i, e) in self.entries.iter().enumerate() {
            let mut slot = e.hash as usize & mask;
            while slots[slot] != 0 {
                slot = (slot + 1) & mask;
            }
            slots[slot] = i as u32 + 1;
        }
        self.slots = slots;
    }
}

impl<'de> Deserialize<'de> for Vocab {
    /// A JSON object of tokens to ids (`model.vocab` of `tokenizer.json`),
    /// its tokens borrowed from the input where they have no escapes.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Vocab, D::Error> {
        struct Tokens;
        impl<'de> Visitor<'de> for Tokens {
            type Value = Vocab;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object of tokens to ids")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Vocab, A::Error> {
                let mut vocab = Vocab::default();
                while let Some(Token(token)) = map.next_key::<Token<'de>>()? {
                    let id: u32 = map.next_value()?;
                    vocab.insert(&token, id).map_err(A::Error::custom)?;
                }
                Ok(vocab)
            }
        }
        d.deserialize_map(Tokens)
    }
}

/// A token as the input spells it: borrowed when it can be.
struct Token<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Token<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Token<'de>, D::Error> {
        struct Text;
        impl<'de> Visitor<'de> for Text {
            type Value = Token<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a token")
            }
            fn visit_borrowed_str<E: serde::de::Error>(self, s: &'de str) -> Result<Token<'de>, E> {
                Ok(Token(Cow::Borrowed(s)))
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Token<'de>, E> {
                Ok(Token(Cow::Owned(s.to_string())))
            }
            fn visit_string<E: serde::de::Error>(self, s: String) -> Result<Token<'de>, E> {
                Ok(Token(Cow::Owned(s)))
            }
        }
        d.deserialize_str(Text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// The same answers as the map it replaces, duplicates and escapes
    /// included, across the table's growth.
    #[test]
    fn answers_as_a_hash_map_of_the_same_entries() {
        let mut json = String::from("{");
        for i in 0..5_000u32 {
            json.push_str(&format!("\"t{}\":{i},", i % 4_000));
        }
        json.push_str("\"caf\\u00e9\":7,\"a\\\"b\":8,\"[CLS]\":9,\"\":10}");
        let ours: Vocab = serde_json::from_str(&json).unwrap();
        let theirs: HashMap<String, u32> = serde_json::from_str(&json).unwrap();
        assert_eq!(ours.len(), theirs.len());
        for (token, id) in &theirs {
            assert_eq!(ours.get(token), Some(*id), "{token}");
        }
        assert_eq!(ours.get("café"), Some(7));
        assert_eq!(ours.get("a\"b"), Some(8));
        assert_eq!(ours.get("t4000"), None);
        assert_eq!(ours.max_id(), theirs.values().max().copied());
        let mut listed: Vec<(String, u32)> = ours.iter().map(|(t, i)| (t.into(), i)).collect();
        let mut expected: Vec<(String, u32)> = theirs.into_iter().collect();
        listed.sort();
        expected.sort();
        assert_eq!(listed, expected);
    }
}
