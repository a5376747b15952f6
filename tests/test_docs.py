"""The documentation against the code: every command it shows parses, and every relative link resolves.

Every ``fullgraph ...`` command in a fenced code block of README.md and docs/ (also as
``python -m fullgraph``, ``torchrun ... -m fullgraph``, after ``$`` prompts, environment assignments
and line continuations) is given to the real parser, ``fullgraph.cli.build_parser``: an unknown flag,
a bad choice or a missing required option makes argparse exit, and the test names the file, the line
and argparse's message. Every relative link must point at a file inside the repository. Neither check
needs mkdocs (the docs extra) nor runs a command.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC_FILES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])

# Fenced blocks in these languages hold no shell commands (code, configuration, diagrams).
NOT_SHELL = {"python", "py", "toml", "json", "yaml", "yml", "text", "txt", "mermaid"}
SEPARATORS = {";", "&&", "||", "|", "&", "(", ")"}
REDIRECTS = {">", ">>", "<", ">&", "<&", "&>", ">|"}
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")


def code_blocks(text: str):
    """``(language, first line number, lines)`` of every fenced code block of a Markdown text."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang, start = m.group(2), m.group(3).lower(), i + 1
        i += 1
        body = []
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i])
            i += 1
        i += 1  # the closing fence
        yield lang, start + 1, body


def shell_lines(body: list[str], first: int):
    """``(line number, command line)``: continuations joined, ``$``/``>`` prompts dropped."""
    pending, at = "", None
    for n, raw in enumerate(body, first):
        line = raw.rstrip()
        if not pending:
            at = n
            stripped = line.lstrip()
            if stripped.startswith("$ "):
                line = stripped[2:]
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        yield at, pending + line
        pending = ""
    if pending:
        yield at, pending


FD_REDIRECT = re.compile(r"(?<=\s)\d+(?=[<>])")  # the 2 of 2>&1: shlex would make it a word
PLACEHOLDER = re.compile(r"(?<=\s)<[A-Za-z][\w.:/-]*>(?=\s|$)")  # <dir>: a value, not a redirection


