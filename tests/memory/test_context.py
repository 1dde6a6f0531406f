"""The context builder and its token counters: the budget is never exceeded (hypothesis, the
real cl100k_base counter), every candidate is explained once, copies across layers count
once, critical items open and close the prompt, summaries and the turns they cite are not
both kept, output is deterministic; cl100k_base loads with the network refused."""

from __future__ import annotations

import hashlib
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from relaystate.memory import tokens
from relaystate.memory.context import LAYERS, Candidate, Context, build
from relaystate.memory.tokens import (
    ApproxCounter,
    TiktokenCounter,
    TokenCounter,
    TokenizerMissing,
    default_counter,
    tiktoken_counter,
)

CL100K: TiktokenCounter = tiktoken_counter()

ENGLISH = [
    "Caroline: I went to a LGBTQ support group yesterday and it was so powerful.",
    "Melanie: That's awesome! What did you learn there?",
    "assistant: Your flight from Paris to Tokyo leaves at 09:40 on 12 March 2025.",
    "user: Can you move my seat to 12A, next to the window?",
    "The quarterly report shows revenue grew 14.5% year over year, to $3,482,000.",
    "Jon: Agreed!",
    "Nate: Bye Joanna!",
    "The internationalization of the infrastructure was unexpectedly straightforward.",
    "user: ok",
    "Remember: the customer's account number is 4481-2209-7735; never read it aloud.",
]
CHINESE = [
    "帮我订一张明天去上海的机票，靠窗的座位。",
    "用户想在国庆节期间去北京旅游，预算大约五千元。",
    "我的订单号是 20241001，请帮我查一下物流。",
    "好的，已经为您预订了下周五下午三点的会议室。",
    "請幫我把航班改到後天早上，經濟艙就可以。",
    "他说他下个月要搬到深圳，新地址还没有确定。",
    "元旦那天酒店的价格比平时贵了一倍。",
    "这个问题我们需要和技术团队一起讨论之后再答复您。",
]


def turn(number: int, text: str, score: float = 0.0, critical: bool = False) -> Candidate:
    return Candidate(f"turn:{number}", "recent", text, score, critical, time=float(number))


def reasons(ctx: Context) -> dict[str, str]:
    """Reason by "id/layer" (an id may come from two layers)."""
    return {f"{d.id}/{d.layer}": d.reason for d in ctx.explanation}


def booking() -> list[Candidate]:
    """A turn of a flight booking, with every layer and some copies."""
    return [
        Candidate("turn:9", "recent", "user: friday, please", 0.2, critical=True, time=9),
        Candidate("task:state", "task", "Book a flight Paris -> Tokyo; date: missing", 1.0, True),
        Candidate("entity:seat", "entity", "seat: 12A", 0.9, critical=True),
        Candidate("entity:budget", "entity", "budget: 900 EUR", 0.4),
        Candidate(
            "summary:1", "summary", "The user wants to fly to Tokyo.", 0.6, cites=("turn:1",)
        ),
        Candidate("memory:doc-5", "longterm", "The user prefers window seats.", 0.8),
        Candidate("memory:doc-6", "longterm", "the user prefers  window seats", 0.7),
        Candidate("turn:7", "longterm", "user: I fly to Tokyo next week", 0.75),
        Candidate("graph:tokyo", "graph", "Tokyo is in Japan", 0.3),
        turn(7, "user: I fly to Tokyo next week", score=0.1),
        turn(8, "assistant: Which day?", score=0.1),
    ]


# -- the budget -------------------------------------------------------------------------

_TEXT = st.one_of(
    st.sampled_from(ENGLISH + CHINESE + ["", "  ", "\n", "yes", "user: yes"]),
    st.text(max_size=80),
    st.text(alphabet=" \n\t.!?-:#ab中文", max_size=40),
)


