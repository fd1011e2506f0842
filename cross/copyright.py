#!/usr/bin/env python3
"""Writes the Debian package's DEP-5 copyright file from Cargo's metadata.

    python3 cross/copyright.py --target aarch64-unknown-linux-gnu OUT

The head (jetdetect's own code, the models) is cross/debian/copyright.in. Then one
paragraph per Rust crate linked into the binary for TARGET: `cargo tree -e
normal,no-proc-macro` resolves features as `cargo build` does and leaves out build
scripts, proc macros and dev-dependencies, none of which end up in the binary. Each
crate's licence comes from its Cargo.toml, its copyright lines from its own licence
files (its authors where those have none). Last, one paragraph per licence named: a
pointer to /usr/share/common-licenses where Debian ships the text, else the SPDX
text kept in cross/debian/licenses/. A licence with neither is an error naming the
crate, so a new dependency cannot slip in unlisted.
"""

import argparse
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LICENSES = os.path.join(ROOT, "cross", "debian", "licenses")

# SPDX identifiers whose text Debian ships in /usr/share/common-licenses.
COMMON = {
    "Apache-2.0": "Apache-2.0",
    "MPL-2.0": "MPL-2.0",
    "CC0-1.0": "CC0-1.0",
    "GPL-2.0-only": "GPL-2",
    "GPL-2.0-or-later": "GPL-2",
    "GPL-3.0-only": "GPL-3",
    "GPL-3.0-or-later": "GPL-3",
    "LGPL-2.1-only": "LGPL-2.1",
    "LGPL-2.1-or-later": "LGPL-2.1",
}

# Lines in licence files that look like a notice but are the licence's own template.
PLACEHOLDER = re.compile(r"\[yyyy\]|<year>|\{yyyy\}|\[year\]|name of copyright owner|copyright holders?>|"
                         r"<copyright|\[fullname\]|\{name\}", re.I)
NOTICE = re.compile(r"^\s*(?:Copyright|©)\s*(?:\(c\)|©)?\s*(?=[0-9A-Za-z])", re.I)


def fail(msg):
    sys.exit(f"cross/copyright.py: {msg}")


def run(cmd):
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"{' '.join(cmd)} failed:\n{r.stderr.strip()}")
    return r.stdout


def linked_crates(target):
    """(name, version) of every crate whose code is linked into the binary for `target`."""
    out = run(["cargo", "tree", "--locked", "-e", "normal,no-proc-macro", "--target", target,
               "--prefix", "none", "--format", "{p}"])
    crates = set()
    for line in out.splitlines():
        m = re.match(r"^(\S+) v(\S+)", line.strip())
        if m:
            crates.add((m.group(1), m.group(2)))
    return crates


def spdx_to_dep5(expr):
    """An SPDX expression as DEP-5 writes it: `MIT or Apache-2.0`, `Apache-2.0 with
    LLVM exception`; the old `MIT/Apache-2.0` form is read as `or`."""
    expr = expr.strip().replace("/", " OR ")
    expr = re.sub(r"\s+", " ", expr)
    expr = re.sub(r"\bWITH (\S+?)(?:-exception)?(?=\s|\)|$)", r"with \1 exception", expr)
    return expr.replace(" OR ", " or ").replace(" AND ", " and ")


def licence_names(dep5):
    """The licence names a DEP-5 expression uses, each needing its own paragraph."""
    return [n for n in re.split(r"\s+(?:or|and)\s+", dep5.replace("(", "").replace(")", "")) if n]


