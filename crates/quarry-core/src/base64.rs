//! Base64 (RFC 4648) as the protocols Quarry speaks use it: base64url without padding (PKCE
//! challenges, JSON Web Tokens and keys) and standard base64 (HTTP Basic credentials).

const STANDARD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const URL_SAFE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

fn encode_with(bytes: &[u8], alphabet: &[u8; 64], pad: bool) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let chars = chunk.len() + 1;
        for i in 0..chars {
            out.push(alphabet[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
        if pad {
            for _ in chars..4 {
                out.push('=');
            }
        }
    }
    out
}

fn decode_with(s: &str, alphabet: &[u8; 64]) -> Option<Vec<u8>> {
    let s = s.trim_end_matches('=');
    // A lone trailing character carries under a byte: no encoder makes it.
    if s.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in s.bytes() {
        let v = alphabet.iter().position(|&a| a == c)? as u32;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

/// Base64url without padding.
pub fn base64url_encode(bytes: &[u8]) -> String {
    encode_with(bytes, URL_SAFE, false)
}

/// Base64url (padding optional) decoded, or `None` for any character outside its alphabet.
pub fn base64url_decode(s: &str) -> Option<Vec<u8>> {
    decode_with(s, URL_SAFE)
}

/// Standard base64 with padding.
pub fn base64_encode(bytes: &[u8]) -> String {
    encode_with(bytes, STANDARD, true)
}

/// Standard base64 (padding optional) decoded, or `None` for any character outside its
/// alphabet.
pub fn base64_decode(s: &str) -> Option<Vec<u8>> {
    decode_with(s, STANDARD)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc4648_vectors() {
        let cases = [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ];
        for (plain, encoded) in cases {
            assert_eq!(base64_encode(plain.as_bytes()), encoded);
            assert_eq!(
                base64url_encode(plain.as_bytes()),
                encoded.trim_end_matches('=')
            );
            assert_eq!(base64_decode(encoded).as_deref(), Some(plain.as_bytes()));
            assert_eq!(
                base64url_decode(encoded.trim_end_matches('=')).as_deref(),
                Some(plain.as_bytes())
            );
        }
    }

    #[test]
    fn alphabets_are_kept_apart() {
        assert_eq!(base64url_encode(&[0xfb, 0xff]), "-_8");
        assert_eq!(base64_encode(&[0xfb, 0xff]), "+/8=");
        assert_eq!(base64url_decode("+/8"), None);
        assert_eq!(base64_decode("-_8"), None);
        assert_eq!(base64url_decode("a"), None);
        assert_eq!(base64url_decode("ab.c"), None);
    }
}
