//! Handle ids: `h` followed by 24 lower-case hex digits.
//!
//! **Rule (an architecture invariant):** an id depends on the unit's
//! identity, never on its position.
//!
//! * named units (functions, classes, sections, …):
//!   `xxh3_128(path, node_type, qualified_name, ordinal)`;
//! * anonymous units (paragraphs, code blocks, chunks):
//!   `xxh3_128(path, node_type, parent's qualified name, hash of the
//!   whitespace-collapsed text, ordinal)`;
//!
//! where `ordinal` counts earlier units of the same file with the same
//! `(node_type, identity)` — it only matters for true duplicates such as two
//! `impl Foo` blocks. So editing code above a function leaves its id alone;
//! renaming it, moving it to another file, or (for anonymous units) editing
//! its text gives a new id.

use std::fmt;

use serde::{Deserialize, Serialize};

use xxhash_rust::xxh3::xxh3_128;

/// A byte range `[start, end)` in a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Span {
    /// First byte.
    pub start: usize,
    /// One past the last byte.
    pub end: usize,
}

/// A pointer to one indexed unit (~25 tokens when serialized without content).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Handle {
    /// Stable id (`h` + 24 hex).
    pub id: HandleId,
    /// Repo-relative path with `/` separators.
    pub file_path: String,
    /// `function`, `class`, `section`, `chunk`, …
    pub node_type: String,
    /// The unit's own name (`serialize`), for named units.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub name: Option<String>,
    /// Its name with its enclosing units (`JSONSerializer.serialize`): tells
    /// same-named units apart.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub qualified_name: Option<String>,
    /// Byte span in the file.
    pub span: Span,
    /// 1-based inclusive line range.
    pub line_range: [u32; 2],
    /// BPE tokens of the span.
    pub token_count: u32,
    /// ~100 bytes, one line, starting at the signature.
    pub preview: String,
    /// The span's text, when expanded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// The file changed on disk since it was indexed: the lines and preview
    /// may be off. Re-index (or wait for `canopy watch`) before expanding.
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub stale: bool,
}

/// A stable handle id (`h` + 24 hex chars).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct HandleId(String);

impl HandleId {
    /// Derives the id of a unit from its identity (see the module docs).
    pub fn derive(path: &str, node_type: &str, identity: &str, ordinal: u32) -> HandleId {
        let mut key = Vec::with_capacity(path.len() + node_type.len() + identity.len() + 8);
        key.extend_from_slice(path.as_bytes());
        key.push(0);
        key.extend_from_slice(node_type.as_bytes());
        key.push(0);
        key.extend_from_slice(identity.as_bytes());
        key.push(0);
        key.extend_from_slice(&ordinal.to_le_bytes());
        let hash = xxh3_128(&key);
        // 96 bits: the top 24 hex digits of the 128-bit hash.
        HandleId(format!("h{:024x}", hash >> 32))
    }

