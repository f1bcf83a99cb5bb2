"""Directives with no rule of their own: `.limitsize`, `.pragma`, `.plan`.

`.limitsize r(n=N)` is kept on the Program for the engine, which keeps the N smallest tuples of
r's fixpoint from scratch and after every epoch (engine/limitsize.py). Soufflé's pragmas set
its command-line options and `.plan` orders a rule's joins: levelflow has neither those options
nor user join orders, so both are accepted and named in one note the CLI prints once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from levelflow.tasks.ast import IO, Loc

if TYPE_CHECKING:
    from levelflow.tasks.parser_protocol import ParsedOut as Parsed
    from levelflow.tasks.strata import Precedence
    from levelflow.tasks.typecheck import Report


def check_limits(ios: list[IO], prec: Precedence, report: Report
                 ) -> tuple[tuple[str, int, Loc], ...]:
    """Return (relation, N, where) per limited relation, reporting a bad option or relation."""
    limits: dict[str, tuple[str, int, Loc]] = {}
    for io in ios:
        if io.relation not in prec.ids:
            report(io.loc, f"relation '{io.relation}' is not declared", needs_rest=True)
            continue
        keys = [key for key, _ in io.options]
        n = io.option("n")
        if keys != ["n"] or n is None or not n.isdigit():
            report(io.loc, f".limitsize {io.relation} takes one option n=N with N a "
                           "non-negative integer")
            continue
        members = prec.comps[prec.comp_of[prec.ids[io.relation]]]
        if len(members) > 1:
            # The engine cuts a relation once its task is done; in a cycle with others, they
            # would have read the uncut relation, which Soufflé's stopped loop never does.
            report(io.loc, f"'.limitsize' of '{io.relation}', which is in a recursive cycle with "
                           "other relations, is not supported")
            continue
        if io.relation not in limits or int(n) < limits[io.relation][1]:
            limits[io.relation] = (io.relation, int(n), io.loc)
    return tuple(limits.values())


def ignored_note(parsed: Parsed, file: str) -> tuple[str, ...]:
    """Return the one note naming the pragmas and plans levelflow accepts without effect."""
    parts = [f'.pragma "{key}"' + (f' "{value}"' if value else "")
             for key, value, _ in parsed.pragmas]
    if parsed.plans:
        parts.append(f"{len(parsed.plans)} .plan clause{'s' if len(parsed.plans) > 1 else ''}")
    if not parts:
        return ()
    return (f"{file}: note: ignored {', '.join(parts)} (levelflow has no such options and "
            "orders joins itself)",)


# -- parsing: functions of the parser `p` (tasks/parser.py) -----------------------------------

def parse_pragma(p) -> None:
    """Parse `.pragma "key" ["value"]`."""
    start = p.take()
    if p.tok.kind != "string":
        raise p.expected("a pragma name in quotes")
    key = p.take().value
    value = p.take().value if p.tok.kind == "string" else ""
    p.out.pragmas.append((key, value, p.loc(start)))


def parse_plan(p) -> None:
    """Parse `.plan 0:(1,2), 1:(2,1)`: per version of a rule, the order of its atoms."""
    start = p.take()
    while True:
        if p.tok.kind != "int":
            raise p.expected("a rule version number in the .plan")
        p.take()
        p.expect(":")
        p.expect("(")
        while p.tok.kind == "int":
            p.take()
            if not p.at(","):
                break
            p.take()
        p.expect(")")
        if not p.at(","):
            break
        p.take()
    p.out.plans.append(p.loc(start))
