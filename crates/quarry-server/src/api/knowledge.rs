//! The knowledge-base REST API (seed 003 §5.1) under `/api/v1`: knowledge bases, document
//! uploads (multipart, processed by the ingestion queue), retry, preview of the original
//! (streamed, `ETag`, `Range`), the converted Markdown, chunks ordered by page, and
//! `/api/v1/files/{bucket}/{path}` for images referenced from the Markdown.
//!
//! Successes are `{"success": true, "data": …}` (lists add `"total"`); errors have the one
//! shape of every Quarry REST route, `{"detail", "status_code"}`, with 400 / 404 / 409 /
//! 413 / 415 / 422 / 503 as fits. Handlers only translate: every rule lives in the engine.

use std::sync::Arc;

use axum::Router;
use axum::body::Body as HttpBody;
use axum::extract::{Multipart, Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use quarry_core::Error;
use quarry_engine::{
    CreateKnowledgeBase, FileFilter, RejectedKind, StatusFilter, Upload, UploadOptions,
    UploadOutcome,
};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::auth::Caller;
use crate::http::{ApiError, Body, Params, ok, ok_list, run_blocking, run_blocking_raw};
use crate::state::AppState;

/// Largest upload request (all files together); each file is also bounded by the
/// engine's per-file limit.
pub(crate) const MAX_UPLOAD_REQUEST_BYTES: usize = 1 << 30;
/// Files per upload request.
pub(crate) const MAX_FILES_PER_UPLOAD: usize = 200;
/// Bytes streamed per read of a preview.
const PREVIEW_CHUNK: usize = 256 * 1024;

pub(crate) fn router() -> Router<Arc<AppState>> {
    Router::new()
        .route("/api/v1/knowledge-bases", get(list_kbs).post(create_kb))
        .route(
            "/api/v1/knowledge-bases/{id}",
            get(get_kb).patch(update_kb).delete(delete_kb),
        )
        .route(
            "/api/v1/knowledge-bases/{id}/documents",
            get(list_docs).post(upload_docs).layer(
                // Uploads stream to the blob store; they get their own, larger limit.
                axum::extract::DefaultBodyLimit::max(MAX_UPLOAD_REQUEST_BYTES),
            ),
        )
        .route(
            "/api/v1/knowledge-bases/{id}/documents/{doc_id}",
            get(get_doc).patch(update_doc).delete(delete_doc),
        )
        .route(
            "/api/v1/knowledge-bases/{id}/documents/{doc_id}/retry",
            post(retry_doc),
        )
        .route(
            "/api/v1/knowledge-bases/{id}/documents/{doc_id}/preview",
            get(preview_doc),
        )
        .route(
            "/api/v1/knowledge-bases/{id}/documents/{doc_id}/markdown",
            get(markdown_doc),
        )
        .route(
            "/api/v1/knowledge-bases/{id}/documents/{doc_id}/chunks",
            get(chunks_doc),
        )
        .route(
            "/api/v1/knowledge-bases/{id}/documents/{doc_id}/chunks/{chunk_id}",
            axum::routing::patch(edit_chunk),
        )
        .route(
            "/api/v1/knowledge-bases/{id}/documents/{doc_id}/reparse",
            post(reparse_doc),
        )
        .route("/api/v1/files/{bucket}/{*path}", get(file))
        .route("/api/v1/queue", get(queue))
        .route("/api/v1/openapi.json", get(openapi))
}

fn with_status(status: StatusCode, r: Response) -> Response {
    (status, r).into_response()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateKbBody {
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    chunk_size: Option<u32>,
    #[serde(default)]
    chunk_overlap: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UpdateKbBody {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    description: Option<String>,
}

#[derive(Deserialize)]
struct DocsQuery {
    status: Option<String>,
    name: Option<String>,
}

async fn list_kbs(caller: Caller) -> Result<Response, ApiError> {
    let engine = caller.engine.clone();
    let kbs = run_blocking(move || engine.knowledge_bases()).await?;
    Ok(ok_list(&kbs))
}

async fn create_kb(caller: Caller, Body(b): Body<CreateKbBody>) -> Result<Response, ApiError> {
    let engine = caller.engine.clone();
    let kb = run_blocking(move || {
        engine.create_knowledge_base(&CreateKnowledgeBase {
            name: b.name,
            description: b.description,
            chunk_size: b.chunk_size,
            chunk_overlap: b.chunk_overlap,
        })
    })
    .await?;
    Ok(with_status(StatusCode::CREATED, ok(kb)))
}

async fn get_kb(caller: Caller, Path(id): Path<String>) -> Result<Response, ApiError> {
    let engine = caller.engine.clone();
    let (kb, docs) = run_blocking(move || {
        let kb = engine.knowledge_base(&id)?;
        let docs = engine.kb_documents(&kb.id, &FileFilter::default())?;
        Ok((kb, docs))
    })
    .await?;
    let mut v = serde_json::to_value(&kb).unwrap_or(Value::Null);
    if let Value::Object(m) = &mut v {
        m.insert(
            "documents".into(),
            serde_json::to_value(&docs).unwrap_or(Value::Null),
        );
    }
    Ok(ok(v))
}

async fn update_kb(
    caller: Caller,
    Path(id): Path<String>,
    Body(b): Body<UpdateKbBody>,
) -> Result<Response, ApiError> {
    if b.name.is_none() && b.description.is_none() {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "nothing to update: give name and/or description",
        ));
    }
    let engine = caller.engine.clone();
    let kb = run_blocking(move || {
        engine.update_knowledge_base(&id, b.name.as_deref(), b.description.as_deref())
    })
    .await?;
    Ok(ok(kb))
}

async fn delete_kb(
    State(st): State<Arc<AppState>>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let engine = caller.engine.clone();
    let kb = run_blocking(move || engine.delete_knowledge_base(&id)).await?;
    st.wake_workers();
    Ok(ok(
        json!({ "id": kb.id, "name": kb.name, "documents": kb.document_count, "deleted": true }),
    ))
}

fn parse_filter(q: DocsQuery) -> Result<FileFilter, ApiError> {
    let status = match q.status.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
        None => None,
        Some(s) => {
            Some(StatusFilter::parse(s).map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e))?)
        }
    };
    Ok(FileFilter {
        status,
        name: q.name.filter(|n| !n.is_empty()),
    })
}

