#!/usr/bin/env python3
r"""doc-check: the repository's documents and comments send a reader only to places the reader has.

`make doc-check` (the first step of `make test`) runs `--self-test`, then this check on the work tree: the tracked
files plus new ones that git does not ignore. Python 3 standard library only; well under a second. It prints every
problem as `file:line: what` and exits 1 when there is one:

  fence    a Markdown file whose ``` code fences do not pair up (an odd count, or a fence with an info string such
           as ```swift inside a block still open: the block above it was never closed, and the rest renders as code);
  ref      a pointer to something the repository does not hold: the contract's own files (SPEC.md, DESIGN, STYLE n,
           peers-wire.md, the folder they live in) or a tracker's issue number (`issue 21`, `issues 3 and 4`,
           `#21`), in Markdown, the Makefile, scripts (scripts/, .py, .sh, and any file that starts with `#!`),
           and the comments of code files (.swift, .c, .h, .js, linker version scripts and module maps);
  link     a relative Markdown link or image, in any Markdown file, whose target file does not exist, or whose
           `#anchor` names no heading of the Markdown file it points into;
  rule     a rule id cited anywhere (code, tests, scripts, documents) with no `### ID` heading in docs/BEHAVIOUR.md,
           or a section letter cited alone (`SPEC E`) with no `## E — …` section;
  notice   a package of Package.swift's `dependencies:` that NOTICE does not name.

What counts as a rule citation (an id is a letter of T S C R N A W D M V E F K P X O, one or two digits and an
optional lower-case letter: C7, A8a, V4b, X3a). An id counts only where it is cited, so hex strings, UUIDs, `E2E`,
`W3C`, `X1 Carbon`, `\u{E9}` or a base64 `W47/…` never do:
  - after `SPEC`, `BEHAVIOUR` or `BEHAVIOUR.md` (`SPEC C3`, `SPEC section E`; a section letter alone only on the
    keyword's line), and each further id of the list it starts (`SPEC C3, R1`, `SPEC A1–A3 and A5`, `SPEC V, M8`),
    asides allowed between them (`SPEC F1 "its own sessions", A2`, `SPEC S1 (migrates forward), C9`,
    `SPEC X2 drop_after_body, M2`); a section letter alone continues a list only after `,` `/` `–`, so
    `SPEC C7 and A log` cites C7 alone;
  - after `rule`/`rules`, `see` or `per` (`rule C7`, `see R5`, `per A9`);
  - as a Markdown link's text (`[C7](…)`, `[S2–S5](…)`) and in the anchor of a link into BEHAVIOUR.md (`#c7`);
  - in a parenthesis, opening it and followed by `)`, `,`, `;` or `:` (`(C7)`, `(C9, R3)`, `(A9: …)`), or closing
    it after a comma (`(group commit, T5)`): `(X1 Carbon)` does not count;
  - opening a comment, a line or a table cell, followed by `:`, `|` or the line's end (`// W2: …`, `| C5 |`,
    `// C8`);
  - joined to another id by `/` or an en dash (`W1/W2`, `T2–T3`), and possessive (`C7's`).
Bare ids in running prose (`the W2 log types`, `by S2 order`) are not recognised: too close to ordinary words and
product names to tell apart.

What counts as an issue number: `issue`/`issues`/`Issue` followed by a number, with or without `#` (`issue 21`,
`Issue #21`, `issues 3 and 4`), `PR 12`/`pull request 12`, and a bare `#21` that stands alone (after a space, an
opening bracket or the start of a line, and not followed by a letter or digit). Not counted: `repo#123` (another
project's tracker, which a reader can look up), CSS colours (`#555`: after `:` or a quote), HTML entities (`&#38;`),
and `issues/1034` inside a URL.

Exclusions, each for a reason:
  - this script, which names every pattern it looks for;
  - Fixtures/otlp-proto/ and MockServer/OutboxMock/Vendors/OTLP/Generated/*.pb.swift: third-party text, the
    OpenTelemetry and Google .proto files kept unchanged (NOTICE) and the code protoc generates from them, whose
    comments are copied from those files; regenerating (scripts/gen-otlp.sh) would undo any edit, and their own
    wording (`W3C`, swift-protobuf's `issues/1034` URLs) is not ours to rewrite;
  - string literals of Swift, C and JavaScript files for the `ref` check (their comments are checked): a string is
    program text, for example an HTML colour in the mock's live page. The `rule` check reads whole files, strings
    included (a test suite's name citing a rule must cite one that exists).
  - `DESIGN` counts only as a whole upper-case word: `DESIGN.md` and `DESIGN "Ownership…"` do, but a constant such
    as `DESIGN_LIMIT` or `SOME_DESIGN` (joined by `_`, a word character) and the English word `design` do not.
"""
import bisect
import os
import re
import subprocess
import sys
import tempfile
import unicodedata

