//! PPTX → Markdown: one `## Slide N` section per slide, with a page span per slide.
//!
//! Our own `zip` + `quick-xml` walk, because slide order lives in `presentation.xml`'s
//! relationship list (not in part names: `slide10.xml` sorts before `slide2.xml`), titles are
//! identified by placeholder type, tables are DrawingML tables inside graphic frames, images
//! come through slide relationships, and speaker notes are a separate part per slide — a
//! text dump would lose all of that.

use std::collections::HashMap;

use quick_xml::Reader;
use quick_xml::events::{BytesStart, Event};

use crate::types::{ConvertError, ConvertOptions, Converted, Converter, Deadline, Format, Image};
use crate::util::{self, md_table};
use crate::xml::{attr, part_text, relationships, resolve_ref};
use crate::zipc::Package;

pub(crate) struct PptxConverter;

impl Converter for PptxConverter {
    fn format(&self) -> Format {
        Format::Pptx
    }

    fn convert(&self, bytes: &[u8], opts: &ConvertOptions) -> Result<Converted, ConvertError> {
        let deadline = Deadline::new(&opts.limits);
        let mut pkg = Package::open(bytes, Format::Pptx, &opts.limits)?;
        let Some(pres) = pkg.read_text("ppt/presentation.xml")? else {
            return Err(ConvertError::WrongFormat {
                expected: Format::Pptx,
                detail: Some("no ppt/presentation.xml".to_owned()),
            });
        };
        let pres_rels = pkg
            .read_text("ppt/_rels/presentation.xml.rels")?
            .map(|x| relationships(&x, "ppt"))
            .unwrap_or_default();
        let mut slides = slide_order(&pres, &pres_rels);
        if slides.is_empty() {
            // No slide list: fall back to the slide parts in numeric order.
            let mut named: Vec<(u32, String)> = pkg
                .names()
                .iter()
                .filter_map(|n| {
                    let num = n.strip_prefix("ppt/slides/slide")?.strip_suffix(".xml")?;
                    Some((num.parse().ok()?, n.clone()))
                })
                .collect();
            named.sort();
            slides = named.into_iter().map(|(_, n)| n).collect();
        }
        let limit = opts.limits.max_pages;
        if slides.len() > limit as usize {
            return Err(ConvertError::TooManyPages {
                pages: slides.len().min(u32::MAX as usize) as u32,
                limit,
            });
        }
        let properties = pkg
            .read_text("docProps/core.xml")?
            .map(|x| crate::props::core_properties(&x))
            .unwrap_or_default();
        let title = properties.title.clone();

        let mut md = String::new();
        let mut pages = Vec::new();
        let mut images: Vec<Image> = Vec::new();
        let mut warnings = Vec::new();
        let mut first_title = None;
        for (i, slide) in slides.iter().enumerate() {
            deadline.check()?;
            let n = i as u32 + 1;
            let dir = slide.rsplit_once('/').map_or("", |(d, _)| d).to_owned();
            let file = slide.rsplit('/').next().unwrap_or("");
            let rels = pkg
                .read_text(&format!("{dir}/_rels/{file}.rels"))?
                .map(|x| relationships(&x, &dir))
                .unwrap_or_default();
            let mut section = String::new();
            match pkg.read(slide)? {
                Some(xml) => {
                    let parsed = parse_slide(&part_text(&xml));
                    let heading = match &parsed.title {
                        Some(t) => format!("## Slide {n}: {t}\n\n"),
                        None => format!("## Slide {n}\n\n"),
                    };
                    if first_title.is_none() {
                        first_title.clone_from(&parsed.title);
                    }
                    section.push_str(&heading);
                    for block in parsed.blocks {
                        match block {
                            SlideBlock::Text(t) => {
                                section.push_str(&t);
                                section.push_str("\n\n");
                            }
                            SlideBlock::Diagram(id) => {
                                let Some((target, false)) = rels.get(&id).cloned() else {
                                    continue;
                                };
                                if let Some(xml) = pkg.read(&target)? {
                                    for line in diagram_text(&part_text(&xml)) {
                                        section.push_str(&format!("- {line}\n"));
                                    }
                                    section.push('\n');
                                }
                            }
                            SlideBlock::Image { id, alt } => {
                                let Some((target, false)) = rels.get(&id).cloned() else {
                                    continue;
                                };
                                if let Some(bytes) = pkg.read(&target)? {
                                    let name = util::add_image(
                                        &mut images,
                                        util::make_image(bytes, &target),
                                    );
                                    section.push_str(&format!(
                                        "![{alt}]({}{name})\n\n",
                                        opts.image_url_prefix
                                    ));
                                }
                            }
                        }
                    }
                    // Speaker notes.
                    let notes_part = rels
                        .values()
                        .find(|(t, ext)| !ext && t.contains("notesSlide"))
                        .map(|(t, _)| t.clone());
                    if let Some(notes_part) = notes_part
                        && let Some(nx) = pkg.read(&notes_part)?
                    {
                        let notes = parse_notes(&part_text(&nx));
                        if !notes.trim().is_empty() {
                            section.push_str("### Notes:\n\n");
                            section.push_str(notes.trim());
                            section.push_str("\n\n");
                        }
                    }
                }
                None => {
                    warnings.push(format!("slide {n} is missing from the file"));
                    section.push_str(&format!("## Slide {n}\n\n"));
                }
            }
            util::push_page(&mut md, &mut pages, n, &util::tidy(&section));
        }
        while md.ends_with("\n\n") {
            md.pop();
        }
        util::end_pages_at(&mut pages, md.len());
        Ok(Converted {
            markdown: md,
            title: title.or(first_title),
            pages,
            images,
            warnings,
            properties,
            ..Default::default()
        })
    }
}

