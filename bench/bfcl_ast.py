"""The Berkeley Function Calling Leaderboard's AST rules, written anew for ``bench/bfcl.py``.

A reply passes when its calls match one of the possible answers: the right count of calls (one for the
simple and multiple categories, every expected call for the parallel ones, in any order), the right function,
every required parameter, no parameter the function does not have or the answer does not list, values of the
declared type (an integer stands for a float; a value of the answer's own type stands for a variable), strings
equal once case, spaces and ``,./-_*^`` are ignored, lists and dicts compared element by element, and every
parameter left out marked optional in the answer (``""`` among its possible values).
"""

from __future__ import annotations

import re
from typing import Any

PYTHON_TYPES: dict[str, type] = {
    "integer": int,
    "number": float,
    "float": float,
    "string": str,
    "boolean": bool,
    "bool": bool,
    "array": list,
    "list": list,
    "tuple": list,
    "dict": dict,
    "object": dict,
    "any": str,
}
_NOISE = re.compile(r"[ ,./\-_*^]")


def same_name(written: str, expected: str) -> bool:
    """Function names match; a dot may be written as an underscore (OpenAI-style names have no dots)."""
    return written == expected or written.replace(".", "_") == expected.replace(".", "_")


def _plain(value: Any) -> Any:
    """A string as compared: lower case, without spaces and ``,./-_*^``, single quotes as double."""
    return _NOISE.sub("", value).lower().replace("'", '"') if isinstance(value, str) else value


def _answer_type(possible: list[Any]) -> type | None:
    return next((type(v) for v in possible if v != ""), None)


def _dict_ok(value: dict, possible: list[Any]) -> bool:
    for option in possible:
        if option == "" or not isinstance(option, dict):
            continue
        if all(k in option and _plain(v) in [_plain(x) for x in option[k]] for k, v in value.items()) and all(
            k in value or "" in vals for k, vals in option.items()
        ):
            return True
    return False


def _value_ok(value: Any, spec: dict[str, Any], possible: list[Any]) -> bool:
    declared = spec.get("type", "string")
    wanted = PYTHON_TYPES.get(declared, str)
    if wanted is float and type(value) is int:
        value = float(value)
    variable = type(value) is not wanted and type(value) is _answer_type(possible)
    if type(value) is not wanted and not variable:
        return False
    if variable:
        return value in possible
    item = PYTHON_TYPES.get(spec.get("items", {}).get("type", ""), None) if wanted is list else None
    if item is not None and not any(
        isinstance(option, list) and all(type(v) is item or (item is float and type(v) is int) for v in value)
        for option in possible
    ):
        return False
    if wanted is dict:
        return _dict_ok(value, possible)
    if wanted is list and item is dict:
        return any(
            isinstance(option, list)
            and len(option) == len(value)
            and all(_dict_ok(v, [o]) for v, o in zip(value, option, strict=True))
            for option in possible
        )
    if wanted is str:
        return _plain(value) in [_plain(p) for p in possible]
    if wanted is list:
        return [_plain(v) for v in value] in [[_plain(x) for x in p] for p in possible if isinstance(p, list)]
    return value in possible


def call_ok(call: dict[str, Any], function: dict[str, Any], answer: dict[str, list[Any]]) -> bool:
    """One call against one function's description and its possible answer ``{param: [values]}``."""
    if not same_name(call["name"], function["name"]):
        return False
    schema = function["parameters"]
    properties, args = schema.get("properties", {}), call["args"]
    if any(p not in args for p in schema.get("required", [])):
        return False
    for name, value in args.items():
        if name not in properties or name not in answer:
            return False
        if not _value_ok(value, properties[name], answer[name]):
            return False
    return all(name in args or "" in values for name, values in answer.items())


def reply_ok(calls: list[dict[str, Any]], functions: list[dict], truth: list[dict]) -> bool:
    """A reply's calls against a question's ground truth: as many calls as expected, each matched once.

    One rule serves every category: simple and multiple questions expect one call, parallel ones several.
    """
    if len(calls) != len(truth):
        return False
    unmatched = list(range(len(calls)))
    for expected in truth:
        ((name, answer),) = expected.items()
        function = next((f for f in functions if f["name"] == name), None)
        if function is None:
            return False
        hit = next((i for i in unmatched if call_ok(calls[i], function, answer)), None)
        if hit is None:
            return False
        unmatched.remove(hit)
    return True
