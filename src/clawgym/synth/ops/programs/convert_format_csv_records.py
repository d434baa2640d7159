"""convert_format's program from a CSV to JSON or YAML records: the numeric columns found the way
numeric_columns() finds them, the output format by extension."""
# ruff: noqa: E401, I001 (written compactly, as a small model would copy it)

import os, csv, json, re, yaml
SRC, OUT = '{src}', '{out}'
os.makedirs(os.path.dirname(OUT) or '.', exist_ok=True)
rows = list(csv.reader(open(SRC, newline='')))
head = rows[0]
rows = [r + [''] * (len(head) - len(r)) for r in rows[1:] if r]
def isnum(v):
    return re.fullmatch(r'-?(0|[1-9]\d*)(\.\d+)?', v.strip())
num = [i for i in range(len(head)) if any(r[i].strip() for r in rows)
       and all(isnum(r[i]) for r in rows if r[i].strip())]
def value(i, v):
    if i not in num:
        return v
    if not v.strip():
        return None
    return float(v) if '.' in v else int(v)
recs = [{h: value(i, r[i]) for i, h in enumerate(head)} for r in rows]
with open(OUT, 'w') as f:
    if OUT.endswith('.json'):
        json.dump(recs, f, indent=2)
    else:
        yaml.safe_dump(recs, f, sort_keys=False)
print('wrote', len(recs), 'records to', OUT)