    /// Parses user input; `None` if it is not of the form `h` + 24 hex digits.
    pub fn parse(text: &str) -> Option<HandleId> {
        let text = text.trim();
        let hex = text.strip_prefix('h')?;
        if hex.len() == 24 && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            Some(HandleId(format!("h{}", hex.to_ascii_lowercase())))
        } else {
            None
        }
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for HandleId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for HandleId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Hash of a unit's whitespace-collapsed text, used as the identity of anonymous units.
pub fn content_identity(text: &str) -> String {
    let digest = if text.is_ascii() {
        ascii_words_digest(text.as_bytes())
    } else {
        words_digest(text)
    };
    format!("{:016x}", digest)
}

/// The hash of the words of `text` (split at Unicode white space) joined by
/// single spaces, fed to the hasher word by word.
fn words_digest(text: &str) -> u64 {
    let mut hasher = xxhash_rust::xxh3::Xxh3Default::new();
    for (i, word) in text.split_whitespace().enumerate() {
        if i > 0 {
            hasher.update(b" ");
        }
        hasher.update(word.as_bytes());
    }
    hasher.digest()
}

/// [`words_digest`] of an ASCII text: the words are joined into a buffer
/// kept per thread and hashed at once (XXH3's one-shot and streaming forms
/// give the same hash). Splitting bytes instead of characters and hashing
/// once instead of per word is what makes it cheaper: chunk and paragraph
/// units (every line outside a definition, every Markdown paragraph) all
/// pass here.
fn ascii_words_digest(text: &[u8]) -> u64 {
    thread_local! {
        static JOINED: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    // `char::is_whitespace` on ASCII: tab, line feed, vertical tab, form
    // feed, carriage return and space (`u8::is_ascii_whitespace` leaves out
    // the vertical tab).
    let space = |b: &u8| matches!(b, b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | b' ');
    JOINED.with(|joined| {
        let mut joined = joined.borrow_mut();
        joined.clear();
        for word in text.split(space).filter(|w| !w.is_empty()) {
            if !joined.is_empty() {
                joined.push(b' ');
            }
            joined.extend_from_slice(word);
        }
        let digest = xxhash_rust::xxh3::xxh3_64(&joined);
        if joined.capacity() > 1 << 20 {
            // One huge unit must not pin its size for the thread's life.
            *joined = Vec::new();
        }
        digest
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ascii_texts_hash_as_their_words_do() {
        // The ASCII path must give what the word-by-word one gives, for
        // every kind of white space and run of it.
        let texts = [
            "",
            " ",
            "one",
            "  def f(x):\n    return x\t+ 1\r\n\n",
            "a\x0bb\x0cc\rd\te\nf g",
            "\x1c not white space \x1f",
            "trailing   ",
        ];
        for text in texts {
            assert_eq!(
                ascii_words_digest(text.as_bytes()),
                words_digest(text),
                "{text:?}"
            );
        }
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for len in [1usize, 7, 64, 300, 5_000] {
            let text: String = (0..len)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    // Mostly letters, often white space of every kind.
                    b"ab \t\n\x0b\x0c\rxyz_(AQ1"[(state % 16) as usize] as char
                })
                .collect();
            assert_eq!(
                ascii_words_digest(text.as_bytes()),
                words_digest(&text),
                "{text:?}"
            );
            assert_eq!(
                content_identity(&text),
                format!("{:016x}", words_digest(&text))
            );
        }
        // Non-ASCII white space still splits words (the other path).
        assert_eq!(content_identity("a\u{a0}b"), content_identity("a b"));
    }

    #[test]
    fn ids_have_the_documented_shape() {
        let id = HandleId::derive("src/a.rs", "function", "parse", 0);
        assert_eq!(id.as_str().len(), 25);
        assert!(id.as_str().starts_with('h'));
        assert_eq!(HandleId::parse(id.as_str()), Some(id.clone()));
        assert_ne!(id, HandleId::derive("src/a.rs", "function", "parse", 1));
        assert_ne!(id, HandleId::derive("src/b.rs", "function", "parse", 0));
        assert_ne!(id, HandleId::derive("src/a.rs", "method", "parse", 0));
    }

    #[test]
    fn parse_rejects_malformed_ids() {
        assert!(HandleId::parse("h123").is_none());
        assert!(HandleId::parse("x0123456789abcdef01234567").is_none());
        assert!(HandleId::parse("h0123456789abcdef0123456g").is_none());
        assert!(HandleId::parse("H0123456789ABCDEF01234567").is_none());
        assert!(HandleId::parse("h0123456789ABCDEF01234567").is_some());
    }

    #[test]
    fn content_identity_ignores_whitespace_layout() {
        assert_eq!(content_identity("a  b\n c"), content_identity("a b c"));
        assert_ne!(content_identity("a b"), content_identity("a c"));
    }

    #[test]
    fn content_identity_is_the_hash_of_the_collapsed_text() {
        // Stored identities (handles of anonymous units) must not change.
        let long = "word  ".repeat(100) + "\u{a0}end\t";
        for text in [
            "",
            " ",
            "a",
            "  a  ",
            "a  b\n c",
            "x\u{2028}y é",
            long.as_str(),
        ] {
            let collapsed = text.split_whitespace().collect::<Vec<_>>().join(" ");
            assert_eq!(
                content_identity(text),
                format!("{:016x}", xxhash_rust::xxh3::xxh3_64(collapsed.as_bytes())),
                "{text:?}"
            );
        }
    }
}
