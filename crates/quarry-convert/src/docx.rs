//! DOCX → Markdown with our own `zip` + `quick-xml` walk of `word/document.xml`.
//!
//! Built by hand rather than on `office_oxide` because the Markdown needs things a generic
//! text extractor does not give: heading levels resolved through the style sheet (including
//! styles based on "Heading N" and outline levels), list numbering from `numbering.xml`,
//! images extracted as bytes and referenced *at their position*, tables as Markdown tables
//! (merged cells padded so columns stay aligned), and footnotes/endnotes/comments as Markdown
//! footnotes. Every part is read through [`Package`], which enforces the zip-bomb limits.

use std::collections::HashMap;

use quick_xml::Reader;
use quick_xml::events::Event;

use crate::types::{ConvertError, ConvertOptions, Converted, Converter, Deadline, Format, Image};
use crate::util::{self, md_table};
use crate::xml::{attr, part_text, relationships, resolve_ref, toggle_on};
use crate::zipc::Package;
use quarry_core::FurnitureKind;

pub(crate) struct DocxConverter;

impl Converter for DocxConverter {
    fn format(&self) -> Format {
        Format::Docx
    }

    fn convert(&self, bytes: &[u8], opts: &ConvertOptions) -> Result<Converted, ConvertError> {
        let deadline = Deadline::new(&opts.limits);
        let mut pkg = Package::open(bytes, Format::Docx, &opts.limits)?;
        let main = main_part(&mut pkg)?;
        let Some(doc_xml) = pkg.read(&main)? else {
            return Err(not_docx("no word/document.xml"));
        };
        let doc_xml = part_text(&doc_xml);
        if !doc_xml.contains("wordprocessingml") && !doc_xml.contains("<w:document") {
            return Err(not_docx("word/document.xml is not a Word document"));
        }
        let base = main.rsplit_once('/').map_or("", |(d, _)| d).to_owned();
        let rels_name = format!(
            "{base}/_rels/{}.rels",
            main.rsplit('/').next().unwrap_or("")
        );
        let rels = pkg
            .read_text(&rels_name)?
            .map(|x| relationships(&x, &base))
            .unwrap_or_default();
        let styles = pkg
            .read_text(&format!("{base}/styles.xml"))?
            .map(|x| parse_styles(&x))
            .unwrap_or_default();
        let numbering = pkg
            .read_text(&format!("{base}/numbering.xml"))?
            .map(|x| parse_numbering(&x))
            .unwrap_or_default();
        deadline.check()?;

        let mut images = Vec::new();
        let mut walker = Walker {
            styles: &styles,
            numbering: &numbering,
            rels: &rels,
            prefix: &opts.image_url_prefix,
            pkg: &mut pkg,
            images: &mut images,
            blocks: Vec::new(),
            paras: Vec::new(),
            tables: Vec::new(),
            counters: HashMap::new(),
            links: Vec::new(),
            in_text: false,
            in_ppr: false,
            in_rpr: false,
            skip: 0,
            alt: String::new(),
            first_heading: None,
            warnings: Vec::new(),
            sdts: Vec::new(),
            fields: Vec::new(),
            instr: None,
        };
        walker.walk(&doc_xml, &deadline)?;
        let Walker {
            blocks,
            first_heading,
            mut warnings,
            ..
        } = walker;

        let mut md = join_blocks(&blocks);
        // Footnotes, endnotes and comments become Markdown footnotes.
        let mut notes = String::new();
        for (part, tag, prefix) in [
            ("footnotes.xml", "footnote", ""),
            ("endnotes.xml", "endnote", "e"),
            ("comments.xml", "comment", "c"),
        ] {
            if let Some(xml) = pkg.read_text(&format!("{base}/{part}"))? {
                for (id, author, text) in parse_notes(&xml, tag) {
                    let who = author
                        .filter(|a| !a.trim().is_empty())
                        .map(|a| format!("{}: ", a.trim()))
                        .unwrap_or_default();
                    notes.push_str(&format!("[^{prefix}{id}]: {who}{text}\n"));
                }
            }
        }
        if !notes.is_empty() {
            md.push_str("\n\n");
            md.push_str(&notes);
        }
        let properties = pkg
            .read_text("docProps/core.xml")?
            .map(|x| crate::props::core_properties(&x))
            .unwrap_or_default();
        let title = properties.title.clone().or(first_heading);
        if images.len() > 1000 {
            warnings.push(format!("{} images extracted", images.len()));
        }
        let (markdown, furniture) = util::take_marks(&util::tidy(&md));
        Ok(Converted {
            markdown,
            furniture,
            title,
            images,
            warnings,
            properties,
            ..Default::default()
        })
    }
}

