//! Reading an outbound HTTP response, for custom HTTP tools ([`crate::custom`]) and the
//! `web` package ([`crate::web`]): the body read up to a cap, and error and URL text safe to
//! show (no credentials, no query).

use http::header::CONTENT_TYPE;
use url::Url;

/// The URL without user info, query or fragment: what errors and logs may show.
pub(crate) fn redacted(url: &Url) -> String {
    let host = url.host_str().unwrap_or("");
    match url.port() {
        Some(p) => format!("{}://{host}:{p}{}", url.scheme(), url.path()),
        None => format!("{}://{host}{}", url.scheme(), url.path()),
    }
}

/// An error and its sources, `: `-joined, repeated texts dropped.
pub(crate) fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut cur = Some(err);
    while let Some(e) = cur {
        let text = e.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        cur = e.source();
    }
    parts.join(": ")
}

/// Drops an incomplete UTF-8 sequence at the end (left by cutting at the cap).
pub(crate) fn trim_partial_utf8(bytes: &mut Vec<u8>) {
    let len = bytes.len();
    for back in 1..=len.min(4) {
        let i = len - back;
        let b = bytes[i];
        if b & 0xc0 == 0x80 {
            continue; // a continuation byte: look further back for its lead
        }
        let need = match b {
            0x00..=0x7f => 1,
            0xc0..=0xdf => 2,
            0xe0..=0xef => 3,
            0xf0..=0xf7 => 4,
            _ => 1,
        };
        if back < need {
            bytes.truncate(i);
        }
        return;
    }
}

/// A response whose body was read up to a cap ([`send_and_read`]).
pub(crate) struct RawResponse {
    pub(crate) status: u16,
    pub(crate) content_type: Option<String>,
    pub(crate) body: Vec<u8>,
    pub(crate) truncated: bool,
}

/// Sends `request` and reads at most `cap` bytes of the body (`truncated` when there was more).
pub(crate) async fn send_and_read(
    request: reqwest::RequestBuilder,
    cap: u64,
) -> Result<RawResponse, reqwest::Error> {
    let mut response = request.send().await?;
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let cap = usize::try_from(cap).unwrap_or(usize::MAX);
    let mut body: Vec<u8> = Vec::new();
    let mut truncated = false;
    while let Some(chunk) = response.chunk().await? {
        let room = cap - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            truncated = true;
            break; // dropping the response closes the connection: nothing more is read
        }
        body.extend_from_slice(&chunk);
    }
    Ok(RawResponse {
        status,
        content_type,
        body,
        truncated,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_utf8_is_trimmed() {
        let mut b = "aé".as_bytes().to_vec();
        b.pop(); // cut inside "é"
        trim_partial_utf8(&mut b);
        assert_eq!(b, b"a");
        let mut b = "a€".as_bytes().to_vec();
        b.truncate(3);
        trim_partial_utf8(&mut b);
        assert_eq!(b, b"a");
        let mut b = "a€".as_bytes().to_vec();
        trim_partial_utf8(&mut b);
        assert_eq!(b, "a€".as_bytes());
        let mut b = "😀".as_bytes().to_vec();
        b.truncate(3);
        trim_partial_utf8(&mut b);
        assert!(b.is_empty());
    }
}