async fn list_docs(
    caller: Caller,
    Path(id): Path<String>,
    Params(q): Params<DocsQuery>,
) -> Result<Response, ApiError> {
    let filter = parse_filter(q)?;
    let engine = caller.engine.clone();
    let docs = run_blocking(move || engine.kb_documents(&id, &filter)).await?;
    Ok(ok_list(&docs))
}

/// Multipart upload: every part with a file name (fields `files`, `file`, or any other
/// name) is one document. Each file streams to the blob store; a file over the size limit
/// is drained and reported, not stored.
async fn upload_docs(
    State(st): State<Arc<AppState>>,
    caller: Caller,
    Path(id): Path<String>,
    multipart: Result<Multipart, axum::extract::multipart::MultipartRejection>,
) -> Result<Response, ApiError> {
    let mut multipart = multipart.map_err(|e| {
        ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!(
                "upload documents as multipart/form-data with one or more 'files' parts: {}",
                e.body_text()
            ),
        )
    })?;
    // The knowledge base must exist before anything is written.
    let engine = caller.engine.clone();
    let kb_id = id.clone();
    let kb = run_blocking(move || engine.knowledge_base(&kb_id)).await?;

    let mut uploads = Vec::new();
    let mut rejected = Vec::new();
    let mut readers: Option<Vec<String>> = None;
    let mut fields = quarry_metadata::Metadata::default();
    loop {
        let field = match multipart.next_field().await {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(e) => return Err(multipart_error(e)),
        };
        let Some(file_name) = field.file_name().map(str::to_owned) else {
            // A plain form field: `readers` (comma-separated reader keys) limits who reads
            // the files of this upload, `metadata` (a JSON object of fields) is given to
            // each of them; others are ignored.
            if field.name() == Some("metadata") {
                let text = field.text().await.map_err(multipart_error)?;
                let json: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
                    ApiError::from(Error::invalid(format!("metadata is not valid JSON: {e}")))
                })?;
                fields = quarry_metadata::Metadata::from_json(&json)?;
            } else if field.name() == Some("readers") {
                let text = field.text().await.map_err(multipart_error)?;
                readers = Some(
                    text.split(',')
                        .map(str::trim)
                        .filter(|k| !k.is_empty())
                        .map(str::to_owned)
                        .collect(),
                );
            }
            continue;
        };
        if uploads.len() + rejected.len() >= MAX_FILES_PER_UPLOAD {
            return Err(ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("at most {MAX_FILES_PER_UPLOAD} files per upload request"),
            ));
        }
        let engine = caller.engine.clone();
        let mut staged = run_blocking(move || engine.stage_upload()).await?;
        let mut field = field;
        let mut too_large = None;
        loop {
            let chunk = match field.chunk().await {
                Ok(Some(c)) => c,
                Ok(None) => break,
                Err(e) => return Err(multipart_error(e)),
            };
            if too_large.is_some() {
                continue; // drain the rest of an oversized part
            }
            match staged.write_all(&chunk) {
                Ok(()) => {}
                Err(Error::TooLarge(reason)) => too_large = Some(reason),
                Err(e) => return Err(e.into()),
            }
        }
        match too_large {
            Some(reason) => rejected.push(UploadOutcome::Rejected {
                file_name: quarry_engine::clean_file_name(&file_name),
                reason,
                kind: RejectedKind::TooLarge,
            }),
            None => uploads.push(Upload { file_name, staged }),
        }
    }
    if uploads.is_empty() && rejected.is_empty() {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "no file in the upload: send multipart/form-data with one or more 'files' parts",
        ));
    }
    let engine = caller.engine.clone();
    let kb_key = kb.id.clone();
    let mut outcomes = run_blocking(move || {
        engine.add_uploads(&kb_key, uploads, &UploadOptions { readers, fields })
    })
    .await?;
    outcomes.extend(rejected);
    st.wake_workers();
    let accepted = outcomes
        .iter()
        .any(|o| !matches!(o, UploadOutcome::Rejected { .. }));
    if !accepted {
        // Nothing stored: the status says why (415 wins over 413 when both occur).
        let status = if outcomes.iter().any(|o| {
            matches!(
                o,
                UploadOutcome::Rejected {
                    kind: RejectedKind::Unsupported,
                    ..
                }
            )
        }) {
            StatusCode::UNSUPPORTED_MEDIA_TYPE
        } else if outcomes.iter().any(|o| {
            matches!(
                o,
                UploadOutcome::Rejected {
                    kind: RejectedKind::TooLarge,
                    ..
                }
            )
        }) {
            StatusCode::PAYLOAD_TOO_LARGE
        } else {
            // Only empty files: nothing to convert.
            StatusCode::UNPROCESSABLE_ENTITY
        };
        let reasons: Vec<String> = outcomes
            .iter()
            .filter_map(|o| match o {
                UploadOutcome::Rejected {
                    file_name, reason, ..
                } => Some(format!("{file_name}: {reason}")),
                _ => None,
            })
            .collect();
        return Err(ApiError::new(status, reasons.join("; ")));
    }
    Ok(with_status(
        StatusCode::ACCEPTED,
        axum::Json(json!({ "success": true, "data": outcomes, "total": outcomes.len() }))
            .into_response(),
    ))
}

