//! The compact binary form of what meta-server saves for its own next start (the search
//! index's side tables, what it knew of each catalog file): little-endian numbers, `u32`
//! counts, length-prefixed UTF-8 strings. A reader checks every length against what is left.

/// Why saved bytes cannot be read back.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("they are truncated")]
    Truncated,
    #[error("they hold text that is not UTF-8")]
    NotUtf8,
    #[error("they do not fit together")]
    Inconsistent,
}

/// Appends values to a byte buffer.
#[derive(Default)]
pub struct Writer(pub Vec<u8>);

impl Writer {
    pub fn count(&mut self, n: usize) {
        self.0.extend_from_slice(&(n as u32).to_le_bytes());
    }

    pub fn u64(&mut self, n: u64) {
        self.0.extend_from_slice(&n.to_le_bytes());
    }

    pub fn bytes(&mut self, bytes: &[u8]) {
        self.count(bytes.len());
        self.0.extend_from_slice(bytes);
    }

    pub fn string(&mut self, s: &str) {
        self.bytes(s.as_bytes());
    }

    pub fn strings(&mut self, list: &[String]) {
        self.count(list.len());
        for s in list {
            self.string(s);
        }
    }

    pub fn ords(&mut self, list: &[u32]) {
        self.count(list.len());
        for n in list {
            self.0.extend_from_slice(&n.to_le_bytes());
        }
    }
}

/// Reads values back from the front of a byte slice.
pub struct Reader<'a>(pub &'a [u8]);

impl<'a> Reader<'a> {
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.0.len() < n {
            return Err(DecodeError::Truncated);
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    pub fn count(&mut self) -> Result<usize, DecodeError> {
        let n = u32::from_le_bytes(self.take(4)?.try_into().expect("4 bytes"));
        Ok(n as usize)
    }

    pub fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }

    pub fn bytes(&mut self) -> Result<&'a [u8], DecodeError> {
        let n = self.count()?;
        self.take(n)
    }

    pub fn str(&mut self) -> Result<&'a str, DecodeError> {
        std::str::from_utf8(self.bytes()?).map_err(|_| DecodeError::NotUtf8)
    }

    pub fn string(&mut self) -> Result<String, DecodeError> {
        self.str().map(str::to_owned)
    }

    pub fn strings(&mut self) -> Result<Vec<String>, DecodeError> {
        (0..self.count()?).map(|_| self.string()).collect()
    }

    pub fn ords(&mut self) -> Result<Vec<u32>, DecodeError> {
        let n = self.count()?;
        let bytes = self.take(n.checked_mul(4).ok_or(DecodeError::Truncated)?)?;
        Ok(bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
            .collect())
    }

    /// Whether everything was read.
    pub fn is_done(&self) -> bool {
        self.0.is_empty()
    }
}
