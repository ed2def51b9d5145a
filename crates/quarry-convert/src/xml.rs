//! Small helpers over `quick-xml`'s pull parser for the OOXML/ODF converters.

use quick_xml::events::{BytesRef, BytesStart};

/// The value of the attribute whose local name is `name` (prefix ignored), unescaped.
pub(crate) fn attr(e: &BytesStart<'_>, name: &str) -> Option<String> {
    for a in e.attributes().with_checks(false).flatten() {
        if a.key.local_name().as_ref() == name {
            return Some(
                a.normalized_value(quick_xml::XmlVersion::Implicit1_0)
                    .map(|v| v.into_owned())
                    .unwrap_or_else(|_| a.value.clone().into_owned()),
            );
        }
    }
    None
}

/// The text an entity or character reference (`&amp;`, `&#20013;`) stands for.
pub(crate) fn resolve_ref(r: &BytesRef<'_>) -> String {
    if let Ok(Some(c)) = r.resolve_char_ref() {
        return c.to_string();
    }
    let name = r.xml10_content();
    match name.as_ref() {
        "amp" => "&".to_owned(),
        "lt" => "<".to_owned(),
        "gt" => ">".to_owned(),
        "quot" => "\"".to_owned(),
        "apos" => "'".to_owned(),
        other => format!("&{other};"),
    }
}

/// `w:val="0"`/`"false"`/`"none"` switch a toggle property off; absent means on.
pub(crate) fn toggle_on(e: &BytesStart<'_>) -> bool {
    !matches!(
        attr(e, "val").as_deref(),
        Some("0") | Some("false") | Some("none") | Some("off")
    )
}

/// Decodes an XML part as UTF-8 (OOXML and ODF parts are UTF-8 in practice; UTF-16 parts
/// carry a BOM).
pub(crate) fn part_text(bytes: &[u8]) -> String {
    if bytes.starts_with(b"\xFF\xFE") || bytes.starts_with(b"\xFE\xFF") {
        return crate::util::decode_text(bytes).0;
    }
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    String::from_utf8_lossy(bytes).into_owned()
}

/// Relationship targets of a part: `Id` → (resolved part name or external URL, external?).
pub(crate) fn relationships(
    rels_xml: &str,
    base_dir: &str,
) -> std::collections::HashMap<String, (String, bool)> {
    use quick_xml::events::Event;
    let mut map = std::collections::HashMap::new();
    let mut reader = quick_xml::Reader::from_str(rels_xml);
    loop {
        match reader.read_event() {
            Ok(Event::Start(e)) | Ok(Event::Empty(e))
                if e.local_name().as_ref() == "Relationship" =>
            {
                let (Some(id), Some(target)) = (attr(&e, "Id"), attr(&e, "Target")) else {
                    continue;
                };
                let external = attr(&e, "TargetMode").is_some_and(|m| m == "External");
                let resolved = if external {
                    target
                } else {
                    resolve_part(base_dir, &target)
                };
                map.insert(id, (resolved, external));
            }
            Ok(Event::Eof) | Err(_) => break,
            _ => {}
        }
    }
    map
}

/// Resolves a relationship target against the directory of the source part
/// (`word` + `media/image1.png` → `word/media/image1.png`; `/ppt/x` is absolute).
pub(crate) fn resolve_part(base_dir: &str, target: &str) -> String {
    let mut parts: Vec<&str> = if target.starts_with('/') {
        Vec::new()
    } else {
        base_dir.split('/').filter(|s| !s.is_empty()).collect()
    };
    for seg in target.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            s => parts.push(s),
        }
    }
    parts.join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn part_paths_resolve() {
        assert_eq!(
            resolve_part("word", "media/image1.png"),
            "word/media/image1.png"
        );
        assert_eq!(
            resolve_part("ppt/slides", "../media/a.png"),
            "ppt/media/a.png"
        );
        assert_eq!(
            resolve_part("ppt/slides", "/ppt/notesSlides/n1.xml"),
            "ppt/notesSlides/n1.xml"
        );
    }
}
