"""``Command``: one ``fullgraph`` subcommand as data — its name, its help, the options classes whose
fields are its flags, and the function that runs it — and the parser built from it.

Every command is declared the same way: its flags are the typed fields of options classes
(``fullgraph.cli.options``, and ``TrainConfig``'s sections for ``train``), each field's help kept
on the field (``fullgraph.options.opt``). ``fullgraph.cli`` lists the commands in one table and
dispatches through it, so adding a command is one options class, one function and one row.
"""

from __future__ import annotations

import argparse
import difflib
from dataclasses import dataclass
from typing import Callable

from fullgraph.errors import InputError
from fullgraph.options import Option, fields_as_options, key_value, options_of

__all__ = ["Command", "Parser", "add_command", "add_flags", "flags_of"]


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (and exit 2), like every other input error."""

    def error(self, message: str):  # noqa: D401 - argparse's hook
        where = self.prog.removeprefix("fullgraph").strip()  # the command line prints "fullgraph: error:"
        raise InputError((f"{where}: " if where else "") + message + self._nearest(message))

    def _nearest(self, message: str) -> str:
        """For a mistyped flag, the flags it is closest to (any command's: an unknown flag is reported
        by the top-level parser, which does not know the command it was meant for)."""
        if "unrecognized arguments:" not in message:
            return ""
        known, owners, todo = set(), {}, [(self, None)]
        while todo:
            parser, name = todo.pop()
            for action in parser._actions:
                flags = [o for o in action.option_strings if o.startswith("--")]
                known.update(flags)
                for flag in flags if name else ():
                    owners.setdefault(flag, []).append(name)
                if isinstance(action, argparse._SubParsersAction):
                    todo += list((sub, cmd) for cmd, sub in action.choices.items())
        unknown = [w.split("=")[0] for w in message.split(":", 1)[1].split() if w.startswith("--")]
        hints = []
        for w in unknown:
            if w in owners:  # a real flag of other commands: say whose, not "did you mean" itself
                hints.append(f"{w} is an option of {' and '.join(sorted(set(owners[w])))} only")
                continue
            close = difflib.get_close_matches(w, sorted(known), n=2, cutoff=0.75)
            if close:
                hints.append(f"{w}: did you mean {' or '.join(close)}?")
        return f" ({'; '.join(hints)})" if hints else ""


@dataclass(frozen=True)
class Command:
    """One subcommand.

    Attributes:
        name: what follows ``fullgraph``.
        help: one line for ``fullgraph --help``.
        description: what ``fullgraph NAME --help`` opens with.
        options: options classes whose fields are its flags, in this order.
        run: ``run(args, argv)`` -> exit status (``argv``: the command line, for a launcher that
            restarts the command in its ranks).
        config: ``train``'s ``TrainConfig``: its sections become ``--help`` groups, and a flag left out
            keeps the value from ``--config`` or the default (so only what the user typed overrides
            the file).
        kinds: subcommands of their own (``generate rmat``), each with its options; ``run`` reads
            ``args.kind``.
        times_kernels: the command's speed is its point (training, and the plan, which times the
            layers as training runs them): it keeps glibc's own allocation threshold unless
            ``--release-memory`` asks otherwise, since a fixed 1 MiB threshold page-faults every large
            tensor in afresh and would slow the very kernels it times.
    """

    name: str
    help: str
    description: str
    options: tuple[type, ...] = ()
    run: Callable[[argparse.Namespace, list[str]], int] | None = None
    config: type | None = None
    kinds: tuple[Command, ...] = ()
    times_kernels: bool = False


def flags_of(command: Command) -> list[Option]:
    """``command``'s options, its configuration's and its kinds' (for listings: the hidden flags)."""
    out = [o for kind in command.options for o in fields_as_options(kind)]
    out += options_of(command.config) if command.config is not None else []
    return out + [o for kind in command.kinds for o in flags_of(kind)]


def add_command(sub, command: Command) -> None:
    """``command``'s parser, on the subparsers ``sub`` of its parent."""
    parser = sub.add_parser(command.name, help=command.help, description=command.description)
    for kind in command.options:
        add_flags(parser, fields_as_options(kind))
    if command.config is not None:
        groups: dict[str, argparse._ArgumentGroup] = {}
        for opt in options_of(command.config):
            group = groups.get(opt.section) or groups.setdefault(opt.section, parser.add_argument_group(opt.section))
            add_flags(group, [opt], keep_unset=True)
    if command.kinds:
        kinds = parser.add_subparsers(dest="kind", required=True, parser_class=Parser)
        for kind in command.kinds:
            add_command(kinds, kind)


def add_flags(parser, opts: list[Option], keep_unset: bool = False) -> None:
    """One flag per option, made from its field: its type, its help (with the default), its choices.
    ``keep_unset``: a flag not given leaves no value (``SUPPRESS``), and the choices are left to the
    configuration to check, with the message a TOML file's value gets."""
    for opt in opts:
        default = argparse.SUPPRESS if keep_unset else opt.default
        if opt.hidden:
            parser.add_argument(opt.flag, type=opt.type, default=default, help=argparse.SUPPRESS)
        elif opt.positional:
            parser.add_argument(opt.name, nargs="+", metavar=opt.metavar, help=_help(opt))
        elif opt.type is dict:  # one key=value per flag, repeatable
            parser.add_argument(opt.flag, type=_key_value, action="append", dest=opt.name,
                                default=argparse.SUPPRESS if keep_unset else [], help=_help(opt), metavar="KEY=VALUE")
        elif opt.type is bool:
            parser.add_argument(opt.flag, action=argparse.BooleanOptionalAction, default=default, help=_help(opt))
        else:
            checked = {} if keep_unset or not opt.choices else {"choices": opt.choices}
            parser.add_argument(opt.flag, type=opt.type, default=default, help=_help(opt), metavar=_metavar(opt),
                                required=opt.required, **checked)


def _help(opt: Option) -> str:
    shown = opt.type not in (bool, dict) and opt.default not in (None, "") and not opt.required
    return (opt.doc + (f" (default {opt.default})" if shown else "")).replace("%", "%%")


def _metavar(opt: Option) -> str:
    if opt.metavar:
        return opt.metavar
    if opt.name == "model":  # a built-in name, or a user's builder
        from fullgraph.models import MODELS

        return "{" + ",".join(MODELS) + "}|FILE.py:FUNCTION"
    return "{" + ",".join(opt.choices) + "}" if opt.choices else opt.name.upper()


def _key_value(text: str) -> tuple[str, object]:
    try:
        return key_value(text)
    except InputError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
