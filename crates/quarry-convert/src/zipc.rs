//! Zip containers (DOCX, XLSX, PPTX, ODS): format checks and zip-bomb accounting.
//!
//! Headers lie, so the decompressed-size limit is enforced twice: the sum of the sizes the
//! central directory declares is checked up front, and every byte actually inflated is
//! counted against the same budget while parts are read.

use std::io::{Cursor, Read};

use crate::types::{ConvertError, Format, Limits};
use crate::util;

pub(crate) struct Package<'a> {
    archive: zip::ZipArchive<Cursor<&'a [u8]>>,
    format: Format,
    limit: u64,
    /// Bytes still allowed to be inflated.
    budget: u64,
    names: Vec<String>,
}

/// Rejects what is not a zip container of `format`: OLE files (encrypted OOXML is an OLE
/// file holding `EncryptionInfo`), PDFs and the like renamed, damaged archives.
pub(crate) fn check_container(bytes: &[u8], format: Format) -> Result<(), ConvertError> {
    if bytes.starts_with(b"\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1") {
        if is_encrypted_ole(bytes) {
            return Err(ConvertError::Encrypted(format));
        }
        return Err(ConvertError::WrongFormat {
            expected: format,
            detail: Some("an older binary Office file; save it in the newer format".to_owned()),
        });
    }
    if !bytes.starts_with(b"PK\x03\x04") && !bytes.starts_with(b"PK\x05\x06") {
        return Err(ConvertError::WrongFormat {
            expected: format,
            detail: util::sniff(bytes).map(|s| format!("looks like {s}")),
        });
    }
    Ok(())
}

/// An OLE compound file holding an encrypted OOXML package (`EncryptionInfo` /
/// `EncryptedPackage` streams, names stored as UTF-16LE in the directory).
pub(crate) fn is_encrypted_ole(bytes: &[u8]) -> bool {
    let utf16 = |s: &str| -> Vec<u8> { s.encode_utf16().flat_map(u16::to_le_bytes).collect() };
    util::find(bytes, &utf16("EncryptionInfo")).is_some()
        || util::find(bytes, &utf16("EncryptedPackage")).is_some()
}

impl<'a> Package<'a> {
    pub(crate) fn open(
        bytes: &'a [u8],
        format: Format,
        limits: &Limits,
    ) -> Result<Package<'a>, ConvertError> {
        check_container(bytes, format)?;
        let mut archive =
            zip::ZipArchive::new(Cursor::new(bytes)).map_err(|e| ConvertError::Corrupt {
                format,
                detail: format!("damaged zip container ({e})"),
            })?;
        let limit = limits.max_decompressed_bytes;
        let mut declared: u64 = 0;
        for i in 0..archive.len() {
            let size = archive.by_index_raw(i).map(|f| f.size()).unwrap_or(0);
            declared = declared.saturating_add(size);
        }
        if declared > limit {
            return Err(ConvertError::DecompressionBomb { limit });
        }
        let names = archive
            .file_names()
            .filter_map(|n| n.ok().map(|n| n.into_owned()))
            .collect();
        Ok(Package {
            archive,
            format,
            limit,
            budget: limit,
            names,
        })
    }

    pub(crate) fn names(&self) -> &[String] {
        &self.names
    }

    pub(crate) fn has(&self, name: &str) -> bool {
        self.names.iter().any(|n| n == name)
    }

    /// Reads a part, counting inflated bytes; `None` when absent (or unreadable: a damaged
    /// part is skipped, not fatal, unless it is the main one — callers decide).
    pub(crate) fn read(&mut self, name: &str) -> Result<Option<Vec<u8>>, ConvertError> {
        let name = name.trim_start_matches('/');
        let actual = if self.has(name) {
            name.to_owned()
        } else if let Some(n) = self.names.iter().find(|n| n.eq_ignore_ascii_case(name)) {
            n.clone()
        } else {
            return Ok(None);
        };
        let format = self.format;
        let mut file = match self.archive.by_name(&actual) {
            Ok(f) => f,
            Err(zip::result::ZipError::UnsupportedArchive(msg)) if msg.contains("assword") => {
                return Err(ConvertError::Encrypted(format));
            }
            Err(_) => return Ok(None),
        };
        let mut buf = Vec::with_capacity(file.size().min(self.budget).min(64 << 20) as usize);
        let read = (&mut file)
            .take(self.budget.saturating_add(1))
            .read_to_end(&mut buf);
        match read {
            Ok(n) => {
                if n as u64 > self.budget {
                    return Err(ConvertError::DecompressionBomb { limit: self.limit });
                }
                self.budget -= n as u64;
                Ok(Some(buf))
            }
            Err(e) => Err(ConvertError::Corrupt {
                format,
                detail: format!("damaged part {actual} ({e})"),
            }),
        }
    }

    /// Reads a part as text (UTF-8).
    pub(crate) fn read_text(&mut self, name: &str) -> Result<Option<String>, ConvertError> {
        Ok(self.read(name)?.map(|b| crate::xml::part_text(&b)))
    }

    /// Inflates every entry into nothing, counting bytes: the zip-bomb check for containers a
    /// third-party reader (calamine) then opens itself.
    pub(crate) fn check_all(&mut self) -> Result<(), ConvertError> {
        let mut total: u64 = 0;
        for i in 0..self.archive.len() {
            let Ok(mut file) = self.archive.by_index(i) else {
                continue;
            };
            let left = self.limit.saturating_sub(total);
            let n = std::io::copy(
                &mut (&mut file).take(left.saturating_add(1)),
                &mut std::io::sink(),
            )
            .unwrap_or(0);
            total = total.saturating_add(n);
            if total > self.limit {
                return Err(ConvertError::DecompressionBomb { limit: self.limit });
            }
        }
        Ok(())
    }
}
