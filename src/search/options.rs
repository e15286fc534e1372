//! Ranking knobs. `Default` is what `search_tools` uses; `eval --option` varies them to measure
//! each one's effect.

/// How one query word's scores in the different fields are combined.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Combine {
    /// Sum over fields: a word found in name and description counts twice.
    Sum,
    /// Best field plus `tie` times the others (Lucene's DisjunctionMax).
    DisMax { tie: f32 },
}

pub use super::fusion::{Context, Fusion, Norm};
pub use super::servers::ServerScore;

/// Which English stop words are dropped from documents and queries.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StopWords {
    None,
    /// Lucene's list of 33 (articles, prepositions, forms of "be").
    Lucene,
    /// The Snowball project's English list, which also has pronouns, auxiliaries and question
    /// words ("what", "how", "could"): the words a question to a tool search is made of.
    Snowball,
}

/// Ranking options of a [`super::SearchIndex`].
#[derive(Debug, Clone, PartialEq)]
pub struct SearchOptions {
    /// English stop words dropped from documents and queries.
    pub stopwords: StopWords,
    /// Reduce words to their English stem (`searching`, `searches`: `search`).
    pub stem: bool,
    /// Split words at case changes and letter/digit boundaries (`getWeather2`: `get weather 2`),
    /// not only at other characters (`get_weather`).
    pub split_case: bool,
    /// Split run-together lower-case names (`keywordexplorer`) into words the catalog uses
    /// elsewhere (`keyword explorer`), indexed next to the name.
    pub decompound: bool,
    /// Field boosts.
    pub name: f32,
    pub title: f32,
    pub description: f32,
    pub params: f32,
    pub server: f32,
    pub combine: Combine,
    /// One IDF per word over all of a tool's fields (BM25F's), rather than one per field.
    pub global_idf: bool,
    /// Each field's average length is taken as this many times its real one: above 1, a long
    /// field is penalised less (BM25's b is fixed at 0.75 by tantivy; see `stats.rs`).
    pub name_len: f32,
    pub description_len: f32,
    pub params_len: f32,
    pub server_len: f32,
    /// Exponent of the coverage factor: score × coverage^this (0 disables it). Coverage is the
    /// share of the query's IDF weight a tool matches, see [`super::Hit::coverage`].
    pub coverage: f32,
    /// The coverage factor applies only to queries of at most this many words (after stop
    /// words; 0: any length). In a short query every word is part of the request; in a long task
    /// description no tool covers most words.
    pub coverage_words: usize,
    /// Extra boost for two adjacent query words found near each other (0 disables it).
    pub phrase: f32,
    /// Query words found in more than this share of tools are dropped (1, the default, keeps
    /// all), unless no rarer word that some tool has is left. Only applied to catalogs of at
    /// least 20 tools. Off by default: in a catalog where many tools share a verb ("list" in
    /// Azure's 180 tools) the verb is what tells `account_list` from `account_get`.
    pub max_df: f32,
    /// Use tool vectors when the build and the library have them (`false`: BM25 only).
    pub embeddings: bool,
    /// How BM25 and vector ranks are combined in hybrid search.
    pub fusion: Fusion,
    /// In hybrid search, server evidence added to each tool's cosine before fusion (`None`:
    /// the tool's own cosine alone). 0.3 × the mean cosine of the tool's server's tools by
    /// default: fitted on docker-mcp's `fit` part, checked on its `check` part (EVAL.md, round
    /// 7b); a catalog of one server is ranked as without it.
    pub context: Option<Context>,
    /// In hybrid search, tools that match exactly the same query words enter fusion with the
    /// same BM25 score (the best of them): what tells them apart lexically is only term
    /// frequency and field length, and the vectors then decide between them.
    pub even_ties: bool,
    /// In hybrid search, for a query of at most `coverage_words` words: the share of the
    /// query's weight the best BM25 hit must cover for BM25 to get its full weight in fusion;
    /// below it the weight falls in proportion (0: always full). When the query's
    /// distinctive words match no tool ("what time is it in Tokyo": only "time" matches), the
    /// vectors decide between the partial matches.
    pub lexical_coverage: f32,
    /// Factor (0..=1) on the BM25 score and cosine of meta-server's own tools (server `meta`)
    /// in a query longer than `coverage_words` (never when that is 0): they serve the model's
    /// work with results (reading a stored result, Code Mode), and a task that merely shares
    /// their words ("read each page of the results") should find the upstream tools first; a
    /// short query that asks for them still does.
    pub helpers: f32,
    /// Weight (0..=1) of a query word's synonyms (`fetch` for `get`) relative to the word, in
    /// BM25 search without vectors (0: none).
    pub synonyms: f32,
    /// Boost of a query word as written, where stemming changes it (`papers`, `databases`),
    /// in the tools' name, title and description as written (0: stems alone): a tool with the
    /// very form the query uses ranks above one with another form of the stem.
    pub surface: f32,
    /// A tool whose name is the query, or close to it when the query looks like a name
    /// (did-you-mean), ranks first.
    pub names: bool,
    /// Weight (0..=1) of the server's score in each hit's score (0: tools alone), in BM25
    /// search without vectors and a query of at most `coverage_words` words: a server whose
    /// tools together match a short query lifts its tools (`servers.rs`); a long task spans
    /// servers.
    pub server_evidence: f32,
    /// How a server's score is computed for `server_evidence`.
    pub server_score: ServerScore,
    /// Weight of pseudo-relevance feedback in a query of at most `coverage_words` words (0:
    /// none): the best hits' shared words, or with vectors their mean vector, lift the hits
    /// that share them (`feedback.rs`).
    pub feedback: f32,
    /// Boost of the learned field: the queries that led to a tool before (0: not searched).
    pub learned: f32,
    /// Only the words of a tool's learned queries that its own text lacks are indexed: what
    /// the queries add (a paraphrase's words), not the context words it shares with its
    /// siblings ("in my App Configuration store"), which would match their queries too.
    pub learned_new: bool,
    /// In hybrid search, how far (0..=1) a tool's cosine moves toward the query's best
    /// cosine with the queries that led to the tool before, when that is higher (0: not
    /// used).
    pub learned_vector: f32,
    /// Only tools whose best learned query is within this cosine of the query's nearest
    /// learned query are lifted (see `learned_vector`; 1 or more: every tool).
    pub learned_margin: f32,
    /// A query of at most `coverage_words` words that names a server ("search papers on
    /// arXiv", "duckdb list tables") ranks that server's tools that match the rest of its
    /// words first, by the rest (`named.rs`); a long task names servers in passing.
    pub named_servers: bool,
}

