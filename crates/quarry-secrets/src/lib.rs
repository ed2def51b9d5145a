//! Credentials sealed at rest.
//!
//! A [`SecretKey`] (32 random bytes, given to Quarry as 64 hexadecimal digits in
//! `QUARRY_SECRET_KEY`) seals a credential with ChaCha20-Poly1305 (ring's AEAD, a vetted
//! implementation; never a home-made cipher) under a fresh random nonce. The sealed text is
//! bound to what the credential belongs to (the *context*, e.g. a source's location): moved
//! to another row, it does not open. Opening with another key, a changed context or a
//! tampered text fails without saying more. Neither type prints its contents.

use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};

/// The format's tag, so a later format can be told apart.
const PREFIX: &str = "v1:";

/// Why a key could not be read or a sealed credential not opened.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SecretError {
    /// The key is not 64 hexadecimal digits.
    #[error(
        "the secret key must be 32 random bytes written as 64 hexadecimal digits (make one with `openssl rand -hex 32`)"
    )]
    BadKey,
    /// The sealed text was not made with this key and context, or was changed.
    #[error(
        "the stored credential cannot be opened: it was sealed with another QUARRY_SECRET_KEY, or changed"
    )]
    CannotOpen,
    /// The system's random source failed.
    #[error("no randomness available to seal a credential")]
    NoRandomness,
}

/// The key credentials are sealed with.
pub struct SecretKey {
    key: LessSafeKey,
}

impl SecretKey {
    /// A key from 64 hexadecimal digits (surrounding whitespace ignored).
    pub fn from_hex(text: &str) -> Result<SecretKey, SecretError> {
        let bytes = hex_decode(text.trim()).ok_or(SecretError::BadKey)?;
        if bytes.len() != 32 {
            return Err(SecretError::BadKey);
        }
        let key = UnboundKey::new(&CHACHA20_POLY1305, &bytes).map_err(|_| SecretError::BadKey)?;
        Ok(SecretKey {
            key: LessSafeKey::new(key),
        })
    }

    /// Seals `plaintext` for `context`: `v1:` and hexadecimal nonce, ciphertext and tag.
    pub fn seal(&self, plaintext: &str, context: &str) -> Result<String, SecretError> {
        let mut nonce = [0u8; NONCE_LEN];
        SystemRandom::new()
            .fill(&mut nonce)
            .map_err(|_| SecretError::NoRandomness)?;
        let mut data = plaintext.as_bytes().to_vec();
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(context.as_bytes()),
                &mut data,
            )
            .map_err(|_| SecretError::NoRandomness)?;
        let mut out = String::with_capacity(PREFIX.len() + 2 * (NONCE_LEN + data.len()));
        out.push_str(PREFIX);
        hex_encode(&nonce, &mut out);
        hex_encode(&data, &mut out);
        Ok(out)
    }

    /// Opens what [`SecretKey::seal`] made for the same `context`.
    pub fn open(&self, sealed: &str, context: &str) -> Result<String, SecretError> {
        let bytes = sealed
            .strip_prefix(PREFIX)
            .and_then(hex_decode)
            .ok_or(SecretError::CannotOpen)?;
        if bytes.len() < NONCE_LEN {
            return Err(SecretError::CannotOpen);
        }
        let (nonce, data) = bytes.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| SecretError::CannotOpen)?;
        let mut data = data.to_vec();
        let plain = self
            .key
            .open_in_place(nonce, Aad::from(context.as_bytes()), &mut data)
            .map_err(|_| SecretError::CannotOpen)?;
        String::from_utf8(plain.to_vec()).map_err(|_| SecretError::CannotOpen)
    }
}

impl std::fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretKey(hidden)")
    }
}

fn hex_encode(bytes: &[u8], out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for b in bytes {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 15)]));
    }
}

fn hex_decode(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    };
    text.as_bytes()
        .chunks(2)
        .map(|p| Some(digit(p[0])? << 4 | digit(p[1])?))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
    const OTHER: &str = "ff0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

    #[test]
    fn sealed_credentials_open_with_the_same_key_and_context_only() {
        let key = SecretKey::from_hex(KEY).unwrap();
        let sealed = key.seal("tok-123", "git:https://h/r.git").unwrap();
        assert!(sealed.starts_with("v1:") && !sealed.contains("tok-123"));
        assert_eq!(key.open(&sealed, "git:https://h/r.git").unwrap(), "tok-123");
        // A fresh nonce every time.
        assert_ne!(sealed, key.seal("tok-123", "git:https://h/r.git").unwrap());

        let other = SecretKey::from_hex(OTHER).unwrap();
        assert_eq!(
            other.open(&sealed, "git:https://h/r.git"),
            Err(SecretError::CannotOpen)
        );
        assert_eq!(
            key.open(&sealed, "git:https://evil/r.git"),
            Err(SecretError::CannotOpen)
        );
        let mut tampered = sealed.clone().into_bytes();
        let last = tampered.len() - 1;
        tampered[last] = if tampered[last] == b'0' { b'1' } else { b'0' };
        let tampered = String::from_utf8(tampered).unwrap();
        assert_eq!(
            key.open(&tampered, "git:https://h/r.git"),
            Err(SecretError::CannotOpen)
        );
        for junk in ["", "v1:", "v1:zz", "v2:00", "v1:0011"] {
            assert_eq!(key.open(junk, "x"), Err(SecretError::CannotOpen), "{junk}");
        }
    }

    #[test]
    fn keys_are_64_hex_digits_and_never_print() {
        for bad in [
            "",
            "abc",
            &KEY[..62],
            &format!("{KEY}00"),
            &KEY.replace('0', "g"),
        ] {
            assert_eq!(
                SecretKey::from_hex(bad).err(),
                Some(SecretError::BadKey),
                "{bad}"
            );
        }
        let key = SecretKey::from_hex(&format!("  {}\n", KEY.to_uppercase())).unwrap();
        assert_eq!(format!("{key:?}"), "SecretKey(hidden)");
        assert!(!SecretError::BadKey.to_string().contains(KEY));
    }
}
