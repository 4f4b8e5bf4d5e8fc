"""Hostile values for the bad-input property tests, each marked with whether the hub must refuse it.

Refused wherever it appears (a 4xx or an error frame, and nothing stored changes): a text holding
U+0000 or a lone surrogate, in a value or a key, and a JSON number that is not finite. Tolerated:
over-long texts, huge integers and values of the wrong type; the hub may take or refuse them, but
never with a server error, and a refusal changes nothing.
"""

import math
from dataclasses import dataclass

from hypothesis import strategies as st


@dataclass(frozen=True)
class Hostile:
    value: object
    refused: bool  # the hub must refuse the request or frame that carries it, wherever it is

    def __repr__(self) -> str:  # hypothesis prints it when an example fails: keep it readable
        text = repr(self.value)
        shown = text if len(text) <= 80 else f"{text[:60]}...({len(text)} chars)"
        return f"Hostile({shown}, refused={self.refused})"


PLAIN = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=5)
WITH_NUL = st.builds(lambda before, after: f"{before}\x00{after}", PLAIN, PLAIN)
WITH_LONE_SURROGATE = st.builds(lambda before, code, after: f"{before}{chr(code)}{after}",
                                PLAIN, st.integers(0xD800, 0xDFFF), PLAIN)
NON_FINITE = st.sampled_from([math.nan, math.inf, -math.inf])
HUGE_INTEGERS = st.sampled_from([2**31, 2**53 + 1, 2**63, 2**64, 10**30, -(2**63) - 1])
# Column and field limits of the hub sit at 100, 200, 300, 500, 1000, 10 000 and 100 000 characters.
LENGTHS = (100, 101, 200, 201, 256, 300, 301, 500, 501, 1001, 10_001, 100_001)
# Texts a number or an id is parsed from.
ODD_NUMBER_TEXTS = ("NaN", "Infinity", "-Infinity", "1e999", "-1", "0", "", " ", "0x10", "1.5",
                    str(2**63), str(10**30), "9" * 5000, "null", "[]")


def over_long(lengths=LENGTHS):
    """Texts of exactly those lengths, of one-, two- or four-byte characters (the longest of one-byte
    ones only, to keep the run short)."""
    return st.sampled_from(sorted(set(lengths))).flatmap(
        lambda n: st.sampled_from("xé😀" if n <= 10_001 else "x").map(lambda unit: unit * n))


def hostile_text(lengths=LENGTHS):
    """What a path segment, a query value or a form field can carry (no lone surrogate: a URL or
    a form is UTF-8, where none can be written)."""
    return st.one_of(
        WITH_NUL.map(lambda text: Hostile(text, True)),
        over_long(lengths).map(lambda text: Hostile(text, False)),
        st.sampled_from(ODD_NUMBER_TEXTS).map(lambda text: Hostile(text, False)),
    )


REFUSED_TEXT = st.one_of(WITH_NUL, WITH_LONE_SURROGATE)
REFUSED_JSON = st.one_of(
    REFUSED_TEXT, NON_FINITE,
    st.builds(lambda key: {key: "value"}, REFUSED_TEXT),  # in a key
    st.builds(lambda inner: [{"deep": [inner]}], st.one_of(REFUSED_TEXT, NON_FINITE)),  # nested
)
WRONG_TYPES = st.sampled_from([None, True, False, 0, -1, 1.5, "", [], {}, ["x"], {"x": "y"}, [[[]]]])


def hostile_json(lengths=LENGTHS):
    """What a JSON body or a websocket frame can carry, in any field."""
    return st.one_of(
        REFUSED_JSON.map(lambda value: Hostile(value, True)),
        over_long(lengths).map(lambda text: Hostile(text, False)),
        HUGE_INTEGERS.map(lambda number: Hostile(number, False)),
        WRONG_TYPES.map(lambda value: Hostile(value, False)),
    )


def refused_key():
    """A key no object may have."""
    return REFUSED_TEXT.map(lambda key: Hostile(key, True))
