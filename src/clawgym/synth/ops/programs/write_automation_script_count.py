"""write_automation_script's `main` for the chore `count`: the number of rows per `'{group}'`, most frequent
first (ties by group); the output's column names are the request's. It takes the place of the stand-in `main`
in the frame (write_automation_script.py), whose `load`, `save` and `defaultdict` it uses."""
# ruff: noqa: F821 (load, save and defaultdict are the frame's)

def main(src, dst):
    _, rows = load(src)
    counts = defaultdict(int)
    for row in rows:
        counts[(row.get('{group}') or "").strip()] += 1
    order = sorted(counts, key=lambda k: (-counts[k], k))
    save(dst, ['{group}', '{count}'], [[k, counts[k]] for k in order])