/// Slide part names in presentation order (`p:sldIdLst`).
fn slide_order(pres: &str, rels: &HashMap<String, (String, bool)>) -> Vec<String> {
    let mut out = Vec::new();
    let mut reader = Reader::from_str(pres);
    loop {
        match reader.read_event() {
            Ok(Event::Start(e)) | Ok(Event::Empty(e)) if e.local_name().as_ref() == "sldId" => {
                if let Some((t, false)) = rid(&e).and_then(|id| rels.get(&id).cloned()) {
                    out.push(t);
                }
            }
            Ok(Event::Eof) | Err(_) => break,
            _ => {}
        }
    }
    out
}

/// The `r:id` attribute (the plain `id` is the slide's numeric id).
fn rid(e: &BytesStart<'_>) -> Option<String> {
    for a in e.attributes().with_checks(false).flatten() {
        let key = a.key.as_ref();
        if key.ends_with(":id") {
            return a
                .normalized_value(quick_xml::XmlVersion::Implicit1_0)
                .ok()
                .map(|v| v.into_owned());
        }
    }
    None
}

/// A DrawingML table being read: finished rows, the current row, the current cell's
/// paragraphs.
type TableState = (Vec<Vec<String>>, Vec<String>, Option<Vec<String>>);

enum SlideBlock {
    Text(String),
    Diagram(String),
    Image { id: String, alt: String },
}

#[derive(Default)]
struct ParsedSlide {
    title: Option<String>,
    blocks: Vec<SlideBlock>,
}

/// Per shape: placeholder kind, paragraphs.
#[derive(Default)]
struct Shape {
    ph: Option<String>,
    paras: Vec<(u32, bool, String)>,
    /// A `<p:sp>` with a placeholder or `a:bu*` bullets renders paragraphs as list items.
    alt: String,
}

