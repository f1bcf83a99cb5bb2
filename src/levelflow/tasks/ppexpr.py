"""The integer expressions of `#if` / `#elif`, evaluated as C's preprocessor does.

Names left after macro expansion count as 0; `&&`, `||`, `!`, comparisons, arithmetic and
`?:`-free parentheses are supported. The text is translated to a Python expression and walked
over a whitelist of nodes, so nothing but arithmetic ever runs.
"""

from __future__ import annotations

import ast
import operator
import re

from levelflow.tasks.ast import Loc
from levelflow.tasks.errors import DatalogError

_TOKENS = re.compile(r"\s*(?:(0[xX][0-9a-fA-F]+|\d+)[uUlL]*|([A-Za-z_]\w*)|(&&|\|\||==|!=|<=|>=|"
                     r"<<|>>|[-+*/%()<>!~&|^]))")
_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.Mod: lambda a, b: int(__import__("math").fmod(a, b)),
           ast.Div: lambda a, b: int(a / b), ast.LShift: operator.lshift,
           ast.RShift: operator.rshift, ast.BitAnd: operator.and_, ast.BitOr: operator.or_,
           ast.BitXor: operator.xor}
_COMPARE = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt,
            ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: lambda a: int(not a),
          ast.Invert: operator.invert}


def _translate(expr: str, loc: Loc) -> str:
    out: list[str] = []
    pos = 0
    expr = expr.strip()
    while pos < len(expr):
        m = _TOKENS.match(expr, pos)
        if m is None or m.end() == pos:
            if expr[pos:].lstrip()[:1] in ("?", ":"):
                raise DatalogError("#if: the conditional operator '?:' is not supported", loc)
            raise DatalogError(f"#if: cannot read '{expr[pos:pos + 20].strip()}'", loc)
        number, name, op = m.groups()
        if number is not None:
            out.append(str(int(number, 0)) if not number.startswith("0") or number == "0"
                       or number[1] in "xX" else str(int(number, 8)))
        elif name is not None:
            out.append("0")  # an undefined name in #if is 0
        else:
            out.append({"&&": " and ", "||": " or ", "!": " not "}.get(op, op))
        pos = m.end()
    if not out:
        raise DatalogError("#if needs an expression", loc)
    return "".join(out)


def _value(node: ast.AST, loc: Loc) -> int:
    if isinstance(node, ast.Expression):
        return _value(node.body, loc)
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.BoolOp):
        values = [_value(v, loc) for v in node.values]
        return int(all(values) if isinstance(node.op, ast.And) else any(values))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_value(node.operand, loc))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _value(node.left, loc), _value(node.right, loc)
        if isinstance(node.op, ast.Div | ast.Mod) and right == 0:
            raise DatalogError("#if: division by zero", loc)
        return _BINARY[type(node.op)](left, right)
    if isinstance(node, ast.Compare):
        left = _value(node.left, loc)
        for op, comp in zip(node.ops, node.comparators, strict=True):
            right = _value(comp, loc)
            if type(op) not in _COMPARE or not _COMPARE[type(op)](left, right):
                return 0
            left = right
        return 1
    raise DatalogError(f"#if: '{ast.unparse(node)}' is not supported (integers, defined(), "
                       "arithmetic, comparisons, && || !)", loc)


def evaluate_condition(expr: str, loc: Loc) -> bool:
    """Return whether the `#if` expression `expr` (macros already expanded) is non-zero."""
    text = _translate(expr, loc)
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        raise DatalogError(f"#if: cannot read '{expr.strip()}'", loc) from None
    return _value(tree, loc) != 0