SELF = "scripts/doc-check.py"
EXCLUDED_PREFIXES = ("Fixtures/otlp-proto/",)
EXCLUDED_RE = re.compile(r"^MockServer/OutboxMock/Vendors/OTLP/Generated/[^/]+\.pb\.swift$")

COMMENT_ONLY_EXTENSIONS = (".swift", ".c", ".h", ".js", ".map", ".modulemap")  # `ref`: comments only; `rule`: all
WHOLE_EXTENSIONS = (".py", ".sh", ".md")                  # both checks: the whole file

# --- ref: pointers a reader cannot follow -------------------------------------------------------------------------
# (pattern, what, the characters that may not come just before a match). Patterns begin with a literal, and the
# character before is tested afterwards, rather than with a leading \b or look-behind: re finds literals quickly.
WORD = r"\w"
REF_PATTERNS = [
    (re.compile(r"SPEC\.md"), "names SPEC.md, which the repository does not have: cite the rule of docs/BEHAVIOUR.md",
     None),
    (re.compile(r"DESIGN\b"), "cites DESIGN, which the repository does not have: say it here or cite "
                              "docs/ARCHITECTURE.md", WORD),
    (re.compile(r"STYLE(?:[ \t]*§?[ \t]*\d+|\.md\b)"), "cites STYLE, which the repository does not have: say the "
                                                       "reason here", WORD),
    (re.compile(r"peers-wire(?:\.md)?"), "cites peers-wire.md, which the repository does not have: say it here or "
                                         "point at docs/MOCK.md", None),
    (re.compile(r"/work/shared|\.\./shared/|shared/reference\b"), "points outside the repository", None),
    (re.compile(r"(?:I(?:ssues?|SSUES?)|issues?|P(?:R|ull request)|pull request)[ \t]*#?\d+"),
     "cites an issue number, which a reader of the repository cannot look up: say the point here", WORD),
    (re.compile(r"#\d+(?![\w-])"),
     "cites an issue number (#N), which a reader of the repository cannot look up: say the point here",
     r"[^\s(\[{]"),
]