def tokens(line: str) -> list[str]:
    line = PLACEHOLDER.sub(lambda m: f"'{m.group(0)}'", FD_REDIRECT.sub("", line))
    lex = shlex.shlex(line, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    return list(lex)


def fullgraph_argv(line: str) -> list[list[str]]:
    """The argument lists of every ``fullgraph`` invocation in one shell line (comments dropped)."""
    out, command = [], []
    for tok in tokens(line) + [";"]:
        if tok in SEPARATORS:
            argv = _invocation(command)
            if argv is not None:
                out.append(argv)
            command = []
        else:
            command.append(tok)
    return out


def _invocation(command: list[str]) -> list[str] | None:
    """The argv after ``fullgraph`` (or ``-m fullgraph``) when this simple command runs fullgraph."""
    for i, tok in enumerate(command):  # a redirection ends the arguments
        if tok in REDIRECTS:
            command = command[:i]
            break
    words = list(command)
    while words and ASSIGNMENT.match(words[0]):
        words.pop(0)
    if not words:
        return None
    program = os.path.basename(words[0])
    if program == "fullgraph":
        return words[1:]
    if program.startswith("python") or program == "torchrun":
        for i in range(1, len(words) - 1):
            if words[i] == "-m" and words[i + 1] == "fullgraph":
                return words[i + 2:]
    return None


def commands_in(text: str):
    """``(line number, argv)`` of every fullgraph command in the shell blocks of a Markdown text."""
    for lang, first, body in code_blocks(text):
        if lang in NOT_SHELL:
            continue
        for n, line in shell_lines(body, first):
            for argv in fullgraph_argv(line):
                yield n, argv


def parse_error(argv: list[str]) -> str | None:
    """None when ``fullgraph ARGV`` parses; else the parser's message. ``--help`` counts as parsing.

    A refused command either exits (argparse's own ``error``: SystemExit 2, the message on stderr) or
    raises ``InputError`` (fullgraph's parser, which ``main`` turns into one line and exit status 2)."""
    import argparse

    from fullgraph.cli import build_parser
    from fullgraph.errors import InputError

    err, out = io.StringIO(), io.StringIO()
    parser = build_parser()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            args = parser.parse_args(argv)
    except SystemExit as exc:
        if exc.code in (0, None) and ("-h" in argv or "--help" in argv):
            return None
        return err.getvalue().strip().splitlines()[-1] if err.getvalue().strip() else f"exit {exc.code}"
    except (InputError, argparse.ArgumentError) as exc:
        return str(exc)
    return _abbreviated(parser, args, argv) or _bad_choice(parser, args)


def _abbreviated(parser, args, argv: list[str]) -> str | None:
    """A flag written shorter than its name: argparse takes ``--boundary-rat`` for ``--boundary-rate``,
    but the docs should show the flag as it is."""
    import argparse

    names, todo = set(), [parser]
    while todo:
        p = todo.pop()
        for action in p._actions:
            names.update(action.option_strings)
            if isinstance(action, argparse._SubParsersAction):
                chosen = action.choices.get(getattr(args, action.dest, None))
                todo += [chosen] if chosen is not None else []
    for tok in argv:
        flag = tok.split("=", 1)[0]
        if flag.startswith("--") and flag != "--" and flag not in names:
            return f"{flag}: not a flag of its own (argparse read it as an abbreviation)"
    return None


CHOICES = re.compile(r"\{([^{}]*)\}(\|.*)?")


def _bad_choice(parser, args) -> str | None:
    """A value outside the choices a flag's help lists as ``{a,b,c}``. ``train`` leaves its choices to
    the configuration (so that a TOML file's value gets the same message), which this test does not
    build: it reads them off the parser's metavars instead. ``{...}|FILE.py:FUNCTION`` (``--model``)
    also admits a builder reference."""
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen = action.choices.get(getattr(args, action.dest, None))
            problem = chosen is not None and _bad_choice(chosen, args)
            if problem:
                return problem
            continue
        m = CHOICES.fullmatch(action.metavar) if isinstance(action.metavar, str) else None
        value = getattr(args, action.dest, None)
        if m is None or action.choices is not None or value is None:
            continue
        allowed = m.group(1).split(",")
        for v in value if isinstance(value, list) else [value]:
            if str(v) not in allowed and not (m.group(2) and ":" in str(v)):
                return f"{action.option_strings[0]}: invalid choice {v!r} (choose from {', '.join(allowed)})"
    return None


def command_problems(path: Path, text: str | None = None) -> list[str]:
    text = path.read_text(encoding="utf-8") if text is None else text
    problems = []
    for n, argv in commands_in(text):
        message = parse_error(argv)
        if message:
            problems.append(f"{path.name}:{n}: fullgraph {shlex.join(argv)}: {message}")
    return problems


LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_LINK = re.compile(r"^\s*\[[^\]]+\]:\s*(\S+)", re.MULTILINE)
CODE_SPAN = re.compile(r"`+[^`]*`+")


def links_in(text: str) -> list[str]:
    """The targets of every Markdown link outside code (fenced blocks and code spans)."""
    prose, fenced = [], None
    for line in text.splitlines():
        m = FENCE.match(line)
        if fenced is None and m:
            fenced = m.group(2)
        elif fenced is not None and line.strip().startswith(fenced):
            fenced = None
        elif fenced is None:
            prose.append(CODE_SPAN.sub("", line))
    prose_text = "\n".join(prose)
    return LINK.findall(prose_text) + REF_LINK.findall(prose_text)


def link_problems(path: Path, text: str | None = None, root: Path = ROOT) -> list[str]:
    text = path.read_text(encoding="utf-8") if text is None else text
    problems = []
    for target in links_in(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE) or target.startswith("#"):
            continue  # a URL (http:, mailto:, ...) or an anchor in the same page
        rel = target.split("#", 1)[0].split("?", 1)[0]
        resolved = (path.parent / rel).resolve()
        if not resolved.is_relative_to(root.resolve()):
            problems.append(f"{path.name}: link {target} points outside the repository")
        elif not resolved.exists():
            problems.append(f"{path.name}: link {target} points at a missing file")
    return problems


# ------------------------------------------------------------------------------------------ tests


def test_the_documentation_is_there():
    names = {p.relative_to(ROOT).as_posix() for p in DOC_FILES}
    assert {"README.md", "docs/index.md", "docs/quickstart.md", "docs/design.md"} <= names
    found = [argv for p in DOC_FILES for _, argv in commands_in(p.read_text(encoding="utf-8"))]
    assert len(found) >= 30, f"only {len(found)} fullgraph commands found in the docs: is the parser blind?"
    assert {argv[0] for argv in found if argv} >= {"train", "partition", "convert", "plan", "report", "predict"}


@pytest.mark.parametrize("path", DOC_FILES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_command_shown_parses(path):
    problems = command_problems(path)
    assert not problems, "commands the parser refuses:\n" + "\n".join(problems)


@pytest.mark.parametrize("path", DOC_FILES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves(path):
    problems = link_problems(path)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("path", DOC_FILES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_nothing_points_outside_the_repository(path):
    assert "../shared" not in path.read_text(encoding="utf-8"), f"{path.name} names ../shared"


def test_the_forms_of_a_command_are_found():
    text = "\n".join([
        "```sh",
        "$ fullgraph train --dataset cora \\",
        "    --epochs 5   # a comment with an apostrophe's quote",
        "CUDA_VISIBLE_DEVICES=0 .venv/bin/fullgraph plan --nprocs 4 --json",
        ".venv/bin/torchrun --nproc-per-node 2 -m fullgraph train --nprocs 2 > log.txt 2>&1",
        "python -m fullgraph report runs/a --out <dir> && echo done",
        "pip install -e '.[plot]'          # fullgraph report needs it",
        "```",
        "```python",
        "fullgraph.train_model('gcn')",
        "```",
    ])
    assert list(commands_in(text)) == [
        (2, ["train", "--dataset", "cora", "--epochs", "5"]),
        (4, ["plan", "--nprocs", "4", "--json"]),
        (5, ["train", "--nprocs", "2"]),
        (6, ["report", "runs/a", "--out", "<dir>"]),
    ]
    assert all(parse_error(argv) is None for _, argv in commands_in(text))


def test_a_made_up_flag_or_value_is_reported(tmp_path):
    bad = "\n".join([
        "```sh",
        "fullgraph train --dataset cora --no-such-flag 3",
        "fullgraph train --parallel sideways",
        "fullgraph predict --run runs/x",
        "fullgraph train --dataset cora --epochs 3",
        "fullgraph train --dataset cora --boundary-rat 0.5",
        "```",
    ])
    problems = command_problems(tmp_path / "planted.md", bad)
    assert len(problems) == 4, problems
    assert "planted.md:2" in problems[0] and "--no-such-flag" in problems[0]
    assert "planted.md:3" in problems[1] and "sideways" in problems[1]
    assert "planted.md:4" in problems[2] and "--out" in problems[2]  # a required option left out
    assert "planted.md:6" in problems[3] and "--boundary-rat" in problems[3]  # argparse's abbreviation


def test_a_broken_link_is_reported(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("", encoding="utf-8")
    (tmp_path / "there.md").write_text("", encoding="utf-8")
    text = ("[ok](there.md#a) [web](https://example.org/x.md) [anchor](#top) `[code](nowhere.md)`\n"
            "[gone](missing.md) ![img](pics/none.png) [out](../../elsewhere.md)\n")
    problems = link_problems(page, text, root=tmp_path)
    assert len(problems) == 3, problems
    assert "missing.md" in problems[0] and "pics/none.png" in problems[1]
    assert "outside the repository" in problems[2]
