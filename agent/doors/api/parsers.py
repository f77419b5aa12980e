"""The API's JSON parser: a body no field could hold is a 400 here, once for every view,
rather than a 500 somewhere behind it."""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Mapping
from typing import Any

from rest_framework import serializers
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

logger = logging.getLogger(__name__)

# JSON's `\ud800` escape decodes to a lone surrogate, which no UTF-8 text can hold: the
# database, the model and even the error message that quoted it would fail on it.
_SURROGATE = re.compile("[\ud800-\udfff]")
SURROGATE_MESSAGE = "contains an unpaired surrogate character"


class SafeJSONParser(JSONParser):
    """JSON as DRF reads it, less what would break the server further on: nesting past
    Python's recursion limit, and text with a lone surrogate in it. An integer past Python's
    digit limit is refused in plain words, not in the interpreter's."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            # Each such body would otherwise log a traceback thousands of frames long.
            logger.warning("API request body nested too deeply to parse")
            raise ParseError("JSON parse error - the body is nested too deeply.") from None
        except ParseError as exc:
            # Python's own words name a function of its own ("use
            # sys.set_int_max_str_digits()"), of no use to a client.
            if _too_many_digits(exc.__context__):
                limit = sys.get_int_max_str_digits()
                raise ParseError(
                    f"JSON parse error - a number in the body has more than {limit} digits."
                ) from None
            raise
        _refuse_surrogates(data)
        return data


def _too_many_digits(error: BaseException | None) -> bool:
    # `int()` of a numeral longer than the interpreter's limit, which guards it against
    # conversions of quadratic cost; no other error of the JSON reader says this.
    return isinstance(error, ValueError) and "integer string conversion" in str(error)


def _refuse_surrogates(data: Any) -> None:
    """Raise a 400 naming the top-level field that holds a lone surrogate, if one does.

    The walk is iterative: a body nested just short of the recursion limit parses, and a
    recursive walk of it would fail where the parser did not."""
    if isinstance(data, Mapping):
        for key, value in data.items():
            if _SURROGATE.search(key):
                raise ParseError(f"JSON parse error - a field name {SURROGATE_MESSAGE}.")
            if _holds_surrogate(value):
                raise serializers.ValidationError({key: [f"This value {SURROGATE_MESSAGE}."]})
    elif _holds_surrogate(data):
        raise ParseError(f"JSON parse error - the body {SURROGATE_MESSAGE}.")


def _holds_surrogate(value: Any) -> bool:
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return True
        elif isinstance(item, Mapping):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return False
