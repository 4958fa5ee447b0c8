"""The ``calculate`` tool's arithmetic: a small evaluator whose work is bounded before it is done.

Python's own ``eval`` is out of the question, and even plain integer arithmetic is not safe: ``9**99`` is
cheap, ``((9**99)**99)**99`` is not, and a big-integer power holds the interpreter lock until it is done,
so no timeout in the same process can stop it. Every operation here is priced before it runs: the
expression's length and nesting are capped, and an integer power or product whose result would exceed
``MAX_BITS`` is refused instead of computed. Float arithmetic is constant-time (it overflows to an error or
to ``inf``). This module imports nothing heavy, because worker processes import it to evaluate.
"""

from __future__ import annotations

import ast
import math
import operator
from typing import Any

MAX_EXPRESSION_CHARS = 1000
MAX_DEPTH = 40
#: About 3000 decimal digits: far beyond any everyday sum, and printable (Python refuses to print ints with
#: more than 4300 digits).
MAX_BITS = 10_000

_BINARY: dict[type, Any] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type, Any] = {ast.USub: operator.neg, ast.UAdd: operator.pos}
#: Functions a model writes of itself ("sqrt(1764)": the 1.5B did, twice, and was refused): each constant-time
#: on the bounded numbers the operators leave, with ``round``'s places bounded too. Not in the tool's
#: description, so the catalog and the tool choice read what they read before.
_FUNCTIONS: dict[str, Any] = {"sqrt": math.sqrt, "abs": abs, "round": round, "min": min, "max": max}
#: Most decimal places ``round`` takes either way: ``round(10**3000, -10**6)`` would build a huge power.
MAX_PLACES = 15


class CalculationRefused(ValueError):
    """An expression that is not plain arithmetic, or whose work would exceed the bounds."""


def _too_big(bits: int) -> CalculationRefused:
    return CalculationRefused(
        f"an intermediate result would have about {bits} bits; the limit is {MAX_BITS} (about 3000 digits)"
    )


def _price(op: ast.operator, left: float, right: float) -> None:
    """Refuse an integer power or product whose result would be larger than ``MAX_BITS``."""
    if not (isinstance(left, int) and isinstance(right, int)):
        return
    if isinstance(op, ast.Pow) and right > 0 and abs(left) > 1:
        bits = (abs(left).bit_length() - 1) * right + 1  # a lower bound of the result's size
        if bits > MAX_BITS:
            raise _too_big(bits)
    elif isinstance(op, ast.Mult):
        bits = left.bit_length() + right.bit_length()
        if bits > MAX_BITS + 1:
            raise _too_big(bits)


def _evaluate(node: ast.AST, depth: int = 0) -> float:
    if depth > MAX_DEPTH:
        raise CalculationRefused(f"the expression is nested more than {MAX_DEPTH} levels deep")
    if isinstance(node, ast.Expression):
        return _evaluate(node.body, depth + 1)
    if (
        isinstance(node, ast.Constant)
        and isinstance(node.value, int | float)
        and type(node.value) is not bool
    ):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left, depth + 1), _evaluate(node.right, depth + 1)
        _price(node.op, left, right)
        return _BINARY[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_evaluate(node.operand, depth + 1))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS:
        return _call(node.func.id, [_evaluate(a, depth + 1) for a in node.args], node)
    raise CalculationRefused(f"unsupported expression element: {ast.dump(node)[:40]}")


def _call(name: str, args: list[float], node: ast.Call) -> float:
    """One of ``_FUNCTIONS`` on evaluated arguments, with its arity and ``round``'s places checked."""
    arity = {"sqrt": (1, 1), "abs": (1, 1), "round": (1, 2)}.get(name, (1, MAX_DEPTH))
    if node.keywords or not arity[0] <= len(args) <= arity[1]:
        raise CalculationRefused(f"{name}() takes {arity[0]} to {arity[1]} plain argument(s)")
    if name == "round" and len(args) == 2 and not (isinstance(args[1], int) and abs(args[1]) <= MAX_PLACES):
        raise CalculationRefused(f"round() takes a whole number of places up to {MAX_PLACES}")
    try:
        return _FUNCTIONS[name](*args)
    except (ValueError, OverflowError) as exc:
        raise CalculationRefused(f"{name}{tuple(args)}: {exc}") from exc


def calculate(expression: str) -> str:
    """Evaluate an arithmetic expression with + - * / // % ** and parentheses, e.g. "(3 + 4) * 2"."""
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise CalculationRefused(
            f"the expression has {len(expression)} characters; the limit is {MAX_EXPRESSION_CHARS}"
        )
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except (SyntaxError, MemoryError, RecursionError) as exc:
        raise CalculationRefused(f"not an arithmetic expression: {exc}") from exc
    return written(_evaluate(tree))


def written(value: float) -> str:
    """A result as a person writes it: ``50`` for ``400 / 8``, ``490`` for ``(49 / 10) * 100``.

    The model copies a tool's result into its answer and notes as it reads it: given ``490.00000000000006``
    (binary floating point's error), the 1.5B saved a note saying the price "is 490.00000000000006". Twelve
    significant digits drop that error and keep every figure of everyday arithmetic; integers are exact.
    """
    if isinstance(value, int) or not math.isfinite(value):
        return str(value)
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.12g}"