impl Default for SearchOptions {
    fn default() -> Self {
        Self {
            stopwords: StopWords::Snowball,
            stem: true,
            split_case: true,
            decompound: false,
            name: 1.0,
            title: 1.0,
            description: 1.0,
            params: 0.1,
            server: 1.0,
            combine: Combine::Sum,
            global_idf: false,
            name_len: 1.0,
            description_len: 1.0,
            params_len: 1.0,
            server_len: 1.0,
            coverage: 0.25,
            coverage_words: 6,
            phrase: 0.0,
            max_df: 1.0,
            embeddings: true,
            fusion: Fusion::Normalized {
                alpha: 0.3,
                norm: Norm::ZScore,
            },
            context: Some(Context::Mean { weight: 0.3 }),
            even_ties: false,
            lexical_coverage: 0.7,
            synonyms: 0.5,
            helpers: 0.5,
            surface: 0.5,
            names: true,
            server_evidence: 0.4,
            server_score: ServerScore::Doc,
            feedback: 0.0,
            learned: 0.5,
            learned_new: true,
            learned_vector: 0.25,
            learned_margin: 1.0,
            named_servers: true,
        }
    }
}

impl SearchOptions {
    /// The baseline every ranking is measured against: untuned BM25 over name and description
    /// alone, words split at non-alphanumeric characters and lower-cased, no stop words,
    /// stemming, synonyms, coverage factor, name matching or vectors.
    pub fn plain_bm25() -> Self {
        Self {
            stopwords: StopWords::None,
            stem: false,
            split_case: false,
            decompound: false,
            name: 1.0,
            title: 0.0,
            description: 1.0,
            params: 0.0,
            server: 0.0,
            combine: Combine::Sum,
            global_idf: false,
            name_len: 1.0,
            description_len: 1.0,
            params_len: 1.0,
            server_len: 1.0,
            coverage: 0.0,
            coverage_words: 0,
            phrase: 0.0,
            max_df: 1.0,
            embeddings: false,
            even_ties: false,
            synonyms: 0.0,
            helpers: 1.0,
            surface: 0.0,
            names: false,
            server_evidence: 0.0,
            learned: 0.0,
            learned_vector: 0.0,
            named_servers: false,
            ..Self::default()
        }
    }

