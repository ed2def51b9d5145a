#!/usr/bin/env python3
"""Compares two runs of the `pdf_structure` example (before/after a converter change) on the
same PDFs, page by page, and writes a Markdown report: headings found, headings that are no
titles, a filing's Part/Item/Note sections found against those `pdftotext -layout` shows,
table rows with a lone `$`/`%`/`)` cell, loose lines of figures.

    python3 pdf_structure_report.py BEFORE_DIR AFTER_DIR PDF_DIR > report.md

The classification of a heading as "no title" is this script's own (figures, addresses,
parenthesised notes, sentences, split fragments of a section title), independent of the
converter's rules, and errs towards counting.
"""

import re
import subprocess
import sys
from pathlib import Path

HEADING = re.compile(r"^(#{1,6}) (.*)$")
SECTION = re.compile(r"^(PART|Part)\s+(I{1,3}|IV)\b|^(ITEM|Item)\s+(\d{1,2}[A-Ca-c]?)\b|^(NOTE|Note)\s+(\d{1,2})\b")
STREET = r"(street|st|road|rd|drive|dr|avenue|ave|boulevard|blvd|way|lane|parkway|place|court|plaza|highway|suite|floor)"
CONNECTIVE = {"of", "and", "or", "the", "for", "to", "in", "on", "with", "related", "by", "a"}


def pages(md_path):
    out, page, lines = {}, None, []
    for line in Path(md_path).read_text(encoding="utf-8").splitlines():
        m = re.match(r"^<!-- page (\d+) -->$", line)
        if m:
            if page is not None:
                out[page] = lines
            page, lines = int(m.group(1)), []
        else:
            lines.append(line)
    if page is not None:
        out[page] = lines
    return out


def headings(lines):
    hs = []
    prev = None  # (text, index) of the previous heading, with only blank lines since
    for i, line in enumerate(lines):
        m = HEADING.match(line)
        if m:
            text = m.group(2).replace("*", "").strip()
            tail = prev is not None and all(not l.strip() for l in lines[prev[1] + 1 : i])
            tail = tail and (
                len(prev[0].split()) >= 3 and prev[0].split()[-1].lower() in CONNECTIVE
                or re.fullmatch(r"(ITEM|Item|PART|NOTE|Note)( \d+)?", prev[0]) is not None
            )
            hs.append((text, bool(tail)))
            prev = (text, i)
        elif line.strip():
            prev = None
    return hs


def no_title(text, tail):
    letters = sum(c.isalpha() for c in text)
    digits = sum(c.isdigit() for c in text)
    words = text.split()
    if tail or re.fullmatch(r"(ITEM|Item|PART|NOTE|Note)( \d+)?", text):
        return "split fragment"
    if letters < 3 or digits > letters:
        return "figures or too short"
    if text.startswith("(") and text.endswith(")"):
        return "parenthesised"
    if re.match(r"^\d+[A-Za-z]?\s+(\S+\s+){0,4}" + STREET + r"\b", text, re.I) or re.search(
        r",\s*[A-Za-z .]+\s\d{5}(-\d{4})?$", text
    ):
        return "address"
    if re.match(r"^\d+ [A-Z]( |$)", text):
        return "name split from its number"
    if text.endswith(".") and len(words) >= 8 and not text[0].isdigit() and not SECTION.match(text):
        return "sentence"
    return None


def rows(lines):
    lone = sum(
        1
        for l in lines
        if l.strip().startswith("|")
        and any(c.strip().strip("*").strip() in {"$", "%", ")", "(", "€", "£"} for c in l.strip().strip("|").split("|"))
    )
    loose = 0
    for l in lines:
        t = l.strip()
        if t.startswith("|") or t.startswith("#"):
            continue
        ws = t.split()
        if len(ws) >= 2 and all(re.fullmatch(r"[$(]*[\d,.]*[)%]*", w) for w in ws) and any(
            c.isdigit() for c in t
        ):
            loose += 1
    return lone, loose


