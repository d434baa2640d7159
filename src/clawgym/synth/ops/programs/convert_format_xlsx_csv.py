"""convert_format's program from one sheet of a workbook to a CSV."""
# ruff: noqa: E401, I001 (written compactly, as a small model would copy it)

import os, csv, openpyxl
SRC, SHEET, OUT = '{src}', '{sheet}', '{out}'
os.makedirs(os.path.dirname(OUT) or '.', exist_ok=True)
rows = list(openpyxl.load_workbook(SRC)[SHEET].iter_rows(values_only=True))
def cell(v):
    if v is None:
        return ''
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v
with open(OUT, 'w', newline='') as f:
    csv.writer(f, lineterminator='\n').writerows([cell(v) for v in r] for r in rows)
print('wrote', len(rows) - 1, 'rows to', OUT)