    /// Sets one option from `key=value` text, e.g. `stopwords=false`, `combine=dismax:0.1`.
    pub fn set(&mut self, setting: &str) -> Result<(), String> {
        let (key, value) = setting
            .split_once('=')
            .ok_or_else(|| format!("expected KEY=VALUE, got \"{setting}\""))?;
        let number = || {
            value
                .parse::<f32>()
                .ok()
                .filter(|v| v.is_finite() && *v >= 0.0)
                .ok_or_else(|| format!("{key} needs a number >= 0, got \"{value}\""))
        };
        let fraction = || {
            number().and_then(|v| {
                (v <= 1.0)
                    .then_some(v)
                    .ok_or_else(|| format!("{key} is a number from 0 to 1, got \"{value}\""))
            })
        };
        match key {
            "stopwords" => {
                self.stopwords = match value {
                    "snowball" | "true" => StopWords::Snowball,
                    "lucene" => StopWords::Lucene,
                    "none" | "false" => StopWords::None,
                    _ => {
                        return Err(format!(
                            "stopwords is snowball, lucene or none, got \"{value}\""
                        ));
                    }
                };
            }
            "stem" => {
                self.stem = value
                    .parse()
                    .map_err(|_| format!("stem is true or false, got \"{value}\""))?;
            }
            "split_case" => {
                self.split_case = value
                    .parse()
                    .map_err(|_| format!("split_case is true or false, got \"{value}\""))?;
            }
            "decompound" => {
                self.decompound = value
                    .parse()
                    .map_err(|_| format!("decompound is true or false, got \"{value}\""))?;
            }
            "name" => self.name = number()?,
            "title" => self.title = number()?,
            "description" => self.description = number()?,
            "params" => self.params = number()?,
            "server" => self.server = number()?,
            "coverage" => self.coverage = number()?,
            "coverage_words" => {
                self.coverage_words = value
                    .parse()
                    .map_err(|_| format!("coverage_words is a whole number, got \"{value}\""))?;
            }
            "idf" => {
                self.global_idf = match value {
                    "global" => true,
                    "field" => false,
                    _ => return Err(format!("idf is global or field, got \"{value}\"")),
                };
            }
            "name_len" => self.name_len = number()?,
            "description_len" => self.description_len = number()?,
            "params_len" => self.params_len = number()?,
            "server_len" => self.server_len = number()?,
            "phrase" => self.phrase = number()?,
            "synonyms" => self.synonyms = fraction()?,
            "helpers" => self.helpers = fraction()?,
            "surface" => self.surface = number()?,
            "max_df" => self.max_df = number()?,
            "server_evidence" => self.server_evidence = fraction()?,
            "feedback" => self.feedback = number()?,
            "learned" => self.learned = number()?,
            "learned_new" => {
                self.learned_new = value
                    .parse()
                    .map_err(|_| format!("learned_new is true or false, got \"{value}\""))?;
            }
            "learned_vector" => self.learned_vector = fraction()?,
            "learned_margin" => self.learned_margin = number()?,
            "server_score" => {
                self.server_score = match value {
                    "cover" => ServerScore::Cover,
                    "doc" => ServerScore::Doc,
                    "mass" => ServerScore::Mass,
                    _ => {
                        return Err(format!(
                            "server_score is cover, doc or mass, got \"{value}\""
                        ));
                    }
                };
            }
            "embeddings" => {
                self.embeddings = value
                    .parse()
                    .map_err(|_| format!("embeddings is true or false, got \"{value}\""))?;
            }
            "fusion" => self.fusion = parse_fusion(value)?,
            "context" => {
                let usage =
                    || format!("context is off, mean:WEIGHT or max:WEIGHT, got \"{value}\"");
                self.context = match value.split_once(':') {
                    None if value == "off" => None,
                    Some((kind, w)) => {
                        let weight = w
                            .parse::<f32>()
                            .ok()
                            .filter(|w| w.is_finite() && *w >= 0.0)
                            .ok_or_else(usage)?;
                        match kind {
                            "mean" => Some(Context::Mean { weight }),
                            "max" => Some(Context::Max { weight }),
                            _ => return Err(usage()),
                        }
                    }
                    None => return Err(usage()),
                };
            }
            "named_servers" => {
                self.named_servers = value
                    .parse()
                    .map_err(|_| format!("named_servers is true or false, got \"{value}\""))?;
            }
            "names" => {
                self.names = value
                    .parse()
                    .map_err(|_| format!("names is true or false, got \"{value}\""))?;
            }
            "even_ties" => {
                self.even_ties = value
                    .parse()
                    .map_err(|_| format!("even_ties is true or false, got \"{value}\""))?;
            }
            "lexical_coverage" => self.lexical_coverage = fraction()?,
            "combine" => {
                self.combine = match value.split_once(':') {
                    None if value == "sum" => Combine::Sum,
                    None if value == "dismax" => Combine::DisMax { tie: 0.0 },
                    Some(("dismax", tie)) => Combine::DisMax {
                        tie: tie
                            .parse()
                            .map_err(|_| format!("dismax tie must be a number, got \"{tie}\""))?,
                    },
                    _ => {
                        return Err(format!(
                            "combine is sum, dismax or dismax:TIE, got \"{value}\""
                        ));
                    }
                };
            }
            _ => {
                return Err(format!(
                    "unknown option \"{key}\"; options: stopwords, stem, split_case, decompound, name, title, description, params, server, combine, idf, name_len, description_len, params_len, server_len, coverage, coverage_words, phrase, synonyms, helpers, max_df, embeddings, fusion, context, even_ties, lexical_coverage, surface, names, server_evidence, server_score, feedback, learned, learned_new, learned_vector, learned_margin"
                ));
            }
        }
        Ok(())
    }
}

