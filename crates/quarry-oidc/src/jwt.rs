//! ID tokens (OpenID Connect Core §3.1.3.7): a compact JWS, its signature checked against a
//! key of the provider's JWKS, then its claims. Only asymmetric algorithms are accepted:
//! `none` and HMAC (keyed with the client secret) are refused.

use ring::signature::{self, RsaPublicKeyComponents, UnparsedPublicKey};
use serde_json::{Map, Value};

/// Clock difference tolerated between Quarry and the provider.
pub const LEEWAY_MS: i64 = 60_000;

/// A JSON Web Key of the provider's set (the fields verification uses).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Jwk {
    /// `kid`.
    pub kid: Option<String>,
    /// `kty`: `RSA` or `EC`.
    pub kty: String,
    /// `use`, when stated (`sig` keys only are used).
    pub use_: Option<String>,
    /// `alg`, when stated.
    pub alg: Option<String>,
    /// RSA modulus and exponent, or EC curve point (x, y), decoded.
    pub material: KeyMaterial,
}

/// A key's public numbers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyMaterial {
    /// RSA `n` and `e`.
    Rsa {
        /// Modulus, big-endian.
        n: Vec<u8>,
        /// Exponent, big-endian.
        e: Vec<u8>,
    },
    /// EC point on `crv`.
    Ec {
        /// `P-256` or `P-384`.
        crv: String,
        /// X coordinate.
        x: Vec<u8>,
        /// Y coordinate.
        y: Vec<u8>,
    },
    /// A key type this module does not verify with (kept so a `kid` still names it).
    Other,
}

fn b64_field(v: &Value, key: &str) -> Option<Vec<u8>> {
    quarry_core::base64url_decode(v.get(key)?.as_str()?)
}

/// The keys of a JWKS document (`{"keys": [...]}`); keys that cannot be read are skipped.
pub fn parse_jwks(doc: &Value) -> Vec<Jwk> {
    let Some(keys) = doc.get("keys").and_then(Value::as_array) else {
        return Vec::new();
    };
    keys.iter()
        .filter_map(|k| {
            let kty = k.get("kty")?.as_str()?.to_owned();
            let material = match kty.as_str() {
                "RSA" => KeyMaterial::Rsa {
                    n: b64_field(k, "n")?,
                    e: b64_field(k, "e")?,
                },
                "EC" => KeyMaterial::Ec {
                    crv: k.get("crv")?.as_str()?.to_owned(),
                    x: b64_field(k, "x")?,
                    y: b64_field(k, "y")?,
                },
                _ => KeyMaterial::Other,
            };
            let text = |f: &str| k.get(f).and_then(Value::as_str).map(str::to_owned);
            Some(Jwk {
                kid: text("kid"),
                kty,
                use_: text("use"),
                alg: text("alg"),
                material,
            })
        })
        .collect()
}

/// Why an ID token was refused, in words for the person signing in and the log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// Not a compact JWS, or its parts are not base64url JSON.
    #[error("the ID token is malformed: {0}")]
    Malformed(String),
    /// An algorithm that is refused or that the provider does not announce.
    #[error(
        "the ID token is signed with {0}, which Quarry does not accept (use RS256, PS256 or ES256)"
    )]
    Algorithm(String),
    /// No key of the provider's set has the token's `kid` (after fetching the set again).
    #[error("the ID token is signed with a key the provider does not publish (kid {0})")]
    UnknownKey(String),
    /// The signature does not verify.
    #[error("the ID token's signature does not verify against the provider's key")]
    BadSignature,
    /// A claim is wrong (`iss`, `aud`, `exp`, `nonce`, …).
    #[error("the ID token {0}")]
    Claim(String),
}

/// A compact JWS split and its header and claims read, not yet verified.
pub struct UnverifiedToken<'a> {
    /// The header (`alg`, `kid`).
    pub header: Map<String, Value>,
    /// The claims.
    pub claims: Map<String, Value>,
    signing_input: &'a str,
    signature: Vec<u8>,
}

