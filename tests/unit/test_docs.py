"""The documentation stays true to the repository (pure, no root, fast).

- every repository path that README.md or a docs/ page names (in backticks,
  in a code block or as a link) exists, and every link's #anchor is a heading;
- every docs/ page is linked from the README's index;
- the README stays a front door: at most MAX_README_LINES lines;
- the module map of docs/architecture.md lists exactly the modules of
  emulator/ and controller/;
- the documentation speaks of what is measured, not of tracker numbers.

Each failure names the file and the missing or extra item.
"""
from __future__ import annotations

import glob
import os
import re

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
README = os.path.join(ROOT, "README.md")
DOCS = os.path.join(ROOT, "docs")
ARCHITECTURE = os.path.join(DOCS, "architecture.md")
MAX_README_LINES = 300
INDEX_HEADING = "## Documentation"
MODULE_MAP_HEADING = "## The module map"
CODE_PACKAGES = ("emulator", "controller")

# A repository path: it starts with one of the repository's own folders (or
# is one of its top-level files) and is not part of a longer path such as
# /var/lib/bigraph-emu/... or results/<folder>/experiments/...
TOP = r"(?:emulator|controller|experiments|lab|benchmarks|docs|tests|vm|\.ci)"
PATH = re.compile(r"(?<![\w./~<>-])(" + TOP + r"/[\w.*/<>-]*|(?:README\.md|pyproject\.toml|setup\.cfg)\b)")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)
INLINE_CODE = re.compile(r"`((?:[^`\n]|\n(?!\s*\n))+)`")   # a span may wrap, not cross a paragraph
TRACKER = re.compile(r"\bissues?\s*#?\d+|--issue\d+|\bissue\d+\b", re.I)


def read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def pages() -> list[str]:
    """README.md and every docs/*.md, as paths relative to the repository."""
    return ["README.md"] + sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(DOCS, "*.md")))


def section(text: str, heading: str) -> str:
    """The text under a `## heading`, up to the next heading of its level or above."""
    level = heading.split()[0]
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip() == heading), None)
    if start is None:
        return ""
    out = []
    for line in lines[start + 1:]:
        m = re.match(r"^(#+)\s", line)
        if m and len(m.group(1)) <= len(level):
            break
        out.append(line)
    return "\n".join(out)


def code_texts(text: str) -> list[str]:
    """What stands in code: fenced blocks and inline code spans."""
    blocks = [m.group(0) for m in FENCE.finditer(text)]
    rest = FENCE.sub("", text)
    return blocks + [m.group(1) for m in INLINE_CODE.finditer(rest)]


def clean_path(raw: str) -> str | None:
    """A path as written, cut where it stops being a literal path: a
    placeholder (`<folder>`, `...`), a pytest node id (`::test`), trailing
    punctuation. None if nothing checkable is left."""
    path = raw.split("::")[0]
    for stop in ("<", "..."):
        if stop in path:
            path = path[:path.index(stop)]
            path = path[:path.rfind("/") + 1] if "/" in path else ""
    path = path.rstrip(".,:;")
    return path or None


def exists(path: str) -> bool:
    full = os.path.join(ROOT, path)
    if "*" in path:
        return bool(glob.glob(full))
    return os.path.exists(full)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(md_path: str) -> set[str]:
    text = FENCE.sub("", read(md_path))
    return {slug(m.group(1)) for m in re.finditer(r"^#+\s+(.*)$", text, re.M)}


def module_map() -> list[tuple[str, str]]:
    """(path, description) of every row of the module map's table."""
    rows = []
    for line in section(read(ARCHITECTURE), MODULE_MAP_HEADING).splitlines():
        m = re.match(r"^\|\s*`([^`]+\.py)`\s*\|(.*)\|\s*$", line)
        if m:
            rows.append((m.group(1), m.group(2).strip()))
    return rows


def code_modules() -> set[str]:
    """Every Python module of emulator/ and controller/, __init__.py and the
    web page's static files aside."""
    found = set()
    for package in CODE_PACKAGES:
        for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, package)):
            dirnames[:] = [d for d in dirnames if d not in ("__pycache__", "static")]
            for name in filenames:
                if name.endswith(".py") and name != "__init__.py":
                    found.add(os.path.relpath(os.path.join(dirpath, name), ROOT).replace(os.sep, "/"))
    return found


def test_every_path_the_docs_name_exists():
    mapped = {path for path, _ in module_map()}   # checked against the code below
    missing = []
    for page in pages():
        text = read(os.path.join(ROOT, page))
        for code in code_texts(text):
            for raw in PATH.findall(code):
                path = clean_path(raw)
                if path and path not in mapped and not exists(path):
                    missing.append(f"{page}: `{raw}` names {path}, which is not in the repository")
        for target in LINK.findall(FENCE.sub("", text)):
            if re.match(r"^[a-z]+:", target):          # http:, https:, mailto:
                continue
            file_part, _, anchor = target.partition("#")
            here = os.path.dirname(os.path.join(ROOT, page))
            full = os.path.normpath(os.path.join(here, file_part)) if file_part else os.path.join(ROOT, page)
            if not os.path.exists(full):
                missing.append(f"{page}: the link ({target}) points to {os.path.relpath(full, ROOT)}, "
                               "which is not in the repository")
            elif anchor and full.endswith(".md") and anchor not in anchors(full):
                missing.append(f"{page}: the link ({target}) names #{anchor}, "
                               f"no heading of {os.path.relpath(full, ROOT)}")
    assert not missing, "\n".join(missing)


def test_every_docs_page_is_in_the_readme_index():
    index = section(read(README), INDEX_HEADING)
    assert index, f"README.md has no `{INDEX_HEADING}` section"
    linked = {os.path.normpath(t.partition("#")[0]) for t in LINK.findall(index)}
    unlisted = [page for page in pages()[1:] if os.path.normpath(page) not in linked]
    assert not unlisted, "\n".join(f"{page} is not linked from README.md's index ({INDEX_HEADING})"
                                   for page in unlisted)


def test_the_readme_is_a_front_door():
    lines = read(README).count("\n")
    assert lines <= MAX_README_LINES, (f"README.md has {lines} lines, more than {MAX_README_LINES}: "
                                       "move a topic to a docs/ page and link it from the index")


def test_the_module_map_lists_exactly_the_modules():
    rows = module_map()
    assert rows, f"docs/architecture.md has no module table under `{MODULE_MAP_HEADING}`"
    listed = [path for path, _ in rows]
    code = code_modules()
    problems = [f"{path}: in the code, missing from docs/architecture.md's module map"
                for path in sorted(code - set(listed))]
    problems += [f"{path}: in docs/architecture.md's module map, no such module in the code"
                 for path in sorted(set(listed) - code)]
    problems += [f"{path}: listed {listed.count(path)} times in docs/architecture.md's module map"
                 for path in sorted(set(listed)) if listed.count(path) > 1]
    problems += [f"{path}: no description in docs/architecture.md's module map"
                 for path, text in rows if not text]
    assert not problems, "\n".join(problems)


def test_the_docs_speak_of_what_is_measured_not_of_tracker_numbers():
    found = [f"{page}:{n}: {m.group(0)!r}"
             for page in pages()
             for n, line in enumerate(read(os.path.join(ROOT, page)).splitlines(), 1)
             for m in TRACKER.finditer(line)]
    assert not found, "\n".join(found)
