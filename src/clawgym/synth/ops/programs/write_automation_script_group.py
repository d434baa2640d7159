"""write_automation_script's `main` for the chore `group`: the total of `'{value}'` and the number of rows added
up per `'{group}'`, largest total first (ties by group), rows with an empty value skipped; the output's column
names are the request's. It takes the place of the stand-in `main` in the frame (write_automation_script.py),
whose `load`, `save` and `defaultdict` it uses."""
# ruff: noqa: F821 (load, save and defaultdict are the frame's)

def main(src, dst):
    _, rows = load(src)
    totals, counts = defaultdict(float), defaultdict(int)
    for row in rows:
        value = (row.get('{value}') or "").strip()
        if not value:
            continue
        key = (row.get('{group}') or "").strip()
        totals[key] += float(value)
        counts[key] += 1
    order = sorted(totals, key=lambda k: (-round(totals[k], 2), k))
    save(dst, ['{group}', '{total}', '{count}'], [[k, f"{totals[k]:.2f}", counts[k]] for k in order])