impl<'a> UnverifiedToken<'a> {
    /// Splits `token` and decodes its header and claims.
    pub fn parse(token: &'a str) -> Result<UnverifiedToken<'a>, TokenError> {
        let mut parts = token.split('.');
        let (Some(h), Some(c), Some(s), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(TokenError::Malformed(
                "not three dot-separated parts".into(),
            ));
        };
        let object = |part: &str, what: &str| -> Result<Map<String, Value>, TokenError> {
            let bytes = quarry_core::base64url_decode(part)
                .ok_or_else(|| TokenError::Malformed(format!("its {what} is not base64url")))?;
            match serde_json::from_slice(&bytes) {
                Ok(Value::Object(m)) => Ok(m),
                _ => Err(TokenError::Malformed(format!(
                    "its {what} is not a JSON object"
                ))),
            }
        };
        let header = object(h, "header")?;
        let claims = object(c, "claims")?;
        let signature = quarry_core::base64url_decode(s)
            .ok_or_else(|| TokenError::Malformed("its signature is not base64url".into()))?;
        if header.contains_key("crit") {
            return Err(TokenError::Malformed(
                "it has critical header parameters Quarry does not understand".into(),
            ));
        }
        Ok(UnverifiedToken {
            header,
            claims,
            signing_input: &token[..h.len() + 1 + c.len()],
            signature,
        })
    }

    /// The `alg` header.
    pub fn alg(&self) -> &str {
        self.header.get("alg").and_then(Value::as_str).unwrap_or("")
    }

    /// The `kid` header.
    pub fn kid(&self) -> Option<&str> {
        self.header.get("kid").and_then(Value::as_str)
    }

    /// The key of `keys` this token names: by `kid`, else the one signing key of a type
    /// that fits the algorithm. `None`: the set must be fetched again (rotation).
    pub fn pick_key<'k>(&self, keys: &'k [Jwk]) -> Option<&'k Jwk> {
        let fits = |k: &&Jwk| {
            k.use_.as_deref().is_none_or(|u| u == "sig")
                && k.alg.as_deref().is_none_or(|a| a == self.alg())
                && kty_for(self.alg()) == Some(k.kty.as_str())
        };
        match self.kid() {
            Some(kid) => keys
                .iter()
                .filter(fits)
                .find(|k| k.kid.as_deref() == Some(kid)),
            None => {
                let mut candidates = keys.iter().filter(fits);
                match (candidates.next(), candidates.next()) {
                    (Some(only), None) => Some(only),
                    _ => None,
                }
            }
        }
    }

    /// Whether the algorithm is one Quarry verifies and one of `allowed` (the provider's
    /// announced ones; empty: RS256 only, the specification's default).
    pub fn check_algorithm(&self, allowed: &[String]) -> Result<(), TokenError> {
        let alg = self.alg();
        let announced = if allowed.is_empty() {
            alg == "RS256"
        } else {
            allowed.iter().any(|a| a == alg)
        };
        if !announced || kty_for(alg).is_none() {
            return Err(TokenError::Algorithm(if alg.is_empty() {
                "no algorithm".into()
            } else {
                alg.to_owned()
            }));
        }
        Ok(())
    }

    /// Checks the algorithm ([`UnverifiedToken::check_algorithm`]) and the signature with
    /// `key`.
    pub fn verify(&self, key: &Jwk, allowed: &[String]) -> Result<(), TokenError> {
        self.check_algorithm(allowed)?;
        let alg = self.alg();
        let message = self.signing_input.as_bytes();
        let ok = match (&key.material, alg) {
            (KeyMaterial::Rsa { n, e }, _) => {
                let params: &signature::RsaParameters = match alg {
                    "RS256" => &signature::RSA_PKCS1_2048_8192_SHA256,
                    "RS384" => &signature::RSA_PKCS1_2048_8192_SHA384,
                    "RS512" => &signature::RSA_PKCS1_2048_8192_SHA512,
                    "PS256" => &signature::RSA_PSS_2048_8192_SHA256,
                    "PS384" => &signature::RSA_PSS_2048_8192_SHA384,
                    "PS512" => &signature::RSA_PSS_2048_8192_SHA512,
                    _ => return Err(TokenError::Algorithm(alg.to_owned())),
                };
                RsaPublicKeyComponents { n, e }
                    .verify(params, message, &self.signature)
                    .is_ok()
            }
            (KeyMaterial::Ec { crv, x, y }, "ES256" | "ES384") => {
                let (want, size, algorithm): (&str, usize, &signature::EcdsaVerificationAlgorithm) =
                    if alg == "ES256" {
                        ("P-256", 32, &signature::ECDSA_P256_SHA256_FIXED)
                    } else {
                        ("P-384", 48, &signature::ECDSA_P384_SHA384_FIXED)
                    };
                if crv != want || x.len() != size || y.len() != size {
                    return Err(TokenError::BadSignature);
                }
                let mut point = Vec::with_capacity(1 + 2 * size);
                point.push(4);
                point.extend_from_slice(x);
                point.extend_from_slice(y);
                UnparsedPublicKey::new(algorithm, point)
                    .verify(message, &self.signature)
                    .is_ok()
            }
            _ => false,
        };
        if ok {
            Ok(())
        } else {
            Err(TokenError::BadSignature)
        }
    }
}