fn not_docx(detail: &str) -> ConvertError {
    ConvertError::WrongFormat {
        expected: Format::Docx,
        detail: Some(detail.to_owned()),
    }
}

/// The main document part, from the package relationships (usually `word/document.xml`).
fn main_part(pkg: &mut Package<'_>) -> Result<String, ConvertError> {
    if let Some(rels) = pkg.read_text("_rels/.rels")? {
        let mut reader = Reader::from_str(&rels);
        loop {
            match reader.read_event() {
                Ok(Event::Start(e)) | Ok(Event::Empty(e)) => {
                    if e.local_name().as_ref() == "Relationship"
                        && attr(&e, "Type").is_some_and(|t| t.ends_with("/officeDocument"))
                        && let Some(t) = attr(&e, "Target")
                    {
                        let t = crate::xml::resolve_part("", &t);
                        if pkg.has(&t) {
                            return Ok(t);
                        }
                    }
                }
                Ok(Event::Eof) | Err(_) => break,
                _ => {}
            }
        }
    }
    if pkg.has("word/document.xml") {
        Ok("word/document.xml".to_owned())
    } else {
        Err(not_docx("no word/document.xml"))
    }
}

/// What a paragraph style means for the Markdown.
#[derive(Debug, Default, Clone)]
struct Style {
    heading: Option<u8>,
    /// `toc 1`…`toc 9`, `TOC Heading`, `table of figures` (contents); `index 1`…, `index
    /// heading` (index).
    furniture: Option<FurnitureKind>,
    based_on: Option<String>,
    num: Option<(String, u32)>,
}

fn parse_styles(xml: &str) -> HashMap<String, Style> {
    let mut map = HashMap::new();
    let mut reader = Reader::from_str(xml);
    let mut cur: Option<(String, Style, Option<String>)> = None;
    let mut num_id: Option<String> = None;
    let mut ilvl = 0u32;
    loop {
        match reader.read_event() {
            Ok(Event::Start(e)) | Ok(Event::Empty(e)) => match e.local_name().as_ref() {
                "style" => {
                    cur = attr(&e, "styleId").map(|id| (id, Style::default(), None));
                    num_id = None;
                    ilvl = 0;
                }
                "name" => {
                    if let Some((_, _, name)) = cur.as_mut() {
                        *name = attr(&e, "val");
                    }
                }
                "basedOn" => {
                    if let Some((_, s, _)) = cur.as_mut() {
                        s.based_on = attr(&e, "val");
                    }
                }
                "outlineLvl" => {
                    if let Some((_, s, _)) = cur.as_mut()
                        && let Some(l) = attr(&e, "val").and_then(|v| v.parse::<u8>().ok())
                        && l < 6
                    {
                        s.heading = Some(l + 1);
                    }
                }
                "numId" => num_id = attr(&e, "val"),
                "ilvl" => ilvl = attr(&e, "val").and_then(|v| v.parse().ok()).unwrap_or(0),
                _ => {}
            },
            Ok(Event::End(e)) if e.local_name().as_ref() == "style" => {
                if let Some((id, mut s, name)) = cur.take() {
                    let lname = name.unwrap_or_default().to_ascii_lowercase();
                    s.furniture = furniture_style(&lname);
                    if let Some(n) = lname.strip_prefix("heading ") {
                        if let Ok(n) = n.trim().parse::<u8>() {
                            s.heading = Some(n.clamp(1, 6));
                        }
                    } else if lname == "title" {
                        s.heading = Some(1);
                    }
                    if let Some(n) = num_id.take().filter(|n| n != "0") {
                        s.num = Some((n, ilvl));
                    }
                    map.insert(id, s);
                }
            }
            Ok(Event::Eof) | Err(_) => break,
            _ => {}
        }
    }
    map
}

