"""Argument checks that raise DESIGN.md's one message form.

`` `name` must be <what>. Received: name=<value> ``
"""

import numbers


def fail(name, requirement, value, exc=ValueError, hint=""):
    message = f"`{name}` must be {requirement}. Received: {name}={value!r}"
    if hint:
        message += f". {hint}"
    raise exc(message)


def positive_int(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
        fail(name, "a positive integer", value)
    return int(value)


def non_negative_int(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        fail(name, "a non-negative integer", value)
    return int(value)


def one_of(name, value, choices):
    if value not in choices:
        fail(name, "one of " + ", ".join(repr(c) for c in choices), value)
    return value


def image_size(value, name="image_size"):
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        value = (value, value)
    try:
        height, width = value
        ok = all(isinstance(v, numbers.Integral) and not isinstance(v, bool) and v > 0
                 for v in (height, width))
    except (TypeError, ValueError):
        ok = False
    if not ok:
        fail(name, "a tuple of two positive integers (height, width)", value)
    return int(height), int(width)


def fraction(name, value):
    if (isinstance(value, bool) or not isinstance(value, numbers.Real)
            or not 0 < float(value) < 1):
        fail(name, "a float strictly between 0 and 1", value)
    return float(value)
