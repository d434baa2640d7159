"""write_automation_script's `main` for the chore `filter`: the rows whose `'{value}'` is at least the THRESHOLD
argument, every column, in the input's order; the output's column names are the request's. It takes the place
of the stand-in `main` in the frame (write_automation_script.py), whose `load`, `save` and `defaultdict` it
uses."""
# ruff: noqa: F821 (load, save and defaultdict are the frame's)

def main(src, dst, threshold):
    header, rows = load(src)
    keep = []
    for row in rows:
        value = (row.get('{value}') or "").strip()
        if value and float(value) >= float(threshold):
            keep.append([row.get(h, "") for h in header])
    save(dst, header, keep)
