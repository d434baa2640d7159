"""clean_data's program: the date formats of flavor.messy_date, money without signs or separators, exact duplicates
gone once normalised (the clean rows are distinct by construction), the excluded name's rows gone, sorted on all
four columns. The column names and the excluded name are constants of the request."""
# ruff: noqa: E401, I001, UP031 (written compactly, as a small model would copy it)

import os, csv, datetime as dt
SRC, OUT = '{src}', '{out}'
os.makedirs(os.path.dirname(OUT) or '.', exist_ok=True)
COLS = '{cols}'
SKIP = '{skip}'
def day(s):
    for f in ('%Y-%m-%d', '%d/%m/%Y', '%b %d, %Y', '%d.%m.%Y', '%Y/%m/%d'):
        try:
            return dt.datetime.strptime(s.strip(), f).date().isoformat()
        except ValueError:
            pass
    raise ValueError(s)
rows = set()
for r in csv.DictReader(open(SRC, newline='')):
    a = r[COLS[3]].strip().replace('$', '').replace(',', '')
    if a and r[COLS[1]].strip() not in SKIP:
        rows.add((day(r[COLS[0]]), r[COLS[1]].strip(), r[COLS[2]].strip(), '%.2f' % float(a)))
with open(OUT, 'w', newline='') as f:
    csv.writer(f, lineterminator='\n').writerows([COLS] + sorted(rows))
print('wrote', len(rows), 'rows to', OUT)