# --- rule: citations of docs/BEHAVIOUR.md's rules -------------------------------------------------------------------
LETTERS = "TSCRNAWDMVEFKPXO"
RULE_ID = rf"[{LETTERS}]\d{{1,2}}[a-z]?"
SECTION = rf"[{LETTERS}]"
PUNCT_SEP = r"\s*[,;/+&–—-]\s*"
SEP = rf"(?:{PUNCT_SEP}|\s+(?:and|or|to)\s+)"
# An aside allowed after an id in a list that SPEC or BEHAVIOUR starts: a quoted phrase, a parenthesis, a code span
# or a snake_case name (`SPEC F1 "its own sessions", A2`, `SPEC S1 (migrates forward), C9`, `SPEC X2 drop_after_body,
# M2`).
ASIDE = r"""(?:[ \t]+(?:"[^"\n]*"|\([^()\n]*\)|`[^`\n]*`|[a-z]+(?:_[a-z]+)+))?"""
ID_LIST = rf"{RULE_ID}(?!\w)(?:{SEP}{RULE_ID}(?!\w))*"
ASIDE_TEXT = re.compile(r"""\"[^"\n]*"|\([^()\n]*\)|`[^`\n]*`""")
# (pattern, the group holding the list, the characters that may not come just before a match)
CITATIONS = [
    # A section letter alone counts right after the keyword on the same line, or after `,` `/` `–` in the list,
    # never after `and`/`or` (`SPEC C7 and A log…` cites C7 only) nor on the next line.
    (re.compile(rf"(SPEC|BEHAVIOUR(?:\.md)?)(?:[ \t]+(?:section[ \t]+)?(?:{RULE_ID}|{SECTION})|\s+{RULE_ID})(?!\w)"
                rf"{ASIDE}(?:(?:{PUNCT_SEP}(?:{RULE_ID}|{SECTION})|\s+(?:and|or|to)\s+{RULE_ID})(?!\w){ASIDE})*"), 0,
     WORD),
    (re.compile(rf"(?:[Rr]ules?|[Ss]ee|per)\s+({ID_LIST})"), 1, WORD),
    (re.compile(rf"\[({RULE_ID}(?:{SEP}{RULE_ID})*)\]\("), 1, None),                 # [C7](…), [S2–S5](…)
    (re.compile(rf"\(\s*({ID_LIST})(?=\s*[),;:]|'s\b)"), 1, None),                      # (C7), (C9, R3), (A9: …)
    (re.compile(rf",\s*({ID_LIST})\s*\)"), 1, None),                                   # (group commit, T5)
    (re.compile(rf"(?:^|//+|/\*+|#+|\*|\|)[ \t]*({ID_LIST})[ \t]*(?::|\||$)", re.M), 1, None),  # // W2: …, | C5 |, // C8
    (re.compile(rf"({RULE_ID}(?:/{RULE_ID})+)(?![\w/])"), 1, r"[\w./-]"),              # W1/W2
    (re.compile(rf"({RULE_ID}–{RULE_ID})(?!\w)"), 1, r"[\w./-]"),                      # T2–T3
    (re.compile(rf"({RULE_ID})'s\b"), 1, r"[\w./-]"),                                   # C7's
]
BEHAVIOUR_ANCHOR = re.compile(rf"BEHAVIOUR\.md#([{LETTERS.lower()}]\d{{1,2}}[a-z]?)\b")
TOKEN = re.compile(rf"(?<!\w)(?:{RULE_ID}|{SECTION})(?!\w)")


def matches(pattern, before, text):
    """pattern's matches in text that are not preceded by a character of the class `before`."""
    test = re.compile(before) if before else None
    for m in pattern.finditer(text):
        if test is None or m.start() == 0 or not test.match(text[m.start() - 1]):
            yield m


# --- link ----------------------------------------------------------------------------------------------------------
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_DEFINITION = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
FENCE = re.compile(r"^\s*(`{3,})(.*)$")


