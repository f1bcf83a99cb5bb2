"""The integer expressions of `#if` / `#elif`, evaluated as C's preprocessor does.

Names left after macro expansion count as 0; `&&`, `||`, `!`, comparisons, arithmetic and
`?:`-free parentheses are supported. The text is translated to a Python expression and walked
over a whitelist of nodes, so nothing but arithmetic ever runs. Values are C's 64-bit
integers (a result wraps; a constant past 64 bits or a shift past 63 is refused), and an
expression is bounded in operators and nesting before it is parsed.
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
           ast.Mod: lambda a, b: a - b * _c_div(a, b),
           ast.Div: lambda a, b: _c_div(a, b), ast.LShift: operator.lshift,
           ast.RShift: operator.rshift, ast.BitAnd: operator.and_, ast.BitOr: operator.or_,
           ast.BitXor: operator.xor}
_COMPARE = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt,
            ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: lambda a: int(not a),
          ast.Invert: operator.invert}
MAX_OPERATORS = 256  # per expression: each is a level of the tree walked below
MAX_PARENS = 100  # nested parentheses
_BITS = 64  # intmax_t


def _wrap(value: int) -> int:
    """Return `value` as C's 64-bit two's-complement integer holds it."""
    value &= (1 << _BITS) - 1
    return value - (1 << _BITS) if value >> (_BITS - 1) else value


def _translate(expr: str, loc: Loc) -> str:
    out: list[str] = []
    pos = operators = parens = 0
    expr = expr.strip()
    while pos < len(expr):
        m = _TOKENS.match(expr, pos)
        if m is None or m.end() == pos:
            if expr[pos:].lstrip()[:1] in ("?", ":"):
                raise DatalogError("#if: the conditional operator '?:' is not supported", loc)
            raise DatalogError(f"#if: cannot read '{expr[pos:pos + 20].strip()}'", loc)
        number, name, op = m.groups()
        if number is not None:
            out.append(str(_constant(number, loc)))
        elif name is not None:
            out.append("0")  # an undefined name in #if is 0
        else:
            parens += (op == "(") - (op == ")")
            operators += op not in "()"
            if parens > MAX_PARENS or operators > MAX_OPERATORS:
                raise DatalogError(f"#if: more than {MAX_PARENS} nested parentheses or "
                                   f"{MAX_OPERATORS} operators", loc)
            out.append({"&&": " and ", "||": " or ", "!": " not "}.get(op, op))
        pos = m.end()
    if not out:
        raise DatalogError("#if needs an expression", loc)
    return "".join(out)


def _constant(number: str, loc: Loc) -> int:
    """Return an integer constant's value (decimal, 0x hex or 0 octal); past 64 bits, refused."""
    if number[1:2] in ("x", "X"):
        digits, base = number[2:], 16
    else:
        digits, base = number, 8 if number.startswith("0") else 10
    if base == 8 and not set(digits) <= set("01234567"):
        raise DatalogError(f"#if: {number} is not an octal constant", loc)
    if len(digits.lstrip("0")) > 22:  # past any 64-bit value in any base, before int() reads it
        raise DatalogError(f"#if: integer constant {number[:30]}... is too large", loc)
    value = int(digits, base)
    if value >> _BITS:
        raise DatalogError(f"#if: integer constant {number} is too large", loc)
    return _wrap(value)


def _c_div(a: int, b: int) -> int:
    """Return a / b truncated toward zero, as C does (exact: no float on the way)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _binary(op: ast.operator, left: int, right: int, loc: Loc) -> int:
    """Return `left op right` as C computes it on 64-bit integers."""
    if isinstance(op, ast.Div | ast.Mod) and right == 0:
        raise DatalogError("#if: division by zero", loc)
    if isinstance(op, ast.LShift | ast.RShift) and not 0 <= right < _BITS:
        raise DatalogError(f"#if: shift by {right} (a shift takes 0 to {_BITS - 1})", loc)
    return _wrap(_BINARY[type(op)](left, right))


def _value(node: ast.AST, loc: Loc) -> int:
    if isinstance(node, ast.Expression):
        return _value(node.body, loc)
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.BoolOp):
        values = [_value(v, loc) for v in node.values]
        return int(all(values) if isinstance(node.op, ast.And) else any(values))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _wrap(_UNARY[type(node.op)](_value(node.operand, loc)))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _binary(node.op, _value(node.left, loc), _value(node.right, loc), loc)
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