def sections_in_text(pdf):
    """Item and Note numbers that start a line of `pdftotext -layout` (the contents page too)."""
    try:
        text = subprocess.run(
            ["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return set()
    found = set()
    for line in text.splitlines():
        m = SECTION.match(line.strip())
        if m and (m.group(3) or m.group(5)):
            key = ("Item " + m.group(4).upper()) if m.group(3) else ("Note " + m.group(6))
            found.add(key)
    return found


def section_key(text):
    m = SECTION.match(text)
    if not m:
        return None
    if m.group(1):
        return "Part " + m.group(2)
    if m.group(3):
        return "Item " + m.group(4).upper()
    return "Note " + m.group(6)


def main():
    before_dir, after_dir, pdf_dir = map(Path, sys.argv[1:4])
    summary = []
    detail = []
    for md in sorted(before_dir.glob("*.md")):
        name = md.name[: -len(".md")]
        after_md = after_dir / md.name
        if not after_md.exists():
            continue
        b, a = pages(md), pages(after_md)
        fig = {}
        for tag, doc in (("before", b), ("after", a)):
            hs = [(p, t, tail) for p in sorted(doc) for (t, tail) in headings(doc[p])]
            invented = [(p, t, why) for (p, t, tail) in hs if (why := no_title(t, tail))]
            secs = {k for (_, t, _) in hs if (k := section_key(t))}
            lone = sum(rows(doc[p])[0] for p in doc)
            loose = sum(rows(doc[p])[1] for p in doc)
            fig[tag] = (hs, invented, secs, lone, loose)
        expected = sections_in_text(pdf_dir / name)
        items = sorted(k for k in expected if k.startswith("Item"))
        notes = sorted(k for k in expected if k.startswith("Note"))
        hb, ib, sb, lb, fb = fig["before"]
        ha, ia, sa, la, fa = fig["after"]
        summary.append(
            f"| {name} | {len(b)} | {len(hb)} → {len(ha)} | {len(ib)} → {len(ia)} | "
            f"{len([k for k in sb if k in items])} → {len([k for k in sa if k in items])} of {len(items)} | "
            f"{len([k for k in sb if k in notes])} → {len([k for k in sa if k in notes])} of {len(notes)} | "
            f"{lb} → {la} | {fb} → {fa} |"
        )
        detail.append(f"\n### {name}\n")
        if ia:
            detail.append("Headings still counted as no title after: " + "; ".join(f"p{p} `{t}` ({w})" for p, t, w in ia[:12]) + "\n")
        detail.append("Invented headings before: " + ("; ".join(f"p{p} `{t}` ({w})" for p, t, w in ib[:25]) or "none") + "\n")
        missing = sorted(set(items + notes) - sa, key=lambda k: (k.split()[0], int(re.sub(r"\D", "", k) or 0), k))
        detail.append("Sections in the text without a heading after: " + (", ".join(missing) or "none") + "\n")
        detail.append("\n| page | headings before | headings after | lone-sign rows | loose figure lines |\n|---|---|---|---|---|\n")
        shown = 0
        for p in sorted(set(b) | set(a)):
            bh = [t for t, _ in headings(b.get(p, []))]
            ah = [t for t, _ in headings(a.get(p, []))]
            bl, bf = rows(b.get(p, []))
            al, af = rows(a.get(p, []))
            if bh == ah and bl == al and bf == af:
                continue
            shown += 1
            if shown > 40:
                continue
            cut = lambda hs: " ¦ ".join(h[:60] for h in hs) or "—"
            detail.append(f"| {p} | {cut(bh)} | {cut(ah)} | {bl} → {al} | {bf} → {af} |\n")
        if shown > 40:
            detail.append(f"\n({shown - 40} more changed pages not shown)\n")
    print("| file | pages | headings | no-title headings | Items found (of those in the text) | Notes found | rows with a lone $/%/) cell | loose figure lines |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(summary))
    print("\n## Per page\n")
    print("".join(detail))


if __name__ == "__main__":
    main()