/// What Word's built-in style names for tables of contents and indexes say.
fn furniture_style(lname: &str) -> Option<FurnitureKind> {
    let numbered = |prefix: &str| {
        lname
            .strip_prefix(prefix)
            .is_some_and(|n| n.len() == 1 && n.as_bytes()[0].is_ascii_digit())
    };
    if numbered("toc ") || lname == "toc heading" || lname == "table of figures" {
        Some(FurnitureKind::Contents)
    } else if numbered("index ") || lname == "index heading" {
        Some(FurnitureKind::Index)
    } else {
        None
    }
}

/// The furniture kind of a style, following `basedOn`.
fn style_furniture(styles: &HashMap<String, Style>, id: &str) -> Option<FurnitureKind> {
    let mut cur = Some(id.to_owned());
    for _ in 0..10 {
        let s = cur.as_ref().and_then(|c| styles.get(c))?;
        if s.furniture.is_some() {
            return s.furniture;
        }
        cur = s.based_on.clone();
    }
    None
}

/// What a field instruction (`TOC \o "1-3" \h`, ` INDEX \e "…" `) makes of its result.
fn field_furniture(instr: &str) -> Option<FurnitureKind> {
    match instr
        .split_whitespace()
        .next()?
        .to_ascii_uppercase()
        .as_str()
    {
        "TOC" => Some(FurnitureKind::Contents),
        "INDEX" => Some(FurnitureKind::Index),
        _ => None,
    }
}

/// Heading level and list numbering of a style, following `basedOn`.
fn style_props(styles: &HashMap<String, Style>, id: &str) -> (Option<u8>, Option<(String, u32)>) {
    let mut heading = None;
    let mut num = None;
    let mut cur = Some(id.to_owned());
    for _ in 0..10 {
        let Some(s) = cur.as_ref().and_then(|c| styles.get(c)) else {
            break;
        };
        heading = heading.or(s.heading);
        num = num.or_else(|| s.num.clone());
        cur = s.based_on.clone();
    }
    (heading, num)
}

/// `(numId, ilvl)` → ordered? (`numFmt` other than bullet/none).
fn parse_numbering(xml: &str) -> HashMap<(String, u32), bool> {
    let mut abstract_fmt: HashMap<String, HashMap<u32, bool>> = HashMap::new();
    let mut num_to_abstract: HashMap<String, String> = HashMap::new();
    let mut reader = Reader::from_str(xml);
    let mut cur_abstract: Option<String> = None;
    let mut cur_lvl: u32 = 0;
    let mut cur_num: Option<String> = None;
    loop {
        match reader.read_event() {
            Ok(Event::Start(e)) | Ok(Event::Empty(e)) => match e.local_name().as_ref() {
                "abstractNum" => cur_abstract = attr(&e, "abstractNumId"),
                "lvl" => cur_lvl = attr(&e, "ilvl").and_then(|v| v.parse().ok()).unwrap_or(0),
                "numFmt" => {
                    if let Some(a) = &cur_abstract {
                        let fmt = attr(&e, "val").unwrap_or_default();
                        abstract_fmt
                            .entry(a.clone())
                            .or_default()
                            .insert(cur_lvl, fmt != "bullet" && fmt != "none");
                    }
                }
                "num" => cur_num = attr(&e, "numId"),
                "abstractNumId" => {
                    if let (Some(n), Some(a)) = (&cur_num, attr(&e, "val")) {
                        num_to_abstract.insert(n.clone(), a);
                    }
                }
                _ => {}
            },
            Ok(Event::End(e)) => match e.local_name().as_ref() {
                "abstractNum" => cur_abstract = None,
                "num" => cur_num = None,
                _ => {}
            },
            Ok(Event::Eof) | Err(_) => break,
            _ => {}
        }
    }
    let mut out = HashMap::new();
    for (num, abs) in num_to_abstract {
        if let Some(levels) = abstract_fmt.get(&abs) {
            for (&lvl, &ordered) in levels {
                out.insert((num.clone(), lvl), ordered);
            }
        }
    }
    out
}

