"""How often does the conversation engine understand people as they really talk? (issue 8)

Run: ``python bench/understanding.py [--set dev|dev2|dev3|heldout|all] [--json PATH]``
(``--show-failures N`` lists N wrong fields).
Each case of ``bench/understanding/<set>.json`` (format: ``notes/understanding-format.md``) is
one user's conversation with the demo agents, replayed turn by turn through
``Conversation(runtime).handle`` in a fresh in-memory runtime with its own ledger and the
case's pinned clock (``RELAYSTATE_NOW``). Every expected key of a turn is one scored field;
the report gives field accuracy overall, by language, by category, by both, by field, lists
every wrong field, and times the turns (p50/p95, and the first turn of a fresh process,
imports included, which is what ``relaystate say`` pays).

A benchmark, not a test: it exits 0 whatever the score, and a set whose file does not exist
yet (``heldout.json``) is skipped with a note. ``--quick`` (from ``make bench``) is accepted
and changes nothing; other options meant for the other bench scripts are ignored.

One extension of the format: an item of ``reply_has`` may itself be a list of alternatives
(``[["周三", "星期三"]]``), any of which satisfies that field.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchlib import HERE, facts_line, machine_facts, make_console, pct, write_json
from rich.console import Console
from rich.table import Table

from relaystate import Runtime, Scope, open_store
from relaystate.conversation import Conversation
from relaystate.demo import templates
from relaystate.demo.after_sales import MODELS

SETS_DIR = HERE / "understanding"
SET_NAMES = ("dev", "dev2", "dev3", "heldout", "users", "users2", "users3", "sample")
"""dev, dev2, dev3 (the demo agents) and users (six templates of bench/understanding/agents.py,
declared as a new user would) are tuned on; heldout and users2 are only ever scored, and so is
sample: twenty conversations in the style of a held-out set, read in place from
``UNDERSTANDING_SAMPLE`` (default /work/shared/data/understanding-examples.json), never copied."""
SAMPLE = Path(
    os.environ.get("UNDERSTANDING_SAMPLE", "/work/shared/data/understanding-examples.json")
)
DEFAULT_NOW = "2026-11-29T10:00:00"
"""A Sunday; the format's default clock."""
SCOPE = Scope.user("u")
FIRST_TURN_RUNS = 5
FIRST_TURN_TEXT = "买张明天去成都的票"

EXPECT_KEYS = {
    "task",
    "slots",
    "absent",
    "same_task_as",
    "new_task",
    "open_tasks",
    "status",
    "stage",
    "reply_lang",
    "reply_has",
    "reply_lacks",
}
CASE_KEYS = {"id", "lang", "category", "now", "note", "turns"}
CATEGORIES = ("routing", "slot_values", "dates", "choices", "corrections", "language", "recovery")
LANGS = ("zh", "en", "mixed")

# -- what "entirely in one language" means ------------------------------------------------------
CJK = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]")
LATIN_RUN = re.compile(r"[A-Za-z]{3,}")
EXEMPT_IN_ZH = [
    re.compile(r"\b[A-Za-z]{2,5}-\d{3,}\b"),  # order and reference numbers (ORD-10001, REF-00001)
    re.compile(r"\b[A-Z]{2}\d{2,4}\b"),  # flight codes (RS827)
    # Brand and model names have no Chinese form a reply must use (Pixel 8, iPhone 15, Mate 60).
    re.compile(
        "|".join(sorted({re.escape(m.split()[0]) for m in MODELS}, key=len, reverse=True)),
        re.IGNORECASE,
    ),
]


def foreign_words(reply: str, lang: str) -> list[str]:
    """What in ``reply`` is not in ``lang``: Latin runs of 3+ letters for zh, CJK for en."""
    if lang == "en":
        return CJK.findall(reply)
    text = reply
    for pattern in EXEMPT_IN_ZH:
        text = pattern.sub(" ", text)
    return LATIN_RUN.findall(text)


# -- cases and results ----------------------------------------------------------------------
@dataclass
class Field:
    """One scored expectation of one turn."""

    set: str
    case: str
    lang: str
    category: str
    turn: int
    say: str
    name: str
    expected: Any
    got: Any
    ok: bool
    task_type: str | None = None
    """The Task type the turn was expected to touch (for the slot's kind)."""


