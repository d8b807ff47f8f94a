//! Token counting with a real BPE tokenizer (OpenAI `o200k_base`).
//!
//! Counting is done once per unit at index time and stored; queries never
//! tokenize.
//!
//! The count of a text is the sum of the counts of its pre-tokenization
//! pieces (the tokenizer's regex split), each counted by byte-pair
//! encoding over the vocabulary table in [`vocab`]. The tests check every
//! count against the `bpe-openai` crate's `o200k_base` tokenizer, which is
//! not used at run time: building its tables took ~80 ms of CPU and tens
//! of MB in every process that counted anything. Two more things make
//! counting cheap and give the same counts:
//!
//! * ASCII texts (most code) are split by `AsciiPieces`, a hand-written
//!   equivalent of the regex, tested against it; a text with non-ASCII
//!   characters is cut into runs of lines where no piece can span
//!   (`LineRuns`), and only its non-ASCII runs go through the regex
//!   (compiled on first use; [`warm_up_in_background`] compiles it ahead);
//! * source code repeats the same pieces (keywords, identifiers,
//!   punctuation, indentation) over and over, so each thread remembers the
//!   counts of short pieces in a bounded, two-way set-associative table (a
//!   new piece evicts the less recently used piece of its set). A slot holds
//!   the whole piece and its length, so a hit is always the same piece, and
//!   a piece's count does not depend on its context: cached counts are
//!   exactly the counts.

mod vocab;

use std::cell::RefCell;
use std::sync::{Once, OnceLock};

use regex_automata::meta::Regex;
use regex_automata::{Anchored, Input};

/// Pieces up to this many bytes are cached (longer ones are rare and counted directly).
const MAX_CACHED_PIECE: usize = 23;
/// log2 of the number of sets of a thread's table (64 bytes each: 512 KiB) …
const SET_BITS: u32 = 13;
/// … which starts small (16 KiB) and grows to its full size once the thread
/// has counted this many bytes (threads that count a few messages stay small).
const FIRST_SET_BITS: u32 = 8;
const GROW_AFTER_BYTES: usize = 256 * 1024;

/// `o200k_base`'s pre-tokenization pattern, as three alternatives tried at
/// each position (see [`UnicodePieces`]). The original's `\s+(?!\S)` needs
/// a look-ahead, which the regex engine lacks: the middle alternative
/// matches one whitespace character more, which is then given back.
const PRETOKENIZER_PATTERNS: [&str; 3] = [
    concat!(
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
        r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
        r"|\p{N}{1,3}",
        r"| ?[^\s\p{L}\p{N}]+[\r\n/]*",
        r"|\s*[\r\n]+",
        r"|\s+$",
    ),
    r"\s+\s",
    r"\s+",
];
/// Which of [`PRETOKENIZER_PATTERNS`] matched one character too many.
const LOOKAHEAD_PATTERN: usize = 1;

/// The compiled pre-tokenization pattern (on first use: ~10 ms).
fn pretokenizer() -> &'static Regex {
    static REGEX: OnceLock<Regex> = OnceLock::new();
    REGEX.get_or_init(|| {
        Regex::new_many(&PRETOKENIZER_PATTERNS)
            .unwrap_or_else(|e| panic!("the bundled pre-tokenization pattern is invalid: {e}"))
    })
}

/// The pre-tokenization pieces of any text, by the regex.
struct UnicodePieces<'a> {
    regex: &'static Regex,
    text: &'a str,
    pos: usize,
}

impl<'a> Iterator for UnicodePieces<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        let rest = &self.text[self.pos..];
        let found = self.regex.find(Input::new(rest).anchored(Anchored::Yes))?;
        let mut len = found.end();
        if found.pattern().as_usize() == LOOKAHEAD_PATTERN {
            // `\s+\s` matches at least two characters: give the last one back.
            len -= rest[..len].chars().next_back().map_or(0, char::len_utf8);
        }
        if len == 0 {
            return None; // cannot happen (every match is non-empty), but never loop
        }
        let piece = &rest[..len];
        self.pos += len;
        Some(piece)
    }
}

fn unicode_pieces(text: &str) -> UnicodePieces<'_> {
    UnicodePieces {
        regex: pretokenizer(),
        text,
        pos: 0,
    }
}

