"""write_automation_script's `main` for the chore `average`: the mean of `'{value}'` (two decimals) and the
number of rows averaged per `'{group}'`, highest mean first (ties by group), rows with an empty value skipped;
the output's column names are the request's. It takes the place of the stand-in `main` in the frame
(write_automation_script.py), whose `load`, `save` and `defaultdict` it uses."""
# ruff: noqa: F821 (load, save and defaultdict are the frame's)

def main(src, dst):
    _, rows = load(src)
    sums, counts = defaultdict(float), defaultdict(int)
    for row in rows:
        value = (row.get('{value}') or "").strip()
        if not value:
            continue
        key = (row.get('{group}') or "").strip()
        sums[key] += float(value)
        counts[key] += 1
    avg = {k: f"{sums[k] / counts[k]:.2f}" for k in sums}
    order = sorted(avg, key=lambda k: (-float(avg[k]), k))
    save(dst, ['{group}', '{average}', '{count}'], [[k, avg[k], counts[k]] for k in order])