def _task_type(expect: dict[str, Any], task: Any) -> str | None:
    wanted = expect.get("task")
    if isinstance(wanted, str):
        return wanted
    return task.type if task is not None else None


@dataclass
class CaseRun:
    set: str
    id: str
    lang: str
    category: str
    turns: int
    fields: list[Field] = field(default_factory=list)
    latencies_ms: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


@dataclass
class Set:
    """One set's cases and the templates they talk to (the demo agents unless the file names
    a ``templates`` factory, ``module:function`` in bench/understanding/)."""

    name: str
    cases: list[dict[str, Any]]
    templates: Any = templates
    first_seen: dict[str, Any] | None = None


def load_set(name: str, console: Console) -> Set | None:
    """One set, or None (with a note) when its file is missing or unreadable."""
    if name == "sample":
        return _sample(console)
    path = SETS_DIR / f"{name}.json"
    if not path.exists():
        console.print(f"[yellow]note:[/] {path.relative_to(HERE.parent)} does not exist: skipped")
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        cases = data["cases"]
        factory = _factory(data["templates"]) if "templates" in data else templates
    except (ValueError, KeyError, ImportError, AttributeError) as exc:
        console.print(f"[red]cannot read {path}:[/] {exc}: skipped")
        return None
    for c in cases:
        for problem in lint_case(c):
            console.print(f"[yellow]note:[/] {name} {c.get('id', '?')}: {problem}")
    return Set(name, list(cases), factory, data.get("first_seen"))


def _sample(console: Console) -> Set | None:
    """The held-out style sample, in its own format (each case's final Task and slots, the
    slots it must leave empty), read as this benchmark's cases."""
    if not SAMPLE.exists():
        console.print(f"[yellow]note:[/] {SAMPLE} does not exist: sample skipped")
        return None
    data = json.loads(SAMPLE.read_text(encoding="utf-8"))
    cases = []
    for c in data["cases"]:
        turns: list[dict[str, Any]] = [{"say": t, "expect": {}} for t in c["turns"]]
        last = turns[-1]["expect"]
        last["task"], last["slots"] = c["expected"]["type"], c["expected"]["slots"]
        if c.get("not_set"):
            last["absent"] = c["not_set"]
        category = "corrections" if c.get("corrected") else "slot_values"
        cases.append(
            {
                "id": c["id"],
                "lang": c["lang"],
                "category": category,
                "now": data["now"][:19],
                "turns": turns,
            }
        )
    return Set("sample", cases)


def _factory(ref: str) -> Any:
    """``module:function`` of bench/understanding/ (the set's own templates)."""
    import importlib

    module, _, function = ref.partition(":")
    if str(SETS_DIR) not in sys.path:
        sys.path.insert(0, str(SETS_DIR))
    return getattr(importlib.import_module(module), function)


def slot_kinds(factory: Any) -> dict[str, str]:
    """task type.slot -> how the engine reads that slot (its extractor), for the by-kind table."""
    from relaystate.conversation.extract import extractor_of

    with tempfile.TemporaryDirectory() as tmp:
        found = factory(Path(tmp) / "ledger.db")
    return {f"{t.type}.{s.name}": extractor_of(s) for t in found for s in t.slots}


def lint_case(case: dict[str, Any]) -> Iterable[str]:
    """Typos in a hand-written case would silently score nothing: say so instead."""
    if unknown := set(case) - CASE_KEYS:
        yield f"unknown case keys {sorted(unknown)}"
    if case.get("category") not in CATEGORIES:
        yield f"unknown category {case.get('category')!r}"
    if case.get("lang") not in LANGS:
        yield f"unknown lang {case.get('lang')!r}"
    for i, turn in enumerate(case.get("turns", [])):
        if unknown := set(turn.get("expect", {})) - EXPECT_KEYS:
            yield f"turn {i}: unknown expect keys {sorted(unknown)}"
        back = turn.get("expect", {}).get("same_task_as")
        if back is not None and not (isinstance(back, int) and 0 <= back < i):
            yield f"turn {i}: same_task_as must name an earlier turn"


def norm(value: Any) -> str:
    return " ".join(str(value).split()).casefold()