def notices(package):
    """Copyright lines from the crate's licence files, else its authors."""
    folder = os.path.dirname(package["manifest_path"])
    found = []
    for f in sorted(os.listdir(folder)):
        if not re.match(r"(LICEN[CS]E|COPYING|COPYRIGHT|UNLICENSE|NOTICE)", f, re.I):
            continue
        path = os.path.join(folder, f)
        if not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if NOTICE.match(line) and not PLACEHOLDER.search(line) and re.search(r"\d{4}|\w+ \w+", line):
                    text = NOTICE.sub("", line).strip().rstrip(".")
                    text = re.sub(r"^(?:\(c\)|©)\s*", "", text, flags=re.I)
                    if text and text not in found and not text.lower().startswith(("notice", "license", "and ")):
                        found.append(text)
    if not found:
        found = [re.sub(r"\s*<[^>]*>", "", a).strip() for a in package.get("authors") or []]
        found = [a for a in found if a]
    if not found:
        found = [f"the {package['name']} authors"]
    return found[:6]


def licence_text(name):
    """The text for a licence paragraph (lines, without the DEP-5 indentation)."""
    m = re.match(r"^(\S+) with (\S+) exception$", name)
    if m:
        spdx = m.group(2) + "-exception"
        base, exc = (licence_text(m.group(1)), read_licence(spdx))
        if base is None or exc is None:
            return None
        return base + ["", f"with the {spdx} (SPDX):", ""] + exc
    if name in COMMON:
        return [f"On Debian systems, the full text of the {name} licence is in",
                f"/usr/share/common-licenses/{COMMON[name]}."]
    return read_licence(name)


def read_licence(spdx):
    path = os.path.join(LICENSES, spdx)
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as fh:
        return [line.rstrip() for line in fh.read().strip().splitlines()]


def paragraph(fields):
    """A DEP-5 paragraph: each field's first line after its name, the rest indented, an empty
    line written as ` .`."""
    out = []
    for key, value in fields:
        lines = value if isinstance(value, list) else [value]
        out.append(f"{key}: {lines[0]}".rstrip())
        out += [" " + (line if line.strip() else ".") for line in lines[1:]]
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", required=True, help="Rust target triple of the packaged binary")
    ap.add_argument("out")
    args = ap.parse_args()

    meta = json.loads(run(["cargo", "metadata", "--locked", "--format-version", "1"]))
    by_id = {(p["name"], p["version"]): p for p in meta["packages"]}
    root = meta["resolve"]["root"]
    own = next(p["name"] for p in meta["packages"] if p["id"] == root)
    crates = sorted(c for c in linked_crates(args.target) if c[0] != own)
    if len(crates) < 10:
        fail(f"cargo tree listed only {len(crates)} crates for {args.target}: is the target right?")

    with open(os.path.join(ROOT, "cross", "debian", "copyright.in"), encoding="utf-8") as fh:
        head = fh.read().strip()
    used = {}
    for m in re.finditer(r"^License: (.+)$", head, re.M):
        for n in licence_names(m.group(1)):
            used.setdefault(n, "jetdetect")
    parts = [head]
    for name, version in crates:
        p = by_id.get((name, version))
        if p is None:
            fail(f"{name} {version} is in cargo tree but not in cargo metadata")
        if not p.get("license"):
            fail(f"{name} {version} declares no SPDX licence in its Cargo.toml: add a paragraph for it by hand")
        dep5 = spdx_to_dep5(p["license"])
        for n in licence_names(dep5):
            used.setdefault(n, f"{name} {version}")
        parts.append(paragraph([
            ("Files", f"vendor/{name}-{version}/*"),
            ("Copyright", notices(p)),
            ("License", dep5),
            ("Comment", f"Rust crate {name} {version}" + (f", {p['repository']}" if p.get("repository") else "")),
        ]))
    missing = []
    for n in sorted(used):
        text = licence_text(n)
        if text is None:
            missing.append(f"{n} (used by {used[n]})")
            continue
        parts.append(paragraph([("License", [n] + text)]))
    if missing:
        fail("no text for " + ", ".join(missing) + f": put the SPDX licence text in {LICENSES}/ID "
             "(or map the ID to /usr/share/common-licenses in COMMON)")
    with open(args.out, "w", encoding="utf-8") as fh:
        fh.write("\n\n".join(parts) + "\n")
    print(f"cross/copyright.py: {args.out}: {len(crates)} crates, {len(used)} licences")


if __name__ == "__main__":
    main()
