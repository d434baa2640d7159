"""write_automation_script's `main` for the chore `month`: the total of `'{value}'` and the number of rows added
up per calendar month (YYYY-MM) of `'{date}'`, oldest month first, rows with an empty value skipped; the
output's column names are the request's. It takes the place of the stand-in `main` in the frame
(write_automation_script.py), whose `load`, `save` and `defaultdict` it uses."""
# ruff: noqa: F821 (load, save and defaultdict are the frame's)

def main(src, dst):
    _, rows = load(src)
    totals, counts = defaultdict(float), defaultdict(int)
    for row in rows:
        value = (row.get('{value}') or "").strip()
        if not value:
            continue
        month = (row.get('{date}') or "").strip()[:7]
        totals[month] += float(value)
        counts[month] += 1
    save(dst, ['{month}', '{total}', '{count}'], [[m, f"{totals[m]:.2f}", counts[m]] for m in sorted(totals)])