fn parse_slide(xml: &str) -> ParsedSlide {
    let mut out = ParsedSlide::default();
    let mut reader = Reader::from_str(xml);
    let mut shapes: Vec<Shape> = Vec::new();
    // Current paragraph: level, explicit bullet?, text.
    let mut para: Option<(u32, Option<bool>, String)> = None;
    let mut in_t = false;
    // Tables: rows of cells of paragraphs.
    let mut table: Option<TableState> = None;
    let mut skip = 0usize;
    while let Ok(ev) = reader.read_event() {
        match ev {
            Event::Start(e) => {
                if skip > 0 {
                    skip += 1;
                    continue;
                }
                match e.local_name().as_ref() {
                    // Alternate content's fallback repeats the choice; backgrounds are decoration.
                    "Fallback" | "bg" => skip = 1,
                    "sp" | "pic" | "graphicFrame" | "cxnSp" => shapes.push(Shape::default()),
                    "p" => para = Some((0, None, String::new())),
                    "t" => in_t = true,
                    "tbl" => table = Some((Vec::new(), Vec::new(), None)),
                    "tc" => {
                        if let Some(t) = table.as_mut() {
                            t.2 = Some(Vec::new());
                        }
                    }
                    _ => on_open(&e, &mut shapes, &mut para, &mut out),
                }
            }
            Event::Empty(e) => {
                if skip > 0 {
                    continue;
                }
                match e.local_name().as_ref() {
                    "tc" => {
                        if let Some(t) = table.as_mut() {
                            t.1.push(String::new());
                        }
                    }
                    _ => on_open(&e, &mut shapes, &mut para, &mut out),
                }
            }
            Event::Text(t) if in_t && skip == 0 => {
                if let Some(p) = para.as_mut() {
                    p.2.push_str(&t.xml10_content());
                }
            }
            Event::GeneralRef(r) if in_t && skip == 0 => {
                if let Some(p) = para.as_mut() {
                    p.2.push_str(&resolve_ref(&r));
                }
            }
            Event::End(e) => {
                if skip > 0 {
                    skip -= 1;
                    continue;
                }
                match e.local_name().as_ref() {
                    "t" => in_t = false,
                    "p" => {
                        let Some((lvl, bullet, text)) = para.take() else {
                            continue;
                        };
                        let text = text.trim().to_owned();
                        if text.is_empty() {
                            continue;
                        }
                        if let Some(cell) = table.as_mut().and_then(|t| t.2.as_mut()) {
                            cell.push(text);
                        } else if let Some(s) = shapes.last_mut() {
                            let is_bullet = bullet
                                .unwrap_or(matches!(s.ph.as_deref(), Some("body") | Some("obj")));
                            s.paras.push((lvl, is_bullet, text));
                        }
                    }
                    "tc" => {
                        if let Some(t) = table.as_mut() {
                            let cell = t.2.take().unwrap_or_default().join("\n");
                            t.1.push(cell);
                        }
                    }
                    "tr" => {
                        if let Some(t) = table.as_mut() {
                            let row = std::mem::take(&mut t.1);
                            t.0.push(row);
                        }
                    }
                    "tbl" => {
                        if let Some((rows, _, _)) = table.take()
                            && !rows.is_empty()
                        {
                            out.blocks.push(SlideBlock::Text(md_table(&rows)));
                        }
                    }
                    "sp" | "pic" | "graphicFrame" | "cxnSp" => {
                        let Some(s) = shapes.pop() else {
                            continue;
                        };
                        if s.paras.is_empty() {
                            continue;
                        }
                        let is_title = matches!(s.ph.as_deref(), Some("title") | Some("ctrTitle"));
                        if is_title && out.title.is_none() {
                            let t = s
                                .paras
                                .iter()
                                .map(|p| p.2.as_str())
                                .collect::<Vec<_>>()
                                .join(" ");
                            out.title = Some(t.split_whitespace().collect::<Vec<_>>().join(" "));
                            continue;
                        }
                        if matches!(s.ph.as_deref(), Some("sldNum") | Some("dt") | Some("ftr")) {
                            continue;
                        }
                        let mut text = String::new();
                        for (lvl, bullet, p) in &s.paras {
                            if *bullet {
                                let indent = "  ".repeat((*lvl).min(8) as usize);
                                text.push_str(&format!(
                                    "{indent}- {}\n",
                                    p.replace('\n', &format!("\n{indent}  "))
                                ));
                            } else {
                                text.push_str(&p.replace('\n', "  \n"));
                                text.push_str("\n\n");
                            }
                        }
                        out.blocks
                            .push(SlideBlock::Text(text.trim_end().to_owned()));
                    }
                    _ => {}
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    out
}

/// Elements that matter whether or not they have children.
fn on_open(
    e: &BytesStart<'_>,
    shapes: &mut [Shape],
    para: &mut Option<(u32, Option<bool>, String)>,
    out: &mut ParsedSlide,
) {
    match e.local_name().as_ref() {
        "ph" => {
            if let Some(s) = shapes.last_mut() {
                s.ph = Some(attr(e, "type").unwrap_or_else(|| "body".to_owned()));
            }
        }
        "pPr" => set_ppr(e, para),
        "buNone" => {
            if let Some(p) = para.as_mut() {
                p.1 = Some(false);
            }
        }
        "buChar" | "buAutoNum" => {
            if let Some(p) = para.as_mut() {
                p.1 = Some(true);
            }
        }
        "br" => {
            if let Some(p) = para.as_mut() {
                p.2.push('\n');
            }
        }
        "cNvPr" => set_alt(e, shapes),
        "blip" => {
            if let Some(id) = attr(e, "embed") {
                let alt = shapes.last().map(|s| s.alt.clone()).unwrap_or_default();
                out.blocks.push(SlideBlock::Image { id, alt });
            }
        }
        // SmartArt: the text lives in a separate data part.
        "relIds" => {
            if let Some(id) = attr(e, "dm") {
                out.blocks.push(SlideBlock::Diagram(id));
            }
        }
        _ => {}
    }
}

fn set_ppr(e: &BytesStart<'_>, para: &mut Option<(u32, Option<bool>, String)>) {
    if let Some(p) = para.as_mut() {
        p.0 = attr(e, "lvl").and_then(|v| v.parse().ok()).unwrap_or(0);
    }
}

fn set_alt(e: &BytesStart<'_>, shapes: &mut [Shape]) {
    if let Some(s) = shapes.last_mut() {
        s.alt = attr(e, "descr")
            .filter(|d| !d.trim().is_empty())
            .unwrap_or_default()
            .replace(['[', ']', '\n'], " ");
    }
}

/// The text of a notes slide's body placeholder.
fn parse_notes(xml: &str) -> String {
    let parsed = parse_slide(xml);
    parsed
        .blocks
        .into_iter()
        .filter_map(|b| match b {
            SlideBlock::Text(t) => Some(
                t.lines()
                    .map(|l| l.trim_start_matches("- ").to_owned())
                    .collect::<Vec<_>>()
                    .join("\n"),
            ),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// The text of a SmartArt data part: one entry per paragraph.
fn diagram_text(xml: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut reader = Reader::from_str(xml);
    let mut cur: Option<String> = None;
    let mut in_t = false;
    loop {
        match reader.read_event() {
            Ok(Event::Start(e)) => match e.local_name().as_ref() {
                "p" => cur = Some(String::new()),
                "t" => in_t = true,
                _ => {}
            },
            Ok(Event::Text(t)) if in_t => {
                if let Some(c) = cur.as_mut() {
                    c.push_str(&t.xml10_content());
                }
            }
            Ok(Event::GeneralRef(r)) if in_t => {
                if let Some(c) = cur.as_mut() {
                    c.push_str(&resolve_ref(&r));
                }
            }
            Ok(Event::End(e)) => match e.local_name().as_ref() {
                "t" => in_t = false,
                "p" => {
                    if let Some(c) = cur.take() {
                        let c = c.split_whitespace().collect::<Vec<_>>().join(" ");
                        if !c.is_empty() {
                            out.push(c);
                        }
                    }
                }
                _ => {}
            },
            Ok(Event::Eof) | Err(_) => break,
            _ => {}
        }
    }
    out
}
