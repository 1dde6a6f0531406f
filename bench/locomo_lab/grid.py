"""Small a-priori grid for the leave-one-conversation-out check of the recommended family
(rec, e5win fixed at 1): each held-out conversation is scored with the configuration that is best on
the other four (objective: recall_any@10 + multi-hop recall_all@10)."""
import itertools

GRID = {}
for spk, date, sess, e5, tm in itertools.product((0.25, 0.5, 1.0), (0.5, 1.0), (0.5, 1.0),
                                                 (1.0, 2.0), (0.0, 0.3)):
    GRID[f"spk{spk}_date{date}_sess{sess}_e5{e5}_time{tm}"] = {
        "kw": 2.0, "e5": e5, "win": 1.0, "spk": spk, "date": date, "sess": sess,
        "sess_e5": sess, "time": tm, "e5win": 1.0}