def same_value(expected: Any, got: Any) -> bool:
    """Strings case-insensitively with spaces collapsed; numbers by value; a list = any;
    ``{"contains": [...]}`` (free text) = any of the strings inside the value."""
    if isinstance(expected, list):
        return any(same_value(e, got) for e in expected)
    if isinstance(expected, dict) and "contains" in expected:
        inside = " ".join(str(got).split()).casefold() if got is not None else ""
        return got is not None and any(norm(w) in inside for w in expected["contains"])
    if got is None or expected is None:
        return got is None and expected is None
    if isinstance(expected, bool) or isinstance(got, bool):
        return expected is got
    if isinstance(expected, int | float):
        try:
            return float(str(got).strip()) == float(expected)
        except ValueError:
            return False
    return norm(expected) == norm(got)


def contains(reply: str, wanted: Any) -> bool:
    """``reply_has``: a substring, case-insensitively; a list item = any of its alternatives."""
    if isinstance(wanted, list):
        return any(contains(reply, w) for w in wanted)
    return norm(wanted) in reply.casefold()


def run_case(
    set_name: str, case: dict[str, Any], workdir: Path, factory: Any = templates
) -> CaseRun:
    """Replay one case from an empty store and score every expected field of every turn."""
    os.environ["RELAYSTATE_NOW"] = case.get("now") or DEFAULT_NOW
    ledger = Path(tempfile.mkdtemp(prefix=f"{case['id']}-", dir=workdir)) / "ledger.db"
    runtime = Runtime(open_store("memory://"), factory(ledger))
    conversation = Conversation(runtime)
    run = CaseRun(set_name, case["id"], case["lang"], case["category"], len(case["turns"]))
    touched: list[str | None] = []
    for index, turn in enumerate(case["turns"]):
        before = {t.id for t in runtime.tasks(SCOPE, limit=10_000)}
        session = turn.get("session") or "s1"
        error: str | None = None
        started = time.perf_counter()
        try:
            result = conversation.handle(SCOPE, turn["say"], session)
        except Exception as exc:  # a crash is a wrong answer on every field of the turn
            result = None
            error = f"error: {type(exc).__name__}: {exc}"
            run.errors.append(f"turn {index}: {error}")
        run.latencies_ms.append((time.perf_counter() - started) * 1e3)
        task = result.state.task if result is not None and result.state is not None else None
        touched.append(task.id if task else None)
        observed = {
            "reply": result.reply if result is not None else "",
            "task": task,
            "new": task is not None and task.id not in before,
            "open": len(runtime.open_tasks(SCOPE)) if error is None else None,
        }
        for name, expected, got, ok in score_turn(turn.get("expect", {}), observed, touched):
            run.fields.append(
                Field(
                    set_name,
                    case["id"],
                    case["lang"],
                    case["category"],
                    index,
                    turn["say"],
                    name,
                    expected,
                    error or got,
                    ok and error is None,
                    _task_type(turn.get("expect", {}), task),
                )
            )
    return run


def score_turn(
    expect: dict[str, Any], seen: dict[str, Any], touched: list[str | None]
) -> Iterable[tuple[str, Any, Any, bool]]:
    """(field, expected, got, right) for each expected key of one turn."""
    task = seen["task"]
    slots: dict[str, Any] = dict(task.slots) if task is not None else {}
    reply: str = seen["reply"]
    short = reply if len(reply) <= 160 else reply[:157] + "..."
    if "task" in expect:
        got = task.type if task is not None else None
        yield "task", expect["task"], got, same_value(expect["task"], got)
    for slot, expected in expect.get("slots", {}).items():
        got = slots.get(slot)
        yield f"slots.{slot}", expected, got, same_value(expected, got)
    for slot in expect.get("absent", []):
        got = slots.get(slot)
        yield f"absent.{slot}", None, got, got is None
    if "same_task_as" in expect:
        earlier = touched[expect["same_task_as"]] if expect["same_task_as"] < len(touched) else None
        got_id = touched[-1]
        if earlier is None:
            got = f"turn {expect['same_task_as']} touched no task"
        elif got_id is None:
            got = "no task"
        else:
            got = "the same task" if got_id == earlier else f"another task ({got_id[:8]})"
        yield (
            "same_task_as",
            f"turn {expect['same_task_as']}'s task",
            got,
            earlier is not None and got_id == earlier,
        )
    if "new_task" in expect:
        yield "new_task", expect["new_task"], seen["new"], seen["new"] is expect["new_task"]
    if "open_tasks" in expect:
        got = seen["open"]
        yield "open_tasks", expect["open_tasks"], got, got == expect["open_tasks"]
    if "status" in expect:
        got = str(task.status) if task is not None else None
        yield "status", expect["status"], got, same_value(expect["status"], got)
    if "stage" in expect:
        got = task.stage if task is not None else None
        yield "stage", expect["stage"], got, same_value(expect["stage"], got)
    if "reply_lang" in expect:
        foreign = foreign_words(reply, expect["reply_lang"])
        got = f"{sorted(set(foreign))} in: {short}" if foreign else expect["reply_lang"]
        yield "reply_lang", expect["reply_lang"], got, not foreign and bool(reply)
    for wanted in expect.get("reply_has", []):
        label = "|".join(wanted) if isinstance(wanted, list) else wanted
        yield f"reply_has[{label}]", wanted, short, contains(reply, wanted)
    for unwanted in expect.get("reply_lacks", []):
        yield f"reply_lacks[{unwanted}]", f"not {unwanted!r}", short, not contains(reply, unwanted)


