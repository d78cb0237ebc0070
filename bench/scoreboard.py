#!/usr/bin/python3
"""Writes bench/RESULTS.md's scoreboard: one table, one row per benchmark figure.

Every driver (b*.py) given --summary-json FILE writes its rows there (common.write_summary:
benchmark, target, figure, vs torch, verdict, plus the commit, date and command of the run);
its raw output is expected next to it, FILE with .md for .json (run_all.sh tees it there).
This program merges those rows into the table of --base (default bench/RESULTS.md): a row
whose `benchmark` cell matches replaces the old one,
a new one is added after the rows of its B number; rows no JSON mentions stay as they are,
with the date and commit of the run that produced them. The raw outputs are gathered into
--note (one markdown file per run_all.sh run), which the new rows' `run` cell links to.
The list of bench/notes/*.md between the notes markers is rebuilt from the directory.

    scoreboard.py [--base RESULTS.md] [--out FILE] [--note FILE] [SUMMARY.json ...]
    scoreboard.py --check     # re-renders --base unchanged; fails if that changes a byte

Only the text between the markers is rewritten; the prose around it is --base's.
"""
import argparse
import json
import os
import pathlib
import re
import sys

BENCH = pathlib.Path(__file__).resolve().parent
COLUMNS = ["benchmark", "target", "latest figure", "vs torchrun / torch store (same run)",
           "verdict", "commit", "date", "command (from `bench/`)", "run"]
KEYS = ["benchmark", "target", "figure", "vs_torch", "verdict", "commit", "date", "command",
        "run"]
TABLE = ("<!-- scoreboard:begin (bench/scoreboard.py rewrites this table) -->",
         "<!-- scoreboard:end -->")
NOTES = ("<!-- notes:begin (bench/scoreboard.py lists bench/notes/ here) -->",
         "<!-- notes:end -->")


def cells(line):
    """Splits one markdown table line on the pipes that are not escaped."""
    parts = re.split(r"(?<!\\)\|", line.strip())[1:-1]
    return [p.strip().replace("\\|", "|") for p in parts]


def cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def between(text, markers):
    a, b = text.index(markers[0]), text.index(markers[1])
    return text[:a + len(markers[0])], text[a + len(markers[0]):b], text[b:]


def parse_rows(text):
    _, table, _ = between(text, TABLE)
    lines = [x for x in table.strip().splitlines() if x.startswith("|")]
    if lines and cells(lines[0]) != COLUMNS:
        sys.exit(f"scoreboard: unexpected header {cells(lines[0])}")
    rows = []
    for line in lines[2:]:
        c = cells(line)
        if len(c) != len(KEYS):
            sys.exit(f"scoreboard: row with {len(c)} cells, want {len(KEYS)}: {line}")
        rows.append(dict(zip(KEYS, c)))
    return rows


def render_rows(rows):
    out = ["| " + " | ".join(COLUMNS) + " |", "|" + "|".join("---" for _ in COLUMNS) + "|"]
    for r in rows:
        out.append("| " + " | ".join(cell(r.get(k, "")) for k in KEYS) + " |")
    return "\n".join(out)


def bench_number(row):
    m = re.match(r"B(\d+)", row["benchmark"])
    return int(m.group(1)) if m else 99


def merge(old, new):
    """Replaces rows by benchmark name; new names go after the last row of their number."""
    rows = list(old)
    index = {r["benchmark"]: i for i, r in enumerate(rows)}
    for r in new:
        if r["benchmark"] in index:
            rows[index[r["benchmark"]]] = r
            continue
        after = [i for i, x in enumerate(rows) if bench_number(x) <= bench_number(r)]
        rows.insert(after[-1] + 1 if after else 0, r)
        index = {x["benchmark"]: i for i, x in enumerate(rows)}
    return rows


LINK = re.compile(r"\[([^\]]*)\]\(([^)]*)\)")


def relink(text, from_dir, to_dir):
    """Rewrites relative markdown links written for from_dir so they work from to_dir."""
    def fix(m):
        target = m.group(2)
        if re.match(r"[a-z]+:|#|/", target):
            return m.group(0)
        path, _, anchor = target.partition("#")
        new = os.path.relpath(from_dir / path, to_dir) + ("#" + anchor if anchor else "")
        return f"[{m.group(1)}]({new})"
    return LINK.sub(fix, text)


def notes_index(to_dir):
    lines = []
    for p in sorted((BENCH / "notes").glob("*.md")):
        title = p.read_text().split("\n", 1)[0].lstrip("#").strip()
        lines.append(f"- [{p.stem}]({os.path.relpath(p, to_dir)}): {title}")
    return "\n".join(lines)


def write_note(note, summaries, results):
    """Gathers the drivers' raw outputs into one markdown file; returns the row link."""
    first = summaries[0][1]
    parts = [f"# run_all.sh, {first['date']}, commit {first['commit']}", "",
             "Raw outputs of the drivers (bench/run_all.sh); the scoreboard rows taken from "
             "them are in [RESULTS.md]("
             f"{os.path.relpath(results, note.parent)}).", ""]
    for path, s in summaries:
        parts += [f"Command (from `bench/`): `{s['command']}`", ""]
        raw = path.with_suffix(".md")
        parts += [raw.read_text().rstrip() if raw.is_file() else "(no raw output kept)", ""]
    note.parent.mkdir(parents=True, exist_ok=True)
    note.write_text("\n".join(parts))
    return f"[{note.stem}]({os.path.relpath(note, results.parent)})"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("summaries", nargs="*", help="JSON files written by the drivers")
    ap.add_argument("--base", default=str(BENCH / "RESULTS.md"))
    ap.add_argument("--out", help="where to write (default: --base)")
    ap.add_argument("--note", help="markdown file to gather the raw outputs in")
    ap.add_argument("--check", action="store_true",
                    help="render --base alone and fail if the output differs from it")
    a = ap.parse_args()
    base = pathlib.Path(a.base).resolve()
    out = pathlib.Path(a.out or a.base).resolve()
    text = base.read_text()
    rows = parse_rows(text)
    summaries = [(pathlib.Path(p), json.loads(pathlib.Path(p).read_text()))
                 for p in a.summaries]
    new = []
    if summaries:
        link = write_note(pathlib.Path(a.note).resolve(), summaries, out) \
            if a.note else "-"
        for _, s in summaries:
            for r in s["rows"]:
                new.append(dict(r, commit=s["commit"], date=s["date"],
                                command=f"`{s['command']}`", run=link))
    rows = [dict(r, run=relink(r["run"], base.parent, out.parent)) for r in rows]
    rendered = render_rows(merge(rows, new))
    head, _, tail = between(text, TABLE)
    text = head + "\n" + rendered + "\n" + tail
    head, _, tail = between(text, NOTES)
    text = head + "\n" + notes_index(out.parent) + "\n" + tail
    if a.check:
        if text != base.read_text():
            sys.exit(f"scoreboard: {base} is not in the generator's format (re-run without "
                     "--check to normalise it)")
        print(f"{base}: {len(rows)} rows, in the generator's format")
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(f"scoreboard: {len(new)} row(s) from {len(summaries)} run(s) -> {out}")


if __name__ == "__main__":
    main()