/// Compiles the pre-tokenization pattern now (otherwise the first count of
/// a non-ASCII text does).
pub fn warm_up() {
    let _ = pretokenizer();
}

/// Compiles the pre-tokenization pattern on a background thread, at most
/// once per process, so that the first non-ASCII text does not wait for it.
pub fn warm_up_in_background() {
    static STARTED: Once = Once::new();
    STARTED.call_once(|| {
        // If no thread can be started, the first non-ASCII count compiles it.
        let _ = std::thread::Builder::new()
            .name("canopy-pretokenizer-init".into())
            .spawn(warm_up);
    });
}

/// A piece of at most [`MAX_CACHED_PIECE`] bytes, zero-padded, with its
/// length in the last byte (so `"a"` and `"a\0"` differ).
type PieceKey = [u64; 3];

fn piece_key(piece: &[u8]) -> Option<PieceKey> {
    if piece.len() > MAX_CACHED_PIECE {
        return None;
    }
    let mut bytes = [0u8; 24];
    bytes[..piece.len()].copy_from_slice(piece);
    bytes[23] = piece.len() as u8;
    let word = |i: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&bytes[i * 8..i * 8 + 8]);
        u64::from_le_bytes(w)
    };
    Some([word(0), word(1), word(2)])
}

#[derive(Clone, Copy, Default)]
struct Slot {
    /// All zero in an empty slot: the key of the empty piece, whose count is 0.
    key: PieceKey,
    count: u32,
}

/// Two slots in one cache line; `slots[0]` is the more recently used.
#[derive(Clone, Copy, Default)]
#[repr(C, align(64))]
struct Set {
    slots: [Slot; 2],
}

/// A thread's table of piece counts.
struct PieceCounts {
    sets: Box<[Set]>,
    bits: u32,
    /// Size the table grows to after [`GROW_AFTER_BYTES`] of text.
    full_bits: u32,
    /// Bytes counted while the table is not full size.
    counted: usize,
}

impl PieceCounts {
    /// A table of `2^bits` sets that grows to `2^full_bits` sets.
    fn new(bits: u32, full_bits: u32) -> PieceCounts {
        assert!(
            (1..=32).contains(&bits) && bits <= full_bits && full_bits <= 32,
            "table of 2..=2^32 sets"
        );
        PieceCounts {
            sets: vec![Set::default(); 1 << bits].into_boxed_slice(),
            bits,
            full_bits,
            counted: 0,
        }
    }

    #[inline]
    fn set_of(&self, key: &PieceKey) -> usize {
        const K: [u64; 3] = [
            0x9e37_79b9_7f4a_7c15,
            0xc2b2_ae3d_27d4_eb4f,
            0x1656_67b1_9e37_79f9,
        ];
        let h =
            ((key[0].wrapping_mul(K[0]) ^ key[1]).wrapping_mul(K[1]) ^ key[2]).wrapping_mul(K[2]);
        (h >> (64 - self.bits)) as usize
    }

    /// Number of `o200k_base` tokens of `text`.
    fn count(&mut self, text: &str) -> usize {
        if self.bits < self.full_bits {
            self.counted += text.len();
            if self.counted > GROW_AFTER_BYTES {
                *self = PieceCounts::new(self.full_bits, self.full_bits);
            }
        }
        // `o200k_base` does not normalise its input: a text's count is
        // exactly the sum of its pieces' counts.
        if text.is_ascii() {
            return self.count_ascii(text);
        }
        // A text with some non-ASCII characters (a translated message, an
        // accented name in a docstring) is split where no piece can span,
        // so that only its non-ASCII lines pay for the regex.
        LineRuns::new(text)
            .map(|(run, ascii)| {
                if ascii {
                    self.count_ascii(run)
                } else {
                    unicode_pieces(run)
                        .map(|piece| self.count_piece(piece.as_bytes()))
                        .sum()
                }
            })
            .sum()
    }

    fn count_ascii(&mut self, text: &str) -> usize {
        AsciiPieces::new(text.as_bytes())
            .map(|piece| self.count_piece(piece))
            .sum()
    }