/// `rrf`, `rrf:K`, `rrf:K:VECTOR_WEIGHT` (each also as `rrfcov`: BM25 ranks weighted by
/// coverage), `weighted[:ALPHA]`, `minmax[:ALPHA]`, `zscore[:ALPHA]` or `coverage[:BETA]`.
fn parse_fusion(value: &str) -> Result<Fusion, String> {
    let usage = || {
        format!(
            "fusion is rrf, rrf:K, rrf:K:VECTOR_WEIGHT (or rrfcov...), weighted[:ALPHA], minmax[:ALPHA], zscore[:ALPHA] (ALPHA 0..=1) or coverage[:BETA], got \"{value}\""
        )
    };
    let num = |s: &str| {
        s.parse::<f32>()
            .ok()
            .filter(|v| v.is_finite() && *v >= 0.0)
            .ok_or_else(usage)
    };
    let mut parts = value.split(':');
    let fusion = match parts.next() {
        Some(kind @ ("rrf" | "rrfcov")) => Fusion::Rrf {
            k: parts.next().map_or(Ok(60.0), num)?,
            vector: parts.next().map_or(Ok(1.0), num)?,
            coverage: kind == "rrfcov",
        },
        Some(kind @ ("minmax" | "zscore")) => Fusion::Normalized {
            alpha: parts
                .next()
                .map_or(Ok(0.5), num)
                .and_then(|a| if a <= 1.0 { Ok(a) } else { Err(usage()) })?,
            norm: if kind == "minmax" {
                Norm::MinMax
            } else {
                Norm::ZScore
            },
        },
        Some("coverage") => Fusion::Coverage {
            beta: parts.next().map_or(Ok(0.5), num)?,
        },
        Some("weighted") => Fusion::Weighted {
            alpha: parts
                .next()
                .map_or(Ok(0.5), num)
                .and_then(|a| if a <= 1.0 { Ok(a) } else { Err(usage()) })?,
        },
        _ => return Err(usage()),
    };
    if parts.next().is_some() {
        return Err(usage());
    }
    Ok(fusion)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_parse_from_key_value_text() {
        let mut o = SearchOptions::default();
        o.set("stopwords=lucene").unwrap();
        o.set("combine=dismax:0.2").unwrap();
        o.set("name=4").unwrap();
        assert_eq!(o.stopwords, StopWords::Lucene);
        assert!(o.set("stopwords=maybe").is_err());
        assert_eq!(o.combine, Combine::DisMax { tie: 0.2 });
        assert_eq!(o.name, 4.0);
        assert!(o.set("name=-1").is_err());
        assert!(o.set("nope=1").unwrap_err().contains("unknown option"));
        assert!(o.set("name").is_err());
        o.set("embeddings=false").unwrap();
        assert!(!o.embeddings);
        o.set("fusion=rrf:20:1.5").unwrap();
        assert_eq!(
            o.fusion,
            Fusion::Rrf {
                k: 20.0,
                vector: 1.5,
                coverage: false
            }
        );
        o.set("fusion=rrfcov").unwrap();
        assert!(matches!(o.fusion, Fusion::Rrf { coverage: true, .. }));
        o.set("fusion=weighted:0.3").unwrap();
        assert_eq!(o.fusion, Fusion::Weighted { alpha: 0.3 });
        assert!(o.set("fusion=weighted:2").is_err());
        o.set("fusion=zscore:0.3").unwrap();
        assert_eq!(
            o.fusion,
            Fusion::Normalized {
                alpha: 0.3,
                norm: Norm::ZScore
            }
        );
        o.set("fusion=coverage:0.4").unwrap();
        assert_eq!(o.fusion, Fusion::Coverage { beta: 0.4 });
        assert!(o.set("fusion=rrf:1:2:3").is_err());
        assert!(o.set("fusion=max").is_err());
        o.set("context=max:0.2").unwrap();
        assert_eq!(o.context, Some(Context::Max { weight: 0.2 }));
        o.set("context=mean:0.5").unwrap();
        assert_eq!(o.context, Some(Context::Mean { weight: 0.5 }));
        o.set("context=off").unwrap();
        assert_eq!(o.context, None);
        assert!(o.set("context=sum:1").is_err() && o.set("context=mean").is_err());
        o.set("even_ties=true").unwrap();
        assert!(o.even_ties);
        assert!(o.set("even_ties=1").is_err());
        o.set("lexical_coverage=0").unwrap();
        assert_eq!(o.lexical_coverage, 0.0);
        assert!(o.set("lexical_coverage=1.5").is_err());
        o.set("surface=0.7").unwrap();
        assert_eq!(o.surface, 0.7);
        o.set("names=false").unwrap();
        assert!(!o.names);
        o.set("server_evidence=0.3").unwrap();
        o.set("server_score=cover").unwrap();
        assert_eq!(
            (o.server_evidence, o.server_score),
            (0.3, ServerScore::Cover)
        );
        assert!(o.set("server_evidence=2").is_err());
        assert!(o.set("server_score=max").is_err());
    }

    #[test]
    fn the_plain_baseline_searches_name_and_description_alone() {
        let p = SearchOptions::plain_bm25();
        let fields = [p.name, p.title, p.description, p.params, p.server];
        assert_eq!(fields, [1.0, 0.0, 1.0, 0.0, 0.0]);
        assert!(!p.stem && !p.embeddings && !p.names && p.stopwords == StopWords::None);
        assert_eq!((p.coverage, p.synonyms, p.surface), (0.0, 0.0, 0.0));
        assert_eq!(p.server_evidence, 0.0);
        assert_eq!((p.learned, p.learned_vector), (0.0, 0.0));
    }
}