# -- the first turn of a fresh process --------------------------------------------------------
FIRST_TURN_CHILD = """
import time
import traceback
started = time.perf_counter()
import json, sys, tempfile
from pathlib import Path
from relaystate import Runtime, Scope, open_store
from relaystate.conversation import Conversation
from relaystate.demo import templates
imported = time.perf_counter()
ledger = Path(tempfile.mkdtemp(prefix="relaystate-understanding-")) / "ledger.db"
runtime = Runtime(open_store("memory://"), templates(ledger))
turn = Conversation(runtime).handle(Scope.user("u"), sys.argv[1], "s1")
done = time.perf_counter()
print(json.dumps({"import_ms": (imported - started) * 1e3, "turn_ms": (done - imported) * 1e3,
                  "task": turn.state.task.type if turn.state else None}))
"""


def first_turns(runs: int) -> dict[str, Any]:
    """Wall time of a fresh interpreter that imports the engine and answers one message,
    with byte code cached as an installed package has it (the first run writes it)."""
    env = {**os.environ, "RELAYSTATE_NOW": DEFAULT_NOW}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    walls, imports, turns = [], [], []
    for _ in range(runs):
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", FIRST_TURN_CHILD, FIRST_TURN_TEXT],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        walls.append((time.perf_counter() - started) * 1e3)
        if done.returncode != 0:
            return {"error": done.stderr.strip().splitlines()[-1:] or ["failed"]}
        child = json.loads(done.stdout.strip().splitlines()[-1])
        imports.append(child["import_ms"])
        turns.append(child["turn_ms"])
    return {
        "runs": runs,
        "process_wall_ms_p50": statistics.median(walls),
        "import_ms_p50": statistics.median(imports),
        "first_turn_ms_p50": statistics.median(turns),
        "import_plus_turn_ms_p50": statistics.median(
            i + t for i, t in zip(imports, turns, strict=True)
        ),
    }


# -- the report ---------------------------------------------------------------------------------
def tally(fields: Iterable[Field], key: Any) -> dict[Any, list[int]]:
    """[right, total] per group."""
    out: dict[Any, list[int]] = defaultdict(lambda: [0, 0])
    for f in fields:
        group = out[key(f)]
        group[0] += f.ok
        group[1] += 1
    return dict(out)


def rate(right: int, total: int) -> str:
    return f"{100 * right / total:.1f}%" if total else "-"


def colour(right: int, total: int) -> str:
    if not total:
        return "-"
    share = right / total
    style = "green" if share >= 0.95 else "yellow" if share >= 0.8 else "red"
    return f"[{style}]{rate(right, total)}[/] [dim]({right}/{total})[/]"


def group_table(
    title: str, label: str, groups: dict[Any, list[int]], order: Iterable[Any]
) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column(label)
    table.add_column("fields", justify="right")
    table.add_column("right", justify="right")
    table.add_column("accuracy", justify="right")
    for name in order:
        if name in groups:
            right, total = groups[name]
            table.add_row(str(name), str(total), str(right), colour(right, total))
    return table