@st.composite
def candidates(draw: st.DrawFn) -> list[Candidate]:
    found = []
    for _ in range(draw(st.integers(0, 30))):
        layer = draw(st.sampled_from(LAYERS))
        number = draw(st.integers(0, 12))
        found.append(
            Candidate(
                id=draw(st.sampled_from([f"turn:{number}", f"{layer}:{number}", "task:state"])),
                layer=layer,
                text=draw(_TEXT),
                score=draw(st.floats(-5, 5, allow_nan=False)),
                critical=draw(st.booleans()),
                cites=tuple(draw(st.lists(st.sampled_from([f"turn:{n}" for n in range(12)]))))
                if layer == "summary"
                else (),
                time=draw(st.none() | st.floats(0, 1e6)),
            )
        )
    return found


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(found=candidates(), budget=st.integers(0, 400), approx=st.booleans())
def test_the_budget_is_never_exceeded_and_every_candidate_is_explained(
    found: list[Candidate], budget: int, approx: bool
) -> None:
    counter: TokenCounter = ApproxCounter() if approx else CL100K
    ctx = build(found, budget=budget, counter=counter)
    assert counter.count(ctx.prompt) == ctx.tokens <= budget == ctx.budget
    assert [(d.id, d.layer, d.score) for d in ctx.explanation] == [
        (c.id, c.layer, c.score) for c in found
    ]
    for decision, candidate in zip(ctx.explanation, found, strict=True):
        assert decision.reason.startswith("kept: " if decision.kept else "dropped: ")
        assert decision.tokens == counter.count(candidate.text.strip())
        if decision.kept:
            assert candidate.text.strip() in ctx.prompt
    assert (ctx.prompt == "") == (not ctx.kept)


def test_a_window_gives_80_percent_by_default_and_arguments_are_checked() -> None:
    assert build([], window=8192, counter=CL100K).budget == 6553
    assert build([], window=1000, budget_share=0.5, counter=CL100K).budget == 500
    with pytest.raises(ValueError, match="either a window or a budget"):
        build([], counter=CL100K)
    with pytest.raises(ValueError, match="either a window or a budget"):
        build([], window=100, budget=10, counter=CL100K)
    with pytest.raises(ValueError, match="budget must be >= 0"):
        build([], budget=-1, counter=CL100K)
    with pytest.raises(ValueError, match="layer 'memory'"):
        build([Candidate("x", "memory", "hi")], budget=10, counter=CL100K)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not a finite number"):
        build([Candidate("x", "graph", "hi", float("nan"))], budget=10, counter=CL100K)


def test_nothing_in_gives_an_empty_prompt() -> None:
    ctx = build([], budget=100, counter=CL100K)
    assert (ctx.prompt, ctx.tokens, ctx.budget, ctx.explanation) == ("", 0, 100, [])


def test_a_full_turn_keeps_the_best_and_explains_the_rest() -> None:
    ctx = build(booking(), budget=1000, counter=CL100K)
    assert ctx.prompt == textwrap.dedent(
        """\
        Task state:
        Book a flight Paris -> Tokyo; date: missing

        Key entities:
        seat: 12A
        budget: 900 EUR

        Earlier in the conversation:
        The user wants to fly to Tokyo.

        Related facts:
        Tokyo is in Japan

        From memory:
        The user prefers window seats.

        Recent turns:
        user: I fly to Tokyo next week
        assistant: Which day?
        user: friday, please
        """
    )
    assert reasons(ctx) == {
        "turn:9/recent": "kept: critical",
        "task:state/task": "kept: critical",
        "entity:seat/entity": "kept: critical",
        "entity:budget/entity": "kept: rank 7",
        "summary:1/summary": "kept: rank 6",
        "memory:doc-5/longterm": "kept: rank 4",
        "memory:doc-6/longterm": "dropped: near-duplicate of memory:doc-5 (longterm)",
        "turn:7/longterm": "dropped: duplicate of turn:7 (recent)",
        "graph:tokyo/graph": "kept: rank 8",
        "turn:7/recent": "kept: rank 5",
        "turn:8/recent": "kept: rank 9",
    }
    assert ctx.tokens == CL100K.count(ctx.prompt) < 1000


# -- dedupe -----------------------------------------------------------------------------


def test_the_same_turn_from_long_term_search_and_recent_turns_is_kept_once_in_order() -> None:
    found = [
        turn(1, "user: I need a hotel in Kyoto"),
        Candidate("turn:2", "longterm", "assistant: For which nights?", score=0.99),
        turn(2, "assistant: For which nights?"),
        turn(3, "user: the 3rd to the 5th", critical=True),
    ]
    ctx = build(found, budget=500, counter=CL100K)
    assert ctx.prompt.count("For which nights?") == 1
    assert ctx.prompt.endswith(
        "Recent turns:\nuser: I need a hotel in Kyoto\nassistant: For which nights?\n"
        "user: the 3rd to the 5th\n"
    )
    assert "From memory" not in ctx.prompt
    assert reasons(ctx)["turn:2/longterm"] == "dropped: duplicate of turn:2 (recent)"
    # the recent copy is ranked as its best copy: above turn:1, whose score is the same 0
    assert reasons(ctx)["turn:2/recent"] == "kept: rank 2"


