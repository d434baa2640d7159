"""write_automation_script's `main` for the chore `latest`: per `'{group}'`, the latest `'{date}'` and its
`'{value}'` (the later row in the file on a tie), in order of group, rows without a value or a date skipped;
the output's column names are the request's. It takes the place of the stand-in `main` in the frame
(write_automation_script.py), whose `load`, `save` and `defaultdict` it uses."""
# ruff: noqa: F821 (load, save and defaultdict are the frame's)

def main(src, dst):
    _, rows = load(src)
    last = {}
    for row in rows:
        value = (row.get('{value}') or "").strip()
        day = (row.get('{date}') or "").strip()
        if not value or not day:
            continue
        key = (row.get('{group}') or "").strip()
        if key not in last or day >= last[key][0]:
            last[key] = [day, value]
    save(dst, ['{group}', '{date}', '{value}'], [[k, *last[k]] for k in sorted(last)])