def field_kind(name: str) -> str:
    """Group fields by what they test: task, each slot, reply checks (not each substring)."""
    return name.split("[", 1)[0]


def render(
    console: Console, runs: list[CaseRun], show: int, kinds: dict[str, str] | None = None
) -> dict[str, Any]:
    fields = [f for r in runs for f in r.fields]
    right = sum(f.ok for f in fields)
    turns = sum(r.turns for r in runs)
    perfect = sum(all(f.ok for f in r.fields) for r in runs)
    case_scores = [sum(f.ok for f in r.fields) / len(r.fields) for r in runs if r.fields]
    console.print(
        f"\n[bold]Understanding[/]: {len(runs)} cases, {turns} turns, {len(fields)} fields; "
        f"field accuracy [bold]{colour(right, len(fields))}[/]; cases entirely right "
        f"{perfect}/{len(runs)}; mean case score "
        f"{100 * statistics.fmean(case_scores) if case_scores else 0:.1f}%"
    )
    by_lang = tally(fields, lambda f: f.lang)
    by_cat = tally(fields, lambda f: f.category)
    by_both = tally(fields, lambda f: (f.category, f.lang))
    by_field = tally(fields, lambda f: field_kind(f.name))
    by_set = tally(fields, lambda f: f.set)
    if len(by_set) > 1:
        console.print(group_table("By set", "set", by_set, SET_NAMES))
    console.print(group_table("By language", "lang", by_lang, LANGS))
    extra = sorted(set(by_cat) - set(CATEGORIES))
    console.print(group_table("By category", "category", by_cat, [*CATEGORIES, *extra]))

    matrix = Table(title="By category x language", title_justify="left")
    matrix.add_column("category")
    langs = [lang for lang in LANGS if lang in by_lang]
    for lang in langs:
        matrix.add_column(lang, justify="right")
    matrix.add_column("all", justify="right")
    for cat in [*CATEGORIES, *extra]:
        if cat in by_cat:
            cells = [colour(*by_both.get((cat, lang), [0, 0])) for lang in langs]
            matrix.add_row(cat, *cells, colour(*by_cat[cat]))
    console.print(matrix)
    console.print(
        group_table("By field", "field", by_field, sorted(by_field, key=lambda k: (k != "task", k)))
    )
    known = kinds or {}

    def kind_of(f: Field) -> str:
        if not f.name.startswith(("slots.", "absent.")):
            return "(not a slot)"
        return known.get(f"{f.task_type}.{f.name.split('.', 1)[1]}", "?")

    by_kind = tally(fields, kind_of)
    console.print(group_table("By slot kind (extractor)", "kind", by_kind, sorted(by_kind)))

    wrong = [f for f in fields if not f.ok]
    if wrong:
        limit = len(wrong) if show < 0 else min(show, len(wrong))
        table = Table(
            title=f"Wrong fields ({len(wrong)}; {limit} shown)",
            title_justify="left",
            show_lines=True,
        )
        for column in ("case", "turn", "user said", "field", "expected", "got"):
            table.add_column(column, overflow="fold")
        for f in wrong[:limit]:
            table.add_row(f.case, str(f.turn), f.say, f.name, shown(f.expected), shown(f.got))
        if limit:
            console.print(table)
        else:
            console.print(f"{len(wrong)} wrong fields (--show-failures N to list them)")
    errors = [f"{r.id} {e}" for r in runs for e in r.errors]
    for line in errors:
        console.print(f"[red]{line}[/]")
    return {
        "cases": len(runs),
        "turns": turns,
        "fields": len(fields),
        "right": right,
        "accuracy": right / len(fields) if fields else None,
        "cases_entirely_right": perfect,
        "by_language": {k: acc(v) for k, v in by_lang.items()},
        "by_category": {k: acc(v) for k, v in by_cat.items()},
        "by_category_language": {f"{c}/{lang}": acc(v) for (c, lang), v in by_both.items()},
        "by_field": {k: acc(v) for k, v in by_field.items()},
        "by_kind": {k: acc(v) for k, v in by_kind.items()},
        "wrong": [asdict(f) for f in wrong],
        "errors": errors,
    }


def acc(pair: list[int]) -> dict[str, Any]:
    return {"right": pair[0], "fields": pair[1], "accuracy": pair[0] / pair[1]}