def test_copies_across_layers_count_once_and_near_copies_too() -> None:
    found = [
        Candidate("memory:a", "longterm", "Alice is allergic to peanuts.", 0.9),
        Candidate("graph:a", "graph", "  alice is ALLERGIC to peanuts.  ", 0.5),
        Candidate("entity:a", "entity", "Alice is allergic to peanuts!", 0.4),
        Candidate("memory:b", "longterm", "Alice is allergic to cats.", 0.3),
        Candidate("summary:1", "summary", "alice  is allergic to peanuts.", 0.95),
    ]
    ctx = build(found, budget=500, counter=CL100K)
    assert reasons(ctx) == {
        "memory:a/longterm": "dropped: duplicate of summary:1 (summary)",
        "graph:a/graph": "dropped: duplicate of summary:1 (summary)",
        "entity:a/entity": "dropped: near-duplicate of summary:1 (summary)",
        "memory:b/longterm": "kept: rank 2",
        "summary:1/summary": "kept: rank 1",
    }
    assert ctx.prompt.lower().count("peanuts") == 1


def test_the_same_words_said_twice_are_two_turns() -> None:
    found = [
        turn(1, "user: yes"),
        turn(2, "assistant: Window seat?"),
        turn(3, "user: yes", critical=True),
        Candidate("memory:old", "longterm", "user: yes", 0.5),
    ]
    ctx = build(found, budget=500, counter=CL100K)
    assert ctx.kept == ["turn:1", "turn:2", "turn:3"]
    assert ctx.prompt == "Recent turns:\nuser: yes\nassistant: Window seat?\nuser: yes\n"
    assert reasons(ctx)["memory:old/longterm"].startswith("dropped: duplicate of turn:")


def test_near_duplicate_threshold_is_a_parameter() -> None:
    found = [
        Candidate("a", "longterm", "The meeting moved to Thursday at 3pm.", 0.9),
        Candidate("b", "longterm", "The meeting moved to Thursday at 4pm.", 0.8),
    ]
    assert build(found, budget=500, counter=CL100K).kept == ["a", "b"]
    loose = build(found, budget=500, counter=CL100K, near_duplicate=0.7)
    assert loose.kept == ["a"]
    assert loose.explanation[1].reason == "dropped: near-duplicate of a (longterm)"


# -- summaries and the turns they cite --------------------------------------------------


def test_a_summary_whose_turns_are_kept_verbatim_is_dropped() -> None:
    found = [
        turn(1, "user: I want to go to Rome", score=0.5),
        turn(2, "assistant: When?", score=0.5),
        Candidate("summary:7", "summary", "User wants Rome.", 0.4, cites=("turn:1", "turn:2")),
    ]
    ctx = build(found, budget=500, counter=CL100K)
    assert ctx.kept == ["turn:1", "turn:2"]
    assert ctx.explanation[2].reason == "dropped: its turns are kept verbatim (turn:1, turn:2)"


def test_a_summary_is_kept_when_its_turns_are_not() -> None:
    long_turn = "user: " + " ".join(["I would like to go to Rome in spring"] * 20)
    found = [
        turn(1, long_turn, score=0.5),
        turn(2, "assistant: When?", score=0.5),
        Candidate("summary:7", "summary", "User wants Rome.", 0.4, cites=("turn:1", "turn:2")),
    ]
    ctx = build(found, budget=40, counter=CL100K)
    assert ctx.kept == ["turn:2", "summary:7"]
    assert ctx.explanation[0].reason.startswith("dropped: over budget (needs ")
    # and when the summary outranks them, it covers the turns, which are then dropped
    ranked = [
        *found[:2],
        Candidate("summary:7", "summary", "User wants Rome.", 0.9, cites=("turn:1", "turn:2")),
    ]
    ctx = build(ranked, budget=500, counter=CL100K)
    assert ctx.kept == ["summary:7"]
    assert [d.reason for d in ctx.explanation[:2]] == [
        "dropped: covered by summary:7 which is kept",
        "dropped: covered by summary:7 which is kept",
    ]