class Checker:
    def __init__(self, root):
        self.root = root
        self.problems = []
        self._texts = {}
        self._slugs = {}

    def problem(self, path, line, what):
        self.problems.append(f"{path}:{line}: {what}")

    def text(self, path):
        if path not in self._texts:
            try:
                with open(os.path.join(self.root, path), encoding="utf-8") as f:
                    self._texts[path] = f.read()
            except (UnicodeDecodeError, IsADirectoryError, FileNotFoundError):
                self._texts[path] = None
        return self._texts[path]

    # -- which files ------------------------------------------------------------------------------------------------
    def files(self):
        def git(*args):
            out = subprocess.run(["git", "-C", self.root, *args], capture_output=True, check=True).stdout
            return [p for p in out.decode().split("\0") if p]
        try:
            paths = git("ls-files", "-z") + git("ls-files", "-z", "--others", "--exclude-standard")
        except (subprocess.CalledProcessError, FileNotFoundError):
            paths = []
            for directory, dirs, names in os.walk(self.root):
                dirs[:] = [d for d in dirs if not d.startswith(".")]
                paths += [os.path.relpath(os.path.join(directory, n), self.root) for n in names]
        return sorted({p for p in paths if os.path.isfile(os.path.join(self.root, p))})

    @staticmethod
    def excluded(path):
        return path == SELF or path.startswith(EXCLUDED_PREFIXES) or EXCLUDED_RE.match(path) is not None

    # -- fence ------------------------------------------------------------------------------------------------------
    def check_fences(self, path, text):
        opened = None  # (line, backticks)
        for number, line in enumerate(text.split("\n"), 1):
            m = FENCE.match(line)
            if not m:
                continue
            ticks, info = m.group(1), m.group(2).strip()
            if opened is None:
                opened = (number, len(ticks))
            elif len(ticks) >= opened[1] and not info:
                opened = None
            elif info and "`" not in info:
                self.problem(path, number, f"code fence ```{info} inside the code block opened at line {opened[0]}, "
                                           "which is never closed before it")
                opened = (number, len(ticks))
        if opened is not None:
            self.problem(path, opened[0], "code fence never closed (an odd number of ``` fences)")

    # -- ref --------------------------------------------------------------------------------------------------------
    def check_refs(self, path, text, starts, spans=None):
        """spans: the comments' (start, end); None checks the whole text."""
        if spans is not None:  # everything outside a comment becomes blank, lines kept
            parts, at = [], 0
            for a, b in spans:
                parts.append(re.sub(r"[^\n]", " ", text[at:a]))
                parts.append(text[a:b])
                at = b
            parts.append(re.sub(r"[^\n]", " ", text[at:]))
            text = "".join(parts)
        for pattern, what, before in REF_PATTERNS:
            for m in matches(pattern, before, text):
                self.problem(path, bisect.bisect_right(starts, m.start()), f"`{m.group(0).strip()}` {what}")

    # -- rule -------------------------------------------------------------------------------------------------------
    def rule_citations(self, text, starts):
        """Yields (line, id or section letter) for each citation in text."""
        def line_of(offset):
            return bisect.bisect_right(starts, offset)

        found = set()
        for pattern, group, before in CITATIONS:
            for m in matches(pattern, before, text):
                body, at = m.group(group), m.start(group)
                if group == 0:  # the keyword is part of the match: skip it
                    skip = len(m.group(1))
                    body, at = body[skip:], at + skip
                body = ASIDE_TEXT.sub(lambda a: " " * len(a.group(0)), body)  # an aside cites nothing
                for t in TOKEN.finditer(body):
                    found.add((line_of(at + t.start()), t.group(0)))
        for m in BEHAVIOUR_ANCHOR.finditer(text):
            found.add((line_of(m.start(1)), m.group(1)[0].upper() + m.group(1)[1:]))
        return sorted(found)

    def behaviour(self):
        text = self.text("docs/BEHAVIOUR.md") or ""
        rules = set(re.findall(rf"^### ({RULE_ID})\s*$", text, re.M))
        sections = set(re.findall(rf"^## ({SECTION}) — ", text, re.M))
        return rules, sections

    def check_rules(self, path, text, starts, rules, sections):
        for number, cited in self.rule_citations(text, starts):
            if len(cited) == 1:
                if cited not in sections:
                    self.problem(path, number, f"cites section {cited}, which docs/BEHAVIOUR.md does not have "
                                               f"(no `## {cited} — …` heading)")
            elif cited not in rules:
                self.problem(path, number, f"cites rule {cited}, which has no `### {cited}` heading in "
                                           "docs/BEHAVIOUR.md")

    # -- link -------------------------------------------------------------------------------------------------------
    def slugs(self, path):
        """GitHub's heading anchors of a Markdown file: lower case, punctuation dropped, spaces to hyphens,
        `-1`, `-2` … for repeats."""
        if path not in self._slugs:
            seen, slugs = {}, set()
            text = self.text(path) or ""
            in_fence = False
            for line in text.split("\n"):
                if FENCE.match(line):
                    in_fence = not in_fence
                    continue
                m = None if in_fence else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
                if not m:
                    continue
                heading = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", m.group(1))  # a link's text
                slug = "".join(c for c in heading.lower()
                               if c in " -_" or unicodedata.category(c)[0] in "LN").replace(" ", "-")
                n = seen.get(slug, 0)
                seen[slug] = n + 1
                slugs.add(slug if n == 0 else f"{slug}-{n}")
            self._slugs[path] = slugs
        return self._slugs[path]

    def check_links(self, path, text):
        directory = os.path.dirname(path)
        in_fence = False
        for number, line in enumerate(text.split("\n"), 1):
            if FENCE.match(line):
                in_fence = not in_fence
                continue
            if in_fence:
                continue
            bare = CODE_SPAN.sub(lambda m: " " * len(m.group(0)), line)
            targets = [m.group(1) for m in INLINE_LINK.finditer(bare)]
            m = REFERENCE_DEFINITION.match(bare)
            if m:
                targets.append(m.group(1))
            for target in targets:
                if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target):  # http:, https:, mailto: …
                    continue
                file_part, _, anchor = target.partition("#")
                if file_part:
                    resolved = os.path.normpath(os.path.join(directory, file_part))
                    if resolved.startswith(".."):
                        self.problem(path, number, f"link to {target} leaves the repository")
                        continue
                    if not os.path.exists(os.path.join(self.root, resolved)):
                        self.problem(path, number, f"link to {target}: {resolved} does not exist")
                        continue
                else:
                    resolved = path
                if anchor and resolved.endswith(".md") and os.path.isfile(os.path.join(self.root, resolved)):
                    if anchor.lower() not in self.slugs(resolved):
                        self.problem(path, number, f"link to {target}: {resolved} has no heading with the anchor "
                                                   f"#{anchor}")

    # -- notice -----------------------------------------------------------------------------------------------------
    def check_notice(self):
        manifest = self.text("Package.swift")
        if manifest is None:
            return
        notice = self.text("NOTICE")
        for m in re.finditer(r"\.package\(\s*(?:name:\s*\"[^\"]*\"\s*,\s*)?url:\s*\"([^\"]+)\"", manifest):
            name = re.sub(r"\.git$", "", m.group(1).rstrip("/")).rsplit("/", 1)[-1]
            line = manifest.count("\n", 0, m.start()) + 1
            if notice is None:
                self.problem("Package.swift", line, f"depends on {name}, and there is no NOTICE to name it")
            elif not re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", notice):
                self.problem("Package.swift", line, f"depends on {name}, which NOTICE does not name (with its "
                                                    "licence)")

    # -- all --------------------------------------------------------------------------------------------------------
    def run(self):
        rules, sections = self.behaviour()
        if not rules:
            self.problem("docs/BEHAVIOUR.md", 1, "no `### ID` rule heading found")
        for path in self.files():
            name = os.path.basename(path)
            is_makefile = name == "Makefile" or name.endswith(".mk")
            is_script = path.startswith("scripts/") or ("." not in name and (self.text(path) or "").startswith("#!"))
            comment_only = path.endswith(COMMENT_ONLY_EXTENSIONS)
            if not (is_makefile or is_script or comment_only or path.endswith(WHOLE_EXTENSIONS)):
                continue
            if self.excluded(path):
                continue
            text = self.text(path)
            if text is None:
                continue
            if path.endswith(".md"):
                self.check_fences(path, text)
                self.check_links(path, text)
            starts = line_starts(text)
            self.check_refs(path, text, starts, comment_spans(text, path) if comment_only else None)
            self.check_rules(path, text, starts, rules, sections)
        self.check_notice()
        return self.problems