def shown(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def render_latency(console: Console, runs: list[CaseRun], first: dict[str, Any]) -> dict[str, Any]:
    samples = [ms for r in runs for ms in r.latencies_ms]
    table = Table(title="Turn latency (ms)", title_justify="left")
    for column in ("what", "n", "p50", "p95", "max"):
        table.add_column(column, justify="right" if column != "what" else "left")
    out: dict[str, Any] = {}
    groups = {"all turns": samples}
    for lang in LANGS:
        group = [ms for r in runs if r.lang == lang for ms in r.latencies_ms]
        if group:
            groups[f"{lang} turns"] = group
    for name, group in groups.items():
        if group:
            p50, p95 = statistics.median(group), pct(group, 0.95)
            table.add_row(name, str(len(group)), f"{p50:.2f}", f"{p95:.2f}", f"{max(group):.2f}")
            out[name] = {"n": len(group), "p50_ms": p50, "p95_ms": p95, "max_ms": max(group)}
    if "error" in first:
        console.print(table)
        console.print(f"[red]first turn of a fresh process failed:[/] {first['error']}")
    else:
        table.add_row(
            "fresh process: import", str(first["runs"]), f"{first['import_ms_p50']:.1f}", "", ""
        )
        table.add_row(
            "fresh process: first turn",
            str(first["runs"]),
            f"{first['first_turn_ms_p50']:.1f}",
            "",
            "",
        )
        table.add_row(
            "fresh process: wall (python -c)",
            str(first["runs"]),
            f"{first['process_wall_ms_p50']:.1f}",
            "",
            "",
        )
        console.print(table)
        console.print(
            "Turns in one process after warm imports; 'fresh process' = a new interpreter that "
            f"imports relaystate.conversation and answers {FIRST_TURN_TEXT!r} (medians)."
        )
    return {"turns": out, "first_turn": first}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--set", choices=[*SET_NAMES, "all"], default="dev")
    parser.add_argument(
        "--lang", choices=LANGS, help="only the cases in this language (for a quick look)"
    )
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    parser.add_argument(
        "--show-failures", type=int, default=100, metavar="N", help="wrong fields to list (-1: all)"
    )
    parser.add_argument("--quick", action="store_true", help="accepted; changes nothing")
    args, ignored = parser.parse_known_args(argv)

    console = make_console(200)
    started = time.perf_counter()
    facts = machine_facts()
    console.print(facts_line(facts))
    if ignored:
        console.print(f"[dim]ignored (for the other bench scripts): {' '.join(ignored)}[/]")
    names = SET_NAMES if args.set == "all" else (args.set,)
    runs: list[CaseRun] = []
    kinds: dict[str, str] = {}
    saved_now = os.environ.get("RELAYSTATE_NOW")
    with tempfile.TemporaryDirectory(prefix="relaystate-understanding-") as tmp:
        try:
            for name in names:
                found = load_set(name, console)
                if found is None:
                    continue
                kinds.update(slot_kinds(found.templates))
                if found.first_seen:
                    seen = found.first_seen
                    console.print(
                        f"[dim]{name}: first seen {seen.get('accuracy')} on {seen.get('date')}"
                        f" ({seen.get('commit')})[/]"
                    )
                for case in found.cases:
                    if args.lang and case.get("lang") != args.lang:
                        continue
                    runs.append(run_case(name, case, Path(tmp), found.templates))
        finally:
            if saved_now is None:
                os.environ.pop("RELAYSTATE_NOW", None)
            else:
                os.environ["RELAYSTATE_NOW"] = saved_now
    if not runs:
        console.print("no cases to score")
        return 0
    results = render(console, runs, args.show_failures, kinds)
    results["latency"] = render_latency(console, runs, first_turns(FIRST_TURN_RUNS))
    results["sets"] = list(dict.fromkeys(r.set for r in runs))
    elapsed = time.perf_counter() - started
    console.print(f"ran in {elapsed:.1f} s")
    write_json(console, args.json, facts, results, elapsed)
    if results["errors"]:  # a turn that raised is a crash, whatever the score says
        console.print(f"[red]{len(results['errors'])} turn(s) raised: a defect[/]")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())  # a crash fails `make bench` (a low score never does)
