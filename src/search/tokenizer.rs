//! The identifier-aware tokenizer: splits snake_case, camelCase, kebab-case, dotted names and
//! letter/digit boundaries into words; CJK characters become one token each, and each two
//! adjacent ones a token more.

use tantivy::tokenizer::{Token, TokenStream, Tokenizer};

/// The Snowball project's English stop word list (snowballstem.org, BSD licence), with its
/// contractions given as the pieces this tokenizer splits them into (`don't`: `don`, `t`), and
/// `can`, whose negations are on the list.
pub const SNOWBALL_ENGLISH: &str = "i me my myself we our ours ourselves you your yours yourself
    yourselves he him his himself she her hers herself it its itself they them their theirs
    themselves what which who whom this that these those am is are was were be been being have
    has had having do does did doing would should could ought a an the and but if or because as
    until while of at by for with about against between into through during before after above
    below to from up down in out on off over under again further then once here there when where
    why how all any both each few more most other some such no nor not only own same so than too
    very can cannot s t d ll m re ve don isn aren wasn weren hasn haven hadn doesn didn won wouldn
    shan shouldn couldn mustn let";

/// Byte ranges of the words in `text`.
///
/// `getWeatherForecast`, `get_weather_forecast` and `get-weather.forecast` all give
/// `get`, `Weather`/`weather`, `Forecast`/`forecast`; `HTTPServer2` gives `HTTP`, `Server`, `2`.
pub fn split_words(text: &str) -> Vec<(usize, usize)> {
    let mut words = Vec::new();
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut start: Option<usize> = None;
    for (i, &(pos, c)) in chars.iter().enumerate() {
        if is_cjk(c) {
            if let Some(s) = start.take() {
                words.push((s, pos));
            }
            words.push((pos, pos + c.len_utf8()));
            continue;
        }
        if !c.is_alphanumeric() {
            if let Some(s) = start.take() {
                words.push((s, pos));
            }
            continue;
        }
        if let Some(s) = start {
            let prev = chars[i - 1].1;
            let next = chars.get(i + 1).map(|&(_, n)| n);
            let boundary = (prev.is_lowercase() && c.is_uppercase())
                || (prev.is_uppercase()
                    && c.is_uppercase()
                    && next.is_some_and(char::is_lowercase))
                || (prev.is_alphabetic() && c.is_numeric())
                || (prev.is_numeric() && c.is_alphabetic());
            if boundary {
                words.push((s, pos));
                start = Some(pos);
            }
        } else {
            start = Some(pos);
        }
    }
    if let Some(s) = start {
        words.push((s, text.len()));
    }
    words
}

/// Han, kana and hangul: scripts written without spaces between words.
fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF      // hiragana, katakana
        | 0x3400..=0x4DBF    // CJK extension A
        | 0x4E00..=0x9FFF    // CJK unified ideographs
        | 0xAC00..=0xD7AF    // hangul syllables
        | 0xF900..=0xFAFF    // CJK compatibility ideographs
        | 0x20000..=0x2FFFF) // CJK extensions B and later
}

/// Joins words that touch (`get`, `Weather` of `getWeather`), except CJK characters.
fn join_touching(text: &str, words: Vec<(usize, usize)>) -> Vec<(usize, usize)> {
    let mut out: Vec<(usize, usize)> = Vec::with_capacity(words.len());
    for (from, to) in words {
        match out.last_mut() {
            Some(last)
                if last.1 == from
                    && !is_cjk_char(&text[last.0..last.1])
                    && !is_cjk_char(&text[from..to]) =>
            {
                last.1 = to;
            }
            _ => out.push((from, to)),
        }
    }
    out
}

/// Whether `word` is one CJK character (how [`split_words`] gives them).
pub(super) fn is_cjk_char(word: &str) -> bool {
    let mut chars = word.chars();
    chars.next().is_some_and(is_cjk) && chars.next().is_none()
}

/// Splits the query the way documents are split, so `getIssue` matches `get_issue`.
pub fn words_of(text: &str) -> String {
    split_words(text)
        .into_iter()
        .map(|(s, e)| &text[s..e])
        .collect::<Vec<_>>()
        .join(" ")
}

/// tantivy adapter over [`split_words`].
#[derive(Clone)]
pub struct IdentTokenizer {
    /// `false`: words split only at characters that are not letters or digits (`getWeather`
    /// stays one word), to measure what splitting at case changes is worth.
    pub split_case: bool,
}

pub struct IdentTokenStream {
    tokens: Vec<Token>,
    next: usize,
}

impl Tokenizer for IdentTokenizer {
    type TokenStream<'a> = IdentTokenStream;

    /// The words of [`split_words`]; after each CJK character directly followed by another,
    /// also the pair (at the first one's position), so a two-character word matches as a word
    /// and not only as two characters found anywhere (Lucene's CJK bigrams, unigrams kept).
    /// With `split_case`, a word split at case changes or digits is also given whole, before
    /// its parts and at the first one's position, marked by a `position_length` of its number
    /// of parts ([`JOINED`]): `MySQL` gives `MySQL`, `My`, `SQL`, so it matches `mysql` too.
    fn token_stream<'a>(&'a mut self, text: &'a str) -> IdentTokenStream {
        let words = split_words(text);
        if !self.split_case {
            return Self::tokens(text, &join_touching(text, words), &[]);
        }
        let whole = join_touching(text, words.clone());
        Self::tokens(text, &words, &whole)
    }
}

