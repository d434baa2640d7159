"""convert_format's program from JSON or YAML records to a CSV: the columns in order of first appearance."""
# ruff: noqa: E401, I001 (written compactly, as a small model would copy it)

import os, csv, json, yaml
SRC, OUT = '{src}', '{out}'
os.makedirs(os.path.dirname(OUT) or '.', exist_ok=True)
recs = json.load(open(SRC)) if SRC.endswith('.json') else yaml.safe_load(open(SRC))
head = []
for r in recs:
    head += [k for k in r if k not in head]
def cell(v):
    if v is None:
        return ''
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v
with open(OUT, 'w', newline='') as f:
    w = csv.writer(f, lineterminator='\n')
    w.writerow(head)
    w.writerows([cell(r.get(k)) for k in head] for r in recs)
print('wrote', len(recs), 'rows to', OUT)
