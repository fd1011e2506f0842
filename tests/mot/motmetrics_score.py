"""py-motmetrics' scores for a tracker's results against truth, both MOTChallenge files.

    python3 tests/mot/motmetrics_score.py GT.txt TRACKS.txt    -> one JSON line
    python3 tests/mot/motmetrics_score.py --data               -> where motmetrics keeps its sequences

As its own `apps/eval_motchallenge.py` reads them (truth lines flagged 0 left out, boxes matched
at IoU 0.5), so that `jetdetect eval --tracks` can be checked against it (tests/it/mot.rs).
"""
import json
import os
import sys

import motmetrics as mm

METRICS = ["mota", "idf1", "num_switches", "num_objects", "num_predictions", "num_matches",
           "num_misses", "num_false_positives", "idtp"]


def main():
    if sys.argv[1:] == ["--data"]:
        print(os.path.join(os.path.dirname(mm.__file__), "data"))
        return
    gt_path, ts_path = sys.argv[1:3]
    gt = mm.io.loadtxt(gt_path, fmt="mot15-2D", min_confidence=1)
    ts = mm.io.loadtxt(ts_path, fmt="mot15-2D")
    acc = mm.utils.compare_to_groundtruth(gt, ts, "iou", distth=0.5)
    row = mm.metrics.create().compute(acc, metrics=METRICS, name="seq")
    out = {m: row[m].iloc[0].item() for m in METRICS}
    out["motmetrics"] = mm.__version__
    print(json.dumps(out))


if __name__ == "__main__":
    main()