    #[inline]
    fn count_piece(&mut self, piece: &[u8]) -> usize {
        if piece.len() == 1 {
            // Every byte is a token (`single_bytes_are_single_tokens`).
            return 1;
        }
        let Some(key) = piece_key(piece) else {
            return vocab::piece_token_count(piece);
        };
        let set_index = self.set_of(&key);
        let set = &mut self.sets[set_index];
        if set.slots[0].key != key {
            if set.slots[1].key != key {
                set.slots[1] = Slot {
                    key,
                    count: vocab::piece_token_count(piece) as u32,
                };
            }
            set.slots.swap(0, 1);
        }
        set.slots[0].count as usize
    }
}

/// A text cut into runs of whole lines, each run ASCII or not (the `bool`),
/// at line starts where no pre-tokenization piece can span, so that the
/// pieces of the text are exactly the pieces of its runs, run by run.
///
/// A cut goes after a `\n` whose next line holds, after any spaces and
/// tabs, an ASCII character other than whitespace (and other than `/` right
/// at the line start). No alternative of the pattern (see [`AsciiPieces`])
/// matches across such a place: letters, digits and the optional character
/// before letters exclude `\r` and `\n`; punctuation (4.) is followed only
/// by `[\r\n/]*`; whitespace holding a newline is taken by `\s*[\r\n]+`
/// (5.), which comes first and ends at the run's last newline, and the
/// line's spaces and tabs are followed by a character that is not
/// whitespace. So the pieces of the whole text end there, and the piece
/// that starts there is the same whether the text goes on or not: the only
/// alternative that looks at the end of the text, `\s+$`, never wins at the
/// end of a run, because the run's trailing whitespace ends with its `\n`
/// and 5. comes first. `line_runs_count_as_the_whole_text` checks this
/// against `bpe-openai`.
struct LineRuns<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> LineRuns<'a> {
    fn new(text: &'a str) -> LineRuns<'a> {
        LineRuns { text, pos: 0 }
    }
}

