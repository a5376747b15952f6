"""``fullgraph --help`` helps: every command says what it does, every flag says what it means, and the
data root's default reads the same in every command (issue 36 §5).

The walk covers every subcommand the parser builds, nested ones too (``generate rmat``), so a command or
flag added later without help fails here.
"""

import argparse

import pytest

from fullgraph.cli import HIDDEN_FLAGS, build_parser
from fullgraph.config import TrainConfig
from fullgraph.data.datasets import ROOT_DEFAULT, ROOT_HELP
from fullgraph.options import options_of


def commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """``(path, parser)`` for the parser and every subcommand below it, each once (aliases skipped)."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            seen = set()
            for name, sub in action.choices.items():
                if id(sub) not in seen:
                    seen.add(id(sub))
                    yield from commands(sub, (*path, name))


def hidden_on_purpose(path: tuple[str, ...]) -> set[str]:
    """The flags a command hides by design: train's launcher-only options, and ``HIDDEN_FLAGS``."""
    if path == ("train",):
        return {o.flag for o in options_of(TrainConfig) if o.hidden}
    return set(HIDDEN_FLAGS.get(" ".join(path), ()))


def missing_help(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> list[str]:
    """The flags (and positionals) of one command with no help, or hidden without a reason."""
    bad = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        name = action.option_strings[-1] if action.option_strings else action.dest
        text = action.help
        if text == argparse.SUPPRESS:
            if name not in hidden_on_purpose(path):
                bad.append(f"{name} (hidden)")
        elif not (text and text.strip()):
            bad.append(name)
    return bad


def test_the_walk_reaches_every_command():
    paths = {" ".join(p) for p, _ in commands(build_parser())}
    assert {"train", "partition", "evaluate", "predict", "datasets", "convert", "generate rmat",
            "generate planted", "plan", "report"} <= paths


def test_every_command_has_a_description():
    bare = [" ".join(p) or "fullgraph" for p, parser in commands(build_parser())
            if not (parser.description and parser.description.strip())]
    assert not bare, f"commands without a description: {bare}"


@pytest.mark.parametrize("path", [p for p, _ in commands(build_parser())], ids=lambda p: " ".join(p) or "fullgraph")
def test_every_flag_has_help(path):
    parser = dict(commands(build_parser()))[path]
    assert not missing_help(parser, path), f"fullgraph {' '.join(path)}: flags without help: {missing_help(parser, path)}"


def test_the_walk_catches_a_bare_flag_and_a_hidden_one():
    parser = argparse.ArgumentParser(description="x")
    sub = parser.add_subparsers().add_parser("partition", description="y")
    sub.add_argument("--bare")
    sub.add_argument("--secret", help=argparse.SUPPRESS)
    sub.add_argument("--empty", help=" ")
    assert missing_help(sub, ("partition",)) == ["--bare", "--secret (hidden)", "--empty"]
    assert [" ".join(p) for p, _ in commands(parser)] == ["", "partition"]


def test_hidden_flags_exist_where_they_are_named():
    """An entry of HIDDEN_FLAGS names a real flag of a real command (no stale allowance)."""
    parsers = {" ".join(p): parser for p, parser in commands(build_parser())}
    for command, flags in HIDDEN_FLAGS.items():
        have = {s for a in parsers[command]._actions for s in a.option_strings}
        assert set(flags) <= have, command


def test_the_data_root_reads_the_same_everywhere():
    parsers = {" ".join(p): parser for p, parser in commands(build_parser())}
    roots = {name: next(a.help for a in parser._actions if "--root" in a.option_strings)
             for name, parser in parsers.items() if any("--root" in a.option_strings for a in parser._actions)}
    assert {"train", "partition", "convert", "datasets", "evaluate", "predict"} <= set(roots)
    for name, text in roots.items():
        assert text and ROOT_DEFAULT in text, f"fullgraph {name} --root: {text!r} (expected data.datasets.ROOT_HELP)"
    assert roots["train"] == ROOT_HELP  # DataOptions.root's docstring, word for word


def test_help_needs_no_source_files(monkeypatch):
    """The help is data on the fields, not read from the source (a wheel, a zip or a frozen build has
    none): with ``inspect`` unable to find any source, every flag still has its words."""
    import inspect

    def no_source(*args, **kwargs):
        raise OSError("could not get source code")

    for name in ("getsource", "getsourcelines", "findsource"):
        monkeypatch.setattr(inspect, name, no_source)
    train = dict(commands(build_parser()))[("train",)]
    layers = next(a for a in train._actions if "--layers" in a.option_strings)
    assert layers.help.startswith("Number of graph layers")
    assert not missing_help(train, ("train",))


def test_commands_that_read_a_graph_share_the_data_options():
    """``--dataset``, ``--root``, ``--split`` read the same in every command that reads a graph (one
    declaration, ``GraphSource``), and ``--feature-norm`` where the features are normalized."""
    parsers = {" ".join(p): parser for p, parser in commands(build_parser())}
    helps = {name: {s: a.help for a in parser._actions for s in a.option_strings}
             for name, parser in parsers.items()}
    for flag, where in (("--dataset", ("train", "partition", "plan", "convert")),
                        ("--split", ("train", "partition", "plan", "convert")),
                        ("--feature-norm", ("train", "partition", "plan"))):
        texts = {helps[name][flag] for name in where}
        assert len(texts) == 1, f"{flag} reads differently across {where}: {texts}"
