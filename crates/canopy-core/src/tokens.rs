//! Token counting with a real BPE tokenizer (OpenAI `o200k_base`).
//!
//! Counting is done once per unit at index time and stored; queries never
//! tokenize. The tokenizer tables are built lazily on first use.

/// Number of `o200k_base` tokens in `text`.
pub fn count_tokens(text: &str) -> usize {
    if text.is_empty() {
        return 0;
    }
    bpe_openai::o200k_base().count(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_real_bpe_counts() {
        assert_eq!(count_tokens(""), 0);
        // "hello world" is two tokens in every OpenAI BPE.
        assert_eq!(count_tokens("hello world"), 2);
        let code = "fn parse_expr(input: &str) -> Result<Expr, ParseError> { todo!() }";
        let n = count_tokens(code);
        assert!(n > 10 && n < 30, "{n}");
    }
}
