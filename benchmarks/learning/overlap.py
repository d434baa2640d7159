#!/usr/bin/env python3
"""`overlap.py DEMOS TEST_TASKS`: how many held-out tasks could be solved by recall: the share whose reference
action sequence (the oracle teacher's tool calls on the task, as the student would have to emit them) appears
verbatim among the training demonstrations DEMOS (a `clawgym filter` output), whole or in part (item (d) of the
generalization experiment, which computes it for its own sets; this applies it to any earlier experiment's
work directory, e.g. the learning experiment's `runs/learning/sft.jsonl` and `runs/learning/test_tasks.jsonl`).

Rolls the oracle out on TEST_TASKS (in --work), filters its verified trajectories to conversations like the
demonstrations', and prints the rates as JSON (per family too); --out writes it to a file as well.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import generalization as g  # noqa: E402

from clawgym.core.atomic import write_text  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("demos", type=Path, help="The training demonstrations (clawgym filter's JSONL).")
    ap.add_argument("test_tasks", type=Path, help="The held-out tasks (tasks.jsonl).")
    ap.add_argument("--work", type=Path, default=Path("runs/overlap"), help="Where the oracle's run goes (resumed).")
    ap.add_argument("--out", type=Path, default=None, help="Also write the JSON here.")
    ap.add_argument("--sandbox", default="bwrap")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    args = ap.parse_args(argv)

    from clawgym.sandbox import get_backend
    from clawgym.train.filter import FilterOptions, filter_to_file

    opts = argparse.Namespace(max_turns=4, max_tokens=768, concurrency=13, eval_precision="auto", jobs=args.jobs)
    g.run(str(args.test_tasks), "oracle", "oracle", args.work / "oracle", opts, get_backend(args.sandbox))
    test_demos = args.work / "demos_test.jsonl"
    filter_to_file([args.work / "oracle"], test_demos, FilterOptions(min_score=1.0))
    res = {"demos": str(args.demos), "test_tasks": str(args.test_tasks),
           **g.overlap(g.demos(args.demos), g.demos(test_demos), g.family_of(args.test_tasks))}
    text = json.dumps(res, indent=2)
    print(text)
    if args.out:
        write_text(args.out, text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
