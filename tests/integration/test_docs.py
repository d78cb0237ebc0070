"""The documentation stays true to the code (issue 27 item 7): docs/reference/flags.md is
what `muster help --markdown` prints from the flag tables, every doc path (and heading) that
code and tests cite exists, and every link between the docs leads somewhere. Cheap: one
run of the binary and a read of the tree."""
import difflib
import os
import pathlib
import re
import subprocess

from conftest import MUSTER, REPO

DOCS = REPO / "docs"
# Where citations are looked for: the source, scripts, tests, benchmarks, examples.
CODE_SUFFIXES = {".cc", ".h", ".py", ".sh", ".cmake", ".txt", ".yaml", ".proto", ".toml"}
SKIP_DIRS = {".git", "__pycache__", "node_modules", "out"}
# A doc path, then optionally the heading it cites: `docs/guides/etcd.md "Security"` (the
# heading may follow on the comment's next line), or a section of the design: `docs/design.md
# §4.4` (its headings keep the numbers of the design they came from).
CITATION = re.compile(r'(docs/[A-Za-z0-9_./-]*[A-Za-z0-9_-]\.md)'
                      r'(?:(?: |\n[ \t]*(?://|#|\*)?[ \t]*)"([^"\n]+)"| §(\d+(?:\.\d+)?))?')
# The README's sections as citations (the README is a door now, not the spec): `README
# "Stacks"`; other folders' README.md files (nccl_probe/README.md) are fine.
README_SECTION = re.compile(r"README(?!\.md)(?:'s)?(?:[:,] | )(?:\\?\"|[A-Z]|\w+ backend)")
# The design outside the repository, by section: `DESIGN §4.4` (docs/design.md §4.4 now).
DESIGN_SECTION = re.compile(r"\bDESIGN (?:§|\d)")


def code_files():
    for dirpath, dirnames, filenames in os.walk(REPO):
        rel = pathlib.Path(dirpath).relative_to(REPO)
        dirnames[:] = [d for d in dirnames
                       if d not in SKIP_DIRS and not (rel == pathlib.Path(".") and
                                                      (d.startswith("build") or d == "docs"))]
        for name in filenames:
            path = pathlib.Path(dirpath) / name
            if path.suffix in CODE_SUFFIXES or name == "CMakeLists.txt":
                yield path


def headings(doc):
    """A Markdown file's headings, as written (without the #s), outside code blocks."""
    found, fenced = [], False
    for line in doc.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,6} ", line):
            found.append(line.lstrip("#").strip())
    return found


def anchor(heading):
    """GitHub's anchor for a heading: lower case, punctuation gone, spaces to dashes."""
    text = re.sub(r"[^\w\- ]", "", heading.lower().replace("`", ""))
    return text.replace(" ", "-")


def test_flags_reference_matches_the_flag_tables():
    r = subprocess.run([str(MUSTER), "help", "--markdown"], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, r.stderr
    committed = (DOCS / "reference" / "flags.md").read_text()
    diff = "".join(difflib.unified_diff(committed.splitlines(True), r.stdout.splitlines(True),
                                        "docs/reference/flags.md", "muster help --markdown"))
    assert r.stdout == committed, (
        "docs/reference/flags.md differs from the flag tables; regenerate it with\n"
        "  build/bin/muster help --markdown > docs/reference/flags.md\n" + diff[:6000])
    # Every flag of every subcommand is on the page: the generator left none out.
    for flag in ("--nproc-per-node", "--rdzv-endpoint", "--hang-timeout", "--json", "--node",
                 "--rank", "--port"):
        assert f"`{flag}" in committed, flag


def test_cited_doc_paths_and_headings_exist():
    cited, missing, stale = 0, [], []
    for path in code_files():
        text = path.read_text(errors="replace")
        rel = path.relative_to(REPO)
        for match in CITATION.finditer(text):
            cited += 1
            where = f"{rel}:{text.count(chr(10), 0, match.start()) + 1}"
            doc = REPO / match.group(1)
            if not doc.is_file():
                missing.append(f"{where}: {match.group(1)} does not exist")
            elif match.group(2) and match.group(2) not in headings(doc):
                missing.append(f"{where}: {match.group(1)} has no heading "
                               f"\"{match.group(2)}\" (it has: {headings(doc)})")
            elif match.group(3) and match.group(3) not in {
                    h.split()[0].rstrip(".") for h in headings(doc)}:
                missing.append(f"{where}: {match.group(1)} has no section §{match.group(3)}")
        if path.resolve() == pathlib.Path(__file__).resolve():
            continue  # this file names the stale forms it looks for
        for number, line in enumerate(text.splitlines(), 1):
            if README_SECTION.search(line) or DESIGN_SECTION.search(line):
                stale.append(f"{rel}:{number}: {line.strip()}")
    assert not missing, "\n".join(missing)
    assert not stale, ("cites a README section or the old DESIGN; cite the doc under docs/ "
                       "instead:\n" + "\n".join(stale))
    assert cited >= 80, f"only {cited} doc citations found: is the scan looking at the code?"


def test_links_between_docs_lead_somewhere():
    broken = []
    pages = [REPO / "README.md", *DOCS.rglob("*.md")]
    for page in pages:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if re.match(r"[a-z]+:", target):
                continue  # https:, mailto:
            file_part, _, fragment = target.partition("#")
            doc = (page.parent / file_part).resolve() if file_part else page
            where = f"{page.relative_to(REPO)}: ({target})"
            if not doc.exists():
                broken.append(f"{where}: no such file")
            elif fragment and doc.suffix == ".md" and \
                    fragment not in {anchor(h) for h in headings(doc)}:
                broken.append(f"{where}: no heading with anchor #{fragment}")
    assert not broken, "\n".join(broken)
    assert len(pages) >= 20, [str(p) for p in pages]