/// The key type an algorithm needs; `None` for refused algorithms (`none`, `HS*`, …).
fn kty_for(alg: &str) -> Option<&'static str> {
    match alg {
        "RS256" | "RS384" | "RS512" | "PS256" | "PS384" | "PS512" => Some("RSA"),
        "ES256" | "ES384" => Some("EC"),
        _ => None,
    }
}

/// What the claims must say.
pub struct Expected<'a> {
    /// The provider's issuer, exactly.
    pub issuer: &'a str,
    /// Quarry's client id (in `aud`; `azp` when there are several audiences).
    pub client_id: &'a str,
    /// The nonce the sign-in sent.
    pub nonce: &'a str,
    /// Now, in Unix milliseconds.
    pub now_ms: i64,
}

fn time_ms(claims: &Map<String, Value>, key: &str) -> Option<i64> {
    let v = claims.get(key)?;
    v.as_i64()
        .or_else(|| v.as_f64().map(|f| f as i64))
        .map(|s| s.saturating_mul(1000))
}

/// Checks `iss`, `aud`/`azp`, `exp`, `iat`, `nonce` and `sub`.
pub fn check_claims(claims: &Map<String, Value>, want: &Expected<'_>) -> Result<(), TokenError> {
    let claim = |m: String| Err(TokenError::Claim(m));
    let text = |k: &str| claims.get(k).and_then(Value::as_str);
    if text("iss") != Some(want.issuer) {
        return claim(format!(
            "was issued by {:?}, not by the configured issuer {:?}",
            text("iss").unwrap_or(""),
            want.issuer
        ));
    }
    let audiences: Vec<&str> = match claims.get("aud") {
        Some(Value::String(s)) => vec![s.as_str()],
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if !audiences.contains(&want.client_id) {
        return claim("is not meant for this client (its aud lacks Quarry's client id)".into());
    }
    if audiences.len() > 1 && text("azp") != Some(want.client_id) {
        return claim("has several audiences and its azp is not Quarry's client id".into());
    }
    match time_ms(claims, "exp") {
        None => return claim("has no expiry (exp)".into()),
        Some(exp) if exp + LEEWAY_MS <= want.now_ms => {
            return claim("has expired (exp is past): check this server's clock".into());
        }
        Some(_) => {}
    }
    if time_ms(claims, "iat").is_some_and(|iat| iat > want.now_ms + LEEWAY_MS) {
        return claim("was issued in the future (iat): check this server's clock".into());
    }
    match text("nonce") {
        Some(n) if quarry_core::constant_time_eq(n.as_bytes(), want.nonce.as_bytes()) => {}
        Some(_) => {
            return claim("carries another sign-in's nonce (a replayed or injected token)".into());
        }
        None => return claim("carries no nonce".into()),
    }
    if text("sub").is_none_or(str::is_empty) {
        return claim("names no subject (sub)".into());
    }
    Ok(())
}