def test_a_critical_turn_is_kept_even_when_a_summary_covers_it() -> None:
    found = [
        Candidate("summary:7", "summary", "User wants Rome.", 0.9, cites=("turn:1", "turn:2")),
        turn(1, "user: I want to go to Rome", score=0.1),
        turn(2, "user: in May", critical=True),
    ]
    ctx = build(found, budget=500, counter=CL100K)
    assert ctx.kept == ["summary:7", "turn:2"]
    assert ctx.explanation[1].reason == "dropped: covered by summary:7 which is kept"


# -- placement --------------------------------------------------------------------------


def test_critical_items_open_and_close_the_prompt() -> None:
    rng = random.Random(5)
    found = booking() + [
        Candidate(f"memory:{n}", rng.choice(["longterm", "graph", "summary"]), text, rng.random())
        for n, text in enumerate(ENGLISH + CHINESE)
    ]
    rng.shuffle(found)
    ctx = build(found, budget=2000, counter=CL100K)
    lines = ctx.prompt.splitlines()
    assert lines[:5] == [
        "Task state:",
        "Book a flight Paris -> Tokyo; date: missing",
        "",
        "Key entities:",
        "seat: 12A",
    ]
    assert lines[-1] == "user: friday, please"
    assert lines[-2] == "assistant: Which day?"  # recent turns in time order


def test_the_best_blocks_and_items_sit_nearest_the_ends() -> None:
    found = [
        Candidate("task:state", "task", "Plan a trip", 1.0, critical=True),
        Candidate("summary:1", "summary", "They talked about Lisbon.", 0.9),
        Candidate("memory:1", "longterm", "Lisbon has trams.", 0.8),
        Candidate("memory:2", "longterm", "Porto has wine.", 0.2),
        Candidate("graph:1", "graph", "Lisbon is in Portugal.", 0.1),
        turn(5, "user: what about Lisbon?", critical=True),
    ]
    ctx = build(found, budget=500, counter=CL100K)
    blocks = [block.splitlines()[0] for block in ctx.prompt.split("\n\n")]
    assert blocks == [
        "Task state:",
        "Earlier in the conversation:",  # best of the middle: nearest the start
        "Related facts:",  # worst: in the middle
        "From memory:",  # second best: nearest the end
        "Recent turns:",
    ]
    assert "From memory:\nPorto has wine.\nLisbon has trams.\n\n" in ctx.prompt  # best last


def test_recent_turns_are_in_time_order_whatever_their_scores() -> None:
    found = [turn(3, "c", score=0.9), turn(1, "a", score=0.1), turn(2, "b", score=0.5)]
    assert build(found, budget=100, counter=CL100K).prompt == "Recent turns:\na\nb\nc\n"


def test_layer_weights_change_the_ranking() -> None:
    found = [
        Candidate("memory:1", "longterm", "Lisbon has trams.", 0.8),
        Candidate("graph:1", "graph", "Lisbon is in Portugal.", 0.5),
    ]
    one = max(
        CL100K.count("From memory:\nLisbon has trams.\n"),
        CL100K.count("Related facts:\nLisbon is in Portugal.\n"),
    )
    assert build(found, budget=one, counter=CL100K).kept == ["memory:1"]
    favoured = build(found, budget=one, counter=CL100K, weights={"graph": 2.0})
    assert favoured.kept == ["graph:1"]
    assert favoured.explanation[0].reason.startswith("dropped: over budget")


# -- tiny budgets -----------------------------------------------------------------------


