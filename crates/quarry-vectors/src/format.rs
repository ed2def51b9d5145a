//! On-disk framing around the usearch serialisation.
//!
//! A saved index is the usearch file, byte for byte, followed by a fixed 48-byte trailer:
//!
//! | offset | size | field                                                   |
//! |-------:|-----:|---------------------------------------------------------|
//! | 0      | 8    | payload length in bytes (u64 LE) = file length − 48     |
//! | 8      | 4    | CRC-32 of payload ‖ trailer bytes 0..48 with this field zeroed |
//! | 12     | 4    | trailer format version (u32 LE, currently 1)            |
//! | 16     | 8    | dimensions (u64 LE)                                     |
//! | 24     | 8    | number of live vectors (u64 LE)                         |
//! | 32     | 1    | metric (1 = cosine)                                     |
//! | 33     | 1    | quantization (1 = f32, 2 = i8)                          |
//! | 34     | 6    | reserved, zero                                          |
//! | 40     | 8    | magic `b"QRYVEC\x00\x01"`                              |
//!
//! usearch reads its stream sequentially and ignores the trailing bytes, so the file stays
//! loadable by usearch itself. The trailer exists because usearch does not checksum its
//! files and trusts the sizes it reads: it lets [`crate::VectorIndex::open`] reject a
//! truncated or damaged file with a clear error before any of it reaches the C++ loader.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use crate::error::{Result, VectorError};
use crate::options::{Metric, Quantization};

pub(crate) const TRAILER_LEN: usize = 48;
pub(crate) const MAGIC: [u8; 8] = *b"QRYVEC\x00\x01";
pub(crate) const FORMAT_VERSION: u32 = 1;
const CRC_RANGE: std::ops::Range<usize> = 8..12;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Trailer {
    pub(crate) payload_len: u64,
    pub(crate) crc32: u32,
    pub(crate) format_version: u32,
    pub(crate) dimensions: u64,
    pub(crate) count: u64,
    pub(crate) metric: u8,
    pub(crate) quantization: u8,
}

pub(crate) fn metric_code(metric: Metric) -> u8 {
    match metric {
        Metric::Cosine => 1,
    }
}

pub(crate) fn metric_from_code(code: u8) -> Option<Metric> {
    match code {
        1 => Some(Metric::Cosine),
        _ => None,
    }
}

pub(crate) fn quantization_code(q: Quantization) -> u8 {
    match q {
        Quantization::F32 => 1,
        Quantization::I8 => 2,
    }
}

pub(crate) fn quantization_from_code(code: u8) -> Option<Quantization> {
    match code {
        1 => Some(Quantization::F32),
        2 => Some(Quantization::I8),
        _ => None,
    }
}

fn u64_at(bytes: &[u8; TRAILER_LEN], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(b)
}

fn u32_at(bytes: &[u8; TRAILER_LEN], at: usize) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(b)
}

impl Trailer {
    pub(crate) fn encode(&self) -> [u8; TRAILER_LEN] {
        let mut out = [0u8; TRAILER_LEN];
        out[0..8].copy_from_slice(&self.payload_len.to_le_bytes());
        out[8..12].copy_from_slice(&self.crc32.to_le_bytes());
        out[12..16].copy_from_slice(&self.format_version.to_le_bytes());
        out[16..24].copy_from_slice(&self.dimensions.to_le_bytes());
        out[24..32].copy_from_slice(&self.count.to_le_bytes());
        out[32] = self.metric;
        out[33] = self.quantization;
        out[40..48].copy_from_slice(&MAGIC);
        out
    }

    /// Decodes a trailer; `None` when the magic is absent.
    pub(crate) fn decode(bytes: &[u8; TRAILER_LEN]) -> Option<Self> {
        if bytes[40..48] != MAGIC {
            return None;
        }
        Some(Trailer {
            payload_len: u64_at(bytes, 0),
            crc32: u32_at(bytes, 8),
            format_version: u32_at(bytes, 12),
            dimensions: u64_at(bytes, 16),
            count: u64_at(bytes, 24),
            metric: bytes[32],
            quantization: bytes[33],
        })
    }

    /// The trailer bytes as they enter the checksum (CRC field zeroed).
    pub(crate) fn checksummed_bytes(&self) -> [u8; TRAILER_LEN] {
        let mut bytes = self.encode();
        bytes[CRC_RANGE].fill(0);
        bytes
    }
}

/// CRC-32 of the first `len` bytes of `file` (read from the start), streaming.
pub(crate) fn crc_of_prefix(file: &mut File, path: &Path, len: u64) -> Result<crc32fast::Hasher> {
    file.seek(SeekFrom::Start(0))
        .map_err(|e| VectorError::io(path, e))?;
    let mut hasher = crc32fast::Hasher::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut remaining = len;
    while remaining > 0 {
        let want = usize::try_from(remaining.min(buf.len() as u64)).unwrap_or(buf.len());
        let got = file
            .read(&mut buf[..want])
            .map_err(|e| VectorError::io(path, e))?;
        if got == 0 {
            return Err(VectorError::corrupt(
                path,
                format!("file ended {remaining} bytes early while verifying its checksum"),
            ));
        }
        hasher.update(&buf[..got]);
        remaining -= got as u64;
    }
    Ok(hasher)
}

/// Reads and fully validates the trailer of `path` (length, magic, version, CRC).
pub(crate) fn read_and_verify(path: &Path) -> Result<Trailer> {
    let mut file = File::open(path).map_err(|e| VectorError::io(path, e))?;
    let file_len = file.metadata().map_err(|e| VectorError::io(path, e))?.len();
    if file_len < TRAILER_LEN as u64 {
        return Err(VectorError::corrupt(
            path,
            format!("file is {file_len} bytes, too short to hold an index"),
        ));
    }
    let mut raw = [0u8; TRAILER_LEN];
    file.seek(SeekFrom::Start(file_len - TRAILER_LEN as u64))
        .map_err(|e| VectorError::io(path, e))?;
    file.read_exact(&mut raw)
        .map_err(|e| VectorError::io(path, e))?;
    let trailer = Trailer::decode(&raw).ok_or_else(|| {
        VectorError::corrupt(
            path,
            "no quarry-vectors trailer at the end of the file (truncated, or not written by \
             quarry-vectors)",
        )
    })?;
    if trailer.format_version != FORMAT_VERSION {
        return Err(VectorError::corrupt(
            path,
            format!(
                "unsupported trailer format version {} (this build reads version {FORMAT_VERSION})",
                trailer.format_version
            ),
        ));
    }
    let expected_len = trailer.payload_len.checked_add(TRAILER_LEN as u64);
    if expected_len != Some(file_len) {
        return Err(VectorError::corrupt(
            path,
            format!(
                "trailer records a {}-byte payload but the file holds {} bytes before the trailer",
                trailer.payload_len,
                file_len - TRAILER_LEN as u64
            ),
        ));
    }
    let mut hasher = crc_of_prefix(&mut file, path, trailer.payload_len)?;
    hasher.update(&trailer.checksummed_bytes());
    let actual = hasher.finalize();
    if actual != trailer.crc32 {
        return Err(VectorError::corrupt(
            path,
            format!(
                "checksum mismatch (stored {:08x}, computed {actual:08x})",
                trailer.crc32
            ),
        ));
    }
    Ok(trailer)
}