STRING_STOPS = {}


def comment_spans(text, path):
    """(start, end) of every comment of a Swift, C or JavaScript file. String literals are skipped (Swift's
    multi-line and raw strings included), so that `"http://…"` is no comment."""
    js = path.endswith(".js")
    c_like = path.endswith((".c", ".h", ".map", ".modulemap"))
    if c_like:
        opener = re.compile(r"//|/\*|[\"']")
    elif js:
        opener = re.compile(r"//|/\*|[\"'`]")
    else:
        opener = re.compile(r'//|/\*|#+"|"')
    spans, i, n = [], 0, len(text)
    while True:
        m = opener.search(text, i)
        if not m:
            return spans
        token, i = m.group(0), m.start()
        if token == "//":
            end = text.find("\n", i)
            end = n if end < 0 else end
            spans.append((i, end))
            i = end
        elif token == "/*":
            depth, j = 1, i + 2
            nested = not (c_like or js)  # Swift's block comments nest
            while depth:
                k = text.find("*/", j)
                if k < 0:
                    j = n
                    break
                if nested:
                    depth += text.count("/*", j, k)
                depth, j = depth - 1, k + 2
            spans.append((i, j))
            i = j
        else:
            hashes = len(token) - 1 if token.endswith('"') else 0
            quote = token[-1]
            j = i + len(token)
            if quote == '"' and not c_like and text.startswith('""', j):
                close = '"""' + "#" * hashes
                k = text.find(close, j + 2)
                i = n if k < 0 else k + len(close)
                continue
            close = quote + "#" * hashes
            stop = STRING_STOPS.get(close)
            if stop is None:  # the closing quote, an escape (none in raw strings), or the line's end
                stop = re.compile(re.escape(close) + ("" if quote == "`" else "|\n") + ("|\\\\." if hashes == 0 else ""),
                                  re.S)
                STRING_STOPS[close] = stop
            while True:
                k = stop.search(text, j)
                if not k:
                    i = n
                    break
                if k.group(0).startswith("\\"):
                    j = k.end()
                    continue
                i = k.end() if k.group(0) == close else k.start()
                break