fn multipart_error(e: axum::extract::multipart::MultipartError) -> ApiError {
    let status = if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
        StatusCode::PAYLOAD_TOO_LARGE
    } else {
        StatusCode::BAD_REQUEST
    };
    let text = e.body_text();
    // The parser's words name no cause a person can act on; the usual one is a file name
    // with a control character (a NUL), which no header may carry.
    let hint = if text.contains("headers") {
        " (a part's headers could not be read: a file name must not contain control characters such as NUL)"
    } else {
        ""
    };
    ApiError::new(status, format!("malformed upload: {text}{hint}"))
}

async fn get_doc(
    caller: Caller,
    Path((id, doc)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let engine = caller.engine.clone();
    let d = run_blocking(move || engine.kb_document(&id, &doc)).await?;
    Ok(ok(d))
}

/// `PATCH` a document: who reads it beside the knowledge base's admins.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UpdateDocBody {
    /// Reader keys (`user:<name>`, `group:<name>`); `null`: every reader of the knowledge
    /// base.
    readers: Option<Vec<String>>,
}

async fn update_doc(
    caller: Caller,
    Path((id, doc)): Path<(String, String)>,
    Body(b): Body<UpdateDocBody>,
) -> Result<Response, ApiError> {
    let engine = caller.engine.clone();
    let d =
        run_blocking(move || engine.set_document_readers(&id, &doc, b.readers.as_deref())).await?;
    Ok(ok(d))
}