impl<'a> Iterator for LineRuns<'a> {
    type Item = (&'a str, bool);

    fn next(&mut self) -> Option<(&'a str, bool)> {
        let bytes = self.text.as_bytes();
        let start = self.pos;
        if start >= bytes.len() {
            return None;
        }
        let mut ascii: Option<bool> = None;
        let mut line_start = start;
        loop {
            // The line from `line_start`, through its `\n` (or the text's end).
            let line_end = bytes[line_start..]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(bytes.len(), |i| line_start + i + 1);
            let line_ascii = bytes[line_start..line_end].is_ascii();
            match ascii {
                None => ascii = Some(line_ascii),
                Some(run_ascii) if run_ascii != line_ascii && can_cut_before(bytes, line_start) => {
                    self.pos = line_start;
                    return Some((&self.text[start..line_start], run_ascii));
                }
                // The run holds a non-ASCII line: it stays a non-ASCII run.
                Some(run_ascii) => ascii = Some(run_ascii && line_ascii),
            }
            if line_end == bytes.len() {
                self.pos = line_end;
                return Some((&self.text[start..], ascii.unwrap_or(true)));
            }
            line_start = line_end;
        }
    }
}

/// Whether no piece spans the line start `at` (see [`LineRuns`]).
#[inline]
fn can_cut_before(bytes: &[u8], at: usize) -> bool {
    if at == 0 || bytes.get(at - 1) != Some(&b'\n') {
        return false;
    }
    let blanks = bytes[at..]
        .iter()
        .take_while(|&&b| b == b' ' || b == b'\t')
        .count();
    bytes
        .get(at + blanks)
        .is_some_and(|&b| b.is_ascii_graphic() && (blanks > 0 || b != b'/'))
}

/// The pre-tokenization pieces of an ASCII text, exactly as
/// `o200k_base().split` gives them, without running its regex.
///
/// The pattern (`bpe-openai`), tried in this order at each position, the
/// first alternative that matches winning, quantifiers greedy:
///
/// 1. `[^\r\n\p{L}\p{N}]?[\p{Lu}…]*[\p{Ll}…]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?`
/// 2. `[^\r\n\p{L}\p{N}]?[\p{Lu}…]+[\p{Ll}…]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?`
/// 3. `\p{N}{1,3}`
/// 4. ` ?[^\s\p{L}\p{N}]+[\r\n/]*`
/// 5. `\s*[\r\n]+`
/// 6. `\s+$`
/// 7. `\s+\s`, the last character dropped (a look-ahead)
/// 8. `\s+`
///
/// In ASCII, `\p{Lu}…` is `[A-Z]`, `\p{Ll}…` is `[a-z]`, `\p{N}` is
/// `[0-9]` and `\s` is `[\t\n\x0B\x0C\r ]`. The test
/// `ascii_pieces_are_the_regex_pieces` checks this against the crate's own
/// split (exhaustively on short strings), so a change of the pattern in a
/// new `bpe-openai` fails it.
struct AsciiPieces<'a> {
    text: &'a [u8],
    pos: usize,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Ascii {
    Upper,
    Lower,
    Digit,
    /// `\r` or `\n`.
    Newline,
    /// Any other `\s`.
    Space,
    /// Neither a letter, a digit nor whitespace.
    Other,
}

impl Ascii {
    #[inline]
    fn of(byte: u8) -> Ascii {
        match byte {
            b'A'..=b'Z' => Ascii::Upper,
            b'a'..=b'z' => Ascii::Lower,
            b'0'..=b'9' => Ascii::Digit,
            b'\r' | b'\n' => Ascii::Newline,
            b' ' | b'\t' | 0x0B | 0x0C => Ascii::Space,
            _ => Ascii::Other,
        }
    }
}

impl<'a> AsciiPieces<'a> {
    fn new(text: &'a [u8]) -> AsciiPieces<'a> {
        debug_assert!(text.is_ascii());
        AsciiPieces { text, pos: 0 }
    }

    /// End of the run of bytes from `from` for which `keep` holds.
    #[inline]
    fn run_end(&self, from: usize, keep: impl Fn(Ascii) -> bool) -> usize {
        from + self.text[from..]
            .iter()
            .take_while(|&&b| keep(Ascii::of(b)))
            .count()
    }

    /// End of an optional contraction (`'s`, `'T`, `'re`, …) at `at`.
    #[inline]
    fn contraction_end(&self, at: usize) -> usize {
        let t = self.text;
        if t.get(at) != Some(&b'\'') {
            return at;
        }
        let lower = |i: usize| t.get(i).map(u8::to_ascii_lowercase);
        match (lower(at + 1), lower(at + 2)) {
            (Some(b's' | b't' | b'm' | b'd'), _) => at + 2,
            (Some(b'r' | b'v'), Some(b'e')) | (Some(b'l'), Some(b'l')) => at + 3,
            _ => at,
        }
    }

    /// End of the piece that starts at `i` (`i < text.len()`).
    fn piece_end(&self, i: usize) -> usize {
        let t = self.text;
        let first = Ascii::of(t[i]);
        // 1 and 2: an optional leading non-letter, non-digit, non-newline, then letters.
        if first != Ascii::Digit && first != Ascii::Newline {
            let letters = if matches!(first, Ascii::Space | Ascii::Other) {
                i + 1
            } else {
                i
            };
            let upper_end = self.run_end(letters, |c| c == Ascii::Upper);
            let lower_end = self.run_end(upper_end, |c| c == Ascii::Lower);
            // 1 needs a lower-case letter, 2 an upper-case one (then 2's
            // lower-case run is empty, as 1 failed): either way the letters end
            // at `lower_end`.
            if lower_end > upper_end || upper_end > letters {
                return self.contraction_end(lower_end);
            }
        }
        // 3: one to three digits.
        if first == Ascii::Digit {
            return self.run_end(i, |c| c == Ascii::Digit).min(i + 3);
        }
        // 4: an optional space, other characters, then newlines and slashes.
        let other = if t[i] == b' ' { i + 1 } else { i };
        let other_end = self.run_end(other, |c| c == Ascii::Other);
        if other_end > other {
            return other_end
                + t[other_end..]
                    .iter()
                    .take_while(|&&b| matches!(b, b'\r' | b'\n' | b'/'))
                    .count();
        }
        // Only whitespace is left (`first` is `Newline` or `Space`).
        let space_end = self.run_end(i, |c| matches!(c, Ascii::Newline | Ascii::Space));
        // 5: whitespace up to its last newline.
        if let Some(last_newline) = t[i..space_end]
            .iter()
            .rposition(|&b| matches!(b, b'\r' | b'\n'))
        {
            return i + last_newline + 1;
        }
        // 6: whitespace at the end of the text.
        if space_end == t.len() {
            return space_end;
        }
        // 7: whitespace but its last character (which stays with what follows), …
        if space_end - i >= 2 {
            return space_end - 1;
        }
        // 8: … or a single whitespace character.
        space_end
    }
}

impl<'a> Iterator for AsciiPieces<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        let start = self.pos;
        if start >= self.text.len() {
            return None;
        }
        let end = self.piece_end(start);
        self.pos = end;
        Some(&self.text[start..end])
    }
}