def test_a_budget_below_the_critical_items_keeps_those_that_fit_in_rank_order() -> None:
    found = booking()
    task_only = CL100K.count("Task state:\nBook a flight Paris -> Tokyo; date: missing\n")
    ctx = build(found, budget=task_only, counter=CL100K)
    assert ctx.prompt == "Task state:\nBook a flight Paris -> Tokyo; date: missing\n"
    assert ctx.tokens == task_only
    assert reasons(ctx)["entity:seat/entity"].startswith("dropped: critical, over budget (needs ")
    assert reasons(ctx)["turn:9/recent"].startswith("dropped: critical, over budget (needs ")
    # too small for a long task state: the smaller critical items still go in
    long_task = "Book a flight; " + ", ".join(
        f"leg {n}: city {n} to city {n + 1}" for n in range(9)
    )
    found[1] = Candidate("task:state", "task", long_task, 1.0, critical=True)
    rest = "Key entities:\nseat: 12A\n\nRecent turns:\nuser: friday, please\n"
    budget = CL100K.count(rest)
    ctx = build(found, budget=budget, counter=CL100K)
    assert (ctx.prompt, ctx.kept) == (rest, ["turn:9", "entity:seat"])
    needs = CL100K.count(f"Task state:\n{long_task}\n")
    assert reasons(ctx)["task:state/task"] == (
        f"dropped: critical, over budget (needs {needs} tokens, {budget} left)"
    )


def test_a_zero_budget_keeps_nothing_and_says_why() -> None:
    ctx = build(booking(), budget=0, counter=CL100K)
    assert (ctx.prompt, ctx.tokens, ctx.kept) == ("", 0, [])
    assert all(
        d.reason.startswith(("dropped: critical, over budget", "dropped: over budget"))
        or d.reason.startswith(("dropped: duplicate", "dropped: near-duplicate"))
        for d in ctx.explanation
    )


# -- determinism ------------------------------------------------------------------------


def test_the_same_input_gives_the_same_context_whatever_its_order() -> None:
    found = booking() + [
        Candidate(f"memory:{n}", "longterm", t, 0.5) for n, t in enumerate(ENGLISH)
    ]
    first = build(found, budget=150, counter=CL100K)
    assert build(found, budget=150, counter=CL100K) == first
    shuffled = list(found)
    random.Random(3).shuffle(shuffled)
    again = build(shuffled, budget=150, counter=CL100K)
    assert again.prompt == first.prompt
    assert sorted(again.kept) == sorted(first.kept)


