"""The conversation engine's rule-based reading of user turns, in Chinese and English.

Offline and deterministic: slot extraction (:func:`extract`), dates (:func:`parse_date`),
yes/no and control words (:func:`is_yes`, :func:`is_no`, :func:`control_word`), language
(:func:`detect_language`) and the session clock (:func:`now`, pinnable with RELAYSTATE_NOW).
"""

from .clock import now, today
from .dates import DateCandidate, DateMatch, find_dates, parse_date, scan_dates
from .engine import Conversation, Turn
from .extract import EXTRACTORS, Extraction, extract, extractor_of
from .intents import (
    control_word,
    detect_language,
    is_correction,
    is_no,
    is_question,
    is_yes,
)
from .numbers import NumberMatch, cn_to_number, find_numbers
from .words import DEFAULT_CUES, ROLE_CUES

__all__ = [
    "DEFAULT_CUES",
    "EXTRACTORS",
    "ROLE_CUES",
    "Conversation",
    "DateCandidate",
    "DateMatch",
    "Extraction",
    "NumberMatch",
    "Turn",
    "cn_to_number",
    "control_word",
    "detect_language",
    "extract",
    "extractor_of",
    "find_dates",
    "find_numbers",
    "is_correction",
    "is_no",
    "is_question",
    "is_yes",
    "now",
    "parse_date",
    "scan_dates",
    "today",
]