def line_starts(text):
    return [0] + [m.end() for m in re.finditer("\n", text)]


# --- self-test ---------------------------------------------------------------------------------------------------
def self_test():
    """Each check must fail on a tree made to fail it, and nothing may fire on the look-alikes it must let pass."""
    behaviour = ("# B\n\n## C — Channel\n\n### C7\nA rule.\n\n### A8a\nAnother.\n\n## X — Command line\n\n"
                 "### X3a\nExit codes.\n")
    clean = {
        "docs/BEHAVIOUR.md": behaviour,
        "README.md": "# R\n\nSee [C7](docs/BEHAVIOUR.md#c7) and [the rules](docs/BEHAVIOUR.md), rule A8a.\n\n"
                     "```sh\nmake test\n```\n\n| [X3a](docs/BEHAVIOUR.md#x3a) | colour `#555`, repo#1234 |\n",
        "Package.swift": '// swift-tools-version:6.2\n.package(url: "https://github.com/apple/swift-log", from: "1"),\n',
        "NOTICE": "swift-log (Apache-2.0)\n",
        "Sources/A.swift": (
            "// SPEC C7: a dispatch commits first (C7's bound; see (C7, A8a) and BEHAVIOUR X3a).\n"
            "let DESIGN_LIMIT = 3  // the design, not a file; E2E, W3C, X1 Carbon\n"
            'let css = "color:#555; background: #222; see SPEC.md, issue 21"  // strings are program text\n'
            'let uuid = "6F1D2A0E-A165-D9CB-0000"; let b64 = "W47/95gD"\n'
            'let s = """\n  // not a comment: issue 7\n  """\n'
            '@Suite("Dispatch (SPEC C7)") struct T {}\n'
            '// SPEC C7 and A log, SPEC A8a "as in X9 or K2", C7: fine. See docs/BEHAVIOUR.md\n'
            '// K is a letter here, not a section.\n'),
        "scripts/tool.py": "# make test runs it (SPEC C7). fill='#999', &#38;\n"
                           "URL = 'https://github.com/apple/swift-protobuf/issues/1034'\n",
        "Makefile": "# The C interface (SPEC C, X).\ntest:\n\ttrue\n",
    }
    broken = {
        "docs/ODD.md": "# Odd\n\n```\nunclosed\n\n```swift\nlet x = 1\n```\n",
        "docs/ODD2.md": "# Odd\n\n````\n```\nnested\n```\n````\n\n```sh\nmake test\n",
        "docs/REF.md": "# Ref\n\nThe rules are in SPEC.md (DESIGN \"Ownership\", STYLE 9); peers-wire.md has it; "
                       "issue 21, issues 3 and 4.\nSee #27.\n",
        "docs/LINK.md": "# Link\n\n[gone](MISSING.md), ![img](img/none.png), [anchor](BEHAVIOUR.md#c99), "
                        "[fine](https://example.com/x.md) [also](#link)\n",
        "Sources/B.swift": "// SPEC C8: no heading.\nlet x = 1 // (Q1) is no id; (R4) is one\n"
                           "/* rule K3's secret */ let y = \"SPEC P1\"\n",
        "Makefile": "# Issue 18: see DESIGN.md\ntest:\n\ttrue\n",
        "Package.swift": clean["Package.swift"]
                         + '.package(url: "https://github.com/apple/swift-nio.git", from: "2"),\n',
    }
    expected = [
        ("docs/ODD.md:6", "inside the code block opened at line 3"),
        ("docs/ODD2.md:9", "an odd number of ``` fences"),
        ("docs/REF.md:3", "`SPEC.md`"), ("docs/REF.md:3", "`DESIGN`"), ("docs/REF.md:3", "`STYLE 9`"),
        ("docs/REF.md:3", "`peers-wire.md`"), ("docs/REF.md:3", "`issue 21`"), ("docs/REF.md:3", "`issues 3`"),
        ("docs/REF.md:4", "`#27`"),
        ("docs/LINK.md:3", "MISSING.md does not exist"), ("docs/LINK.md:3", "img/none.png does not exist"),
        ("docs/LINK.md:3", "no heading with the anchor #c99"), ("docs/LINK.md:3", "rule C99"),
        ("Sources/B.swift:1", "rule C8"), ("Sources/B.swift:2", "rule R4"), ("Sources/B.swift:3", "rule K3"),
        ("Sources/B.swift:3", "rule P1"),
        ("Makefile:1", "`Issue 18`"), ("Makefile:1", "`DESIGN`"),
        ("Package.swift:3", "swift-nio, which NOTICE does not name"),
    ]
    failures = []
    with tempfile.TemporaryDirectory() as root:
        def write(files):
            for rel, content in files.items():
                full = os.path.join(root, rel)
                os.makedirs(os.path.dirname(full), exist_ok=True)
                with open(full, "w", encoding="utf-8") as f:
                    f.write(content)
        write(clean)
        got = Checker(root).run()
        if got:
            failures.append("the clean tree should pass, got:\n    " + "\n    ".join(got))
        write(broken)
        got = Checker(root).run()
        for where, what in expected:
            if not any(p.startswith(where + ":") and what in p for p in got):
                failures.append(f"expected a problem at {where} mentioning {what!r}")
        unexpected = [p for p in got if not any(p.startswith(w + ":") and s in p for w, s in expected)]
        if unexpected:
            failures.append("unexpected problems:\n    " + "\n    ".join(unexpected))
    for f in failures:
        print(f"doc-check self-test: {f}", file=sys.stderr)
    if failures:
        return 1
    print(f"doc-check self-test: {len(expected)} planted problems found, no false positive on the clean tree")
    return 0


def main(argv):
    if "--self-test" in argv:
        return self_test()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    problems = Checker(root).run()
    for p in problems:
        print(p)
    if problems:
        print(f"doc-check: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    print("doc-check: documents, comments, links, rule citations and NOTICE are consistent")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