async fn delete_doc(
    State(st): State<Arc<AppState>>,
    caller: Caller,
    Path((id, doc)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let engine = caller.engine.clone();
    let d = run_blocking(move || engine.delete_kb_document(&id, &doc)).await?;
    st.wake_workers();
    Ok(ok(
        json!({ "id": d.id, "file_name": d.file_name, "deleted": true }),
    ))
}

async fn retry_doc(
    State(st): State<Arc<AppState>>,
    caller: Caller,
    Path((id, doc)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let engine = caller.engine.clone();
    let d = run_blocking(move || engine.retry_kb_document(&id, &doc)).await?;
    st.wake_workers();
    Ok(with_status(StatusCode::ACCEPTED, ok(d)))
}

async fn markdown_doc(
    caller: Caller,
    Path((id, doc)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let engine = caller.engine.clone();
    let (d, markdown) = run_blocking(move || engine.kb_document_markdown(&id, &doc)).await?;
    Ok(ok(json!({
        "id": d.id,
        "file_name": d.file_name,
        "docid": d.docid,
        "pages": d.pages,
        "markdown": markdown,
    })))
}

async fn chunks_doc(
    caller: Caller,
    Path((id, doc)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let engine = caller.engine.clone();
    let found = run_blocking(move || engine.kb_document_chunks(&id, &doc)).await?;
    Ok(axum::Json(json!({
        "success": true,
        "data": found.chunks,
        "total": found.chunks.len(),
        "chunking": found.chunking,
    }))
    .into_response())
}

/// `{"content": text | null, "enabled": bool}`: `content` null restores the text as cut.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EditChunkBody {
    #[serde(default, deserialize_with = "crate::http::nullable")]
    content: Option<Option<String>>,
    #[serde(default)]
    enabled: Option<bool>,
}

/// Edits, restores, disables or enables one chunk; answers the chunk as it now is and
/// whether its text was embedded before the answer.
async fn edit_chunk(
    caller: Caller,
    Path((id, doc, chunk)): Path<(String, String, String)>,
    Body(b): Body<EditChunkBody>,
) -> Result<Response, ApiError> {
    let editor = crate::service::entries::editor(&caller);
    let change = quarry_engine::ChunkChange {
        content: b.content,
        enabled: b.enabled,
    };
    let engine = caller.engine.clone();
    let note = json!({
        "knowledge_base": id, "document": doc, "chunk": chunk,
        "content": match &change.content { None => "kept", Some(None) => "restored", Some(Some(_)) => "edited" },
        "enabled": change.enabled,
    });
    let (view, embedding) =
        run_blocking(move || engine.edit_kb_chunk(&id, &doc, &chunk, &change, &editor)).await?;
    let mut response = axum::Json(json!({ "success": true, "data": view, "embedding": embedding }))
        .into_response();
    response
        .extensions_mut()
        .insert(crate::audit::AuditNote::Change(note));
    Ok(response)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReparseBody {
    #[serde(default)]
    chunk_size: Option<u32>,
    #[serde(default)]
    chunk_overlap: Option<u32>,
}

/// Cuts a document again with its own chunk size and overlap (none given: its knowledge
/// base's again); the new chunks' embedding is queued.
async fn reparse_doc(
    State(st): State<Arc<AppState>>,
    caller: Caller,
    Path((id, doc)): Path<(String, String)>,
    Body(b): Body<ReparseBody>,
) -> Result<Response, ApiError> {
    let engine = caller.engine.clone();
    let note = json!({
        "knowledge_base": id, "document": doc, "reparse": true,
        "chunk_size": b.chunk_size, "chunk_overlap": b.chunk_overlap,
    });
    let recut =
        run_blocking(move || engine.recut_kb_document(&id, &doc, b.chunk_size, b.chunk_overlap))
            .await?;
    st.wake_workers();
    let mut response = ok(recut);
    response
        .extensions_mut()
        .insert(crate::audit::AuditNote::Change(note));
    Ok(response)
}

async fn preview_doc(
    caller: Caller,
    Path((id, doc)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let engine = caller.engine.clone();
    let d = run_blocking(move || engine.kb_document(&id, &doc)).await?;
    serve_blob(
        caller.engine.clone(),
        d.sha256,
        d.size,
        d.mime,
        Some(d.file_name),
        &headers,
    )
    .await
}

/// `/api/v1/files/{bucket}/{path}`: `images/<sha256>.<ext>` (images extracted from
/// documents) or `originals/<sha256>`; only blobs a document of the caller's space
/// references, anything else 404.
async fn file(
    caller: Caller,
    Path((bucket, path)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let not_found = || ApiError::new(StatusCode::NOT_FOUND, "file not found");
    if !matches!(bucket.as_str(), "images" | "originals") {
        return Err(not_found());
    }
    let sha = path.split('.').next().unwrap_or_default().to_owned();
    let engine = caller.engine.clone();
    let key = sha.clone();
    let (size, mime) = run_blocking(move || engine.readable_blob(&key))
        .await
        .map_err(|_| not_found())?;
    serve_blob(caller.engine.clone(), sha, size, mime, None, &headers).await
}

/// One byte range of a `Range: bytes=…` header (a single range; others are served whole).
fn parse_range(h: &str, size: u64) -> Option<Result<(u64, u64), ()>> {
    let spec = h.trim().strip_prefix("bytes=")?;
    if spec.contains(',') {
        return None;
    }
    let (a, b) = spec.split_once('-')?;
    let (start, end) = match (a.trim(), b.trim()) {
        ("", suffix) => {
            let n: u64 = suffix.parse().ok()?;
            if n == 0 {
                return Some(Err(()));
            }
            (size.saturating_sub(n), size.checked_sub(1)?)
        }
        (s, "") => (s.parse().ok()?, size.checked_sub(1)?),
        (s, e) => (
            s.parse().ok()?,
            e.parse::<u64>().ok()?.min(size.saturating_sub(1)),
        ),
    };
    if start >= size || start > end {
        return Some(Err(()));
    }
    Some(Ok((start, end)))
}

/// Streams a blob with `Content-Type`, a strong `ETag` (its SHA-256), `Accept-Ranges` and
/// single-range `Range` support; `If-None-Match` answers 304.
async fn serve_blob(
    engine: quarry_engine::Engine,
    sha: String,
    size: u64,
    mime: String,
    file_name: Option<String>,
    headers: &HeaderMap,
) -> Result<Response, ApiError> {
    let etag = format!("\"{sha}\"");
    let mut base = HeaderMap::new();
    let put = |h: &mut HeaderMap, k: header::HeaderName, v: &str| {
        if let Ok(v) = HeaderValue::from_str(v) {
            h.insert(k, v);
        }
    };
    put(&mut base, header::ETAG, &etag);
    put(&mut base, header::ACCEPT_RANGES, "bytes");
    put(&mut base, header::CACHE_CONTROL, "private, max-age=3600");
    put(&mut base, header::CONTENT_TYPE, &mime);
    put(&mut base, header::X_CONTENT_TYPE_OPTIONS, "nosniff");
    if [
        "text/html",
        "application/xhtml",
        "image/svg",
        "text/xml",
        "application/xml",
    ]
    .iter()
    .any(|m| mime.starts_with(m))
    {
        // An uploaded page or SVG image must not run script on Quarry's origin.
        put(&mut base, header::CONTENT_SECURITY_POLICY, "sandbox");
    }
    if let Some(name) = &file_name {
        let encoded: String = name
            .bytes()
            .map(|b| {
                if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                    (b as char).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect();
        put(
            &mut base,
            header::CONTENT_DISPOSITION,
            &format!("inline; filename*=UTF-8''{encoded}"),
        );
    }
    if headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*"))
    {
        return Ok((StatusCode::NOT_MODIFIED, base).into_response());
    }
    let range = headers
        .get(header::RANGE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| parse_range(v, size));
    let (status, start, end) = match range {
        None => (StatusCode::OK, 0, size.saturating_sub(1)),
        Some(Ok((s, e))) => (StatusCode::PARTIAL_CONTENT, s, e),
        Some(Err(())) => {
            put(&mut base, header::CONTENT_RANGE, &format!("bytes */{size}"));
            return Ok((StatusCode::RANGE_NOT_SATISFIABLE, base).into_response());
        }
    };
    let len = if size == 0 { 0 } else { end - start + 1 };
    if status == StatusCode::PARTIAL_CONTENT {
        put(
            &mut base,
            header::CONTENT_RANGE,
            &format!("bytes {start}-{end}/{size}"),
        );
    }
    put(&mut base, header::CONTENT_LENGTH, &len.to_string());
    // Read in bounded pieces on blocking threads: a 100 MB original never sits in memory.
    let stream = futures_util::stream::unfold(
        (engine, sha, start, len),
        |(engine, sha, offset, left)| async move {
            if left == 0 {
                return None;
            }
            let n = (left as usize).min(PREVIEW_CHUNK);
            let e = engine.clone();
            let key = sha.clone();
            let piece = run_blocking_raw(move || e.read_blob(&key, offset, n)).await;
            match piece {
                Ok(Ok(bytes)) if !bytes.is_empty() => {
                    let got = bytes.len() as u64;
                    Some((
                        Ok::<_, std::io::Error>(axum::body::Bytes::from(bytes)),
                        (engine, sha, offset + got, left - got),
                    ))
                }
                Ok(Ok(_)) => None,
                Ok(Err(e)) => Some((
                    Err(std::io::Error::other(e.to_string())),
                    (engine, sha, offset, 0),
                )),
                Err(e) => Some((
                    Err(std::io::Error::other(e.to_string())),
                    (engine, sha, offset, 0),
                )),
            }
        },
    );
    Ok((status, base, HttpBody::from_stream(stream)).into_response())
}

async fn queue(caller: Caller) -> Result<Response, ApiError> {
    let engine = caller.engine.clone();
    let (counts, embedding) = run_blocking(move || {
        Ok::<_, quarry_core::Error>((engine.queue_counts()?, engine.embedding_progress()?))
    })
    .await?;
    let mut body = json!(counts);
    body["embedding"] = json!(embedding);
    Ok(ok(body))
}

async fn openapi() -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        include_str!("../openapi.json"),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::parse_range;

    #[test]
    fn ranges() {
        assert_eq!(parse_range("bytes=0-9", 100), Some(Ok((0, 9))));
        assert_eq!(parse_range("bytes=90-", 100), Some(Ok((90, 99))));
        assert_eq!(parse_range("bytes=-10", 100), Some(Ok((90, 99))));
        assert_eq!(parse_range("bytes=95-200", 100), Some(Ok((95, 99))));
        assert_eq!(parse_range("bytes=100-", 100), Some(Err(())));
        assert_eq!(parse_range("bytes=5-1", 100), Some(Err(())));
        assert_eq!(parse_range("bytes=0-1,5-6", 100), None);
        assert_eq!(parse_range("items=0-1", 100), None);
    }
}
