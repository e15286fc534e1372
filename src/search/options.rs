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

/// Ranking options of a [`super::SearchIndex`].
#[derive(Debug, Clone, PartialEq)]
pub struct SearchOptions {
    /// Drop English stop words (Lucene's list of 33) from documents and queries.
    pub stopwords: bool,
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
    /// Exponent of the coverage factor: score × coverage^this (0 disables it). Coverage is the
    /// share of the query's IDF weight a tool matches, see [`super::Hit::coverage`].
    pub coverage: f32,
    /// Extra boost for two adjacent query words found near each other (0 disables it).
    pub phrase: f32,
    /// Query words found in more than this share of tools are dropped (1 keeps all), unless
    /// no rarer word that some tool has is left. Only applied to catalogs of at least 20 tools.
    pub max_df: f32,
}

impl Default for SearchOptions {
    fn default() -> Self {
        Self {
            stopwords: true,
            decompound: false,
            name: 1.0,
            title: 1.0,
            description: 1.0,
            params: 0.6,
            server: 0.5,
            combine: Combine::Sum,
            coverage: 0.0,
            phrase: 0.0,
            max_df: 0.1,
        }
    }
}

impl SearchOptions {
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
        match key {
            "stopwords" => {
                self.stopwords = value
                    .parse()
                    .map_err(|_| format!("stopwords is true or false, got \"{value}\""))?;
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
            "phrase" => self.phrase = number()?,
            "max_df" => self.max_df = number()?,
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
                    "unknown option \"{key}\"; options: stopwords, decompound, name, title, description, params, server, combine, coverage, phrase, max_df"
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_parse_from_key_value_text() {
        let mut o = SearchOptions::default();
        o.set("stopwords=true").unwrap();
        o.set("combine=dismax:0.2").unwrap();
        o.set("name=4").unwrap();
        assert!(o.stopwords);
        assert_eq!(o.combine, Combine::DisMax { tie: 0.2 });
        assert_eq!(o.name, 4.0);
        assert!(o.set("name=-1").is_err());
        assert!(o.set("nope=1").unwrap_err().contains("unknown option"));
        assert!(o.set("name").is_err());
    }
}