thread_local! {
    static PIECE_COUNTS: RefCell<Option<PieceCounts>> = const { RefCell::new(None) };
}

/// Number of `o200k_base` tokens in `text`.
pub fn count_tokens(text: &str) -> usize {
    if text.is_empty() {
        return 0;
    }
    #[cfg(feature = "count-log")]
    count_log::note(text);
    PIECE_COUNTS.with(|cache| match cache.try_borrow_mut() {
        Ok(mut cache) => cache
            .get_or_insert_with(|| PieceCounts::new(FIRST_SET_BITS, SET_BITS))
            .count(text),
        // Not reachable (counting does not re-enter), but never worth a panic.
        Err(_) => PieceCounts::new(1, 1).count(text),
    })
}

/// Which texts a thread counts, for tests of callers that must count each
/// text once (feature `count-log`; callers' test builds turn it on).
#[cfg(feature = "count-log")]
pub mod count_log {
    use std::cell::RefCell;

    thread_local! {
        static LOG: RefCell<Option<Vec<String>>> = const { RefCell::new(None) };
    }

    /// Runs `f` and returns what it returned and every non-empty text
    /// [`super::count_tokens`] counted on this thread meanwhile, in order.
    pub fn record<R>(f: impl FnOnce() -> R) -> (R, Vec<String>) {
        LOG.with(|log| *log.borrow_mut() = Some(Vec::new()));
        let out = f();
        let texts = LOG.with(|log| log.borrow_mut().take()).unwrap_or_default();
        (out, texts)
    }

