//! Checksums of file contents (xxh3, 128 bits): enough to see that a file changed or was
//! damaged, not to stand against someone forging one, and fast enough to run over every
//! catalog and saved-index file at start-up (SHA-256 was a tenth of a 10k-tool start).

/// The checksum of `bytes`.
pub type Checksum = [u8; 16];

/// Checksums `bytes`.
pub fn of(bytes: &[u8]) -> Checksum {
    xxhash_rust::xxh3::xxh3_128(bytes).to_be_bytes()
}

/// A checksum of bytes given in parts: the [`of`] of them all together.
#[derive(Default)]
pub struct Summer(xxhash_rust::xxh3::Xxh3Default);

impl Summer {
    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    pub fn sum(&self) -> Checksum {
        self.0.digest128().to_be_bytes()
    }
}

/// Lower-case hex of `bytes` (of this module's checksums and of any digest).
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn one_changed_byte_changes_the_checksum() {
        let a = super::of(b"catalog");
        assert_eq!(a, super::of(b"catalog"));
        assert_ne!(a, super::of(b"catalof"));
        assert_eq!(super::hex(&a).len(), 32);
        assert_eq!(super::hex(&[0x00, 0x0f, 0xa5, 0xff]), "000fa5ff");
        let mut parts = super::Summer::default();
        parts.update(b"cata");
        parts.update(b"log");
        assert_eq!(parts.sum(), a);
    }
}