def test_the_context_does_not_depend_on_the_hash_seed() -> None:
    script = textwrap.dedent(
        """
        import sys
        sys.path.insert(0, sys.argv[1])
        from test_context import CHINESE, ENGLISH, booking, CL100K
        from relaystate.memory.context import Candidate, build
        found = booking() + [
            Candidate(f"m:{n}", "longterm", t, 0.5) for n, t in enumerate(ENGLISH + CHINESE)
        ]
        ctx = build(found, budget=200, counter=CL100K)
        print(repr((ctx.prompt, [d.reason for d in ctx.explanation])))
        """
    )
    outputs = set()
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        run = subprocess.run(
            [sys.executable, "-c", script, str(Path(__file__).parent)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        outputs.add(run.stdout)
    assert len(outputs) == 1


# -- token counters ---------------------------------------------------------------------

_OFFLINE = """
import os, socket, sys, time
def refuse(*args, **kwargs):
    raise OSError("network disabled by the test")
socket.socket.connect = refuse
socket.create_connection = refuse
socket.getaddrinfo = refuse
from pathlib import Path
from relaystate.memory.tokens import tiktoken_counter, TokenizerUnavailable
directory = Path(sys.argv[1])
started = time.monotonic()
try:
    counter = tiktoken_counter(directory=directory)
except TokenizerUnavailable as exc:
    print("unavailable", round(time.monotonic() - started, 1), exc)
    counter = tiktoken_counter(directory=directory)  # placed again
print(counter.name, counter.count("hello world, 你好世界"), sorted(os.listdir(directory)))
"""


def _offline(directory: Path) -> str:
    env = {
        **os.environ,
        "HTTPS_PROXY": "http://10.255.255.1:9",
        "HTTP_PROXY": "http://10.255.255.1:9",
    }
    env.pop("TIKTOKEN_CACHE_DIR", None)
    run = subprocess.run(
        [sys.executable, "-c", _OFFLINE, str(directory)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    return run.stdout


def test_cl100k_loads_with_the_network_refused(tmp_path: Path) -> None:
    url = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
    name = hashlib.sha1(url.encode()).hexdigest()
    expected = CL100K.count("hello world, 你好世界")
    assert _offline(tmp_path) == f"cl100k_base {expected} {[name]}\n"


def test_a_corrupt_cached_file_fails_at_once_and_is_replaced(tmp_path: Path) -> None:
    url = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
    cached = tmp_path / hashlib.sha1(url.encode()).hexdigest()
    shipped = tokens._shipped("cl100k_base")
    assert shipped is not None
    cached.write_bytes(b"x" * shipped.stat().st_size)  # same size, wrong content
    out = _offline(tmp_path).splitlines()
    assert out[0].startswith("unavailable 0.")
    assert "tiktoken tried to download https://" in out[0]
    assert out[1].startswith("cl100k_base ")
    assert cached.read_bytes() == shipped.read_bytes()


def test_the_cache_directory_is_relaystates_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(tokens.CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", "/somewhere")
    assert tokens.cache_dir() == Path("/somewhere/relaystate/tiktoken")
    monkeypatch.setenv(tokens.CACHE_ENV, "/elsewhere")
    assert tokens.cache_dir() == Path("/elsewhere")


def test_an_encoding_no_package_ships_is_missing_not_downloaded(tmp_path: Path) -> None:
    with pytest.raises(TokenizerMissing, match="does not download it"):
        tiktoken_counter("o200k_base", directory=tmp_path)
    with pytest.raises(TokenizerMissing, match="unknown encoding"):
        tiktoken_counter("gpt2", directory=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_without_tiktoken_the_default_counter_is_the_approximation() -> None:
    script = (
        "import sys; sys.modules['tiktoken'] = None\n"
        "from relaystate.memory.tokens import default_counter\n"
        "print(default_counter().name)"
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert run.stdout == "approx\n"
    assert default_counter().name == "cl100k_base"


def test_special_tokens_in_text_count_as_plain_text() -> None:
    assert CL100K.count("<|endoftext|>") > 1


@pytest.mark.parametrize("counter", [CL100K, ApproxCounter()], ids=["cl100k", "approx"])
def test_remembered_counts_are_the_counts(counter: TokenCounter) -> None:
    """Counts are remembered per text (short ones): asked again, or of a text too long to
    remember, they are what counting afresh gives."""
    short = "Book the aisle seat, not the window: 12 March."
    long = short * (tokens.CACHED_CHARS // len(short) + 2)
    for text in (short, short, long, long, short + "!"):
        assert counter.count(text) == _fresh(counter, text)


def _fresh(counter: TokenCounter, text: str) -> int:
    if isinstance(counter, ApproxCounter):
        return tokens._approx(text)
    assert isinstance(counter, TiktokenCounter)
    return len(counter._encoding.encode_ordinary(text))


@pytest.mark.parametrize("texts", [ENGLISH, CHINESE], ids=["english", "chinese"])
def test_the_approximation_rarely_counts_less_than_cl100k(texts: list[str]) -> None:
    approx = ApproxCounter()
    exact = [CL100K.count(text) for text in texts]
    rough = [approx.count(text) for text in texts]
    assert 1.0 <= sum(rough) / sum(exact) <= 1.4
    for text, e, r in zip(texts, exact, rough, strict=True):
        assert r >= e - max(1, e // 10), text
    assert approx.count("") == 0


class _Superadditive:
    """A counter whose whole exceeds the sum of its parts, so the builder's estimate falls
    short and it must cut again after counting the rendered prompt."""

    name = "superadditive"

    def count(self, text: str) -> int:
        return len(text) + len(text) ** 2 // 500


@settings(max_examples=200, deadline=None)
@given(found=candidates(), budget=st.integers(0, 600))
def test_the_budget_holds_even_when_parts_undercount_the_whole(
    found: list[Candidate], budget: int
) -> None:
    counter = _Superadditive()
    ctx = build(found, budget=budget, counter=counter)
    assert counter.count(ctx.prompt) == ctx.tokens <= budget


def test_a_prompt_that_counts_more_than_its_parts_is_cut_again() -> None:
    found = [Candidate(f"m:{n}", "longterm", f"fact {n} " * 4, 1.0 - n / 100) for n in range(40)]
    counter = _Superadditive()
    ctx = build(found, budget=600, counter=counter)
    assert counter.count(ctx.prompt) == ctx.tokens <= 600
    # by the parts' counts, one more would have fitted: the rendered prompt was counted
    kept = len(ctx.kept)
    parts = counter.count("From memory:\n") + sum(
        counter.count(f"{c.text.strip()}\n") for c in found[: kept + 1]
    )
    assert parts <= 600
    assert ctx.kept == [f"m:{n}" for n in range(kept)]  # still the best ones