/// `(id, author, text)` of each footnote/endnote/comment, separators skipped.
fn parse_notes(xml: &str, tag: &str) -> Vec<(String, Option<String>, String)> {
    let mut out = Vec::new();
    let mut reader = Reader::from_str(xml);
    let mut cur: Option<(String, Option<String>, String)> = None;
    let mut in_t = false;
    loop {
        match reader.read_event() {
            Ok(Event::Start(e)) => match e.local_name().as_ref() {
                n if n == tag => {
                    let kind = attr(&e, "type").unwrap_or_default();
                    cur = if kind.contains("eparator") || kind.contains("Notice") {
                        None
                    } else {
                        attr(&e, "id").map(|id| (id, attr(&e, "author"), String::new()))
                    };
                }
                "t" => in_t = true,
                "p" => {
                    if let Some((_, _, t)) = cur.as_mut()
                        && !t.is_empty()
                        && !t.ends_with(' ')
                    {
                        t.push(' ');
                    }
                }
                _ => {}
            },
            Ok(Event::Empty(e)) if e.local_name().as_ref() == "tab" => {
                if let Some((_, _, t)) = cur.as_mut() {
                    t.push(' ');
                }
            }
            Ok(Event::Text(t)) if in_t => {
                if let Some((_, _, s)) = cur.as_mut() {
                    s.push_str(&t.xml10_content());
                }
            }
            Ok(Event::GeneralRef(r)) if in_t => {
                if let Some((_, _, s)) = cur.as_mut() {
                    s.push_str(&resolve_ref(&r));
                }
            }
            Ok(Event::End(e)) => match e.local_name().as_ref() {
                "t" => in_t = false,
                n if n == tag => {
                    if let Some((id, author, text)) = cur.take() {
                        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
                        if !text.is_empty() {
                            out.push((id, author, text));
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

#[derive(Debug)]
enum Block {
    Para(String),
    Item(String),
    Table(String),
}

fn join_blocks(blocks: &[Block]) -> String {
    let mut out = String::new();
    let mut prev_item = false;
    for b in blocks {
        let (text, item) = match b {
            Block::Para(t) | Block::Table(t) => (t.as_str(), false),
            Block::Item(t) => (t.as_str(), true),
        };
        if !out.is_empty() {
            out.push_str(if item && prev_item { "\n" } else { "\n\n" });
        }
        out.push_str(text.trim_end());
        prev_item = item;
    }
    out
}

/// A run of text with its formatting.
#[derive(Debug, Default)]
struct Seg {
    text: String,
    bold: bool,
    italic: bool,
    /// Markdown produced by us (images, links, note references): never wrapped or escaped.
    raw: bool,
}

#[derive(Debug, Default)]
struct Para {
    style: Option<String>,
    /// Inside a table-of-contents or index field.
    furniture: Option<FurnitureKind>,
    outline: Option<u8>,
    num: Option<(String, u32)>,
    segs: Vec<Seg>,
    bold: bool,
    italic: bool,
}

#[derive(Debug, Default)]
struct Table {
    rows: Vec<Vec<String>>,
    row: Option<Vec<String>>,
    cell: Option<Vec<String>>,
    span: usize,
}

struct Walker<'a, 'p> {
    styles: &'a HashMap<String, Style>,
    numbering: &'a HashMap<(String, u32), bool>,
    rels: &'a HashMap<String, (String, bool)>,
    prefix: &'a str,
    pkg: &'a mut Package<'p>,
    images: &'a mut Vec<Image>,
    blocks: Vec<Block>,
    paras: Vec<Para>,
    tables: Vec<Table>,
    counters: HashMap<(String, u32), u32>,
    /// Open hyperlinks: URL and the index of their first segment.
    links: Vec<(Option<String>, usize)>,
    in_text: bool,
    in_ppr: bool,
    in_rpr: bool,
    /// Depth inside content that is skipped (`mc:Fallback`, deleted text).
    skip: usize,
    alt: String,
    first_heading: Option<String>,
    warnings: Vec<String>,
    /// Open structured-document tags: whether each is a table of contents (a `docPartObj`
    /// whose gallery is "Table of Contents").
    sdts: Vec<bool>,
    /// Open complex fields (`fldChar` begin … end) and what their instruction makes them.
    fields: Vec<Option<FurnitureKind>>,
    /// The instruction text of the innermost field, while it is being read.
    instr: Option<String>,
}

impl Walker<'_, '_> {
    fn walk(&mut self, xml: &str, deadline: &Deadline) -> Result<(), ConvertError> {
        let mut reader = Reader::from_str(xml);
        let mut events = 0u64;
        loop {
            events += 1;
            if events.is_multiple_of(4096) {
                deadline.check()?;
            }
            let ev = match reader.read_event() {
                Ok(ev) => ev,
                Err(e) => {
                    if self.blocks.is_empty() {
                        return Err(ConvertError::Corrupt {
                            format: Format::Docx,
                            detail: format!("word/document.xml is malformed ({e})"),
                        });
                    }
                    self.warnings.push(format!(
                        "document XML malformed; text after an error was dropped ({e})"
                    ));
                    break;
                }
            };
            match ev {
                Event::Start(e) => {
                    let name = e.local_name();
                    let name = name.as_ref();
                    if self.skip > 0 {
                        self.skip += 1;
                        continue;
                    }
                    match name {
                        "instrText" => {
                            self.skip = 1;
                            if self.instr.is_none() && self.fields.last() == Some(&None) {
                                self.instr = Some(String::new());
                            }
                        }
                        "Fallback" | "del" | "delText" => self.skip = 1,
                        _ => self.start(name, &e)?,
                    }
                }
                Event::Empty(e) if self.skip == 0 => {
                    let name = e.local_name();
                    self.start(name.as_ref(), &e)?;
                    self.end(name.as_ref());
                }
                Event::End(e) => {
                    if self.skip > 0 {
                        self.skip -= 1;
                        continue;
                    }
                    self.end(e.local_name().as_ref());
                }
                Event::Text(t) if self.skip == 1 && self.instr.is_some() => {
                    if let Some(i) = self.instr.as_mut()
                        && i.len() < 1024
                    {
                        i.push_str(&t.xml10_content());
                    }
                }
                Event::Text(t) if self.in_text && self.skip == 0 => {
                    self.push_text(&t.xml10_content());
                }
                Event::GeneralRef(r) if self.in_text && self.skip == 0 => {
                    self.push_text(&resolve_ref(&r));
                }
                Event::Eof => break,
                _ => {}
            }
        }
        Ok(())
    }

    fn push_text(&mut self, text: &str) {
        let text = &*util::strip_marks(text);
        let Some(p) = self.paras.last_mut() else {
            return;
        };
        let (bold, italic) = (p.bold, p.italic);
        match p.segs.last_mut() {
            Some(s) if !s.raw && s.bold == bold && s.italic == italic => s.text.push_str(text),
            _ => p.segs.push(Seg {
                text: text.to_owned(),
                bold,
                italic,
                raw: false,
            }),
        }
    }

    fn push_raw(&mut self, text: String) {
        if let Some(p) = self.paras.last_mut() {
            p.segs.push(Seg {
                text,
                raw: true,
                ..Default::default()
            });
        }
    }

    fn start(
        &mut self,
        name: &str,
        e: &quick_xml::events::BytesStart<'_>,
    ) -> Result<(), ConvertError> {
        match name {
            "p" => self.paras.push(Para::default()),
            "sdt" => self.sdts.push(false),
            "docPartGallery" => {
                if let Some(top) = self.sdts.last_mut() {
                    *top =
                        attr(e, "val").is_some_and(|v| v.eq_ignore_ascii_case("Table of Contents"));
                }
            }
            "fldChar" => match attr(e, "fldCharType").as_deref() {
                Some("begin") => {
                    self.end_instruction();
                    self.fields.push(None);
                }
                Some("separate") => self.end_instruction(),
                Some("end") => {
                    self.end_instruction();
                    self.note_field_furniture();
                    self.fields.pop();
                }
                _ => {}
            },
            "fldSimple" => {
                if let Some(kind) = attr(e, "instr").as_deref().and_then(field_furniture)
                    && let Some(p) = self.paras.last_mut()
                {
                    p.furniture = Some(kind);
                }
            }
            "pPr" => self.in_ppr = true,
            "rPr" => self.in_rpr = true,
            "r" => {
                if let Some(p) = self.paras.last_mut() {
                    p.bold = false;
                    p.italic = false;
                }
            }
            "pStyle" if self.in_ppr => {
                if let Some(p) = self.paras.last_mut() {
                    p.style = attr(e, "val");
                }
            }
            "outlineLvl" if self.in_ppr && !self.in_rpr => {
                if let Some(p) = self.paras.last_mut() {
                    p.outline = attr(e, "val")
                        .and_then(|v| v.parse::<u8>().ok())
                        .filter(|l| *l < 6)
                        .map(|l| l + 1);
                }
            }
            "numId" if self.in_ppr => {
                if let Some(p) = self.paras.last_mut() {
                    let id = attr(e, "val").unwrap_or_default();
                    let lvl = p.num.as_ref().map_or(0, |n| n.1);
                    p.num = Some((id, lvl));
                }
            }
            "ilvl" if self.in_ppr => {
                if let Some(p) = self.paras.last_mut() {
                    let lvl = attr(e, "val").and_then(|v| v.parse().ok()).unwrap_or(0);
                    let id = p.num.take().map(|n| n.0).unwrap_or_default();
                    p.num = Some((id, lvl));
                }
            }
            "b" if self.in_rpr && !self.in_ppr => {
                if let Some(p) = self.paras.last_mut() {
                    p.bold = toggle_on(e);
                }
            }
            "i" if self.in_rpr && !self.in_ppr => {
                if let Some(p) = self.paras.last_mut() {
                    p.italic = toggle_on(e);
                }
            }
            "t" => self.in_text = true,
            "tab" if !self.in_ppr => self.push_text("\t"),
            "br" | "cr" if attr(e, "type").is_none_or(|t| t == "textWrapping") => {
                self.push_text("\n");
            }
            "noBreakHyphen" => self.push_text("-"),
            "hyperlink" => {
                let url = attr(e, "id")
                    .and_then(|id| self.rels.get(&id))
                    .filter(|(_, ext)| *ext)
                    .map(|(u, _)| u.clone());
                let at = self.paras.last().map_or(0, |p| p.segs.len());
                self.links.push((url, at));
            }
            "docPr" => {
                self.alt = attr(e, "descr")
                    .filter(|s| !s.trim().is_empty())
                    .or_else(|| attr(e, "title"))
                    .unwrap_or_default();
            }
            "blip" | "imagedata" => {
                let id = attr(e, "embed").or_else(|| attr(e, "id"));
                if let Some(id) = id {
                    self.image(&id)?;
                }
            }
            "footnoteReference" => {
                if let Some(id) = attr(e, "id") {
                    self.push_raw(format!("[^{id}]"));
                }
            }
            "endnoteReference" => {
                if let Some(id) = attr(e, "id") {
                    self.push_raw(format!("[^e{id}]"));
                }
            }
            "commentReference" => {
                if let Some(id) = attr(e, "id") {
                    self.push_raw(format!("[^c{id}]"));
                }
            }
            "tbl" => self.tables.push(Table::default()),
            "tr" => {
                if let Some(t) = self.tables.last_mut() {
                    t.row = Some(Vec::new());
                }
            }
            "tc" => {
                if let Some(t) = self.tables.last_mut() {
                    t.cell = Some(Vec::new());
                    t.span = 1;
                }
            }
            "gridSpan" => {
                if let Some(t) = self.tables.last_mut() {
                    t.span = attr(e, "val")
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(1)
                        .clamp(1, 64);
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// The field instruction read so far decides what the innermost field is.
    fn end_instruction(&mut self) {
        if let Some(instr) = self.instr.take()
            && let Some(top) = self.fields.last_mut()
        {
            *top = field_furniture(&instr);
            self.note_field_furniture();
        }
    }

    /// The current paragraph is furniture when a contents or index field is open in it.
    fn note_field_furniture(&mut self) {
        if let Some(kind) = self.fields.iter().rev().find_map(|f| *f)
            && let Some(p) = self.paras.last_mut()
        {
            p.furniture = p.furniture.or(Some(kind));
        }
    }

    fn end(&mut self, name: &str) {
        match name {
            "p" => {
                self.note_field_furniture();
                self.end_paragraph();
            }
            "sdt" => {
                self.sdts.pop();
            }
            "pPr" => self.in_ppr = false,
            "rPr" => self.in_rpr = false,
            "t" => self.in_text = false,
            "hyperlink" => {
                let Some((url, at)) = self.links.pop() else {
                    return;
                };
                let (Some(url), Some(p)) = (url, self.paras.last_mut()) else {
                    return;
                };
                if at >= p.segs.len() {
                    return;
                }
                let text: String = p.segs.drain(at..).map(|s| s.text).collect();
                let text = text.trim().to_owned();
                if text.is_empty() {
                    return;
                }
                p.segs.push(Seg {
                    text: format!(
                        "[{}]({})",
                        text.replace(']', "\\]"),
                        url.replace(')', "%29")
                    ),
                    raw: true,
                    ..Default::default()
                });
            }
            "tc" => {
                if let Some(t) = self.tables.last_mut() {
                    let cell = t.cell.take().unwrap_or_default().join("\n");
                    if let Some(row) = t.row.as_mut() {
                        row.push(cell);
                        for _ in 1..t.span {
                            row.push(String::new());
                        }
                    }
                }
            }
            "tr" => {
                if let Some(t) = self.tables.last_mut()
                    && let Some(row) = t.row.take()
                {
                    t.rows.push(row);
                }
            }
            "tbl" => {
                let Some(t) = self.tables.pop() else {
                    return;
                };
                let rows: Vec<Vec<String>> = t
                    .rows
                    .into_iter()
                    .filter(|r| r.iter().any(|c| !c.trim().is_empty()))
                    .collect();
                if rows.is_empty() {
                    return;
                }
                if let Some(outer) = self.tables.last_mut() {
                    // A table inside a cell: flattened into the cell's text.
                    let text: Vec<String> = rows
                        .iter()
                        .map(|r| {
                            r.iter()
                                .map(|c| c.trim())
                                .filter(|c| !c.is_empty())
                                .collect::<Vec<_>>()
                                .join(" / ")
                        })
                        .collect();
                    if let Some(cell) = outer.cell.as_mut() {
                        cell.push(text.join("\n"));
                    }
                } else {
                    let single_cell = rows
                        .iter()
                        .all(|r| r.iter().filter(|c| !c.trim().is_empty()).count() <= 1);
                    if single_cell {
                        // Layout tables (one cell per row) read better as paragraphs.
                        for r in rows {
                            for c in r.into_iter().filter(|c| !c.trim().is_empty()) {
                                self.blocks.push(Block::Para(c));
                            }
                        }
                    } else {
                        self.blocks.push(Block::Table(md_table(&rows)));
                    }
                }
            }
            _ => {}
        }
    }

    fn image(&mut self, id: &str) -> Result<(), ConvertError> {
        let Some((target, external)) = self.rels.get(id).cloned() else {
            return Ok(());
        };
        let alt = std::mem::take(&mut self.alt);
        let alt = alt.replace(['[', ']', '\n'], " ").trim().to_owned();
        if external {
            self.push_raw(format!("![{alt}]({target})"));
            return Ok(());
        }
        let Some(bytes) = self.pkg.read(&target)? else {
            return Ok(());
        };
        let file = util::add_image(self.images, util::make_image(bytes, &target));
        self.push_raw(format!("![{alt}]({}{file}) ", self.prefix));
        Ok(())
    }

    fn end_paragraph(&mut self) {
        let Some(p) = self.paras.pop() else {
            return;
        };
        let (style_heading, style_num) = p
            .style
            .as_deref()
            .map(|s| style_props(self.styles, s))
            .unwrap_or((None, None));
        let heading = p.outline.or(style_heading);
        let furniture = p
            .furniture
            .or_else(|| {
                p.style
                    .as_deref()
                    .and_then(|s| style_furniture(self.styles, s))
            })
            .or_else(|| self.sdts.contains(&true).then_some(FurnitureKind::Contents));
        let mut segs = p.segs;
        if heading.is_some() && self.tables.is_empty() {
            // Images do not belong in a heading line: they go just before it.
            let (images, rest): (Vec<Seg>, Vec<Seg>) = segs
                .into_iter()
                .partition(|s| s.raw && s.text.starts_with("!["));
            for img in images {
                self.blocks.push(Block::Para(img.text.trim().to_owned()));
            }
            segs = rest;
        }
        let text = render_segments(&segs, heading.is_none());
        let text = text.trim();
        if let Some(t) = self.tables.last_mut()
            && let Some(cell) = t.cell.as_mut()
        {
            if !text.is_empty() {
                cell.push(text.to_owned());
            }
            return;
        }
        if text.is_empty() {
            return;
        }
        if let Some(kind) = furniture {
            // Kept as written, one line per entry, marked for `util::take_marks`.
            let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
            let line = match heading {
                Some(level) => format!("{} {one_line}", "#".repeat(level as usize)),
                None => one_line,
            };
            self.blocks.push(Block::Para(format!(
                "{}{line}{}",
                util::mark_open(kind),
                util::MARK_CLOSE
            )));
            return;
        }
        if let Some(level) = heading {
            let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
            if self.first_heading.is_none() {
                self.first_heading = Some(one_line.clone());
            }
            self.blocks.push(Block::Para(format!(
                "{} {one_line}",
                "#".repeat(level as usize)
            )));
            return;
        }
        let num = p
            .num
            .or(style_num)
            .filter(|(id, _)| !id.is_empty() && id != "0");
        if let Some((id, lvl)) = num {
            let ordered = self
                .numbering
                .get(&(id.clone(), lvl))
                .copied()
                .unwrap_or(false);
            // Deeper levels restart when a shallower item comes.
            self.counters.retain(|(i, l), _| *i != id || *l <= lvl);
            let n = self.counters.entry((id, lvl)).or_insert(0);
            *n += 1;
            let marker = if ordered {
                format!("{n}.")
            } else {
                "-".to_owned()
            };
            let indent = "   ".repeat(lvl.min(8) as usize);
            let body = text.replace('\n', &format!("\n{indent}   "));
            self.blocks
                .push(Block::Item(format!("{indent}{marker} {body}")));
            return;
        }
        self.blocks.push(Block::Para(text.replace('\n', "  \n")));
    }
}

/// Segments → Markdown, bold/italic as `**`/`*` around non-blank text.
fn render_segments(segs: &[Seg], formatting: bool) -> String {
    let mut out = String::new();
    for s in segs {
        if s.raw || !formatting || (!s.bold && !s.italic) || s.text.trim().is_empty() {
            out.push_str(&s.text.replace('\t', " "));
            continue;
        }
        let mark = match (s.bold, s.italic) {
            (true, true) => "***",
            (true, false) => "**",
            _ => "*",
        };
        let text = s.text.replace('\t', " ");
        let lead = &text[..text.len() - text.trim_start().len()];
        let trail = &text[text.trim_end().len()..];
        out.push_str(lead);
        out.push_str(mark);
        out.push_str(text.trim());
        out.push_str(mark);
        out.push_str(trail);
    }
    out
}
