"""``explain [CODE]``: a rule's documentation page in the terminal, or the list of rules.

The page is the rule reference's page (:mod:`warptrace.analysis.ruledocs`), rendered from the
rule module's docstring: the same text as the documentation site, as plain Markdown.
"""

from __future__ import annotations

import argparse

from warptrace.commands.base import Command, CommandParser, write_stdout
from warptrace.errors import UsageError


class ExplainCommand(Command):
    name = "explain"
    help = "what a rule code means: its documentation page (no code: the list of rules)"
    exit_status = ("0 shown, 2 unknown code",)

    def prepare_parser(self, parser: CommandParser) -> None:
        parser.add_argument("code", metavar="CODE", nargs="?", help="a rule code such as WT403")

    def run(self, args: argparse.Namespace, parser: CommandParser) -> int:
        from warptrace.analysis import ruledocs

        if args.code is None:
            write_stdout(
                ruledocs.listing()
                + f"\n`{parser.prog} CODE` for a rule's page; all of them: {ruledocs.DOCS_URL}rules/"
            )
            return 0
        code = args.code.strip().upper()
        if code not in ruledocs.rule_docs():
            raise UsageError(f"explain: unknown rule code {args.code!r} (`{parser.prog}` lists the rules)")
        write_stdout(ruledocs.render(code) + f"\nOnline: {ruledocs.rule_url(code)}")
        return 0