/// The smallest `position_length` of a token that is a whole word also given in parts.
pub const JOINED: usize = 2;

impl IdentTokenizer {
    /// Tokens of `words` (byte ranges), each of `whole` (the same text joined where words
    /// touch) that spans several words given first, as [`Tokenizer::token_stream`] says.
    fn tokens(text: &str, words: &[(usize, usize)], whole: &[(usize, usize)]) -> IdentTokenStream {
        let mut whole = whole.iter().peekable();
        let mut tokens = Vec::with_capacity(words.len());
        for (position, &(from, to)) in words.iter().enumerate() {
            while let Some(&&(w_from, w_to)) = whole.peek() {
                if w_from > from {
                    break;
                }
                whole.next();
                let parts = words[position..]
                    .iter()
                    .take_while(|&&(_, end)| end <= w_to)
                    .count();
                if w_from == from && parts >= JOINED {
                    tokens.push(Token {
                        offset_from: w_from,
                        offset_to: w_to,
                        position,
                        text: text[w_from..w_to].to_owned(),
                        position_length: parts,
                    });
                }
            }
            let token = |to: usize| Token {
                offset_from: from,
                offset_to: to,
                position,
                text: text[from..to].to_owned(),
                position_length: 1,
            };
            tokens.push(token(to));
            if let Some(&(next_from, next_to)) = words.get(position + 1)
                && next_from == to
                && is_cjk_char(&text[from..to])
                && is_cjk_char(&text[next_from..next_to])
            {
                tokens.push(token(next_to));
            }
        }
        IdentTokenStream { tokens, next: 0 }
    }
}

impl TokenStream for IdentTokenStream {
    fn advance(&mut self) -> bool {
        self.next += 1;
        self.next <= self.tokens.len()
    }

    fn token(&self) -> &Token {
        &self.tokens[self.next - 1]
    }

    fn token_mut(&mut self) -> &mut Token {
        &mut self.tokens[self.next - 1]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<&str> {
        split_words(text)
            .into_iter()
            .map(|(s, e)| &text[s..e])
            .collect()
    }

    #[test]
    fn splits_identifier_styles() {
        assert_eq!(words("getWeatherForecast"), ["get", "Weather", "Forecast"]);
        assert_eq!(
            words("get_weather_forecast"),
            ["get", "weather", "forecast"]
        );
        assert_eq!(words("list-pull-requests"), ["list", "pull", "requests"]);
        assert_eq!(words("HTTPServerStatus"), ["HTTP", "Server", "Status"]);
        assert_eq!(words("searchRepos2"), ["search", "Repos", "2"]);
        assert_eq!(words("everything__get-sum"), ["everything", "get", "sum"]);
        assert_eq!(words("fs.read_text_file"), ["fs", "read", "text", "file"]);
        assert_eq!(words("  "), Vec::<&str>::new());
    }

    #[test]
    fn cjk_characters_are_separate_tokens() {
        assert_eq!(words("读取文件 file"), ["读", "取", "文", "件", "file"]);
        assert_eq!(
            words("ファイルを読む"),
            ["フ", "ァ", "イ", "ル", "を", "読", "む"]
        );
        assert_eq!(words("café résumé"), ["café", "résumé"]);
    }

    /// The (text, position) of every token the tokenizer gives for `text`.
    fn tokens(split_case: bool, text: &str) -> Vec<(String, usize)> {
        let mut tok = IdentTokenizer { split_case };
        let mut stream = tok.token_stream(text);
        let mut seen = Vec::new();
        while stream.advance() {
            let t = stream.token();
            seen.push((t.text.clone(), t.position));
        }
        seen
    }

    fn texts(split_case: bool, text: &str) -> Vec<String> {
        tokens(split_case, text)
            .into_iter()
            .map(|(t, _)| t)
            .collect()
    }

    #[test]
    fn token_stream_yields_every_word_and_a_split_word_whole() {
        assert_eq!(
            texts(true, "readTextFile"),
            ["readTextFile", "read", "Text", "File"]
        );
        assert_eq!(
            tokens(true, "MySQL db, get_issue"),
            [
                ("MySQL", 0),
                ("My", 0),
                ("SQL", 1),
                ("db", 2),
                ("get", 3),
                ("issue", 4)
            ]
            .map(|(t, p)| (t.to_owned(), p))
        );
    }

    #[test]
    fn without_case_splitting_only_other_characters_split() {
        assert_eq!(
            texts(false, "getWeather2 get_weather 读取"),
            ["getWeather2", "get", "weather", "读", "读取", "取"]
        );
    }

    #[test]
    fn adjacent_cjk_characters_also_give_their_pair() {
        let seen = tokens(true, "读取文件 to 件");
        let expected = [
            ("读", 0),
            ("读取", 0),
            ("取", 1),
            ("取文", 1),
            ("文", 2),
            ("文件", 2),
            ("件", 3),
            ("to", 4),
            ("件", 5),
        ];
        let expected: Vec<(String, usize)> =
            expected.iter().map(|&(t, p)| (t.to_owned(), p)).collect();
        assert_eq!(seen, expected);
    }
}