    pub(super) fn note(text: &str) {
        LOG.with(|log| {
            if let Ok(mut log) = log.try_borrow_mut()
                && let Some(log) = log.as_mut()
            {
                log.push(text.to_string());
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::xorshift;

    #[test]
    fn counts_are_real_bpe_counts() {
        warm_up_in_background();
        assert_eq!(count_tokens(""), 0);
        // "hello world" is two tokens in every OpenAI BPE.
        assert_eq!(count_tokens("hello world"), 2);
        let code = "fn parse_expr(input: &str) -> Result<Expr, ParseError> { todo!() }";
        let n = count_tokens(code);
        assert!(n > 10 && n < 30, "{n}");
    }

    /// Texts of many shapes: code in several languages, prose, unicode,
    /// whitespace runs, long lines and long pieces.
    fn corpus() -> Vec<String> {
        let mut texts: Vec<String> = [
            "",
            " ",
            "\n",
            "\r\n",
            "   \n\n\t  \n",
            "a",
            "hello world",
            "fn parse_expr(input: &str) -> Result<Expr, ParseError> { todo!() }",
            "use std::collections::{BTreeMap, HashMap};\n\nimpl<'a, T: Clone + 'a> Foo<'a, T> {\n    pub(crate) async fn run(&mut self) -> io::Result<()> {\n        let x = self.inner.lock().await?;\n        Ok(())\n    }\n}\n",
            "def __init__(self, *args, **kwargs):\n    super().__init__(*args, **kwargs)\n    self._cache = {}  # type: dict[str, int]\n\n\n@decorator\nclass Foo(Base):\n    \"\"\"Docstring with 'quotes' and \\\"escapes\\\".\"\"\"\n    pass\n",
            "export const useFoo = <T,>(x: T): Promise<T[]> => { return fetch(`/api/${x}?q=1&r=2`).then(r => r.json()); };\n// TODO(someone): fix this\n/** JSDoc @param {string} a */\n",
            "func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {\n\tif err := s.h(w, r); err != nil {\n\t\tlog.Printf(\"error: %v\", err)\n\t}\n}\n",
            "# Title\n\nSome *markdown* with `code`, [links](http://example.com/a_b-c.html) and lists:\n\n- one\n- two\n\n```rust\nlet x = 1;\n```\n",
            "I'm sure they'll say you've done it, we'd CAN'T WON'T don't I'M",
            "0 1 12 123 1234 12345 3.14159 0xDEADBEEF 1_000_000 1e-9 ½ ² Ⅻ",
            "héllo wörld — “quotes” ‘single’ … naïve café Ångström",
            "日本語のテキスト、中文文本，한국어 텍스트. Русский текст, ελληνικά, العربية, עברית",
            "emoji 🎉🚀👍🏽 family 👨‍👩‍👧‍👦 flags 🇫🇷🇯🇵 and ZWJ\u{200d}and\u{200b}space",
            "tabs\t\t\tand  spaces   mixed \t \t end   ",
            "trailing spaces   \n   leading spaces\n\n\n\n   \n",
            "CamelCaseIdentifier snake_case_identifier SCREAMING_CASE kebab-case dotted.name::path",
            "{{{{}}}}(((())))[[[[]]]];;;;,,,,....////\\\\\\\\====!==!=>>=<<=&&||??",
            "a\u{0301} e\u{0300} combining marks, \u{feff}BOM, \u{00a0}nbsp, \u{2028}line sep",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        // Long lines, long runs, long identifiers (pieces longer than the cache limit).
        texts.push("x".repeat(5000));
        texts.push(" ".repeat(300) + "end");
        texts.push("\n".repeat(200));
        texts.push("ab_".repeat(40));
        texts.push("Identifier".repeat(20));
        texts.push("=".repeat(257));
        texts.push("é".repeat(100));
        texts.push(
            (0..400)
                .map(|i| format!("let v{i} = f{}(a, b[{i}]);", i % 7))
                .collect::<Vec<_>>()
                .join(" "),
        );
        // Many lines of repeated code: the cache is hit a lot.
        let block = texts[8].clone() + &texts[9] + &texts[10] + &texts[11];
        texts.push(block.repeat(20));
        // Every character class next to every other.
        let pieces = [
            "a", "Z", "é", "É", "1", "٣", " ", "  ", "\t", "\n", "\r\n", "'s", "'LL", ".", "::",
            "/", "日", "🎉", "_", "\u{0301}",
        ];
        let mut mixed = String::new();
        for a in pieces {
            for b in pieces {
                for c in pieces {
                    mixed.push_str(a);
                    mixed.push_str(b);
                    mixed.push_str(c);
                }
            }
        }
        texts.push(mixed);
        // Real files of this repository.
        for source in [
            include_str!("lang/extract.rs"),
            include_str!("text.rs"),
            include_str!("../queries/rust.scm"),
            include_str!("../../../ARCHITECTURE.md"),
        ] {
            texts.push(source.to_string());
        }
        texts
    }

    #[test]
    fn cached_counts_equal_uncached_counts() {
        let tokenizer = bpe_openai::o200k_base();
        let texts = corpus();
        // Twice: the first pass fills the cache, the second one reads it.
        for _ in 0..2 {
            for text in &texts {
                assert_eq!(
                    count_tokens(text),
                    tokenizer.count(text.as_str()),
                    "{text:?}"
                );
            }
        }
        // A tiny table, where pieces evict each other all the time, gives the same counts.
        for bits in [1, 2, 6] {
            let mut cache = PieceCounts::new(bits, bits);
            for text in &texts {
                let direct = tokenizer.count(text.as_str());
                assert_eq!(cache.count(text), direct, "{text:?}");
                assert_eq!(cache.count(text), direct, "{text:?}");
            }
        }
    }

    /// `AsciiPieces` against the regex split of `bpe-openai`.
    fn assert_same_pieces(text: &str) {
        let tokenizer = bpe_openai::o200k_base();
        let expected: Vec<&[u8]> = tokenizer.split(text).map(str::as_bytes).collect();
        let got: Vec<&[u8]> = AsciiPieces::new(text.as_bytes()).collect();
        assert_eq!(got, expected, "{text:?}");
    }

    /// Calls `f` with every string of length `0..=max_len` over `alphabet`.
    fn for_all_strings(alphabet: &[u8], max_len: usize, f: &mut impl FnMut(&str)) {
        let mut buf = Vec::with_capacity(max_len);
        fn rec(alphabet: &[u8], max_len: usize, buf: &mut Vec<u8>, f: &mut impl FnMut(&str)) {
            f(std::str::from_utf8(buf).expect("ASCII"));
            if buf.len() == max_len {
                return;
            }
            for &b in alphabet {
                buf.push(b);
                rec(alphabet, max_len, buf, f);
                buf.pop();
            }
        }
        rec(alphabet, max_len, &mut buf, f);
    }

    #[test]
    fn ascii_pieces_are_the_regex_pieces() {
        // Every class of the pattern: lower, upper, digit, newlines, other
        // whitespace (space, tab, vertical tab, form feed), quote, slash, other
        // punctuation and controls that are not whitespace.
        for_all_strings(b"aZ0 \t\n\r\x0b'/._", 5, &mut assert_same_pieces);
        for_all_strings(b"a \x0c\x1f\x00\x7f-\n", 5, &mut assert_same_pieces);
        // Contractions, in either case, in and out of words.
        for_all_strings(b"'sStTrReEvVlLmMdDx ", 4, &mut assert_same_pieces);
        // Digit runs and letter runs of every length around them.
        for_all_strings(b"0aA ", 7, &mut assert_same_pieces);
        // Random ASCII texts (a fixed xorshift sequence), short and long.
        let mut next = xorshift(0x2545_f491_4f6c_dd1d_u64);
        for case in 0..20_000 {
            let len = (next() % if case % 10 == 0 { 400 } else { 40 }) as usize;
            let text: String = (0..len)
                .map(|_| {
                    let r = next();
                    // Mostly code-like characters, sometimes any ASCII byte.
                    if r.is_multiple_of(4) {
                        char::from((r >> 8) as u8 & 0x7f)
                    } else {
                        let code = b"aAzZ09 \n\t'_./s";
                        char::from(code[(r >> 8) as usize % code.len()])
                    }
                })
                .collect();
            assert_same_pieces(&text);
        }
        for text in corpus().iter().filter(|t| t.is_ascii()) {
            assert_same_pieces(text);
        }
    }

    #[test]
    fn unicode_pieces_are_the_regex_pieces_of_bpe_openai() {
        let tokenizer = bpe_openai::o200k_base();
        let check = |text: &str| {
            let expected: Vec<&str> = tokenizer.split(text).collect();
            let got: Vec<&str> = unicode_pieces(text).collect();
            assert_eq!(got, expected, "{text:?}");
        };
        for text in corpus() {
            check(&text);
        }
        // Random texts over characters of every class the pattern names
        // (a fixed xorshift sequence).
        let alphabet: Vec<char> =
            "aZéÉǅʰ中\u{0301}1٣½ \t\n\r\u{a0}\u{2028}'sSlLdD.,/\\_-🎉\u{200d}"
                .chars()
                .collect();
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15_u64);
        for case in 0..5_000 {
            let len = (next() % if case % 10 == 0 { 200 } else { 24 }) as usize;
            let text: String = (0..len)
                .map(|_| alphabet[(next() >> 8) as usize % alphabet.len()])
                .collect();
            check(&text);
            assert_eq!(
                count_tokens(&text),
                tokenizer.count(text.as_str()),
                "{text:?}"
            );
        }
    }

    /// The pieces of a text's line runs, run after run.
    fn line_run_pieces(text: &str) -> Vec<&str> {
        let mut pieces = Vec::new();
        for (run, ascii) in LineRuns::new(text) {
            assert_eq!(ascii, run.is_ascii(), "{run:?} of {text:?}");
            if ascii {
                pieces.extend(
                    AsciiPieces::new(run.as_bytes())
                        .map(|p| std::str::from_utf8(p).expect("ASCII")),
                );
            } else {
                pieces.extend(unicode_pieces(run));
            }
        }
        pieces
    }

    #[test]
    fn line_runs_count_as_the_whole_text() {
        let tokenizer = bpe_openai::o200k_base();
        let check = |text: &str| {
            let runs: Vec<&str> = LineRuns::new(text).map(|(run, _)| run).collect();
            assert_eq!(runs.concat(), text);
            let expected: Vec<&str> = tokenizer.split(text).collect();
            assert_eq!(line_run_pieces(text), expected, "{text:?}");
            assert_eq!(count_tokens(text), tokenizer.count(text), "{text:?}");
        };
        for text in corpus() {
            check(&text);
        }
        // Lines of every kind after one another: ASCII and not, starting
        // with blanks, slashes, punctuation, letters, digits, newlines and
        // Unicode whitespace, ending with and without `\r` (a fixed xorshift
        // sequence).
        let starts = [
            "", " ", "  ", "\t", " \t ", "/", " /", "//", "}", "#", "a", "Z", "1", "'s", "\r",
            "\n", " \n", "\u{a0}", "\u{2028}", "é", " é", "\u{0301}", "日", "-",
        ];
        let bodies = [
            "",
            "x",
            "msgid \"Hello\"",
            "msgstr \"Grüß dich\"",
            "{",
            "}",
            "/",
            "//",
            " ",
            "  ",
            "self.a = b",
            "naïve café",
            "中文 text",
            "🎉",
            "x /",
            "end  ",
            "'ll",
            "\u{a0}",
        ];
        let ends = ["\n", "\r\n", "\n\n", " \n", "\n \n", ""];
        let mut next = xorshift(0x51ed_270b_2c4e_9f3d_u64);
        for case in 0..20_000 {
            let lines = 1 + (next() % if case % 10 == 0 { 30 } else { 6 }) as usize;
            let mut text = String::new();
            for _ in 0..lines {
                text.push_str(starts[(next() >> 8) as usize % starts.len()]);
                text.push_str(bodies[(next() >> 8) as usize % bodies.len()]);
                text.push_str(ends[(next() >> 8) as usize % ends.len()]);
            }
            check(&text);
        }
    }

    #[test]
    fn merge_counts_equal_bpe_openai_for_long_and_odd_pieces() {
        let bpe = &bpe_openai::o200k_base().bpe;
        let mut next = xorshift(0x2545_f491_4f6c_dd1d_u64);
        // Arbitrary bytes (not even UTF-8): BPE works on bytes.
        for case in 0..3_000 {
            let len = 2 + (next() % if case % 10 == 0 { 300 } else { 30 }) as usize;
            let piece: Vec<u8> = (0..len)
                .map(|_| {
                    let r = next();
                    if r.is_multiple_of(3) {
                        (r >> 8) as u8
                    } else {
                        b"abcdeinorst _"[(r >> 8) as usize % 13]
                    }
                })
                .collect();
            assert_eq!(
                vocab::piece_token_count(&piece),
                bpe.count(&piece),
                "{piece:?}"
            );
        }
    }

    #[test]
    fn tables_grow_and_keep_counting_right() {
        let tokenizer = bpe_openai::o200k_base();
        let mut cache = PieceCounts::new(2, 5);
        let text = corpus().concat();
        let mut counted = 0;
        while cache.bits < 5 {
            assert_eq!(cache.count(&text), tokenizer.count(text.as_str()));
            counted += text.len();
            assert!(counted <= GROW_AFTER_BYTES + text.len());
        }
        assert_eq!(cache.sets.len(), 32);
        assert_eq!(cache.count(&text), tokenizer.count(text.as_str()));
    }

    #[test]
    fn single_bytes_are_single_tokens() {
        // A one-byte piece of a `str` is an ASCII character.
        let tokenizer = bpe_openai::o200k_base();
        for b in 0u8..128 {
            assert_eq!(tokenizer.bpe.count(&[b]), 1, "{b}");
            let text = char::from(b).to_string();
            assert_eq!(tokenizer.count(text.as_str()), 1, "{b}");
        }
    }

    #[test]
    fn keys_are_exact() {
        assert_ne!(piece_key(b"a"), piece_key(b"a\0"));
        assert_ne!(piece_key(b""), piece_key(b"\0"));
        assert_eq!(piece_key(b""), Some(Slot::default().key));
        assert!(piece_key(&[b'x'; MAX_CACHED_PIECE]).is_some());
        assert!(piece_key(&[b'x'; MAX_CACHED_PIECE + 1]).is_none());
        let tokenizer = bpe_openai::o200k_base();
        let mut cache = PieceCounts::new(1, 1);
        for text in ["a", "a\0", "\0", "\0\0a", " abc", "abc", " abc\0"] {
            assert_eq!(cache.count(text), tokenizer.count(text), "{text:?}");
        }
        // Many distinct words (` a b … z ba …`, base 26) through a small table.
        let word = |mut i: usize| {
            let mut w = String::from(" ");
            loop {
                w.push(char::from(b'a' + (i % 26) as u8));
                i /= 26;
                if i == 0 {
                    break w;
                }
            }
        };
        let text: String = (0..20_000).map(word).collect();
        let mut cache = PieceCounts::new(8, 8);
        assert_eq!(cache.count(&text), tokenizer.count(text.as_str()));
    }
}
